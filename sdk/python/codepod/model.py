"""What a model reads about the `code` tool: the script rules (docs/contract.md
§2, with this policy's limits) followed by the declarations codepod renders,
its input schema, and the outcome turned into text. The TypeScript package
(sdk/typescript/src/model.ts) says the same words."""

from __future__ import annotations

import inspect
import json
import uuid
from typing import TYPE_CHECKING, Any, Callable, Mapping

if TYPE_CHECKING:
    from .client import Codepod, OnLog
    from .tools import Tool

CODE_INPUT_SCHEMA = {
    "type": "object",
    "properties": {
        "reason": {"type": "string", "description": "A short label for the user saying what this program does, "
                                                    "e.g. \"Totalling August invoices\"."},
        "js": {"type": "string",
               "description": "The whole program: the body of an async function (JavaScript or TypeScript)."},
    },
    "required": ["reason", "js"],
    "additionalProperties": False,
}

DEFAULTS = {"timeoutMs": 30000, "maxResultBytes": 32768, "maxBridgeRequests": 256}


def _bytes(n: int) -> str:
    return f"{n // 1024} KiB" if n % 1024 == 0 else f"{n} bytes"


def _seconds(ms: int) -> str:
    s = ms / 1000
    return str(int(s)) if s == int(s) else str(s)


APPROVAL_MARK = "Some tools need a person's approval."
APPROVAL_RULE = (f"- {APPROVAL_MARK} A program that calls one may stop there; once a person answered, it "
                 "is run again from the start, its earlier calls answered as the first time. So before such a "
                 "call, make the same calls in the same order on every run (no branching on the time or on "
                 "randomness), and make workspace writes before it idempotent: they happen again.")


MAX_NAMED_FILES = 50   # files the description names before it counts the rest


def files_line(files) -> list[str]:
    """The line that tells the model which files the workspace holds (none: no line)."""
    files = list(files or [])
    if not files:
        return []
    named = ", ".join(f"`{f}`" for f in files[:MAX_NAMED_FILES])
    more = f", and {len(files) - MAX_NAMED_FILES} more" if len(files) > MAX_NAMED_FILES else ""
    return [f"- The workspace already holds these files (paths relative to it): {named}{more}."]


def code_description(declarations: str, policy: Mapping[str, Any] | None = None,
                     approvals: bool = False, files=()) -> str:
    policy = policy or {}
    timeout = policy.get("timeoutMs", DEFAULTS["timeoutMs"])
    budget = policy.get("maxResultBytes", DEFAULTS["maxResultBytes"])
    calls = policy.get("maxBridgeRequests", DEFAULTS["maxBridgeRequests"])
    return "\n".join([
        "Run a JavaScript or TypeScript program in a fresh Node.js 22 process in this conversation's sandbox. "
        "Use it to combine several tool calls, compute over their results, or work with files; "
        "only what the program returns and prints comes back.",
        "",
        "- `js` is the body of an async function: top-level `await` and `return` work. TypeScript annotations "
        "are stripped without type checking; syntax that needs transformation, such as `enum`, fails.",
        "- Call the tools declared below as `await tools.name(input)`; each takes and returns JSON. A call that "
        "fails throws an Error whose message says why; you can catch it.",
        "- Use `require(...)` or `await import(...)` for the modules the declarations below name (Node built-ins, "
        "and the packages this deployment has); static `import` declarations are not allowed.",
        "- Programs have no network access: `fetch` and sockets fail. Reach outside only through the tools.",
        "- The working directory is the conversation's workspace: files written there persist across calls, "
        "JavaScript variables do not.",
        "- Several `code` calls of this conversation may run at the same time (several in one turn) and then "
        "share the workspace: give files each program writes names of their own.",
        *files_line(files),
        f"- `return` a small JSON value; it comes back as `result` (a Map or Set becomes {{}}). Output of "
        f"console.* and process.stdout/stderr comes back as `logs` (the last {_bytes(budget)}).",
        f"- Limits: {_seconds(timeout)} s per program, waiting on tools included; {calls} tool calls; a result "
        f"over {_bytes(budget)} fails the program, so return a summary or save the full output to a workspace file.",
        "- `reason` is a short label shown to the user.",
        # codepod's declarations say it above `tools` for a tool that always needs approval.
        *([APPROVAL_RULE] if approvals and APPROVAL_MARK not in declarations else []),
        "",
        declarations.rstrip(),
    ])


