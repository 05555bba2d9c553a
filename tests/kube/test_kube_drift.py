"""A rolling upgrade that changes the sandbox template: old and new replicas
(two `serve --stdio` processes, one with the built-in template, one with the
chart's) serve the same conversations side by side. A template difference
alone never deletes a pod: every execution succeeds, the conversation keeps
its one pod (seen through a watch on the fake, so a pod that lived briefly
counts too) and the files in it; a create race across templates ends in
the winner's pod; a replica of the new template never claims an old warm
pod, and drains them once they go unused; a replica killed mid-rollout
leaves the others serving the same pod; /metrics counts pods served by
template and replacements by reason."""
import threading

from harness import assert_ok
from kubehelp import (CHART_TEMPLATE, CONV_LABEL, HOSTNAME_JS, MANAGED, TEMPLATE_LABEL, Listener,
                      PodWatch, conv_label, describe, log, log_events, new_conv, pod_name,
                      result_of, sigkill, wait_until)

KEPT = "written before the rounds"
WRITE_JS = (f"require('node:fs').writeFileSync('kept.txt', {KEPT!r});"
            " return require('node:os').hostname();")
# The program: 400 ms, then where it ran and what the file says.
ROUND_JS = ("await new Promise((r) => setTimeout(r, 400));"
            " let kept = null;"
            " try { kept = require('node:fs').readFileSync('kept.txt', 'utf8'); } catch (e) {}"
            " return { host: require('node:os').hostname(), kept };")
ROUNDS = 6


def replicas(codepods, *extra):
    old = codepods(*extra, name="old")                                  # the built-in template
    new = codepods("--pod-template", CHART_TEMPLATE, *extra, name="new")  # the chart's
    return old, new


def conv_selector(conv):
    return f"{MANAGED}=codepod,{CONV_LABEL}={conv_label(conv)}"


