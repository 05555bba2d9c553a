"""Kept outcomes (broker/SESSION.md "Kept outcomes", broker/hub.c): every
outcome, delivered or not, is kept for --outcome-retention seconds for `GET
/v1/executions/{id}` and `attach`, then forgotten; at most 10000 of them and
64 MiB of their JSON are kept at once, and when a new one does not fit the
oldest delivered ones go first, then the oldest undelivered."""
import json
import time

from test_reattach import drop, get_execution, metric
from util import Pump

MIB = 1 << 20
MAX_OUTCOMES = 10000
MAX_BYTES = 64 * MIB


def attach_error(s, eid):
    q = Pump(s.connect())
    q.send({"type": "attach", "id": eid})
    m = q.result(eid)
    q.ws.close()
    return m


def wait_kept(s, eid, timeout=60):
    """GET until `eid` has an outcome (it runs, detached, until then)."""
    deadline = time.monotonic() + timeout
    while True:
        status, body = get_execution(s, eid)
        if status == 200:
            return body
        assert status == 202 and time.monotonic() < deadline, (status, body)
        time.sleep(0.05)


def test_an_outcome_is_kept_for_the_retention_time_then_forgotten(serve):
    retention = 2
    s = serve("--outcome-retention", str(retention))
    p = Pump(s.connect())
    t0 = time.monotonic()  # before the outcome exists: it cannot go before t0 + retention
    p.execute("k1", "return 'kept';")
    assert p.result("k1")["result"] == "kept"
    answers = []
    deadline = t0 + retention + 30
    while True:
        status, body = get_execution(s, "k1")
        answers.append((status, time.monotonic()))
        if status == 404:
            break
        assert status == 200 and body["result"] == "kept", (status, body)
        assert time.monotonic() < deadline, f"still kept {time.monotonic() - t0:.1f}s on"
        time.sleep(0.1)
    assert body["error"]["code"] == "UNKNOWN_EXECUTION", body
    assert answers[0][0] == 200, f"not kept at all: {answers}"
    gone_at = answers[-1][1] - t0
    assert gone_at >= retention, f"forgotten after {gone_at:.2f}s, kept for {retention}s"
    # gone for attach too, and from the metrics
    e = attach_error(s, "k1")
    assert e["type"] == "error" and e["error"]["code"] == "UNKNOWN_EXECUTION", e
    assert metric(s, "codepod_outcomes_kept") == 0
    assert metric(s, "codepod_outcomes_kept_bytes") == 0


def run_batches(s, ids, js, policy, batch=100):
    """Runs ids one cheap execution each, at most 2 * batch at once (under
    --max-executions' 256); their results, in the order sent."""
    q = Pump(s.connect())
    for i in range(0, len(ids), batch):
        for eid in ids[i:i + batch]:
            q.send({"type": "execute", "id": eid, "conversation": "bounds", "js": js,
                    "tools": [], "policy": policy})
        last = ids[min(i + batch, len(ids)) - 1]
        q.wait(lambda m: m.get("id") == last and m["type"] in ("result", "error"), 120)
    want = set(ids)
    deadline = time.monotonic() + 120
    while True:
        with q.cond:
            got = {m["id"]: m for m in q.msgs if m.get("id") in want
                   and m["type"] in ("result", "error")}
        if len(got) == len(ids):
            break
        assert time.monotonic() < deadline, f"{len(ids) - len(got)} results missing"
        time.sleep(0.05)
    q.ws.close()
    return [got[eid] for eid in ids]


def test_at_most_10000_outcomes_are_kept_the_oldest_delivered_going_first(serve):
    s = serve()
    # An outcome nobody received: its session dropped while it ran.
    p = Pump(s.connect())
    p.execute("undelivered", "await new Promise((r) => setTimeout(r, 300)); return 'u';")
    p.wait(lambda m: m["type"] == "accepted")
    drop(p)
    assert wait_kept(s, "undelivered")["result"] == "u"
    # Then 10000 delivered ones: one too many in all. SOURCE_TOO_LARGE
    # outcomes cost no runner.
    ids = [f"d{i}" for i in range(MAX_OUTCOMES)]
    results = run_batches(s, ids, "return 1;", {"maxSourceBytes": 1})
    bad = [r for r in results if r["type"] != "result"
           or r["error"]["code"] != "SOURCE_TOO_LARGE"]
    assert not bad, bad[:3]
    assert metric(s, "codepod_outcomes_kept") == MAX_OUTCOMES
    status, body = get_execution(s, "undelivered")
    assert status == 200 and body["result"] == "u", "the undelivered outcome went before a delivered one"
    assert get_execution(s, "d0")[0] == 404, "an 10001st outcome was kept"
    for eid in ("d1", "d5000", ids[-1]):
        assert get_execution(s, eid)[0] == 200, eid
    evicted = s.wait_logs("outcome.evicted", lambda ls: len(ls) >= 1)
    assert [(e["id"], e["delivered"]) for e in evicted] == [("d0", True)], evicted
    # the undelivered one is still there for attach
    q = Pump(s.connect())
    q.send({"type": "attach", "id": "undelivered"})
    assert q.result("undelivered")["result"] == "u"


def test_at_most_64_mib_of_outcomes_are_kept(serve):
    # logs of 4 MiB of U+0001, each written as \\u0001 in the outcome's JSON:
    # about 24 MiB an outcome, so two fit in 64 MiB and a third does not.
    s = serve()
    js = "console.log('\\x01'.repeat(4 << 20)); return 1;"
    p = Pump(s.connect())
    sizes = {}
    for eid in ("b1", "b2", "b3"):
        p.execute(eid, js, policy={"maxResultBytes": 4 * MIB})
        res = p.result(eid, timeout=120)
        assert res["type"] == "result" and res["status"] == "succeeded", json.dumps(res)[:300]
        if eid != "b3":
            status, body = get_execution(s, eid)
            assert status == 200, (eid, status)
            sizes[eid] = len(json.dumps(body, separators=(",", ":")))
    assert 2 * max(sizes.values()) <= MAX_BYTES < 3 * min(sizes.values()), sizes
    assert get_execution(s, "b1")[0] == 404, "more than 64 MiB of outcomes kept"
    assert get_execution(s, "b2")[0] == 200 and get_execution(s, "b3")[0] == 200
    assert metric(s, "codepod_outcomes_kept") == 2
    assert metric(s, "codepod_outcomes_kept_bytes") <= MAX_BYTES
    evicted = s.wait_logs("outcome.evicted", lambda ls: len(ls) >= 1)
    assert [e["id"] for e in evicted] == ["b1"], evicted
