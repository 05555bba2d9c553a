// MCP tools as codepod tools: a connected MCP client's tools (from the
// official @modelcontextprotocol/sdk Client, or anything with its listTools
// and callTool) become tools a program calls as `await tools.name(input)`.
// Structured output (a tool's outputSchema and structuredContent) reaches
// the program as JSON; otherwise it gets the text of the content.
import type { PlainTool, Tools } from "./types.js";

/** The part of an MCP client this needs (the official SDK's Client has it). */
export interface McpClientLike {
  listTools(params?: { cursor?: string }): Promise<{
    tools: Array<{ name: string; description?: string; inputSchema: unknown; outputSchema?: unknown }>;
    nextCursor?: string;
  }>;
  callTool(params: { name: string; arguments?: Record<string, unknown> },
    resultSchema?: undefined, options?: { signal?: AbortSignal }): Promise<unknown>;
}

interface CallResult {
  content?: Array<{ type: string; text?: string; [k: string]: unknown }>;
  structuredContent?: unknown;
  isError?: boolean;
}

/** The program's value of an MCP result: structuredContent, else the text, else the content. */
function outputOf(name: string, r: CallResult): unknown {
  const content = Array.isArray(r.content) ? r.content : [];
  const text = content.filter((c) => c.type === "text" && typeof c.text === "string").map((c) => c.text).join("\n");
  if (r.isError) throw new Error(text || `MCP tool ${name} failed`);
  if (r.structuredContent !== undefined) return r.structuredContent;
  if (content.length > 0 && content.every((c) => c.type === "text")) return text;
  return content;
}

/** Strips what codepod's schema handling need not see: the draft marker. */
function plainSchema(s: unknown): PlainTool["inputSchema"] {
  if (!s || typeof s !== "object") return { type: "object" };
  const { $schema: _drop, ...rest } = s as Record<string, unknown>;
  return rest;
}

/**
 * The MCP server's tools (all, or those `only` names) as codepod tools. The
 * call's abort signal is passed to the MCP request, so a cancelled call
 * cancels it on the server too.
 */
export async function mcpTools(client: McpClientLike, opts: { only?: string[] } = {}): Promise<Tools> {
  const out: Tools = {};
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor ? { cursor } : undefined);
    for (const t of page.tools) {
      if (opts.only && !opts.only.includes(t.name)) continue;
      const tool: PlainTool = {
        inputSchema: plainSchema(t.inputSchema),
        execute: async (input, ctx) =>
          outputOf(t.name, await client.callTool({ name: t.name, arguments: input as Record<string, unknown> },
            undefined, { signal: ctx.signal }) as CallResult),
      };
      if (t.description) tool.description = t.description;
      if (t.outputSchema) tool.outputSchema = plainSchema(t.outputSchema);
      out[t.name] = tool;
    }
    cursor = page.nextCursor;
  } while (cursor);
  return out;
}
