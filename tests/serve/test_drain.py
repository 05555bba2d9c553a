"""SIGTERM/SIGINT: stop accepting, let running executions finish within the
drain period, stop the rest (CANCELLED), lose no outcome, exit 0."""

import signal
import time

import pytest

from wsclient import Rejected, http_request
from util import Pump

# A program's first line: a tool call the pump answers at once, so the test
# knows the program runs (instead of sleeping and hoping).
UP = "await tools.up({});\n"


def running(p, *ids):
    for eid in ids:
        p.wait(lambda m: m["type"] == "tool_call" and m["id"] == eid, what=f"{eid} running")


def not_ready(s):
    deadline = time.monotonic() + 30  # a hang catcher
    while http_request(s.host, s.port, "GET", "/readyz")[0] != 503:
        assert time.monotonic() < deadline, "/readyz never said 503 while draining"
        time.sleep(0.05)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_drain_finishes_short_ones_and_cancels_the_rest(serve, sig):
    s = serve("--drain-seconds", "5")
    p = Pump(s.connect(), {"up": lambda i: 1})
    q = Pump(s.connect(), {"up": lambda i: 1})
    # "short" and "other" end with a call the test answers once the drain
    # has begun: they finish within it by that answer (the 5 s only catch a
    # hang); "long" never ends by itself.
    p.execute("short", UP + "return await tools.finish({});", tools=["up", "finish"])
    p.execute("long", UP + "await new Promise((r) => setTimeout(r, 60000)); return 'never';",
              tools=["up"])
    q.execute("other", UP + "return await tools.finish({});", tools=["up", "finish"])
    running(p, "short", "long")
    running(q, "other")
    finish = {eid: pump.wait(lambda m, eid=eid: m["type"] == "tool_call" and m["id"] == eid
                             and m["tool"] == "finish", what=f"{eid}'s last call")
              for pump, eid in ((p, "short"), (q, "other"))}
    s.proc.send_signal(sig)
    not_ready(s)
    p.execute("late", "return 1")
    late = p.result("late")
    assert late["type"] == "error" and late["error"]["code"] == "SHUTTING_DOWN"
    for pump, eid, out in ((p, "short", "finished"), (q, "other", "also")):
        pump.send({"type": "tool_result", "id": eid, "call": finish[eid]["call"], "output": out})
    assert p.result("short", timeout=10)["result"] == "finished"
    assert q.result("other", timeout=10)["result"] == "also"
    long = p.result("long", timeout=15)
    assert long["type"] == "result" and long["error"]["code"] == "CANCELLED"
    # The server stopped it, not the backend (v1 said "stopped by the backend").
    assert "stopped by the server" in long["error"]["message"], long["error"]
    assert "backend" not in long["error"]["message"]
    assert s.proc.wait(20) == 0
    assert p.wait_eof(5) and q.wait_eof(5)
    audited = {a["id"]: a["code"] for a in s.logs("audit")}
    assert audited == {"short": "OK", "long": "CANCELLED", "other": "OK"}


def test_clean_drain_exits_quickly(serve):
    # A drain period no test waits for: exiting once "one" is done is the
    # only way to pass.
    s = serve("--drain-seconds", "3600")
    p = Pump(s.connect(), {"up": lambda i: 1})
    p.execute("one", UP + "await new Promise((r) => setTimeout(r, 500)); return 1;", tools=["up"])
    running(p, "one")
    s.proc.send_signal(signal.SIGTERM)
    assert p.result("one", timeout=60)["result"] == 1
    assert s.proc.wait(120) == 0
    assert s.logs("serve.exit")[0]["cleanDrain"] is True


def test_new_sessions_refused_while_draining(serve):
    s = serve("--drain-seconds", "5")
    p = Pump(s.connect())
    p.execute("hold", "return await tools.hold({});", tools=["hold"])
    call = p.wait(lambda m: m["type"] == "tool_call" and m["id"] == "hold")
    s.proc.send_signal(signal.SIGTERM)
    not_ready(s)  # draining, still listening: an upgrade is refused with 503
    with pytest.raises(Rejected) as ex:
        s.connect()
    assert ex.value.status == 503
    p.send({"type": "tool_result", "id": "hold", "call": call["call"], "output": 1})
    assert p.result("hold", timeout=30)["result"] == 1
    assert s.proc.wait(20) == 0
