// The public types: the execution policy (docs/contract.md §3), the outcome
// (section 4) and the tools a backend hands to codepod.

/** Per-execution limits; every key is optional and falls back to the server's default. */
export interface Policy {
  /** The program's deadline, waiting on tools included (default 30000). */
  timeoutMs?: number;
  /** Acquiring the sandbox and starting the runner (default 120000). */
  startupTimeoutMs?: number;
  maxSourceBytes?: number;
  /** The result's budget, and the log window (default 32768). */
  maxResultBytes?: number;
  /** Tool requests per execution (default 256). */
  maxBridgeRequests?: number;
  maxInFlightBridgeRequests?: number;
  maxToolInputBytes?: number;
  maxToolOutputBytes?: number;
  maxMemoryMb?: number;
  /** CPU time of the execution's processes; over it CPU_LIMIT (default: none). */
  maxCpuMs?: number;
  /** What the conversation's workspace may hold (default 1 GiB); past it ENOSPC. */
  maxWorkspaceBytes?: number;
  /** Files the conversation's workspace may hold (default 100000); past it ENOSPC. */
  maxWorkspaceFiles?: number;
}

export type ErrorCode =
  | "INVALID_REQUEST"
  | "SOURCE_TOO_LARGE"
  | "SANDBOX_UNAVAILABLE"
  | "STARTUP_TIMEOUT"
  | "TIMEOUT"
  | "SCRIPT_ERROR"
  | "RESULT_TOO_LARGE"
  | "PROCESS_EXITED"
  | "NEVER_SETTLES"
  | "CANCELLED"
  | "OUTCOME_UNKNOWN"
  | "INTERNAL"
  | "CPU_LIMIT"
  | "REPLAY_DIVERGED"
  | "TOO_MANY_EXECUTIONS"
  | "TOO_MANY_SESSIONS"
  | "SHUTTING_DOWN"
  | "UNAUTHORIZED"
  | (string & {});

/** The program's own error: its text, to show the model so it can fix the program. */
export interface ProgramError {
  name: string;
  message: string;
  stack: string;
}

export interface OutcomeError {
  code: ErrorCode;
  /** Written by codepod; never holds program text or tool data. */
  message: string;
  programError?: ProgramError;
}

export interface CallRecord {
  id: string;
  tool: string;
  status: "ok" | "error" | "denied" | "cancelled" | "pending";
  ms: number;
  /** POST /v1/executions only: the webhook broker failed (status "error"). */
  broker?: boolean;
  /** With broker: what failed. */
  reason?: "unreachable" | "timeout" | "http_status" | "malformed" | "too_large";
}

export interface Usage {
  bridgeRequests: number;
  startupMs: number;
  runMs: number;
  sandbox: string;
  /** SHA-256 over the source, the tool declarations and the policy. */
  digest: string;
  /** From submission until the end (startupMs + runMs). */
  wallMs?: number;
  /** CPU time of the program's processes from when it reached its runner;
   * absent when the backend could not read it. */
  cpuMs?: number;
  /** Peak resident set of the execution's largest process. */
  maxRssBytes?: number;
  /** Calls that reached a tool (bridgeRequests counts the refused ones too). */
  toolCalls?: number;
  toolInputBytes?: number;
  toolOutputBytes?: number;
  /** Everything printed, the log window's cut included. */
  logBytes?: number;
  resultBytes?: number;
  /** The first execution after a snapshot restore: how long the restore took. */
  restoreMs?: number;
  /** A resumed execution: how many runs its figures add up. */
  runs?: number;
}

