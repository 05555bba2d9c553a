// Codepod: one session with `codepod serve`, over a WebSocket or a child's
// stdio, multiplexing any number of executions (session protocol v1.1 of
// docs/contract.md §5, degrading to v1 where a server does not answer with the
// additions).
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { checkPolicy } from "./policy.js";
import { CodepodError, type Channel, type OpHandler } from "./ops.js";
import { CodepodSandbox, type SandboxOptions } from "./sandbox.js";
import { prepareTools, toJsonText, type RunnableTool } from "./tools.js";
import {
  CodepodConnectError, openWebSocket, spawnStdio, type Link, type LinkEvents, type SpawnOptions,
} from "./transport.js";
import { inToolSpan } from "./otel.js";
import type { Decision, Outcome, OutcomeError, Policy, ToModelError, ToolContext, ToolDeclaration, Tools } from "./types.js";

export interface ConnectOptions {
  /** The server's base URL, e.g. `http://127.0.0.1:8080`. */
  url: string;
  token: string;
  headers?: Record<string, string>;
  /** How long to keep trying to reconnect and re-attach after the WebSocket dropped (default 25000 ms, inside the server's 30 s grace). */
  reconnectMs?: number;
  /** Sees every protocol message, sent ("out") and received ("in"), as its JSON text: for debugging. */
  trace?: Trace;
  /** The client pings the server this often (default 15000 ms; 0: never). */
  heartbeatMs?: number;
  /** Nothing heard from the server for this long (not even a PONG): the
   * connection is closed and the running executions re-attached on a new one,
   * as after a reset (default 45000 ms; 0: never). */
  idleTimeoutMs?: number;
}

export type Trace = (direction: "in" | "out", text: string) => void;

export interface RunOptions {
  /** The scope key: executions with the same one share a sandbox and its workspace. */
  conversation: string;
  js: string;
  tools?: Tools;
  policy?: Policy;
  /** A short label for the user (the `code` tool's `reason`). */
  reason?: string;
  /** Aborting it stops the execution (the outcome is then CANCELLED). run()
   * settles within a few seconds of the abort even when codepod cannot be
   * reached: then with a local CANCELLED, or OUTCOME_UNKNOWN when a tool call
   * was in flight (its effect is unknown), and the stop is sent once the
   * session is back. The same holds at the deadline when `policy.timeoutMs`
   * is given. */
  signal?: AbortSignal;
  /** Live output while the program runs (asks codepod to stream it). */
  onLog?: (stream: "stdout" | "stderr", text: string) => void;
  /** The execution id; a fresh UUID by default. */
  id?: string;
  /** What the program sees of an error a tool threw (default: its message). */
  toModelError?: ToModelError;
  /** Resume a suspended execution (the same conversation, js, tools and policy). */
  resume?: { continuation: string; decisions: Decision[] };
  /** W3C trace context of the caller's span: codepod.execution becomes its child. */
  traceparent?: string;
  tracestate?: string;
}

/** What GET /v1/executions/{id} says of an execution that still runs. */
export interface RunningExecution {
  executionId: string;
  status: "running";
}

interface HttpSide { url: string; token: string; headers: Record<string, string>; reconnectMs: number }

type Msg = { [k: string]: unknown; type?: unknown; id?: unknown };

interface Call {
  abort: AbortController;
  /** The answer's message text once the tool finished: sent again if codepod asks again after a reattach. */
  answer?: string;
}

interface Exec {
  id: string;
  conversation: string;
  tools: Map<string, RunnableTool>;
  onLog: RunOptions["onLog"];
  toModelError: ToModelError | undefined;
  accepted: boolean;
  sawCall: boolean;
  stopWanted: boolean;
  /** An attach was sent and nothing has answered it yet. */
  attaching: boolean;
  /** A tool's answer was sent and nothing of the execution came since: it may be lost. */
  unconfirmed: boolean;
  calls: Map<string, Call>;
  /** Settles with the outcome (set right after the execution is registered). */
  settled: Promise<Outcome>;
  finish(o: Outcome): void;
}

