"""The bound on runners already started (runner/prestart.h, README "Runners
already started"): `--prestart N` lets at most N runners wait in all, and when
a conversation's runner would be one too many, the conversation active
longest ago loses its runner first (if that was over a second before: a burst
of new conversations does not churn the pool)."""
import time

from harness import BACKEND, Session, assert_ok, children
from test_prestart import prestarted, wait_event

# Ends over a second after it started, so the conversations before it were
# last active more than a second before its end: the pool may evict then.
SLOW = "await new Promise((r) => setTimeout(r, 1100)); return 'slow';"


def test_at_most_n_wait_and_the_least_recently_active_loses_its_runner(tmp_path):
    s = Session(tmp_path / "state", args=["--prestart", "2", "--log-level", "debug"])
    try:
        a, b, c = (s.conv_prefix + n for n in ("a", "b", "c"))
        assert_ok(s.run("return 'a';", tools=[], conversation=a, timeout=120))
        wait_event(s, "prestart.started", count=1)
        assert_ok(s.run("return 'b';", tools=[], conversation=b, timeout=120))
        wait_event(s, "prestart.started", count=2)
        # a third conversation's runner: one too many, `a` was active longest ago
        assert_ok(s.run(SLOW, tools=[], conversation=c, timeout=120))
        started = wait_event(s, "prestart.started", count=3)
        # the pool makes room before it starts one: the drop is logged first
        dropped = s.log_events("prestart.dropped")
        assert [d["reason"] for d in dropped] == ["pool full"], dropped
        assert max(e["waiting"] for e in started) <= 2, started
        if BACKEND == "local":
            # every process of codepod's is a waiting runner once the
            # executions' own and the evicted one are gone: two of them
            deadline = time.monotonic() + 30
            while len(children(s.proc.pid)) != 2:
                assert time.monotonic() < deadline, children(s.proc.pid)
                time.sleep(0.05)
        # `b` and `c` kept theirs, `a` starts afresh (checked last: the
        # conversations' next runners are started as each of these ends)
        used = {}
        for conv in (b, c, a):
            eid = s.execute("return 1;", tools=[], conversation=conv)
            assert_ok(s.wait_result(eid, timeout=120))
            used[conv[len(s.conv_prefix):]] = prestarted(s, eid)
        assert used == {"b": True, "c": True, "a": False}, used
        for e in s.log_events("prestart.started") + s.log_events("prestart.dropped"):
            assert e["waiting"] <= 2, e
    finally:
        assert s.close() == 0
