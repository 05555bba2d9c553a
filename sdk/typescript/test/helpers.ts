// Test harness: a real `codepod serve` built from this tree, on both
// transports, with every protocol message checked against the session
// protocol's JSON Schemas (broker/schema) when the tree has them.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Ajv2020 } from "ajv/dist/2020.js";
import type { ValidateFunction } from "ajv";
import { Codepod } from "@codepod/client";

const here = dirname(fileURLToPath(import.meta.url));
export const REPO = process.env.CODEPOD_REPO ?? resolve(here, "../../..");
export const BIN = process.env.CODEPOD_BIN ?? join(REPO, "build", "codepod");
export const EXAMPLE = join(REPO, "tests", "example");

export type Transport = "stdio" | "ws";
export const TRANSPORTS: Transport[] = ["stdio", "ws"];

// ---- schema checks ---------------------------------------------------------

export const SCHEMA_DIR = process.env.CODEPOD_SCHEMA_DIR ?? join(REPO, "broker", "schema");
export const HAVE_SCHEMAS = existsSync(join(SCHEMA_DIR, "index.json"));
/** Parts of session protocol v1.1, known by their schemas (they land with them). */
export const HAVE_LOG = existsSync(join(SCHEMA_DIR, "log.schema.json"));
export const HAVE_ATTACH = existsSync(join(SCHEMA_DIR, "attach.schema.json"));
/** The sandbox's commands and files (they land with their schemas). */
export const HAVE_COMMANDS = existsSync(join(SCHEMA_DIR, "command.schema.json"));
export const HAVE_FILES = existsSync(join(SCHEMA_DIR, "file_read.schema.json"));
export const HAVE_ARCHIVES = HAVE_FILES &&
  "archive_read" in (JSON.parse(readFileSync(join(SCHEMA_DIR, "index.json"), "utf8")) as { toServer: object }).toServer;
// broker/schema/index.json names the schema of each message type, per direction.
const validators = { out: new Map<string, ValidateFunction>(), in: new Map<string, ValidateFunction>() };
if (HAVE_SCHEMAS) {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
  for (const f of readdirSync(SCHEMA_DIR).filter((x) => x.endsWith(".schema.json"))) {
    const s = JSON.parse(readFileSync(join(SCHEMA_DIR, f), "utf8")) as Record<string, unknown>;
    delete s.$schema;
    if (typeof s.$id !== "string") s.$id = f;
    ajv.addSchema(s, f);
  }
  const index = JSON.parse(readFileSync(join(SCHEMA_DIR, "index.json"), "utf8")) as
    { toServer: Record<string, string>; fromServer: Record<string, string> };
  const get = (f: string) => ajv.getSchema(f) ?? ajv.getSchema(String((JSON.parse(readFileSync(join(SCHEMA_DIR, f), "utf8")) as { $id?: string }).$id));
  for (const [t, f] of Object.entries(index.toServer)) validators.out.set(t, get(f)!);
  for (const [t, f] of Object.entries(index.fromServer)) validators.in.set(t, get(f)!);
}

/** Every message seen, and every one that did not match its schema. */
export class SchemaLog {
  readonly seen: Array<{ dir: "in" | "out"; msg: Record<string, unknown> }> = [];
  readonly bad: string[] = [];
  /** Throws when a message did not match its schema. */
  check(): void {
    if (this.bad.length) throw new Error(`messages that do not match broker/schema:\n${this.bad.join("\n")}`);
  }
  trace = (dir: "in" | "out", text: string) => {
    const msg = JSON.parse(text) as Record<string, unknown>;
    this.seen.push({ dir, msg });
    if (!HAVE_SCHEMAS) return;
    const v = validators[dir].get(String(msg.type));
    if (!v) {
      this.bad.push(`${dir} ${String(msg.type)}: no schema for this message type`);
    } else if (!(v(msg) as boolean)) {
      this.bad.push(`${dir} ${String(msg.type)}: ${JSON.stringify(v.errors?.slice(0, 3))} in ${text.slice(0, 300)}`);
    }
  };
}