const MAX_TOOL_ERROR = 2000;
/** After an abort, how long run() waits for codepod's CANCELLED before settling by itself. */
const ABORT_WAIT_MS = 3000;
/** Past the program's startup and deadline, how long run() waits for its outcome. */
const DEADLINE_SLACK_MS = 10_000;
/** The server's startup timeout when the policy does not say (docs/contract.md §3). */
const DEFAULT_STARTUP_MS = 120_000;
/** How long close() waits for the outcomes of the executions it stops. */
const CLOSE_WAIT_MS = 5000;

function lost(id: string, code: string, message: string): Outcome {
  return { executionId: id, status: "failed", logs: "", logsTruncated: false, calls: [], error: { code, message } };
}

export class Codepod {
  private link: Link | null = null;
  private readonly execs = new Map<string, Exec>();
  /** Executions settled here without codepod's word (abort or deadline with
   * the connection dead): stopped once a session is back. */
  private readonly orphans = new Set<string>();
  /** Requests that are not executions (files, commands), by id: the same id namespace. */
  private readonly ops = new Map<string, OpHandler>();
  private readonly declWaiters = new Map<string, { resolve(s: string): void; reject(e: Error): void }>();
  private closing = false;
  private reconnecting: Promise<boolean> | null = null;
  private declSeq = 0;

  private readonly opener: (ev: LinkEvents) => Promise<Link>;
  private readonly trace: Trace | undefined;
  private readonly cliDeclarations: ((decls: ToolDeclaration[]) => Promise<string>) | undefined;
  private readonly http: HttpSide | undefined;

  private constructor(opener: (ev: LinkEvents) => Promise<Link>, trace: Trace | undefined,
    cliDeclarations: ((decls: ToolDeclaration[]) => Promise<string>) | undefined, http: HttpSide | undefined) {
    this.opener = opener;
    this.trace = trace;
    this.cliDeclarations = cliDeclarations;
    this.http = http;
  }

  /** A session over `codepod serve --listen`'s WebSocket. */
  static async connect(opts: ConnectOptions): Promise<Codepod> {
    const headers = opts.headers ?? {};
    const live = { heartbeatMs: opts.heartbeatMs, idleTimeoutMs: opts.idleTimeoutMs };
    const cp = new Codepod((ev) => openWebSocket(opts.url, opts.token, ev, headers, live), opts.trace, undefined,
      { url: opts.url, token: opts.token, headers, reconnectMs: opts.reconnectMs ?? 25_000 });
    cp.link = await cp.opener(cp.events());
    return cp;
  }

  /** A session with a `codepod serve --stdio` child process (args default to `["serve", "--stdio"]`). */
  static async spawn(opts: SpawnOptions & { trace?: Trace }): Promise<Codepod> {
    const cp = new Codepod((ev) => spawnStdio(opts, ev), opts.trace, (d) => cliDeclarations(opts, d), undefined);
    cp.link = await cp.opener(cp.events());
    return cp;
  }

