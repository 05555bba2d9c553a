"""HTTP framing and connections without a request head, over raw sockets:
a body length two HTTP parsers could read differently (conflicting
Content-Length values, Content-Length with Transfer-Encoding) is a 400 and
the connection is closed; at most --max-pending-connections connections
may be without a complete request head (silent, part-way through their
headers, or kept alive between requests), each closed after
--header-timeout seconds. Deadlines here only catch hangs."""
import json
import socket
import time

from util import Pump
from wsclient import read_http_response


def raw(s, data, timeout=30):
    """Everything the server sends for @data until it closes (b"" then)."""
    c = socket.create_connection((s.host, s.port), timeout=timeout)
    try:
        c.sendall(data)
        out = b""
        while True:
            d = c.recv(65536)
            if not d:
                return out
            out += d
    finally:
        c.close()


def status_and_error(resp):
    head, _, body = resp.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body)["error"]


def post_head(s, *lines):
    return (b"POST /v1/executions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + s.token.encode() + b"\r\n" + b"".join(l + b"\r\n" for l in lines) + b"\r\n")


BODY = b'{"id":"f1","conversation":"f","js":"return 1","tools":[],"broker":{"url":"http://127.0.0.1:9/"}}'


def test_conflicting_content_lengths_are_400_and_the_connection_closed(serve):
    s = serve()
    for lines in ([b"Content-Length: %d" % len(BODY), b"Content-Length: 5"],
                  [b"Content-Length: 5", b"Content-Length: %d" % len(BODY)],
                  [b"Content-Length: %d, 5" % len(BODY)],
                  [b"Content-Length: -1"]):
        # raw() returning at all means the server closed the connection
        status, err = status_and_error(raw(s, post_head(s, *lines) + BODY + b"GET /healthz HTTP/1.1\r\n\r\n"))
        assert status == 400 and err["code"] == "INVALID_REQUEST", (lines, err)
        assert "Content-Length" in err["message"], err
    # given twice alike: refused too (no parser in front can read it otherwise)
    status, err = status_and_error(raw(s, post_head(s, b"Content-Length: %d" % len(BODY),
                                                    b"Content-Length: %d" % len(BODY)) + BODY))
    assert status == 400 and "Content-Length" in err["message"], err
    # one is served
    resp = raw(s, post_head(s, b"Content-Length: %d" % len(BODY), b"Connection: close") + BODY)
    assert resp.startswith(b"HTTP/1.1 200"), resp[:200]


def test_content_length_with_transfer_encoding_is_400_and_the_connection_closed(serve):
    s = serve()
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY)
    for lines in ([b"Content-Length: 5", b"Transfer-Encoding: chunked"],
                  [b"Transfer-Encoding: chunked", b"Content-Length: 5"]):
        status, err = status_and_error(raw(s, post_head(s, *lines) + chunked))
        assert status == 400 and "Transfer-Encoding" in err["message"], (lines, err)
    # the same on a WebSocket upgrade
    up = (b"GET /v1/session HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
          b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
          b"Sec-WebSocket-Protocol: codepod.v1\r\nAuthorization: Bearer " + s.token.encode()
          + b"\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n")
    status, err = status_and_error(raw(s, up))
    assert status == 400 and "Transfer-Encoding" in err["message"], err


def test_a_kept_alive_connection_is_closed_after_the_header_timeout(serve):
    """Between requests a connection has no request head either: it is closed
    after --header-timeout, not kept for the session idle timeout (300 s)."""
    s = serve("--header-timeout", "2")
    c = socket.create_connection((s.host, s.port), timeout=120)
    try:
        c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        status, _, _, rest = read_http_response(c)
        assert status == 200 and rest == b""
        c.settimeout(120)  # well under 300 s: only a connection kept idle would hang here
        assert c.recv(100) == b""
    finally:
        c.close()


def closed_at_once(s, timeout=30):
    """A new connection that the server closes without a word."""
    c = socket.create_connection((s.host, s.port), timeout=timeout)
    try:
        return c.recv(100) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False
    finally:
        c.close()