def output_for_model(outcome: Mapping[str, Any]) -> dict:
    """Result and logs, or the code, the safe message and the program's own error."""
    trunc = {"logsTruncated": True} if outcome.get("logsTruncated") else {}
    if outcome.get("status") == "suspended":
        pending = outcome.get("pending") or []
        return {"status": "suspended", "pending": pending, "logs": outcome.get("logs", ""),
                "message": ("The program stopped at a call that needs a person's approval; once they "
                            "answer, it is run again from the start.") if len(pending) == 1 else
                           (f"The program stopped at {len(pending)} calls that need a person's approval; "
                            "once they answer, it is run again from the start.")}
    if outcome.get("status") == "succeeded":
        out: dict[str, Any] = {"status": "succeeded"}
        if "result" in outcome:
            out["result"] = outcome["result"]
        out["logs"] = outcome.get("logs", "")
        out.update(trunc)
        return out
    err = outcome.get("error") or {}
    e: dict[str, Any] = {"code": str(err.get("code", "INTERNAL")),
                         "message": str(err.get("message", "the program failed"))}
    if err.get("programError"):
        e["programError"] = err["programError"]
    return {"status": "failed", "error": e, "logs": outcome.get("logs", ""), **trunc}


def _takes_two(fn: Callable) -> bool:
    """Whether ``fn`` takes (stream, text), the older form of ``on_log``."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


class CodeTool:
    """The `code` tool: ``definition`` for the model's tool list, and
    ``await code(arguments)`` (the model's arguments: a JSON string or a dict)
    for the text the model reads back. Also ``await code.run(reason, js)``
    for the outcome itself.

    ``on_log(log)`` gets each piece of a program's live output as a dict
    ``{"execution_id", "tool_call_id", "stream", "text"}``, ``tool_call_id``
    being what the caller passed for the model's call (None when it passed
    nothing), so a UI can route it; a function of two parameters gets
    ``(stream, text)`` as before."""

    def __init__(self, cp: "Codepod", conversation: str, tools: Mapping[str, "Tool"], policy: dict,
                 declarations: str, on_log: "OnLog | None", name: str = "code", files=(), *,
                 to_model_error=None):
        self.codepod = cp
        self.to_model_error = to_model_error
        self.conversation = conversation
        self.tools = tools
        self.policy = policy
        self.on_log = on_log
        self.name = name
        self.description = code_description(
            declarations, policy, any(t.needs_approval is not False for t in tools.values()), files)
        self.definition = {
            "type": "function",
            "function": {"name": name, "description": self.description, "parameters": CODE_INPUT_SCHEMA},
        }

    async def run(self, reason: str, js: str, stop=None, tool_call_id: str | None = None) -> dict:
        eid = str(uuid.uuid4())
        on_log = self.on_log
        if on_log is not None and not _takes_two(on_log):
            user = on_log

            def on_log(stream, text):
                user({"execution_id": eid, "tool_call_id": tool_call_id, "stream": stream, "text": text})
        return await self.codepod.run(conversation=self.conversation, js=js, reason=reason, tools=self.tools,
                                      policy=self.policy or None, on_log=on_log, stop=stop, id=eid,
                                      to_model_error=self.to_model_error)

    async def __call__(self, arguments: str | Mapping[str, Any], stop=None, tool_call_id: str | None = None) -> str:
        try:
            args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
        except (ValueError, TypeError):
            args = None
        if not isinstance(args, dict) or not isinstance(args.get("js"), str):
            return json.dumps({"status": "failed", "error": {
                "code": "INVALID_REQUEST",
                "message": "the arguments must be a JSON object with a string `js` (and a string `reason`)"},
                "logs": ""})
        outcome = await self.run(str(args.get("reason", "")), args["js"], stop=stop, tool_call_id=tool_call_id)
        return json.dumps(output_for_model(outcome), ensure_ascii=False)
