// The two ways to reach `codepod serve`: a WebSocket (`--listen`, GET
// /v1/session, subprotocol codepod.v1, a bearer token) and a child process
// (`--stdio`, one JSON object per line). Both carry text messages; the
// session logic above them is the same.
import { spawn as spawnChild, type ChildProcess, type StdioOptions } from "node:child_process";
import WebSocket from "ws";

export interface Link {
  /** Sends one message; false when the link is down (the message is dropped). */
  send(text: string): boolean;
  close(): Promise<void>;
}

export interface LinkEvents {
  message(text: string): void;
  /** The link went down without close() being called (or close() finished). */
  closed(reason: string): void;
}

/**
 * codepod could not be reached or refused the session. `code` is the
 * client's own: UNAVAILABLE when nothing answered (no such command, nothing
 * listening, no route; `causeCode` then holds the system's code, such as
 * ENOENT or ECONNREFUSED, and `cause` the original error), else what the
 * server answered (UNAUTHORIZED, SHUTTING_DOWN, TOO_MANY_SESSIONS, ...).
 */
export class CodepodConnectError extends Error {
  readonly code: string;
  readonly causeCode: string | undefined;
  constructor(code: string, message: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = "CodepodConnectError";
    this.code = code;
    const c = (cause as { code?: unknown } | undefined)?.code;
    this.causeCode = typeof c === "string" ? c : undefined;
  }
}

function unavailable(what: string, err: Error): CodepodConnectError {
  const sys = (err as NodeJS.ErrnoException).code;
  return new CodepodConnectError("UNAVAILABLE", `${what}: ${sys && !err.message.includes(sys) ? `${sys}: ` : ""}${err.message}`, err);
}

/** `http://host:port` (or ws://, https://, wss://) to the session's WebSocket URL. */
export function sessionUrl(base: string): string {
  const u = new URL(base);
  if (u.protocol === "http:") u.protocol = "ws:";
  else if (u.protocol === "https:") u.protocol = "wss:";
  if (!u.pathname.endsWith("/v1/session")) u.pathname = u.pathname.replace(/\/$/, "") + "/v1/session";
  return u.toString();
}

/** How a WebSocket proves it is alive (both in milliseconds; 0 turns it off). */
export interface Liveness {
  /** A PING this often (default 15000). */
  heartbeatMs?: number;
  /** Nothing from the server (no message, PING or PONG) for this long: the
   * connection is closed and treated as a reset (default 45000). */
  idleTimeoutMs?: number;
}

export function openWebSocket(url: string, token: string, ev: LinkEvents,
  headers: Record<string, string> = {}, live: Liveness = {}): Promise<Link> {
  const heartbeatMs = live.heartbeatMs ?? 15_000;
  const idleTimeoutMs = live.idleTimeoutMs ?? 45_000;
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(sessionUrl(url), "codepod.v1", {
      headers: { ...headers, Authorization: `Bearer ${token}` },
      maxPayload: 64 << 20,
      perMessageDeflate: false,
    });
    let open = false;
    let done = false;
    const finish = (reason: string) => {
      if (done) return;
      done = true;
      ev.closed(reason);
    };
    ws.on("unexpected-response", (_req, res) => {
      const code = res.statusCode === 401 ? "UNAUTHORIZED"
        : res.statusCode === 503 ? "SHUTTING_DOWN" : "INTERNAL";
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => { if (body.length < 4096) body += c; });
      res.on("end", () => {
        let msg = `codepod refused the session: HTTP ${res.statusCode}`;
        try {
          const e = JSON.parse(body) as { error?: { code?: string; message?: string } };
          if (e.error?.message) msg = `codepod refused the session: ${e.error.message}`;
          ws.terminate();
          reject(new CodepodConnectError(e.error?.code ?? code, msg));
          return;
        } catch {
          // not JSON
        }
        ws.terminate();
        reject(new CodepodConnectError(code, msg));
      });
    });
    // A path that stops forwarding without a reset shows no error: only
    // silence tells, so the server must be heard from within idleTimeoutMs.
    let heard = Date.now();
    let pinged = Date.now();
    let watch: NodeJS.Timeout | undefined;
    const hear = () => { heard = Date.now(); };
    const watchdog = () => {
      const now = Date.now();
      if (idleTimeoutMs > 0 && now - heard > idleTimeoutMs) {
        clearInterval(watch);
        ws.terminate(); // "close" follows: the session reconnects as after a reset
        finish(`nothing from codepod for ${idleTimeoutMs} ms (idleTimeoutMs): the connection was closed`);
        return;
      }
      if (heartbeatMs > 0 && now - pinged >= heartbeatMs && ws.readyState === WebSocket.OPEN) {
        pinged = now;
        ws.ping();
      }
    };
    ws.on("pong", hear);
    ws.on("ping", hear);
    ws.on("open", () => {
      open = true;
      hear();
      if (heartbeatMs > 0 || idleTimeoutMs > 0) {
        const tick = Math.max(10, Math.min(heartbeatMs || Infinity, idleTimeoutMs || Infinity, 4000) / 2);
        watch = setInterval(watchdog, tick);
        watch.unref();
      }
      resolve({
        send(text) {
          if (ws.readyState !== WebSocket.OPEN) return false;
          ws.send(text);
          return true;
        },
        close() {
          return new Promise<void>((res) => {
            if (ws.readyState === WebSocket.CLOSED) return res();
            ws.once("close", () => res());
            ws.close(1000);
            // A server that never answers the close handshake: do not wait forever.
            setTimeout(() => { ws.terminate(); }, 2000).unref();
          });
        },
      });
    });
    ws.on("message", (data, isBinary) => {
      hear();
      if (isBinary) return;
      ev.message(Array.isArray(data) ? Buffer.concat(data).toString("utf8") : data.toString());
    });
    ws.on("error", (err) => {
      if (!open) reject(unavailable(`cannot reach codepod at ${sessionUrl(url)}`, err));
    });
    ws.on("close", (code) => {
      clearInterval(watch);
      if (open) finish(`the WebSocket closed (${code})`);
    });
  });
}