def test_at_most_max_pending_connections_without_a_request_head(serve):
    s = serve("--max-pending-connections", "4", "--header-timeout", "120")
    sessions = [Pump(s.connect()), Pump(s.connect())]  # a complete head: not pending
    silent = [socket.create_connection((s.host, s.port), timeout=30) for _ in range(3)]
    partial = socket.create_connection((s.host, s.port), timeout=30)
    partial.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    try:
        # the fifth has no room: closed before it can send anything
        deadline = time.monotonic() + 60
        while not closed_at_once(s, timeout=5):
            assert time.monotonic() < deadline, "a fifth connection without a head was kept"
        # sessions already open go on
        for i, p in enumerate(sessions):
            p.execute(f"p{i}", "return 41 + 1")
            assert p.result(f"p{i}")["result"] == 42
        # one of the four goes away: a new connection is served again
        silent.pop().close()
        deadline = time.monotonic() + 60
        while True:
            try:
                resp = raw(s, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", timeout=5)
                if resp.startswith(b"HTTP/1.1 200"):
                    break
            except (ConnectionResetError, socket.timeout):
                pass
            assert time.monotonic() < deadline, "no room after a pending connection closed"
            time.sleep(0.2)
        # the part-way request still completes (it was counted, not dropped)
        partial.sendall(b"Connection: close\r\n\r\n")
        status, _, _, _ = read_http_response(partial)
        assert status == 200
    finally:
        for c in silent + [partial]:
            c.close()
        for p in sessions:
            p.ws.close()


UPGRADE = (b"GET /v1/session HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
           b"Sec-WebSocket-Protocol: codepod.v1\r\nAuthorization: Bearer %s\r\n\r\n")


def read_until_closed(c):
    out = b""
    while True:
        try:
            d = c.recv(65536)
        except ConnectionResetError:
            return out
        if not d:
            return out
        out += d


def test_an_unmasked_client_frame_closes_with_1002(serve):
    s = serve()
    other = Pump(s.connect())
    msg = json.dumps({"type": "execute", "id": "um", "conversation": "um", "js": "return 1",
                      "tools": []}).encode()
    for first_frame_with_head in (False, True):
        c = socket.create_connection((s.host, s.port), timeout=60)
        try:
            if first_frame_with_head:  # the frame in the same segment as the upgrade
                c.sendall(UPGRADE % s.token.encode() + bytes([0x81, len(msg)]) + msg)
                resp = read_until_closed(c)
            else:
                c.sendall(UPGRADE % s.token.encode())
                status, _, _, rest = read_http_response(c)
                assert status == 101
                c.sendall(bytes([0x81, len(msg)]) + msg)
                resp = rest + read_until_closed(c)
        finally:
            c.close()
        frames = resp.split(b"\r\n\r\n", 1)[-1] if first_frame_with_head else resp
        # the close frame: opcode 8, status 1002, and the execution never ran
        assert frames[:1] == b"\x88" and frames[2:4] == (1002).to_bytes(2, "big"), resp
        assert b"client frames must be masked" in frames
        assert b'"result"' not in resp and b'"type"' not in frames
    other.execute("ok", "return 2")
    assert other.result("ok")["result"] == 2
    assert not [e for e in s.logs("exec.done") if e.get("id") == "um"]


def test_an_unmasked_ping_alone_drops_the_connection(serve):
    """A control frame reaches no message callback: the once-a-second sweep
    drops the connection (lws sends no close frame from there)."""
    s = serve()
    c = socket.create_connection((s.host, s.port), timeout=60)
    try:
        c.sendall(UPGRADE % s.token.encode())
        status, _, _, rest = read_http_response(c)
        assert status == 101
        c.sendall(b"\x89\x02hi")  # an unmasked ping
        resp = rest + read_until_closed(c)
    finally:
        c.close()
    # read_until_closed returned: the server closed the connection
    assert resp.startswith(b"\x8a"), resp  # lws answered the ping first
    assert s.wait_logs("ws.disconnect", lambda lines: [l for l in lines
                                                       if l.get("reason") == "unmasked frame"])


def test_a_websocket_upgrade_must_be_the_connections_first_request(serve):
    s = serve()
    c = socket.create_connection((s.host, s.port), timeout=60)
    try:
        c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        status, _, _, rest = read_http_response(c)
        assert status == 200 and rest == b""
        c.sendall(UPGRADE % s.token.encode())
        status, _, body, _ = read_http_response(c)
        assert status == 400 and "first request" in json.loads(body)["error"]["message"], body
    finally:
        c.close()
