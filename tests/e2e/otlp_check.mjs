// otlp_check.mjs BODIES.json: reads the OTLP/JSON request bodies a test
// collector received (a JSON array of strings) and checks them against the
// OpenTelemetry JS packages' own OTLP/JSON encoding (otlp-transformer's
// JsonTraceSerializer of a span made by sdk-trace-base): every field codepod
// sends has the type and form theirs has (hex ids of the same length,
// nanosecond times as they write them, enums as numbers, attribute values
// under the same keys). Prints the spans it read as one JSON line:
// [{name, traceId, spanId, parentSpanId, kind, status, attributes: {k: v}}].
// Run with NODE_PATH at a node_modules holding the packages.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(process.env.NODE_PATH + "/");
const { JsonTraceSerializer } = require("@opentelemetry/otlp-transformer");
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } =
  require("@opentelemetry/sdk-trace-base");
const api = require("@opentelemetry/api");

function fail(why) {
  console.error("otlp_check: " + why);
  process.exit(1);
}

// The reference: one parent and one child span with each kind of attribute.
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const tracer = provider.getTracer("ref", "1.0.0");
const parent = tracer.startSpan("parent");
const child = tracer.startSpan("child", { kind: api.SpanKind.CLIENT,
  attributes: { s: "x", i: 7, b: true } }, api.trace.setSpan(api.context.active(), parent));
child.setStatus({ code: api.SpanStatusCode.ERROR });
child.end();
parent.end();
const ref = JSON.parse(new TextDecoder().decode(
  JsonTraceSerializer.serializeRequest(exporter.getFinishedSpans())));
const refSpans = ref.resourceSpans[0].scopeSpans[0].spans;
const refChild = refSpans.find((s) => s.name === "child");
const refAttr = Object.fromEntries(refChild.attributes.map((a) => [a.key, a.value]));

function sameForm(ours, theirs, what, hex = false) {
  if (typeof ours !== typeof theirs) fail(`${what}: ${typeof ours}, theirs ${typeof theirs}`);
  if (hex &&
      !(new RegExp(`^[0-9a-f]{${theirs.length}}$`)).test(ours))
    fail(`${what}: ${JSON.stringify(ours)} is not hex of ${theirs.length} like theirs`);
  // A random hex id of theirs can be all digits; only a number's form is decimal.
  if (!hex && typeof theirs === "string" && /^[0-9]+$/.test(theirs) && !/^[0-9]+$/.test(ours))
    fail(`${what}: ${JSON.stringify(ours)} is not decimal like theirs`);
}

const out = [];
const bodies = JSON.parse(readFileSync(process.argv[2], "utf8"));
for (const text of bodies) {
  const req = JSON.parse(text);
  for (const rs of req.resourceSpans) {
    const res = Object.fromEntries(rs.resource.attributes.map((a) => [a.key, a.value.stringValue]));
    if (res["service.name"] !== "codepod" || !res["service.version"])
      fail("resource: " + JSON.stringify(rs.resource));
    for (const ss of rs.scopeSpans) {
      for (const s of ss.spans) {
        for (const k of ["traceId", "spanId"])
          sameForm(s[k], refChild[k], `${s.name}.${k}`, true);
        for (const k of ["startTimeUnixNano", "endTimeUnixNano", "kind", "name"])
          sameForm(s[k], refChild[k], `${s.name}.${k}`);
        if (s.parentSpanId !== undefined)
          sameForm(s.parentSpanId, refChild.parentSpanId, "parentSpanId", true);
        sameForm(s.status.code, refChild.status.code, "status.code");
        if (BigInt(s.endTimeUnixNano) < BigInt(s.startTimeUnixNano)) fail(`${s.name} ends before it starts`);
        const attributes = {};
        for (const a of s.attributes) {
          const [kind] = Object.keys(a.value);
          const theirs = { stringValue: refAttr.s, intValue: refAttr.i, boolValue: refAttr.b }[kind];
          if (!theirs) fail(`attribute ${a.key}: value kind ${kind}`);
          const [tkind] = Object.keys(theirs);
          if (tkind !== kind) fail(`attribute ${a.key}: ${kind}, theirs ${tkind}`);
          // proto3's JSON mapping writes an int64 as a decimal string and
          // reads a number too: they write numbers, codepod the string.
          if (kind === "intValue") {
            if (!/^-?[0-9]+$/.test(String(a.value[kind]))) fail(`attribute ${a.key}: not an integer`);
          } else {
            sameForm(a.value[kind], theirs[kind], `attribute ${a.key}`);
          }
          attributes[a.key] = kind === "intValue" ? Number(a.value[kind]) : a.value[kind];
        }
        if (s.traceState !== undefined && typeof s.traceState !== "string") fail("traceState");
        out.push({ name: s.name, traceId: s.traceId, spanId: s.spanId, traceState: s.traceState ?? null,
                   parentSpanId: s.parentSpanId ?? null, kind: s.kind, status: s.status.code,
                   start: s.startTimeUnixNano, end: s.endTimeUnixNano, attributes });
      }
    }
  }
}
console.log(JSON.stringify(out));