def at_once(pairs):
    """Sends one execution per (session, conversation) at the same moment."""
    go = threading.Barrier(len(pairs))
    ids = [None] * len(pairs)

    def send(i, s, conv):
        go.wait()
        ids[i] = s.execute(ROUND_JS, conversation=conv, tools=[])
    ts = [threading.Thread(target=send, args=(i, s, c)) for i, (s, c) in enumerate(pairs)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return ids


def start_conversation(fake, s, conv):
    """The conversation's pod, made by `s`, with a file written in it."""
    assert_ok(result_of(s, s.execute(WRITE_JS, conversation=conv, tools=[]), 60))
    pods = fake.conv_pods(conv)
    assert [p["metadata"]["name"] for p in pods] == [pod_name(conv)], pods
    return pods[0]


def check_rounds(fake, conv, pod, watch, results):
    """Every execution succeeded, in the one pod, with the file; the watch saw
    no other pod and no delete."""
    bad = [(who, r.get("status"), (r.get("error") or {}).get("code"),
            (r.get("error") or {}).get("message"), r.get("result"))
           for who, r in results
           if r.get("status") != "succeeded" or r.get("result") != {"host": pod_name(conv), "kept": KEPT}]
    watch.barrier(pod_name(conv))
    uids = watch.uids()
    assert not bad and uids == {pod["metadata"]["uid"]} and not watch.deleted(), (
        f"{len(bad)} of {len(results)} executions failed or lost the file: {bad}; "
        f"{len(uids)} pods for one conversation, most at once {watch.most_at_once()}, "
        f"deletes {[(e[0], e[2]) for e in watch.deleted()][:10]}")
    assert watch.most_at_once() == 1
    now = fake.conv_pods(conv)
    assert [p["metadata"]["uid"] for p in now] == [pod["metadata"]["uid"]]
    # still the old replica's template: nothing replaced it
    assert now[0]["metadata"]["labels"][TEMPLATE_LABEL] == pod["metadata"]["labels"][TEMPLATE_LABEL]


def drift_events(s):
    return [e for e in log_events(s) if e.get("event") == "kube.template_drift"]


def test_two_templates_at_once_keep_one_pod_and_its_files(fake, codepods):
    old, new = replicas(codepods)
    conv = new_conv("drift-once")
    pod = start_conversation(fake, old, conv)
    watch = PodWatch(fake, conv_selector(conv))
    results = []
    try:
        for _ in range(ROUNDS):
            eo, en = at_once([(old, conv), (new, conv)])
            results += [("old", result_of(old, eo, 90)), ("new", result_of(new, en, 90))]
        check_rounds(fake, conv, pod, watch, results)
    finally:
        watch.stop()
    # The new replica said once that it serves a pod of another template.
    ev = drift_events(new)
    assert len(ev) == 1 and ev[0]["pod"] == pod_name(conv), ev
    assert ev[0]["template"] == pod["metadata"]["labels"][TEMPLATE_LABEL] != ev[0]["own"], ev
    assert not drift_events(old), drift_events(old)


def test_two_templates_one_after_the_other_keep_one_pod_and_its_files(fake, codepods):
    old, new = replicas(codepods)
    conv = new_conv("drift-seq")
    pod = start_conversation(fake, old, conv)
    watch = PodWatch(fake, conv_selector(conv))
    results = []
    try:
        for _ in range(ROUNDS):
            for who, s in (("new", new), ("old", old)):
                results.append((who, result_of(s, s.execute(ROUND_JS, conversation=conv, tools=[]), 90)))
        check_rounds(fake, conv, pod, watch, results)
    finally:
        watch.stop()
    # A new conversation on the new replica gets a pod of the new template.
    other = new_conv("drift-own")
    assert_ok(result_of(new, new.execute(WRITE_JS, conversation=other, tools=[]), 60))
    own = fake.conv_pods(other)[0]["metadata"]["labels"][TEMPLATE_LABEL]
    assert own != pod["metadata"]["labels"][TEMPLATE_LABEL]
    assert drift_events(new)[0]["own"] == own, describe({}, new)


def test_a_create_race_across_templates_uses_the_winners_pod(fake, codepods):
    """The old replica's create is held at the server while the new replica
    creates the pod from its template and runs in it; let go, the old one
    gets a real 409 and runs in the new-template pod: no delete."""
    old, new = replicas(codepods)
    conv = new_conv("drift-race")
    watch = PodWatch(fake, conv_selector(conv))
    try:
        fake.hold("old-create", method="POST", path=r"/pods(\?|$)", count=1)
        eo = old.execute(HOSTNAME_JS, conversation=conv, tools=[])
        wait_until(lambda: fake.held("old-create"), 60, "the old replica's create to reach the server")
        rn = assert_ok(result_of(new, new.execute(HOSTNAME_JS, conversation=conv, tools=[]), 60))
        fake.release("old-create")
        ro = result_of(old, eo, 60)
        assert_ok(ro), describe(ro, old)
        assert ro["result"] == rn["result"] == pod_name(conv)
        watch.barrier(pod_name(conv))
        assert len(watch.uids()) == 1 and not watch.deleted(), watch.events
    finally:
        watch.stop()
    assert [e for e in log_events(old) if e.get("event") == "kube.create_conflict"], log(old)
    ev = drift_events(old)
    assert [e["pod"] for e in ev] == [pod_name(conv)], ev
    assert not drift_events(new)


def test_a_drifted_pod_goes_idle_and_the_next_is_of_the_own_template(fake, codepods):
    """Without a snapshot store a pod of another template is kept until the
    idle reaper takes it, as any idle pod; the conversation's next pod is
    made from the serving replica's template."""
    old = codepods(name="old")
    new = codepods("--pod-template", CHART_TEMPLATE, "--idle-ttl", "2", name="new")
    conv = new_conv("drift-idle")
    pod = start_conversation(fake, old, conv)
    res = assert_ok(result_of(new, new.execute(ROUND_JS, conversation=conv, tools=[]), 60))
    assert res["result"] == {"host": pod_name(conv), "kept": KEPT}
    wait_until(lambda: not fake.conv_pods(conv, live=False), 60,
               "the idle pod to be reaped\n" + log(new))
    reaps = [e for e in log_events(new) if e.get("event") == "kube.reap" and e.get("pod") == pod_name(conv)]
    assert [e.get("why") for e in reaps] == ["idle"], reaps
    assert_ok(result_of(new, new.execute(HOSTNAME_JS, conversation=conv, tools=[]), 60))
    now = fake.conv_pods(conv)
    assert len(now) == 1 and now[0]["metadata"]["uid"] != pod["metadata"]["uid"]
    own = now[0]["metadata"]["labels"][TEMPLATE_LABEL]
    assert own != pod["metadata"]["labels"][TEMPLATE_LABEL]
    assert [e["own"] for e in drift_events(new)] == [own], drift_events(new)


def by_template(fake, ready=True):
    out = {}
    for p in fake.warm_pods(ready=ready):
        out.setdefault(p["metadata"]["labels"][TEMPLATE_LABEL], []).append(p["metadata"]["name"])
    return out


def test_warm_pool_during_a_template_change(fake, codepods):
    old = codepods("--warm-pool", "2", name="old")
    warm = wait_until(lambda: len(fake.warm_pods()) >= 2 and fake.warm_pods(), 60,
                      "the old replica's warm pool\n" + log(old))
    old_hash = {p["metadata"]["labels"][TEMPLATE_LABEL] for p in warm}
    assert len(old_hash) == 1
    old_hash = old_hash.pop()
    old_warm = {p["metadata"]["name"] for p in warm}
    # The new replica's own warm pods are slow to start: its first
    # conversation finds only the old replica's ready, and must not take one.
    fake.set_schedule(running_ms=3000)
    new = codepods("--pod-template", CHART_TEMPLATE, "--warm-pool", "2", "--idle-ttl", "600",
                   name="new")
    first = new_conv("drift-warm0")
    res = assert_ok(result_of(new, new.execute(HOSTNAME_JS, conversation=first, tools=[]), 60))
    fake.set_schedule(running_ms=200)
    served = fake.pod(res["result"])
    new_hash = served["metadata"]["labels"][TEMPLATE_LABEL]
    assert new_hash != old_hash and res["result"] not in old_warm, (res["result"], old_warm)
    wait_until(lambda: len(by_template(fake).get(new_hash, ())) >= 2, 60,
               "the new replica's warm pool\n" + log(new))
    # With both pools ready, each replica claims only pods of its own template.
    for i in range(3):
        for s, want in ((new, new_hash), (old, old_hash)):
            conv = new_conv(f"drift-warm{i}")
            r = assert_ok(result_of(s, s.execute(HOSTNAME_JS, conversation=conv, tools=[]), 60))
            got = fake.pod(r["result"])["metadata"]["labels"][TEMPLATE_LABEL]
            assert got == want, (i, r["result"], got, want)
    claimed = [e["pod"] for e in log_events(new) if e.get("event") == "kube.claimed"]
    assert claimed and not set(claimed) & old_warm, (claimed, old_warm)
    # While the old replica serves, its warm pods (recently made) are its own.
    assert not [e for e in log_events(new) if e.get("event") == "kube.reap"], log(new)
    # The rollout ends: the old replica goes. Its warm pods, unclaimed now,
    # are drained by the new replica once unused as long as an idle
    # conversation pod (made to look so here); its own pool stays.
    assert old.close() == 0   # its calls were answered: every pod it made is there
    left = by_template(fake, ready=False).get(old_hash, [])
    assert left, "the old replica's warm pods went with it"
    for name in left:
        fake.set_last_used(name, 3600)
    wait_until(lambda: not [p for p in fake.pods(f"{MANAGED}=codepod", live=False)
                            if p["metadata"]["name"] in left], 60,
               "the old template's warm pods to be drained\n" + log(new))
    drained = {e["pod"] for e in log_events(new) if e.get("event") == "kube.reap" and e.get("why") == "drift"}
    assert set(left) <= drained, (left, drained)
    assert all(fake.pod(n) is None or fake.pod(n)["metadata"]["labels"][TEMPLATE_LABEL] == old_hash
               for n in drained), "a pod of the new template was drained"
    pool = wait_until(lambda: (lambda t: len(t.get(new_hash, ())) >= 2 and t)(by_template(fake)), 60,
                      "the new pool after the drain")
    assert set(by_template(fake, ready=False)) == {new_hash}, pool


HOLD_JS = ("await tools.hold({});"
           " return { host: require('node:os').hostname(),"
           " kept: require('node:fs').readFileSync('kept.txt', 'utf8') };")


def test_a_replica_killed_mid_rollout(fake, codepods):
    """The old replica dies (SIGKILL) with an execution running in the
    conversation's pod; the new replica's executions go on in the same pod,
    and so do those of a second new replica that starts after it."""
    old, new = replicas(codepods)
    conv = new_conv("drift-kill")
    pod = start_conversation(fake, old, conv)
    watch = PodWatch(fake, conv_selector(conv))
    results = []
    try:
        for _ in range(2):
            eo, en = at_once([(old, conv), (new, conv)])
            results += [("old", result_of(old, eo, 90)), ("new", result_of(new, en, 90))]
        held = old.execute(HOLD_JS, conversation=conv, tools=["hold"])
        old.wait_call(held, "hold", timeout=60)   # running in the pod
        en = new.execute(ROUND_JS, conversation=conv, tools=[])
        sigkill(old)
        results.append(("new", result_of(new, en, 90)))
        new2 = codepods("--pod-template", CHART_TEMPLATE, name="new2")
        for _ in range(ROUNDS - 2):
            a, b = at_once([(new, conv), (new2, conv)])
            results += [("new", result_of(new, a, 90)), ("new2", result_of(new2, b, 90))]
        check_rounds(fake, conv, pod, watch, results)
    finally:
        watch.stop()
    assert len(drift_events(new2)) == 1, log(new2)


def test_metrics_count_pods_by_template_and_replacements_by_reason(fake, codepods, tmp_path):
    old = codepods(name="old")
    conv = new_conv("drift-metrics")
    start_conversation(fake, old, conv)
    srv = Listener(fake, tmp_path / "new", ["--pod-template", CHART_TEMPLATE])
    try:
        for _ in range(3):
            r = srv.execute(ROUND_JS, conv)
            assert r["status"] == "succeeded" and r["result"] == {"host": pod_name(conv), "kept": KEPT}, r
        m = srv.metrics()
        assert m['codepod_pods_served_total{template="other"}'] == 1, m
        assert m['codepod_pods_served_total{template="own"}'] == 0, m
        assert m['codepod_pod_replacements_total{reason="drift"}'] == 0, m
        assert m['codepod_pod_replacements_total{reason="bad_state"}'] == 0, m
        assert len(srv.log_events("kube.template_drift")) == 1, srv.stderr_text()
        # A conversation of its own; then its pod fails: the reaper (this
        # replica's alone now) deletes it for its state, and the next
        # execution gets a new pod.
        mine = new_conv("drift-mine")
        assert srv.execute(HOSTNAME_JS, mine)["status"] == "succeeded"
        assert srv.metrics()['codepod_pods_served_total{template="own"}'] == 1
        assert old.close() == 0
        fake.force_state(pod_name(mine), "Failed")
        wait_until(lambda: srv.metrics()['codepod_pod_replacements_total{reason="bad_state"}'] == 1,
                   60, "the failed pod to be reaped\n" + srv.stderr_text())
        assert [e["why"] for e in srv.log_events("kube.reap")] == ["Failed"], srv.log_events("kube.reap")
        wait_until(lambda: not fake.conv_pods(mine, live=False), 60, "the failed pod to go")
        r = srv.execute(HOSTNAME_JS, mine)
        assert r["status"] == "succeeded" and r["result"] == pod_name(mine), r
        m = srv.metrics()
        assert m['codepod_pod_replacements_total{reason="drift"}'] == 0, m
        assert len(srv.log_events("kube.template_drift")) == 1, srv.stderr_text()
    finally:
        assert srv.stop() == 0, srv.stderr_text()
