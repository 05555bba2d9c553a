"""The two ways to reach `codepod serve`: a WebSocket (``--listen``, GET
/v1/session, subprotocol codepod.v1, a bearer token) and a child process
(``--stdio``, one JSON object per line, lines of any length)."""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import subprocess
from typing import Callable, Sequence
from urllib.parse import urlsplit, urlunsplit

OnMessage = Callable[[str], None]
OnClosed = Callable[[str], None]


class ConnectError(Exception):
    """codepod could not be reached, or refused the session. ``code`` is the
    client's own: UNAVAILABLE when nothing answered (no such command, nothing
    listening, no route; ``cause_code`` then holds the system's code, such as
    ENOENT or ECONNREFUSED, and ``__cause__`` the original error), else what
    the server answered (UNAUTHORIZED, SHUTTING_DOWN, ...)."""

    def __init__(self, code: str, message: str, cause_code: str | None = None):
        super().__init__(message)
        self.code = code
        self.cause_code = cause_code


def _errno_name(e: BaseException) -> str | None:
    """ENOENT, ECONNREFUSED, ... of an OSError, or of the one an aiohttp error wraps."""
    for err in (e, getattr(e, "os_error", None), e.__cause__):
        n = getattr(err, "errno", None)
        if isinstance(n, int) and n in errno.errorcode:
            return errno.errorcode[n]
    return None


def session_url(base: str) -> str:
    u = urlsplit(base)
    scheme = {"http": "ws", "https": "wss"}.get(u.scheme, u.scheme)
    path = u.path if u.path.endswith("/v1/session") else u.path.rstrip("/") + "/v1/session"
    return urlunsplit((scheme, u.netloc, path, u.query, ""))


LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING, "error": logging.ERROR}


def log_line(logger: logging.Logger, raw: bytes) -> None:
    """One line of codepod's stderr to ``logger`` at its level (a line that is
    not JSON as a warning); the parsed record rides along as ``codepod``."""
    line = raw.decode("utf-8", "replace").rstrip("\n")
    if not line.strip():
        return
    try:
        rec = json.loads(line)
    except ValueError:
        rec = None
    level = LEVELS.get(rec.get("level"), logging.WARNING) if isinstance(rec, dict) else logging.WARNING
    logger.log(level, "%s", line, extra={"codepod": rec})


class StdioLink:
    """A `codepod serve --stdio` child process. With a ``logger``, its stderr
    (JSON log lines) goes there line by line."""

    def __init__(self, proc: asyncio.subprocess.Process, on_message: OnMessage, on_closed: OnClosed,
                 logger: logging.Logger | None = None):
        self.proc = proc
        self._on_message = on_message
        self._on_closed = on_closed
        self._logs = asyncio.ensure_future(self._read_logs(logger)) if logger is not None else None
        self._reader = asyncio.ensure_future(self._read())
        self._down = False

    @classmethod
    async def start(cls, argv: Sequence[str], on_message: OnMessage, on_closed: OnClosed,
                    env=None, cwd=None, stderr=None, logger: logging.Logger | None = None) -> "StdioLink":
        if logger is not None:
            stderr = subprocess.PIPE
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env, cwd=cwd,
                limit=1 << 20)
        except OSError as e:
            name = _errno_name(e)
            raise ConnectError("UNAVAILABLE", f"cannot start {argv[0]}: {name + ': ' if name else ''}{e.strerror or e}",
                               name) from e
        return cls(proc, on_message, on_closed, logger)

    async def _read_logs(self, logger: logging.Logger):
        err = self.proc.stderr
        while True:
            try:
                raw = await err.readline()
            except ValueError:  # one line past the limit: skip it, keep reading
                continue
            if not raw:
                return
            try:
                log_line(logger, raw)
            except Exception:  # noqa: BLE001 - a failing logger must not take the session down
                pass

    async def _read(self):
        # Chunks, split by hand: StreamReader.readline() stops at 64 KiB, and a
        # tool_call's input or a result may be megabytes long.
        out = self.proc.stdout
        pending: list[bytes] = []
        try:
            while True:
                chunk = await out.read(1 << 16)
                if not chunk:
                    break
                start = 0
                while True:
                    nl = chunk.find(b"\n", start)
                    if nl < 0:
                        break
                    pending.append(chunk[start:nl])
                    line = b"".join(pending)
                    pending = []
                    start = nl + 1
                    if line.strip():
                        self._on_message(line.decode("utf-8", "replace"))
                if start < len(chunk):
                    pending.append(chunk[start:])
        finally:
            code = await self.proc.wait()
            self._down = True
            self._on_closed(f"codepod exited with status {code}")

    def send(self, text: str) -> bool:
        if self._down or self.proc.stdin is None or self.proc.stdin.is_closing():
            return False
        try:
            self.proc.stdin.write(text.encode() + b"\n")
        except (BrokenPipeError, ConnectionResetError):
            return False
        return True

    async def close(self):
        if self.proc.stdin and not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        try:
            await self._reader
        except asyncio.CancelledError:
            pass
        if self._logs is not None:
            # Its last lines, unless something the child started still holds the pipe.
            try:
                await asyncio.wait_for(self._logs, 5)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass


