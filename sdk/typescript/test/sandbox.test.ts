// codepod.sandbox(conversation) against a real `codepod serve` (this tree's
// build/codepod), on both transports, every message checked against
// broker/schema: commands beside programs, the workspace's files both ways,
// and bash-tool driving it. Each part runs once the server has its messages.
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { createBashTool } from "bash-tool";
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Codepod, CodepodError, MAX_UNREAD_BYTES } from "@codepod/client";
import { HAVE_ARCHIVES, HAVE_COMMANDS, HAVE_FILES, HAVE_SCHEMAS, open, startServer, tempDir, TRANSPORTS, type Fixture } from "./helpers.ts";

const conv = (t: string) => `sdk-ts-sb-${t}-${process.pid}-${Math.random().toString(16).slice(2, 8)}`;
const isCode = (code: string) => (e: unknown) => e instanceof CodepodError && e.code === code;

for (const transport of TRANSPORTS) {
  describe(`the sandbox over ${transport}`, () => {
    let fx: Fixture;
    let cp: Codepod;
    before(async () => {
      fx = await open(transport);
      cp = fx.codepod;
    });
    after(async () => {
      await fx.close();
      if (HAVE_SCHEMAS) assert.deepEqual(fx.log.bad, [], "every message matches its JSON Schema");
    });

    test("run: exit code and both streams; non-zero is no error; cwd and env", { skip: !HAVE_COMMANDS }, async () => {
      const sb = cp.sandbox(conv("run"));
      const r = await sb.run({ command: "echo out; echo err >&2; exit 3" });
      assert.deepEqual(r, { exitCode: 3, stdout: "out\n", stderr: "err\n" });
      await sb.run({ command: "mkdir -p sub/dir" });
      const w = await sb.run({ command: 'pwd; echo "$GREETING"', workingDirectory: "/workspace/sub/dir", env: { GREETING: "hi there" } });
      const [pwd, greeting] = w.stdout.split("\n");
      assert.equal(pwd, "/workspace/sub/dir"); // the server isolates programs
      assert.equal(greeting, "hi there");
      const argv = await (await sb.command({ argv: ["printf", "%s|", "a b", "$HOME"] })).result;
      assert.equal(argv.status, "ok");
      assert.equal(argv.stdout, "a b|$HOME|");
    });

    test("a program and a command of one conversation see the same files", { skip: !HAVE_COMMANDS }, async () => {
      const c = conv("share");
      const sb = cp.sandbox(c);
      const token = randomBytes(8).toString("hex");
      const o = await cp.run({ conversation: c, js: `require('node:fs').writeFileSync('from-program.txt', '${token}'); return 1;` });
      assert.equal(o.status, "succeeded", JSON.stringify(o.error));
      const r = await sb.executeCommand("cat from-program.txt; printf back > from-command.txt");
      assert.equal(r.stdout, token);
      const back = await cp.run({ conversation: c, js: "return require('node:fs').readFileSync('from-command.txt', 'utf8');" });
      assert.equal(back.result, "back");
      assert.notEqual((await cp.sandbox(conv("other")).run({ command: "cat from-program.txt" })).exitCode, 0);
    });

    test("spawn: stdin written, output streamed as it comes, wait gives the exit code", { skip: !HAVE_COMMANDS }, async () => {
      const sb = cp.sandbox(conv("spawn"));
      const p = await sb.spawn({ command: 'while read l; do echo "got $l"; done; echo bye >&2', stdin: true });
      const w = p.stdin.getWriter();
      await w.write(new TextEncoder().encode("one\n"));
      const reader = p.stdout.getReader();
      // The first line comes back before stdin ends: streamed, not at the end.
      const first = await reader.read();
      assert.equal(new TextDecoder().decode(first.value), "got one\n");
      await w.write(new TextEncoder().encode("two\n"));
      await w.close();
      let rest = "";
      for (let c = await reader.read(); !c.done; c = await reader.read()) rest += new TextDecoder().decode(c.value);
      assert.equal(rest, "got two\n");
      assert.equal(await new Response(p.stderr).text(), "bye\n");
      assert.deepEqual(await p.wait(), { exitCode: 0 });
      const res = await p.result;
      assert.equal(res.stdout, "got one\ngot two\n");
    });

    test("kill stops a spawned command and what it started; a signal is 128 + N", { skip: !HAVE_COMMANDS }, async () => {
      const sb = cp.sandbox(conv("kill"));
      const p = await sb.spawn({ command: "echo started; sleep 600 & wait" });
      const reader = p.stdout.getReader();
      assert.equal(new TextDecoder().decode((await reader.read()).value), "started\n");
      await p.kill();
      await p.kill();
      assert.deepEqual(await p.wait(), { exitCode: 137 });
      const r = await p.result;
      assert.equal(r.status, "error");
      assert.equal(r.error!.code, "CANCELLED");
      const term = await sb.run({ command: "kill -TERM $$; sleep 5" });
      assert.equal(term.exitCode, 143);
    });

    test("output nobody reads is kept up to a bound, the rest counted as dropped", { skip: !HAVE_COMMANDS }, async () => {
      const sb = cp.sandbox(conv("unread"));
      let seen = 0;
      const bound = 64 * 1024;
      // 1 MiB on stdout over a second or two (codepod streams at most 64 KiB
      // per 100 ms); stdout is read only after the command ended.
      const cmd = await sb.command({
        command: "for i in $(seq 32); do head -c 32768 /dev/zero; sleep 0.05; done", stream: true,
        maxUnreadBytes: bound,
        onOutput: (which, data) => { if (which === "stdout") seen += data.length; },
      });
      assert.equal((await cmd.result).exitCode, 0);
      let kept = 0;
      for await (const c of cmd.stdout) kept += c.length;
      assert.ok(seen > 2 * bound, `codepod streamed ${seen} bytes`);
      assert.ok(kept <= bound, `${kept} bytes waited unread`);
      assert.equal(kept + cmd.dropped.stdout, seen);
      assert.equal(cmd.dropped.stderr, 0);
      assert.equal(MAX_UNREAD_BYTES, 8 * 1024 * 1024); // the default
    });

    test("past its deadline a run rejects TIMEOUT; an aborted one rejects with the reason", { skip: !HAVE_COMMANDS }, async () => {
      const sb = cp.sandbox(conv("deadline"), { policy: { timeoutMs: 1000 } });
      await assert.rejects(sb.run({ command: "sleep 600" }), isCode("TIMEOUT"));
      const ac = new AbortController();
      const running = sb.run({ command: "echo go; sleep 600", abortSignal: ac.signal });
      setTimeout(() => ac.abort(new Error("the user stopped it")), 200);
      await assert.rejects(running, /the user stopped it/);
    });

    test("bash-tool's createBashTool runs its commands in the conversation's sandbox", { skip: !HAVE_COMMANDS }, async () => {
      const c = conv("bashtool");
      const sb = cp.sandbox(c);
      const { tools } = await createBashTool({ sandbox: sb });
      const out = await tools.bash.execute!({ command: "pwd; echo made > made.txt; ls" }, { toolCallId: "b1", messages: [] } as never) as
        { stdout: string; stderr: string; exitCode: number };
      assert.equal(out.exitCode, 0, out.stderr);
      // /workspace inside the sandbox (the server here isolates programs; without it, see below).
      assert.equal(out.stdout, "/workspace\nmade.txt\n");
      assert.equal(await sb.workspaceDir(), "/workspace");
      const o = await cp.run({ conversation: c, js: "return require('node:fs').readFileSync('made.txt', 'utf8');" });
      assert.equal(o.result, "made\n");
    });

    test("files: write, read back with etag and ranges, text lines, stat, list, delete", { skip: !HAVE_FILES }, async () => {
      const sb = cp.sandbox(conv("files"));
      const body = randomBytes(1024 * 1024 + 3);
      const meta = await sb.write("/workspace/data/blob.bin", body);
      assert.equal(meta.size, body.length);
      assert.equal(meta.etag, createHash("sha256").update(body).digest("hex"));
      assert.deepEqual(Buffer.from((await sb.readBinaryFile({ path: "data/blob.bin" }))!), body);
      const ranged = await sb.files.read("data/blob.bin", { offset: 5, length: 10 });
      // The whole file's size and etag come before its bytes.
      assert.deepEqual([ranged.size, ranged.etag], [body.length, meta.etag]);
      const parts: Buffer[] = [];
      for await (const p of ranged.stream) parts.push(Buffer.from(p));
      assert.deepEqual(Buffer.concat(parts), body.subarray(5, 15));
      await sb.writeTextFile({ path: "notes/lines.txt", content: "one\ntwo\nthree\n" });
      assert.equal(await sb.readTextFile({ path: "notes/lines.txt", startLine: 2, endLine: 2 }), "two\n");
      assert.equal(await sb.readFile("notes/lines.txt"), "one\ntwo\nthree\n");
      const st = await sb.stat({ path: "data/blob.bin" });
      assert.equal(st!.type, "file");
      assert.equal(st!.size, body.length);
      const root = await sb.listDirectory({ path: "/workspace" });
      assert.deepEqual(root!.map((e) => [e.name, e.type]), [["data", "directory"], ["notes", "directory"]]);
      assert.equal(await sb.deleteFile({ path: "notes/lines.txt" }), true);
      assert.equal(await sb.deleteFile({ path: "notes/lines.txt" }), false);
      assert.equal(await sb.readFile({ path: "notes/lines.txt" }), null);
      assert.equal(await sb.stat({ path: "nope" }), null);
      assert.equal(await sb.listDirectory({ path: "nope" }), null);
    });

    test("a read stream cancelled after its first chunk stops the read at codepod", { skip: !HAVE_FILES }, async () => {
      const sb = cp.sandbox(conv("cancel-read"));
      const chunk = 256 * 1024;
      const body = randomBytes(64 * chunk);
      await sb.write("big.bin", body);
      const opened = await sb.files.read("big.bin");
      const reader = opened.stream.getReader();
      const first = await reader.read();
      assert.deepEqual(Buffer.from(first.value!), body.subarray(0, first.value!.length));
      await reader.cancel();
      // codepod ends the read CANCELLED instead of sending the other chunks.
      await assert.rejects(opened.done, isCode("CANCELLED"));
      const id = fx.log.seen.find((s) => s.dir === "out" && s.msg.type === "file_read" && s.msg.path === "big.bin")!.msg.id;
      const mine = fx.log.seen.filter((s) => s.msg.id === id);
      assert.ok(mine.some((s) => s.dir === "out" && s.msg.type === "stop"), "a stop was sent");
      const chunks = mine.filter((s) => s.dir === "in" && s.msg.type === "file_chunk").length;
      assert.ok(chunks < 64 / 2, `${chunks} of 64 chunks were sent after the reader cancelled at the first`);
      assert.ok(!mine.some((s) => s.dir === "in" && s.msg.type === "file_result"), "the read did not finish");
      // The first line of an 8 MiB text file (readTextFile with endLine) stops the same way.
      await sb.writeTextFile({ path: "log.txt", content: "head\n" + "y\n".repeat(4 * 1024 * 1024) });
      assert.equal(await sb.readTextFile({ path: "log.txt", startLine: 1, endLine: 1 }), "head\n");
      const textId = fx.log.seen.find((s) => s.dir === "out" && s.msg.type === "file_read" && s.msg.path === "log.txt")!.msg.id;
      await waitFor(() => fx.log.seen.some((s) => s.dir === "in" && s.msg.id === textId && s.msg.type === "error"));
      const ends = fx.log.seen.filter((s) => s.dir === "in" && s.msg.id === textId && (s.msg.type === "error" || s.msg.type === "file_result"));
      assert.deepEqual(ends.map((s) => [s.msg.type, (s.msg.error as { code?: string } | undefined)?.code]), [["error", "CANCELLED"]]);
      // The session goes on: the whole file still reads back.
      assert.deepEqual(Buffer.from((await sb.readBinaryFile({ path: "big.bin" }))!), body);
    });

    test("a stale ifMatch is PRECONDITION_FAILED and the old file stays", { skip: !HAVE_FILES }, async () => {
      const sb = cp.sandbox(conv("ifmatch"));
      const first = await sb.write("f.txt", new TextEncoder().encode("v1"));
      await sb.write("f.txt", new TextEncoder().encode("v2"), { ifMatch: first.etag }).then(() => undefined);
      await assert.rejects(sb.write("f.txt", new TextEncoder().encode("v3"), { ifMatch: first.etag }), isCode("PRECONDITION_FAILED"));
      assert.equal(await sb.readFile("f.txt"), "v2");
    });

    test("files a program wrote are read through the sandbox, and the other way round", { skip: !HAVE_FILES }, async () => {
      const c = conv("both");
      const sb = cp.sandbox(c);
      await sb.writeTextFile({ path: "in/upload.csv", content: "a,b\n1,2\n3,4\n" });
      const o = await cp.run({
        conversation: c,
        js: `const fs = require('node:fs');
             const rows = fs.readFileSync('in/upload.csv', 'utf8').trim().split('\\n').slice(1);
             fs.mkdirSync('out', { recursive: true });
             fs.writeFileSync('out/sum.txt', String(rows.map((r) => r.split(',').map(Number)).reduce((s, [a, b]) => s + a + b, 0)));
             return rows.length;`,
      });
      assert.equal(o.result, 2, JSON.stringify(o.error));
      assert.equal(await sb.readTextFile({ path: "/workspace/out/sum.txt" }), "10");
    });

    test("a write abandoned half way (aborted, or its stream failed) leaves the old file", { skip: !HAVE_FILES }, async () => {
      const sb = cp.sandbox(conv("abandon"));
      await sb.writeTextFile({ path: "keep.txt", content: "old\n" });
      const ac = new AbortController();
      let sent = 0;
      const endless = new ReadableStream<Uint8Array>({
        pull(c) {
          sent++;
          if (sent === 3) ac.abort(new Error("the user cancelled the upload"));
          c.enqueue(new Uint8Array(256 * 1024).fill(65));
        },
      });
      await assert.rejects(sb.writeFile({ path: "keep.txt", content: endless, abortSignal: ac.signal }), /cancelled the upload/);
      const failing = new ReadableStream<Uint8Array>({
        start(c) { c.enqueue(new Uint8Array(300 * 1024)); },
        pull(c) { c.error(new Error("the upload's source broke")); },
      });
      await assert.rejects(sb.writeFile({ path: "keep.txt", content: failing }), /source broke/);
      assert.equal(await sb.readTextFile({ path: "keep.txt" }), "old\n");
      assert.deepEqual((await sb.listDirectory({ path: "." }))!.map((e) => e.name), ["keep.txt"]);
    });

    test("the workspace as a tar, down and up", { skip: !HAVE_ARCHIVES }, async () => {
      const sb = cp.sandbox(conv("tar"));
      await sb.writeTextFile({ path: "a.txt", content: "alpha\n" });
      await sb.writeTextFile({ path: "dir/b.txt", content: "beta\n" });
      const down = await sb.files.readArchive();
      const tar = Buffer.from(await new Response(down.stream).arrayBuffer());
      assert.equal((await down.done).size, tar.length);
      const dir = tempDir("tar");
      try {
        writeFileSync(join(dir, "down.tar"), tar);
        assert.deepEqual(execFileSync("tar", ["-tf", join(dir, "down.tar")], { encoding: "utf8" }).split("\n").filter(Boolean)
          .map((n) => n.replace(/\/$/, "")).sort(), ["a.txt", "dir", "dir/b.txt"]);
        mkdirSync(join(dir, "up", "new"), { recursive: true });
        writeFileSync(join(dir, "up", "a.txt"), "replaced\n");
        writeFileSync(join(dir, "up", "new", "c.txt"), "gamma\n");
        execFileSync("tar", ["-cf", join(dir, "up.tar"), "-C", join(dir, "up"), "a.txt", "new/c.txt"]);
        const { files } = await sb.files.writeArchive(readFileSync(join(dir, "up.tar")));
        assert.ok(files >= 2, String(files));
        assert.equal(await sb.readTextFile({ path: "a.txt" }), "replaced\n");
        assert.equal(await sb.readTextFile({ path: "new/c.txt" }), "gamma\n");
        assert.equal(await sb.readTextFile({ path: "dir/b.txt" }), "beta\n");
        // An entry that leaves the workspace is refused, and nothing lands outside it.
        mkdirSync(join(dir, "evil"));
        writeFileSync(join(dir, "evil", "x.txt"), "x");
        execFileSync("tar", ["-cf", join(dir, "evil.tar"), "-C", join(dir, "evil"), "--transform", "s,^,../,", "x.txt"]);
        await assert.rejects(sb.files.writeArchive(readFileSync(join(dir, "evil.tar"))), isCode("INVALID_REQUEST"));
        assert.equal(await sb.stat({ path: "x.txt" }), null);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    test("paths that leave the workspace are refused with a clear error", { skip: !HAVE_FILES }, async () => {
      const sb = cp.sandbox(conv("paths"));
      for (const p of ["../escape.txt", "a/../../escape.txt", "/etc/passwd"]) {
        await assert.rejects(sb.writeTextFile({ path: p, content: "x" }), isCode("INVALID_REQUEST"), p);
        await assert.rejects(sb.readTextFile({ path: p }), isCode("INVALID_REQUEST"), p);
      }
      await sb.run({ command: "ln -s /etc/passwd leak" }).catch(() => undefined);
      if (HAVE_COMMANDS) await assert.rejects(sb.readTextFile({ path: "leak" }), isCode("INVALID_REQUEST"));
    });
  });
}

describe("the sandbox over a WebSocket that drops", () => {
  test("a running command is re-attached after a reconnect; its output and result arrive", { skip: !HAVE_COMMANDS }, async () => {
    const fx = await open("ws", { proxy: true });
    try {
      const sb = fx.codepod.sandbox(conv("reattach"));
      const p = await sb.spawn({ command: "read l; echo \"got $l\"", stdin: true });
      const before = fx.proxy!.connections();
      fx.proxy!.drop();
      // The client reconnects on its own; the command waits on its stdin meanwhile.
      await waitFor(() => fx.proxy!.connections() > before);
      // Once the attach is answered, stdin reaches the same process again.
      await waitFor(() => fx.log.seen.some((s) => s.dir === "out" && s.msg.type === "attach"));
      await waitFor(() => fx.log.seen.filter((s) => s.dir === "in" && s.msg.type === "accepted").length >= 2);
      const w = p.stdin.getWriter();
      await w.write(new TextEncoder().encode("after\n"));
      await w.close();
      assert.deepEqual(await p.wait(), { exitCode: 0 });
      assert.equal((await p.result).stdout, "got after\n");
    } finally {
      await fx.close();
    }
  });

  test("a read in flight when the link drops rejects OUTCOME_UNKNOWN; the session goes on", { skip: !HAVE_FILES }, async () => {
    const fx = await open("ws", { proxy: true });
    try {
      const sb = fx.codepod.sandbox(conv("dropread"));
      await sb.write("big.bin", randomBytes(2 * 1024 * 1024));
      const s = await sb.readFile({ path: "big.bin" });
      const reader = s!.getReader();
      await reader.read();
      fx.proxy!.drop();
      await assert.rejects((async () => { for (;;) if ((await reader.read()).done) return; })(), isCode("OUTCOME_UNKNOWN"));
      await waitFor(async () => (await sb.stat({ path: "big.bin" }).catch(() => null)) !== null);
      assert.equal((await sb.stat({ path: "big.bin" }))!.size, 2 * 1024 * 1024);
    } finally {
      await fx.close();
    }
  });
});

/** Polls a condition with a deadline that only catches a hang. */
async function waitFor(cond: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error("timed out waiting");
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe("the sandbox of a server without isolation", () => {
  test("bash-tool's cd \"/workspace\" goes to the workspace's host path", { skip: !HAVE_COMMANDS }, async () => {
    const dir = tempDir("noiso");
    const srv = await startServer(dir, ["--no-isolation"]);
    const cp = await Codepod.connect({ url: srv.url, token: srv.token });
    try {
      const c = conv("noiso");
      const sb = cp.sandbox(c);
      const where = await sb.workspaceDir();
      assert.notEqual(where, "/workspace");
      assert.ok(where.startsWith(dir), where);
      const { tools } = await createBashTool({ sandbox: sb });
      const out = await tools.bash.execute!({ command: "pwd; echo made > made.txt" }, { toolCallId: "b1", messages: [] } as never) as
        { stdout: string; exitCode: number };
      assert.deepEqual([out.exitCode, out.stdout], [0, `${where}\n`]);
      const o = await cp.run({ conversation: c, js: "return require('node:fs').readFileSync('made.txt', 'utf8');" });
      assert.equal(o.result, "made\n");
    } finally {
      await cp.close();
      await srv.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
