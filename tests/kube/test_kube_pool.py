"""The warm pool (--warm-pool 2): it fills; a new conversation claims a warm
pod (relabelled to the conversation, no longer warm, and started without
waiting for a cold pod); two replicas claiming at once never get the same
pod; the pool refills."""
import threading

from harness import assert_ok
from kubehelp import (CONV_LABEL, HOSTNAME_JS, WARM_LABEL, conv_label, describe, log, log_events,
                      new_conv, result_of, wait_until)

COLD_MS = 20000  # a cold pod takes this long to become ready during the claims


def names(pods):
    return sorted(p["metadata"]["name"] for p in pods)


def wait_pool(fake, n, s, timeout=60):
    try:
        return wait_until(lambda: len(fake.warm_pods()) >= n and fake.warm_pods(), timeout,
                          f"{n} ready warm pods")
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- codepod log ---\n{log(s)}") from None


def test_new_conversation_claims_a_warm_pod_and_the_pool_refills(fake, codepods):
    s = codepods("--warm-pool", "2")
    warm = names(wait_pool(fake, 2, s))
    assert len(fake.warm_pods(ready=False)) == 2, "the pool overfilled"
    for p in fake.warm_pods():
        assert CONV_LABEL not in p["metadata"].get("labels", {}), p["metadata"]
    # From now on a cold pod would take COLD_MS to start: a claim must not wait for one.
    fake.set_schedule(running_ms=COLD_MS)
    conv = new_conv("claim")
    before = len(log_events(s))
    res = result_of(s, s.execute(HOSTNAME_JS, conversation=conv, tools=[]), 60)
    assert_ok(res), describe(res, s)
    # A cold pod could not be ready yet: running in a warm one is the proof
    # that the claim did not wait for one.
    assert res["result"] in warm, f"ran in {res['result']}, not a warm pod {warm}"
    pod = fake.pod(res["result"])
    labels = pod["metadata"]["labels"]
    assert labels.get(CONV_LABEL) == conv_label(conv), labels
    assert WARM_LABEL not in labels, labels
    assert [p["metadata"]["name"] for p in fake.conv_pods(conv)] == [res["result"]]
    # the conversation keeps its pod
    again = assert_ok(result_of(s, s.execute(HOSTNAME_JS, conversation=conv, tools=[]), 60))
    assert again["result"] == res["result"]
    # the pool refills to 2 (one old, one new), the claim itself starting the
    # refill (not the next pool pass)
    fake.set_schedule(running_ms=200)
    refilled = wait_until(lambda: len(fake.warm_pods(ready=False)) >= 2 and fake.warm_pods(ready=False),
                          60, "a replacement warm pod")
    assert len(refilled) == 2 and res["result"] not in names(refilled)
    made = [e for e in log_events(s)[before:] if e.get("event") == "kube.warm_create"]
    assert made and made[0].get("why") == "claim", made
    assert made[0]["pod"] in names(refilled), (made, names(refilled))
    wait_pool(fake, 2, s, timeout=COLD_MS / 1000 + 30)


def test_two_replicas_claiming_at_once_never_share_a_pod(fake, codepods):
    a = codepods("--warm-pool", "2", name="replica-a")
    b = codepods("--warm-pool", "2", name="replica-b")
    for round_ in range(3):
        wait_pool(fake, 2, a, timeout=60)
        ca, cb = new_conv(f"wa{round_}"), new_conv(f"wb{round_}")
        go = threading.Barrier(2)
        ids = {}

        def send(s, conv):
            go.wait()
            ids[conv] = s.execute(HOSTNAME_JS, conversation=conv, tools=[])
        ts = [threading.Thread(target=send, args=x) for x in ((a, ca), (b, cb))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        ra, rb = result_of(a, ids[ca], 60), result_of(b, ids[cb], 60)
        assert_ok(ra), describe(ra, a)
        assert_ok(rb), describe(rb, b)
        assert ra["result"] != rb["result"], f"round {round_}: both conversations ran in {ra['result']}"
        for conv, r in ((ca, ra), (cb, rb)):
            pods = fake.conv_pods(conv)
            assert [p["metadata"]["name"] for p in pods] == [r["result"]], (conv, names(pods))
            assert WARM_LABEL not in pods[0]["metadata"]["labels"]


def test_a_forced_claim_race_gets_a_409_and_claims_another_pod(fake, codepods):
    """The first claim (a PATCH with the warm pod's resourceVersion) is held
    back (kept at the server) while the other replica claims the same pod
    and runs in it: the held one, let go then, gets a real 409 Conflict and
    must claim the next warm pod."""
    a = codepods("--warm-pool", "2", name="replica-a")
    b = codepods("--warm-pool", "2", name="replica-b")
    wait_pool(fake, 2, a, timeout=60)
    fake.set_schedule(running_ms=COLD_MS)  # no fresh warm pod can help either of them
    fake.hold("a-claim", method="PATCH", path="/pods/codepod-warm-", count=1)
    ca, cb = new_conv("fa"), new_conv("fb")
    ea = a.execute(HOSTNAME_JS, conversation=ca, tools=[])
    wait_until(lambda: fake.held("a-claim"), 60, "A's claim to reach the server")
    eb = b.execute(HOSTNAME_JS, conversation=cb, tools=[])
    rb = result_of(b, eb, 60)
    fake.release("a-claim")
    ra = result_of(a, ea, 60)
    assert_ok(ra), describe(ra, a)
    assert_ok(rb), describe(rb, b)
    assert ra["result"] != rb["result"], f"both conversations ran in {ra['result']}"
    conflicts = [e for e in log_events(a) if e.get("event") == "kube.claim_conflict"]
    assert [e.get("pod") for e in conflicts] == [rb["result"]], \
        "A's claim of the pod B took never got its 409:\n" + describe(ra, a)
    for conv, r in ((ca, ra), (cb, rb)):
        assert [p["metadata"]["name"] for p in fake.conv_pods(conv)] == [r["result"]]