  /** Runs one program; resolves with its outcome (it never rejects for what the program or a tool did). */
  async run(opts: RunOptions): Promise<Outcome> {
    if (this.closing) throw new Error("this Codepod session is closed");
    checkPolicy(opts.policy, "run()");
    const tools = await prepareTools(opts.tools);
    const id = opts.id ?? randomUUID();
    if (this.execs.has(id) || this.ops.has(id)) throw new Error(`execution id ${id} is already running on this session`);
    const msg: Msg = {
      type: "execute", id, conversation: opts.conversation, js: opts.js,
      tools: [...tools.values()].map((t) => t.decl),
    };
    if (opts.reason !== undefined) msg.reason = opts.reason;
    if (opts.policy) msg.policy = opts.policy;
    if (opts.onLog) msg.stream = true;
    if (opts.resume) msg.resume = opts.resume;
    if (opts.traceparent) msg.traceparent = opts.traceparent;
    if (opts.tracestate) msg.tracestate = opts.tracestate;
    if (!this.link && !(await this.reconnect())) {
      return lost(id, "OUTCOME_UNKNOWN", "codepod is not reachable; the program did not run");
    }
    let registered!: Exec;
    const settled = new Promise<Outcome>((resolve) => {
      let giveUp: NodeJS.Timeout | undefined;
      let deadline: NodeJS.Timeout | undefined;
      const onAbort = () => {
        this.stop(id);
        // codepod answers a stop at once; when it does not (the connection is
        // dead and not yet known to be), the caller is not kept waiting.
        giveUp ??= setTimeout(() => this.settleLocally(ex, "the execution was stopped (aborted)"),
          this.link ? ABORT_WAIT_MS : 0);
      };
      const ex: Exec = {
        id, conversation: opts.conversation, tools, onLog: opts.onLog, toModelError: opts.toModelError,
        accepted: false, sawCall: false, stopWanted: false, attaching: false, unconfirmed: false, calls: new Map(),
        settled: undefined as unknown as Promise<Outcome>,
        finish: (o) => {
          if (this.execs.get(id) !== ex) return;
          this.execs.delete(id);
          clearTimeout(giveUp);
          clearTimeout(deadline);
          opts.signal?.removeEventListener("abort", onAbort);
          for (const c of ex.calls.values()) c.abort.abort(new Error("the execution ended"));
          resolve(o);
        },
      };
      const timeoutMs = opts.policy?.timeoutMs;
      if (typeof timeoutMs === "number" && timeoutMs > 0) {
        const startupMs = opts.policy?.startupTimeoutMs ?? DEFAULT_STARTUP_MS;
        deadline = setTimeout(() => {
          this.stop(id);
          this.settleLocally(ex, "no outcome from codepod by the program's deadline");
        }, startupMs + timeoutMs + DEADLINE_SLACK_MS);
        deadline.unref();
      }
      registered = ex;
      this.execs.set(id, ex);
      this.send(msg);
      if (opts.signal?.aborted) onAbort();
      else opts.signal?.addEventListener("abort", onAbort, { once: true });
    });
    registered.settled = settled;
    return settled;
  }

  /** The outcome without codepod's word: CANCELLED, or OUTCOME_UNKNOWN when a
   * tool call was in flight. codepod gets the stop when a session is back. */
  private settleLocally(ex: Exec, why: string): void {
    if (this.execs.get(ex.id) !== ex) return;
    const inFlight = ex.unconfirmed || [...ex.calls.values()].some((c) => c.answer === undefined);
    this.orphans.add(ex.id);
    ex.finish(inFlight
      ? lost(ex.id, "OUTCOME_UNKNOWN", `${why}; codepod could not be reached and a tool call was in flight, so what the program did is unknown`)
      : lost(ex.id, "CANCELLED", `${why}; codepod could not be reached, so it is stopped when the session is back`));
    if (!this.link && this.http) void this.reconnect();
  }

  /**
   * Runs a suspended execution again with a person's decisions: the same
   * `conversation`, `js`, `tools` and `policy` as the run that suspended,
   * the outcome's `continuation`, and one decision per pending call.
   */
  resume(opts: RunOptions & { continuation: string; decisions: Decision[] }): Promise<Outcome> {
    const { continuation, decisions, ...rest } = opts;
    return this.run({ ...rest, resume: { continuation, decisions } });
  }

  /**
   * The conversation's sandbox as one object: its workspace's files and shell
   * commands beside the programs. It is the AI SDK's
   * `Experimental_SandboxSession` and bash-tool's `Sandbox` at once.
   */
  sandbox(conversation: string, opts: SandboxOptions = {}): CodepodSandbox {
    return new CodepodSandbox(this.channel(), conversation, opts);
  }

