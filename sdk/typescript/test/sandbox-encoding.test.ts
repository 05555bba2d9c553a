// The sandbox object's own encoding of the file and command messages, against
// test/protocol-double.ts (a real folder, real /bin/sh): chunk sizes, one
// chunk in flight, acks only as the reader reads, base64 both ways, the
// `/workspace` path mapping, and the AI SDK 7 / bash-tool types. The same
// operations against a real codepod serve are in sandbox.test.ts.
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import type { Experimental_SandboxSession } from "ai";
import type { Sandbox as BashToolSandbox } from "bash-tool";
import { Codepod, CodepodError, type CodepodSandbox } from "@codepod/client";
import { tempDir } from "./helpers.ts";

const here = dirname(fileURLToPath(import.meta.url));
type M = Record<string, any>;

describe("the sandbox's messages (against the protocol double)", () => {
  let dir: string;
  let ws: string;
  let logFile: string;
  let cp: Codepod;
  let sb: CodepodSandbox;
  const sent = () => readFileSync(logFile, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l) as M);

  before(async () => {
    dir = tempDir("double");
    ws = join(dir, "workspace");
    mkdirSync(ws);
    logFile = join(dir, "sent.jsonl");
    writeFileSync(logFile, "");
    cp = await Codepod.spawn({
      command: process.execPath, args: [join(here, "protocol-double.ts"), ws],
      env: { ...process.env, DOUBLE_LOG: logFile },
    });
    sb = cp.sandbox("conv-double");
  });
  after(async () => {
    await cp.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("one object is the AI SDK's Experimental_SandboxSession and bash-tool's Sandbox", () => {
    const forAi: Experimental_SandboxSession = sb;
    const forBashTool: BashToolSandbox = sb;
    assert.equal(typeof forAi.readFile, "function");
    assert.equal(typeof forBashTool.executeCommand, "function");
    assert.match(sb.description, /\/workspace/);
  });

  test("a write goes out in 256 KiB chunks, each acked before the next, the last one flagged", async () => {
    const body = randomBytes(4 * 256 * 1024 + 5);
    const from = sent().length;
    await sb.writeBinaryFile({ path: "/workspace/data/blob.bin", content: body });
    assert.deepEqual(readFileSync(join(ws, "data", "blob.bin")), body);
    const msgs = sent().slice(from);
    assert.equal(msgs[0]!.type, "file_write");
    assert.equal(msgs[0]!.conversation, "conv-double");
    assert.equal(msgs[0]!.path, "data/blob.bin");
    const chunks = msgs.filter((m) => m.type === "file_chunk");
    assert.deepEqual(chunks.map((c) => Buffer.from(c.data, "base64").length), [262144, 262144, 262144, 262144, 5]);
    assert.deepEqual(chunks.map((c) => c.last === true), [false, false, false, false, true]);
    assert.ok(chunks.every((c) => c.id === msgs[0]!.id));
    const meta = await sb.write("data/blob.bin", body);
    assert.equal(meta.etag, createHash("sha256").update(body).digest("hex"));
    assert.equal(meta.size, body.length);
  });

  test("content that ends on a chunk boundary is followed by an empty last chunk", async () => {
    const from = sent().length;
    await sb.writeFile({
      path: "even.bin",
      content: new ReadableStream<Uint8Array>({
        start(c) {
          c.enqueue(new Uint8Array(200 * 1024).fill(1));
          c.enqueue(new Uint8Array(56 * 1024).fill(2));
          c.close();
        },
      }),
    });
    const chunks = sent().slice(from).filter((m) => m.type === "file_chunk");
    assert.deepEqual(chunks.map((c) => [Buffer.from(c.data, "base64").length, c.last === true]), [[262144, true]]);
    assert.equal(readFileSync(join(ws, "even.bin")).length, 262144);
  });

  test("a read asks for the next chunk only when the reader took this one", async () => {
    const body = randomBytes(3 * 256 * 1024 + 17);
    writeFileSync(join(ws, "big.bin"), body);
    const from = sent().length;
    const s = await sb.readFile({ path: "big.bin" });
    assert.ok(s);
    // A round trip after the read began: codepod answers in order, so any ack
    // the client sent on its own would be logged by now.
    await sb.stat({ path: "big.bin" });
    assert.equal(sent().slice(from).filter((m) => m.type === "file_ack").length, 0);
    const parts: Buffer[] = [];
    for await (const p of s) parts.push(Buffer.from(p));
    assert.deepEqual(Buffer.concat(parts), body);
    assert.equal(sent().slice(from).filter((m) => m.type === "file_ack").length, 4);
    const ranged = await sb.files.read("big.bin", { offset: 10, length: 5 });
    const got: Buffer[] = [];
    for await (const p of ranged.stream) got.push(Buffer.from(p));
    assert.deepEqual(Buffer.concat(got), body.subarray(10, 15));
    assert.equal((await ranged.done).size, body.length);
  });

  test("missing files: null from the AI SDK methods, false from deleteFile, NOT_FOUND for bash-tool", async () => {
    assert.equal(await sb.readFile({ path: "nope.txt" }), null);
    assert.equal(await sb.readTextFile({ path: "nope.txt" }), null);
    assert.equal(await sb.readBinaryFile({ path: "nope.txt" }), null);
    assert.equal(await sb.stat({ path: "nope.txt" }), null);
    assert.equal(await sb.listDirectory({ path: "nope" }), null);
    assert.equal(await sb.deleteFile({ path: "nope.txt" }), false);
    await assert.rejects(sb.readFile("nope.txt"), (e: unknown) => e instanceof CodepodError && e.code === "NOT_FOUND");
  });

  test("text with line ranges; consecutive ranges give the file back", async () => {
    const text = "one\ntwo\nthree\nfour";
    await sb.writeTextFile({ path: "lines.txt", content: text });
    assert.equal(await sb.readTextFile({ path: "lines.txt" }), text);
    assert.equal(await sb.readTextFile({ path: "lines.txt", startLine: 2, endLine: 3 }), "two\nthree\n");
    assert.equal(await sb.readTextFile({ path: "lines.txt", startLine: 3, endLine: 99 }), "three\nfour");
    assert.equal(await sb.readTextFile({ path: "lines.txt", endLine: 1 }), "one\n");
    const parts = [];
    for (let i = 1; i <= 4; i++) parts.push(await sb.readTextFile({ path: "lines.txt", startLine: i, endLine: i }));
    assert.equal(parts.join(""), text);
    await sb.writeTextFile({ path: "latin1.txt", content: "café", encoding: "latin1" });
    assert.deepEqual(readFileSync(join(ws, "latin1.txt")), Buffer.from([0x63, 0x61, 0x66, 0xe9]));
    assert.equal(await sb.readTextFile({ path: "latin1.txt", encoding: "latin1" }), "café");
  });

  test("listDirectory follows the cursor past one page; stat and delete", async () => {
    mkdirSync(join(ws, "many"));
    for (let i = 0; i < 1003; i++) writeFileSync(join(ws, "many", `f${String(i).padStart(4, "0")}`), "x");
    symlinkSync("f0000", join(ws, "many", "link"));
    const from = sent().length;
    const all = await sb.listDirectory({ path: "/workspace/many/" });
    assert.equal(all!.length, 1004);
    assert.deepEqual(all![0], { name: "f0000", type: "file", size: 1 });
    assert.equal(all!.find((e) => e.name === "link")!.type, "symlink");
    const lists = sent().slice(from).filter((m) => m.type === "file_list");
    assert.deepEqual(lists.map((m) => [m.path, m.cursor]), [["many", undefined], ["many", "1000"]]);
    const st = await sb.stat({ path: "many" });
    assert.equal(st!.type, "directory");
    await assert.rejects(sb.deleteFile({ path: "many" }));
    assert.equal(await sb.deleteFile({ path: "many", recursive: true }), true);
    assert.equal(existsSync(join(ws, "many")), false);
    const root = await sb.listDirectory({ path: "/workspace" });
    assert.ok(root!.some((e) => e.name === "lines.txt"));
    assert.equal(sent().at(-1)!.path, ".");
  });

  test("paths outside /workspace are refused before anything is sent", async () => {
    const from = sent().length;
    for (const p of ["/etc/passwd", "/workspacefoo", "/", ""]) {
      await assert.rejects(sb.readTextFile({ path: p }), (e: unknown) => e instanceof CodepodError && e.code === "INVALID_REQUEST");
    }
    assert.equal(sent().length, from);
    await assert.rejects(sb.readTextFile({ path: "../x" }), (e: unknown) => e instanceof CodepodError && e.code === "INVALID_REQUEST");
  });

  test("run: exit code, output, working directory and env; non-zero is no error", async () => {
    mkdirSync(join(ws, "sub"), { recursive: true });
    const r = await sb.run({ command: "pwd; echo \"$GREETING\"; echo oops >&2; exit 3", workingDirectory: "/workspace/sub", env: { GREETING: "hi" } });
    assert.equal(r.exitCode, 3);
    assert.equal(r.stdout, `${join(ws, "sub")}\nhi\n`);
    assert.equal(r.stderr, "oops\n");
    const m = sent().filter((x) => x.type === "command").at(-1)!;
    assert.deepEqual([m.command, m.cwd, m.env, m.stream, m.stdin], ["pwd; echo \"$GREETING\"; echo oops >&2; exit 3", "sub", { GREETING: "hi" }, undefined, undefined]);
    const bt = await sb.executeCommand("echo from-bash-tool");
    assert.deepEqual(bt, { exitCode: 0, stdout: "from-bash-tool\n", stderr: "" });
  });

  test("spawn: stdin written and closed, output streamed, wait gives the exit code", async () => {
    const p = await sb.spawn({ command: "tr a-z A-Z; echo done >&2", stdin: true });
    const w = p.stdin.getWriter();
    await w.write(new TextEncoder().encode("hello "));
    await w.write(new TextEncoder().encode("sandbox"));
    await w.close();
    const [out, err] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text()]);
    assert.equal(out, "HELLO SANDBOX");
    assert.equal(err, "done\n");
    assert.deepEqual(await p.wait(), { exitCode: 0 });
    const m = sent().filter((x) => x.type === "command").at(-1)!;
    assert.equal(m.stream, true);
    assert.equal(m.stdin, true);
    assert.ok(sent().some((x) => x.type === "command_stdin" && x.eof === true && x.id === m.id));
  });

  test("close() stops the commands still running and settles them", async () => {
    const other = await Codepod.spawn({
      command: process.execPath, args: [join(here, "protocol-double.ts"), ws],
      env: { ...process.env, DOUBLE_LOG: logFile },
    });
    const p = await other.sandbox("conv-close").spawn({ command: "sleep 600" });
    const id = sent().filter((m) => m.type === "command").at(-1)!.id;
    await other.close();
    const r = await p.result;
    assert.equal(r.status, "error");
    assert.equal(r.error!.code, "CANCELLED");
    assert.ok(sent().some((m) => m.type === "stop" && m.id === id));
    await assert.rejects(other.sandbox("conv-close").run({ command: "true" }), (e: unknown) => e instanceof CodepodError);
  });

  test("kill ends a spawned command; wait says 128 + 9; an aborted run rejects", async () => {
    const p = await sb.spawn({ command: "echo started; sleep 600" });
    const reader = p.stdout.getReader();
    assert.equal(new TextDecoder().decode((await reader.read()).value), "started\n");
    await p.kill();
    await p.kill();
    assert.deepEqual(await p.wait(), { exitCode: 137 });
    assert.equal((await p.result).signal, "SIGKILL");
    const ac = new AbortController();
    const running = sb.run({ command: "sleep 600", abortSignal: ac.signal });
    setTimeout(() => ac.abort(new Error("user stopped it")), 50);
    await assert.rejects(running, /user stopped it/);
  });
});
