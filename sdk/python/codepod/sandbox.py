"""One conversation's sandbox: the files of its workspace and shell commands
beside its programs, the operations of the AI SDK's sandbox under snake_case
names, over the session the Codepod holds."""

from __future__ import annotations

import asyncio
import codecs
import re
from typing import Any, Mapping, Sequence

from .commands import MAX_UNREAD_BYTES, Command, OnOutput, start_command
from .files import Content, ConversationFiles, FileStream
from .ops import Channel, CodepodError

WORKSPACE = "/workspace"


def workspace_path(p: str) -> str:
    """A path of the model's (absolute under /workspace, or relative to it) as
    the protocol takes it: relative to the workspace, "." for the workspace
    itself. Rules that need the file system (``..`` out of it, symlinks) are
    codepod's to check; this only refuses what cannot be in the workspace."""
    if not isinstance(p, str) or p == "":
        raise CodepodError("INVALID_REQUEST", "a path is needed")
    rel = p
    if p.startswith("/"):
        norm = re.sub(r"/\.(?=/|$)", "", re.sub(r"/+", "/", p))
        if norm in (WORKSPACE, WORKSPACE + "/"):
            return "."
        if not norm.startswith(WORKSPACE + "/"):
            raise CodepodError("INVALID_REQUEST", f"only paths under {WORKSPACE} (the workspace) can be reached")
        rel = norm[len(WORKSPACE) + 1:]
    rel = re.sub(r"^(\./)+", "", re.sub(r"/+", "/", rel)).rstrip("/")
    return rel or "."


def _not_found(e: BaseException) -> bool:
    return isinstance(e, CodepodError) and e.code == "NOT_FOUND"


def default_description(conversation: str) -> str:
    return "\n".join([
        f"A Linux sandbox of codepod, shared by this conversation ({conversation}): its programs, shell commands "
        "and files.",
        f"The workspace is {WORKSPACE}: the working directory of every command, where relative paths resolve and "
        "files persist across calls.",
        "Commands run through /bin/sh -c as an unprivileged user with no network access, each in a fresh process "
        "with a deadline; nothing outside the workspace persists.",
    ])


