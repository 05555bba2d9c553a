// codeModeTool as an AI SDK 7 tool caller: with experimental_toolCallers the
// routed tools are callable only from programs (the model is not offered
// them), the AI SDK's bound tools run the program's calls, and the code
// call's toolCallId and abortSignal reach the execution. A scripted model
// (the AI SDK's own mock) drives generateText on both transports.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { generateText, jsonSchema, tool } from "ai";
import * as aiTest from "ai/test";
import { codeModeTool, type CodeLog } from "@codepod/client/ai";
import { open, TRANSPORTS } from "./helpers.ts";

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

/** Calls `code` once with @js as toolCallId @callId, then answers; records what it was offered. */
function scripted(js: string, callId: string, offered: string[][]) {
  return new aiTest.MockLanguageModelV4({
    doGenerate: async (options: { prompt: Array<{ role: string; content: any }>; tools?: Array<{ name: string }> }) => {
      offered.push((options.tools ?? []).map((t) => t.name).sort());
      const toolMsg = options.prompt.find((m) => m.role === "tool");
      if (!toolMsg) {
        return {
          content: [{ type: "tool-call", toolCallId: callId, toolName: "code", input: JSON.stringify({ reason: "r", js }) }],
          finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage, warnings: [],
        };
      }
      return {
        content: [{ type: "text", text: JSON.stringify(toolMsg.content[0].output.value) }],
        finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [],
      };
    },
  } as never);
}

const lookupSchema = jsonSchema<{ id: string }>({ type: "object", properties: { id: { type: "string" } }, required: ["id"] });

for (const transport of TRANSPORTS) {
  describe(`codeModeTool as a tool caller over ${transport}`, () => {
    test("routed tools are only callable from programs; toolCallId reaches the execution", async () => {
      const fx = await open(transport);
      try {
        const called: string[] = [];
        const lookup = tool({
          description: "Look a customer up.", inputSchema: lookupSchema,
          execute: async ({ id }) => { called.push(id); return { name: `customer ${id}` }; },
        });
        const logs: CodeLog[] = [];
        const code = await codeModeTool({
          codepod: fx.codepod, conversation: `sdk-ts-caller-${transport}-${process.pid}`, tools: { lookup },
          onLog: (l) => logs.push(l),
        });
        const offered: string[][] = [];
        const res = await generateText({
          prompt: "go", model: scripted("const c = await tools.lookup({ id: 'c7' }); console.log('got', c.name); return c.name;", "call-7", offered),
          tools: { code, lookup },
          experimental_toolCallers: { lookup: ["code"] },
          stopWhen: ({ steps }) => steps.length >= 3,
        });
        // The model was offered only `code`; the program reached lookup through it.
        assert.deepEqual(offered, [["code"], ["code"]]);
        assert.deepEqual(called, ["c7"]);
        assert.deepEqual(JSON.parse(res.text), { status: "succeeded", result: "customer c7", logs: "got customer c7\n" });
        assert.ok(logs.length > 0 && logs.every((l) => l.toolCallId === "call-7" && l.executionId.length > 0));
      } finally {
        await fx.close();
      }
    });

    test("generateText's abortSignal stops the program and cancels the tool it waits on", async () => {
      const fx = await open(transport);
      try {
        let started!: () => void;
        const running = new Promise<void>((r) => { started = r; });
        let toolSignal: AbortSignal | undefined;
        const slow = tool({
          description: "Waits until cancelled.", inputSchema: jsonSchema<object>({ type: "object" }),
          execute: (_input, { abortSignal }) => new Promise((_res, rej) => {
            toolSignal = abortSignal;
            started();
            abortSignal?.addEventListener("abort", () => rej(new Error("cancelled")), { once: true });
          }),
        });
        const code = await codeModeTool({ codepod: fx.codepod, conversation: `sdk-ts-caller-abort-${transport}-${process.pid}`, tools: { slow } });
        const ac = new AbortController();
        const gen = generateText({
          prompt: "go", model: scripted("await tools.slow({}); return 'not reached';", "call-9", []),
          tools: { code, slow }, experimental_toolCallers: { slow: ["code"] }, abortSignal: ac.signal,
          stopWhen: ({ steps }) => steps.length >= 3,
        });
        await running;
        ac.abort();
        await assert.rejects(gen);
        // codepod cancels the call when the execution stops: the tool's own signal fires.
        while (!toolSignal?.aborted) await new Promise((r) => setTimeout(r, 20));
        assert.equal(toolSignal.aborted, true);
      } finally {
        await fx.close();
      }
    });

    test("a tool routed to the caller but not given to codeModeTool is refused by name", async () => {
      const fx = await open(transport);
      try {
        const code = await codeModeTool({ codepod: fx.codepod, conversation: `sdk-ts-caller-missing-${process.pid}`, tools: {} });
        const other = tool({ description: "x", inputSchema: lookupSchema, execute: async () => 1 });
        await assert.rejects(generateText({
          prompt: "go", model: scripted("return 1;", "call-1", []), tools: { code, other }, experimental_toolCallers: { other: ["code"] },
        }), /routes other to this code tool/);
      } finally {
        await fx.close();
      }
    });
  });
}