  private channel(): Channel {
    return {
      ready: async () => !this.closing && (this.link !== null || await this.reconnect()),
      newId: () => {
        let id = randomUUID();
        while (this.execs.has(id) || this.ops.has(id)) id = randomUUID();
        return id;
      },
      start: (id, h, first) => {
        if (this.closing) return false;
        if (this.execs.has(id) || this.ops.has(id)) throw new Error(`id ${id} is already in use on this session`);
        if (!this.link) return false;
        this.ops.set(id, h);
        if (!this.send(first)) {
          this.ops.delete(id);
          return false;
        }
        return true;
      },
      send: (msg) => this.send(msg),
      end: (id) => { this.ops.delete(id); },
    };
  }

  /** Asks codepod to stop a running execution (its outcome then says CANCELLED). */
  stop(id: string): void {
    const ex = this.execs.get(id);
    if (!ex) return;
    ex.stopWanted = true;
    this.send({ type: "stop", id });
  }

  /** The TypeScript declarations codepod renders for these tools (what a model reads). */
  async declarations(tools: Tools | ToolDeclaration[]): Promise<string> {
    const decls = Array.isArray(tools) ? tools : [...(await prepareTools(tools)).values()].map((t) => t.decl);
    const id = `declarations-${++this.declSeq}`;
    try {
      return await new Promise<string>((resolve, reject) => {
        this.declWaiters.set(id, { resolve, reject });
        if (!this.send({ type: "declarations", id, tools: decls })) {
          this.declWaiters.delete(id);
          reject(new Error("codepod is not connected"));
        }
      });
    } catch (e) {
      // A v1 server has no declarations message: its HTTP endpoint has, and so has its command.
      if (this.http) return this.httpDeclarations(decls);
      if (this.cliDeclarations) return this.cliDeclarations(decls);
      throw e;
    }
  }

  /**
   * An execution's state on the server (GET /v1/executions/{id}; WebSocket
   * sessions only): its outcome once it ended, `{ executionId, status: "running" }`
   * while it runs, undefined when the server does not know it (never seen,
   * expired, or run by another replica).
   */
  async getExecution(id: string): Promise<Outcome | RunningExecution | undefined> {
    if (!this.http) throw new Error("getExecution needs a WebSocket session (Codepod.connect)");
    const u = new URL(`v1/executions/${encodeURIComponent(id)}`, this.http.url.replace(/\/?$/, "/"));
    const res = await fetch(u, { headers: { ...this.http.headers, Authorization: `Bearer ${this.http.token}` } });
    if (res.status === 404) return undefined;
    if (res.status === 202) return { executionId: id, status: "running" };
    if (res.status !== 200) throw new CodepodConnectError("INTERNAL", `GET /v1/executions: HTTP ${res.status}`);
    const o = (await res.json()) as Outcome & { id?: string; type?: string };
    const { type: _t, id: _i, ...rest } = o;
    return { ...rest, executionId: o.executionId ?? id };
  }

