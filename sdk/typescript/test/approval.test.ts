// Approvals through @codepod/client against a real `codepod serve`, on both
// transports: a tool with `needsApproval` suspends the program, and
// `codepod.resume` finishes it; each tool counts its calls, so none runs twice.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Codepod, PlainTool, ToolContext } from "@codepod/client";
import { HAVE_SCHEMAS, open, TRANSPORTS, type Fixture } from "./helpers.ts";

const JS = `
const invoices = await tools.listInvoices({});
const refs = [];
for (const i of invoices) refs.push((await tools.pay({ id: i.id, amount: i.amount })).ref);
return refs;`;

function counted() {
  const n = { list: 0, pay: 0 };
  const keys: (string | undefined)[] = [];
  const tools = {
    listInvoices: {
      inputSchema: { type: "object" },
      execute: async () => { n.list++; return [{ id: "A", amount: 120 }, { id: "B", amount: 80 }]; },
    },
    pay: {
      description: "Pay an invoice.",
      inputSchema: { type: "object", properties: { id: { type: "string" }, amount: { type: "number" } } },
      // as the AI SDK's needsApproval: decided from the input
      needsApproval: (i: { amount: number }) => i.amount > 100,
      execute: async (i: { id: string }, ctx: ToolContext) => { n.pay++; keys.push(ctx.idempotencyKey); return { ref: `paid-${i.id}` }; },
    },
  } satisfies Record<string, PlainTool>;
  return { n, keys, tools };
}

for (const transport of TRANSPORTS) {
  describe(`approvals over ${transport}`, () => {
    let fx: Fixture;
    let cp: Codepod;
    before(async () => {
      fx = await open(transport);
      cp = fx.codepod;
    });
    after(async () => {
      await fx.close();
      if (HAVE_SCHEMAS) assert.deepEqual(fx.log.bad, [], "every message matches its JSON Schema");
    });

    test("needsApproval suspends the program; resume runs the approved call once, with its key", async () => {
      const { n, keys, tools } = counted();
      const conversation = `sdk-ts-approve-${process.pid}-${transport}`;
      const first = await cp.run({ conversation, js: JS, tools });
      assert.equal(first.status, "suspended", JSON.stringify(first.error));
      assert.deepEqual(first.pending, [{ call: "2", tool: "pay", input: { id: "A", amount: 120 } }]);
      assert.equal(typeof first.continuation, "string");
      assert.deepEqual(n, { list: 1, pay: 0 });
      const done = await cp.resume({
        conversation, js: JS, tools, continuation: first.continuation!,
        decisions: [{ call: "2", approved: true }],
      });
      assert.equal(done.status, "succeeded", JSON.stringify(done.error));
      assert.deepEqual(done.result, ["paid-A", "paid-B"]);
      assert.deepEqual(n, { list: 1, pay: 2 });
      assert.match(keys[0]!, /:2$/); // the approved call
      assert.equal(keys[1], undefined); // B needed no approval
    });

    test("a refused call throws its message; needsApproval: true is codepod's to hold", async () => {
      const { n, tools } = counted();
      const always = { ...tools, pay: { ...tools.pay, needsApproval: true } };
      const conversation = `sdk-ts-deny-${process.pid}-${transport}`;
      const js = "try { await tools.pay({ id: 'A', amount: 1 }); return 'paid'; } catch (e) { return e.message; }";
      const first = await cp.run({ conversation, js, tools: always });
      assert.equal(first.status, "suspended");
      const done = await cp.resume({
        conversation, js, tools: always, continuation: first.continuation!,
        decisions: [{ call: "1", approved: false, message: "Not today." }],
      });
      assert.equal(done.result, "Not today.");
      assert.deepEqual(n, { list: 0, pay: 0 });
      const declarations = await cp.declarations(always);
      assert.match(declarations, /run again from\n \* the start/);
    });
  });
}

describe("the approval example (examples/approval-agent.ts)", () => {
  test("the program waits for the person, then pays once", async () => {
    const { execFile } = await import("node:child_process");
    const { mkdtempSync, rmSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const { join, dirname } = await import("node:path");
    const { fileURLToPath } = await import("node:url");
    const here = dirname(fileURLToPath(import.meta.url));
    const state = mkdtempSync(join(tmpdir(), "codepod-sdk-approval-"));
    try {
      const out = await new Promise<string>((resolve, reject) => {
        execFile(process.execPath, [join(here, "..", "examples", "approval-agent.ts")],
          { env: { ...process.env, CODEPOD_STATE_DIR: state }, timeout: 60_000 },
          (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout)));
      });
      assert.deepEqual(out.trim().split("\n"), [
        "Waiting for your approval of payInvoice.",
        'succeeded: {"invoice":"INV-7","ref":"PAY-1 for INV-7"}',
        "payments made: 1",
      ]);
    } finally {
      rmSync(state, { recursive: true, force: true });
    }
  });
});

describe("approvals remembered by digest (ApprovalMemory)", () => {
  test("an allowed call is decided without asking; another input is asked about", async () => {
    const { ApprovalMemory } = await import("@codepod/client");
    const fx = await open("stdio");
    try {
      const { n, tools } = counted();
      const always = { ...tools, pay: { ...tools.pay, needsApproval: true } };
      const conversation = `sdk-ts-memory-${process.pid}`;
      const js = "return (await tools.pay({ id: 'A', amount: 5 })).ref;";
      const memory = new ApprovalMemory();
      const first = await fx.codepod.run({ conversation, js, tools: always });
      assert.equal(memory.decide(first).ask.length, 1);
      memory.allow(first, "1");
      await fx.codepod.resume({ conversation, js, tools: always, continuation: first.continuation!,
        decisions: [{ call: "1", approved: true }] });
      const again = await fx.codepod.run({ conversation, js, tools: always });
      assert.equal(again.status, "suspended");
      const d = memory.decide(again);
      assert.deepEqual(d, { decisions: [{ call: "1", approved: true }], ask: [] });
      const done = await fx.codepod.resume({ conversation, js, tools: always,
        continuation: again.continuation!, decisions: d.decisions });
      assert.equal(done.result, "paid-A");
      assert.deepEqual(n, { list: 0, pay: 2 });
      const other = await fx.codepod.run({ conversation, js: js.replace("'A'", "'B'"), tools: always });
      assert.equal(memory.decide(other).ask.length, 1); // another program, another input: ask
    } finally {
      await fx.close();
    }
  });
});
