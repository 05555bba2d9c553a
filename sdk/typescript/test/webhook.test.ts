// webhookHandler: a webhook broker for codepod's POST /v1/executions, fed by
// codepod's own signed POSTs (serve --listen --webhook-secret-file), on
// Node's http and through a fetch-style Request/Response adapter; and the
// input check codepod makes before POSTing says what the session client says.
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { webhookHandler, webhookSignature, type WebhookHandler } from "@codepod/client";
import { open, startServer, tempDir, type Fixture, type Server } from "./helpers.ts";

const SECRET = "webhook-secret-for-the-sdk-test-" + process.pid;
const SCHEMA = {
  type: "object",
  properties: {
    q: { type: "string", minLength: 1, maxLength: 5, pattern: "^[a-z]+\\d*$" },
    limit: { type: "integer", minimum: 1, maximum: 50 },
    tags: { type: "array", items: { enum: ["a", "b"] }, uniqueItems: true },
  },
  required: ["q"],
  additionalProperties: false,
};
const INPUTS = [{}, { q: 1 }, { q: "" }, { q: "abcdef" }, { q: "ab-1" }, { q: "a", limit: 0 },
  { q: "a", limit: 51 }, { q: "a", limit: 2.5 }, { q: "a", tags: ["c"] }, { q: "a", tags: ["a", "a"] },
  { q: "a", extra: 1 }, { q: "ab1", limit: 3 }];
const DB_ERROR = 'relation "orders" does not exist (db-7.internal:5432)';

const seen: Array<{ input: unknown; conversation: string; executionId: string; aborted: boolean }> = [];
const tools = {
  search: {
    inputSchema: SCHEMA,
    execute: async (input: { q: string }, ctx: { conversation: string; executionId: string; signal: AbortSignal }) => {
      seen.push({ input, conversation: ctx.conversation, executionId: ctx.executionId, aborted: ctx.signal.aborted });
      return { hits: input.q.length };
    },
  },
  orders: { inputSchema: { type: "object" }, execute: async () => { throw new Error(DB_ERROR); } },
};
const JS = `const out = [];
for (const input of ${JSON.stringify(INPUTS)}) {
  try { out.push(await tools.search(input)); } catch (e) { out.push(e.message); }
}
try { await tools.orders({}); } catch (e) { out.push(e.message); }
return out;`;
const DECLS = [{ name: "search", inputSchema: SCHEMA }, { name: "orders", inputSchema: { type: "object" } }];

function listen(fn: http.RequestListener): Promise<{ url: string; close(): Promise<void> }> {
  const srv = http.createServer(fn);
  return new Promise((res) => srv.listen(0, "127.0.0.1", () => res({
    url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}/tools`,
    close: () => new Promise((r) => { srv.closeAllConnections(); srv.close(() => r()); }),
  })));
}

/** Node's http in front of handler.fetch: what a fetch-style server does. */
function viaFetch(h: WebhookHandler): http.RequestListener {
  return (req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const headers = new Headers();
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
      const r = await h.fetch(new Request(`http://broker${req.url}`, { method: "POST", headers, body: Buffer.concat(chunks) }));
      res.writeHead(r.status, { "Content-Type": "application/json" });
      res.end(Buffer.from(await r.arrayBuffer()));
    });
  };
}

async function execute(s: Server, id: string, url: string): Promise<{ status: string; result?: unknown[] }> {
  const r = await fetch(`${s.url}/v1/executions`, {
    method: "POST", headers: { Authorization: `Bearer ${s.token}`, "Content-Type": "application/json" },
    body: JSON.stringify({ id, conversation: `sdk-ts-webhook-${id}`, js: JS, tools: DECLS, broker: { url } }),
  });
  assert.equal(r.status, 200);
  return await r.json() as { status: string; result?: unknown[] };
}

