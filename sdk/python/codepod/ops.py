"""Requests of a session that are not executions (files and commands): each
has an id from the same namespace as execution ids and a handler that sees
every message carrying that id. The Codepod session owns the registry; the
file and command modules reach it only through a Channel."""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Protocol


class CodepodError(Exception):
    """What codepod refused or reported; ``code`` says which (NOT_FOUND,
    PRECONDITION_FAILED, TOO_LARGE, INVALID_REQUEST, TIMEOUT, ...)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def error_of(m: dict) -> CodepodError:
    e = m.get("error") if isinstance(m.get("error"), dict) else m
    code = e.get("code")
    message = e.get("message")
    return CodepodError(code if isinstance(code, str) else "INTERNAL",
                        message if isinstance(message, str) else "codepod refused the request")


def not_connected() -> CodepodError:
    return CodepodError("SANDBOX_UNAVAILABLE", "codepod is not connected")


class Handler:
    """What the session calls for one op: ``message(m)`` for each of its
    messages, ``down(err)`` when the session lost it. ``reattach``: a command,
    re-attached after a WebSocket reconnect like an execution."""

    reattach = False

    def message(self, m: dict) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def down(self, err: CodepodError) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class Channel(Protocol):
    async def ready(self) -> bool: ...
    def new_id(self) -> str: ...
    def start(self, op_id: str, handler: Handler, first: dict) -> bool: ...
    def send(self, msg: dict) -> bool: ...
    def end(self, op_id: str) -> None: ...


class Inbox(Handler):
    """An op's messages, taken one at a time: ``await next()`` raises the
    CodepodError of an error message, or of the session losing the op."""

    def __init__(self):
        self._queue: asyncio.Queue = asyncio.Queue()
        self.answered_error = False

    def message(self, m: dict) -> None:
        self._queue.put_nowait(m)

    def down(self, err: CodepodError) -> None:
        self._queue.put_nowait(err)

    def fail(self, err: BaseException) -> None:
        self._queue.put_nowait(err)

    async def next(self) -> dict:
        m = await self._queue.get()
        if isinstance(m, BaseException):
            raise m
        if m.get("type") == "error":
            self.answered_error = True
            raise error_of(m)
        return m


async def request(ch: Channel, msg: dict[str, Any]) -> dict:
    """One request answered by one message: that message, or its error raised."""
    if not await ch.ready():
        raise not_connected()
    op_id = ch.new_id()
    inbox = Inbox()
    if not ch.start(op_id, inbox, {**msg, "id": op_id}):
        raise not_connected()
    try:
        return await inbox.next()
    finally:
        ch.end(op_id)


OnDown = Callable[[CodepodError], None]