class WebSocketLink:
    """One WebSocket session with `codepod serve --listen`.

    Liveness: a PING every ``heartbeat_s``; when nothing (no message, PING or
    PONG) came from the server for ``idle_timeout_s`` the connection is closed
    and reported down, as after a reset. A path that stops forwarding without
    a reset shows no error: only silence tells. 0 turns either off."""

    def __init__(self, http, ws, on_message: OnMessage, on_closed: OnClosed,
                 heartbeat_s: float = 15.0, idle_timeout_s: float = 45.0):
        self._http = http
        self._ws = ws
        self._on_message = on_message
        self._on_closed = on_closed
        self._heartbeat_s = heartbeat_s
        self._idle_timeout_s = idle_timeout_s
        self._heard = self._pinged = asyncio.get_running_loop().time()
        self._why = None
        self._out: asyncio.Queue[str] = asyncio.Queue()
        self._writer = asyncio.ensure_future(self._write())
        self._reader = asyncio.ensure_future(self._read())
        self._watch = asyncio.ensure_future(self._watchdog()) if heartbeat_s > 0 or idle_timeout_s > 0 else None

    @classmethod
    async def open(cls, url: str, token: str, on_message: OnMessage, on_closed: OnClosed,
                   headers=None, heartbeat_s: float = 15.0, idle_timeout_s: float = 45.0) -> "WebSocketLink":
        import aiohttp
        http = aiohttp.ClientSession()
        try:
            # autoping off: the PONGs are what tells a live server from a dead path.
            ws = await http.ws_connect(
                session_url(url), protocols=("codepod.v1",), max_msg_size=64 << 20,
                headers={**(headers or {}), "Authorization": f"Bearer {token}"}, autoping=False)
        except aiohttp.WSServerHandshakeError as e:
            await http.close()
            code = {401: "UNAUTHORIZED", 503: "SHUTTING_DOWN"}.get(e.status, "INTERNAL")
            raise ConnectError(code, f"codepod refused the session: HTTP {e.status}") from e
        except (aiohttp.ClientError, OSError) as e:
            await http.close()
            name = _errno_name(e)
            raise ConnectError("UNAVAILABLE", f"cannot reach codepod at {session_url(url)}: "
                               f"{name + ': ' if name else ''}{e}", name) from e
        return cls(http, ws, on_message, on_closed, heartbeat_s, idle_timeout_s)

    async def _read(self):
        import aiohttp
        loop = asyncio.get_running_loop()
        try:
            async for msg in self._ws:
                self._heard = loop.time()
                if msg.type == aiohttp.WSMsgType.TEXT:
                    self._on_message(msg.data)
                elif msg.type == aiohttp.WSMsgType.PING:
                    await self._ws.pong(msg.data)
                elif msg.type in (aiohttp.WSMsgType.ERROR, aiohttp.WSMsgType.CLOSE,
                                  aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.CLOSED):
                    break
        except (aiohttp.ClientError, OSError, RuntimeError):
            pass
        except asyncio.CancelledError:
            pass  # the watchdog: the server went silent
        finally:
            code = self._ws.close_code
            self._writer.cancel()
            if self._watch:
                self._watch.cancel()
            await self._http.close()
            self._on_closed(self._why or f"the WebSocket closed ({code})")

    async def _watchdog(self):
        loop = asyncio.get_running_loop()
        tick = max(0.01, min(x for x in (self._heartbeat_s, self._idle_timeout_s, 4.0) if x > 0) / 2)
        while True:
            await asyncio.sleep(tick)
            now = loop.time()
            if self._idle_timeout_s > 0 and now - self._heard > self._idle_timeout_s:
                self._why = (f"nothing from codepod for {self._idle_timeout_s} s (idle_timeout_s): "
                             "the connection was closed")
                self._reader.cancel()
                return
            if self._heartbeat_s > 0 and now - self._pinged >= self._heartbeat_s:
                self._pinged = now
                try:
                    await self._ws.ping()
                except (ConnectionError, RuntimeError, OSError):
                    pass  # the reader reports the drop

    def send(self, text: str) -> bool:
        if self._ws.closed or self._writer.done():
            return False
        self._out.put_nowait(text)
        return True

    async def _write(self):
        # One writer, so messages leave in the order they were sent.
        while True:
            text = await self._out.get()
            try:
                await self._ws.send_str(text)
            except (ConnectionError, RuntimeError, OSError):
                return  # the reader reports the drop

    async def close(self):
        await self._ws.close()
        try:
            await self._reader
        except asyncio.CancelledError:
            pass


async def http_json(method: str, base: str, path: str, token: str, body=None, headers=None):
    """(status, parsed JSON or None) for one request to the server's HTTP API."""
    import aiohttp
    u = urlsplit(base)
    url = urlunsplit((u.scheme, u.netloc, u.path.rstrip("/") + path, "", ""))
    async with aiohttp.ClientSession() as http:
        async with http.request(method, url, json=body,
                                headers={**(headers or {}), "Authorization": f"Bearer {token}"}) as r:
            try:
                data = json.loads(await r.text())
            except ValueError:
                data = None
            return r.status, data
