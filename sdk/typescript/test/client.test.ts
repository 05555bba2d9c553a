// @codepod/client against a real `codepod serve` (this tree's build/codepod),
// on both transports: node --test test/
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Codepod, PlainTool } from "@codepod/client";
import {
  aborted, expectedTop3, firms, HAVE_ATTACH, HAVE_LOG, HAVE_SCHEMAS, INVOICES_JS, invoicesFor, open, spec, TRANSPORTS,
  type Fixture,
} from "./helpers.ts";

const invoiceTools = {
  listInvoices: { ...spec("listInvoices"), execute: async ({ month }: { month: string }) => invoicesFor(month) },
  listFirms: { ...spec("listFirms"), execute: async () => firms },
} satisfies Record<string, PlainTool>;

const conv = (t: string) => `sdk-ts-${t}-${process.pid}`;

for (const transport of TRANSPORTS) {
  describe(`over ${transport}`, () => {
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

    test("the invoices program runs with the backend's tools", async () => {
      const o = await cp.run({ conversation: conv("inv"), js: INVOICES_JS, tools: invoiceTools, policy: { timeoutMs: 20_000 } });
      assert.equal(o.status, "succeeded", JSON.stringify(o.error));
      assert.deepEqual(o.result, expectedTop3());
      assert.equal(o.calls.length, 2);
      assert.ok(o.calls.every((c) => c.status === "ok"));
      assert.match(o.usage!.digest, /^[0-9a-f]{64}$/);
    });

    test("a tool's thrown error is a catchable Error in the program; uncaught it is SCRIPT_ERROR with programError", async () => {
      const tools = {
        lookup: {
          description: "fails", inputSchema: { type: "object" },
          execute: async () => { throw new Error("no such customer"); },
        },
      };
      const caught = await cp.run({
        conversation: conv("err"), tools,
        js: "try { await tools.lookup({}); return 'no'; } catch (e) { return e.message; }",
      });
      assert.equal(caught.status, "succeeded");
      assert.equal(caught.result, "no such customer");
      assert.equal(caught.calls[0]!.status, "error");
      const thrown = await cp.run({ conversation: conv("err"), tools, js: "await tools.lookup({});" });
      assert.equal(thrown.status, "failed");
      assert.equal(thrown.error!.code, "SCRIPT_ERROR");
      assert.match(thrown.error!.programError!.message, /no such customer/);
    });

    test("an input that does not match inputSchema never reaches execute: the program catches the reason", async () => {
      let ran = 0;
      const o = await cp.run({
        conversation: conv("val"),
        tools: { listInvoices: { ...spec("listInvoices"), execute: async () => { ran++; return []; } } },
        js: `const out = [];
             for (const input of [{ month: "August" }, {}, { month: "2026-08", extra: 1 }, { month: 7 }])
               try { await tools.listInvoices(input); out.push("ran"); } catch (e) { out.push(e.message); }
             return out;`,
      });
      assert.equal(o.status, "succeeded", JSON.stringify(o.error));
      const msgs = o.result as string[];
      assert.equal(ran, 0);
      assert.equal(msgs.length, 4);
      for (const m of msgs) assert.match(m, /^Invalid input for tool listInvoices: /);
      assert.match(msgs[0]!, /pattern/);
      assert.match(msgs[1]!, /month/);
    });

    test("outputs that are not JSON (BigInt, a cycle, undefined) are tool errors, the session lives on", async () => {
      const cyclic: Record<string, unknown> = {};
      cyclic.self = cyclic;
      const mk = (v: () => unknown) => ({ inputSchema: { type: "object" }, execute: async () => v() });
      const o = await cp.run({
        conversation: conv("json"),
        tools: { big: mk(() => 10n), cycle: mk(() => cyclic), nothing: mk(() => undefined), fine: mk(() => ({ ok: 1 })) },
        js: `const out = {};
             for (const n of ["big", "cycle", "nothing", "fine"])
               try { out[n] = await tools[n]({}); } catch (e) { out[n] = e.message; }
             return out;`,
      });
      assert.equal(o.status, "succeeded", JSON.stringify(o.error));
      const r = o.result as Record<string, unknown>;
      assert.match(String(r.big), /not JSON: it holds a BigInt/);
      assert.match(String(r.cycle), /not JSON: it holds a cycle/);
      assert.match(String(r.nothing), /not JSON: it is undefined/);
      assert.deepEqual(r.fine, { ok: 1 });
    });

    test("a tool that never answers is cut by the deadline, and its signal aborts", async () => {
      let signalled!: Promise<void>;
      const o = await cp.run({
        conversation: conv("deadline"), policy: { timeoutMs: 1500 },
        tools: {
          hang: {
            inputSchema: { type: "object" },
            execute: (_i: unknown, { signal }) => { signalled = aborted(signal); return new Promise(() => {}); },
          },
        },
        js: "return await tools.hang({});",
      });
      assert.equal(o.status, "failed");
      assert.equal(o.error!.code, "TIMEOUT");
      await signalled; // the test's own timeout catches a signal that never fires
    });

    test("cancel_call reaches the tool's signal when the program returns without awaiting it", async () => {
      let ctxSeen: { conversation: string; executionId: string; callId: string } | undefined;
      let signalled!: Promise<void>;
      const o = await cp.run({
        conversation: conv("cancel"), id: `cancel-${transport}-${process.pid}`,
        tools: {
          slow: {
            inputSchema: { type: "object" },
            execute: (_i: unknown, ctx) => {
              ctxSeen = { conversation: ctx.conversation, executionId: ctx.executionId, callId: ctx.callId };
              signalled = aborted(ctx.signal);
              return new Promise(() => {});
            },
          },
        },
        js: "tools.slow({}).catch(() => {}); await new Promise((r) => setTimeout(r, 300)); return 'left';",
      });
      assert.equal(o.status, "succeeded", JSON.stringify(o.error));
      assert.equal(o.result, "left");
      assert.equal(o.calls[0]!.status, "cancelled");
      await signalled;
      assert.deepEqual(ctxSeen, { conversation: conv("cancel"), executionId: `cancel-${transport}-${process.pid}`, callId: o.calls[0]!.id });
    });

    test("aborting the caller's signal stops the execution (CANCELLED) and aborts the pending tool", async () => {
      const ac = new AbortController();
      let signalled!: Promise<void>;
      const o = await cp.run({
        conversation: conv("stop"), signal: ac.signal,
        tools: {
          wait: {
            inputSchema: { type: "object" },
            execute: (_i: unknown, { signal }) => {
              signalled = aborted(signal);
              ac.abort();
              return new Promise(() => {});
            },
          },
        },
        js: "return await tools.wait({});",
      });
      assert.equal(o.status, "failed");
      assert.equal(o.error!.code, "CANCELLED");
      await signalled;
    });

    test("onLog receives the program's output live, before the outcome", { todo: HAVE_LOG ? false : "live log messages need session protocol v1.1 (broker/schema/log.schema.json not in this tree yet)" }, async () => {
      const live: string[] = [];
      let releaseTool!: () => void;
      const gate = new Promise<void>((r) => { releaseTool = r; });
      const o = await cp.run({
        conversation: conv("log"), policy: { timeoutMs: 5_000 },
        onLog: (stream, text) => {
          live.push(`${stream}:${text}`);
          if (text.includes("first")) releaseTool();
        },
        tools: { gate: { inputSchema: { type: "object" }, execute: async () => { await gate; return 1; } } },
        js: "console.log('first'); await tools.gate({}); console.error('second'); return 2;",
      });
      assert.equal(o.status, "succeeded", JSON.stringify(o.error));
      // The tool only answered once 'first' had arrived through onLog: output was live.
      assert.deepEqual(live.join(""), "stdout:first\nstderr:second\n");
      assert.equal(o.logs, "first\nsecond\n");
    });

    test("codepod renders the declarations of the tools", async () => {
      const d = await cp.declarations(invoiceTools);
      assert.match(d, /declare const tools/);
      assert.match(d, /listInvoices: \(input: \{/);
      assert.match(d, /List invoices for a month/);
    });

    test("a refused execute (duplicate id) resolves as a failed outcome, and the session lives on", async () => {
      const id = `dup-${transport}-${process.pid}`;
      const first = await cp.run({ conversation: conv("dup"), id, js: "return 1" });
      assert.equal(first.status, "succeeded");
      const again = await cp.run({ conversation: conv("dup"), id, js: "return 2" });
      assert.equal(again.status, "failed");
      assert.equal(again.error!.code, "INVALID_REQUEST");
      const after = await cp.run({ conversation: conv("dup"), js: "return 3" });
      assert.equal(after.result, 3);
    });

    test("close() stops what still runs: its outcome is CANCELLED and the pending tool's signal aborts", async () => {
      const own = await open(transport);
      let signalled!: Promise<void>;
      let called!: () => void;
      const inCall = new Promise<void>((r) => { called = r; });
      const run = own.codepod.run({
        conversation: conv("close"),
        tools: { wait: { inputSchema: { type: "object" }, execute: (_i: unknown, { signal }) => { signalled = aborted(signal); called(); return new Promise(() => {}); } } },
        js: "return await tools.wait({});",
      });
      await inCall;
      await own.close();
      const o = await run;
      assert.equal(o.status, "failed");
      assert.equal(o.error!.code, "CANCELLED");
      await signalled;
    });

    test("many executions multiplex on one session; messages of 300 KiB pass both ways", async () => {
      const n = 300 * 1024;
      const outs = await Promise.all(Array.from({ length: 6 }, (_, i) => cp.run({
        conversation: conv(`mux${i % 2}`), policy: { maxToolInputBytes: 1 << 20, maxResultBytes: 1 << 20 },
        tools: { echo: { inputSchema: { type: "object" }, execute: async (x: { n: number; pad: string }) => ({ n: x.n * 10, pad: x.pad + "y" }) } },
        js: `const r = await tools.echo({ n: ${i}, pad: "x".repeat(${n}) }); return [r.n, r.pad];`,
      })));
      assert.deepEqual(outs.map((o) => o.result), Array.from({ length: 6 }, (_, i) => [i * 10, "x".repeat(n) + "y"]));
    });
  });
}

describe("over ws, through a proxy that drops the connection", () => {
  test("a dropped WebSocket reconnects and re-attaches mid-call; the tool's answer still arrives", {
    todo: HAVE_ATTACH ? false : "attach needs session protocol v1.1 (broker/schema/attach.schema.json not in this tree yet)",
  }, async () => {
    const fx = await open("ws", { proxy: true });
    try {
      let release!: () => void;
      const gate = new Promise<void>((r) => { release = r; });
      let calls = 0;
      const run = fx.codepod.run({
        conversation: conv("reattach"), policy: { timeoutMs: 20_000 },
        tools: {
          slow: {
            inputSchema: { type: "object" },
            execute: async (_i: unknown, { signal }) => {
              calls++;
              fx.proxy!.drop(); // the connection goes while this call is in flight
              await gate;
              assert.equal(signal.aborted, false);
              return { answered: true };
            },
          },
        },
        js: "const a = await tools.slow({}); console.log('after'); return a;",
      });
      // Wait for the client to come back through the proxy, then let the tool answer.
      while (fx.proxy!.connections() < 2) await new Promise((r) => setTimeout(r, 20));
      release();
      const o = await run;
      assert.equal(o.status, "succeeded", JSON.stringify(o.error));
      assert.deepEqual(o.result, { answered: true });
      assert.equal(calls, 1, "the re-sent tool_call is not run twice");
      assert.ok(fx.log.seen.some((s) => s.dir === "out" && s.msg.type === "attach"));
    } finally {
      await fx.close();
    }
  });

  test("after a drop with nothing running, the next run reconnects", async () => {
    const fx = await open("ws", { proxy: true });
    try {
      assert.equal((await fx.codepod.run({ conversation: conv("re"), js: "return 1" })).result, 1);
      fx.proxy!.drop();
      await new Promise((r) => setTimeout(r, 100));
      assert.equal((await fx.codepod.run({ conversation: conv("re"), js: "return 2" })).result, 2);
    } finally {
      await fx.close();
    }
  });
});

describe("over ws: the server's memory of executions", () => {
  test("getExecution returns a finished outcome, undefined for an unknown id", {
    todo: HAVE_ATTACH ? false : "GET /v1/executions/{id} needs session protocol v1.1",
  }, async () => {
    const fx = await open("ws");
    try {
      const id = `kept-${process.pid}`;
      const o = await fx.codepod.run({ conversation: conv("kept"), id, js: "console.log('x'); return 42" });
      const kept = await fx.codepod.getExecution(id);
      assert.deepEqual(kept, o);
      assert.equal(await fx.codepod.getExecution(`never-${process.pid}`), undefined);
    } finally {
      await fx.close();
    }
  });

  test("when codepod stays unreachable, a running execution ends OUTCOME_UNKNOWN after reconnectMs", async () => {
    const fx = await open("ws", { proxy: true, reconnectMs: 500 });
    try {
      const o = await fx.codepod.run({
        conversation: conv("gone"), policy: { timeoutMs: 2000 }, // the server's copy ends soon, so teardown does not drain
        tools: { vanish: { inputSchema: { type: "object" }, execute: () => { fx.proxy!.close(); return new Promise(() => {}); } } },
        js: "return await tools.vanish({});",
      });
      assert.equal(o.status, "failed");
      assert.equal(o.error!.code, "OUTCOME_UNKNOWN");
    } finally {
      await fx.close();
    }
  });
});
