"""to_model_error: what a program (and so the model) sees of an exception a
tool raised, on both transports and through code_tool."""

import json
import os

from codepod import Tool
from conftest import arun

DB_ERROR = 'relation "invoices_2026" does not exist (db-7.internal:5432, role billing_rw)'
CATCH_JS = "try { await tools.listInvoices({}); return 'no error'; } catch (e) { return e.message; }"


def failing():
    def list_invoices(_):
        raise RuntimeError(DB_ERROR)
    return {"listInvoices": Tool(fn=list_invoices)}


def conv(tag):
    return f"sdk-py-toolerr-{tag}-{os.getpid()}"


def test_by_default_the_program_sees_the_message(fx):
    async def go():
        cp = await fx.open()
        try:
            o = await cp.run(conversation=conv("default"), tools=failing(), js=CATCH_JS)
        finally:
            await fx.aclose()
        assert o["result"] == DB_ERROR
    arun(go())


def test_the_hook_replaces_it_and_learns_which_call_failed(fx):
    async def go():
        seen = []

        def hide(error, info):
            seen.append((error, info))
            return f"{info['tool']} is unavailable right now; try again later"

        cp = await fx.open()
        try:
            o = await cp.run(conversation=conv("hook"), tools=failing(), js=CATCH_JS, to_model_error=hide)
            broken = await cp.run(conversation=conv("hook"), tools=failing(), js=CATCH_JS,
                                  to_model_error=lambda e, i: 1 / 0)
        finally:
            await fx.aclose()
        assert o["result"] == "listInvoices is unavailable right now; try again later"
        assert "db-7" not in json.dumps(o) and "billing_rw" not in json.dumps(o)
        assert len(seen) == 1
        error, info = seen[0]
        assert isinstance(error, RuntimeError) and str(error) == DB_ERROR
        assert info == {"tool": "listInvoices", "call": o["calls"][0]["id"], "execution_id": o["executionId"],
                        "conversation": conv("hook")}
        assert broken["result"] == "Tool listInvoices failed"
    arun(go())


def test_code_tool_passes_the_hook_to_every_run(fx):
    async def go():
        cp = await fx.open()
        try:
            code = await cp.code_tool(conversation=conv("code"), tools=failing(),
                                      to_model_error=lambda e, i: "the invoice store failed")
            text = await code({"reason": "r", "js": CATCH_JS})
        finally:
            await fx.aclose()
        assert json.loads(text) == {"status": "succeeded", "result": "the invoice store failed", "logs": ""}
    arun(go())
