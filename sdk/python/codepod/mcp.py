"""MCP tools as codepod tools, through a small stdio JSON-RPC client.

The MCP Python SDK is not needed: :class:`McpStdioClient` starts an MCP
server as a child process, speaks newline-delimited JSON-RPC 2.0 on its
stdin and stdout (the MCP stdio transport), and does the three things a
code tool needs: ``initialize``, ``tools/list`` and ``tools/call``.
:func:`mcp_tools` turns the server's tools into :class:`codepod.Tool`\\ s::

    async with McpStdioClient(["npx", "@modelcontextprotocol/server-everything", "stdio"]) as mcp:
        code = await cp.code_tool(conversation="thread-42", tools=await mcp_tools(mcp))

A tool's structured output (``structuredContent``) reaches the program as
JSON; otherwise the text of its content. A result with ``isError`` makes the
program's call throw with that text.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from typing import Any, Mapping, Sequence

from .tools import Tool

PROTOCOL_VERSION = "2025-06-18"
MAX_LINE = 64 << 20


class McpError(Exception):
    """The server answered a request with a JSON-RPC error, or went away."""


class McpStdioClient:
    """One MCP server as a child process (``argv``), its requests matched by id."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
                 name: str = "codepod", version: str = "1.0.0"):
        self.argv = list(argv)
        self.env = dict(env) if env is not None else None
        self.client_info = {"name": name, "version": version}
        self.server_info: dict = {}
        self._proc: asyncio.subprocess.Process | None = None
        self._next = 0
        self._waiting: dict[int, asyncio.Future] = {}
        self._reader: asyncio.Task | None = None

    async def __aenter__(self) -> "McpStdioClient":
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def start(self) -> None:
        self._proc = await asyncio.create_subprocess_exec(
            *self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=self.env, limit=MAX_LINE)
        self._reader = asyncio.create_task(self._read())
        r = await self.request("initialize", {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                                              "clientInfo": self.client_info})
        self.server_info = r.get("serverInfo", {}) if isinstance(r, dict) else {}
        self._write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def close(self) -> None:
        p = self._proc
        if p is None:
            return
        self._proc = None
        if p.stdin:
            p.stdin.close()
        try:
            await asyncio.wait_for(p.wait(), 5)
        except asyncio.TimeoutError:
            p.kill()
            await p.wait()
        if self._reader:
            self._reader.cancel()
        self._fail_all(McpError("the MCP server was closed"))

    def _write(self, msg: dict) -> None:
        if self._proc is None or self._proc.stdin is None:
            raise McpError("the MCP server is not running")
        self._proc.stdin.write(json.dumps(msg, ensure_ascii=False).encode() + b"\n")

    def _fail_all(self, e: Exception) -> None:
        for f in self._waiting.values():
            if not f.done():
                f.set_exception(e)
        self._waiting.clear()

    async def _read(self) -> None:
        assert self._proc and self._proc.stdout
        try:
            while True:
                line = await self._proc.stdout.readline()
                if not line:
                    break
                try:
                    m = json.loads(line)
                except ValueError:
                    continue  # not ours to judge: servers may log on stdout by mistake
                if not isinstance(m, dict):
                    continue
                if "method" in m and "id" in m:  # a request from the server (ping, ...)
                    self._write({"jsonrpc": "2.0", "id": m["id"],
                                 **({"result": {}} if m["method"] == "ping" else
                                    {"error": {"code": -32601, "message": "method not found"}})})
                    continue
                f = self._waiting.pop(m.get("id"), None) if isinstance(m.get("id"), int) else None
                if f is None or f.done():
                    continue
                if isinstance(m.get("error"), dict):
                    f.set_exception(McpError(str(m["error"].get("message", "MCP error"))))
                else:
                    f.set_result(m.get("result"))
        except (ValueError, asyncio.LimitOverrunError, OSError) as e:
            self._fail_all(McpError(f"the MCP server's output could not be read: {e}"))
            return
        self._fail_all(McpError("the MCP server exited"))

    async def request(self, method: str, params: Mapping[str, Any] | None = None) -> Any:
        self._next += 1
        rid = self._next
        f = asyncio.get_running_loop().create_future()
        self._waiting[rid] = f
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = dict(params)
        self._write(msg)
        try:
            return await f
        except asyncio.CancelledError:
            # The call is no longer wanted: tell the server, as MCP says.
            self._waiting.pop(rid, None)
            try:
                self._write({"jsonrpc": "2.0", "method": "notifications/cancelled",
                             "params": {"requestId": rid, "reason": "cancelled by codepod"}})
            except McpError:
                pass
            raise

    async def list_tools(self) -> list[dict]:
        tools: list[dict] = []
        cursor = None
        while True:
            r = await self.request("tools/list", {"cursor": cursor} if cursor else {})
            tools.extend(t for t in (r or {}).get("tools", []) if isinstance(t, dict))
            cursor = (r or {}).get("nextCursor")
            if not cursor:
                return tools

    async def call_tool(self, name: str, arguments: Any) -> dict:
        r = await self.request("tools/call", {"name": name, "arguments": arguments})
        return r if isinstance(r, dict) else {}


def _output(name: str, r: Mapping[str, Any]) -> Any:
    content = r.get("content") if isinstance(r.get("content"), list) else []
    texts = [c["text"] for c in content if isinstance(c, dict) and c.get("type") == "text"
             and isinstance(c.get("text"), str)]
    if r.get("isError"):
        raise RuntimeError("\n".join(texts) or f"MCP tool {name} failed")
    if "structuredContent" in r:
        return r["structuredContent"]
    if content and len(texts) == len(content):
        return "\n".join(texts)
    return content


def _plain(schema: Any) -> dict:
    if not isinstance(schema, dict):
        return {"type": "object"}
    return {k: v for k, v in schema.items() if k != "$schema"}


def _caller(client: McpStdioClient, name: str):
    async def call(value):  # one parameter: the SDK passes no context
        return _output(name, await client.call_tool(name, value))
    return call


async def mcp_tools(client: McpStdioClient, only: Sequence[str] | None = None) -> dict[str, Tool]:
    """The server's tools (all, or those named in ``only``) as codepod tools."""
    out: dict[str, Tool] = {}
    for t in await client.list_tools():
        name = t.get("name")
        if not isinstance(name, str) or (only is not None and name not in only):
            continue

        out[name] = Tool(fn=_caller(client, name), input_schema=_plain(t.get("inputSchema")),
                         description=t.get("description") if isinstance(t.get("description"), str) else None,
                         output_schema=_plain(t["outputSchema"]) if isinstance(t.get("outputSchema"), dict) else None)
    return out
