#!/usr/bin/python3
"""A conversation's sandbox from a Python backend: the user's upload goes
into the workspace, the model gets a `shell` tool (commands in the sandbox)
beside `code` (programs in the same sandbox, told which files are there),
and the program's report comes back out as a download.

    python3 examples/sandbox_roundtrip.py          (codepod serve --stdio as a child; CODEPOD_BIN names it)
    CODEPOD_URL=http://127.0.0.1:8080 CODEPOD_TOKEN=... python3 examples/sandbox_roundtrip.py

The model is a scripted stand-in shaped like an OpenAI-style chat client."""

import asyncio
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this tree's package, installed or not

from codepod import Codepod  # noqa: E402

SALES = [("north", 120), ("south", 80), ("north", 30)]
REPORT_PROGRAM = """const fs = require("node:fs");
const rows = fs.readFileSync("uploads/sales.csv", "utf8").trim().split("\\n").slice(1).map((l) => l.split(","));
const byRegion = {};
for (const [region, amount] of rows) byRegion[region] = (byRegion[region] ?? 0) + Number(amount);
fs.mkdirSync("out", { recursive: true });
fs.writeFileSync("out/report.json", JSON.stringify(byRegion));
return Object.keys(byRegion).length;"""

SHELL_TOOL = {"type": "function", "function": {
    "name": "shell", "description": "Run a shell command in the sandbox (the workspace is its working directory).",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}


class ScriptedModel:
    """Counts the upload's lines with `shell`, writes the report with `code`, then answers."""

    def __init__(self):
        self.seen_tools = None

    async def complete(self, messages, tools):
        self.seen_tools = tools
        results = [json.loads(m["content"]) for m in messages if m["role"] == "tool"]
        steps = [("shell", {"command": "wc -l < uploads/sales.csv"}),
                 ("code", {"reason": "Totalling sales by region", "js": REPORT_PROGRAM})]
        if len(results) < len(steps):
            name, args = steps[len(results)]
            return {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call-{len(results) + 1}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)}}]}
        lines = int(results[0]["stdout"].strip())
        return {"role": "assistant",
                "content": f"{lines - 1} sales rows in {results[1]['result']} regions; the report is out/report.json."}


async def main(model):
    url, token, binary = os.environ.get("CODEPOD_URL"), os.environ.get("CODEPOD_TOKEN", ""), os.environ.get("CODEPOD_BIN", "codepod")
    conversation = os.environ.get("CODEPOD_CONVERSATION", "thread-9")
    cp = await (Codepod.connect(url, token) if url else Codepod.spawn([binary, "serve", "--stdio"]))
    sb = cp.sandbox(conversation, policy={"timeoutMs": 10000})

    async def upload():   # streamed: the whole file never needs to be in memory
        yield b"region,amount\n"
        for region, amount in SALES:
            yield f"{region},{amount}\n".encode()
    await sb.write_file("uploads/sales.csv", upload())

    code = await cp.code_tool(conversation=conversation, tools={}, workspace_files=True)
    messages = [{"role": "user", "content": "Total the sales in my upload by region."}]
    while True:
        reply = await model.complete(messages, tools=[code.definition, SHELL_TOOL])
        messages.append(reply)
        if not reply.get("tool_calls"):
            break
        for call in reply["tool_calls"]:
            args = json.loads(call["function"]["arguments"])
            if call["function"]["name"] == "shell":
                r = await sb.run(args["command"])
                text = json.dumps({k: r[k] for k in ("exitCode", "stdout", "stderr")})
            else:
                text = await code(args)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})
    report = await sb.open_file("out/report.json")   # the download, chunk by chunk
    body = b"".join([chunk async for chunk in report])
    await cp.close()
    return reply["content"], json.loads(body)


if __name__ == "__main__":
    answer, report = asyncio.run(main(ScriptedModel()))
    print(answer)
    print(json.dumps(report, sort_keys=True))
