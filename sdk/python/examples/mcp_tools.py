"""The tools of an MCP server in model-written programs: connect with the
SDK's own stdio MCP client, hand mcp_tools(mcp) to code_tool, and a program
can call them (`await tools["get-structured-content"]({ location })`),
structured output arriving as JSON.

    npm install @modelcontextprotocol/server-everything
    python3 mcp_tools.py
"""

import asyncio

from codepod import Codepod
from codepod.mcp import McpStdioClient, mcp_tools


async def main():
    async with McpStdioClient(["npx", "@modelcontextprotocol/server-everything", "stdio"]) as mcp:
        cp = await Codepod.spawn(["codepod", "serve", "--stdio"])
        try:
            code = await cp.code_tool(conversation="thread-42", tools=await mcp_tools(mcp))
            # Hand code.definition to your model; here, one program directly:
            print(await code({"reason": "weather", "js":
                              "const w = await tools['get-structured-content']({ location: 'Chicago' });"
                              " return `${w.temperature} C, ${w.conditions}`;"}))
        finally:
            await cp.close()


if __name__ == "__main__":
    asyncio.run(main())
