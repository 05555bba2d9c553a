// Mistakes a backend makes are reported where it makes them: a policy typo
// throws from codeModeTool()/run() (not an INVALID_REQUEST shown to the
// model), a codepod that is not there is UNAVAILABLE with the system's code,
// and codepod's own log lines go to a logger (by default only warnings).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import net from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { Codepod, CodepodConnectError } from "@codepod/client";
import { codeModeTool } from "@codepod/client/ai";
import { BIN, open, tempDir, type Fixture } from "./helpers.ts";

const here = dirname(fileURLToPath(import.meta.url));
const conv = (t: string) => `sdk-ts-opts-${t}-${process.pid}`;
const tools = { ping: { inputSchema: { type: "object" }, execute: async () => "pong" } };

describe("policy keys are checked where they are passed", () => {
  let fx: Fixture;
  before(async () => { fx = await open("stdio"); });
  after(async () => { await fx.close(); });

  test("a misspelt key throws from codeModeTool(), naming it and the right spelling", async () => {
    const sent = fx.log.seen.length;
    await assert.rejects(
      codeModeTool({ codepod: fx.codepod, conversation: conv("typo"), tools, executionPolicy: { timeoutMS: 5000 } as never }),
      (e: Error) => e instanceof TypeError && /policy\.timeoutMS is not a policy field \(did you mean timeoutMs\?\)/.test(e.message));
    assert.equal(fx.log.seen.length, sent, "nothing was sent to codepod");
  });

  test("run() throws before sending for an unknown key or a value codepod refuses", async () => {
    const sent = fx.log.seen.length;
    await assert.rejects(fx.codepod.run({ conversation: conv("run"), js: "return 1", policy: { nope: 1 } as never }),
      /run\(\): policy\.nope is not a policy field \(known: timeoutMs, /);
    await assert.rejects(fx.codepod.run({ conversation: conv("run"), js: "return 1", policy: { timeoutMs: 0 } }),
      /policy\.timeoutMs must be a positive integer/);
    await assert.rejects(fx.codepod.run({ conversation: conv("run"), js: "return 1", policy: { maxMemoryMb: 1.5 } }),
      /policy\.maxMemoryMb must be a positive integer/);
    assert.equal(fx.log.seen.length, sent, "nothing was sent to codepod");
  });

  test("`policy` is the name on codeModeTool; `executionPolicy` still works; both at once throws", async () => {
    const a = await codeModeTool({ codepod: fx.codepod, conversation: conv("p"), tools, policy: { timeoutMs: 2000 } });
    const b = await codeModeTool({ codepod: fx.codepod, conversation: conv("p"), tools, executionPolicy: { timeoutMs: 2000 } });
    assert.match(String(a.description), /Limits: 2 s per program/);
    assert.equal(String(a.description), String(b.description));
    const out = await a.execute!({ reason: "r", js: "await new Promise((r) => setTimeout(r, 60000));" },
      { toolCallId: "t", messages: [] } as never);
    assert.equal((out as { error: { code: string } }).error.code, "TIMEOUT", "the policy reached the run");
    await assert.rejects(codeModeTool({ codepod: fx.codepod, conversation: conv("p"), tools,
      policy: { timeoutMs: 1000 }, executionPolicy: { timeoutMs: 2000 } }), /not both/);
  });
});

describe("connection errors are UNAVAILABLE with the system's code", () => {
  test("spawn of a command that does not exist: ENOENT", async () => {
    await assert.rejects(Codepod.spawn({ command: join(tempDir("nocmd"), "codepod") }), (e: unknown) => {
      assert.ok(e instanceof CodepodConnectError);
      assert.equal(e.code, "UNAVAILABLE");
      assert.equal(e.causeCode, "ENOENT");
      assert.match(e.message, /cannot start .*ENOENT/);
      return true;
    });
  });

  test("connect to a port nothing listens on: ECONNREFUSED", async () => {
    const port = await new Promise<number>((res) => {
      const s = net.createServer().listen(0, "127.0.0.1", () => {
        const p = (s.address() as net.AddressInfo).port;
        s.close(() => res(p));
      });
    });
    await assert.rejects(Codepod.connect({ url: `http://127.0.0.1:${port}`, token: "t" }), (e: unknown) => {
      assert.ok(e instanceof CodepodConnectError);
      assert.equal(e.code, "UNAVAILABLE");
      assert.equal(e.causeCode, "ECONNREFUSED");
      return true;
    });
  });
});

describe("spawn: codepod's stderr goes to a logger", () => {
  const args = (dir: string) => ["serve", "--stdio", "--no-isolation", "--log-level", "debug", "--state-dir", join(dir, "state")];

  test("every line, parsed, to the method of its level", async () => {
    const got: Array<{ level: string; rec: unknown }> = [];
    const rec = (level: string) => (r: unknown) => { got.push({ level, rec: r }); };
    const cp = await Codepod.spawn({
      command: BIN, args: args(tempDir("logger")),
      logger: { debug: rec("debug"), info: rec("info"), warn: rec("warn"), error: rec("error") },
    });
    assert.equal((await cp.run({ conversation: conv("log"), js: "return 1" })).result, 1);
    await cp.close();
    const events = (level: string) => got.filter((g) => g.level === level).map((g) => (g.rec as { event: string }).event);
    assert.ok(events("warn").includes("local.no_isolation"), JSON.stringify(got.slice(0, 5)));
    assert.ok(events("info").includes("serve.start"));
    assert.ok(events("debug").length > 0);
    assert.ok(got.every((g) => (g.rec as { level: string }).level === g.level));
  });

  test("by default only warnings and errors reach the application's stderr", async () => {
    const dir = tempDir("quiet");
    const script = `
      import { Codepod } from "@codepod/client";
      const cp = await Codepod.spawn({ command: ${JSON.stringify(BIN)}, args: ${JSON.stringify(args(dir))} });
      const o = await cp.run({ conversation: "quiet", js: "return 1" });
      await cp.close();
      console.log(JSON.stringify(o.result));`;
    const { stdout, stderr } = await new Promise<{ stdout: string; stderr: string }>((res, rej) => {
      execFile(process.execPath, ["--input-type=module", "-e", script], { cwd: join(here, "..") },
        (err, out, errOut) => (err ? rej(new Error(`${err.message}\n${errOut}`)) : res({ stdout: out, stderr: errOut })));
    });
    assert.equal(stdout.trim(), "1");
    assert.match(stderr, /"event":"local\.no_isolation"/);
    assert.doesNotMatch(stderr, /"level":"(info|debug)"/);
  });
});