/** What an execution ended with (docs/contract.md §4). */
export interface Outcome {
  executionId: string;
  /** suspended: calls wait for a person's approval; resume with `continuation`. */
  status: "succeeded" | "failed" | "suspended";
  /** suspended only: the calls that wait for approval. */
  pending?: PendingCall[];
  /** suspended only: opaque, signed by codepod; give it to `Codepod.resume`. */
  continuation?: string;
  /** The program's return value; absent when it returned nothing or failed. */
  result?: unknown;
  logs: string;
  logsTruncated: boolean;
  error?: OutcomeError;
  calls: CallRecord[];
  /** Present only when requests over maxBridgeRequests were left out of `calls`. */
  callsOmitted?: { denied: number };
  /** Absent only when codepod refused the execution before it existed, or when
   * the connection was lost and the outcome could not be recovered. */
  usage?: Usage;
}

/** A call a person must approve (the suspended outcome's `pending`). */
export interface PendingCall {
  call: string;
  tool: string;
  input: unknown;
}

/** A person's answer to a pending call. */
export interface Decision {
  call: string;
  approved: boolean;
  /** Refused: the message of the Error the program's await throws. */
  message?: string;
}

/** A tool's `needsApproval`: always, never, or decided from its input (as in the AI SDK). */
export type NeedsApproval<I = any> = boolean | ((input: I, ctx: ToolContext) => boolean | PromiseLike<boolean>);

/** A JSON Schema, as a plain object. */
export type JsonSchema = { [key: string]: unknown } | boolean;

/** What a tool's `execute` receives besides its input. */
export interface ToolContext {
  /** Aborted when codepod cancels the call (`cancel_call`): the program
   * returned, the deadline passed, or the execution was stopped. */
  signal: AbortSignal;
  conversation: string;
  executionId: string;
  callId: string;
  /** Only on a call a person approved, run by a resumed execution: do the
   * work once per key (another replica may resume the same continuation). */
  idempotencyKey?: string;
  /** W3C trace context of codepod's codepod.tool_call span for this call, when the
   * execution is traced: the parent of the tool's own spans. With @opentelemetry/api
   * installed, `execute` already runs inside a span that is its child. */
  traceparent?: string;
  tracestate?: string;
  /** The same values under the names the Vercel AI SDK's tools read. */
  abortSignal: AbortSignal;
  toolCallId: string;
  messages: unknown[];
  context: unknown;
  experimental_context: unknown;
}

/** A tool as plain data: a JSON Schema for its input and a function. */
export interface PlainTool<I = any, O = unknown> {
  description?: string;
  inputSchema: JsonSchema;
  outputSchema?: JsonSchema;
  /** false: left out of the declarations, and calling it throws `Tool is disabled: NAME`. */
  enabled?: boolean;
  /** A call waits for a person's approval: the execution ends suspended. */
  needsApproval?: NeedsApproval<I>;
  execute(input: I, ctx: ToolContext): O | PromiseLike<O> | AsyncIterable<O>;
}

/**
 * A tool: a plain one, or a Vercel AI SDK `tool()` object (zod, `jsonSchema()`
 * or any schema the AI SDK accepts; converted with the AI SDK's own helpers).
 */
export type AnyTool = PlainTool | { inputSchema: unknown; description?: unknown; execute?: unknown; [k: string]: unknown };

/** Tools by the name a program calls them with. */
export type Tools = Record<string, AnyTool>;

/** Which call failed, for a `toModelError` hook. */
export interface ToolErrorInfo {
  /** The tool's name. */
  tool: string;
  /** The call's id (codepod's `call`). */
  call: string;
  executionId: string;
  conversation: string;
}

/**
 * Turns what a tool threw into the message the program (and so the model)
 * sees. The default is the error's message; return something else to keep
 * internal details (SQL, hosts, stack traces) away from the model.
 */
export type ToModelError = (error: unknown, info: ToolErrorInfo) => string;

/** A tool as the session protocol declares it. */
export interface ToolDeclaration {
  name: string;
  description?: string;
  inputSchema: JsonSchema;
  outputSchema?: JsonSchema;
  enabled?: boolean;
  /** required: every call waits for a person's approval. */
  approval?: "required" | "none";
}
