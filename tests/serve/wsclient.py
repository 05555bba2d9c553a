"""A small RFC 6455 WebSocket client on the stdlib, written for these tests
independently of codepod (and of libwebsockets): handshake with an optional
bearer token and subprotocol, masked text frames, fragmentation, ping/pong,
close. Blocking; one reader at a time."""

import base64
import hashlib
import os
import socket
import struct
import threading

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class Rejected(Exception):
    def __init__(self, status, headers, body):
        super().__init__(f"HTTP {status}: {body[:200]!r}")
        self.status, self.headers, self.body = status, headers, body


class Closed(Exception):
    pass


def read_http_response(sock, buf=b""):
    """(status, headers dict, body, leftover) of one HTTP/1.1 response."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise Closed(f"connection closed during the response headers: {buf[:200]!r}")
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    if status == 101:
        return status, headers, b"", rest
    n = int(headers.get("content-length", "0"))
    while len(rest) < n:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return status, headers, rest[:n], rest[n:]


class WsClient:
    def __init__(self, host, port, token=None, path="/v1/session", protocol="codepod.v1",
                 timeout=30, extra_headers=()):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.settimeout(None)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [f"GET {path} HTTP/1.1", f"Host: {host}:{port}", "Upgrade: websocket",
                 "Connection: Upgrade", f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"]
        if protocol:
            lines.append(f"Sec-WebSocket-Protocol: {protocol}")
        if token is not None:
            lines.append(f"Authorization: Bearer {token}")
        lines.extend(extra_headers)
        self.sock.settimeout(timeout)
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        status, headers, body, rest = read_http_response(self.sock)
        if status != 101:
            self.sock.close()
            raise Rejected(status, headers, body)
        want = base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()
        assert headers.get("sec-websocket-accept") == want, headers
        assert headers.get("sec-websocket-protocol") == protocol, headers
        self.sock.settimeout(None)
        self.buf = rest
        self.wlock = threading.Lock()
        self.closed = False
        self.close_code = None
        self.pings = 0  # PINGs read (each answered by recv)

    # ------------------------------------------------------------ writing
    def _frame(self, opcode, payload, fin=True):
        head = bytes([(0x80 if fin else 0) | opcode])
        n = len(payload)
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        # XOR through int arithmetic: fast enough for tens of MB
        m = int.from_bytes((mask * (n // 4 + 1))[:n], "big") if n else 0
        body = (int.from_bytes(payload, "big") ^ m).to_bytes(n, "big") if n else b""
        return head + mask + body

    def send_frame(self, opcode, payload, fin=True):
        data = self._frame(opcode, payload, fin)
        with self.wlock:
            self.sock.sendall(data)

    def send_text(self, text):
        if isinstance(text, str):
            text = text.encode()
        self.send_frame(0x1, text)

    def send_fragments(self, chunks, opcode=0x1):
        with self.wlock:
            last = len(chunks) - 1
            for i, c in enumerate(chunks):
                self.sock.sendall(self._frame(opcode if i == 0 else 0x0, c, fin=(i == last)))

    def close(self, code=1000):
        if self.closed:
            return
        self.closed = True
        try:
            self.send_frame(0x8, struct.pack("!H", code))
        except OSError:
            pass
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def abort(self):
        """Drop the TCP connection without a close frame (a vanished client)."""
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)   # wakes a reader blocked in recv
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass

    # ------------------------------------------------------------ reading
    def _need(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise Closed("connection closed")
            self.buf += chunk

    def _read_frame(self):
        self._need(2)
        b0, b1 = self.buf[0], self.buf[1]
        n = b1 & 0x7F
        off = 2
        if n == 126:
            self._need(4)
            n = struct.unpack("!H", self.buf[2:4])[0]
            off = 4
        elif n == 127:
            self._need(10)
            n = struct.unpack("!Q", self.buf[2:10])[0]
            off = 10
        assert not (b1 & 0x80), "a server must not mask its frames"
        self._need(off + n)
        payload = self.buf[off:off + n]
        self.buf = self.buf[off + n:]
        return bool(b0 & 0x80), b0 & 0x0F, payload

    def recv(self):
        """The next whole text message (str); raises Closed at the end."""
        parts = []
        while True:
            fin, op, payload = self._read_frame()
            if op == 0x9:
                self.pings += 1
                self.send_frame(0xA, payload)
                continue
            if op == 0xA:
                continue
            if op == 0x8:
                self.close_code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                self.close()
                raise Closed(f"close frame {self.close_code}")
            parts.append(payload)
            if fin:
                return b"".join(parts).decode("utf-8")


def http_request(host, port, method, path, token=None, body=None, headers=(), timeout=30):
    """(status, headers, body) of one HTTP/1.1 request on a fresh connection."""
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", "Connection: close"]
        if token is not None:
            lines.append(f"Authorization: Bearer {token}")
        if body is not None:
            lines.append("Content-Type: application/json")
            lines.append(f"Content-Length: {len(body)}")
        lines.extend(headers)
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b""))
        status, hdrs, data, _ = read_http_response(sock)
        return status, hdrs, data
    finally:
        sock.close()
