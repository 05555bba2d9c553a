"""SIGTERM/SIGINT: stop accepting, let running executions finish within the
drain period, stop the rest (CANCELLED), lose no outcome, exit 0."""

import signal
import time

import pytest

from wsclient import Rejected, http_request
from util import Pump


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_drain_finishes_short_ones_and_cancels_the_rest(serve, sig):
    s = serve("--drain-seconds", "3")
    p = Pump(s.connect())
    q = Pump(s.connect())
    p.execute("short", "await new Promise((r) => setTimeout(r, 1000)); return 'finished';")
    p.execute("long", "await new Promise((r) => setTimeout(r, 60000)); return 'never';")
    q.execute("other", "await new Promise((r) => setTimeout(r, 1500)); return 'also';")
    time.sleep(0.5)
    s.proc.send_signal(sig)
    time.sleep(0.3)
    assert http_request(s.host, s.port, "GET", "/readyz")[0] == 503
    p.execute("late", "return 1")
    late = p.result("late")
    assert late["type"] == "error" and late["error"]["code"] == "SHUTTING_DOWN"
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
    s = serve("--drain-seconds", "20")
    p = Pump(s.connect())
    p.execute("one", "await new Promise((r) => setTimeout(r, 500)); return 1;")
    time.sleep(0.2)
    t0 = time.monotonic()
    s.proc.send_signal(signal.SIGTERM)
    assert p.result("one", timeout=10)["result"] == 1
    assert s.proc.wait(10) == 0
    assert time.monotonic() - t0 < 8
    assert s.logs("serve.exit")[0]["cleanDrain"] is True


def test_new_sessions_refused_while_draining(serve):
    s = serve("--drain-seconds", "5")
    p = Pump(s.connect())
    p.execute("hold", "await new Promise((r) => setTimeout(r, 2000)); return 1;")
    time.sleep(0.3)
    s.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    with pytest.raises((Rejected, OSError)) as ex:
        s.connect()
    if isinstance(ex.value, Rejected):
        assert ex.value.status == 503
    assert p.result("hold", timeout=10)["result"] == 1
    assert s.proc.wait(20) == 0
