"""Tools as the client runs them: a declaration for codepod, an input check
against the tool's JSON Schema, and its function."""

from __future__ import annotations

import asyncio
import inspect
import json
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping

import jsonschema
from jsonschema import validators


@dataclass
class ToolContext:
    """What a tool's function may take besides its input.

    A tool that codepod cancels (``cancel_call``: the program returned, the
    deadline passed, the execution was stopped) has its task cancelled, and
    ``cancelled`` is set."""
    conversation: str
    execution_id: str
    call_id: str
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    #: Only on a call a person approved, run by a resumed execution: do the
    #: work once per key (another replica may resume the same continuation).
    idempotency_key: str | None = None
    #: W3C trace context of codepod's ``codepod.tool_call`` span for this call
    #: (None when the execution is not traced): the parent for the tool's own
    #: spans, e.g. with OpenTelemetry's ``TraceContextTextMapPropagator().extract(
    #: {"traceparent": ctx.traceparent})``.
    traceparent: str | None = None
    tracestate: str | None = None


@dataclass
class Tool:
    """A tool a program may call as ``await tools.NAME(input)``.

    ``fn(input)`` or ``fn(input, ctx)``, plain or async, returns JSON data
    (dict, list, str, int, float, bool, None). Raising an exception makes the
    program's call throw an Error with the exception's message.

    ``needs_approval``: True, every call waits for a person (codepod holds
    it); a function of the input (plain or async), asked before each call
    not yet approved. Such a call ends the execution ``suspended``; finish
    it with ``Codepod.resume``."""
    fn: Callable[..., Any]
    input_schema: Mapping[str, Any] | bool = field(default_factory=lambda: {"type": "object"})
    description: str | None = None
    output_schema: Mapping[str, Any] | None = None
    enabled: bool = True
    needs_approval: bool | Callable[[Any], Any] = False

    def declaration(self, name: str) -> dict:
        d: dict[str, Any] = {"name": name, "inputSchema": self.input_schema}
        if self.description is not None:
            d["description"] = self.description
        if self.output_schema is not None:
            d["outputSchema"] = self.output_schema
        if not self.enabled:
            d["enabled"] = False
        if self.needs_approval is True:
            d["approval"] = "required"
        return d


class Runnable:
    def __init__(self, name: str, tool: Tool):
        if not isinstance(tool, Tool):
            raise TypeError(f"tool {name}: not a codepod.Tool")
        self.name = name
        self.tool = tool
        self.decl = tool.declaration(name)
        self._validator = _validator(tool.input_schema)
        try:
            params = [p for p in inspect.signature(tool.fn).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
            self._wants_ctx = len(params) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)
        except (TypeError, ValueError):
            self._wants_ctx = False

    def check(self, value: Any) -> str | None:
        """None when the input matches the schema, else why not."""
        if self._validator is None:
            return None
        err = jsonschema.exceptions.best_match(self._validator.iter_errors(value))
        if err is None:
            return None
        where = "input" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
        return f"{where}: {err.message}"[:500]

    async def needs_approval(self, value: Any) -> bool:
        """Whether this call must wait for a person (the function's verdict)."""
        fn = self.tool.needs_approval
        if not callable(fn):
            return False
        r = fn(value)
        if inspect.isawaitable(r):
            r = await r
        return bool(r)

    async def call(self, value: Any, ctx: ToolContext) -> Any:
        r = self.tool.fn(value, ctx) if self._wants_ctx else self.tool.fn(value)
        if inspect.isawaitable(r):
            r = await r
        return r


def _validator(schema: Any):
    if schema is True or schema == {}:
        return None
    if schema is False:
        schema = {"not": {}}
    schema = {k: v for k, v in dict(schema).items() if k != "$id"}
    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError:
        return None  # codepod refuses a schema it cannot read; do not block calls on it
    return cls(schema)


def prepare(tools: Mapping[str, Tool] | None) -> dict[str, Runnable]:
    return {name: Runnable(name, t) for name, t in (tools or {}).items()}


def to_json_text(value: Any) -> tuple[str | None, str | None]:
    """(JSON text, None) or (None, why it is not JSON)."""
    try:
        return json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":")), None
    except ValueError as e:
        if "ircular" in str(e):
            return None, "it holds a cycle"
        return None, "it holds NaN or Infinity"
    except (TypeError, RecursionError) as e:
        kind = type(value).__name__ if not isinstance(e, RecursionError) else "a structure nested too deep"
        if isinstance(e, TypeError):
            msg = str(e)
            # "Object of type X is not JSON serializable"
            if msg.startswith("Object of type "):
                kind = msg.split(" ")[3]
        return None, f"it holds a {kind}" if not kind.startswith("a ") else f"it is {kind}"


ToolFn = Callable[..., Any | Awaitable[Any]]
