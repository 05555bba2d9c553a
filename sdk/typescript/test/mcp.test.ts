// MCP tools in programs: the tools of a real MCP server
// (@modelcontextprotocol/server-everything, over stdio through the official
// @modelcontextprotocol/sdk Client) handed to codeModeTool via mcpTools(),
// called from a program on both transports, structured output included.
// tests/mcp/install.sh puts both packages in $CODEPOD_MCP_DIR (test.sh does).
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { after, before, describe, test } from "node:test";
import { mcpTools, type McpClientLike } from "@codepod/client";
import { codeModeTool } from "@codepod/client/ai";
import { open, REPO, TRANSPORTS } from "./helpers.ts";

const MCP_DIR = process.env.CODEPOD_MCP_DIR ?? join(REPO, "build", "mcp");
const mods = join(MCP_DIR, "node_modules", "@modelcontextprotocol");
if (!existsSync(join(mods, "server-everything"))) {
  throw new Error(`no MCP packages in ${MCP_DIR}: run tests/mcp/install.sh ${MCP_DIR}`);
}

async function connectEverything(): Promise<McpClientLike & { close(): Promise<void> }> {
  const sdk = (p: string) => import(pathToFileURL(join(mods, "sdk", "dist", "esm", p)).href);
  const { Client } = await sdk("client/index.js");
  const { StdioClientTransport } = await sdk("client/stdio.js");
  const transport = new StdioClientTransport({
    command: process.execPath, args: [join(mods, "server-everything", "dist", "index.js"), "stdio"], stderr: "ignore",
  });
  const client = new Client({ name: "codepod-sdk-test", version: "1.0.0" });
  await client.connect(transport);
  return client;
}

const JS = `const weather = await tools["get-structured-content"]({ location: "Chicago" });
const sum = await tools.get_sum({ a: 2, b: 40 });
const echo = await tools.echo({ message: "hi from a program" });
let refused = "";
try { await tools.get_sum({ a: "two" }); } catch (e) { refused = e.message; }
return { weather, sum, echo, refused };`;

for (const transport of TRANSPORTS) {
  describe(`MCP tools over ${transport}`, () => {
    let client: Awaited<ReturnType<typeof connectEverything>>;
    before(async () => { client = await connectEverything(); });
    after(async () => { await client.close(); });

    test("a program calls a real MCP server's tools, structured output as JSON", async () => {
      const fx = await open(transport);
      try {
        const tools = await mcpTools(client, { only: ["echo", "get-sum", "get-structured-content"] });
        assert.deepEqual(Object.keys(tools).sort(), ["echo", "get-structured-content", "get-sum"]);
        const code = await codeModeTool({ codepod: fx.codepod, conversation: `sdk-ts-mcp-${transport}-${process.pid}`, tools });
        // The model reads the MCP tools' schemas, the output schema too.
        const description = String(code.description);
        assert.ok(description.includes('"get-structured-content": (input: { /** Choose city */ location: "New York" | ' +
          '"Chicago" | "Los Angeles"; }) => Promise<{ /** Temperature in celsius */ temperature: number;'), description);
        assert.ok(description.includes("get_sum: (input: { /** First number */ a: number;"), description);
        const out = await code.execute!({ reason: "mcp", js: JS }, { toolCallId: "m1", messages: [] } as never) as {
          status: string; result: { weather: { temperature: number; conditions: string; humidity: number }; sum: string; echo: string; refused: string };
        };
        assert.equal(out.status, "succeeded", JSON.stringify(out));
        const w = out.result.weather;
        assert.deepEqual(Object.keys(w).sort(), ["conditions", "humidity", "temperature"]);
        assert.equal(typeof w.temperature, "number");
        assert.equal(typeof w.conditions, "string");
        assert.match(out.result.sum, /\b42\b/);
        assert.match(out.result.echo, /hi from a program/);
        assert.match(out.result.refused, /^Invalid input for tool get-sum: input(\.a must be number| must have required property 'b')/);
      } finally {
        await fx.close();
      }
    });
  });
}
