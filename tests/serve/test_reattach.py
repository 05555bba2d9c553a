"""Session protocol v1.1, reattach (broker/SESSION.md "Reattach"): a dropped
WebSocket leaves its executions running for --reattach-grace; `attach` on a
new session takes one over; outcomes are kept for --outcome-retention and
served by GET /v1/executions/{id}. Each test fails on a v1 server, which
stopped every execution of a dropped session at once and kept nothing."""

import json
import time

import schemas
from test_webhook import broker, execute  # noqa: F401  (the broker fixture)
from util import Pump
from wsclient import http_request


def get_execution(s, eid, token=None):
    status, _, body = http_request(s.host, s.port, "GET", f"/v1/executions/{eid}",
                                   token=s.token if token is None else token)
    return status, json.loads(body)


def metric(s, name):
    status, _, body = http_request(s.host, s.port, "GET", "/metrics")
    assert status == 200
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return int(line.split()[1])
    raise AssertionError(f"no {name} in /metrics")


def drop(p):
    p.ws.abort()
    assert p.wait_eof(10)


def test_reattach_within_grace_answers_the_call_and_gets_the_result(serve):
    s = serve()
    p = Pump(s.connect())
    p.execute("r1", "console.log('before');\n"
                    "const a = await tools.lookup({ q: 1 });\n"
                    "return a.v + 1;", tools=["lookup"])
    first = p.wait(lambda m: m["type"] == "tool_call" and m["id"] == "r1")
    drop(p)
    s.wait_logs("exec.detached", lambda ls: [e for e in ls if e.get("id") == "r1"])
    status, body = get_execution(s, "r1")
    assert status == 202 and body == {"executionId": "r1", "status": "running"}
    schemas.check("execution_status.schema.json", body)
    assert metric(s, "codepod_executions_detached") == 1
    q = Pump(s.connect())
    q.send({"type": "attach", "id": "r1"})
    acc = q.wait(lambda m: m["type"] == "accepted", what="accepted")
    assert acc == {"type": "accepted", "id": "r1", "inReplyTo": "attach"}
    again = q.wait(lambda m: m["type"] == "tool_call", what="the call again")
    assert again == first, (again, first)
    q.send({"type": "tool_result", "id": "r1", "call": again["call"], "output": {"v": 41}})
    res = q.result("r1")
    assert res["type"] == "result" and res["status"] == "succeeded" and res["result"] == 42
    assert res["logs"] == "before\n"
    assert [c["status"] for c in res["calls"]] == ["ok"]
    status, body = get_execution(s, "r1")
    assert status == 200 and body["result"] == 42 and body["executionId"] == "r1"
    assert metric(s, "codepod_executions_detached") == 0
    assert metric(s, "codepod_outcomes_kept") == 1 and metric(s, "codepod_outcomes_kept_bytes") > 0
    schemas.check("outcome.schema.json", body)


def test_never_reattached_ends_outcome_unknown_and_get_returns_it(serve):
    s = serve("--reattach-grace", "1")
    p = Pump(s.connect())
    p.execute("lost", "return await tools.never({});", tools=["never"])
    p.wait(lambda m: m["type"] == "tool_call")
    drop(p)
    deadline = time.monotonic() + 30
    while True:
        status, body = get_execution(s, "lost")
        if status == 200:
            break
        assert status == 202 and time.monotonic() < deadline, (status, body)
        time.sleep(0.2)
    assert body["status"] == "failed" and body["error"]["code"] == "OUTCOME_UNKNOWN"
    assert [c["status"] for c in body["calls"]] == ["cancelled"]
    # The id stays used: a new execute with it is refused.
    q = Pump(s.connect())
    q.execute("lost", "return 1")
    e = q.result("lost")
    assert e["type"] == "error" and e["inReplyTo"] == "execute"


def test_an_outcome_that_finished_while_detached_is_delivered_on_attach(serve):
    s = serve()
    p = Pump(s.connect())
    p.execute("quick", "await new Promise((r) => setTimeout(r, 500)); return 'kept';")
    p.wait(lambda m: m["type"] == "accepted")
    drop(p)
    deadline = time.monotonic() + 30
    while get_execution(s, "quick")[0] != 200:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    q = Pump(s.connect())
    q.send({"type": "attach", "id": "quick"})
    res = q.result("quick")
    assert res["type"] == "result" and res["result"] == "kept"
    types = [m["type"] for m in q.msgs if m.get("id") == "quick"]
    assert types == ["accepted", "result"], types
    audit = s.wait_logs("audit", lambda ls: any(a.get("id") == "quick" for a in ls))
    assert [a["code"] for a in audit if a.get("id") == "quick"] == ["OK"]


def test_attach_to_an_unknown_id_says_so(serve):
    s = serve()
    p = Pump(s.connect())
    p.send({"type": "attach", "id": "elsewhere"})
    e = p.result("elsewhere")
    assert e["type"] == "error" and e["inReplyTo"] == "attach"
    assert e["error"]["code"] == "UNKNOWN_EXECUTION"
    assert "another replica" in e["error"]["message"]
    status, body = get_execution(s, "elsewhere")
    assert status == 404 and body["error"]["code"] == "UNKNOWN_EXECUTION"
    schemas.check("http_error.schema.json", body)
    assert get_execution(s, "elsewhere", token="wrong")[0] == 401


def test_attach_takes_over_from_a_session_still_open(serve):
    s = serve()
    p = Pump(s.connect())
    p.execute("moved", "return await tools.ask({});", tools=["ask"])
    call = p.wait(lambda m: m["type"] == "tool_call")
    q = Pump(s.connect())
    q.send({"type": "attach", "id": "moved"})
    q.wait(lambda m: m["type"] == "tool_call", what="the call again")
    # The old session no longer holds it: its answer is refused ...
    p.send({"type": "tool_result", "id": "moved", "call": call["call"], "output": "old"})
    e = p.wait(lambda m: m["type"] == "error", what="the refusal")
    assert e["inReplyTo"] == "tool_result" and e["call"] == call["call"]
    # ... and the new one's is taken.
    q.send({"type": "tool_result", "id": "moved", "call": call["call"], "output": "new"})
    assert q.result("moved")["result"] == "new"


def test_a_dropped_post_caller_leaves_the_outcome_for_get(serve, broker):
    import socket
    import threading
    s = serve()
    called, gone = threading.Event(), threading.Event()

    def answer(call, headers):
        # The program is in its call: the caller goes away now, and the call
        # is answered only once codepod has seen it go.
        called.set()
        assert gone.wait(60)
        return 200, json.dumps({"output": call["input"]["n"] * 2}).encode()
    b = broker(answer)
    req = execute("p1", "return await tools.echo({ n: 21 });", b.url)
    body = json.dumps(req).encode()
    sock = socket.create_connection((s.host, s.port))
    sock.sendall(b"POST /v1/executions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                 + s.token.encode() + b"\r\nContent-Type: application/json\r\n"
                 + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    assert called.wait(60), "the broker never got the call"
    sock.close()  # the caller goes away before the answer
    s.wait_logs("exec.caller_gone", lambda ls: ls)
    gone.set()
    deadline = time.monotonic() + 30
    while True:
        status, out = get_execution(s, "p1")
        if status == 200:
            break
        assert status == 202 and time.monotonic() < deadline, (status, out)
        time.sleep(0.2)
    assert out["status"] == "succeeded" and out["result"] == 42
    # A WebSocket session cannot take a webhook execution over while it runs,
    # but gets its kept outcome once it ended.
    p = Pump(s.connect())
    p.send({"type": "attach", "id": "p1"})
    assert p.result("p1")["result"] == 42
