#!/usr/bin/python3
"""An agent whose program needs a person's yes before it pays: the program
reads the open invoices, asks to pay the largest, stops there (the execution
ends suspended and holds nothing), and once the person approved it is run
again from the start; codepod answers the read from its log, and the
payment runs once.

    python3 examples/approval_agent.py     (codepod serve --stdio as a child; CODEPOD_BIN names it)

The model and the person are scripted stand-ins."""

import asyncio
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this tree's package, installed or not

from codepod import Tool  # noqa: E402
from codepod.model import output_for_model  # noqa: E402

OPEN = [{"id": "INV-7", "firm": "Acme", "cents": 125000}, {"id": "INV-9", "firm": "Globex", "cents": 48000}]
PAYMENTS = {}  # idempotency key -> payment: a repeated key pays nothing new


def pay(inp, ctx):
    key = ctx.idempotency_key or f"{ctx.execution_id}:{ctx.call_id}"
    PAYMENTS.setdefault(key, {"invoice": inp["id"], "ref": f"PAY-{len(PAYMENTS) + 1}"})
    return {"ref": PAYMENTS[key]["ref"]}


TOOLS = {
    "listOpenInvoices": Tool(fn=lambda inp: OPEN, description="The open invoices; amounts in cents.",
                             input_schema={"type": "object", "properties": {}, "additionalProperties": False}),
    "payInvoice": Tool(fn=pay, description="Pay one invoice by its id.", needs_approval=True,
                       input_schema={"type": "object", "properties": {"id": {"type": "string"}},
                                     "required": ["id"]}),
}

PROGRAM = """const invoices = await tools.listOpenInvoices({});
const largest = invoices.reduce((a, b) => (b.cents > a.cents ? b : a));
const paid = await tools.payInvoice({ id: largest.id });
return { invoice: largest.id, firm: largest.firm, ref: paid.ref };"""


class ScriptedModel:
    async def complete(self, messages, tools):
        results = [m for m in messages if m["role"] == "tool"]
        if not results:
            args = {"reason": "Paying the largest open invoice", "js": PROGRAM}
            return {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call-1", "type": "function", "function": {"name": "code", "arguments": json.dumps(args)}}]}
        out = json.loads(results[-1]["content"])
        if out["status"] != "succeeded":
            return {"role": "assistant", "content": f"Not paid: {out.get('error') or out.get('message')}"}
        r = out["result"]
        return {"role": "assistant", "content": f"Paid {r['invoice']} ({r['firm']}), reference {r['ref']}."}


def person(pending):
    """The approval UI: here, yes to any payment."""
    return {"call": pending["call"], "approved": True}


async def main(model, question):
    from codepod import Codepod
    cp = await Codepod.spawn([os.environ.get("CODEPOD_BIN", "codepod"), "serve", "--stdio"])
    code = await cp.code_tool(conversation="thread-7", tools=TOOLS)
    messages = [{"role": "user", "content": question}]
    while True:
        reply = await model.complete(messages, tools=[code.definition])
        messages.append(reply)
        if not reply.get("tool_calls"):
            break
        for call in reply["tool_calls"]:
            args = json.loads(call["function"]["arguments"])
            outcome = await code.run(args["reason"], args["js"])
            while outcome["status"] == "suspended":  # a person decides, possibly much later
                decisions = [person(p) for p in outcome["pending"]]
                outcome = await cp.resume(outcome["continuation"], decisions, conversation="thread-7",
                                          js=args["js"], tools=TOOLS)
            messages.append({"role": "tool", "tool_call_id": call["id"],
                             "content": json.dumps(output_for_model(outcome))})
    await cp.close()
    return reply["content"]


if __name__ == "__main__":
    print(asyncio.run(main(ScriptedModel(), "Pay our largest open invoice.")))
    print(f"payments made: {len(PAYMENTS)}")
