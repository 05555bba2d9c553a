"""Two codepod replicas (two `serve --stdio` processes) against one API server
racing for the same new conversation: one pod, both executions succeed."""
import threading

from harness import assert_ok
from kubehelp import HOSTNAME_JS, describe, log_events, new_conv, pod_name, result_of, wait_until


def test_two_replicas_racing_for_a_new_conversation_share_one_pod(fake, codepods):
    a, b = codepods(name="replica-a"), codepods(name="replica-b")
    for round_ in range(3):
        conv = new_conv(f"race{round_}")
        go = threading.Barrier(2)
        ids = {}

        def send(s, tag):
            go.wait()
            ids[tag] = s.execute(HOSTNAME_JS, conversation=conv, tools=[])
        ts = [threading.Thread(target=send, args=(s, t)) for s, t in ((a, "a"), (b, "b"))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        ra = result_of(a, ids["a"], 60)
        rb = result_of(b, ids["b"], 60)
        assert_ok(ra), describe(ra, a)
        assert_ok(rb), describe(rb, b)
        pods = fake.conv_pods(conv)
        assert len(pods) == 1, f"round {round_}: {len(pods)} pods for one conversation: " \
            f"{[p['metadata']['name'] for p in pods]}"
        # both ran in that one pod
        assert ra["result"] == rb["result"] == pods[0]["metadata"]["name"] == pod_name(conv), (ra, rb)
        # a later execution from either replica uses it too
        again = assert_ok(result_of(b, b.execute(HOSTNAME_JS, conversation=conv, tools=[]), 60))
        assert again["result"] == pod_name(conv)
        assert [p["metadata"]["uid"] for p in fake.conv_pods(conv)] == [pods[0]["metadata"]["uid"]]


def events(s, name):
    return [e for e in log_events(s) if e.get("event") == name]


def test_a_forced_create_race_gets_a_409_and_uses_the_winners_pod(fake, codepods):
    """The first create is held back (kept at the server) while the other
    replica looks, finds nothing, creates and runs: the held one, let go
    then, gets a real 409 AlreadyExists from the API server and must use
    the winner's pod."""
    a, b = codepods(name="replica-a"), codepods(name="replica-b")
    conv = new_conv("forced")
    fake.hold("a-create", method="POST", path=r"/pods(\?|$)", count=1)
    ea = a.execute(HOSTNAME_JS, conversation=conv, tools=[])
    # The held create is the rule's one match: A's create is waiting inside
    # the server, and B starts.
    wait_until(lambda: fake.held("a-create"), 60, "A's create to reach the server")
    eb = b.execute(HOSTNAME_JS, conversation=conv, tools=[])
    rb = result_of(b, eb, 60)
    fake.release("a-create")
    ra = result_of(a, ea, 60)
    assert_ok(ra), describe(ra, a)
    assert_ok(rb), describe(rb, b)
    assert ra["result"] == rb["result"] == pod_name(conv)
    assert len(fake.conv_pods(conv)) == 1
    assert events(a, "kube.create_conflict"), "A's create never got its 409:\n" + describe(ra, a)
    assert not events(b, "kube.create_conflict"), describe(rb, b)
