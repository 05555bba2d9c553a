"""WebSocket liveness (broker/SESSION.md "Liveness"): the server pings every
--ws-ping-interval seconds and drops a peer that sends nothing, not even a
PONG, for --ws-idle-timeout seconds; the dropped peer's executions are
detached as on a reset, so `attach` from a new connection takes them over.
Before, a connection that stopped forwarding without a reset held a program
in its tool call until TCP gave up."""

import json
import subprocess

import harness
from tcpproxy import Proxy
from util import Pump
from wsclient import Closed, WsClient

FAST = ("--ws-ping-interval", "1", "--ws-idle-timeout", "3")


def detached(s, eid):
    s.wait_logs("exec.detached", lambda ls: [e for e in ls if e.get("id") == eid], timeout=60)


def silent_drops(s):
    return [e for e in s.logs("ws.disconnect") if "silent" in e.get("reason", "")]


def finish_by_attach(s, eid, output, want):
    q = Pump(s.connect())
    q.send({"type": "attach", "id": eid})
    call = q.wait(lambda m: m["type"] == "tool_call" and m["id"] == eid, what="the call again")
    q.send({"type": "tool_result", "id": eid, "call": call["call"], "output": output})
    res = q.result(eid)
    assert res["type"] == "result" and res["status"] == "succeeded", res
    assert res["result"] == want


def test_a_peer_that_stops_answering_pings_is_dropped_and_its_run_reattached(serve):
    s = serve(*FAST)
    ws = s.connect()
    ws.send_text(json.dumps({"type": "execute", "id": "deaf", "conversation": "c-deaf",
                             "js": "return (await tools.ask({})) * 2;",
                             "tools": [{"name": "ask", "description": "ask",
                                        "inputSchema": {"type": "object"}}]}))
    while json.loads(ws.recv())["type"] != "tool_call":
        pass
    # From here nothing is read, so no PING is answered.
    s.wait_logs("ws.disconnect", lambda ls: silent_drops(s), timeout=60)
    detached(s, "deaf")
    unanswered = 0
    try:
        while True:
            _, op, _ = ws._read_frame()
            unanswered += op == 0x9
    except (Closed, OSError):
        pass
    assert unanswered >= 1, "the server dropped the peer without pinging it first"
    finish_by_attach(s, "deaf", 21, 42)


def test_a_path_that_stops_forwarding_is_dropped_and_its_run_reattached(serve):
    s = serve(*FAST)
    proxy = Proxy(s.host, s.port)
    try:
        p = Pump(WsClient(proxy.host, proxy.port, token=s.token))
        p.execute("cut", "return (await tools.ask({})) + '!';", tools=["ask"])
        p.wait(lambda m: m["type"] == "tool_call", what="the call")
        proxy.freeze()
        s.wait_logs("ws.disconnect", lambda ls: silent_drops(s), timeout=60)
        detached(s, "cut")
        finish_by_attach(s, "cut", "back", "back!")
    finally:
        proxy.close()


def test_a_peer_that_answers_pings_keeps_its_session_past_the_idle_timeout(serve):
    s = serve(*FAST)
    ws = s.connect()
    p = Pump(ws)  # answers every PING, sends nothing else
    p.execute("slow", "await new Promise((r) => setTimeout(r, 6000)); return 'done';")
    res = p.result("slow")
    assert res["type"] == "result" and res["result"] == "done", res
    assert ws.pings >= 2, ws.pings
    assert not s.logs("ws.disconnect") and not s.logs("exec.detached")


def test_an_idle_timeout_not_above_the_ping_interval_is_refused(tmp_path):
    token = tmp_path / "token"
    token.write_text("t0123456789\n")
    r = subprocess.run([harness.CODEPOD_BIN, "serve", "--listen", "127.0.0.1:0",
                        "--token-file", str(token), "--state-dir", str(tmp_path / "st"),
                        *harness.backend_args(), "--ws-ping-interval", "5",
                        "--ws-idle-timeout", "5"],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 2
    assert "--ws-idle-timeout (5) must be longer than --ws-ping-interval (5)" in r.stderr
