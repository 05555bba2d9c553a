"""The workspace's files over the session protocol: reads and writes travel
base64 in chunks of at most 256 KiB, each acknowledged before the next, so
neither side holds more than a chunk or two of a file whatever its size."""

from __future__ import annotations

import asyncio
import base64
from typing import Any, AsyncIterable, Iterable, Union

from .ops import Channel, CodepodError, Handler, Inbox, error_of, not_connected, request

CHUNK_BYTES = 256 * 1024

Content = Union[bytes, bytearray, memoryview, Iterable[bytes], AsyncIterable[bytes]]


class FileStream(Handler):
    """A read in progress: ``async for chunk in stream`` yields its bytes; the
    next chunk is asked for only when this one was taken. ``result`` (after
    the last chunk) is codepod's file_result: ``size`` and ``etag`` for a file.
    ``size`` and ``etag`` are known from the first chunk on (a Content-Length
    or an ETag before the body). ``await stream.aclose()`` sends ``stop``:
    codepod ends the read CANCELLED rather than sending the rest (``result``
    stays None), and chunks already on their way are dropped unacknowledged."""

    def __init__(self, ch: Channel, op_id: str):
        self._ch = ch
        self.id = op_id
        self._queue: asyncio.Queue = asyncio.Queue()
        self._first: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending_ack = False
        self._discard = False
        self._stopped = False
        self._finished = False
        self.result: dict | None = None
        # A file's whole size and etag, known before its bytes (None for an archive).
        self.size: int | None = None
        self.etag: str | None = None

    # the session's side
    def message(self, m: dict) -> None:
        if self._finished:
            return
        typ = m.get("type")
        if typ in ("file_chunk", "file_result") and self.size is None and isinstance(m.get("size"), int):
            self.size = m["size"]
            self.etag = m.get("etag") if isinstance(m.get("etag"), str) else None
        if typ == "file_chunk":
            if not self._first.done():
                self._first.set_result(None)
            if self._discard:
                return
            self._queue.put_nowait(base64.b64decode(m.get("data") or ""))
        elif typ == "file_result":
            self._finished = True
            self._ch.end(self.id)
            self.result = {k: v for k, v in m.items() if k not in ("type", "id")}
            if not self._first.done():
                self._first.set_result(None)
            self._queue.put_nowait(None)
        elif typ == "error":
            self.down(error_of(m))

    def down(self, err: CodepodError) -> None:
        if self._finished:
            return
        self._finished = True
        self._ch.end(self.id)
        if not self._first.done():
            self._first.set_exception(err)
        else:
            self._queue.put_nowait(err)

    def _ack(self) -> None:
        self._ch.send({"type": "file_ack", "id": self.id})

    # the reader's side
    async def opened(self) -> "FileStream":
        await self._first
        return self

    def __aiter__(self):
        return self

    async def __anext__(self) -> bytes:
        if self._pending_ack:
            self._pending_ack = False
            self._ack()
        item = await self._queue.get()
        if item is None or isinstance(item, BaseException):
            self._queue.put_nowait(item)   # the end stays the end for the next reader
            if item is None:
                raise StopAsyncIteration
            raise item
        # Acknowledged when the reader comes back for more.
        self._pending_ack = True
        return item

    async def read(self) -> bytes:
        return b"".join([c async for c in self])

    async def aclose(self) -> None:
        # The reader wants no more (a few lines of a large file): codepod
        # stops reading rather than sending the rest to be thrown away.
        self._discard = True
        self._pending_ack = False
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if not isinstance(item, bytes):
                self._queue.put_nowait(item)
                break
        if not self._finished and not self._stopped:
            self._stopped = True
            self._ch.send({"type": "stop", "id": self.id})


async def open_read(ch: Channel, first: dict[str, Any]) -> FileStream:
    """Starts a read (file_read, archive_read); raises at once when codepod
    refuses it (NOT_FOUND for a missing file)."""
    if not await ch.ready():
        raise not_connected()
    op_id = ch.new_id()
    fs = FileStream(ch, op_id)
    if not ch.start(op_id, fs, {**first, "id": op_id}):
        raise not_connected()
    return await fs.opened()


