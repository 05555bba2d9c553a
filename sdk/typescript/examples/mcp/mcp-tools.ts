// The tools of an MCP server in model-written programs: connect with the
// official MCP client, hand mcpTools(client) to codeModeTool, and a program
// can call them (`await tools["get-structured-content"]({ location })`),
// structured output arriving as JSON.
//   npm install @codepod/client ai @modelcontextprotocol/sdk @modelcontextprotocol/server-everything
//   node mcp-tools.ts
// (Not type-checked by the SDK's suite, which has no MCP SDK installed; test/mcp.test.ts
// does the same against the real server.)
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { Codepod, mcpTools } from "@codepod/client";
import { codeModeTool } from "@codepod/client/ai";

const mcp = new Client({ name: "my-agent", version: "1.0.0" });
await mcp.connect(new StdioClientTransport({ command: "npx", args: ["@modelcontextprotocol/server-everything", "stdio"] }));
const codepod = await Codepod.spawn({ command: "codepod" });
try {
  const code = await codeModeTool({ codepod, conversation: "thread-42", tools: await mcpTools(mcp) });
  // Hand `code` to generateText({ tools: { code } }); here, one program directly:
  const out = await code.execute!({
    reason: "weather",
    js: "const w = await tools['get-structured-content']({ location: 'Chicago' }); return `${w.temperature} C, ${w.conditions}`;",
  }, { toolCallId: "example", messages: [] } as never);
  console.log(out);
} finally {
  await codepod.close();
  await mcp.close();
}
