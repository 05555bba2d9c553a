"""Hostile clients get a clear error; nothing crashes; others carry on."""

import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from wsclient import Closed, Rejected, WsClient, http_request, read_http_response
from util import Pump


def test_malformed_json_and_binary_get_errors_and_the_session_goes_on(serve):
    s = serve()
    p = Pump(s.connect())
    p.ws.send_text("{not json")
    e = p.wait(lambda m: m["type"] == "error", what="error for malformed JSON")
    assert e["error"]["code"] == "INVALID_REQUEST" and "id" not in e
    p.ws.send_text("[1,2]")
    p.ws.send_frame(0x2, b"\x00\x01binary")
    p.wait(lambda m: m["type"] == "error" and "binary" in m["error"]["message"])
    p.ws.send_fragments([b'{"type":"execute","id":"frag","conversation":"c",',
                         b'"js":"return 7","tools":[]}'])
    assert p.result("frag")["result"] == 7


def test_hundred_megabyte_message_is_discarded_with_an_error(serve):
    s = serve()
    p = Pump(s.connect())
    other = Pump(s.connect())
    chunk = b"x" * (1 << 20)
    p.ws.send_fragments([b'{"type":"execute","id":"big","js":"'] + [chunk] * 100 + [b'"}'])
    e = p.wait(lambda m: m["type"] == "error", timeout=120, what="oversize error")
    assert e["error"]["code"] == "INVALID_REQUEST"
    assert "over the limit" in e["error"]["message"]
    p.execute("after", "return 'ok'")
    assert p.result("after")["result"] == "ok"
    other.execute("other", "return 1")
    assert other.result("other")["result"] == 1


