// The Vercel AI SDK adapter: codeModeTool in a generateText loop with a
// scripted model, the program running for real in codepod, on both
// transports; and the invoices example, run as a backend would run it.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, test } from "node:test";
import { generateText, jsonSchema, tool } from "ai";
import { codeModeTool } from "@codepod/client/ai";
import { BIN, expectedTop3, HAVE_SCHEMAS, open, startServer, tempDir, TRANSPORTS } from "./helpers.ts";

const here = dirname(fileURLToPath(import.meta.url));
const examples = process.env.CODEPOD_SDK_EXAMPLES ?? join(here, "..", "examples");
const { listFirms, listInvoices } = await import(join(examples, "invoices-tools.ts"));
const { scriptedModel, seen } = await import(join(examples, "scripted-model.ts"));

for (const transport of TRANSPORTS) {
  describe(`codeModeTool over ${transport}`, () => {
    test("generateText calls code with the invoices program; the model reads result and logs", async () => {
      const fx = await open(transport);
      try {
        const code = await codeModeTool({
          codepod: fx.codepod, conversation: `ai-${transport}-${process.pid}`,
          tools: { listInvoices, listFirms }, executionPolicy: { timeoutMs: 10_000, maxResultBytes: 16_384 },
        });
        const res = await generateText({
          model: scriptedModel(), tools: { code }, stopWhen: ({ steps }) => steps.length >= 4,
          prompt: "Which three firms had the highest paid invoice totals in August 2026?",
        });
        const top = expectedTop3();
        assert.match(res.text, new RegExp(`^Top firms by paid invoices, August 2026: ${top[0]!.firm.replace(/[.&]/g, "\\$&")} `));
        assert.deepEqual((seen.output as { result: unknown }).result, top);
        assert.equal((seen.output as { status: string }).status, "succeeded");
        // The description: the rules with this policy's limits, then codepod's declarations.
        assert.match(seen.description!, /body of an async function/);
        assert.match(seen.description!, /files written there persist across calls, JavaScript variables do not/);
        assert.match(seen.description!, /10 s per program/);
        assert.match(seen.description!, /16 KiB/);
        assert.match(seen.description!, /declare const tools: \{/);
        assert.match(seen.description!, /listInvoices: \(input: \{/);
      } finally {
        await fx.close();
      }
      if (HAVE_SCHEMAS) assert.deepEqual(fx.log.bad, []);
    });

    test("a failing program gives the model the code, the safe message and programError", async () => {
      const fx = await open(transport);
      try {
        const lookup = tool({
          description: "Look a customer up.",
          inputSchema: jsonSchema<{ id: string }>({ type: "object", properties: { id: { type: "string" } }, required: ["id"] }),
          execute: async () => ({ name: "x" }),
        });
        const code = await codeModeTool({ codepod: fx.codepod, conversation: `ai-fail-${transport}`, tools: { lookup } });
        const out = await code.execute!({ reason: "r", js: "const c = await tools.lookup({ id: 7 });\nreturn c.name;" },
          { toolCallId: "t1", messages: [] } as never);
        assert.equal((out as { status: string }).status, "failed");
        const err = (out as { error: { code: string; message: string; programError: { message: string; stack: string } } }).error;
        assert.equal(err.code, "SCRIPT_ERROR");
        assert.match(err.programError.message, /^Invalid input for tool lookup: input.id must be string/);
        assert.ok(err.message.length > 0);
        const ok = await code.execute!({ reason: "r", js: "console.log('hi'); return (await tools.lookup({ id: 'a' })).name;" },
          { toolCallId: "t2", messages: [] } as never);
        assert.deepEqual(ok, { status: "succeeded", result: "x", logs: "hi\n" });
      } finally {
        await fx.close();
      }
    });
  });
}

describe("the invoices example (examples/invoices-agent.ts)", () => {
  const run = (env: NodeJS.ProcessEnv) => new Promise<string>((resolve, reject) => {
    execFile(process.execPath, [join(examples, "invoices-agent.ts")], { env: { ...process.env, ...env }, timeout: 60_000 },
      (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout)));
  });

  test("answers over stdio (serve --stdio as a child)", async () => {
    const state = mkdtempSync(join(tmpdir(), "codepod-sdk-example-"));
    try {
      const out = await run({ CODEPOD_BIN: BIN, CODEPOD_STATE_DIR: state, CODEPOD_URL: "" });
      assert.match(out, new RegExp(`^Top firms by paid invoices, August 2026: ${expectedTop3()[0]!.firm.replace(/[.&]/g, "\\$&")}`));
    } finally {
      rmSync(state, { recursive: true, force: true });
    }
  });

  test("answers over a WebSocket (serve --listen)", async () => {
    const dir = tempDir("example");
    const srv = await startServer(dir);
    let rc: number | null;
    try {
      const out = await run({ CODEPOD_URL: srv.url, CODEPOD_TOKEN: srv.token });
      assert.match(out, /^Top firms by paid invoices, August 2026: /);
    } finally {
      rc = await srv.stop();
      rmSync(dir, { recursive: true, force: true });
    }
    // SIGTERM drains and exits 0; a crash or a sanitizer report does not.
    assert.equal(rc, 0, `codepod serve exited ${rc}`);
  });

  test("the backend's integration is at most 15 lines besides its tools", () => {
    const src = readFileSync(join(examples, "invoices-agent.ts"), "utf8");
    const body = src.split("// --- integration: begin")[1]!.split("// --- integration: end")[0]!;
    const lines = body.split("\n").filter((l) => l.trim() && !l.trim().startsWith("//"));
    assert.ok(lines.length <= 15, `${lines.length} lines`);
    console.log(`# integration lines in examples/invoices-agent.ts: ${lines.length}`);
  });
});