class Sandbox:
    """``cp.sandbox(conversation)``. Paths are the workspace's (absolute under
    /workspace, or relative to it). Missing files are None (reads, stat,
    list_directory) or False (delete_file); other refusals raise CodepodError."""

    def __init__(self, ch: Channel, conversation: str, policy: Mapping[str, Any] | None = None,
                 description: str | None = None):
        self._ch = ch
        self.conversation = conversation
        self.policy = dict(policy) if policy else None
        self.description = description or default_description(conversation)
        self.files = ConversationFiles(ch, conversation)

    # ---- reading -----------------------------------------------------------

    async def open_file(self, path: str, offset: int | None = None, length: int | None = None) -> FileStream | None:
        """A streaming read (``async for chunk in stream``; ``stream.result``
        has size and etag after the end); None when the file does not exist."""
        try:
            return await self.files.read(workspace_path(path), offset, length)
        except CodepodError as e:
            if _not_found(e):
                return None
            raise

    async def read_file(self, path: str, offset: int | None = None, length: int | None = None) -> bytes | None:
        s = await self.open_file(path, offset, length)
        return None if s is None else await s.read()

    async def read_text_file(self, path: str, encoding: str = "utf-8", start_line: int | None = None,
                             end_line: int | None = None) -> str | None:
        """The file decoded; with a line range, the lines start_line..end_line
        (1-based, inclusive) with their line ends, so consecutive ranges put
        together give the file back. Reading stops once end_line is reached."""
        s = await self.open_file(path)
        if s is None:
            return None
        if start_line is None and end_line is None:
            return (await s.read()).decode(encoding)
        dec = codecs.getincrementaldecoder(encoding)()
        start = max(1, int(start_line or 1))
        end = float("inf") if end_line is None else int(end_line)
        line = 1
        out: list[str] = []
        rest = ""
        async for chunk in s:
            rest += dec.decode(chunk)
            while (nl := rest.find("\n")) != -1:
                if start <= line <= end:
                    out.append(rest[:nl + 1])
                rest = rest[nl + 1:]
                line += 1
                if line > end:
                    await s.aclose()
                    return "".join(out)
        rest += dec.decode(b"", final=True)
        if rest and start <= line <= end:
            out.append(rest)
        return "".join(out)

    # ---- writing -----------------------------------------------------------

    async def write_file(self, path: str, content: Content, if_match: str | None = None,
                         mode: int | None = None) -> dict:
        """Replaces the file atomically (parents created) from bytes or an
        (async) iterable of bytes, read only as fast as codepod takes it;
        returns ``{"size", "etag"}``. A stale ``if_match`` raises PRECONDITION_FAILED."""
        return await self.files.write(workspace_path(path), content, if_match, mode)

    async def write_text_file(self, path: str, text: str, encoding: str = "utf-8") -> dict:
        return await self.write_file(path, text.encode(encoding))

    # ---- the rest ----------------------------------------------------------

    async def stat(self, path: str) -> dict | None:
        """``{"type", "size", "mode", "mtimeMs"}``, or None when it does not exist."""
        try:
            return await self.files.stat(workspace_path(path))
        except CodepodError as e:
            if _not_found(e):
                return None
            raise

    async def list_directory(self, path: str = WORKSPACE) -> list[dict] | None:
        """Every entry (``{"name", "type", "size"}``, pages followed, sorted by
        name), or None when the directory does not exist."""
        rel = workspace_path(path)
        out: list[dict] = []
        cursor = None
        try:
            while True:
                page = await self.files.list(rel, cursor=cursor)
                out += page["entries"]
                cursor = page.get("next")
                if cursor is None:
                    return out
        except CodepodError as e:
            if _not_found(e):
                return None
            raise

    async def delete_file(self, path: str, recursive: bool = False) -> bool:
        """True when deleted, False when it did not exist; a directory needs ``recursive``."""
        try:
            await self.files.delete(workspace_path(path), recursive)
            return True
        except CodepodError as e:
            if _not_found(e):
                return False
            raise

    async def list_workspace(self, limit: int = 1000) -> list[str]:
        """The workspace's files (paths relative to it), breadth first, at
        most ``limit``; symlinks are not followed."""
        out: list[str] = []
        dirs = ["."]
        while dirs and len(out) < limit:
            d = dirs.pop(0)
            for e in await self.list_directory(d) or []:
                p = e["name"] if d == "." else f"{d}/{e['name']}"
                if e["type"] == "directory":
                    dirs.append(p)
                elif e["type"] == "file" and len(out) < limit:
                    out.append(p)
        return out

    # ---- commands ----------------------------------------------------------

    def _cmd(self, command, argv, cwd, env, policy) -> dict:
        kw: dict[str, Any] = {}
        if isinstance(command, (list, tuple)):
            argv, command = command, None
        kw["command"], kw["argv"] = command, argv
        if cwd is not None:
            c = workspace_path(cwd)
            if c != ".":
                kw["cwd"] = c
        kw["env"] = env
        kw["policy"] = policy if policy is not None else self.policy
        return kw

    async def spawn(self, command: str | Sequence[str] | None = None, *, argv: Sequence[str] | None = None,
                    cwd: str | None = None, env: Mapping[str, str] | None = None, stdin: bool = False,
                    policy: Mapping[str, Any] | None = None, on_output: OnOutput | None = None,
                    max_unread_bytes: int = MAX_UNREAD_BYTES) -> Command:
        """A long-running command (a shell line, or an argv list): output
        streams as it comes (``async for chunk in proc.stdout``), stdin is
        writable with ``stdin=True``; ``await proc.wait()`` is its exit code.
        A stream keeps at most ``max_unread_bytes`` unread, then counts what
        it drops in ``proc.stdout.dropped``."""
        return await start_command(self._ch, self.conversation, stream=True, stdin=stdin, on_output=on_output,
                                   max_unread_bytes=max_unread_bytes,
                                   **self._cmd(command, argv, cwd, env, policy))

    async def run(self, command: str | Sequence[str] | None = None, *, argv: Sequence[str] | None = None,
                  cwd: str | None = None, env: Mapping[str, str] | None = None,
                  stdin: bytes | str | None = None, policy: Mapping[str, Any] | None = None) -> dict:
        """Runs it to its end: codepod's command_result (``exitCode``,
        ``stdout``, ``stderr``, truncation flags, ``signal``, ``usage``). A
        non-zero exit is no error; one that did not end by itself (TIMEOUT,
        CANCELLED) raises CodepodError with that code."""
        cmd = await start_command(self._ch, self.conversation, stdin=stdin is not None,
                                  **self._cmd(command, argv, cwd, env, policy))
        try:
            if stdin is not None:
                await cmd.write(stdin)
                await cmd.close_stdin()
            r = await asyncio.shield(cmd.result)
        except asyncio.CancelledError:
            await cmd.kill()
            raise
        if r.get("status") != "ok":
            err = r.get("error") or {}
            raise CodepodError(str(err.get("code", "INTERNAL")), str(err.get("message", "the command failed")))
        return r

    async def read_archive(self) -> FileStream:
        """The whole workspace as a tar, streamed."""
        return await self.files.read_archive()

    async def write_archive(self, content: Content) -> dict:
        """Extracts a tar into the workspace; ``{"files": N}``."""
        return await self.files.write_archive(content)