// ---- servers ---------------------------------------------------------------

export interface Server {
  url: string;
  token: string;
  proc: ChildProcess;
  stop(): Promise<number | null>;
}

export function tempDir(tag: string): string {
  return mkdtempSync(join(tmpdir(), `codepod-sdk-ts-${tag}-`));
}

export async function startServer(dir: string, extra: string[] = []): Promise<Server> {
  const token = "sdk-test-token-" + Math.random().toString(16).slice(2);
  const tokenFile = join(dir, "token");
  writeFileSync(tokenFile, token + "\n");
  const proc = spawn(BIN, ["serve", "--listen", "127.0.0.1:0", "--token-file", tokenFile,
    "--state-dir", join(dir, "state"), ...extra], { stdio: ["ignore", "ignore", "pipe"] });
  const port = await new Promise<number>((res, rej) => {
    let buf = "";
    const timer = setTimeout(() => rej(new Error("codepod serve did not start: " + buf.slice(-2000))), 30_000);
    proc.stderr!.setEncoding("utf8");
    proc.stderr!.on("data", (c: string) => {
      buf += c;
      for (const line of buf.split("\n")) {
        try {
          const m = JSON.parse(line) as { event?: string; port?: number };
          if (m.event === "serve.listen" && m.port) {
            clearTimeout(timer);
            res(m.port);
          }
        } catch {
          // partial or non-JSON line
        }
      }
      if (buf.length > 1 << 20) buf = buf.slice(-65536);
    });
    proc.on("exit", (code) => { clearTimeout(timer); rej(new Error(`codepod serve exited ${code}: ${buf.slice(-2000)}`)); });
  });
  return {
    url: `http://127.0.0.1:${port}`, token, proc,
    stop: () => new Promise((res) => {
      if (proc.exitCode !== null) return res(proc.exitCode);
      proc.once("exit", (code) => res(code));
      proc.kill("SIGTERM");
    }),
  };
}

/** A session on one transport, with its own server or child; `close()` ends both. */
export interface Fixture {
  codepod: Codepod;
  log: SchemaLog;
  server?: Server;
  proxy?: Proxy;
  close(): Promise<void>;
}

export interface OpenOptions {
  proxy?: boolean;
  reconnectMs?: number;
  heartbeatMs?: number;
  idleTimeoutMs?: number;
}

export async function open(transport: Transport, opts: OpenOptions = {}): Promise<Fixture> {
  const dir = tempDir(transport);
  const log = new SchemaLog();
  if (transport === "stdio") {
    // Through sh, which writes codepod's exit status to a file: under ASan a
    // report makes it nonzero, and the test must fail.
    const status = join(dir, "status");
    const codepod = await Codepod.spawn({
      command: "/bin/sh",
      args: ["-c", '"$0" "$@"; echo $? > "$CODEPOD_TEST_STATUS"', BIN, "serve", "--stdio", "--state-dir", join(dir, "state")],
      env: { ...process.env, CODEPOD_TEST_STATUS: status }, stderr: "ignore", trace: log.trace,
    });
    return {
      codepod, log,
      close: async () => {
        await codepod.close();
        const rc = existsSync(status) ? readFileSync(status, "utf8").trim() : "missing";
        rmSync(dir, { recursive: true, force: true });
        if (rc !== "0") throw new Error(`codepod serve --stdio exited ${rc}`);
        log.check();
      },
    };
  }
  const server = await startServer(dir);
  const proxy = opts.proxy ? await startProxy(Number(new URL(server.url).port)) : undefined;
  const url = proxy ? `http://127.0.0.1:${proxy.port}` : server.url;
  const codepod = await Codepod.connect({
    url, token: server.token, trace: log.trace, ...(opts.reconnectMs !== undefined ? { reconnectMs: opts.reconnectMs } : {}),
    ...(opts.heartbeatMs !== undefined ? { heartbeatMs: opts.heartbeatMs } : {}),
    ...(opts.idleTimeoutMs !== undefined ? { idleTimeoutMs: opts.idleTimeoutMs } : {}),
  });
  return {
    codepod, log, server, ...(proxy ? { proxy } : {}),
    close: async () => {
      await codepod.close();
      proxy?.close();
      const rc = await server.stop();
      rmSync(dir, { recursive: true, force: true });
      if (rc !== 0) throw new Error(`codepod serve exited ${rc}`);
      log.check();
    },
  };
}

