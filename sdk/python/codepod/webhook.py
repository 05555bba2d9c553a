"""A webhook broker for ``POST /v1/executions`` on aiohttp.

codepod POSTs each tool call (``{"id","conversation","call","tool","input"}``)
and reads ``{"output"}`` or ``{"error"}`` back (broker/SESSION.md, "The
webhook"). :func:`webhook_handler` checks the signature codepod puts on it
(``serve --webhook-secret-file``), routes to the tool, validates the input
as :meth:`Codepod.run` does, and answers::

    from aiohttp import web
    app = web.Application()
    app.router.add_post("/tools", webhook_handler(tools, secret=SECRET))
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import re
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping

from .tools import Tool, ToolContext, prepare, to_json_text

MAX_ERROR = 2000
MAX_BODY = 16 << 20
_DIGITS = re.compile(r"^[0-9]{1,15}$")

if TYPE_CHECKING:
    from aiohttp import web

ToModelError = Callable[[BaseException, dict], str]


def webhook_signature(secret: str | bytes, timestamp: str, body: bytes) -> str:
    """HMAC-SHA256 of ``TIMESTAMP.BODY`` as codepod signs it: ``v1=`` and 64 hex digits."""
    key = secret.encode() if isinstance(secret, str) else secret
    return "v1=" + hmac.new(key, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


def _signed_well(secret: str | bytes | None, tolerance_s: float, body: bytes,
                 headers: Mapping[str, str]) -> bool:
    if secret is None:
        return True
    ts = headers.get("Codepod-Timestamp", "")
    sig = headers.get("Codepod-Signature", "")
    if not _DIGITS.match(ts) or not sig:
        return False
    if abs(time.time() - int(ts)) > tolerance_s:
        return False
    return hmac.compare_digest(webhook_signature(secret, ts, body), sig)


def _error_text(hook: ToModelError | None, e: BaseException, info: dict) -> str:
    if hook is not None:
        try:
            text = hook(e, info)
        except Exception:  # noqa: BLE001 - a failing hook must not leak what it was hiding
            text = None
        return text if isinstance(text, str) and text else f"Tool {info['tool']} failed"
    return str(e) or f"Tool {info['tool']} failed"


def webhook_handler(tools: Mapping[str, Tool], *, secret: str | bytes | None = None,
                    tolerance_s: float = 300, to_model_error: ToModelError | None = None,
                    max_body: int = MAX_BODY) -> Callable[[web.Request], Awaitable[web.Response]]:
    """An aiohttp handler answering codepod's webhook POSTs for ``tools``.

    401 for a request not signed with ``secret`` (when set; ``tolerance_s``
    of clock skew), 400 for one that is not a tool call, 413 past
    ``max_body``; else 200 with ``{"output"}`` or ``{"error"}``: an unknown
    tool, an input its schema refuses (``Invalid input for tool NAME:
    ...``) and a tool that raises are errors the program can catch. When
    codepod drops the request (it no longer needs the call) the tool's task
    is cancelled and ``ctx.cancelled`` is set."""
    from aiohttp import web  # only a broker needs the server side

    runnable = prepare(tools)

    def answer(status: int, v: Any) -> web.Response:
        return web.Response(status=status, text=json.dumps(v, ensure_ascii=False),
                            content_type="application/json")

    async def handle(request: web.Request) -> web.Response:
        if request.content_length is not None and request.content_length > max_body:
            return answer(413, {"error": "the body is too large"})
        body = await request.read()
        if len(body) > max_body:
            return answer(413, {"error": "the body is too large"})
        if not _signed_well(secret, tolerance_s, body, request.headers):
            return answer(401, {"error": "bad or missing Codepod-Signature"})
        try:
            m = json.loads(body)
        except ValueError:
            return answer(400, {"error": "the body is not JSON"})
        if not isinstance(m, dict) or not all(isinstance(m.get(k), str) for k in ("id", "call", "tool")):
            return answer(400, {"error": "not a codepod tool call"})
        name, call, eid = m["tool"], m["call"], m["id"]
        conversation = m.get("conversation") if isinstance(m.get("conversation"), str) else ""

        def fail(message: str) -> web.Response:
            return answer(200, {"error": message[:MAX_ERROR]})

        tool = runnable.get(name)
        if tool is None:
            return fail(f"Unknown tool: {name}")
        why = tool.check(m.get("input"))
        if why is not None:
            return fail(f"Invalid input for tool {name}: {why}")
        ctx = ToolContext(conversation=conversation, execution_id=eid, call_id=call)
        try:
            out = await tool.call(m.get("input"), ctx)
        except asyncio.CancelledError:
            ctx.cancelled.set()
            raise
        except Exception as e:  # noqa: BLE001 - a tool's failure is the program's to handle
            return fail(_error_text(to_model_error, e, {"tool": name, "call": call,
                                                        "execution_id": eid,
                                                        "conversation": conversation}))
        text, why = to_json_text(out)
        if text is None:
            return fail(f"Tool {name} returned a value that is not JSON: {why}")
        return web.Response(status=200, text='{"output":' + text + "}", content_type="application/json")

    return handle
