// toModelError: what a program (and so the model) sees of an error a tool
// threw, on both transports and through codeModeTool.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Codepod, ToolErrorInfo } from "@codepod/client";
import { codeModeTool } from "@codepod/client/ai";
import { open, TRANSPORTS, type Fixture } from "./helpers.ts";

const conv = (t: string) => `sdk-ts-toolerr-${t}-${process.pid}`;
const DB_ERROR = 'relation "invoices_2026" does not exist (db-7.internal:5432, role billing_rw)';
const failing = {
  listInvoices: {
    inputSchema: { type: "object" },
    execute: async () => { throw new Error(DB_ERROR); },
  },
};
const CATCH_JS = "try { await tools.listInvoices({}); return 'no error'; } catch (e) { return e.message; }";

for (const transport of TRANSPORTS) {
  describe(`toModelError over ${transport}`, () => {
    let fx: Fixture;
    let cp: Codepod;
    before(async () => {
      fx = await open(transport);
      cp = fx.codepod;
    });
    after(async () => { await fx.close(); });

    test("by default the program sees the tool's message", async () => {
      const o = await cp.run({ conversation: conv("default"), tools: failing, js: CATCH_JS });
      assert.equal(o.result, DB_ERROR);
    });

    test("the hook's text replaces it, and the hook learns which call failed", async () => {
      const seen: Array<{ error: unknown; info: ToolErrorInfo }> = [];
      const o = await cp.run({
        conversation: conv("hook"), tools: failing, js: CATCH_JS,
        toModelError: (error, info) => {
          seen.push({ error, info });
          return `${info.tool} is unavailable right now; try again later`;
        },
      });
      assert.equal(o.result, "listInvoices is unavailable right now; try again later");
      assert.doesNotMatch(JSON.stringify(o), /db-7|billing_rw/);
      assert.equal(seen.length, 1);
      assert.equal((seen[0]!.error as Error).message, DB_ERROR);
      assert.equal(seen[0]!.info.tool, "listInvoices");
      assert.equal(seen[0]!.info.call, o.calls[0]!.id);
      assert.equal(seen[0]!.info.executionId, o.executionId);
      assert.equal(seen[0]!.info.conversation, conv("hook"));
    });

    test("a hook that throws hides the message too", async () => {
      const o = await cp.run({
        conversation: conv("throws"), tools: failing, js: CATCH_JS,
        toModelError: () => { throw new Error("hook broke: " + DB_ERROR); },
      });
      assert.equal(o.result, "Tool listInvoices failed");
    });

    test("codeModeTool passes the hook to every run", async () => {
      const code = await codeModeTool({
        codepod: cp, conversation: conv("ai"), tools: failing,
        toModelError: () => "the invoice store failed",
      });
      const out = await code.execute!({ reason: "r", js: CATCH_JS }, { toolCallId: "t1", messages: [] } as never);
      assert.deepEqual(out, { status: "succeeded", result: "the invoice store failed", logs: "" });
    });
  });
}