// ---- a TCP proxy whose connections a test can cut --------------------------

export interface Proxy {
  port: number;
  /** Cuts every connection through the proxy (the client sees its WebSocket drop). */
  drop(): void;
  /** The same with an RST on both sides. */
  reset(): void;
  /** Every connection so far stops forwarding and stays open (a path that
   * silently died); new ones work. */
  freeze(): void;
  connections(): number;
  /** Stops accepting new connections too (codepod looks gone). */
  close(): void;
}

export function startProxy(target: number): Promise<Proxy> {
  const sockets = new Set<net.Socket>();
  const pairs: Array<[net.Socket, net.Socket]> = [];
  let accepted = 0;
  const srv = net.createServer((client) => {
    accepted++;
    const upstream = net.connect(target, "127.0.0.1");
    sockets.add(client).add(upstream);
    pairs.push([client, upstream]);
    const gone = () => { client.destroy(); upstream.destroy(); sockets.delete(client); sockets.delete(upstream); };
    client.on("error", gone).on("close", gone);
    upstream.on("error", gone).on("close", gone);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  return new Promise((res) => {
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as net.AddressInfo).port;
      res({
        port,
        drop: () => { for (const s of sockets) s.destroy(); sockets.clear(); },
        reset: () => { for (const s of sockets) s.resetAndDestroy(); sockets.clear(); },
        freeze: () => {
          for (const [a, b] of pairs.splice(0)) {
            a.unpipe(b);
            b.unpipe(a);
            a.pause();
            b.pause();
          }
        },
        connections: () => accepted,
        close: () => { for (const s of sockets) s.destroy(); srv.close(); },
      });
    });
  });
}

// ---- the invoices example's tools (tests/example) --------------------------

interface Invoice { firmId: string; amountCents: number; status: "paid" | "void"; month?: string }
const invoicesData = JSON.parse(readFileSync(join(EXAMPLE, "data", "invoices.json"), "utf8")) as unknown;
const firmsData = JSON.parse(readFileSync(join(EXAMPLE, "data", "firms.json"), "utf8")) as unknown;
export const INVOICES_JS = readFileSync(join(EXAMPLE, "invoices.js"), "utf8");
export const exampleTools = JSON.parse(readFileSync(join(EXAMPLE, "tools.json"), "utf8")) as {
  tools: Array<{ name: string; description: string; inputSchema: Record<string, unknown>; outputSchema: Record<string, unknown> }>;
};
export const invoicesFor = (month: string) =>
  (invoicesData as Invoice[]).filter((i) => i.month === month)
    .map(({ firmId, amountCents, status }) => ({ firmId, amountCents, status }));
export const firms = firmsData as Array<{ id: string; name: string }>;

/** The expected answer of the invoices program, computed here from the same data. */
export function expectedTop3(): Array<{ firm: string; cents: number }> {
  const totals = new Map<string, number>();
  for (const i of invoicesFor("2026-08")) if (i.status === "paid") totals.set(i.firmId, (totals.get(i.firmId) ?? 0) + i.amountCents);
  const names = new Map(firms.map((f) => [f.id, f.name]));
  return [...totals].map(([id, cents]) => ({ firm: names.get(id)!, cents })).sort((a, b) => b.cents - a.cents).slice(0, 3);
}

export function spec(name: string) {
  const t = exampleTools.tools.find((x) => x.name === name)!;
  return { description: t.description, inputSchema: t.inputSchema, outputSchema: t.outputSchema };
}

/** Resolves when the signal aborts (for tools that wait on it). */
export function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((res) => {
    if (signal.aborted) res();
    else signal.addEventListener("abort", () => res(), { once: true });
  });
}
