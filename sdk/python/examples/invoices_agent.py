#!/usr/bin/python3
"""The invoices agent: a Python backend whose model gets one tool, `code`,
running its programs in codepod with the backend's own tools.

    python3 examples/invoices_agent.py          (codepod serve --stdio as a child; CODEPOD_BIN names it)
    CODEPOD_URL=http://127.0.0.1:8080 CODEPOD_TOKEN=... python3 examples/invoices_agent.py

The model is a scripted stand-in shaped like an OpenAI-style chat client
(messages in, an assistant message with tool_calls or content out). The
lines between the integration markers are all the backend writes for codepod,
besides its tools and its model: 15 with the import and the agent loop
(tests/test_code_tool.py counts them)."""

import asyncio
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this tree's package, installed or not

from codepod import Tool  # noqa: E402

# ---- the backend's own tools (here over the example data of tests/example) ----
DATA = Path(os.environ.get("CODEPOD_EXAMPLE_DATA", Path(__file__).resolve().parents[3] / "tests/example/data"))
INVOICES = json.loads((DATA / "invoices.json").read_text())
FIRMS = json.loads((DATA / "firms.json").read_text())


async def list_invoices(inp):
    return [{k: i[k] for k in ("firmId", "amountCents", "status")} for i in INVOICES if i["month"] == inp["month"]]


TOOLS = {
    "listInvoices": Tool(fn=list_invoices, description="List invoices for a month (YYYY-MM). Amounts are integer cents.",
                         input_schema={"type": "object", "properties": {"month": {"type": "string", "pattern": r"^\d{4}-\d{2}$"}},
                                       "required": ["month"], "additionalProperties": False},
                         output_schema={"type": "array", "items": {"type": "object", "properties": {
                             "firmId": {"type": "string"}, "amountCents": {"type": "integer"},
                             "status": {"type": "string", "enum": ["paid", "void"]}}}}),
    "listFirms": Tool(fn=lambda inp: FIRMS, description="List the workspace's firms.",
                      input_schema={"type": "object", "properties": {}, "additionalProperties": False},
                      output_schema={"type": "array", "items": {"type": "object", "properties": {
                          "id": {"type": "string"}, "name": {"type": "string"}}}}),
}

INVOICES_PROGRAM = """const [invoices, firms] = await Promise.all([
  tools.listInvoices({ month: "2026-08" }),
  tools.listFirms({}),
]);
const names = new Map(firms.map((firm) => [firm.id, firm.name]));
const totals = new Map();
for (const invoice of invoices) {
  if (invoice.status !== "paid") continue;
  totals.set(invoice.firmId, (totals.get(invoice.firmId) ?? 0) + invoice.amountCents);
}
return [...totals]
  .map(([firmId, cents]) => ({ firm: names.get(firmId), cents }))
  .sort((a, b) => b.cents - a.cents)
  .slice(0, 3);"""


class ScriptedModel:
    """Calls `code` with the invoices program, then answers from its output."""

    def __init__(self):
        self.seen_tools = None

    async def complete(self, messages, tools):
        self.seen_tools = tools
        results = [m for m in messages if m["role"] == "tool"]
        if not results:
            args = {"reason": "Ranking firms by paid invoices in August", "js": INVOICES_PROGRAM}
            return {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call-1", "type": "function", "function": {"name": "code", "arguments": json.dumps(args)}}]}
        out = json.loads(results[-1]["content"])
        if out["status"] != "succeeded":
            return {"role": "assistant", "content": f"The program failed: {out['error']}"}
        rows = ", ".join(f"{r['firm']} (${r['cents'] / 100:.2f})" for r in out["result"])
        return {"role": "assistant", "content": f"Top firms by paid invoices, August 2026: {rows}."}


async def main(model, question):
    # --- integration: begin
    from codepod import Codepod
    url, token, binary = os.environ.get("CODEPOD_URL"), os.environ.get("CODEPOD_TOKEN", ""), os.environ.get("CODEPOD_BIN", "codepod")
    cp = await (Codepod.connect(url, token) if url else Codepod.spawn([binary, "serve", "--stdio"]))
    code = await cp.code_tool(conversation="thread-42", tools=TOOLS, policy={"timeoutMs": 10000})
    messages = [{"role": "user", "content": question}]
    while True:
        reply = await model.complete(messages, tools=[code.definition])
        messages.append(reply)
        if not reply.get("tool_calls"):
            break
        for call in reply["tool_calls"]:
            text = await code(call["function"]["arguments"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})
    await cp.close()
    return reply["content"]
    # --- integration: end


if __name__ == "__main__":
    print(asyncio.run(main(ScriptedModel(), "Which three firms had the highest paid invoice totals in August 2026?")))
