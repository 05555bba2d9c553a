// Seeded random and mutated input for the two stream readers that run in
// Node: the supervisor's scan of a runner's stdin and stdout
// (k8s/backend/frame_scan.js) and the runner's reading of its stdin
// (runner/stdin_lines.js). Each part is loaded as the build inserts it:
// frame_scan.js after the built frame kinds (build/gen/frame_kinds.js, or
// CODEPOD_GEN's), stdin_lines.js beside the runner's private references.
// Every case is fed whole and in random pieces; what comes out is held to a
// model of the grammar written here from runner/frame.h and
// runner/PROTOCOL.md, and no exception may escape.
//
// The cases are the same on every run (CODEPOD_SCAN_SEED picks others;
// CODEPOD_SCAN_CASES how many of each kind). A failure names its seed and
// case, and prints the input.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const GEN = process.env.CODEPOD_GEN || path.join(ROOT, 'build/gen');
const SEED = Number(process.env.CODEPOD_SCAN_SEED || 0x5eed);
const CASES = Number(process.env.CODEPOD_SCAN_CASES || 1500);
const BUDGET_MS = 60000; // all of one kind; the cases take ~1 s on the test VM

// ---- the parts, as the build puts them into their programs ----------------

const KINDS_JS = readFileSync(path.join(GEN, 'frame_kinds.js'), 'utf8');
function part(file, before, names, refs) {
  const src = before + (file ? readFileSync(path.join(ROOT, file), 'utf8') : '');
  // eslint-disable-next-line no-new-func
  return new Function(...Object.keys(refs), "'use strict';\n" + src + '\nreturn { ' + names.join(', ') + ' };')(
    ...Object.values(refs));
}
const { FRAME_KINDS, FINAL_KINDS } = part(null, KINDS_JS, ['FRAME_KINDS', 'FINAL_KINDS'], {});
const scan = part('k8s/backend/frame_scan.js', KINDS_JS, ['newScan', 'watchIn', 'watchOut'], { Buffer });
const uncurry = (f) => Function.prototype.call.bind(f);
const lines = part('runner/stdin_lines.js', '', ['lineReader', 'readLine'], {
  bufIndexOf: uncurry(Buffer.prototype.indexOf),
  subarray: uncurry(Uint8Array.prototype.subarray),
  bufConcat: Buffer.concat,
  bufToString: uncurry(Buffer.prototype.toString),
  parse: JSON.parse,
});

// ---- seeded randomness --------------------------------------------------------

function rng(seed) { // mulberry32
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const r = {
    next,
    int: (n) => Math.floor(next() * n),
    pick: (xs) => xs[Math.floor(next() * xs.length)],
    chance: (p) => next() < p,
    bytes: (n) => { const b = Buffer.alloc(n); for (let i = 0; i < n; i++) b[i] = r.int(256); return b; },
    hex: (n) => { let s = ''; for (let i = 0; i < n; i++) s += '0123456789abcdef'[r.int(16)]; return s; },
    text: (n) => { // bytes that matter to these grammars, often
      const b = Buffer.alloc(n);
      for (let i = 0; i < n; i++) b[i] = r.chance(0.3) ? r.pick([0x1e, 10, 0x20, 0x30 + r.int(10), 0x7b, 0x22]) : r.int(256);
      return b;
    },
  };
  return r;
}

// Bit flips, bytes inserted, deleted, repeated, a piece moved: of a stream
// that was well formed, so most of it still is.
function mutate(r, buf) {
  let b = Buffer.from(buf);
  for (let n = 1 + r.int(4); n > 0; n--) {
    const at = b.length ? r.int(b.length) : 0;
    switch (r.int(6)) {
      case 0: if (b.length) b[at] ^= 1 << r.int(8); break;
      case 1: b = Buffer.concat([b.subarray(0, at), r.text(1 + r.int(4)), b.subarray(at)]); break;
      case 2: b = Buffer.concat([b.subarray(0, at), b.subarray(Math.min(b.length, at + 1 + r.int(8)))]); break;
      case 3: b = Buffer.concat([b.subarray(0, at), b.subarray(at, at + 1 + r.int(16)), b.subarray(at)]); break;
      case 4: b = b.subarray(0, at); break;
      default: {
        const from = r.int(b.length + 1), len = r.int(32);
        b = Buffer.concat([b.subarray(0, at), b.subarray(from, from + len), b.subarray(at)]);
      }
    }
  }
  return b;
}

