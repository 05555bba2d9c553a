"""code_tool's on_log carries the execution and the model's tool-call id, so
two `code` calls running at once can be told apart; its description (and the
declarations in it) says that they share the workspace."""

import asyncio
import json
import os

from codepod import Tool
from conftest import arun

NO_TOOLS = {"ping": Tool(fn=lambda _: "pong")}


def conv(tag):
    return f"sdk-py-codelog-{tag}-{os.getpid()}"


def js(tag):
    return (f"for (let i = 0; i < 3; i++) {{ console.log('{tag}' + i); await new Promise((r) => setTimeout(r, 30)); }} "
            f"process.stderr.write('{tag}-err\\n'); return '{tag}';")


def test_two_code_calls_at_once_each_log_names_its_execution_and_call(fx):
    async def go():
        logs = []
        cp = await fx.open()
        try:
            code = await cp.code_tool(conversation=conv("two"), tools=NO_TOOLS, on_log=logs.append)
            outs = await asyncio.gather(code({"reason": "a", "js": js("a")}, tool_call_id="call-a"),
                                        code({"reason": "b", "js": js("b")}, tool_call_id="call-b"))
        finally:
            await fx.aclose()
        assert [json.loads(o)["result"] for o in outs] == ["a", "b"]
        ids = {}
        for tag in "ab":
            mine = [entry for entry in logs if entry["tool_call_id"] == f"call-{tag}"]
            assert "".join(e["text"] for e in mine if e["stream"] == "stdout") == f"{tag}0\n{tag}1\n{tag}2\n"
            assert "".join(e["text"] for e in mine if e["stream"] == "stderr") == f"{tag}-err\n"
            eids = {e["execution_id"] for e in mine}
            assert len(eids) == 1, "one execution per call"
            ids[tag] = eids.pop()
        assert ids["a"] != ids["b"]
    arun(go())


def test_an_on_log_of_two_parameters_still_gets_stream_and_text(fx):
    async def go():
        got = []
        cp = await fx.open()
        try:
            code = await cp.code_tool(conversation=conv("legacy"), tools=NO_TOOLS,
                                      on_log=lambda stream, text: got.append(f"{stream}:{text}"))
            await code({"reason": "r", "js": "console.log('hi'); return 1;"})
        finally:
            await fx.aclose()
        assert got == ["stdout:hi\n"]
    arun(go())


def test_the_description_says_concurrent_code_calls_share_the_workspace(fx):
    async def go():
        cp = await fx.open()
        try:
            code = await cp.code_tool(conversation=conv("desc"), tools=NO_TOOLS)
        finally:
            await fx.aclose()
        assert "Several `code` calls of this conversation may run at the same time" in code.description
        assert "share the workspace" in code.description
        assert "conversation may run at the same time, and then share its workspace" in code.description
    arun(go())