def test_hundred_megabyte_post_body_gets_413(serve):
    s = serve()
    sock = socket.create_connection((s.host, s.port), timeout=30)
    sock.sendall(b"POST /v1/executions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                 + s.token.encode() + b"\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 104857600\r\n\r\n")
    try:
        for _ in range(100):
            sock.sendall(b"x" * (1 << 20))
    except OSError:
        pass                              # the server may stop reading
    status, _, body, _ = read_http_response(sock)
    sock.close()
    assert status == 413
    assert json.loads(body)["error"]["code"] == "INVALID_REQUEST"
    # chunked, no length: stopped at the cap all the same
    sock = socket.create_connection((s.host, s.port), timeout=30)
    sock.sendall(b"POST /v1/executions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                 + s.token.encode() + b"\r\nTransfer-Encoding: chunked\r\n\r\n")
    try:
        for _ in range(40):
            sock.sendall(b"100000\r\n" + b"y" * 0x100000 + b"\r\n")
    except OSError:
        pass
    status, _, body, _ = read_http_response(sock)
    sock.close()
    assert status == 413
    assert http_request(s.host, s.port, "GET", "/healthz")[0] == 200


def test_slowloris_is_cut_off_by_the_header_timeout(serve):
    s = serve("--header-timeout", "2")
    sock = socket.create_connection((s.host, s.port), timeout=30)
    sock.sendall(b"GET /v1/session HTTP/1.1\r\nHost: x\r\n")
    start = time.monotonic()
    closed = False
    p = Pump(s.connect())
    while time.monotonic() - start < 15:
        try:
            sock.sendall(b"X-Slow: a\r\n")
            sock.settimeout(0.5)
            if sock.recv(4096) == b"":
                closed = True
                break
        except socket.timeout:
            continue
        except OSError:
            closed = True
            break
    sock.close()
    # the 15 s of the loop only catch a hang: the 2 s header timeout closes it
    assert closed, "a client trickling headers held its connection for 15 s"
    p.execute("alive", "return 1")
    assert p.result("alive")["result"] == 1


def test_idle_session_is_closed(serve):
    s = serve("--idle-timeout", "2")
    p = Pump(s.connect())
    p.execute("i1", "return 1")
    assert p.result("i1")["result"] == 1
    assert p.wait_eof(15), "an idle session stayed open"


def test_a_session_with_a_long_execution_is_not_idle(serve):
    s = serve("--idle-timeout", "1")
    p = Pump(s.connect())
    p.execute("long", "await new Promise((r) => setTimeout(r, 4000)); return 'done';")
    assert p.result("long", timeout=30)["result"] == "done"


def test_thousand_sessions_at_once(serve):
    s = serve("--max-sessions", "100")

    def one(i):
        try:
            ws = WsClient(s.host, s.port, token=s.token, timeout=60)
            return ("ok", ws)
        except Rejected as e:
            return (e.status, json.loads(e.body)["error"]["code"])
        except (OSError, Closed) as e:
            return ("oserror", str(e))

    with ThreadPoolExecutor(200) as ex:
        got = list(ex.map(one, range(1000)))
    ok = [g[1] for g in got if g[0] == "ok"]
    rejected = [g for g in got if g[0] == 429]
    others = [g for g in got if g[0] not in ("ok", 429)]
    assert not others, others[:5]
    assert len(ok) == 100
    assert all(code == "TOO_MANY_SESSIONS" for _, code in rejected)
    assert len(rejected) == 900
    pumps = [Pump(ws) for ws in ok[:10]]
    for i, p in enumerate(pumps):
        p.execute(f"k{i}", f"return {i}")
    for i, p in enumerate(pumps):
        assert p.result(f"k{i}")["result"] == i
    for ws in ok:
        ws.close()
    # the slots come back
    deadline = time.monotonic() + 20
    while True:
        try:
            WsClient(s.host, s.port, token=s.token).close()
            break
        except Rejected:
            assert time.monotonic() < deadline
            time.sleep(0.2)


def test_executions_in_flight_are_capped(serve):
    s = serve("--max-executions", "2")
    p = Pump(s.connect())
    for i in range(2):
        p.execute(f"slow{i}", "return await tools.hold({});", tools=["hold"])
    # both are running: each waits for its tool call's answer
    calls = [p.wait(lambda m, i=i: m["type"] == "tool_call" and m["id"] == f"slow{i}")
             for i in range(2)]
    p.execute("third", "return 3")
    e = p.result("third")
    assert e["type"] == "error" and e["error"]["code"] == "TOO_MANY_EXECUTIONS"
    for c in calls:
        p.send({"type": "tool_result", "id": c["id"], "call": c["call"], "output": 1})
    for i in range(2):
        assert p.result(f"slow{i}", timeout=30)["result"] == 1
    p.execute("fourth", "return 4")
    assert p.result("fourth")["result"] == 4


def test_wrong_subprotocol_and_plain_get(serve):
    s = serve()
    with pytest.raises(Rejected) as ex:
        WsClient(s.host, s.port, token=s.token, protocol="chat")
    assert ex.value.status == 400
    status, _, body = http_request(s.host, s.port, "GET", "/v1/session", token=s.token)
    assert status == 426


def test_execution_ids_are_unique_across_sessions(serve):
    s = serve()
    a, b = Pump(s.connect()), Pump(s.connect())
    a.execute("same", "return 1")
    assert a.result("same")["result"] == 1
    b.execute("same", "return 2")
    e = b.result("same")
    assert e["type"] == "error" and e["error"]["code"] == "INVALID_REQUEST"


def test_client_vanishing_mid_call_is_audited_outcome_unknown(serve):
    s = serve("--reattach-grace", "1")  # nobody attaches: it ends after the grace period
    p = Pump(s.connect())
    p.execute("vanish", "return await tools.never({})", tools=["never"])
    p.wait(lambda m: m["type"] == "tool_call")
    p.ws.abort()
    deadline = time.monotonic() + 20
    while not [a for a in s.logs("audit") if a.get("id") == "vanish"]:
        assert time.monotonic() < deadline, s.stderr_text()
        time.sleep(0.2)
    a = [a for a in s.logs("audit") if a.get("id") == "vanish"][0]
    assert a["code"] == "OUTCOME_UNKNOWN"