// The stream cut as a pipe might: whole, byte by byte, or at random.
function pieces(r, buf) {
  const how = r.int(4);
  if (how === 0 || buf.length === 0) return [buf];
  const out = [];
  for (let i = 0; i < buf.length;) {
    const n = how === 1 ? 1 : how === 2 ? 1 + r.int(8) : 1 + r.int(200);
    out.push(buf.subarray(i, i + n));
    i += n;
  }
  return out;
}

function cases(name, fn) {
  test(name, { timeout: BUDGET_MS * 2 }, () => {
    const r = rng(SEED ^ [...name].reduce((h, c) => Math.imul(h, 31) + c.charCodeAt(0) | 0, 7));
    const t0 = Date.now();
    for (let i = 0; i < CASES; i++) {
      const ctx = { input: null };
      try {
        fn(r, ctx, i);
      } catch (e) {
        const shown = Buffer.isBuffer(ctx.input) ? JSON.stringify(ctx.input.toString('latin1')) : String(ctx.input);
        e.message = `seed ${SEED}, case ${i}: ${e.message}\ninput: ${shown.slice(0, 4000)}`;
        throw e;
      }
      assert.ok(Date.now() - t0 < BUDGET_MS, `over ${BUDGET_MS} ms after ${i} cases: a reader got slow`);
    }
  });
}

// ---- the runner's frames (runner/frame.h), a model --------------------------

const MAX_LEN = 1 << 30; // a header announcing more fails the execution in codepod
const FINAL = new Set(FINAL_KINDS);

// A header at d[j] (0x1E), read as frame.h reads it: its length and the
// frame's, 'bad', or 'more' (the stream ends inside what could be one).
function header(d, j, nonce) {
  const want = '\x1ecp1 ' + nonce + ' ';
  const end = Math.min(d.length, j + 64);
  let i = j;
  for (let k = 0; k < want.length; k++, i++) {
    if (i >= end) return end - j >= 64 ? 'bad' : 'more';
    if (d[i] !== want.charCodeAt(k)) return 'bad';
  }
  if (i >= end) return 'more';
  const kind = String.fromCharCode(d[i++]);
  if (!FRAME_KINDS.includes(kind)) return 'bad';
  if (i >= end) return 'more';
  if (d[i++] !== 0x20) return 'bad';
  let digits = '';
  for (;; i++) {
    if (i >= end) return end - j >= 64 ? 'bad' : 'more';
    if (d[i] === 10) break;
    if (d[i] < 0x30 || d[i] > 0x39 || digits.length >= 20) return 'bad';
    digits += String.fromCharCode(d[i]);
  }
  if (!digits) return 'bad';
  return { kind, hlen: i + 1 - j, len: Number(BigInt(digits) > BigInt(MAX_LEN) ? MAX_LEN + 1 : digits) };
}

// Where the first final frame ends (the offset just past its payload), -1
// when none does within @d, or 'fail' when a header announces more than
// codepod takes: the execution fails there (or, past 64 bits, frame.h
// reads the header as raw output; no runner writes one), and the scan owes
// nothing after it.
function finalEnd(d, nonce) {
  for (let i = 0; i < d.length;) {
    const j = d.indexOf(0x1e, i);
    if (j < 0) return -1;
    const h = header(d, j, nonce);
    if (h === 'bad') { i = j + 1; continue; }
    if (h === 'more') return -1;
    if (h.len > MAX_LEN) return 'fail';
    const end = j + h.hlen + h.len;
    if (FINAL.has(h.kind)) return end <= d.length ? end : -1;
    i = end;
  }
  return -1;
}

// ---- the supervisor's scan ----------------------------------------------------

