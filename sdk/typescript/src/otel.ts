// A tool's run as an OpenTelemetry span, child of codepod's codepod.tool_call
// span (the traceparent its tool_call carries), when @opentelemetry/api is
// installed next to this package; without it, or without a traceparent, the
// tool just runs. The API is loaded by name at run time: it stays an
// optional peer, never a dependency.

/** The few parts of @opentelemetry/api used here. */
interface Span {
  setStatus(s: { code: number; message?: string }): unknown;
  end(): void;
}
interface OtelApi {
  trace: {
    getTracer(name: string, version?: string): {
      startActiveSpan<T>(name: string, opts: object, ctx: unknown, fn: (span: Span) => T): T;
    };
    setSpanContext(ctx: unknown, sc: object): unknown;
  };
  context: { active(): unknown };
  createTraceState?: (raw?: string) => unknown;
  SpanKind: { INTERNAL: number };
  SpanStatusCode: { ERROR: number };
}

let loaded: Promise<OtelApi | null> | undefined;

function otelApi(): Promise<OtelApi | null> {
  const name = "@opentelemetry/api"; // a variable: no static import, no types needed
  loaded ??= import(name).then(
    (m: Record<string, unknown>) => ((m.trace ? m : m.default) ?? null) as OtelApi | null,
    () => null,
  );
  return loaded;
}

const TRACEPARENT = /^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-|$)/;

/** Runs fn inside a span named `execute_tool NAME` whose parent is @traceparent's span. */
export async function inToolSpan<T>(call: { traceparent?: string; tracestate?: string; tool: string;
  callId: string; executionId: string }, fn: () => Promise<T>): Promise<T> {
  const m = call.traceparent ? TRACEPARENT.exec(call.traceparent) : null;
  const api = m ? await otelApi() : null;
  if (!m || !api) return fn();
  const parent = api.trace.setSpanContext(api.context.active(), {
    traceId: m[1], spanId: m[2], traceFlags: parseInt(m[3]!, 16) & 1, isRemote: true,
    ...(call.tracestate && api.createTraceState ? { traceState: api.createTraceState(call.tracestate) } : {}),
  });
  const attributes = {
    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.tool,
    "gen_ai.tool.call.id": call.callId, "codepod.execution.id": call.executionId,
  };
  return api.trace.getTracer("@codepod/client").startActiveSpan(
    `execute_tool ${call.tool}`, { kind: api.SpanKind.INTERNAL, attributes }, parent, async (span) => {
      try {
        return await fn();
      } catch (e) {
        span.setStatus({ code: api.SpanStatusCode.ERROR, message: e instanceof Error ? e.message : String(e) });
        throw e;
      } finally {
        span.end();
      }
    });
}
