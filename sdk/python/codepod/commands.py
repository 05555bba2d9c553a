"""Shell commands in a conversation's sandbox (the `command` message): a
fresh process beside the programs, with the same isolation and limits. Its
output can stream as it comes, its stdin can be written, `stop` kills it."""

from __future__ import annotations

import asyncio
import base64
from typing import Any, Callable, Mapping, Sequence

from .ops import Channel, CodepodError, Handler, error_of, not_connected

STDIN_CHUNK = 256 * 1024
SIGNALS = {"SIGHUP": 1, "SIGINT": 2, "SIGQUIT": 3, "SIGABRT": 6, "SIGKILL": 9, "SIGSEGV": 11, "SIGPIPE": 13,
           "SIGTERM": 15}
OnOutput = Callable[[str, bytes], None]


# Unread streamed output a command keeps per stream: codepod does not wait
# for a reader (there is no flow control on a command's output), so a
# stream nobody reads must not grow with everything the command prints.
MAX_UNREAD_BYTES = 8 * 1024 * 1024


class _Output:
    """One stream's bytes as they come: ``async for chunk in proc.stdout``.
    At most ``max_unread_bytes`` (default ``MAX_UNREAD_BYTES``) wait unread;
    output past that is dropped and counted in ``dropped`` (``on_output``
    still gets all of it)."""

    def __init__(self, max_unread: int = MAX_UNREAD_BYTES):
        self._queue: asyncio.Queue = asyncio.Queue()
        self._max_unread = max_unread
        self._unread = 0
        self.dropped = 0

    def _put(self, item) -> None:
        if isinstance(item, bytes):
            if self._unread + len(item) > self._max_unread:
                self.dropped += len(item)
                return
            self._unread += len(item)
        self._queue.put_nowait(item)

    def __aiter__(self):
        return self

    async def __anext__(self) -> bytes:
        item = await self._queue.get()
        if item is None:
            self._queue.put_nowait(None)
            raise StopAsyncIteration
        if isinstance(item, BaseException):
            self._queue.put_nowait(item)
            raise item
        self._unread -= len(item)
        return item

    async def read(self) -> bytes:
        return b"".join([c async for c in self])


class Command(Handler):
    """A command codepod accepted. ``stdout``/``stderr``: its streamed output
    (with ``stream=True``); ``await write(data)`` / ``await close_stdin()``
    (with ``stdin=True``); ``await wait()`` its exit code; ``await result``
    codepod's whole command_result; ``await kill()`` stops it."""

    reattach = True

    def __init__(self, ch: Channel, op_id: str, on_output: OnOutput | None,
                 max_unread_bytes: int = MAX_UNREAD_BYTES):
        self._ch = ch
        self.id = op_id
        self._on_output = on_output
        loop = asyncio.get_running_loop()
        self._accepted: asyncio.Future = loop.create_future()
        self.result: asyncio.Future = loop.create_future()
        self.stdout = _Output(max_unread_bytes)
        self.stderr = _Output(max_unread_bytes)
        self.ended = False

    def message(self, m: dict) -> None:
        typ = m.get("type")
        if typ == "accepted":
            if not self._accepted.done():
                self._accepted.set_result(None)
        elif typ == "command_output":
            data = base64.b64decode(m.get("data") or "")
            which = "stderr" if m.get("stream") == "stderr" else "stdout"
            (self.stderr if which == "stderr" else self.stdout)._put(data)
            if self._on_output:
                try:
                    self._on_output(which, data)
                except Exception:  # noqa: BLE001 - a failing on_output must not end the session
                    pass
        elif typ == "command_result":
            if not self._accepted.done():
                self._accepted.set_result(None)
            self._finish({k: v for k, v in m.items() if k not in ("type", "id")})
        elif typ == "error":
            if not self._accepted.done() or m.get("inReplyTo") in ("command", "attach"):
                self._finish(error_of(m))

    def down(self, err: CodepodError) -> None:
        self._finish(err)

    def _finish(self, r) -> None:
        if self.ended:
            return
        self.ended = True
        self._ch.end(self.id)
        end = r if isinstance(r, BaseException) else None
        self.stdout._put(end)
        self.stderr._put(end)
        if isinstance(r, BaseException):
            if not self._accepted.done():
                self._accepted.set_exception(r)
            if not self.result.done():
                self.result.set_exception(r)
                self.result.exception()  # seen: the caller may never await it
        elif not self.result.done():
            self.result.set_result(r)

    async def write(self, data: bytes | str) -> None:
        if isinstance(data, str):
            data = data.encode()
        for at in range(0, len(data), STDIN_CHUNK):
            self._stdin({"type": "command_stdin", "id": self.id,
                         "data": base64.b64encode(data[at:at + STDIN_CHUNK]).decode()})

    async def close_stdin(self) -> None:
        if not self.ended:
            self._stdin({"type": "command_stdin", "id": self.id, "eof": True})

    def _stdin(self, m: dict) -> None:
        if self.ended:
            raise CodepodError("PROCESS_EXITED", "the command has ended")
        if not self._ch.send(m):
            raise not_connected()

    async def wait(self) -> int:
        """Its exit code: 128 + N when signal N ended it. One stopped by
        kill() or its deadline has none of its own (codepod says null): it was
        killed, so 137 (128 + SIGKILL) unless codepod names the signal."""
        r = await asyncio.shield(self.result)
        if r.get("exitCode") is not None:
            return int(r["exitCode"])
        return 128 + SIGNALS.get(str(r.get("signal")), 9)

    async def kill(self) -> None:
        """Stops it and waits until it ended. Idempotent."""
        if not self.ended:
            self._ch.send({"type": "stop", "id": self.id})
        try:
            await asyncio.shield(self.result)
        except CodepodError:
            pass


async def start_command(ch: Channel, conversation: str, *, command: str | None = None,
                        argv: Sequence[str] | None = None, cwd: str | None = None,
                        env: Mapping[str, str] | None = None, stdin: bool = False, stream: bool = False,
                        policy: Mapping[str, Any] | None = None, on_output: OnOutput | None = None,
                        id: str | None = None, max_unread_bytes: int = MAX_UNREAD_BYTES) -> Command:
    """Sends the command; returns once codepod accepted it, raises its refusal."""
    if (command is None) == (argv is None):
        raise TypeError("a command needs exactly one of command and argv")
    if not await ch.ready():
        raise not_connected()
    op_id = id or ch.new_id()
    msg: dict[str, Any] = {"type": "command", "id": op_id, "conversation": conversation}
    if command is not None:
        msg["command"] = command
    else:
        msg["argv"] = list(argv or [])
    if cwd is not None:
        msg["cwd"] = cwd
    if env is not None:
        msg["env"] = dict(env)
    if stdin:
        msg["stdin"] = True
    if stream:
        msg["stream"] = True
    if policy:
        msg["policy"] = dict(policy)
    cmd = Command(ch, op_id, on_output, max_unread_bytes)
    if not ch.start(op_id, cmd, msg):
        raise not_connected()
    try:
        await asyncio.shield(cmd._accepted)
    except asyncio.CancelledError:
        await cmd.kill()
        raise
    return cmd
