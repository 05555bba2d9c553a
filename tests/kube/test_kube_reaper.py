"""The reaper: with --idle-ttl, a pod idle past the TTL is deleted (and the
conversation gets a new one next time); a pod in use is not, by this replica
or another; codepod killed with SIGKILL and restarted adopts the pods it
finds and reaps the idle ones. The reaper runs at start and then every tick
(15 s, not configurable), so these tests take a tick or two. Which pass
reaped a pod, and which pods a pass deleted, come from codepod's log
(kube.reap, with the pass number: 1 is the pass at start)."""
from harness import assert_ok
from kubehelp import (HOSTNAME_JS, describe, log, log_events, new_conv, pod_name, result_of,
                      sigkill, wait_until)

TICK = 15
IN_USE_UNTIL = "codepod.dev/in-use-until"


def ok_run(s, conv, timeout=60):
    res = result_of(s, s.execute(HOSTNAME_JS, conversation=conv, tools=[]), timeout)
    assert res["status"] == "succeeded", describe(res, s)
    return res


def uid(fake, conv):
    pods = fake.conv_pods(conv)
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    return pods[0]["metadata"]["uid"]


def wait_reaped(fake, conv, s, timeout=TICK * 2 + 10):
    try:
        wait_until(lambda: not fake.conv_pods(conv, live=False), timeout,
                   f"the idle pod of {conv} to be reaped", interval=0.25)
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- codepod log ---\n{log(s)}") from None


def wait_marks_cleared(fake, convs):
    """A pod's in-use-until is cleared a few seconds after its last execution
    (a burst of executions finds it standing): a replica killed before that
    PATCH leaves the pod marked busy, and every replica then keeps it until
    the mark expires. Wait for the clears."""
    for c in convs:
        wait_until(lambda c=c: all(IN_USE_UNTIL not in (p["metadata"].get("annotations") or {})
                                   for p in fake.conv_pods(c)),
                   30, f"the in-use mark of {c}'s pod to be cleared", interval=0.1)


def reaps(s, conv):
    """The kube.reap events naming the pod of conv."""
    return [e for e in log_events(s) if e.get("event") == "kube.reap" and e.get("pod") == pod_name(conv)]


def test_idle_pod_is_reaped_and_the_conversation_gets_a_new_one(fake, codepods):
    s = codepods("--idle-ttl", "2")
    conv = new_conv("idle")
    ok_run(s, conv)
    old = uid(fake, conv)
    wait_reaped(fake, conv, s)
    assert ok_run(s, conv)["result"] == pod_name(conv)
    assert uid(fake, conv) != old


def test_pod_in_use_is_not_reaped(fake, codepods):
    s = codepods("--idle-ttl", "2")
    idle, busy = new_conv("idle"), new_conv("busy")
    ok_run(s, idle)
    ok_run(s, busy)
    busy_uid = uid(fake, busy)
    eid = s.execute("return await tools.wait({});", conversation=busy, tools=["wait"],
                    policy={"timeoutMs": 120000})
    call = s.wait_call(eid, "wait", timeout=30)
    # make the busy pod look long unused too: only its use may save it
    fake.set_last_used(pod_name(busy), 3600)
    wait_reaped(fake, idle, s)          # a reaper pass happened
    # that pass logged every pod it deletes before the first delete went out
    assert reaps(s, idle) and not reaps(s, busy), log(s)
    assert uid(fake, busy) == busy_uid, "the pod in use was reaped"
    s.answer(call, "done")
    res = result_of(s, eid, 30)
    assert_ok(res), describe(res, s)
    assert res["result"] == "done"


