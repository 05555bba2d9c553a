"""Approvals through the codepod package against a real `codepod serve`, on
both transports: ``Tool(..., needs_approval=...)`` suspends the program and
``cp.resume(continuation, decisions)`` finishes it; each tool counts its
calls, so none runs twice."""

import os

from codepod import Tool
from conftest import arun

JS = """
const invoices = await tools.listInvoices({});
const refs = [];
for (const i of invoices) refs.push((await tools.pay({ id: i.id, amount: i.amount })).ref);
return refs;"""


def counted(needs):
    n = {"list": 0, "pay": 0}
    keys = []

    def list_invoices(_):
        n["list"] += 1
        return [{"id": "A", "amount": 120}, {"id": "B", "amount": 80}]

    def pay(i, ctx):
        n["pay"] += 1
        keys.append(ctx.idempotency_key)
        return {"ref": "paid-" + i["id"]}
    return n, keys, {"listInvoices": Tool(fn=list_invoices),
                     "pay": Tool(fn=pay, description="Pay an invoice.", needs_approval=needs)}


def test_needs_approval_suspends_and_resume_runs_the_call_once(fx):
    async def large(i):  # async, as a check against a database would be
        return i["amount"] > 100
    n, keys, tools = counted(large)
    conv = f"sdk-py-approve-{os.getpid()}-{fx.transport}"

    async def go():
        cp = await fx.open()
        try:
            first = await cp.run(conversation=conv, js=JS, tools=tools)
            assert first["status"] == "suspended", first.get("error")
            assert first["pending"] == [{"call": "2", "tool": "pay", "input": {"id": "A", "amount": 120}}]
            assert n == {"list": 1, "pay": 0}
            done = await cp.resume(first["continuation"], [{"call": "2", "approved": True}],
                                   conversation=conv, js=JS, tools=tools)
            code = await cp.code_tool(conversation=conv, tools=tools)
        finally:
            await fx.aclose()
        assert done["status"] == "succeeded", done.get("error")
        assert done["result"] == ["paid-A", "paid-B"]
        assert n == {"list": 1, "pay": 2}
        assert keys[0].endswith(":2") and keys[1] is None
        # decided per call: the rules for the model come from the SDK
        assert "is run again from the start" in code.description
    arun(go())


def test_refused_call_throws_and_true_is_held_by_codepod(fx):
    n, _, tools = counted(True)
    conv = f"sdk-py-deny-{os.getpid()}-{fx.transport}"
    js = "try { await tools.pay({ id: 'A', amount: 1 }); return 'paid'; } catch (e) { return e.message; }"

    async def go():
        cp = await fx.open()
        try:
            first = await cp.run(conversation=conv, js=js, tools=tools)
            assert first["status"] == "suspended"
            done = await cp.resume(first["continuation"],
                                   [{"call": "1", "approved": False, "message": "Not today."}],
                                   conversation=conv, js=js, tools=tools)
            decls = await cp.declarations(tools)
        finally:
            await fx.aclose()
        assert done["result"] == "Not today."
        assert n == {"list": 0, "pay": 0}
        assert "run again from\n * the start" in decls
    arun(go())


def test_the_approval_example():
    import subprocess
    import sys
    from pathlib import Path
    from conftest import BIN
    example = Path(__file__).resolve().parents[1] / "examples" / "approval_agent.py"
    r = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "CODEPOD_BIN": BIN})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines() == ["Paid INV-7 (Acme), reference PAY-1.", "payments made: 1"]


def test_approval_memory_decides_an_allowed_call(fx):
    from codepod import ApprovalMemory
    n, _, tools = counted(True)
    conv = f"sdk-py-memory-{os.getpid()}-{fx.transport}"
    js = "return (await tools.pay({ id: 'A', amount: 5 })).ref;"
    memory = ApprovalMemory()

    async def go():
        cp = await fx.open()
        try:
            first = await cp.run(conversation=conv, js=js, tools=tools)
            assert len(memory.decide(first)[1]) == 1
            memory.allow(first, "1")
            await cp.resume(first["continuation"], [{"call": "1", "approved": True}],
                            conversation=conv, js=js, tools=tools)
            again = await cp.run(conversation=conv, js=js, tools=tools)
            decisions, ask = memory.decide(again)
            assert (decisions, ask) == ([{"call": "1", "approved": True}], [])
            done = await cp.resume(again["continuation"], decisions, conversation=conv, js=js, tools=tools)
            other = await cp.run(conversation=conv, js=js.replace("'A'", "'B'"), tools=tools)
        finally:
            await fx.aclose()
        assert done["result"] == "paid-A"
        assert n == {"list": 0, "pay": 2}
        assert len(memory.decide(other)[1]) == 1  # another program, another input: ask
    arun(go())