const HELLO_RE = /^\{"k":"hello","nonce":"([0-9a-f]{32})"/;
const WARM = '{"k":"warm","ts":true}\n'; // what codepod writes (runner/prestart.c)

// The nonce the scan must find on stdin @d: "<len>\n", the runner source,
// any number of short warm lines, then the hello, read off its first 64
// bytes (or its whole line, when shorter). null: none to be found.
function helloNonce(d) {
  let p = 0, digits = '';
  for (; p < d.length && d[p] !== 10; p++) {
    if (d[p] < 0x30 || d[p] > 0x39 || digits.length >= 12) return null;
    digits += String.fromCharCode(d[p]);
  }
  if (p >= d.length) return null;
  p += 1 + Number(digits);
  for (;;) {
    if (p >= d.length) return null;
    const nl = d.indexOf(10, p);
    const short = nl >= 0 && nl - p < 64;
    if (!short && d.length - p < 64) return null; // not decided yet
    const text = d.toString('latin1', p, short ? nl : p + 64);
    const m = HELLO_RE.exec(text);
    if (m) return m[1];
    let warm = false;
    try { const v = JSON.parse(text); warm = v !== null && typeof v === 'object' && v.k === 'warm'; } catch (_) {}
    if (!short || !warm) return null;
    p = nl + 1;
  }
}

function stdinOf(r, nonce) {
  const src = r.chance(0.2) ? r.text(r.int(300)) : Buffer.from('(function(){ /* runner */ })\n'.repeat(r.int(20)));
  const parts = [Buffer.from(src.length + '\n'), src];
  for (let n = r.chance(0.4) ? 1 + r.int(2) : 0; n > 0; n--)
    parts.push(Buffer.from(r.chance(0.7) ? WARM : r.pick(['{"k":"warm"}\n', '{"ts":false,"k":"warm"}\n', '{"k":"warm",\n'])));
  const hello = { k: 'hello', nonce, tag: r.hex(32), src: r.chance(0.5) ? 'return 1' : 'x'.repeat(r.int(100)),
                  file: 'script.ts', tools: [], lim: {} };
  parts.push(Buffer.from(JSON.stringify(hello) + '\n'));
  for (let n = r.int(3); n > 0; n--) parts.push(Buffer.from(JSON.stringify({ k: 'res', c: 1 + r.int(9), o: r.int(99) }) + '\n'));
  return Buffer.concat(parts);
}

cases('supervisor: the hello nonce is found on stdin, however cut, or not at all', (r, ctx) => {
  const nonce = r.hex(32);
  let d = stdinOf(r, nonce);
  if (r.chance(0.5)) d = mutate(r, d);
  ctx.input = d;
  const want = helloNonce(d);
  const s = scan.newScan();
  for (const b of pieces(r, d)) if (s.inPhase < 3) scan.watchIn(s, b);
  assert.ok([0, 1, 2, 3].includes(s.inPhase), 'phase ' + s.inPhase);
  assert.equal(s.head === null ? null : s.head.toString('latin1'), want === null ? null : '\x1ecp1 ' + want + ' ');
  if (want !== null) assert.equal(s.inPhase, 3, 'found, and done reading');
});

// Stdout as a runner and its program write it: frames with the nonce,
// program output between them (some of it looking like frames), forged
// headers, the final frame, whatever comes after.
function stdoutOf(r, nonce) {
  const parts = [];
  const frameOf = (kind, payload, digits) => {
    const len = digits !== undefined ? digits : String(payload.length);
    return Buffer.concat([Buffer.from('\x1ecp1 ' + nonce + ' ' + kind + ' ' + len + '\n', 'latin1'), payload]);
  };
  const payload = () => (r.chance(0.3) ? Buffer.concat([r.text(r.int(20)), frameOf(r.pick(FINAL_KINDS), r.text(r.int(5))), r.text(r.int(20))])
    : r.text(r.int(r.chance(0.1) ? 3000 : 60)));
  parts.push(frameOf('Y', Buffer.from('{"pid":1,"start":2,"node":"v22.13.0"}')));
  for (let n = r.int(8); n > 0; n--) {
    switch (r.int(7)) {
      case 0: parts.push(r.text(r.int(100))); break; // raw output
      case 1: parts.push(frameOf(r.pick('OECX'), payload())); break;
      case 2: parts.push(Buffer.from('\x1ecp1 ' + r.hex(32) + ' R 0\n', 'latin1')); break; // another nonce
      case 3: { // a header cut or spoilt somewhere
        const h = frameOf(r.pick(FRAME_KINDS), Buffer.alloc(0), String(r.int(50)));
        const at = 1 + r.int(h.length - 1);
        parts.push(h.subarray(0, at), r.chance(0.5) ? Buffer.from([r.int(256)]) : Buffer.alloc(0));
        break;
      }
      case 4: { // leading zeros, up to the 20 digits frame.h takes, and past them
        const p = r.text(r.int(10));
        const digits = '0'.repeat(r.int(24)) + (p.length || '');
        parts.push(frameOf(r.pick(r.chance(0.5) ? FINAL_KINDS : 'OE'), p, digits || '0'));
        break;
      }
      case 5: parts.push(Buffer.from('\x1e'.repeat(1 + r.int(3)))); break;
      default: parts.push(frameOf('C', Buffer.from(JSON.stringify({ c: 1, t: 'x', i: r.int(9) })))); break;
    }
  }
  if (r.chance(0.8)) parts.push(frameOf(r.pick(FINAL_KINDS), r.chance(0.3) ? Buffer.alloc(0) : payload()));
  if (r.chance(0.5)) parts.push(r.text(r.int(80)), frameOf('R', Buffer.from('2')));
  return Buffer.concat(parts);
}

cases('supervisor: a final frame is seen once, where frame.h sees it end, however cut', (r, ctx) => {
  const nonce = r.hex(32);
  let d = stdoutOf(r, nonce);
  if (r.chance(0.4)) d = mutate(r, d);
  ctx.input = d;
  const want = finalEnd(d, nonce);
  const s = scan.newScan();
  scan.watchIn(s, Buffer.from('0\n' + JSON.stringify({ k: 'hello', nonce, src: '' }) + '\n'));
  assert.ok(s.head, 'the hello gave the nonce');
  let at = 0, seen = -1;
  for (const b of pieces(r, d)) {
    const before = at;
    at += b.length;
    if (scan.watchOut(s, b)) {
      assert.equal(seen, -1, 'a final frame seen twice');
      seen = at;
      if (want !== 'fail') assert.ok(want > before && want <= at, `seen in the piece ${before}..${at}, ends at ${want}`);
    }
  }
  if (want !== 'fail') assert.equal(seen === -1, want === -1, `final frame ends at ${want}, seen at ${seen}`);
});

cases('supervisor: stdout before or without a hello is never taken for frames', (r, ctx) => {
  const d = r.chance(0.5) ? stdoutOf(r, r.hex(32)) : r.text(r.int(400));
  ctx.input = d;
  const s = scan.newScan();
  scan.watchIn(s, Buffer.from('3\nabc{"k":"nothello"}\n'));
  for (const b of pieces(r, d)) assert.equal(scan.watchOut(s, b), false);
});

// ---- the runner's stdin ---------------------------------------------------------

// What one line must be read as (PROTOCOL.md), from its text alone.
function lineModel(buf, started) {
  if (buf.length === 0) return null;
  let v;
  try { v = JSON.parse(buf.toString('utf8')); } catch (_) { v = undefined; }
  const k = v !== null && typeof v === 'object' ? v.k : undefined;
  if (started && k === 'chunk') return Number.isInteger(v.n) && v.n >= 0 && v.n <= 262144 ? k : null;
  if (started) return k === 'res' || k === 'err' || k === 'in' || k === 'ack' ? k : null;
  if (k === 'warm') return k;
  if (k === 'hello' && typeof v.nonce === 'string' && /^[0-9a-f]{32}$/.test(v.nonce)) return k;
  return 'refuse';
}

function stdinLines(r) {
  const out = [];
  const nonce = r.chance(0.9) ? r.hex(32) : r.pick(['', r.hex(31), r.hex(33), r.hex(32).toUpperCase(), 'x'.repeat(200), 7]);
  if (r.chance(0.3)) out.push(WARM.trimEnd());
  if (r.chance(0.1)) out.push(r.pick(['', 'garbage', 'null', '[]', '{"k":"res","c":1,"o":1}', '"hello"']));
  out.push(JSON.stringify({ k: 'hello', nonce, tag: r.hex(32), src: 'return 1', tools: [{ n: 'x', on: true }], lim: {} }));
  for (let n = r.int(10); n > 0; n--) {
    out.push(r.pick([
      () => JSON.stringify({ k: 'res', c: 1 + r.int(5), o: { a: r.int(9), s: 'é\u2028' } }),
      () => JSON.stringify({ k: 'err', c: 1 + r.int(5), m: 'no' }),
      () => JSON.stringify({ k: 'hello', nonce: r.hex(32) }),
      () => '', () => 'not json', () => 'null', () => '{"k":"res"', () => '{"__proto__":{"k":"res"}}',
      () => r.text(r.int(40)).toString('latin1').replace(/\n/g, ''),
    ])());
  }
  return out.join('\n') + (r.chance(0.8) ? '\n' : '');
}

cases('runner: stdin lines come out whole and in order, however cut', (r, ctx) => {
  let d = Buffer.from(stdinLines(r));
  if (r.chance(0.5)) d = mutate(r, d);
  ctx.input = d;
  const got = [];
  const onData = lines.lineReader((b) => { got.push(Buffer.from(b)); });
  for (const b of pieces(r, d)) onData(b);
  const want = d.toString('latin1').split('\n').slice(0, -1);
  assert.deepEqual(got.map((b) => b.toString('latin1')), want);
});

cases('runner: a file chunk\'s bytes after its line come out whole, newlines and all', (r, ctx) => {
  // lines and file chunks (a line saying n, then n bytes of any value)
  const want = [];
  const bufs = [];
  for (let i = r.int(8); i >= 0; i--) {
    if (r.chance(0.5)) {
      const t = JSON.stringify({ k: 'res', c: 1 + r.int(5), o: r.int(99) });
      want.push(['line', t]);
      bufs.push(Buffer.from(t + '\n'));
    } else {
      const data = r.chance(0.2) ? Buffer.alloc(r.int(3000), 10) : r.bytes(r.int(3000));
      const t = JSON.stringify({ k: 'chunk', n: data.length, last: r.chance(0.2) });
      want.push(['line', t]);
      if (data.length) want.push(['bytes', data.toString('latin1')]);
      bufs.push(Buffer.from(t + '\n'), data);
    }
  }
  const d = Buffer.concat(bufs);
  ctx.input = d;
  for (const chunks of [pieces(r, d), [d]]) {
    const got = [];
    const onData = lines.lineReader((b) => {
      got.push(['line', b.toString('latin1')]);
      const l = lines.readLine(b, true);
      return l && l.k === 'chunk' ? l.msg.n : 0;
    }, (bs) => got.push(['bytes', Buffer.concat(bs).toString('latin1')]));
    for (const b of chunks) onData(b);
    assert.deepEqual(got, want);
  }
});

cases('runner: each line gets what PROTOCOL.md says, before and after the hello', (r, ctx) => {
  let d = Buffer.from(stdinLines(r));
  if (r.chance(0.5)) d = mutate(r, d);
  ctx.input = d;
  // The runner's own loop (runner.js line()): the hello starts it, a
  // refusal ends it.
  const run = (chunks) => {
    const said = [];
    let started = false, over = false;
    const onData = lines.lineReader((b) => {
      if (over) return;
      const l = lines.readLine(b, started);
      if (l === null) return;
      assert.ok(['warm', 'hello', 'refuse', 'res', 'err', 'in', 'ack', 'chunk'].includes(l.k), 'read as ' + l.k);
      assert.equal(l.k === 'refuse', !('msg' in l) || l.msg === undefined);
      said.push(l.k);
      if (l.k === 'refuse') over = true;
      if (l.k === 'hello') started = true;
    });
    for (const b of chunks) onData(b);
    return said;
  };
  const want = [];
  let started = false;
  for (const text of d.toString('latin1').split('\n').slice(0, -1)) {
    const k = lineModel(Buffer.from(text, 'latin1'), started);
    if (k === null) continue;
    want.push(k);
    if (k === 'refuse') break;
    if (k === 'hello') started = true;
  }
  assert.deepEqual(run(pieces(r, d)), want);
  assert.deepEqual(run([d]), want);
});

cases('runner: any bytes as a line are read without an exception', (r, ctx) => {
  const b = r.chance(0.5) ? r.bytes(r.int(100)) : mutate(r, Buffer.from(JSON.stringify({ k: r.pick(['hello', 'res', 'err', 'warm']), nonce: r.hex(32), c: 1, o: [1, { x: null }] })));
  ctx.input = b;
  for (const started of [false, true]) {
    const l = lines.readLine(b, started);
    assert.equal(l === null ? null : l.k, lineModel(b, started));
  }
});