/** Where codepod's own log lines go: `console` fits, and so do most loggers. */
export interface Logger {
  debug(record: unknown): void;
  info(record: unknown): void;
  warn(record: unknown): void;
  error(record: unknown): void;
}

export interface SpawnOptions {
  command: string;
  args?: string[];
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /**
   * codepod's operational logs (JSON lines on its stderr), each parsed and
   * handed to the method of its level (`debug`, `info`, `warn`, `error`; a
   * line that is not JSON goes to `warn` as text). By default warnings and
   * errors are written to this process's stderr and the rest is dropped.
   */
  logger?: Logger;
  /** Instead of `logger`: the child's stderr as it is ("inherit"), none, or a pipe. */
  stderr?: "inherit" | "ignore" | "pipe";
}

type Level = "debug" | "info" | "warn" | "error";

/** Warnings and errors, as codepod wrote them, on this process's stderr. */
const quietLogger: Logger = {
  debug() {},
  info() {},
  warn(r) { process.stderr.write((typeof r === "string" ? r : JSON.stringify(r)) + "\n"); },
  error(r) { process.stderr.write((typeof r === "string" ? r : JSON.stringify(r)) + "\n"); },
};

function logLine(logger: Logger, line: string): void {
  let rec: unknown = line;
  let level: Level = "warn";
  try {
    rec = JSON.parse(line);
    const l = (rec as { level?: unknown } | null)?.level;
    if (l === "debug" || l === "info" || l === "warn" || l === "error") level = l;
  } catch {
    rec = line;
  }
  try {
    logger[level](rec);
  } catch {
    // a failing logger must not take the session down
  }
}

/** A `codepod serve --stdio` child; lines of any length (no line limit). */
export function spawnStdio(opts: SpawnOptions, ev: LinkEvents): Promise<Link & { child: ChildProcess }> {
  return new Promise((resolve, reject) => {
    const stdio: StdioOptions = ["pipe", "pipe", opts.stderr ?? "pipe"];
    const child = spawnChild(opts.command, opts.args ?? ["serve", "--stdio"], {
      stdio, env: opts.env ?? process.env, cwd: opts.cwd,
    });
    if (opts.stderr === undefined) {
      const logger = opts.logger ?? quietLogger;
      let rest = "";
      child.stderr!.setEncoding("utf8");
      child.stderr!.on("data", (chunk: string) => {
        rest += chunk;
        let nl: number;
        while ((nl = rest.indexOf("\n")) !== -1) {
          const line = rest.slice(0, nl);
          rest = rest.slice(nl + 1);
          if (line.trim()) logLine(logger, line);
        }
        if (rest.length > 1 << 20) rest = rest.slice(-65536); // one runaway line stays bounded
      });
      child.stderr!.on("end", () => { if (rest.trim()) logLine(logger, rest); });
    }
    let parts: Buffer[] = [];
    let started = false;
    let done = false;
    const finish = (reason: string) => {
      if (done) return;
      done = true;
      ev.closed(reason);
    };
    child.stdout!.on("data", (chunk: Buffer) => {
      let start = 0;
      for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
        parts.push(chunk.subarray(start, nl));
        const line = parts.length === 1 ? parts[0]!.toString("utf8") : Buffer.concat(parts).toString("utf8");
        parts = [];
        start = nl + 1;
        if (line.trim()) ev.message(line);
      }
      if (start < chunk.length) parts.push(chunk.subarray(start));
    });
    child.stdin!.on("error", () => { /* EPIPE once codepod exited: reported by "exit" */ });
    child.on("error", (err) => {
      if (!started) reject(unavailable(`cannot start ${opts.command}`, err));
      else finish(`codepod failed: ${err.message}`);
    });
    child.on("spawn", () => {
      started = true;
      resolve({
        child,
        send(text) {
          if (done || !child.stdin!.writable) return false;
          child.stdin!.write(text + "\n");
          return true;
        },
        close() {
          return new Promise<void>((res) => {
            if (child.exitCode !== null || child.signalCode !== null) return res();
            child.once("close", () => res());
            child.stdin!.end();
          });
        },
      });
    });
    child.on("close", (code, signal) => {
      finish(signal ? `codepod ended by ${signal}` : `codepod exited with status ${code}`);
    });
  });
}