async def _pieces(content: Content):
    if isinstance(content, (bytes, bytearray, memoryview)):
        yield bytes(content)
    elif hasattr(content, "__aiter__"):
        async for p in content:  # type: ignore[union-attr]
            yield p
    else:
        for p in content:  # type: ignore[union-attr]
            yield p


async def write(ch: Channel, first: dict[str, Any], content: Content) -> dict:
    """A write (file_write, archive_write): codepod's ready ack, the content in
    chunks of at most CHUNK_BYTES each acked before the next, a last chunk
    (empty when the content ended on a boundary), then the file_result."""
    if not await ch.ready():
        raise not_connected()
    op_id = ch.new_id()
    inbox = Inbox()
    if not ch.start(op_id, inbox, {**first, "id": op_id}):
        raise not_connected()
    ended = False
    try:
        await inbox.next()  # ready
        held = bytearray()
        async for p in _pieces(content):
            if not isinstance(p, (bytes, bytearray, memoryview)):
                raise TypeError("file content must be bytes")
            held += p
            while len(held) > CHUNK_BYTES:
                chunk = bytes(held[:CHUNK_BYTES])
                del held[:CHUNK_BYTES]
                if not ch.send({"type": "file_chunk", "id": op_id, "data": base64.b64encode(chunk).decode()}):
                    raise not_connected()
                await inbox.next()
        if not ch.send({"type": "file_chunk", "id": op_id, "data": base64.b64encode(bytes(held)).decode(),
                        "last": True}):
            raise not_connected()
        res = await inbox.next()
        ended = True
        return {k: v for k, v in res.items() if k not in ("type", "id")}
    except BaseException:
        # Abandoned half way: codepod drops the partial upload, the old file stays.
        if not ended and not inbox.answered_error:
            ch.send({"type": "stop", "id": op_id})
        raise
    finally:
        ch.end(op_id)


class ConversationFiles:
    """The file operations of one conversation, paths relative to its workspace."""

    def __init__(self, ch: Channel, conversation: str):
        self._ch = ch
        self.conversation = conversation

    async def read(self, path: str, offset: int | None = None, length: int | None = None) -> FileStream:
        msg: dict[str, Any] = {"type": "file_read", "conversation": self.conversation, "path": path}
        if offset is not None:
            msg["offset"] = offset
        if length is not None:
            msg["length"] = length
        return await open_read(self._ch, msg)

    async def write(self, path: str, content: Content, if_match: str | None = None,
                    mode: int | None = None) -> dict:
        msg: dict[str, Any] = {"type": "file_write", "conversation": self.conversation, "path": path}
        if if_match is not None:
            msg["ifMatch"] = if_match
        if mode is not None:
            msg["mode"] = mode
        return await write(self._ch, msg, content)

    async def stat(self, path: str) -> dict:
        m = await request(self._ch, {"type": "file_stat", "conversation": self.conversation, "path": path})
        return m["stat"]

    async def list(self, path: str, limit: int | None = None, cursor: str | None = None) -> dict:
        msg: dict[str, Any] = {"type": "file_list", "conversation": self.conversation, "path": path}
        if limit is not None:
            msg["limit"] = limit
        if cursor is not None:
            msg["cursor"] = cursor
        m = await request(self._ch, msg)
        page = {"entries": list(m.get("entries") or [])}
        if isinstance(m.get("next"), str):
            page["next"] = m["next"]
        return page

    async def delete(self, path: str, recursive: bool = False) -> None:
        msg: dict[str, Any] = {"type": "file_delete", "conversation": self.conversation, "path": path}
        if recursive:
            msg["recursive"] = True
        await request(self._ch, msg)

    async def read_archive(self) -> FileStream:
        return await open_read(self._ch, {"type": "archive_read", "conversation": self.conversation})

    async def write_archive(self, content: Content) -> dict:
        return await write(self._ch, {"type": "archive_write", "conversation": self.conversation}, content)


__all__ = ["CHUNK_BYTES", "ConversationFiles", "FileStream", "CodepodError"]
