// A stand-in for `codepod serve --stdio` that speaks only the file and
// command messages of broker/SESSION.md, over a real folder and real
// /bin/sh processes: the client's own encoding (chunking, acks, flow
// control, base64, the order of messages) is tested against it where a
// server build without those messages is all there is. Every message it
// receives is appended to $DOUBLE_LOG as one JSON line.
//   node test/protocol-double.ts WORKSPACE
import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { appendFileSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { createInterface } from "node:readline";

const root = process.argv[2]!;
const CHUNK = 256 * 1024;
type M = Record<string, any>;
const send = (m: M) => process.stdout.write(JSON.stringify(m) + "\n");
const fail = (id: unknown, inReplyTo: string, code: string, message: string) =>
  send({ type: "error", id, inReplyTo, error: { code, message } });

function resolvePath(p: unknown): string | undefined {
  if (typeof p !== "string" || p.startsWith("/") || p.includes("\0")) return undefined;
  const n = normalize(p);
  if (n === ".." || n.startsWith("../")) return undefined;
  return join(root, n);
}

const acks = new Map<string, () => void>();
const writes = new Map<string, { path: string; parts: Buffer[]; ifMatch?: string }>();
const commands = new Map<string, ChildProcess>();
const kind = (s: import("node:fs").Stats) => s.isFile() ? "file" : s.isDirectory() ? "directory" : s.isSymbolicLink() ? "symlink" : "other";

async function readOut(id: string, bytes: Buffer, result: M) {
  for (let at = 0; at < bytes.length; at += CHUNK) {
    send({ type: "file_chunk", id, data: bytes.subarray(at, at + CHUNK).toString("base64") });
    await new Promise<void>((res) => acks.set(id, res));
  }
  send({ type: "file_result", id, ...result });
}

function handle(m: M) {
  const id = String(m.id);
  switch (m.type) {
    case "file_ack": {
      const a = acks.get(id);
      acks.delete(id);
      a?.();
      return;
    }
    case "file_read": {
      const p = resolvePath(m.path);
      if (!p) return fail(id, "file_read", "INVALID_REQUEST", "the path leaves the workspace");
      let all: Buffer;
      try {
        all = readFileSync(p);
      } catch {
        return fail(id, "file_read", "NOT_FOUND", "no such file");
      }
      const off = m.offset ?? 0;
      const bytes = all.subarray(off, m.length === undefined ? undefined : off + m.length);
      void readOut(id, bytes, { op: "read", size: all.length, etag: createHash("sha256").update(all).digest("hex") });
      return;
    }
    case "file_write": {
      const p = resolvePath(m.path);
      if (!p) return fail(id, "file_write", "INVALID_REQUEST", "the path leaves the workspace");
      writes.set(id, { path: p, parts: [], ifMatch: m.ifMatch });
      send({ type: "file_ack", id });
      return;
    }
    case "file_chunk": {
      const w = writes.get(id);
      if (!w) return fail(id, "file_chunk", "INVALID_REQUEST", "no such write");
      w.parts.push(Buffer.from(m.data, "base64"));
      if (!m.last) return send({ type: "file_ack", id });
      writes.delete(id);
      const body = Buffer.concat(w.parts);
      if (w.ifMatch !== undefined) {
        let cur = "";
        try { cur = createHash("sha256").update(readFileSync(w.path)).digest("hex"); } catch { /* none */ }
        if (cur !== w.ifMatch) return fail(id, "file_chunk", "PRECONDITION_FAILED", "the file changed");
      }
      mkdirSync(dirname(w.path), { recursive: true });
      writeFileSync(w.path + ".part", body);
      renameSync(w.path + ".part", w.path);
      send({ type: "file_result", id, op: "write", size: body.length, etag: createHash("sha256").update(body).digest("hex") });
      return;
    }
    case "file_stat": {
      const p = resolvePath(m.path);
      if (!p) return fail(id, "file_stat", "INVALID_REQUEST", "the path leaves the workspace");
      try {
        const s = statSync(p);
        send({ type: "file_result", id, op: "stat", stat: { type: kind(s), size: s.size, mode: s.mode & 0o7777, mtimeMs: Math.floor(s.mtimeMs) } });
      } catch {
        fail(id, "file_stat", "NOT_FOUND", "no such file");
      }
      return;
    }
    case "file_list": {
      const p = resolvePath(m.path);
      if (!p) return fail(id, "file_list", "INVALID_REQUEST", "the path leaves the workspace");
      let names: string[];
      try { names = readdirSync(p).sort(); } catch { return fail(id, "file_list", "NOT_FOUND", "no such directory"); }
      const from = m.cursor ? Number(m.cursor) : 0;
      const limit = m.limit ?? 1000;
      const entries = names.slice(from, from + limit).map((name) => {
        const s = lstatSync(join(p, name));
        return { name, type: kind(s), size: s.size };
      });
      send({ type: "file_result", id, op: "list", entries, ...(from + limit < names.length ? { next: String(from + limit) } : {}) });
      return;
    }
    case "file_delete": {
      const p = resolvePath(m.path);
      if (!p) return fail(id, "file_delete", "INVALID_REQUEST", "the path leaves the workspace");
      let st;
      try { st = lstatSync(p); } catch { return fail(id, "file_delete", "NOT_FOUND", "no such file"); }
      if (st.isDirectory() && !m.recursive) return fail(id, "file_delete", "INVALID_REQUEST", "a directory is deleted only with recursive");
      rmSync(p, { recursive: Boolean(m.recursive) });
      send({ type: "file_result", id, op: "delete" });
      return;
    }
    case "command": {
      const cwd = m.cwd === undefined ? root : resolvePath(m.cwd);
      if (!cwd) return fail(id, "command", "INVALID_REQUEST", "the path leaves the workspace");
      const argv: string[] = m.argv ?? ["/bin/sh", "-c", m.command];
      const child = spawn(argv[0]!, argv.slice(1), { cwd, env: { PATH: process.env.PATH, ...(m.env ?? {}) }, stdio: [m.stdin ? "pipe" : "ignore", "pipe", "pipe"], detached: true });
      commands.set(id, child);
      send({ type: "accepted", id });
      const text = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
      for (const s of ["stdout", "stderr"] as const) {
        child[s]!.on("data", (d: Buffer) => {
          text[s].push(d);
          if (m.stream) send({ type: "command_output", id, stream: s, data: d.toString("base64") });
        });
      }
      let stopped = false;
      (child as ChildProcess & { stopWanted?: () => void }).stopWanted = () => { stopped = true; process.kill(-child.pid!, "SIGKILL"); };
      child.on("close", (code, signal) => {
        commands.delete(id);
        const r: M = {
          type: "command_result", id, status: stopped ? "error" : "ok",
          exitCode: signal ? 128 + ({ SIGKILL: 9, SIGTERM: 15 } as M)[signal] : code,
          stdout: Buffer.concat(text.stdout).toString(), stderr: Buffer.concat(text.stderr).toString(),
          stdoutTruncated: false, stderrTruncated: false, usage: {},
        };
        if (signal) r.signal = signal;
        if (stopped) r.error = { code: "CANCELLED", message: "stopped" };
        send(r);
      });
      return;
    }
    case "command_stdin": {
      const c = commands.get(id);
      if (!c?.stdin) return fail(id, "command_stdin", "INVALID_REQUEST", "no such command");
      if (m.data) c.stdin.write(Buffer.from(m.data, "base64"));
      if (m.eof) c.stdin.end();
      return;
    }
    case "stop": {
      const c = commands.get(id) as (ChildProcess & { stopWanted?: () => void }) | undefined;
      if (c) c.stopWanted?.();
      else if (writes.delete(id)) return;
      return;
    }
    default:
      fail(id, String(m.type), "INVALID_REQUEST", "unknown message type");
  }
}

const rl = createInterface({ input: process.stdin });
rl.on("line", (line) => {
  if (!line.trim()) return;
  if (process.env.DOUBLE_LOG) appendFileSync(process.env.DOUBLE_LOG, line + "\n");
  const m = JSON.parse(line) as M;
  try {
    handle(m);
  } catch {
    fail(m.id, String(m.type), "INTERNAL", "the double failed");
  }
});
rl.on("close", () => {
  for (const c of commands.values()) process.kill(-c.pid!, "SIGKILL");
  process.exit(0);
});