def test_pod_in_use_by_another_replica_is_not_reaped(fake, codepods):
    a = codepods(name="replica-a")
    idle, busy = new_conv("idle"), new_conv("busy")
    ok_run(a, idle)
    ok_run(a, busy)
    busy_uid = uid(fake, busy)
    eid = a.execute("return await tools.wait({});", conversation=busy, tools=["wait"],
                    policy={"timeoutMs": 120000})
    call = a.wait_call(eid, "wait", timeout=30)
    # both pods now look idle for longer than B's TTL
    fake.set_last_used(pod_name(idle), 3600)
    fake.set_last_used(pod_name(busy), 3600)
    b = codepods("--idle-ttl", "2", name="replica-b")
    wait_reaped(fake, idle, b)          # B's reaper ran
    assert reaps(b, idle) and not reaps(b, busy), log(b)
    assert [p["metadata"]["uid"] for p in fake.conv_pods(busy)] == [busy_uid], \
        f"replica B reaped the pod replica A is running in\n--- B's log ---\n{log(b)}"
    a.answer(call, "done")
    res = result_of(a, eid, 30)
    assert res["status"] == "succeeded" and res["result"] == "done", describe(res, a)


def test_restart_after_sigkill_adopts_pods_and_reaps_the_idle_ones(fake, codepods):
    a = codepods("--idle-ttl", "1000", name="first")
    stale, fresh = new_conv("stale"), new_conv("fresh")
    ok_run(a, stale)
    ok_run(a, fresh)
    stale_uid, fresh_uid = uid(fake, stale), uid(fake, fresh)
    wait_marks_cleared(fake, (stale, fresh))
    sigkill(a)
    fake.set_last_used(pod_name(stale), 3600)
    b = codepods("--idle-ttl", "600", name="restarted")
    # reaped by the pass at start, not a tick later
    wait_reaped(fake, stale, b)
    assert [e.get("pass") for e in reaps(b, stale)] == [1], log(b)
    assert not reaps(b, fresh), log(b)
    # the fresh one is adopted: the conversation keeps its pod
    assert ok_run(b, fresh)["result"] == pod_name(fresh)
    assert uid(fake, fresh) == fresh_uid
    # the reaped conversation starts over in a new pod
    assert ok_run(b, stale)["result"] == pod_name(stale)
    assert uid(fake, stale) != stale_uid


def test_restart_after_sigkill_reaps_every_idle_pod(fake, codepods):
    # The first replica must not reap them itself before it is killed (on a
    # loaded machine three executions can take longer than a short TTL).
    a = codepods("--idle-ttl", "1000", name="first")
    convs = [new_conv(f"k{i}") for i in range(3)]
    for c in convs:
        ok_run(a, c)
    wait_marks_cleared(fake, convs)
    sigkill(a)
    for c in convs:  # idle for longer than the TTL
        fake.set_last_used(pod_name(c), 3600)
    b = codepods("--idle-ttl", "2", name="restarted")
    for c in convs:
        wait_reaped(fake, c, b)
        assert [e.get("pass") for e in reaps(b, c)] == [1], log(b)


def test_a_terminating_pod_is_reaped_once(fake, codepods):
    """A reaped pod stays listed, with its deletionTimestamp, until its
    containers stop (codepod's grace of 5 s; the fake told to take 8):
    the passes that list it meanwhile leave it alone (no second DELETE, no
    snapshot of a pod on its way out)."""
    s = codepods("--idle-ttl", "2")
    conv = new_conv("once")
    ok_run(s, conv)
    wait_marks_cleared(fake, [conv])
    fake.set_schedule(deletion_ms=8000)
    try:
        wait_until(lambda: reaps(s, conv), TICK * 2 + 10, f"the idle pod of {conv} reaped",
                   interval=0.05)
        first = reaps(s, conv)[0]["pass"]
        # a later pass listed it while it terminated, and passed it by
        wait_until(lambda: any(e.get("event") == "kube.reap_listed" and e["pass"] > first and
                               e["terminating"] >= 1 for e in log_events(s)),
                   30, "a pass that lists the terminating pod", interval=0.05)
        wait_reaped(fake, conv, s)
    finally:
        fake.set_schedule(deletion_ms=100)
    assert [e.get("pass") for e in reaps(s, conv)] == [first], log(s)
