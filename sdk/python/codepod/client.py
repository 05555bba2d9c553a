"""Codepod: one session with `codepod serve`, over a WebSocket or a child's
stdio, multiplexing any number of executions (session protocol v1.1 of
docs/contract.md §5, degrading to v1 where a server lacks the additions)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from . import model
from .policy import check_policy
from .ops import CodepodError, Handler
from .outcome import Outcome
from .sandbox import Sandbox
from .tools import Runnable, Tool, ToolContext, prepare, to_json_text
from .transport import ConnectError, StdioLink, WebSocketLink, http_json

Trace = Callable[[str, str], None]
OnLog = Callable[[str, str], None]
# (the exception a tool raised, {"tool", "call", "execution_id", "conversation"})
# -> the message the program, and so the model, sees.
ToModelError = Callable[[BaseException, dict], str]
MAX_TOOL_ERROR = 2000
CLOSE_WAIT_S = 5.0   # how long close() waits for the outcomes of the executions it stops
STOP_WAIT_S = 3.0    # after a stop, how long run() waits for codepod's CANCELLED before settling by itself
DEADLINE_SLACK_S = 10.0  # past the program's startup and deadline, how long run() waits for its outcome
DEFAULT_STARTUP_MS = 120000  # the server's startup timeout when the policy does not say


_LOGGED = object()  # spawn()'s default stderr: line by line to its logger


def _model_error(ex: "_Exec", e: BaseException, tool: str, call: str) -> str:
    """What the program sees of a tool's exception: the hook's text, else its message."""
    if ex.to_model_error is not None:
        try:
            text = ex.to_model_error(e, {"tool": tool, "call": call, "execution_id": ex.id,
                                         "conversation": ex.conversation})
        except Exception:  # noqa: BLE001 - a failing hook must not leak what it was hiding
            text = None
        return text if isinstance(text, str) and text else f"Tool {tool} failed"
    return str(e) or f"Tool {tool} failed"


def _lost(eid: str, code: str, message: str) -> dict:
    return {"executionId": eid, "status": "failed", "logs": "", "logsTruncated": False,
            "calls": [], "error": {"code": code, "message": message}}


@dataclass
class _Call:
    task: asyncio.Task | None = None
    ctx: ToolContext | None = None
    answer: str | None = None   # sent again if codepod asks again after a reattach


@dataclass
class _Exec:
    id: str
    conversation: str
    tools: dict[str, Runnable]
    on_log: OnLog | None
    future: asyncio.Future
    to_model_error: ToModelError | None = None
    accepted: bool = False
    saw_call: bool = False
    stop_wanted: bool = False
    attaching: bool = False
    unconfirmed: bool = False   # an answer was sent and nothing of the execution came since
    calls: dict[str, _Call] = field(default_factory=dict)


class Codepod:
    """A session with codepod. Make one with ``await Codepod.spawn([...])`` or
    ``await Codepod.connect(url, token)``; end it with ``await cp.close()``."""

    def __init__(self, opener, *, http=None, argv=None, env=None, trace: Trace | None = None):
        self._opener = opener
        self._http = http          # (url, token, headers, reconnect_s) for WebSocket sessions
        self._argv = argv          # the stdio command, for `codepod declarations`
        self._env = env
        self._trace = trace
        self._link = None
        self._execs: dict[str, _Exec] = {}
        # Settled here without codepod's word (stop or deadline with the
        # connection dead): stopped once a session is back.
        self._orphans: set[str] = set()
        self._ops: dict[str, Handler] = {}   # files and commands: the same id namespace
        self._decl: dict[str, asyncio.Future] = {}
        self._decl_seq = 0
        self._closing = False
        self._reconnecting: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()

    # ---- making a session ---------------------------------------------------

    @classmethod
    async def spawn(cls, argv: Sequence[str] = ("codepod", "serve", "--stdio"), *, env=None, cwd=None,
                    stderr=_LOGGED, logger: logging.Logger | None = None,
                    trace: Trace | None = None) -> "Codepod":
        """A `codepod serve --stdio` child. Its operational logs (JSON lines on
        its stderr) go to ``logger`` at their level (default: the
        ``codepod.server`` logger, which like any shows only warnings and
        errors until logging is configured). ``stderr`` instead of that: the
        child's stderr as it is (None: inherited; ``subprocess.DEVNULL``: dropped)."""
        argv = list(argv)
        if stderr is _LOGGED:
            stderr, logger = None, logger or logging.getLogger("codepod.server")
        else:
            logger = None
        cp = cls(None, argv=argv, env=env, trace=trace)
        cp._opener = lambda on_msg, on_closed: StdioLink.start(argv, on_msg, on_closed, env=env, cwd=cwd,
                                                               stderr=stderr, logger=logger)
        await cp._open()
        return cp

    @classmethod
    async def connect(cls, url: str, token: str, *, headers: Mapping[str, str] | None = None,
                      reconnect_s: float = 25.0, trace: Trace | None = None,
                      heartbeat_s: float = 15.0, idle_timeout_s: float = 45.0) -> "Codepod":
        """A WebSocket session with `codepod serve --listen` at ``url``
        (``http://host:port``). A dropped connection is reconnected and its
        executions re-attached for up to ``reconnect_s`` seconds. The client
        pings every ``heartbeat_s``; a server silent for ``idle_timeout_s``
        (not even a PONG) counts as a dropped connection (0: never)."""
        hdrs = dict(headers or {})
        cp = cls(lambda on_msg, on_closed: WebSocketLink.open(url, token, on_msg, on_closed, hdrs,
                                                              heartbeat_s, idle_timeout_s),
                 http=(url, token, hdrs, reconnect_s), trace=trace)
        await cp._open()
        return cp

    async def _open(self):
        state = {"current": True}

        def on_msg(text):
            if state["current"]:
                self._on_message(text)

        def on_closed(reason):
            if state["current"]:
                state["current"] = False
                self._on_link_down(reason)

        self._link = await self._opener(on_msg, on_closed)

    # ---- the public calls -----------------------------------------------------

    async def run(self, *, conversation: str, js: str, tools: Mapping[str, Tool] | None = None,
                  policy: Mapping[str, Any] | None = None, reason: str | None = None,
                  on_log: OnLog | None = None, stop: asyncio.Event | None = None,
                  id: str | None = None, to_model_error: ToModelError | None = None,
                  resume: Mapping[str, Any] | None = None, traceparent: str | None = None,
                  tracestate: str | None = None) -> Outcome:
        """Runs one program and returns its outcome (docs/contract.md §4), a
        plain dict typed as :class:`codepod.Outcome`.

        ``to_model_error(error, info)`` turns an exception a tool raised into
        the message the program sees (default: ``str(error)``), e.g. to keep a
        database's error text from the model.
        ``on_log(stream, text)`` receives the program's output live. Setting
        ``stop`` stops the execution (the outcome then says CANCELLED); so does
        cancelling the task awaiting run(), which then raises CancelledError.
        run() returns within a few seconds of ``stop`` even when codepod cannot
        be reached: then with a local CANCELLED, or OUTCOME_UNKNOWN when a tool
        call was in flight, and the stop is sent once the session is back. The
        same holds at the deadline when ``policy["timeoutMs"]`` is given.

        ``traceparent``/``tracestate`` (W3C) make codepod's spans children of
        the caller's, and reach each tool as ``ctx.traceparent``."""
        if self._closing:
            raise RuntimeError("this Codepod session is closed")
        check_policy(policy, "run()")
        runnable = prepare(tools)
        eid = id or str(uuid.uuid4())
        if eid in self._execs or eid in self._ops:
            raise ValueError(f"execution id {eid} is already running on this session")
        msg: dict[str, Any] = {"type": "execute", "id": eid, "conversation": conversation, "js": js,
                               "tools": [r.decl for r in runnable.values()]}
        if reason is not None:
            msg["reason"] = reason
        if policy:
            msg["policy"] = dict(policy)
        if on_log:
            msg["stream"] = True
        if resume is not None:
            msg["resume"] = dict(resume)
        if traceparent:
            msg["traceparent"] = traceparent
        if tracestate:
            msg["tracestate"] = tracestate
        if self._link is None and not await self._reconnect():
            return _lost(eid, "OUTCOME_UNKNOWN", "codepod is not reachable; the program did not run")
        ex = _Exec(eid, conversation, runnable, on_log, asyncio.get_running_loop().create_future(),
                   to_model_error)
        self._execs[eid] = ex
        self._send(msg)
        watcher = None
        if stop is not None:
            watcher = asyncio.ensure_future(self._stop_when(stop, ex))
        deadline = None
        timeout_ms = (policy or {}).get("timeoutMs")
        if isinstance(timeout_ms, (int, float)) and not isinstance(timeout_ms, bool) and timeout_ms > 0:
            startup_ms = (policy or {}).get("startupTimeoutMs", DEFAULT_STARTUP_MS)
            if not isinstance(startup_ms, (int, float)):
                startup_ms = DEFAULT_STARTUP_MS
            deadline = asyncio.get_running_loop().call_later(
                (startup_ms + timeout_ms) / 1000 + DEADLINE_SLACK_S, self._deadline_passed, ex)
        try:
            return await asyncio.shield(ex.future)
        except asyncio.CancelledError:
            self.stop(eid)
            raise
        finally:
            if watcher:
                watcher.cancel()
            if deadline:
                deadline.cancel()

    async def resume(self, continuation: str, decisions: Sequence[Mapping[str, Any]], *,
                     conversation: str, js: str, tools: Mapping[str, Tool] | None = None,
                     policy: Mapping[str, Any] | None = None, **kw) -> Outcome:
        """Runs a suspended execution again with a person's decisions
        (``[{"call": "2", "approved": True}, {"call": "3", "approved": False,
        "message": "..."}]``, one per pending call): the same conversation,
        js, tools and policy as the run that suspended. Returns its outcome,
        which may be suspended again."""
        return await self.run(conversation=conversation, js=js, tools=tools, policy=policy,
                              resume={"continuation": continuation,
                                      "decisions": [dict(d) for d in decisions]}, **kw)

    def sandbox(self, conversation: str, *, policy: Mapping[str, Any] | None = None,
                description: str | None = None) -> Sandbox:
        """The conversation's sandbox: its workspace's files and shell commands
        beside its programs (read_file, write_file, stat, list_directory,
        delete_file, run, spawn, ...). ``policy``: limits for its commands."""
        return Sandbox(_Channel(self), conversation, policy, description)

    def stop(self, execution_id: str) -> None:
        """Asks codepod to stop a running execution (its outcome says CANCELLED)."""
        ex = self._execs.get(execution_id)
        if ex:
            ex.stop_wanted = True
            self._send({"type": "stop", "id": execution_id})

    async def declarations(self, tools: Mapping[str, Tool] | Sequence[dict]) -> str:
        """The TypeScript declarations codepod renders for these tools."""
        decls = list(tools) if not isinstance(tools, Mapping) else [r.decl for r in prepare(tools).values()]
        self._decl_seq += 1
        rid = f"declarations-{self._decl_seq}"
        fut = asyncio.get_running_loop().create_future()
        self._decl[rid] = fut
        try:
            if not self._send({"type": "declarations", "id": rid, "tools": decls}):
                raise ConnectError("INTERNAL", "codepod is not connected")
            return await fut
        except (RuntimeError, ConnectError):
            # A v1 server has no declarations message: its HTTP endpoint has, and so has its command.
            if self._http:
                url, token, hdrs, _ = self._http
                status, body = await http_json("POST", url, "/v1/declarations", token, {"tools": decls}, hdrs)
                if status == 200 and isinstance(body, dict) and isinstance(body.get("declarations"), str):
                    return body["declarations"]
                raise RuntimeError(f"codepod could not render the declarations (HTTP {status})")
            return await self._cli_declarations(decls)
        finally:
            self._decl.pop(rid, None)

    async def get_execution(self, execution_id: str) -> dict | None:
        """GET /v1/executions/{id} (WebSocket sessions): the outcome once the
        execution ended, ``{"executionId", "status": "running"}`` while it
        runs, None when the server does not know it (never seen, expired, or
        run by another replica)."""
        if not self._http:
            raise RuntimeError("get_execution needs a WebSocket session (Codepod.connect)")
        url, token, hdrs, _ = self._http
        from urllib.parse import quote
        status, body = await http_json("GET", url, f"/v1/executions/{quote(execution_id, safe='')}", token,
                                       headers=hdrs)
        if status == 202:
            return {"executionId": execution_id, "status": "running"}
        if status != 200 or not isinstance(body, dict):
            return None
        body.pop("type", None)
        body.pop("id", None)
        body.setdefault("executionId", execution_id)
        return body

    async def code_tool(self, *, conversation: str, tools: Mapping[str, Tool],
                        policy: Mapping[str, Any] | None = None, on_log: OnLog | None = None,
                        name: str = "code", to_model_error: ToModelError | None = None,
                        execution_policy: Mapping[str, Any] | None = None,
                        workspace_files: Sequence[str] | bool = ()) -> "model.CodeTool":
        """The `code` tool for a model: ``.definition`` is an OpenAI-style
        function tool (its description holds the script rules and codepod's
        declarations of ``tools``); ``await tool(arguments)`` runs the program
        and returns the text the model should read. ``workspace_files``
        tells the model which files the workspace holds: a list of paths
        relative to it, or True to list the workspace now (files only,
        breadth first, at most 1000)."""
        if policy is not None and execution_policy is not None:
            raise ValueError("code_tool(): give policy or execution_policy (its alias), not both")
        policy = policy if policy is not None else execution_policy
        check_policy(policy, "code_tool()")
        decl = await self.declarations(tools)
        if workspace_files is True:
            files = await self.sandbox(conversation).list_workspace()
        else:
            files = list(workspace_files or [])
        return model.CodeTool(self, conversation, dict(tools), dict(policy or {}), decl, on_log, name,
                              files, to_model_error=to_model_error)

    async def close(self) -> None:
        """Ends the session. Executions still running are stopped and their
        outcomes (CANCELLED) delivered first, within a few seconds."""
        if self._closing:
            return
        self._closing = True
        if self._reconnecting:
            self._reconnecting.cancel()
        # Stopped explicitly on both transports: a WebSocket that closes would
        # leave them waiting for an attach, and stdin EOF would make a call in
        # flight OUTCOME_UNKNOWN.
        commands = [h for h in self._ops.values() if h.reattach]
        if self._link and (self._execs or commands):
            futures = [ex.future for ex in self._execs.values()] + [c.result for c in commands]
            for eid in list(self._execs) + [c.id for c in commands]:
                self._send({"type": "stop", "id": eid})
            await asyncio.wait(futures, timeout=CLOSE_WAIT_S)
        link, self._link = self._link, None
        if link:
            await link.close()
        for ex in list(self._execs.values()):
            self._finish(ex, _lost(ex.id, "OUTCOME_UNKNOWN", "the session was closed before the outcome arrived"))
        self._drop_ops(lambda h: True, CodepodError("OUTCOME_UNKNOWN", "the session was closed before the request finished"))
        for t in list(self._tasks):
            t.cancel()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    # ---- internals --------------------------------------------------------------

    async def _stop_when(self, ev: asyncio.Event, ex: _Exec):
        await ev.wait()
        self.stop(ex.id)
        # codepod answers a stop at once; when it does not (the connection is
        # dead and not yet known to be), the caller is not kept waiting.
        if self._link is not None:
            try:
                await asyncio.wait_for(asyncio.shield(ex.future), STOP_WAIT_S)
                return
            except asyncio.TimeoutError:
                pass
        self._settle_locally(ex, "the execution was stopped")

    def _deadline_passed(self, ex: _Exec) -> None:
        self.stop(ex.id)
        self._settle_locally(ex, "no outcome from codepod by the program's deadline")

    def _settle_locally(self, ex: _Exec, why: str) -> None:
        """The outcome without codepod's word: CANCELLED, or OUTCOME_UNKNOWN
        when a tool call was in flight. codepod gets the stop when a session is back."""
        if self._execs.get(ex.id) is not ex:
            return
        in_flight = ex.unconfirmed or any(c.answer is None for c in ex.calls.values())
        self._orphans.add(ex.id)
        if in_flight:
            self._finish(ex, _lost(ex.id, "OUTCOME_UNKNOWN",
                                   f"{why}; codepod could not be reached and a tool call was in flight, "
                                   "so what the program did is unknown"))
        else:
            self._finish(ex, _lost(ex.id, "CANCELLED",
                                   f"{why}; codepod could not be reached, so it is stopped when the "
                                   "session is back"))
        if self._link is None and self._http:
            self._spawn_task(self._reconnect())

    def _send(self, msg: dict) -> bool:
        return self._send_text(json.dumps(msg, separators=(",", ":"), ensure_ascii=False))

    def _send_text(self, text: str) -> bool:
        if self._trace:
            self._trace("out", text)
        return self._link.send(text) if self._link else False

    def _spawn_task(self, coro) -> asyncio.Task:
        t = asyncio.ensure_future(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)
        return t

    def _finish(self, ex: _Exec, outcome: dict) -> None:
        if self._execs.get(ex.id) is not ex:
            return
        del self._execs[ex.id]
        for c in ex.calls.values():
            if c.task and not c.task.done():
                c.task.cancel()
        if not ex.future.done():
            ex.future.set_result(outcome)

    def _drop_ops(self, which, err: CodepodError) -> None:
        for oid, h in list(self._ops.items()):
            if which(h):
                self._ops.pop(oid, None)
                h.down(err)

    def _on_link_down(self, reason: str) -> None:
        self._link = None
        if self._closing:
            return
        # A read or write in flight cannot be resumed on another link.
        self._drop_ops(lambda h: not h.reattach or not self._http,
                       CodepodError("OUTCOME_UNKNOWN", f"codepod went away before the request finished ({reason})"))
        for fut in self._decl.values():
            if not fut.done():
                fut.set_exception(ConnectError("INTERNAL", reason))
        if not self._http:
            # A child process that is gone takes its executions with it.
            for ex in list(self._execs.values()):
                self._finish(ex, _lost(ex.id, "OUTCOME_UNKNOWN",
                                       f"codepod went away before the outcome arrived ({reason})"))
            return
        if self._execs or self._orphans or self._ops:
            self._spawn_task(self._reconnect())

    async def _reconnect(self) -> bool:
        if not self._http or self._closing:
            return False
        if self._reconnecting is None:
            self._reconnecting = asyncio.ensure_future(self._reconnect_loop())
        try:
            return await asyncio.shield(self._reconnecting)
        finally:
            if self._reconnecting is not None and self._reconnecting.done():
                self._reconnecting = None

    async def _reconnect_loop(self) -> bool:
        deadline = time.monotonic() + self._http[3]
        delay = 0.05
        while not self._closing:
            try:
                await self._open()
                break
            except ConnectError as e:
                if e.code == "UNAUTHORIZED" or time.monotonic() + delay > deadline:
                    self._orphans.clear()  # their stop cannot be delivered; the server's grace ends them
                    for ex in list(self._execs.values()):
                        self._finish(ex, _lost(ex.id, "OUTCOME_UNKNOWN",
                                               "the connection to codepod dropped and could not be re-established"))
                    self._drop_ops(lambda h: True, CodepodError(
                        "OUTCOME_UNKNOWN", "the connection to codepod dropped and could not be re-established"))
                    return False
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
        if self._closing:
            return False
        for eid in self._orphans:
            # Taken over only to be stopped: whatever codepod then sends of it is ignored.
            self._send({"type": "attach", "id": eid})
            self._send({"type": "stop", "id": eid})
        self._orphans.clear()
        for ex in self._execs.values():
            ex.attaching = True
            self._send({"type": "attach", "id": ex.id})
            if ex.stop_wanted:
                self._send({"type": "stop", "id": ex.id})
        for oid in list(self._ops):
            self._send({"type": "attach", "id": oid})
        return True

    def _on_message(self, text: str) -> None:
        if self._trace:
            self._trace("in", text)
        try:
            m = json.loads(text)
        except ValueError:
            return
        if not isinstance(m, dict):
            return
        mid = m.get("id") if isinstance(m.get("id"), str) else None
        typ = m.get("type")
        if typ == "declarations":
            fut = self._decl.get(mid) if mid else next(iter(self._decl.values()), None)
            if fut and not fut.done() and isinstance(m.get("declarations"), str):
                fut.set_result(m["declarations"])
            return
        if typ == "error" and mid in self._decl:
            fut = self._decl[mid]
            if not fut.done():
                fut.set_exception(RuntimeError(str((m.get("error") or {}).get("message", "refused"))))
            return
        op = self._ops.get(mid) if mid else None
        if op is not None:
            op.message(m)
            return
        ex = self._execs.get(mid) if mid else None
        if ex is None:
            if typ == "result" and mid:
                self._orphans.discard(mid)  # stopped after all
            return
        ex.unconfirmed = False
        if typ != "error":
            ex.attaching = False
        if typ == "accepted":
            ex.accepted = True
        elif typ == "tool_call":
            ex.accepted = ex.saw_call = True
            self._on_tool_call(ex, m)
        elif typ == "cancel_call":
            c = ex.calls.get(str(m.get("call")))
            if c:
                if c.ctx:
                    c.ctx.cancelled.set()
                if c.task and not c.task.done():
                    c.task.cancel()
        elif typ == "log":
            ex.accepted = True
            if ex.on_log and m.get("stream") in ("stdout", "stderr"):
                try:
                    ex.on_log(m["stream"], str(m.get("text", "")))
                except Exception:  # noqa: BLE001 - a failing on_log must not end the session
                    pass
        elif typ == "result":
            out = {k: v for k, v in m.items() if k not in ("type", "id")}
            out["executionId"] = ex.id
            self._finish(ex, out)
        elif typ == "error":
            self._on_error(ex, m)

    def _on_error(self, ex: _Exec, m: dict) -> None:
        err = m.get("error") or {}
        in_reply_to = m.get("inReplyTo")
        # v1.1 says what an error answers; a v1 server does not, but before the
        # first tool call nothing but the execute can have been answered.
        if in_reply_to == "execute" or (in_reply_to is None and not ex.accepted and not ex.saw_call
                                        and not ex.stop_wanted):
            self._finish(ex, _lost(ex.id, str(err.get("code", "INTERNAL")),
                                   str(err.get("message", "codepod refused the execution"))))
        elif in_reply_to == "attach" or (in_reply_to is None and ex.attaching):
            ex.attaching = False
            self._spawn_task(self._recover(ex))

    async def _recover(self, ex: _Exec) -> None:
        try:
            o = await self.get_execution(ex.id)
            if o and o.get("status") == "running":
                o = None
        except Exception:  # noqa: BLE001 - no stored outcome to be had
            o = None
        self._finish(ex, o or _lost(ex.id, "OUTCOME_UNKNOWN",
                                    "the connection to codepod dropped and the execution could not be re-attached"))

    def _on_tool_call(self, ex: _Exec, m: dict) -> None:
        call = m.get("call")
        if not isinstance(call, str):
            return
        known = ex.calls.get(call)
        if known:
            # Sent again after a reattach: answer again if done, else the answer follows.
            if known.answer is not None:
                self._send_text(known.answer)
            return
        c = _Call()
        ex.calls[call] = c
        c.ctx = ToolContext(conversation=ex.conversation, execution_id=ex.id, call_id=call,
                            traceparent=_text_or_none(m.get("traceparent")),
                            tracestate=_text_or_none(m.get("tracestate")))
        key = m.get("idempotencyKey")
        if isinstance(key, str):
            c.ctx.idempotency_key = key
        c.task = self._spawn_task(self._answer(ex, c, call, str(m.get("tool")), m.get("input")))

    async def _answer(self, ex: _Exec, c: _Call, call: str, name: str, value: Any) -> None:
        def fail(message: str) -> str:
            return json.dumps({"type": "tool_error", "id": ex.id, "call": call,
                               "message": message[:MAX_TOOL_ERROR]}, ensure_ascii=False)

        tool = ex.tools.get(name)
        if tool is None:
            text = fail(f"Unknown tool: {name}")
        else:
            why = tool.check(value)
            if why is not None:
                text = fail(f"Invalid input for tool {name}: {why}")
            elif c.ctx.idempotency_key is None and await self._held(tool, value):
                # A person decides: codepod suspends the execution at this call.
                text = json.dumps({"type": "suspend", "id": ex.id, "call": call})
            else:
                try:
                    out = await tool.call(value, c.ctx)
                except asyncio.CancelledError:
                    return  # codepod cancelled the call: it wants no answer
                except Exception as e:  # noqa: BLE001 - a tool's failure is the program's to handle
                    text = fail(_model_error(ex, e, name, call))
                else:
                    body, why = to_json_text(out)
                    if body is None:
                        text = fail(f"Tool {name} returned a value that is not JSON: {why}")
                    else:
                        text = ('{"type":"tool_result","id":' + json.dumps(ex.id) + ',"call":' +
                                json.dumps(call) + ',"output":' + body + '}')
        c.answer = text
        if not (c.ctx and c.ctx.cancelled.is_set()):
            ex.unconfirmed = True
            self._send_text(text)

    @staticmethod
    async def _held(tool, value: Any) -> bool:
        try:
            return await tool.needs_approval(value)
        except Exception:  # noqa: BLE001 - a failing check must not run the tool unasked
            return True

    async def _cli_declarations(self, decls: list) -> str:
        """`codepod declarations FILE`, for a stdio server older than the declarations message."""
        with tempfile.TemporaryDirectory(prefix="codepod-decl-") as d:
            path = os.path.join(d, "tools.json")
            with open(path, "w") as f:
                json.dump({"tools": decls}, f)
            proc = await asyncio.create_subprocess_exec(
                self._argv[0], "declarations", path, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL, env=self._env)
            out, _ = await proc.communicate()
            if proc.returncode != 0:
                raise RuntimeError(f"codepod declarations failed (status {proc.returncode})")
            return out.decode()


class _Channel:
    """What the sandbox's file and command operations see of the session."""

    def __init__(self, cp: Codepod):
        self._cp = cp

    async def ready(self) -> bool:
        """A link, reconnecting a WebSocket session that dropped; False when none is to be had."""
        cp = self._cp
        if cp._closing:
            return False
        return cp._link is not None or await cp._reconnect()

    def new_id(self) -> str:
        while True:
            oid = str(uuid.uuid4())
            if oid not in self._cp._execs and oid not in self._cp._ops:
                return oid

    def start(self, op_id: str, handler: Handler, first: dict) -> bool:
        cp = self._cp
        if cp._closing or cp._link is None:
            return False
        if op_id in cp._execs or op_id in cp._ops:
            raise ValueError(f"id {op_id} is already in use on this session")
        cp._ops[op_id] = handler
        if not cp._send(first):
            cp._ops.pop(op_id, None)
            return False
        return True

    def send(self, msg: dict) -> bool:
        return self._cp._send(msg)

    def end(self, op_id: str) -> None:
        self._cp._ops.pop(op_id, None)


def _text_or_none(v: Any) -> str | None:
    return v if isinstance(v, str) else None
