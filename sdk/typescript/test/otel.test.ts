// A backend tool instrumented with the OpenTelemetry Node SDK (in-memory
// exporter) sees its span as a child of codepod's codepod.tool_call span:
// the client reads the tool_call's traceparent and, with @opentelemetry/api
// installed next to it, runs the tool inside a span under it.
//
// The built client is copied (hard links) into a project of its own with the
// OpenTelemetry packages pinned in scripts/deps.sh, installed offline from
// .deps/npm-cache: the client finds the API there as a user's app would.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import http from "node:http";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { after, before, test } from "node:test";
import { BIN, REPO, tempDir } from "./helpers.ts";

const OTEL = ["@opentelemetry/api@1.9.1", "@opentelemetry/sdk-trace-base@2.12.1",
  "@opentelemetry/sdk-trace-node@2.12.1", "@opentelemetry/otlp-transformer@0.223.1"];
const sdkDir = resolve(dirname(fileURLToPath(import.meta.url)), "..");

type OtlpSpan = { traceId: string; spanId: string; parentSpanId?: string; name: string };

let dir: string;
let bodies: string[] = [];
let collector: http.Server;
let collectorUrl: string;

function sh(cmd: string, args: string[]): void {
  const r = spawnSync(cmd, args, { env: { ...process.env, npm_config_cache: join(REPO, ".deps", "npm-cache") },
    encoding: "utf8", timeout: 600_000 });
  assert.equal(r.status, 0, `${cmd} ${args.join(" ")}: ${r.stderr}`);
}

before(async () => {
  dir = tempDir("otel");
  sh("npm", ["install", "--offline", "--no-audit", "--no-fund", "--loglevel=error", "--ignore-scripts",
    "--prefix", dir, ...OTEL]);
  const nm = join(dir, "node_modules");
  const client = join(nm, "@codepod", "client");
  mkdirSync(client, { recursive: true });
  sh("cp", ["-rl", join(sdkDir, "dist"), join(sdkDir, "package.json"), client]);
  for (const name of readdirSync(join(sdkDir, "node_modules"))) {
    if (name.startsWith(".") || existsSync(join(nm, name))) continue;
    sh("cp", ["-rl", join(sdkDir, "node_modules", name), nm]);
  }
  collector = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.url === "/v1/traces") bodies.push(Buffer.concat(chunks).toString("utf8"));
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((r) => collector.listen(0, "127.0.0.1", r));
  collectorUrl = `http://127.0.0.1:${(collector.address() as { port: number }).port}`;
});

after(() => {
  collector?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test("a backend tool's span is a child of codepod's codepod.tool_call span", async () => {
  const req = createRequire(join(dir, "package.json"));
  const api = req("@opentelemetry/api");
  const { NodeTracerProvider } = req("@opentelemetry/sdk-trace-node");
  const { InMemorySpanExporter, SimpleSpanProcessor } = req("@opentelemetry/sdk-trace-base");
  const exporter = new InMemorySpanExporter();
  const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  provider.register();
  const { Codepod } = await import(pathToFileURL(join(dir, "node_modules", "@codepod", "client", "dist", "index.js")).href);
  const codepod = await Codepod.spawn({
    command: BIN, args: ["serve", "--stdio", "--state-dir", join(dir, "state"), "--otlp-endpoint", collectorUrl],
    stderr: "ignore",
  });
  const seen: Array<{ traceparent?: string; active?: { traceId: string; spanId: string } }> = [];
  const tools = {
    lookup: {
      inputSchema: { type: "object" },
      execute: async (input: { n: number }, ctx: { traceparent?: string }) => {
        // a span the tool makes itself nests under the client's tool span
        api.trace.getTracer("tool").startActiveSpan("db.query", (s: { end(): void }) => s.end());
        seen.push({ traceparent: ctx.traceparent, active: api.trace.getActiveSpan()?.spanContext() });
        return { n: input.n * 2 };
      },
    },
  };
  const root = api.trace.getTracer("agent").startSpan("agent.turn");
  const rc = root.spanContext();
  const outcome = await codepod.run({
    conversation: `sdk-ts-otel-${process.pid}`, tools,
    js: "const a = await tools.lookup({ n: 1 }); const b = await tools.lookup({ n: 2 }); return a.n + b.n;",
    traceparent: `00-${rc.traceId}-${rc.spanId}-01`,
  });
  root.end();
  await codepod.close(); // its spans are flushed as it exits
  await provider.forceFlush(); // (shutdown would empty the in-memory exporter)
  assert.equal(outcome.status, "succeeded", JSON.stringify(outcome));
  assert.equal(outcome.result, 6);

  const ours: OtlpSpan[] = bodies.flatMap((b) => (JSON.parse(b) as {
    resourceSpans: Array<{ scopeSpans: Array<{ spans: OtlpSpan[] }> }> }).resourceSpans
    .flatMap((r) => r.scopeSpans.flatMap((s) => s.spans)));
  const execution = ours.find((s) => s.name === "codepod.execution");
  assert.ok(execution, "codepod exported its spans");
  assert.equal(execution.parentSpanId, rc.spanId, "codepod.execution is a child of the caller's span");
  const toolCalls = ours.filter((s) => s.name === "codepod.tool_call");
  assert.equal(toolCalls.length, 2);

  const finished = exporter.getFinishedSpans() as Array<{ name: string; attributes: Record<string, unknown>;
    spanContext(): { traceId: string; spanId: string }; parentSpanContext?: { spanId: string }; parentSpanId?: string }>;
  const parentOf = (s: (typeof finished)[number]) => s.parentSpanContext?.spanId ?? s.parentSpanId;
  const toolSpans = finished.filter((s) => s.name === "execute_tool lookup");
  assert.equal(toolSpans.length, 2);
  for (const s of toolSpans) {
    assert.equal(s.spanContext().traceId, rc.traceId, "one trace from the agent through codepod to the tool");
    const parent = toolCalls.find((t) => t.spanId === parentOf(s));
    assert.ok(parent, `the tool's span ${s.spanContext().spanId} is a child of a codepod.tool_call span`);
    assert.equal(s.attributes["gen_ai.tool.name"], "lookup");
    const ctx = seen.find((x) => x.active?.spanId === s.spanContext().spanId);
    assert.ok(ctx, "execute ran inside its span");
    assert.equal(ctx.traceparent, `00-${rc.traceId}-${parent.spanId}-01`, "ctx.traceparent names codepod's span");
  }
  const queries = finished.filter((s) => s.name === "db.query");
  assert.deepEqual(queries.map(parentOf).sort(), toolSpans.map((s) => s.spanContext().spanId).sort());
  await provider.shutdown();
});
