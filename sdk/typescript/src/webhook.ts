// A webhook broker for `POST /v1/executions`: codepod POSTs each tool call
// ({"id","conversation","call","tool","input"}) and reads {"output"} or
// {"error"} back (broker/SESSION.md, "The webhook"). This checks the
// signature, routes to the tool, validates the input as the session client
// does, and answers; for Node's `http` and for fetch-style `Request`s.
import { createHmac, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { prepareTools, toJsonText, type RunnableTool } from "./tools.js";
import type { ToModelError, ToolContext, Tools } from "./types.js";

export interface WebhookOptions {
  tools: Tools;
  /** The secret of `codepod serve --webhook-secret-file`: unsigned or badly signed requests get 401. */
  secret?: string | Uint8Array;
  /** How far a request's Codepod-Timestamp may be from now, in seconds (default 300). */
  toleranceSec?: number;
  /** What a tool's error tells the program (default: its message), as on `run()`. */
  toModelError?: ToModelError;
  /** The largest body read, in bytes (default 16 MiB): larger ones get 413. */
  maxBodyBytes?: number;
}

/** An HTTP answer: the status and the JSON text of the body. */
export interface WebhookAnswer {
  status: number;
  body: string;
}

type HeaderBag = Headers | Record<string, string | string[] | undefined>;

export interface WebhookHandler {
  /** The core: the raw body and the request's headers in, the answer out. */
  handle(body: Uint8Array | string, headers: HeaderBag, signal?: AbortSignal): Promise<WebhookAnswer>;
  /** For `http.createServer(handler.node)`: the tool's signal aborts when codepod drops the request. */
  node(req: IncomingMessage, res: ServerResponse): void;
  /** For fetch-style servers: `Request` in, `Response` out. */
  fetch(req: Request): Promise<Response>;
}

const MAX_ERROR = 2000;

function header(h: HeaderBag, name: string): string | undefined {
  if (typeof (h as Headers).get === "function") return (h as Headers).get(name) ?? undefined;
  const want = name.toLowerCase();
  for (const [k, v] of Object.entries(h)) {
    if (k.toLowerCase() === want) return Array.isArray(v) ? v[0] : v;
  }
  return undefined;
}

const json = (status: number, v: unknown): WebhookAnswer => ({ status, body: JSON.stringify(v) });

/** HMAC-SHA256 of "TIMESTAMP.BODY", as codepod signs it: "v1=" and 64 hex digits. */
export function webhookSignature(secret: string | Uint8Array, timestamp: string, body: Uint8Array | string): string {
  const mac = createHmac("sha256", secret);
  mac.update(`${timestamp}.`);
  mac.update(body);
  return `v1=${mac.digest("hex")}`;
}

function signedWell(o: WebhookOptions, body: Uint8Array | string, h: HeaderBag): boolean {
  if (o.secret === undefined) return true;
  const ts = header(h, "Codepod-Timestamp");
  const sig = header(h, "Codepod-Signature");
  if (!ts || !sig || !/^\d{1,15}$/.test(ts)) return false;
  if (Math.abs(Date.now() / 1000 - Number(ts)) > (o.toleranceSec ?? 300)) return false;
  const want = Buffer.from(webhookSignature(o.secret, ts, body));
  const got = Buffer.from(sig);
  return want.length === got.length && timingSafeEqual(want, got);
}

/** What the program sees of a tool's error: the hook's text, else the message. */
function errorText(o: WebhookOptions, e: unknown, tool: string, call: string, executionId: string,
  conversation: string): string {
  if (o.toModelError) {
    try {
      const t = o.toModelError(e, { tool, call, executionId, conversation });
      if (typeof t === "string" && t) return t;
    } catch {
      // a failing hook must not leak what it was hiding
    }
    return `Tool ${tool} failed`;
  }
  const msg = e instanceof Error ? e.message : typeof e === "string" ? e : "";
  return msg || `Tool ${tool} failed`;
}

/**
 * A webhook broker for these tools. Answers 401 to a request that is not
 * signed with `secret` (when set), 400 to one that is not a tool call, and
 * 200 with `{"output"}` or `{"error"}` otherwise: an unknown tool, an input
 * that fails the tool's schema (`Invalid input for tool NAME: ...`, the words
 * codepod and the session client use) and a tool that throws are tool errors
 * the program can catch.
 */
export function webhookHandler(o: WebhookOptions): WebhookHandler {
  let prepared: Promise<Map<string, RunnableTool>> | undefined;
  const tools = () => (prepared ??= prepareTools(o.tools));
  const maxBody = o.maxBodyBytes ?? 16 << 20;

  async function handle(body: Uint8Array | string, h: HeaderBag,
    signal: AbortSignal = new AbortController().signal): Promise<WebhookAnswer> {
    if (!signedWell(o, body, h)) return json(401, { error: "bad or missing Codepod-Signature" });
    let m: { id?: unknown; conversation?: unknown; call?: unknown; tool?: unknown; input?: unknown };
    try {
      m = JSON.parse(typeof body === "string" ? body : Buffer.from(body).toString("utf8"));
    } catch {
      return json(400, { error: "the body is not JSON" });
    }
    if (!m || typeof m !== "object" || typeof m.tool !== "string" || typeof m.call !== "string" ||
      typeof m.id !== "string") {
      return json(400, { error: "not a codepod tool call" });
    }
    const name = m.tool, call = m.call, executionId = m.id;
    const conversation = typeof m.conversation === "string" ? m.conversation : "";
    const fail = (message: string) => json(200, { error: message.slice(0, MAX_ERROR) });
    const tool = (await tools()).get(name);
    if (!tool) return fail(`Unknown tool: ${name}`);
    if (tool.decl.enabled === false) return fail(`Tool is disabled: ${name}`);
    try {
      const chk = await tool.check(m.input);
      if (!chk.ok) return fail(`Invalid input for tool ${name}: ${chk.message}`);
      const ctx: ToolContext = {
        signal, abortSignal: signal, conversation, executionId, callId: call, toolCallId: call,
        messages: [], context: undefined, experimental_context: undefined,
      };
      const out = await tool.execute(m.input, ctx);
      const text = toJsonText(out);
      if (!text.ok) return fail(`Tool ${name} returned a value that is not JSON: ${text.why}`);
      return { status: 200, body: `{"output":${text.text}}` };
    } catch (e) {
      return fail(errorText(o, e, name, call, executionId, conversation));
    }
  }

  function node(req: IncomingMessage, res: ServerResponse): void {
    const abort = new AbortController();
    const chunks: Buffer[] = [];
    let size = 0;
    const send = (a: WebhookAnswer) => {
      if (res.writableEnded || res.destroyed) return;
      res.writeHead(a.status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(a.body) });
      res.end(a.body);
    };
    res.on("close", () => {
      if (!res.writableFinished) abort.abort(new Error("codepod dropped the request"));
    });
    if (req.method !== "POST") return send(json(405, { error: "POST only" }));
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > maxBody) {
        send(json(413, { error: "the body is too large" }));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on("end", () => {
      if (size > maxBody) return;
      handle(Buffer.concat(chunks), req.headers, abort.signal).then(send, () => send(json(500, { error: "internal" })));
    });
  }

  async function fetchHandler(req: Request): Promise<Response> {
    const reply = (a: WebhookAnswer) =>
      new Response(a.body, { status: a.status, headers: { "Content-Type": "application/json" } });
    if (req.method !== "POST") return reply(json(405, { error: "POST only" }));
    const body = new Uint8Array(await req.arrayBuffer());
    if (body.length > maxBody) return reply(json(413, { error: "the body is too large" }));
    return reply(await handle(body, req.headers, req.signal));
  }

  return { handle, node, fetch: fetchHandler };
}
