// codepod runner: runs one model-written program and speaks runner/PROTOCOL.md
// on stdin/stdout. boot.js evaluates this file as one function expression and
// calls it with (require, leftover), leftover being stdin bytes read past it.
// What runs is build/gen/runner.js: this file with its `// @insert` line
// filled in at build time (scripts/gen-js.sh), so the frame kinds have one
// source, runner/frame_kinds.def.
(function codepodRunner(require, leftover) {
  'use strict';
  // @insert frame-kinds
  const fs = require('node:fs');
  const vm = require('node:vm');
  const path = require('node:path');
  const nodeModule = require('node:module');
  const { StringDecoder } = require('node:string_decoder');

  // Private references, taken before any program code runs, so a program that
  // monkeypatches globals cannot break or redirect the frames.
  const uncurry = (f) => Function.prototype.call.bind(f);
  const writeSync = fs.writeSync;
  const bufFrom = Buffer.from;
  const bufConcat = Buffer.concat;
  const bufAllocUnsafe = Buffer.allocUnsafe;
  const bufByteLength = Buffer.byteLength;
  const bufUtf8Write = uncurry(Buffer.prototype.utf8Write);
  const bufLatin1Write = uncurry(Buffer.prototype.latin1Write);
  const typedSet = uncurry(Uint8Array.prototype.set);
  const byteLength = Buffer.byteLength;
  const subarray = uncurry(Uint8Array.prototype.subarray);
  const bufIndexOf = uncurry(Buffer.prototype.indexOf);
  const bufToString = uncurry(Buffer.prototype.toString);
  const decWrite = uncurry(StringDecoder.prototype.write);
  const promiseThen = uncurry(Promise.prototype.then);
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const exit = process.exit.bind(process);
  const nextTick = process.nextTick;
  const sleepCell = new Int32Array(new SharedArrayBuffer(4));
  const atomicsWait = Atomics.wait;
  const readSync = fs.readSync;
  const fstatSync = fs.fstatSync;
  const openSync = fs.openSync;
  const closeSync = fs.closeSync;
  const setPriority = require('node:os').setPriority;
  const cpuUsage = process.cpuUsage.bind(process);
  const readdirSync = fs.readdirSync;
  const dateNow = Date.now;
  const setImmediateP = setImmediate;
  let stdin = null; // process.stdin, built at the end of this file
  let holdStdin = false; // a file operation waits for codepod's next line
  const NativePromise = Promise;

  // An explicit type argument list before a call or template: `f<T>(`.
  const JS_FILE = /\.[cm]?js$/;
  const GENERIC_CALL = /[\w$\])]\s*<[\w$\s,.\[\]|&'"{}:?<>]*>\s*[(`]/;
  const RUNNER_FILE = 'codepod-runner.js'; // the filename boot.js gives this file
  const MAX_TEXT = 16384; // O/E payload limit
  const WRAP = '(async function (tools, require) {';

  let header = null; // Buffer "\x1ecp1 <nonce> ": the nonce lives only here
  let lim = null;
  let done = false; // a final frame (FINAL_KINDS) was sent: send nothing more
  let started = false;
  let stripped = false; // the program needed the type stripper
  let nextCall = 1;
  let pendingCount = 0;
  const pending = Object.create(null); // call id -> resolve(answer)

  // ---- stdout frames -------------------------------------------------------

  function writeAll(buf, off, end) {
    while (off < end) {
      try {
        off += writeSync(1, buf, off, end - off);
      } catch (e) {
        if (e && e.code === 'EAGAIN') { atomicsWait(sleepCell, 0, 0, 1); continue; }
        exit(1); // EPIPE etc.: codepod is gone
      }
    }
  }

  // Frames are assembled in one reused buffer: the payload at HEAD_ROOM,
  // the header right before it (its length is known only after the
  // payload is encoded). A payload too big for it gets a buffer of its own.
  const HEAD_ROOM = 64; // "\x1ecp1 " + 32 hex + " K " + up to 20 digits + "\n" fits
  let out = null; // allocated with the header (start)
  function frame(kind, payload) {
    if (done) return;
    let buf = out;
    let n;
    if (typeof payload === 'string') {
      // At most 3 bytes per UTF-16 unit.
      if (payload.length * 3 > buf.length - HEAD_ROOM) buf = bufAllocUnsafe(HEAD_ROOM + byteLength(payload, 'utf8'));
      n = bufUtf8Write(buf, payload, HEAD_ROOM);
    } else {
      n = payload.length;
      if (n > buf.length - HEAD_ROOM) buf = bufAllocUnsafe(HEAD_ROOM + n);
      typedSet(buf, payload, HEAD_ROOM);
    }
    frameAt(kind, buf, n);
  }

  // A frame whose n payload bytes are already in buf at HEAD_ROOM (a file
  // read puts them there: no copy on the way out).
  function frameAt(kind, buf, n) {
    if (done) return;
    const rest = kind + ' ' + n + '\n';
    const start = HEAD_ROOM - rest.length - header.length;
    typedSet(buf, header, start);
    bufLatin1Write(buf, rest, HEAD_ROOM - rest.length);
    // One write per frame, so concurrent raw writers (inherited fd 1) can at
    // worst land between frames, not inside a small one.
    writeAll(buf, start, HEAD_ROOM + n);
  }

  // Final frames: after one, the runner is silent. stdin stops holding the
  // loop open, so the process exits once the program's own work is done.
  function finish(kind, payload) {
    if (done) return;
    frame(kind, payload);
    done = true;
    // What is left of this process (its exit, or the kill that follows
    // now, and the kernel's teardown of ~40 MB: ~3 ms of CPU) runs at the
    // lowest priority, behind the outcome on its way out.
    // Nice is per thread on Linux: every thread, each on its own (one may
    // be gone by now); without /proc, this thread (0).
    let tasks = ['0'];
    try { tasks = readdirSync('/proc/self/task'); } catch (_) { /* no /proc */ }
    for (const t of tasks) { try { setPriority(+t, 19); } catch (_) { /* gone, or not allowed */ } }
    if (stdin && stdin.unref) stdin.unref();
  }

  // O/E text: split into frames of at most MAX_TEXT bytes, never inside a
  // UTF-8 sequence. Callers pass valid UTF-8 (see capture below).
  function text(kind, buf) {
    for (let off = 0; off < buf.length && !done;) {
      let end = off + MAX_TEXT < buf.length ? off + MAX_TEXT : buf.length;
      if (end < buf.length) {
        let e = end;
        while (e > off && (buf[e] & 0xc0) === 0x80) e--; // back off continuation bytes
        if (e > off) end = e;
      }
      frame(kind, subarray(buf, off, end));
      off = end;
    }
  }

  function errorFields(e) {
    const str = (v, d) => { try { return String(v); } catch (_) { return d; } };
    let isErr = false;
    try { isErr = e !== null && typeof e === 'object' && typeof e.stack === 'string' && 'message' in e; } catch (_) {}
    if (!isErr) {
      let message;
      if (typeof e === 'string') message = e;
      else { try { message = stringify(e); } catch (_) {} if (typeof message !== 'string') message = str(e, 'non-Error value'); }
      return { name: 'Error', message, stack: 'Error: ' + message };
    }
    const name = str(e.name, 'Error');
    const message = str(e.message, '');
    return { name, message, stack: cleanStack(str(e.stack, name + ': ' + message), false) };
  }

  // The program is called by the runner: cut the first runner frame and all
  // below it (the runner and Node internals the program never saw). With
  // fromRunner, the error was made by the runner itself: drop its own frames
  // on top first. The microtask loop frame means nothing to the program.
  function cleanStack(stack, fromRunner) {
    const lines = stack.split('\n');
    const out = [];
    let top = fromRunner;
    for (const l of lines) {
      const frame = /^\s+at /.test(l);
      if (frame && l.includes(RUNNER_FILE)) { if (top) continue; break; }
      if (frame) top = false;
      if (frame && l.includes('processTicksAndRejections')) continue;
      out[out.length] = l;
    }
    return out.join('\n');
  }

  function fail(e) { finish(FRAME_THREW, stringify(errorFields(e))); }

  // ---- output capture ------------------------------------------------------

  function capture(stream, kind) {
    const decoder = new StringDecoder('utf8'); // Buffers -> valid UTF-8, even split across writes
    stream.write = function write(chunk, encoding, cb) {
      if (typeof encoding === 'function') { cb = encoding; encoding = undefined; }
      let buf;
      if (typeof chunk === 'string') {
        buf = !encoding || /^utf-?8$/i.test(encoding) ? bufFrom(chunk, 'utf8') : bufFrom(decWrite(decoder, bufFrom(chunk, encoding)), 'utf8');
      } else if (chunk instanceof Uint8Array) {
        buf = bufFrom(decWrite(decoder, chunk), 'utf8');
      } else {
        throw new TypeError('The "chunk" argument must be of type string or an instance of Buffer or Uint8Array');
      }
      text(kind, buf);
      if (typeof cb === 'function') nextTick(cb, null);
      return true;
    };
  }
  // The global console writes through process.stdout/stderr.write:
  // log/info/debug/dir/table -> stdout, error/warn/trace -> stderr.
  // Building a stdio stream costs milliseconds, so each is captured when it
  // is first used rather than at start.
  for (const [name, kind] of [['stdout', FRAME_OUT], ['stderr', FRAME_ERR]]) {
    const desc = Object.getOwnPropertyDescriptor(process, name);
    let stream = null;
    Object.defineProperty(process, name, {
      configurable: true,
      enumerable: desc.enumerable,
      get() {
        if (!stream) { stream = desc.get.call(process); capture(stream, kind); }
        return stream;
      },
    });
  }

  // ---- tools ---------------------------------------------------------------

  // Keep stdin from holding the loop open unless an answer is awaited, so a
  // program waiting on nothing empties the loop and 'beforeExit' fires.
  function refresh() {
    if (!stdin || !stdin.ref) return;
    if ((pendingCount > 0 || holdStdin) && !done) stdin.ref(); else stdin.unref();
  }

  // Errors a tool call rejects with are made inside callTool after its await,
  // so V8's async stack shows the program line that called the tool
  // ("at async script.ts:4:3"); runner frames are removed.
  function toolError(Ctor, message) {
    const e = new Ctor(message);
    e.stack = cleanStack(String(e.stack), true);
    return e;
  }

  async function callTool(name, input) {
    if (done) throw toolError(Error, 'The program has already finished');
    let json;
    try {
      json = stringify(input === undefined ? {} : input);
    } catch (e) {
      throw toolError(TypeError, 'Input of tool ' + name + ' is not JSON-serializable: ' + (e && e.message));
    }
    if (typeof json !== 'string') throw toolError(TypeError, 'Input of tool ' + name + ' is not JSON-serializable');
    const c = nextCall++;
    const bytes = byteLength(json, 'utf8');
    const head = '{"c":' + c + ',"t":' + stringify(name);
    frame(FRAME_CALL, bytes > lim.maxToolInputBytes ? head + ',"big":' + bytes + '}' : head + ',"i":' + json + '}');
    sentAt = hrtime();
    spinSoon();
    const msg = await new NativePromise((resolve) => {
      pending[c] = resolve;
      pendingCount++;
      refresh();
    });
    if (msg.k === 'res') return msg.o;
    throw toolError(Error, typeof msg.m === 'string' ? msg.m : 'Tool call failed');
  }

  function makeTools(declared) {
    const names = Object.create(null); // exact names
    const aliases = Object.create(null); // identifier-safe alias -> name
    for (const t of declared) {
      if (!t || typeof t.n !== 'string') continue;
      names[t.n] = true;
      const alias = t.n.replace(/[^A-Za-z0-9_$]/g, '_');
      if (!(alias in aliases)) aliases[alias] = t.n;
    }
    // Properties that JavaScript machinery probes (await, JSON, inspection):
    // they are tools only if a tool has exactly that name.
    const reserved = Object.create(null);
    for (const p of ['then', 'catch', 'finally', 'toJSON', 'constructor', 'toString', 'valueOf',
      'toLocaleString', 'hasOwnProperty', 'isPrototypeOf', 'propertyIsEnumerable', '__proto__', 'inspect',
      'asymmetricMatch', 'nodeType', '$$typeof', '@@__IMMUTABLE_ITERABLE__@@', 'prototype']) reserved[p] = true;
    const fns = Object.create(null);
    const get = (p) => {
      if (typeof p !== 'string') return undefined;
      if (!names[p] && reserved[p]) return undefined;
      if (!fns[p]) {
        const name = names[p] ? p : (aliases[p] !== undefined ? aliases[p] : p);
        fns[p] = function tool(input) { return callTool(name, input); };
      }
      return fns[p];
    };
    const target = Object.create(null);
    for (const n in names) target[n] = get(n); // so Object.keys(tools) lists them
    return new Proxy(target, {
      get: (_t, p) => get(p),
      has: (_t, p) => typeof p === 'string' && (!!names[p] || aliases[p] !== undefined),
      set: () => false,
      defineProperty: () => false,
      deleteProperty: () => false,
    });
  }

  // ---- waiting for a quick answer --------------------------------------------
  //
  // A tool answered at once comes back within tens of microseconds, but
  // blocking in the event loop for it costs about as much again: the CPU
  // goes idle and must be woken by an interrupt (~20 us on a VM). So when
  // the program is about to wait on a tool call (an immediate runs once the
  // current turn of the loop is done, after every call it made), the runner
  // reads stdin synchronously for up to SPIN_US, as long as the last answer
  // came that quickly. A slower answer turns it off until an answer comes
  // quickly again, and a spin in vain pauses spinning for 1, 2, 4 .. 64
  // calls: answers that only sometimes come quickly cost at most one vain
  // spin per 64 calls. The spin never delays the program's own work by
  // more than SPIN_US.
  const SPIN_US = 50n;
  const hrtime = process.hrtime.bigint;
  let spinBuf = null; // set when stdin is a pipe or socket (non-blocking reads)
  let quick = true;   // the last answer came within SPIN_US
  let skip = 0;       // calls left without spinning after spins that waited in vain
  let backoff = 0;    // the next such pause: doubles per vain spin, up to 64 calls
  let spinQueued = false;
  let sentAt = 0n;
  let answers = 0;
  function spinSoon() {
    if (skip > 0) { skip--; return; }
    if (spinBuf && quick && !spinQueued) { spinQueued = true; setImmediateP(spin); }
  }
  // Whether stdin reads are still non-blocking: a subprocess that shares it
  // may have cleared O_NONBLOCK (fcntl), and a blocking read would hold the
  // program's event loop until the answer came. /proc/self/fdinfo/0 has
  // "flags:\t<octal>"; unreadable means no. Read at most once a millisecond
  // (three system calls); a read that waits anyway turns spinning off.
  const fdinfo = bufAllocUnsafe(512);
  let checkedAt = -1n;
  function stdinNonBlocking() {
    const now = hrtime();
    if (checkedAt >= 0n && now - checkedAt < 1000000n) return true;
    checkedAt = now;
    let n = 0;
    try {
      const fd = openSync('/proc/self/fdinfo/0', 'r');
      try { n = readSync(fd, fdinfo, 0, fdinfo.length); } finally { closeSync(fd); }
    } catch (_) { return false; }
    for (let i = 0; i + 7 < n; i++) {
      // "flags:" = 66 6c 61 67 73 3a, then a tab, then octal digits
      if (fdinfo[i] !== 0x66 || fdinfo[i + 1] !== 0x6c || fdinfo[i + 2] !== 0x61 ||
          fdinfo[i + 3] !== 0x67 || fdinfo[i + 4] !== 0x73 || fdinfo[i + 5] !== 0x3a) continue;
      let j = i + 6;
      while (j < n && (fdinfo[j] === 0x09 || fdinfo[j] === 0x20)) j++;
      let flags = 0;
      for (; j < n && fdinfo[j] >= 0x30 && fdinfo[j] <= 0x37; j++) flags = flags * 8 + (fdinfo[j] - 0x30);
      return (flags & 0o4000) !== 0; // O_NONBLOCK
    }
    return false;
  }
  function spin() {
    spinQueued = false;
    // Bytes the stream already holds come first: only spin when it has none.
    if (done || pendingCount === 0 || stdin.readableLength !== 0) return;
    if (!stdinNonBlocking()) { spinBuf = null; return; }
    const buf = spinBuf;
    const until = hrtime() + SPIN_US * 1000n;
    const seen = answers;
    while (answers === seen && !done && spinBuf) {
      let n;
      try { n = readSync(0, buf, 0, buf.length); } catch (e) {
        if (e && e.code === 'EAGAIN') {
          if (hrtime() > until) { // in vain: answers come slowly after all
            backoff = backoff ? (backoff < 64 ? backoff * 2 : 64) : 1;
            skip = backoff;
            return;
          }
          continue;
        }
        exit(0); // as the stream's 'error'
      }
      if (n === 0) exit(0); // codepod is gone
      // A read that waited (stdin made blocking since the last check):
      // never spin again, so that costs the program one wait only.
      if (hrtime() > until + 1000000n) spinBuf = null;
      onData(bufFrom(subarray(buf, 0, n)));
    }
    if (answers !== seen) backoff = 0;
  }

  function answer(msg) {
    const p = pending[msg.c];
    if (!p) return; // unknown or already answered: ignore
    answers++;
    quick = hrtime() - sentAt < SPIN_US * 1000n;
    delete pending[msg.c];
    pendingCount--;
    refresh();
    p(msg);
  }

  // ---- the program ---------------------------------------------------------

  function compileError(e, file) {
    const name = (e && e.name) || 'SyntaxError';
    const message = String((e && e.message) || e);
    // Both V8 and the type stripper start the stack with "<something>:LINE\n".
    const m = /^[^\n]*:(\d+)\n/.exec(String(e && e.stack));
    return { name, message, stack: name + ': ' + message + (m ? '\n    at ' + file + ':' + m[1] : '') };
  }

  // This process's start time in clock ticks since boot (/proc/self/stat
  // field 22), or 0: a backend killing in a shared pod takes the orphans
  // started after it for this execution's. Read while the runner waits.
  const START_TICKS = (() => {
    try {
      const st = fs.readFileSync('/proc/self/stat', 'latin1');
      const v = +st.slice(st.lastIndexOf(')') + 2).split(' ')[19];
      return v > 0 ? v : 0;
    } catch (_) { return 0; }
  })();

  const REQUIRE_FILE = 'script.ts';
  let earlyRequire = null;
  function start(hello) {
    // What this process had used when its program reached it (its boot, a
    // wait as a runner started ahead): codepod counts the program's CPU
    // time from here (usage.cpuMs).
    const used = cpuUsage();
    header = bufFrom('\x1ecp1 ' + hello.nonce + ' ', 'utf8');
    out = bufAllocUnsafe(HEAD_ROOM + 65536);
    lim = hello.lim || {};
    if (!(lim.maxToolInputBytes >= 0)) lim.maxToolInputBytes = 65536;
    if (!(lim.maxResultBytes >= 0)) lim.maxResultBytes = 32768;
    const file = typeof hello.file === 'string' && hello.file ? hello.file : 'script.ts';
    const src = String(hello.src);
    // Every process the program starts inherits the tag, so a backend can
    // find and kill them all even after they leave the process tree.
    if (typeof hello.tag === 'string') process.env.CODEPOD_TAG = hello.tag;
    if (hello.cmd && typeof hello.cmd === 'object') {
      const cmd = hello.cmd;
      hello = null; // drop every reference to the nonce's string
      return command(cmd, used);
    }
    dropShell(); // no command: nothing of it may outlive the wait
    if (hello.fop && typeof hello.fop === 'object') {
      const fop = hello.fop;
      const maxFile = lim.maxFileBytes >= 0 ? lim.maxFileBytes : 1073741824;
      hello = null; // drop every reference to the nonce's string
      return fileOperation(fop, maxFile, used);
    }
    const tools = makeTools(Array.isArray(hello.tools) ? hello.tools : []);
    hello = null; // drop every reference to the nonce's string

    // One line of wrapper before the body keeps line numbers; columnOffset
    // fixes line 1's columns. Strip mode blanks types in place.
    let fn;
    let err = null;
    try {
      const code = WRAP + src + '\n})';
      const compile = (text) => new vm.Script(text, {
        filename: file,
        columnOffset: -WRAP.length,
        importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
      }).runInThisContext();
      // The type stripper costs about as much as Node's own start (it
      // compiles a WebAssembly module), so plain JavaScript skips it. Source
      // that is valid JS is only read differently by TypeScript where it
      // holds an explicit type argument, `f<T>(x)`; such source is stripped.
      const plainJs = JS_FILE.test(file) || !GENERIC_CALL.test(src);
      fn = undefined;
      if (plainJs) {
        try { fn = compile(code); } catch (e) { if (JS_FILE.test(file)) throw e; }
      }
      if (fn === undefined) { stripped = true; fn = compile(nodeModule.stripTypeScriptTypes(code)); }
      if (typeof fn !== 'function') throw new SyntaxError('Unexpected end of program body');
    } catch (e) {
      err = compileError(e, file);
    }

    // codepod checks the version: a sandbox image's Node may be too old.
    // "ts": the type stripper was needed, so the conversation's next
    // runner is told to warm it up while it waits (codepod's prestart).
    frame(FRAME_READY, '{"pid":' + process.pid + ',"start":' + START_TICKS +
      ',"cpu":' + (used.user + used.system) + ',"node":' + JSON.stringify(process.version) + (stripped ? ',"ts":true}' : '}'));
    if (err) return finish(FRAME_THREW, stringify(err));

    let p;
    try {
      p = fn(tools, file === REQUIRE_FILE && earlyRequire ? earlyRequire
        : nodeModule.createRequire(path.join(process.cwd(), file)));
      earlyRequire = null;
    } catch (e) { // not expected from an async function, but be safe
      return fail(e);
    }
    promiseThen(p, (value) => {
      if (done) return;
      let json;
      try { json = stringify(value); } catch (e) { return fail(e); }
      if (typeof json !== 'string') return finish(FRAME_RESULT, '');
      const size = byteLength(json, 'utf8');
      if (size > lim.maxResultBytes) return finish(FRAME_TOO_BIG, '{"size":' + size + '}');
      finish(FRAME_RESULT, json);
    }, fail);
  }

  // ---- a command ------------------------------------------------------------
  //
  // The hello's cmd: {argv:[prog,..], cwd?:"relative dir", env?:{..},
  // stdin?:bool}. The runner starts it as its child (the sandbox, its
  // limits and its kill are the runner's own), sends its stdout and stderr
  // as O and E frames as they come (a frame at a time, written synchronously:
  // a slow codepod slows the command down, nothing piles up here), feeds it
  // the {"k":"in"} lines it gets, and ends with P {"code":N,"signal":S|null}.
  // A child that exits while something it started still holds its output
  // open ends all the same, a moment later: codepod then kills the tree.
  const STDIO_GRACE_MS = 200;
  let child = null;
  let childIn = null;
  let childProcessLoaded = null;
  function childProcessModule() {
    if (!childProcessLoaded) childProcessLoaded = require('node:child_process');
    return childProcessLoaded;
  }
  // A shell started ahead. Node forks a process of its own size for every
  // child (~3 ms here, ~8 ms for its first, which also builds child_process's
  // internals): a command would pay that on its path. So a waiting runner
  // warmed for commands starts /bin/sh at once, parked in a read of one
  // line; the command's runner writes it `[export/unset ...;] cd DIR &&
  // exec ARGV`, and the shell becomes the command, already this runner's
  // child with its pipes. What a line cannot say exactly (an environment
  // name a shell cannot set, a NUL), a command that would not start (its
  // program not found or not executable, its folder missing: the plain
  // spawn says why, as it always did), or a shell that is gone, takes the
  // plain spawn. A program or file operation kills the shell before it
  // starts. The shell has nothing but the runner's environment; it exits
  // at the end of its stdin (the runner gone).
  const SHELL_AHEAD = "_cp_nl='\n'; IFS= read -r _cp_l || exit 0; eval \"$_cp_l\"";
  const SHELL_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
  // Names a shell will not set (bash's read-only ones) or the line's own.
  const SHELL_FIXED = new Set(['_cp_nl', '_cp_l', 'UID', 'EUID', 'PPID', 'BASHOPTS',
    'SHELLOPTS', 'BASH_VERSINFO', 'GROUPS']);
  const SHELL_LINE_MAX = 4096;
  let shell = null; // {child, env, gone}
  function parkShell(env) {
    let child;
    try {
      child = childProcessModule().spawn('/bin/sh', ['-c', SHELL_AHEAD], {
        env, stdio: ['pipe', 'pipe', 'pipe'], windowsHide: true,
      });
    } catch (_) { return null; }
    const s = { child, env, gone: false };
    child.on('error', () => { s.gone = true; });
    child.on('exit', () => { s.gone = true; });
    child.stdin.on('error', () => {});
    return s;
  }
  function startShell() {
    if (shell || started) return;
    const env = Object.assign({}, process.env);
    for (const k of Object.keys(env)) if (SHELL_FIXED.has(k) || !SHELL_NAME.test(k)) return;
    // A first shell told to exit at once: what Node runs when a child
    // writes, ends and exits is compiled on first use (~6 ms), now, not on
    // the command's path.
    const first = parkShell(env);
    if (first) {
      const c = first.child;
      for (const p of [c.stdout, c.stderr]) p.on('data', () => {});
      c.stdin.end('exit 0\n');
    }
    shell = parkShell(env);
    // And the line's code, compiled on its first call: on a line not sent.
    shellLine(['true'], process.cwd(), env);
  }
  function dropShell() {
    if (!shell) return;
    const c = shell.child;
    shell = null;
    try { c.kill('SIGKILL'); } catch (_) {}
    for (const p of [c.stdin, c.stdout, c.stderr]) p.destroy();
  }
  const shellQuote = (v) => "'" + v.replace(/'/g, "'\\''").replace(/\n/g, "'\"$_cp_nl\"'") + "'";
  // The file execvp would run for @name, or null.
  function executable(name, cwd, env) {
    const dirs = name.includes('/') ? [''] : typeof env.PATH === 'string' ? env.PATH.split(':') : null;
    if (!dirs || !name) return null;
    for (const d of dirs) {
      const f = path.resolve(cwd, d ? d + '/' + name : name);
      try {
        const st = fs.statSync(f, { throwIfNoEntry: false }); // (a throw costs more than the stat)
        if (st && st.isFile()) { fs.accessSync(f, fs.constants.X_OK); return f; }
      } catch (_) {}
    }
    return null;
  }
  // The line that makes the shell the command, or null (use spawn).
  function shellLine(argv, cwd, env) {
    if (!shell || shell.gone) return null;
    const parts = [];
    for (const k of Object.keys(env)) {
      if (shell.env[k] === env[k]) continue;
      if (SHELL_FIXED.has(k) || !SHELL_NAME.test(k)) return null;
      parts.push('export ' + k + '=' + shellQuote(env[k]));
    }
    for (const k of Object.keys(shell.env)) if (!(k in env)) parts.push('unset ' + k);
    for (const v of [cwd, ...argv, ...Object.values(env)]) if (v.includes('\0')) return null;
    try {
      const dir = fs.statSync(cwd, { throwIfNoEntry: false });
      if (!dir || !dir.isDirectory()) return null;
    } catch (_) { return null; }
    if (!executable(argv[0], cwd, env)) return null;
    parts.push('cd -- ' + shellQuote(cwd) + ' && exec ' + argv.map(shellQuote).join(' '));
    const line = parts.join('; ') + '\n';
    // A shell reads a pipe a byte at a time (~0.7 us a byte in the sandbox):
    // past a few KiB the fork it saves is spent.
    return bufByteLength(line) <= SHELL_LINE_MAX ? line : null;
  }

  function command(cmd, used) {
    const childProcess = childProcessModule();
    const osConstants = require('node:os').constants;
    frame(FRAME_READY, '{"pid":' + process.pid + ',"start":' + START_TICKS +
      ',"cpu":' + (used.user + used.system) + ',"node":' + JSON.stringify(process.version) + '}');
    const argv = Array.isArray(cmd.argv) ? cmd.argv.map(String) : [];
    const env = Object.assign({}, process.env);
    if (cmd.env && typeof cmd.env === 'object') {
      for (const k of Object.keys(cmd.env)) env[k] = String(cmd.env[k]);
    }
    env.CODEPOD_TAG = process.env.CODEPOD_TAG || ''; // the kill finds it by this
    const cwd = typeof cmd.cwd === 'string' && cmd.cwd ? path.resolve(process.cwd(), cmd.cwd) : process.cwd();
    let exited = null;
    let open = 2;
    const end = () => {
      if (done || !exited) return;
      const [code, signal] = exited;
      let n = typeof code === 'number' ? code : 0;
      if (signal) n = 128 + ((osConstants.signals && osConstants.signals[signal]) || 0);
      const ended = { code: n, signal: signal || null };
      if (viaShell) ended.ahead = true;
      finish(FRAME_PROCESS_ENDED, stringify(ended));
    };
    const viaShell = argv.length ? shellLine(argv, cwd, env) : null;
    if (viaShell) {
      child = shell.child;
      shell = null;
    } else {
      dropShell();
      try {
        child = childProcess.spawn(argv[0], argv.slice(1), {
          cwd, env, stdio: [cmd.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'], windowsHide: true,
        });
      } catch (e) {
        return finish(FRAME_PROCESS_ENDED, stringify({ code: 127, signal: null, spawn: String(e && e.code || 'error') }));
      }
    }
    child.on('error', (e) => {
      // Not started (no such program, cwd missing): as a shell says it.
      if (!exited) {
        text(FRAME_ERR, bufFrom('codepod: cannot run ' + argv[0] + ': ' + String(e && e.code || e) + '\n', 'utf8'));
        exited = [e && e.code === 'ENOENT' ? 127 : 126, null];
        end();
      }
    });
    for (const [s, kind] of [[child.stdout, FRAME_OUT], [child.stderr, FRAME_ERR]]) {
      const decoder = new StringDecoder('utf8');
      s.on('data', (b) => text(kind, bufFrom(decWrite(decoder, b), 'utf8')));
      s.on('close', () => { if (--open === 0) end(); });
    }
    if (viaShell) {
      child.stdin.write(viaShell);
      if (!cmd.stdin) child.stdin.end(); // as spawn's 'ignore': the command reads an end
    }
    if (cmd.stdin) {
      childIn = child.stdin;
      childIn.on('error', () => {}); // the command closed its stdin: drop the rest
      if (stdin && stdin.ref) stdin.ref();
    }
    child.on('exit', (code, signal) => {
      exited = [code, signal];
      if (open === 0) end(); else setTimeout(end, STDIO_GRACE_MS);
    });
  }

  function commandInput(msg) {
    if (!childIn) return;
    if (typeof msg.d === 'string' && msg.d) childIn.write(bufFrom(msg.d, 'base64'));
    if (msg.eof === true) { childIn.end(); childIn = null; }
  }

  // ---- a file operation -------------------------------------------------------
  //
  // The hello's fop: {op:"read"|"write"|"stat"|"list"|"delete", path, ...}.
  // The runner is the sandbox's user, in the sandbox: what it may touch is
  // what a program may. Paths are walked one component at a time, each
  // opened with O_NOFOLLOW through /proc/self/fd of the folder before it
  // (openat, race-free): a symlink anywhere on the way, or as the file
  // itself, is refused, whoever planted it and whenever. Data goes out as
  // B frames of at most 256 KiB, each after codepod's {"k":"ack"}; data
  // comes in as {"k":"chunk","d":base64,"last":bool} lines, each but the
  // last answered by an A frame (the first A says: ready). The end is the
  // final F frame: the result's fields, or {"error":{code,message}} whose
  // message names the rule, never the file's content.
  const FILE_CHUNK = 262144;
  const FILE_AHEAD = 4; // a read's chunks sent ahead of codepod's acks (CODEPOD_FILE_WINDOW)
  const TMP_PREFIX = '.codepod-write-';
  let onFileAck = null;
  let onFileChunk = null;

  class FileRule extends Error {
    constructor(code, message) { super(message); this.code = code; this.rule = true; }
  }
  const refuse = (message) => new FileRule('INVALID_REQUEST', message);

  function fileError(e) {
    if (e && e.rule) return { code: e.code, message: e.message };
    const c = e && e.code;
    if (c === 'ENOENT') return { code: 'NOT_FOUND', message: 'no such file or directory in the workspace' };
    if (c === 'ELOOP') return { code: 'INVALID_REQUEST', message: 'path goes through or names a symlink; symlinks are not followed' };
    if (c === 'ENOTDIR') return { code: 'INVALID_REQUEST', message: 'a component of path is not a directory' };
    if (c === 'EISDIR') return { code: 'INVALID_REQUEST', message: 'path is a directory' };
    if (c === 'ENOTEMPTY' || c === 'EEXIST') return { code: 'INVALID_REQUEST', message: 'the directory is not empty; delete it with recursive: true' };
    if (c === 'ENOSPC' || c === 'EDQUOT' || c === 'EFBIG') return { code: 'TOO_LARGE', message: 'the workspace is full (its size ceiling); nothing was replaced' };
    if (c === 'EACCES' || c === 'EPERM' || c === 'EROFS') return { code: 'INVALID_REQUEST', message: 'the sandbox may not do that here (permission denied)' };
    if (c === 'ENAMETOOLONG') return { code: 'INVALID_REQUEST', message: 'path or one of its names is too long' };
    return { code: 'INTERNAL', message: 'the file operation failed: ' + String(c || 'error') };
  }

  // The blocks the workspace's entries hold, links not followed: a pod's
  // workspace has no kernel bound (lim.maxWorkspaceBytes is given there
  // only), so a write holds itself to it.
  function workspaceBytes() {
    let bytes = 0;
    const dirs = [process.cwd()];
    while (dirs.length) {
      const dir = dirs.pop();
      let names = [];
      try { names = readdirSync(dir); } catch (_) { continue; }
      for (const n of names) {
        let st;
        try { st = fs.lstatSync(dir + '/' + n); } catch (_) { continue; }
        bytes += st.blocks * 512;
        if (st.isDirectory()) dirs.push(dir + '/' + n);
      }
    }
    return bytes;
  }

  // The components of a workspace path: relative, no "..", no NUL.
  function pathParts(p, rootOk) {
    if (typeof p !== 'string') throw refuse('path must be a string');
    if (p.indexOf('\0') >= 0) throw refuse('path must not contain NUL');
    if (p[0] === '/') throw refuse('path must be relative to the workspace, not absolute');
    const parts = p.split('/').filter((x) => x !== '' && x !== '.');
    if (parts.indexOf('..') >= 0) throw refuse('path must not contain a .. component');
    if (!parts.length && !rootOk) throw refuse('path names the workspace itself, not a file in it');
    return parts;
  }

  function fileOperation(fop, maxFile, used) {
    frame(FRAME_READY, '{"pid":' + process.pid + ',"start":' + START_TICKS +
      ',"cpu":' + (used.user + used.system) + ',"node":' + JSON.stringify(process.version) + '}');
    const O = fs.constants;
    const DIR = O.O_RDONLY | O.O_DIRECTORY | O.O_NOFOLLOW;
    const crypto = require('node:crypto');
    const fds = [];
    const openFd = (p, flags, mode) => { const fd = openSync(p, flags, mode); fds.push(fd); return fd; };
    const closeFd = (fd) => { const i = fds.indexOf(fd); if (i >= 0) fds.splice(i, 1); try { closeSync(fd); } catch (_) {} };
    const via = (fd, name) => '/proc/self/fd/' + fd + (name === undefined ? '' : '/' + name);
    const end = (o) => {
      for (const fd of fds.splice(0)) { try { closeSync(fd); } catch (_) {} }
      holdStdin = false;
      onFileAck = onFileChunk = null;
      finish(FRAME_FILE_DONE, stringify(o));
    };
    const fail = (e) => end({ error: fileError(e) });
    // The folder holding parts[0..n): its fd. create: make missing ones.
    const walk = (parts, n, create) => {
      let fd = openFd(process.cwd(), O.O_RDONLY | O.O_DIRECTORY);
      for (let i = 0; i < n; i++) {
        let next;
        try { next = openFd(via(fd, parts[i]), DIR); } catch (e) {
          if (e && (e.code === 'ENOTDIR' || e.code === 'ELOOP')) {
            let link = false;
            try { link = fs.lstatSync(via(fd, parts[i])).isSymbolicLink(); } catch (_) {}
            throw link ? refuse('path goes through a symlink; symlinks are not followed') : e;
          }
          if (!(create && e && e.code === 'ENOENT')) throw e;
          try { fs.mkdirSync(via(fd, parts[i]), 0o755); } catch (e2) { if (!e2 || e2.code !== 'EEXIST') throw e2; }
          next = openFd(via(fd, parts[i]), DIR);
        }
        closeFd(fd);
        fd = next;
      }
      return fd;
    };
    const kindOf = (st) => st.isFile() ? 'file' : st.isDirectory() ? 'directory' : st.isSymbolicLink() ? 'symlink' : 'other';
    // The content's SHA-256 of an open regular file (the ETag).
    const hashFd = (fd) => {
      const h = crypto.createHash('sha256');
      const buf = bufAllocUnsafe(FILE_CHUNK);
      for (let pos = 0; ;) {
        const n = readSync(fd, buf, 0, FILE_CHUNK, pos);
        if (n === 0) break;
        h.update(subarray(buf, 0, n));
        pos += n;
      }
      return h.digest('hex');
    };
    // The ETag of an open regular file: the one codepod knows when fstat
    // shows the very file it was hashed from, unchanged (runner/etags.h),
    // else its SHA-256. seen: what the file was, for codepod to know next
    // time, given only when no later change can leave its ctime as it is:
    // the ctime is older than the file system's timestamp granularity
    // now (whole seconds: 2 s; else 20 ms, a kernel tick being 10 at most).
    const statSeen = (st) => ({ dev: String(st.dev), ino: String(st.ino), size: String(st.size),
      mtime: String(st.mtimeNs), ctime: String(st.ctimeNs) });
    const sameSeen = (a, b) => !!a && !!b && a.dev === b.dev && a.ino === b.ino &&
      a.size === b.size && a.mtime === b.mtime && a.ctime === b.ctime;
    const etagOf = (fd) => {
      const before = statSeen(fstatSync(fd, { bigint: true }));
      const known = fop.known;
      if (known && typeof known.etag === 'string' && /^[0-9a-f]{64}$/.test(known.etag) &&
          sameSeen(known.seen, before)) return { etag: known.etag, seen: null };
      const etag = hashFd(fd);
      const st = fstatSync(fd, { bigint: true });
      const coarse = st.ctimeNs % 1000000000n === 0n && st.mtimeNs % 1000000000n === 0n;
      const old = st.ctimeNs < (BigInt(dateNow()) - (coarse ? 2000n : 20n)) * 1000000n;
      return { etag, seen: old && sameSeen(before, statSeen(st)) ? before : null };
    };
    const openRegular = (dfd, name) => {
      const fd = openFd(via(dfd, name), O.O_RDONLY | O.O_NOFOLLOW | O.O_NONBLOCK);
      const st = fstatSync(fd);
      if (st.isDirectory()) throw refuse('path is a directory');
      if (!st.isFile()) throw refuse('path is not a regular file (a device, socket or pipe)');
      return fd;
    };
    // ---- tar (ustar, with pax records for long names) ----
    const octal = (buf, off, len, v) => { bufLatin1Write(buf, v.toString(8).padStart(len - 1, '0') + '\0', off); };
    const tarHeader = (name, type, size, mode, mtime, link) => {
      const out = [];
      let nameBuf = bufFrom(name, 'utf8');
      const linkBuf = bufFrom(link || '', 'utf8');
      if (nameBuf.length > 100 || linkBuf.length > 100) {
        const recs = [];
        const rec = (k, v) => {
          const body = ' ' + k + '=' + v + '\n';
          let n = byteLength(body, 'utf8');
          let len = n + String(n).length;
          if (String(len).length !== String(n).length) len = n + String(len).length;
          recs.push(bufFrom(len + body, 'utf8'));
        };
        if (nameBuf.length > 100) rec('path', name);
        if (linkBuf.length > 100) rec('linkpath', link);
        const data = bufConcat(recs);
        out.push(...tarHeader('PaxHeader', 'x', data.length, 0o644, mtime, ''));
        out.push(data, Buffer.alloc((512 - data.length % 512) % 512));
        nameBuf = subarray(nameBuf, 0, 100);
      }
      const h = Buffer.alloc(512);
      typedSet(h, nameBuf, 0);
      octal(h, 100, 8, mode & 0o7777);
      octal(h, 108, 8, 0); octal(h, 116, 8, 0);
      octal(h, 124, 12, size);
      octal(h, 136, 12, Math.max(0, Math.floor(mtime)));
      bufLatin1Write(h, '        ', 148);
      bufLatin1Write(h, type, 156);
      typedSet(h, subarray(linkBuf, 0, 100), 157);
      bufLatin1Write(h, 'ustar\0' + '00', 257);
      let sum = 0;
      for (let i = 0; i < 512; i++) sum += h[i];
      bufLatin1Write(h, sum.toString(8).padStart(6, '0') + '\0 ', 148);
      out.push(h);
      return out;
    };
    function archiveRead() {
      // Depth first, names sorted; symlinks as symlinks (never followed),
      // special files and codepod's own temporaries left out.
      const stack = [{ fd: walk([], 0, false), prefix: '', names: null, i: 0 }];
      let file = null; // {fd, left, pos}
      let total = 0;
      const pieces = [];
      let queued = 0;
      const push = (b) => { pieces.push(b); queued += b.length; total += b.length; };
      const more = () => {
        while (queued < FILE_CHUNK) {
          if (file) {
            const n = Math.min(65536, file.left);
            const b = bufAllocUnsafe(n);
            let got = n ? readSync(file.fd, b, 0, n, file.pos) : 0;
            if (got < n) b.fill(0, got); // shrank meanwhile: the header's size holds
            got = n;
            file.pos += got; file.left -= got;
            push(b);
            if (file.left === 0) {
              if (file.pad) push(Buffer.alloc(file.pad));
              closeFd(file.fd);
              file = null;
            }
            continue;
          }
          const top = stack[stack.length - 1];
          if (!top) return false;
          if (!top.names) top.names = readdirSync(via(top.fd)).filter((n) => !n.startsWith(TMP_PREFIX)).sort();
          if (top.i >= top.names.length) { closeFd(top.fd); stack.pop(); continue; }
          const name = top.names[top.i++];
          const rel = top.prefix + name;
          let st;
          try { st = fs.lstatSync(via(top.fd, name)); } catch (_) { continue; }
          if (st.isDirectory()) {
            let dfd;
            try { dfd = openFd(via(top.fd, name), DIR); } catch (_) { continue; }
            for (const b of tarHeader(rel + '/', '5', 0, st.mode, st.mtimeMs / 1000, '')) push(b);
            stack.push({ fd: dfd, prefix: rel + '/', names: null, i: 0 });
          } else if (st.isSymbolicLink()) {
            let target = '';
            try { target = fs.readlinkSync(via(top.fd, name)); } catch (_) { continue; }
            for (const b of tarHeader(rel, '2', 0, 0o777, st.mtimeMs / 1000, target)) push(b);
          } else if (st.isFile()) {
            let ffd;
            try { ffd = openFd(via(top.fd, name), O.O_RDONLY | O.O_NOFOLLOW | O.O_NONBLOCK); } catch (_) { continue; }
            const size = fstatSync(ffd).size;
            for (const b of tarHeader(rel, '0', size, st.mode, st.mtimeMs / 1000, '')) push(b);
            file = { fd: ffd, left: size, pos: 0, pad: (512 - size % 512) % 512 };
            if (size === 0) { closeFd(ffd); file = null; }
          }
        }
        return true;
      };
      let ended = false;
      const step = () => {
        try {
          if (!ended && !more()) { ended = true; push(Buffer.alloc(1024)); }
          if (queued === 0) return end({ op: 'archive_read', size: total });
          const all = bufConcat(pieces.splice(0));
          const n = Math.min(FILE_CHUNK, all.length);
          if (n < all.length) pieces.push(subarray(all, n));
          queued = all.length - n;
          onFileAck = step;
          frame(FRAME_FILE_DATA, subarray(all, 0, n));
        } catch (e) { fail(e); }
      };
      holdStdin = true;
      refresh();
      step();
    }
    function archiveWrite() {
      let pending = bufAllocUnsafe(0);
      let entry = null; // {left, pad, fd, dfd, tmp, name, size}
      let pax = {};
      let longName = null;
      let files = 0;
      const dirTimes = []; // folders' modes and times, set last (deepest first)
      const cleanup = () => {
        if (entry && entry.tmp) { try { fs.unlinkSync(via(entry.dfd, entry.tmp)); } catch (_) {} }
      };
      const num = (h, off, len) => {
        const s = bufToString(subarray(h, off, off + len), 'latin1').replace(/[\0 ]+$/, '').trim();
        if (!/^[0-7]*$/.test(s)) throw refuse('not a tar archive (a number field is not octal)');
        return s ? parseInt(s, 8) : 0;
      };
      const str = (h, off, len) => { const b = subarray(h, off, off + len); const z = bufIndexOf(b, 0); return bufToString(z >= 0 ? subarray(b, 0, z) : b, 'utf8'); };
      const startEntry = (h) => {
        let sum = 0;
        for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 32 : h[i];
        if (num(h, 148, 8) !== sum) throw refuse('not a tar archive (a header checksum is wrong)');
        const type = String.fromCharCode(h[156] || 48);
        const size = num(h, 124, 12);
        let name = pax.path || longName || ((h[345] && bufToString(subarray(h, 257, 263), 'latin1').startsWith('ustar')) ? str(h, 345, 155) + '/' + str(h, 0, 100) : str(h, 0, 100));
        const link = pax.linkpath || str(h, 157, 100);
        pax = {}; longName = null;
        const meta = { left: size, pad: (512 - size % 512) % 512, type, data: null };
        if (type === 'x' || type === 'L' || type === 'g') { meta.data = []; return meta; }
        if (name.startsWith('./')) name = name.slice(2);
        name = name.replace(/\/+$/, '');
        if (type === '5' && (name === '' || name === '.')) return meta; // the workspace itself
        const parts = pathParts(name, false);
        if (type === '5') {
          closeFd(walk(parts, parts.length, true));
          // (a folder's set-group-id and sticky bits are kept, no set-user-id;
          // one whose tar gives no x bit at all gets one where it may read)
          let dm = num(h, 100, 8) & 0o3777;
          if ((dm & 0o111) === 0) dm |= (dm & 0o444) >> 2;
          dirTimes.push({ parts, mode: dm, mtime: num(h, 136, 12) });
          files++;
          return meta;
        }
        if (type === '2') {
          if (link.startsWith('/')) throw refuse('an entry is a symlink to an absolute path');
          const to = path.posix.normalize(path.posix.join(path.posix.dirname(parts.join('/')), link));
          if (to === '..' || to.startsWith('../')) throw refuse('an entry is a symlink leading out of the workspace');
          const dfd = walk(parts, parts.length - 1, true);
          const last = parts[parts.length - 1];
          try { fs.unlinkSync(via(dfd, last)); } catch (e) { if (!e || e.code !== 'ENOENT') throw e; }
          fs.symlinkSync(link, via(dfd, last));
          const lt = num(h, 136, 12);
          try { fs.lutimesSync(via(dfd, last), lt, lt); } catch (_) {}
          closeFd(dfd);
          files++;
          return meta;
        }
        if (type !== '0' && type !== '7') throw refuse('an entry is a device, fifo or hard link; only files, folders and symlinks inside are taken');
        if (size > maxFile) throw new FileRule('TOO_LARGE', 'an entry is over maxFileBytes (' + maxFile + ' bytes)');
        const dfd = walk(parts, parts.length - 1, true);
        const last = parts[parts.length - 1];
        let old = null;
        try { old = fs.lstatSync(via(dfd, last)); } catch (e) { if (!e || e.code !== 'ENOENT') throw e; }
        if (old && !old.isFile()) throw refuse('an entry would replace a folder, symlink or special file');
        const tmp = TMP_PREFIX + crypto.randomBytes(8).toString('hex');
        meta.dfd = dfd; meta.tmp = tmp; meta.last = last;
        meta.mode = num(h, 100, 8) & 0o777;
        meta.mtime = num(h, 136, 12);
        meta.fd = openFd(via(dfd, tmp), O.O_WRONLY | O.O_CREAT | O.O_EXCL | O.O_NOFOLLOW, meta.mode || 0o644);
        return meta;
      };
      const endEntry = () => {
        const m = entry;
        entry = null;
        if (m.data) {
          const text = bufToString(bufConcat(m.data), 'utf8');
          if (m.type === 'L') longName = text.replace(/\0+$/, '');
          if (m.type === 'x') {
            for (let i = 0; i < text.length;) {
              const sp = text.indexOf(' ', i);
              const len = parseInt(text.slice(i, sp), 10);
              if (!(len > 0)) break;
              const rec = text.slice(sp + 1, i + len - 1);
              const eq = rec.indexOf('=');
              pax[rec.slice(0, eq)] = rec.slice(eq + 1);
              i += len;
            }
          }
          return;
        }
        if (m.fd !== undefined) {
          fs.fchmodSync(m.fd, m.mode || 0o644);
          fs.futimesSync(m.fd, m.mtime, m.mtime);
          closeFd(m.fd);
          fs.renameSync(via(m.dfd, m.tmp), via(m.dfd, m.last));
          closeFd(m.dfd);
          files++;
        }
      };
      let zeros = 0;
      onFileChunk = (msg) => {
        try {
          const data = bufConcat(msg.bufs);
          let buf = pending.length ? bufConcat([pending, data]) : data;
          let off = 0;
          while (off < buf.length && zeros < 2) {
            if (entry && entry.left > 0) {
              const n = Math.min(entry.left, buf.length - off);
              const piece = subarray(buf, off, off + n);
              if (entry.data) entry.data.push(bufFrom(piece));
              else if (entry.fd !== undefined) for (let w = 0; w < n;) w += fs.writeSync(entry.fd, piece, w, n - w);
              entry.left -= n; off += n;
              continue;
            }
            if (entry && entry.pad > 0) {
              const n = Math.min(entry.pad, buf.length - off);
              entry.pad -= n; off += n;
              continue;
            }
            if (entry) { endEntry(); continue; }
            if (buf.length - off < 512) break;
            const h = subarray(buf, off, off + 512);
            off += 512;
            let empty = true;
            for (let i = 0; i < 512; i++) if (h[i]) { empty = false; break; }
            if (empty) { zeros++; continue; }
            zeros = 0;
            entry = startEntry(h);
          }
          if (entry && entry.left === 0 && entry.pad === 0) endEntry();
          pending = off < buf.length ? bufFrom(subarray(buf, off)) : bufAllocUnsafe(0);
          if (msg.last !== true) return frame(FRAME_FILE_ACK, '');
          if (entry || pending.length > 0 && zeros < 2) throw refuse('the tar archive ends in the middle of an entry');
          for (let i = dirTimes.length; i-- > 0;) {
            const d = dirTimes[i];
            const fd = walk(d.parts, d.parts.length, false);
            fs.fchmodSync(fd, d.mode);
            fs.futimesSync(fd, d.mtime, d.mtime);
            closeFd(fd);
          }
          end({ op: 'archive_write', files });
        } catch (e) { cleanup(); fail(e); }
      };
      holdStdin = true;
      refresh();
      frame(FRAME_FILE_ACK, '');
    }
    try {
      const op = fop.op;
      if (op === 'read') {
        const parts = pathParts(fop.path, false);
        const dfd = walk(parts, parts.length - 1, false);
        const fd = openRegular(dfd, parts[parts.length - 1]);
        // The size and etag first (an HTTP answer's headers carry them),
        // then the range: what was hashed, never past it.
        const { etag, seen } = etagOf(fd);
        const size = fstatSync(fd).size;
        const start = fop.offset > 0 ? fop.offset : 0;
        const stop = fop.length >= 0 ? Math.min(start + fop.length, size) : size;
        // (one buffer: a frame is written whole before the next is read)
        const buf = bufAllocUnsafe(HEAD_ROOM + FILE_CHUNK);
        let pos = start;
        let ahead = 0; // chunks sent, their acks not back
        const done = () => end(seen ? { op: 'read', size, etag, seen } : { op: 'read', size, etag });
        const pump = () => {
          try {
            while (ahead < FILE_AHEAD) {
              const n = pos < stop ? readSync(fd, buf, HEAD_ROOM, Math.min(FILE_CHUNK, stop - pos), pos) : 0;
              if (n === 0) return done();
              pos += n;
              ahead++;
              frameAt(FRAME_FILE_DATA, buf, n);
            }
          } catch (e) { fail(e); }
        };
        const acked = () => { onFileAck = acked; ahead--; pump(); };
        holdStdin = true;
        refresh();
        if (start >= stop) return pump();
        if (fop.byFd === true) {
          // codepod may read the bytes itself through this descriptor
          // (runner/PROTOCOL.md, "A file by descriptor"): its answer says
          // whether it did; until then the file stays open here.
          onFileAck = (msg) => {
            if (msg && msg.taken === true) return done();
            onFileAck = acked;
            pump();
          };
          return frame(FRAME_FILE_ACK, stringify({ size, etag, fd }));
        }
        onFileAck = acked;
        frame(FRAME_FILE_ACK, stringify({ size, etag }));
        return pump();
      }
      if (op === 'write') {
        const parts = pathParts(fop.path, false);
        const name = parts[parts.length - 1];
        const dfd = walk(parts, parts.length - 1, true);
        let old = null;
        try { old = fs.lstatSync(via(dfd, name)); } catch (e) { if (!e || e.code !== 'ENOENT') throw e; }
        if (old && old.isDirectory()) throw refuse('path is a directory');
        if (old && old.isSymbolicLink()) throw refuse('path is a symlink; symlinks are not followed or replaced');
        if (old && !old.isFile()) throw refuse('path is not a regular file (a device, socket or pipe)');
        const created = !old;
        const match = () => {
          if (typeof fop.ifMatch !== 'string') return;
          let fd;
          try { fd = openRegular(dfd, name); } catch (e) {
            if (e && e.code === 'ENOENT') throw new FileRule('PRECONDITION_FAILED', 'ifMatch: the file does not exist');
            throw e;
          }
          const etag = etagOf(fd).etag;
          closeFd(fd);
          if (etag !== fop.ifMatch) throw new FileRule('PRECONDITION_FAILED', 'ifMatch: the file has changed (its etag differs); it was left as it was');
        };
        match();
        const tmp = TMP_PREFIX + crypto.randomBytes(8).toString('hex');
        const room = lim.maxWorkspaceBytes > 0 ? lim.maxWorkspaceBytes - workspaceBytes() : Infinity;
        const mode = typeof fop.mode === 'number' ? fop.mode & 0o777 : 0o644;
        const tfd = openFd(via(dfd, tmp), O.O_WRONLY | O.O_CREAT | O.O_EXCL | O.O_NOFOLLOW, mode);
        // (its ETag is codepod's: it hashes the bytes as it sends them,
        // beside this process on another CPU; runner/fileop.c)
        let size = 0;
        const abort = (e) => {
          try { fs.unlinkSync(via(dfd, tmp)); } catch (_) {}
          fail(e);
        };
        // every byte written (by this process or by codepod): in place
        const putInPlace = () => {
          if (mode !== 0o644) fs.fchmodSync(tfd, mode); // the umask took bits off
          closeFd(tfd);
          match();
          fs.renameSync(via(dfd, tmp), via(dfd, name));
          end({ op: 'write', size, created });
        };
        onFileChunk = (msg) => {
          try {
            const bufs = msg.bufs;
            let len = 0;
            for (const b of bufs) len += b.length;
            if (size + len > maxFile) {
              return abort(new FileRule('TOO_LARGE', 'the file is over maxFileBytes (' + maxFile + ' bytes); nothing was replaced'));
            }
            if (size + len > room) return abort(new FileRule('TOO_LARGE', 'the workspace is full (maxWorkspaceBytes ' + lim.maxWorkspaceBytes + ' bytes); nothing was replaced'));
            // Taken: the next chunk may come while this one is written (it
            // waits in the pipe; an error here ends the write all the same).
            if (msg.last !== true) frame(FRAME_FILE_ACK, '');
            for (const data of bufs) {
              for (let off = 0; off < data.length;) off += fs.writeSync(tfd, data, off, data.length - off);
            }
            size += len;
            if (msg.last !== true) return;
            putInPlace();
          } catch (e) { abort(e); }
        };
        holdStdin = true;
        refresh();
        if (fop.byFd === true) {
          // codepod may write the bytes itself through this descriptor
          // (runner/PROTOCOL.md, "A file by descriptor"). Not taken: this
          // process takes the chunks, after the A that says it is ready.
          onFileAck = (msg) => {
            if (!msg || msg.taken !== true) {
              frame(FRAME_FILE_ACK, '');
              return readChunks();
            }
            onFileAck = (m) => { // written: put in place, or dropped
              try {
                if (m && m.abort) return abort(new FileRule(String(m.abort.code), String(m.abort.message)));
                size = fstatSync(tfd).size;
                putInPlace();
              } catch (e) { abort(e); }
            };
          };
          return frame(FRAME_FILE_ACK, stringify({ fd: tfd }));
        }
        frame(FRAME_FILE_ACK, '');
        return readChunks();
      }
      if (op === 'stat') {
        const parts = pathParts(fop.path, true);
        const dfd = walk(parts, parts.length ? parts.length - 1 : 0, false);
        const st = parts.length ? fs.lstatSync(via(dfd, parts[parts.length - 1])) : fstatSync(dfd);
        return end({ op: 'stat', stat: { type: kindOf(st), size: st.size, mode: st.mode & 0o7777, mtimeMs: Math.floor(st.mtimeMs) } });
      }
      if (op === 'list') {
        const parts = pathParts(fop.path === undefined ? '' : fop.path, true);
        const dfd = walk(parts, parts.length, false);
        const limit = fop.limit > 0 ? fop.limit : 1000;
        let after = null;
        if (typeof fop.cursor === 'string') {
          after = bufFrom(fop.cursor, 'base64url').toString('utf8');
          if (!after) throw refuse('cursor is not one this listing gave');
        }
        const names = readdirSync(via(dfd)).filter((n) => !n.startsWith(TMP_PREFIX)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
        let i = 0;
        if (after !== null) { while (i < names.length && names[i] <= after) i++; }
        const entries = [];
        for (; i < names.length && entries.length < limit; i++) {
          let st = null;
          try { st = fs.lstatSync(via(dfd, names[i])); } catch (_) { continue; } // gone meanwhile
          entries.push({ name: names[i], type: kindOf(st), size: st.isDirectory() ? 0 : st.size });
        }
        const o = { op: 'list', entries };
        if (i < names.length && entries.length) o.next = bufFrom(entries[entries.length - 1].name, 'utf8').toString('base64url');
        return end(o);
      }
      if (op === 'delete') {
        const parts = pathParts(fop.path, false);
        const name = parts[parts.length - 1];
        const dfd = walk(parts, parts.length - 1, false);
        const st = fs.lstatSync(via(dfd, name));
        if (st.isDirectory()) {
          if (fop.recursive === true) fs.rmSync(via(dfd, name), { recursive: true });
          else fs.rmdirSync(via(dfd, name));
        } else {
          fs.unlinkSync(via(dfd, name));
        }
        return end({ op: 'delete' });
      }
      if (op === 'archive_read') return archiveRead();
      if (op === 'archive_write') return archiveWrite();
      throw refuse('unknown file operation');
    } catch (e) {
      fail(e);
    }
  }

  // A write's chunks, read here synchronously, into buffers kept from chunk
  // to chunk, until the write ends: the stdin stream's reads (a fresh
  // zero-filled 64 KiB buffer each) were most of an upload's CPU time. No
  // program runs beside a file operation, so blocking this process's loop
  // blocks nothing else. Nothing of the stream is lost: codepod sends the
  // first chunk only after the A that says the file is open, sent just
  // before. Where stdin's handle cannot block, the stream reads on
  // (onFileChunk, from line()).
  function readChunks() {
    const h = stdin && stdin._handle;
    if (done || !h || typeof h.setBlocking !== 'function' || typeof h.readStop !== 'function') return;
    if (h.readStop() !== 0) return;
    if (h.setBlocking(true) !== 0) { h.readStart(); return; }
    const head = bufAllocUnsafe(65536); // lines, and the bytes that came with them
    const data = bufAllocUnsafe(FILE_CHUNK);
    let have = 0;
    const more = (buf, off) => {
      const n = readSync(0, buf, off, buf.length - off);
      if (n === 0) exit(0); // codepod is gone
      return n;
    };
    while (!done && onFileChunk) {
      let i;
      while ((i = bufIndexOf(subarray(head, 0, have), 10)) < 0) {
        if (have === head.length) return exit(2); // not what codepod sends
        have += more(head, have);
      }
      const l = readLine(subarray(head, 0, i), true);
      head.copyWithin(0, i + 1, have);
      have -= i + 1;
      if (!l || l.k !== 'chunk') continue; // only chunks come during a write
      const n = l.msg.n;
      let got = Math.min(n, have);
      typedSet(data, subarray(head, 0, got), 0);
      head.copyWithin(0, got, have);
      have -= got;
      while (got < n) {
        const r = readSync(0, data, got, n - got);
        if (r === 0) exit(0);
        got += r;
      }
      l.msg.bufs = [subarray(data, 0, n)];
      onFileChunk(l.msg);
    }
  }

  // ---- process events ------------------------------------------------------

  // Before the program settles, an uncaught exception or unhandled rejection
  // fails it (as Node would by default); afterwards they are swallowed.
  process.on('uncaughtException', (e) => {
    if (!started) { // a runner bug before the program exists: report and die
      try { writeSync(2, 'codepod runner: ' + ((e && e.stack) || e) + '\n'); } catch (_) {}
      exit(70);
    }
    if (!done) fail(e);
  });
  process.on('unhandledRejection', (e) => { if (!done && started) fail(e); });
  // process.exit(N) from the program: say so, because a sandbox's init reports
  // a death by signal S as status 128 + S and the two would look alike.
  process.on('exit', (code) => {
    if (started && !done) frame(FRAME_EXIT, '{"code":' + ((+code || 0) & 255) + '}');
  });
  // The loop emptied while the program still awaits: nothing can settle it.
  process.on('beforeExit', () => {
    if (!done && started) { finish(FRAME_NEVER_SETTLES, ''); exit(0); }
  });

  // ---- stdin: hello, then answers, one JSON object a line --------------------
  // (runner/stdin_lines.js: lineReader, readLine)

  // @insert stdin-lines

  // Returns how many bytes of data follow the line (a file chunk's), if any.
  function line(buf) {
    const l = readLine(buf, started);
    if (l === null) return 0;
    if (l.k === 'refuse') return exit(2); // PROTOCOL.md: no valid hello, no frames
    if (l.k === 'warm') {
      // Before the hello, from codepod: the type stripper compiles a
      // WebAssembly module on first use (~25 ms, ~15 MB): pay it while
      // waiting, on a fixed string, when the conversation's last program
      // needed it. No program has run; none sees more than a loaded module.
      if (l.msg.ts === true) { try { nodeModule.stripTypeScriptTypes('let a: number;'); } catch (_) {} }
      // Likewise child_process (~6 ms to load) and the shell a command
      // becomes (startShell), once the conversation has run a command: its
      // next execution may well be one.
      if (l.msg.cmd === true) startShell();
    } else if (l.k === 'hello') {
      started = true;
      start(l.msg);
      l.msg = null; // drop every reference to the nonce's string
      refresh();
    } else if (l.k === 'in') {
      commandInput(l.msg);
    } else if (l.k === 'ack') {
      if (onFileAck) { const f = onFileAck; onFileAck = null; f(l.msg); }
    } else if (l.k === 'chunk') {
      // Its bytes follow the line (stdin_lines.js): onBytes gets them.
      chunkMsg = l.msg;
      if (l.msg.n > 0) return l.msg.n;
      onBytes([]);
    } else {
      answer(l.msg);
    }
  }
  let chunkMsg = null; // a file chunk's line, its bytes still to come
  function onBytes(bufs) {
    const m = chunkMsg;
    chunkMsg = null;
    m.bufs = bufs; // its bytes, in pieces
    if (onFileChunk) onFileChunk(m);
  }
  const onData = lineReader(line, onBytes);
  // stdin is one stream for the hello and the answers, built while the runner
  // waits for its program (building it loads net and stream: ~6 ms), so a
  // program pays nothing for it. Until the hello, the stream holds the loop
  // open: the runner waits in it, idle.
  // The first vm.Script that can import() loads Node's module-loader glue:
  // pay that now too, on a script that is compiled and dropped, never run.
  new vm.Script('0', { filename: RUNNER_FILE, importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER });
  // The program's require (codepod names every program script.ts): made
  // now, for the one program this runner will run (~80 us once it comes).
  try { earlyRequire = nodeModule.createRequire(path.join(process.cwd(), REQUIRE_FILE)); } catch (_) {}
  // V8 compiles a regular expression on its first use, and again to machine
  // code on the next (~0.1 ms for these two): both now.
  for (let i = 0; i < 3; i++) { JS_FILE.test(REQUIRE_FILE); GENERIC_CALL.test('return f<T>(x)'); }
  stdin = process.stdin;
  // A pipe or socket (what codepod gives) reads non-blocking: spinning on it
  // for a quick answer (spin) cannot block the program.
  try {
    const st = fstatSync(0);
    if ((st.isFIFO() || st.isSocket()) && stdin._handle) spinBuf = bufAllocUnsafe(1 << 16);
  } catch (_) {}
  stdin.on('data', onData);
  stdin.on('end', () => exit(0)); // codepod is gone
  stdin.on('error', () => exit(0));
  if (leftover && leftover.length) onData(leftover);
})