describe("webhookHandler with codepod's signed POSTs", () => {
  const dir = tempDir("webhook");
  let server: Server;
  let fx: Fixture;
  const handler = webhookHandler({
    tools, secret: SECRET,
    toModelError: (e, info) => info.tool === "orders" ? "The order database is unavailable." : String(e),
  });
  before(async () => {
    writeFileSync(join(dir, "secret"), SECRET + "\n");
    server = await startServer(dir, ["--webhook-secret-file", join(dir, "secret")]);
    fx = await open("stdio");
  });
  after(async () => {
    await fx.close();
    await server.stop();
  });

  let viaSession: unknown[] = [];
  test("the session client's words for invalid inputs (Ajv)", async () => {
    const o = await fx.codepod.run({ conversation: `sdk-ts-webhook-session-${process.pid}`, tools, js: JS,
      toModelError: (_e, info) => info.tool === "orders" ? "The order database is unavailable." : "?" });
    assert.equal(o.status, "succeeded", JSON.stringify(o));
    viaSession = o.result as unknown[];
    assert.equal(viaSession[0], "Invalid input for tool search: input must have required property 'q'");
  });

  for (const kind of ["node", "fetch"] as const) {
    test(`on ${kind}: codepod refuses the same inputs in the same words; valid calls reach the tool`, async () => {
      seen.length = 0;
      const b = await listen(kind === "node" ? handler.node : viaFetch(handler));
      try {
        const o = await execute(server, `w-${kind}-${process.pid}`, b.url);
        assert.equal(o.status, "succeeded", JSON.stringify(o));
        assert.deepEqual(o.result, viaSession);
        assert.deepEqual(o.result!.at(-2), { hits: 3 });
        assert.equal(o.result!.at(-1), "The order database is unavailable.");
        // Only the valid input was POSTed (codepod checked the rest), signed and routed.
        assert.deepEqual(seen.map((c) => c.input), [{ q: "ab1", limit: 3 }]);
        assert.equal(seen[0]!.conversation, `sdk-ts-webhook-w-${kind}-${process.pid}`);
        assert.equal(seen[0]!.executionId, `w-${kind}-${process.pid}`);
      } finally {
        await b.close();
      }
    });
  }

  test("the handler itself checks signature and input (a broker codepod did not check for)", async () => {
    const b = await listen(handler.node);
    try {
      const post = (body: string, headers: Record<string, string>) =>
        fetch(b.url, { method: "POST", body, headers: { "Content-Type": "application/json", ...headers } });
      const body = JSON.stringify({ id: "e1", conversation: "c", call: "1", tool: "search", input: { q: "a", limit: 99 } });
      const ts = String(Math.floor(Date.now() / 1000));
      let r = await post(body, {});
      assert.equal(r.status, 401);
      r = await post(body, { "Codepod-Timestamp": ts, "Codepod-Signature": webhookSignature("wrong-secret", ts, body) });
      assert.equal(r.status, 401);
      const old = String(Math.floor(Date.now() / 1000) - 3600);
      r = await post(body, { "Codepod-Timestamp": old, "Codepod-Signature": webhookSignature(SECRET, old, body) });
      assert.equal(r.status, 401);
      r = await post(body, { "Codepod-Timestamp": ts, "Codepod-Signature": webhookSignature(SECRET, ts, body) });
      assert.equal(r.status, 200);
      assert.deepEqual(await r.json(), { error: "Invalid input for tool search: input.limit must be <= 50" });
      const unknown = JSON.stringify({ id: "e1", conversation: "c", call: "2", tool: "nope", input: {} });
      r = await post(unknown, { "Codepod-Timestamp": ts, "Codepod-Signature": webhookSignature(SECRET, ts, unknown) });
      assert.deepEqual(await r.json(), { error: "Unknown tool: nope" });
      r = await post("{not json", { "Codepod-Timestamp": ts, "Codepod-Signature": webhookSignature(SECRET, ts, "{not json") });
      assert.equal(r.status, 400);
    } finally {
      await b.close();
    }
  });
});