  /** Ends the session. Executions still running are stopped and their outcomes (CANCELLED) delivered first, within a few seconds. */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    // Stopped explicitly on both transports: a WebSocket that closes would leave
    // them waiting for an attach, and stdin EOF would make a call in flight
    // OUTCOME_UNKNOWN.
    const commands = [...this.ops].filter(([, h]) => h.reattach);
    if (this.link && (this.execs.size || commands.length)) {
      const settled: Promise<unknown>[] = [...this.execs.values()].map((ex) => ex.settled);
      for (const [id, h] of commands) {
        settled.push(new Promise<void>((res) => {
          const { message, down } = h;
          h.message = (m) => { message(m); if (!this.ops.has(id)) res(); };
          h.down = (e) => { down(e); res(); };
        }));
        this.send({ type: "stop", id });
      }
      for (const ex of this.execs.values()) this.send({ type: "stop", id: ex.id });
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([Promise.all(settled), new Promise((r) => { timer = setTimeout(r, CLOSE_WAIT_MS); })]);
      clearTimeout(timer);
    }
    const link = this.link;
    if (link) await link.close();
    this.link = null;
    for (const ex of [...this.execs.values()]) {
      ex.finish(lost(ex.id, "OUTCOME_UNKNOWN", "the session was closed before the outcome arrived"));
    }
    for (const w of this.declWaiters.values()) w.reject(new Error("the session was closed"));
    this.declWaiters.clear();
    this.dropOps(() => true, new CodepodError("OUTCOME_UNKNOWN", "the session was closed before the request finished"));
  }

  private dropOps(which: (h: OpHandler) => boolean, err: CodepodError): void {
    for (const [id, h] of [...this.ops]) {
      if (!which(h)) continue;
      this.ops.delete(id);
      h.down(err);
    }
  }

  private async httpDeclarations(decls: ToolDeclaration[]): Promise<string> {
    const h = this.http!;
    const u = new URL("v1/declarations", h.url.replace(/\/?$/, "/"));
    const res = await fetch(u, {
      method: "POST", body: JSON.stringify({ tools: decls }),
      headers: { ...h.headers, Authorization: `Bearer ${h.token}`, "Content-Type": "application/json" },
    });
    const body = (await res.json()) as { declarations?: string; error?: { message?: string } };
    if (!res.ok || typeof body.declarations !== "string") {
      throw new Error(`codepod could not render the declarations: ${body.error?.message ?? res.status}`);
    }
    return body.declarations;
  }

  private send(msg: Msg): boolean {
    return this.sendText(JSON.stringify(msg));
  }

  private sendText(text: string): boolean {
    this.trace?.("out", text);
    return this.link?.send(text) ?? false;
  }

  private events(): LinkEvents {
    const self = this;
    let current = true;
    return {
      message(text) {
        if (current) self.onMessage(text);
      },
      closed(reason) {
        if (!current) return;
        current = false;
        self.onLinkDown(reason);
      },
    };
  }

  private onLinkDown(reason: string): void {
    this.link = null;
    if (this.closing) return;
    for (const w of this.declWaiters.values()) w.reject(new Error(reason));
    this.declWaiters.clear();
    // A read or write in flight cannot be resumed on another link.
    const gone = new CodepodError("OUTCOME_UNKNOWN", `codepod went away before the request finished (${reason})`);
    this.dropOps((h) => !h.reattach || !this.http, gone);
    if (!this.http) {
      // A child process that is gone takes its executions with it.
      for (const ex of [...this.execs.values()]) {
        ex.finish(lost(ex.id, "OUTCOME_UNKNOWN", `codepod went away before the outcome arrived (${reason})`));
      }
      return;
    }
    if (this.execs.size || this.orphans.size || this.ops.size) void this.reconnect();
  }

  /** WebSocket only: reconnect, then take the running executions over again (attach). */
  private reconnect(): Promise<boolean> {
    if (!this.http || this.closing) return Promise.resolve(false);
    this.reconnecting ??= (async () => {
      const deadline = Date.now() + this.http!.reconnectMs;
      let delay = 50;
      while (!this.closing) {
        try {
          this.link = await this.opener(this.events());
          break;
        } catch (e) {
          const code = e instanceof CodepodConnectError ? e.code : "";
          if (code === "UNAUTHORIZED" || Date.now() + delay > deadline) {
            this.orphans.clear(); // their stop cannot be delivered; the server's grace ends them
            for (const ex of [...this.execs.values()]) {
              ex.finish(lost(ex.id, "OUTCOME_UNKNOWN", "the connection to codepod dropped and could not be re-established"));
            }
            this.dropOps(() => true, new CodepodError("OUTCOME_UNKNOWN", "the connection to codepod dropped and could not be re-established"));
            return false;
          }
          await new Promise((r) => setTimeout(r, delay));
          delay = Math.min(delay * 2, 1000);
        }
      }
      if (this.closing) return false;
      for (const id of this.orphans) {
        // Taken over only to be stopped: whatever codepod then sends of it is ignored.
        this.send({ type: "attach", id });
        this.send({ type: "stop", id });
      }
      this.orphans.clear();
      for (const ex of this.execs.values()) {
        ex.attaching = true;
        this.send({ type: "attach", id: ex.id });
        if (ex.stopWanted) this.send({ type: "stop", id: ex.id });
      }
      for (const id of this.ops.keys()) this.send({ type: "attach", id });
      return true;
    })().finally(() => { this.reconnecting = null; });
    return this.reconnecting;
  }

  private onMessage(text: string): void {
    this.trace?.("in", text);
    let m: Msg;
    try {
      m = JSON.parse(text) as Msg;
    } catch {
      return;
    }
    if (m === null || typeof m !== "object") return;
    const id = typeof m.id === "string" ? m.id : undefined;
    if (m.type === "declarations") {
      const w = id !== undefined ? this.declWaiters.get(id) : this.declWaiters.values().next().value;
      const key = id ?? this.declWaiters.keys().next().value;
      if (w && key !== undefined && typeof m.declarations === "string") {
        this.declWaiters.delete(key);
        w.resolve(m.declarations);
      }
      return;
    }
    if (m.type === "error" && id !== undefined && this.declWaiters.has(id)) {
      const w = this.declWaiters.get(id)!;
      this.declWaiters.delete(id);
      w.reject(new Error(String((m.error as OutcomeError | undefined)?.message ?? "declarations refused")));
      return;
    }
    const op = id !== undefined ? this.ops.get(id) : undefined;
    if (op) {
      op.message(m);
      return;
    }
    const ex = id !== undefined ? this.execs.get(id) : undefined;
    if (!ex) {
      if (m.type === "result" && id !== undefined) this.orphans.delete(id); // stopped after all
      return;
    }
    ex.unconfirmed = false;
    if (m.type !== "error") ex.attaching = false;
    switch (m.type) {
      case "accepted":
        ex.accepted = true;
        return;
      case "tool_call":
        ex.accepted = true;
        ex.sawCall = true;
        this.onToolCall(ex, m);
        return;
      case "cancel_call": {
        const c = ex.calls.get(String(m.call));
        c?.abort.abort(new Error("codepod cancelled the call"));
        return;
      }
      case "log":
        ex.accepted = true;
        if (m.stream === "stdout" || m.stream === "stderr") {
          try {
            ex.onLog?.(m.stream, String(m.text ?? ""));
          } catch {
            // a throwing onLog must not end the session
          }
        }
        return;
      case "result": {
        const { type: _t, id: _i, ...rest } = m;
        ex.finish({ ...(rest as unknown as Outcome), executionId: ex.id });
        return;
      }
      case "error":
        this.onError(ex, m);
        return;
      default:
    }
  }

  private onError(ex: Exec, m: Msg): void {
    const err = (m.error ?? {}) as OutcomeError;
    const inReplyTo = m.inReplyTo;
    // v1.1 says what the error answers; a v1 server does not, but before the
    // first tool call nothing but the execute can have been answered.
    const refusesExecute = inReplyTo === "execute" ||
      (inReplyTo === undefined && !ex.accepted && !ex.sawCall && !ex.stopWanted);
    if (refusesExecute) {
      ex.finish(lost(ex.id, String(err.code ?? "INTERNAL"), String(err.message ?? "codepod refused the execution")));
      return;
    }
    // A v1 server does not know attach: its error says nothing of what it answers.
    if (inReplyTo === "attach" || (inReplyTo === undefined && ex.attaching)) {
      ex.attaching = false;
      void this.recover(ex);
    }
  }

  /** An attach was refused: the execution ended while we were away. Its stored outcome, if codepod kept it. */
  private async recover(ex: Exec): Promise<void> {
    let o: Outcome | undefined;
    try {
      const got = await this.getExecution(ex.id);
      if (got && got.status !== "running") o = got;
    } catch {
      o = undefined;
    }
    ex.finish(o ?? lost(ex.id, "OUTCOME_UNKNOWN", "the connection to codepod dropped and the execution could not be re-attached"));
  }

  private onToolCall(ex: Exec, m: Msg): void {
    const call = typeof m.call === "string" ? m.call : undefined;
    if (call === undefined) return;
    const known = ex.calls.get(call);
    if (known) {
      // Sent again after a reattach: answer again if the tool is done, else the answer follows.
      if (known.answer !== undefined) this.sendText(known.answer);
      return;
    }
    const c: Call = { abort: new AbortController() };
    ex.calls.set(call, c);
    const name = String(m.tool);
    const key = typeof m.idempotencyKey === "string" ? m.idempotencyKey : undefined;
    const trace = { traceparent: typeof m.traceparent === "string" ? m.traceparent : undefined,
      tracestate: typeof m.tracestate === "string" ? m.tracestate : undefined };
    void this.answer(ex, call, name, m.input, c.abort.signal, key, trace).then((text) => {
      c.answer = text;
      if (!c.abort.signal.aborted) {
        ex.unconfirmed = true;
        this.sendText(text);
      }
    });
  }

  /** Runs one tool call; always resolves with the answer's message text. */
  private async answer(ex: Exec, call: string, name: string, input: unknown, signal: AbortSignal,
    idempotencyKey?: string,
    trace: { traceparent?: string | undefined; tracestate?: string | undefined } = {}): Promise<string> {
    const fail = (message: string) =>
      JSON.stringify({ type: "tool_error", id: ex.id, call, message: message.slice(0, MAX_TOOL_ERROR) });
    const tool = ex.tools.get(name);
    if (!tool) return fail(`Unknown tool: ${name}`);
    try {
      const chk = await tool.check(input);
      if (!chk.ok) return fail(`Invalid input for tool ${name}: ${chk.message}`);
      const ctx: ToolContext = {
        signal, abortSignal: signal, conversation: ex.conversation, executionId: ex.id, callId: call,
        toolCallId: call, messages: [], context: undefined, experimental_context: undefined,
        ...(trace.traceparent ? { traceparent: trace.traceparent } : {}),
        ...(trace.tracestate ? { tracestate: trace.tracestate } : {}),
      };
      // A call approved on resume carries its key; any other may need a person first.
      if (idempotencyKey !== undefined) ctx.idempotencyKey = idempotencyKey;
      else if (tool.needsApproval && await tool.needsApproval(input, ctx)) {
        return JSON.stringify({ type: "suspend", id: ex.id, call });
      }
      const out = await inToolSpan({ ...trace, tool: name, callId: call, executionId: ex.id },
        () => Promise.resolve(tool.execute(input, ctx)));
      const json = toJsonText(out);
      if (!json.ok) return fail(`Tool ${name} returned a value that is not JSON: ${json.why}`);
      return `{"type":"tool_result","id":${JSON.stringify(ex.id)},"call":${JSON.stringify(call)},"output":${json.text}}`;
    } catch (e) {
      return fail(modelError(ex, e, name, call));
    }
  }
}

/** What the program sees of a tool's error: the hook's text, else the message. */
function modelError(ex: Exec, e: unknown, tool: string, call: string): string {
  if (ex.toModelError) {
    try {
      const text = ex.toModelError(e, { tool, call, executionId: ex.id, conversation: ex.conversation });
      if (typeof text === "string" && text) return text;
    } catch {
      // a failing hook must not leak what it was hiding
    }
    return `Tool ${tool} failed`;
  }
  const msg = e instanceof Error ? e.message : typeof e === "string" ? e : "";
  return msg || `Tool ${tool} failed`;
}

/** `codepod declarations FILE`, for a stdio server older than the declarations message. */
async function cliDeclarations(opts: SpawnOptions, decls: ToolDeclaration[]): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "codepod-decl-"));
  try {
    const file = join(dir, "tools.json");
    await writeFile(file, JSON.stringify({ tools: decls }));
    return await new Promise<string>((resolve, reject) => {
      execFile(opts.command, ["declarations", file], { env: opts.env ?? process.env, maxBuffer: 16 << 20 },
        (err, stdout) => (err ? reject(new Error(`codepod declarations failed: ${err.message}`)) : resolve(stdout)));
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
