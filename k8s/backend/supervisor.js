// codepod supervisor: one long-lived process per pod and codepod replica, over
// one exec stream (k8s/backend/kube_super.h). It starts fresh runner processes when
// told, carries their stdin/stdout/stderr multiplexed over its own stdin and
// stdout, and kills an execution's processes itself, so an execution needs no
// exec request of its own. boot.js evaluates this file as one function
// expression and calls it with (require, leftover). What runs is
// build/gen/supervisor.js: this file with its `// @insert` lines filled in
// at build time (scripts/gen-js.sh).
//
// Frames, both ways (k8s/backend/super_frame_kinds.def, put in as SFRAME_*):
// 0xC5, a kind byte, the channel (uint32 BE), the payload length (uint32
// BE), the payload. Channel 0 is the supervisor itself.
//   codepod -> supervisor:  S start {"argv":[...],"tag":"<32 hex>",
//                           "ws"?:{"bytes":N,"files":N}}   I stdin bytes
//                           K kill {"tag":"<32 hex>"} (process tree, tagged
//                           processes, orphans started after the runner)
//                           U read the usage now (empty)
//                           P the pod helper (channel 0, once, right after
//                           the hello when codepod runs runners under it):
//                           64 hex (the image's SHA-256), the filter's
//                           length (uint32 BE), the filter, the gzipped
//                           image; or "!" and why there is none
//   supervisor -> codepod:  H ready {"v":1,"pid":N,"arch":"x64"} (channel 0)
//                           O stdout bytes   E stderr bytes
//                           X exited {"code":N|null,"signal":N|0,USAGE,"ws"?:
//                           "why","oom"?:true}, last for its channel ("ws":
//                           ended for taking the workspace past its bound;
//                           "oom": a SIGKILL while the container's memory
//                           cgroup counted an OOM kill)
//                           F could not start {"error":"..."}
//                           D {USAGE} after a K, or at once after the runner's
//                           final frame (FINAL_KINDS, found with the nonce of
//                           the hello it carried): every process of it has
//                           been sent SIGKILL and its stderr forwarded
//                           R {USAGE} the reading a U asked for
// USAGE is "cpuUs":N,"maxRssBytes":N: what the runner's processes used
// (runner/sandbox.h, struct codepod_usage), left out when nothing was read.
// A runner's own output only ever travels inside frames of its channel, so
// nothing it writes can reach another channel. stdin EOF (codepod or the
// stream gone): every runner is killed and the supervisor exits.
(function codepodSupervisor(require, leftover) {
  'use strict';
  // @insert frame-kinds
  // @insert sframe-kinds
  const { spawn } = require('node:child_process');
  const fs = require('node:fs');
  const os = require('node:os');
  const path = require('node:path');

  const MAX_IN = 64 << 20; // a frame from codepod larger than this: protocol error
  const DRAIN_MS = 2000;   // after a runner exits, how long its pipes may stay open
  const chans = new Map(); // channel -> { child, pid, start, tag, code, signal, open, timer }
  let outBlocked = false;
  // /proc's clock ticks are USER_HZ, 100 a second on every Linux a pod runs.
  const TICK_US = 10000;
  // How often a running program's runner is read on its own (its CPU time
  // and peak RSS), for a runner that then ends by itself: its figures go
  // with it when it is reaped.
  const SAMPLE_MS = 100;

  function frame(kind, chan, payload) {
    const body = typeof payload === 'string' ? Buffer.from(payload, 'utf8') : payload;
    const h = Buffer.allocUnsafe(SFRAME_HDR);
    h[0] = SFRAME_MAGIC;
    h[1] = kind;
    h.writeUInt32BE(chan >>> 0, 2);
    h.writeUInt32BE(body.length, 6);
    const ok = process.stdout.write(body.length ? Buffer.concat([h, body]) : h);
    if (!ok && !outBlocked) {
      // Backpressure: codepod reads slower than the runners write.
      outBlocked = true;
      for (const c of chans.values()) pause(c, true);
      process.stdout.once('drain', () => {
        outBlocked = false;
        for (const c of chans.values()) pause(c, false);
      });
    }
  }

  function pause(c, yes) {
    for (const s of [c.child.stdout, c.child.stderr]) {
      if (!s || s.destroyed) continue;
      if (yes) s.pause(); else s.resume();
    }
  }

  // The kill scan (k8s/backend/kill_scan.js: killScan, statOf), shared
  // with the killer exec of a pod without a supervisor.
  // @insert kill-scan
  function startOf(pid) {
    const st = statOf(pid);
    return st ? st.start : 0;
  }
  // Everything of one execution (kill_scan.js says what), never this
  // supervisor or another channel's runner.
  function others(root) {
    const o = new Set();
    for (const c of chans.values()) {
      // @root's own execution: its helper and its runner are both its own
      if (c.pid === root || c.hpid === root) continue;
      if (c.pid) o.add(c.pid);
      if (c.hpid) o.add(c.hpid);
    }
    return o;
  }
  function killAll(root, tag, t0) {
    return killScan(root, tag, t0, others(root));
  }

  // ---- the pod helper (k8s/pod_helper/pod_helper.c says what it is) -------
  // helper: { fd, filter } once the P frame set it up; helperErr: why not,
  // when codepod sent one that could not be used (every start then fails:
  // a runner never starts without the helper codepod asked for).
  let helper = null;
  let helperErr = '';
  function setHelper(body) {
    if (body.length && body[0] === 0x21) { helperErr = body.toString('utf8', 1, 200); return; }
    let dir = '', file = '';
    try {
      const want = body.toString('latin1', 0, 64);
      const flen = body.readUInt32BE(64);
      const filter = Buffer.from(body.subarray(68, 68 + flen));
      const image = require('node:zlib').gunzipSync(body.subarray(68 + flen));
      // Written once into a folder of its own, opened, removed: what runs
      // is that descriptor's file, which nobody can open by a name again.
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'codepod-helper-'));
      file = path.join(dir, 'h');
      fs.writeFileSync(file, image, { mode: 0o500, flag: 'wx' });
      const fd = fs.openSync(file, 'r');
      const h = require('node:crypto').createHash('sha256');
      const b = Buffer.allocUnsafe(65536);
      for (let off = 0; ;) {
        const n = fs.readSync(fd, b, 0, b.length, off);
        if (n <= 0) break;
        h.update(b.subarray(0, n));
        off += n;
      }
      if (h.digest('hex') !== want) { fs.closeSync(fd); throw new Error('its image does not match its SHA-256'); }
      helper = { fd, filter };
    } catch (e) {
      helperErr = 'the pod helper could not be set up: ' + String(e && e.message).slice(0, 150);
    } finally {
      if (file) { try { fs.unlinkSync(file); } catch (e) { } }
      if (dir) { try { fs.rmdirSync(dir); } catch (e) { } }
    }
  }

  // The helper's control socket: "r PID LANDLOCK" (the runner runs),
  // "e ERRNO" (it could not be started), "d CPUUS MAXRSSKB" (every process
  // of the execution is gone, reaped; what they used).
  function onHelperLine(chan, c, line) {
    const f = line.split(' ');
    if (f[0] === 'r' && !c.pid) {
      c.pid = +f[1] || 0;
      c.start = c.pid ? startOf(c.pid) : 0;
    } else if (f[0] === 'e') {
      c.helperFail = 'the pod helper could not start the runner (errno ' + (+f[1] || 0) + ')';
    } else if (f[0] === 'd' && !c.helperDone) {
      c.helperDone = true;
      if (c.scan.head) noteUsed(c, { ticks: Math.round((+f[1] || 0) / TICK_US), hwmKb: +f[2] || 0 });
      if (c.killed) killed(chan, c);
    }
  }

  // ---- usage (runner/sandbox.h, struct codepod_usage) ----------------------
  // c.used: the largest figures read so far, null before any reading.
  function noteUsed(c, u) {
    if (!u) return;
    if (!c.used) c.used = { ticks: 0, hwmKb: 0 };
    if (u.ticks > c.used.ticks) c.used.ticks = u.ticks;
    if (u.hwmKb > c.used.hwmKb) c.used.hwmKb = u.hwmKb;
  }
  function usageJson(c) {
    return c.used ? '"cpuUs":' + c.used.ticks * TICK_US + ',"maxRssBytes":' + c.used.hwmKb * 1024 : '';
  }
  // The CPU time of the children this supervisor reaped (fields 16 and 17
  // of its own stat): a runner reaped adds its own and its reaped
  // children's, which is how a runner that ended by itself is counted.
  function reapedTicks() {
    const n = readProc('/proc/self/stat');
    if (n <= 0) return 0;
    const f = procBuf.toString('latin1', procBuf.lastIndexOf(0x29, n - 1) + 2, n).split(' ', 15);
    return (+f[13] || 0) + (+f[14] || 0);
  }
  let reaped = reapedTicks();
  const sampler = setInterval(() => {
    for (const c of chans.values()) {
      if (!c.scan.head || c.scan.ended || c.exited || !c.pid) continue;
      const st = statOf(c.pid);
      if (st) noteUsed(c, { ticks: st.ticks, hwmKb: hwmOf(c.pid) });
    }
  }, SAMPLE_MS);
  sampler.unref();

  // The runner's stderr pipe read to empty now, forwarded as E frames after
  // what the stream has buffered; false when that cannot be done.
  function drainErr(chan, c) {
    const s = c.child.stderr;
    if (!s || s.destroyed || s.readableEnded) return true;
    const fd = s._handle && s._handle.fd;
    if (!(fd >= 0)) return false;
    while (s.read() !== null) { /* what the stream buffered: read() emits it as 'data' */ }
    const buf = Buffer.allocUnsafe(65536);
    for (let i = 0; i < 64; i++) {
      let n;
      try { n = fs.readSync(fd, buf, 0, buf.length, null); } catch (e) { return e.code === 'EAGAIN'; }
      if (n === 0) return true;
      frame(SFRAME_ERR, chan, Buffer.from(buf.subarray(0, n)));
    }
    return false;
  }

  // The kernel's OOM kills in this container's memory cgroup so far (cgroup
  // v1: memory.oom_control, v2: memory.events; each container sees its own
  // group at /sys/fs/cgroup), or -1 when neither can be read. The OOM killer
  // takes the largest process, most often a runner, and the container lives
  // on: the kubelet reports OOMKilled only when its first process is the one
  // killed, so only this count tells a runner's SIGKILL was for memory.
  function oomKills() {
    for (const f of ['/sys/fs/cgroup/memory/memory.oom_control', '/sys/fs/cgroup/memory.events']) {
      try {
        const m = /^oom_kill (\d+)$/m.exec(fs.readFileSync(f, 'latin1'));
        if (m) return +m[1];
      } catch (e) { /* the other layout, or none */ }
    }
    return -1;
  }

  function report(chan) {
    const c = chans.get(chan);
    if (!c || c.reported) return;
    c.reported = true;
    clearTimeout(c.timer);
    chans.delete(chan);
    const u = usageJson(c);
    // A SIGKILL while the container's count of OOM kills grew: for memory.
    const oom = c.signal === 9 && c.oom0 >= 0 && oomKills() > c.oom0;
    frame(SFRAME_EXIT, chan, '{"code":' + JSON.stringify(c.code) + ',"signal":' + (+c.signal || 0) +
      (u ? ',' + u : '') + (c.wsOver ? ',"ws":' + JSON.stringify(c.wsOver) : '') +
      (oom ? ',"oom":true' : '') + '}');
  }

  // ---- the workspace's bound (maxWorkspaceBytes, maxWorkspaceFiles) --------
  // A pod's workspace, an emptyDir, has no bound a program meets as ENOSPC:
  // past the volume's sizeLimit (or the container's ephemeral-storage) the
  // kubelet evicts the pod, and the workspace goes with it. So while a
  // channel started with a bound ("ws") runs an execution, this supervisor
  // measures the workspace (the folder it runs in: the blocks its entries
  // hold and how many there are, links not followed) as the execution
  // begins and every WS_MS (four times a walk's own time when that is
  // longer: a walk blocks this process), and ends the execution that takes it past its bound and past
  // what it held when the execution began (so a program may still clean up
  // a workspace that is over), well before the kubelet looks (every 10 s).
  // Its exit says why (X's "ws").
  const WS_MS = 100;
  const wsRoot = process.cwd();
  let wsTimer = null;
  function wsMeasure(stopAt) {
    let bytes = 0, files = 0;
    const dirs = [wsRoot];
    while (dirs.length && files <= stopAt) {
      const dir = dirs.pop();
      let names;
      try { names = fs.readdirSync(dir); } catch (e) { continue; }
      for (const name of names) {
        let st;
        try { st = fs.lstatSync(dir + '/' + name); } catch (e) { continue; } // gone meanwhile
        files++;
        bytes += st.blocks * 512;
        if (st.isDirectory()) dirs.push(dir + '/' + name);
      }
    }
    return { bytes, files };
  }
  function wsLimit(c) {
    return c.ws.files * 2 + 1000; // far past the bound: the rest need not be counted
  }
  function wsWatch() {
    wsTimer = null;
    let live = 0, stopAt = 0;
    for (const c of chans.values()) {
      if (c.ws && c.wsBase && !c.killed && !c.exited) { live++; stopAt = Math.max(stopAt, wsLimit(c)); }
    }
    if (!live) return;
    const t0 = Date.now();
    const used = wsMeasure(stopAt);
    for (const [chan, c] of chans) {
      if (!c.ws || !c.wsBase || c.killed || c.exited) continue;
      if (used.bytes > c.ws.bytes && used.bytes > c.wsBase.bytes) {
        c.wsOver = 'the workspace holds ' + used.bytes + ' bytes, past its bound of ' + c.ws.bytes + ' (maxWorkspaceBytes)';
      } else if (used.files > c.ws.files && used.files > c.wsBase.files) {
        c.wsOver = 'the workspace holds ' + used.files + ' files, past its bound of ' + c.ws.files + ' (maxWorkspaceFiles)';
      } else {
        continue;
      }
      killNow(chan, c);
    }
    wsArm(Math.max(WS_MS, (Date.now() - t0) * 4));
  }
  function wsArm(ms) {
    if (wsTimer) return;
    wsTimer = setTimeout(wsWatch, ms);
    wsTimer.unref();
  }
  // The execution's hello went by (its program starts next): what the
  // workspace holds before it.
  function wsBegin(c) {
    c.wsBase = wsMeasure(wsLimit(c));
    wsArm(WS_MS);
  }

  function start(chan, msg) {
    if (chans.has(chan) || !Array.isArray(msg.argv) || msg.argv.length < 1) {
      frame(SFRAME_FAIL, chan, JSON.stringify({ error: 'bad start request' }));
      return;
    }
    if (helperErr) {
      frame(SFRAME_FAIL, chan, JSON.stringify({ error: helperErr }));
      return;
    }
    let child;
    try {
      // Its own process group, so its tree can be killed as one; under the
      // helper, exec'd from the descriptor setHelper() checked (fd 3 of the
      // child), its control socket on fd 4.
      child = helper
        ? spawn('/proc/self/fd/3', [process.execPath].concat(msg.argv.slice(1).map(String)),
                { argv0: 'codepod-helper', stdio: ['pipe', 'pipe', 'pipe', helper.fd, 'pipe'],
                  detached: true, env: process.env })
        : spawn(process.execPath, msg.argv.slice(1).map(String),
                { stdio: ['pipe', 'pipe', 'pipe'], detached: true, env: process.env });
    } catch (e) {
      frame(SFRAME_FAIL, chan, JSON.stringify({ error: String(e && e.message) }));
      return;
    }
    const tag = typeof msg.tag === 'string' && /^[0-9a-f]{32}$/.test(msg.tag) ? msg.tag : '';
    const w = msg.ws;
    const ws = w && w.bytes > 0 && w.files > 0 ? { bytes: +w.bytes, files: +w.files } : null;
    // pid: the runner's (under the helper: once it says so); hpid: the helper's.
    const c = { child, pid: helper ? 0 : child.pid || 0, hpid: helper ? child.pid || 0 : 0, start: 0,
                code: null, signal: 0, open: 2, tag, reported: false, timer: null, exited: false,
                killed: false, used: null, scan: newScan(), ctl: null, helperDone: false,
                helperFail: '', dSent: false, ws, wsBase: null, wsOver: '', oom0: oomKills() };
    chans.set(chan, c);
    c.start = c.pid ? startOf(c.pid) : 0;
    if (helper && child.stdio[4]) {
      c.ctl = child.stdio[4];
      const len = Buffer.allocUnsafe(4);
      len.writeUInt32BE(helper.filter.length, 0);
      c.ctl.write(Buffer.concat([len, helper.filter]));
      let text = '';
      c.ctl.on('data', (b) => {
        text += b.toString('latin1');
        if (text.length > 4096) text = text.slice(-4096);
        for (let i; (i = text.indexOf('\n')) >= 0;) {
          const line = text.slice(0, i);
          text = text.slice(i + 1);
          onHelperLine(chan, c, line);
        }
      });
      c.ctl.on('error', () => {});
      c.ctl.on('close', () => {
        c.ctlEnded = true;
        if (c.pendingExit) onExit(c.pendingExit[0], c.pendingExit[1]);
      });
    }
    child.on('error', (e) => {
      if (!c.pid) {
        chans.delete(chan);
        frame(SFRAME_FAIL, chan, JSON.stringify({ error: String(e && e.message) }));
      }
    });
    child.stdin.on('error', () => {});
    const pipeEnd = () => { if (--c.open === 0 && c.exited) report(chan); };
    child.stdout.on('data', (b) => { frame(SFRAME_OUT, chan, b); if (watchOut(c.scan, b)) killNow(chan, c); });
    child.stderr.on('data', (b) => frame(SFRAME_ERR, chan, b));
    child.stdout.on('end', pipeEnd);
    child.stderr.on('end', pipeEnd);
    child.stdout.on('error', () => {});
    child.stderr.on('error', () => {});
    if (outBlocked) pause(c, true);
    child.on('exit', (code, sig) => {
      // Under the helper, its control socket is read to its end first: its
      // "r" and "d" lines come before its exit.
      if (c.ctl && !c.ctlEnded) c.pendingExit = [code, sig];
      else onExit(code, sig);
    });
    function onExit(code, sig) {
      c.exited = true;
      c.code = code;
      c.signal = sig ? (os.constants.signals[sig] || 9) : 0;
      // The runner is reaped: what it and the children it reaped used is now
      // in this process's own reaped figures. Node reaps every child that
      // ended before it tells of any, so when another runner is gone from
      // /proc without its exit told yet, the growth is theirs together and
      // is not taken (the readings before stand).
      const now = reapedTicks();
      let mine = now - reaped;
      reaped = now;
      for (const o of chans.values()) {
        const op = o.hpid || o.pid;
        if (o !== c && op && !o.exited && !fs.existsSync('/proc/' + op)) mine = 0;
      }
      if (c.hpid && !c.helperDone) {
        // The helper is gone without its "d" (it could not start the
        // runner, or was killed): the scan takes what it left.
        const left = killAll(c.pid || c.hpid, c.tag || '', c.start);
        if (c.scan.head) noteUsed(c, { ticks: mine + left.ticks, hwmKb: left.hwmKb });
        if (c.killed) killed(chan, c);
        if (!c.pid) {
          // never started: say why, as a spawn failure would
          chans.delete(chan);
          clearTimeout(c.timer);
          c.reported = true;
          frame(SFRAME_FAIL, chan, JSON.stringify({ error: c.helperFail || 'the pod helper ended before the runner started' }));
          return;
        }
      } else if (c.hpid) {
        // the helper took every process of it and said what they used
        if (c.scan.head) noteUsed(c, { ticks: mine, hwmKb: 0 });
      } else if (!c.killed) {
      // leftovers of a program that ended by itself (after a K, nothing of
      // it can have started anything since: every process got SIGKILL)
        const left = killAll(c.pid, c.tag || '', c.start);
        if (c.scan.head) noteUsed(c, { ticks: mine + left.ticks, hwmKb: left.hwmKb });
      } else if (c.scan.head) {
        noteUsed(c, { ticks: mine, hwmKb: 0 });
      }
      if (c.open === 0) report(chan);
      else c.timer = setTimeout(() => report(chan), DRAIN_MS);
    }
  }

  // The runner's end, seen here: codepod kills an execution when the
  // runner's final frame (FINAL_KINDS, runner/PROTOCOL.md) comes, and its K
  // would cross the API server and back once more before the D. So the
  // supervisor reads the channel's nonce off the hello it carries (the line
  // after the runner's source and any warm line), finds frames in the runner's stdout by the
  // rules of runner/frame.h, and after a final one kills at once and sends D
  // behind it; the K that follows finds the work done. (The nonce is no
  // secret from the program: one that forges a final frame ends only
  // itself, as it would through codepod.) The scan is
  // k8s/backend/frame_scan.js (newScan, watchIn, watchOut), a part of its
  // own so that tests/node/scan.test.mjs can hold it to those rules.
  // @insert frame-scan

  // Everything of the channel's execution gets SIGKILL; once its stderr
  // written before now is forwarded (a final frame on stdout does not order
  // the other pipe), codepod may deliver without waiting for the exit (X
  // still follows).
  function killNow(chan, c) {
    if (c.killed) return;
    c.killed = true;
    if (c.hpid && !c.exited) {
      // The helper kills every process of it; its "d" says when none can
      // run again, and what they used, read before each was signalled (it
      // then reaps them all before it exits).
      try { process.kill(c.hpid, 'SIGCONT'); } catch (e) { }
      if (c.ctl && !c.ctl.destroyed) c.ctl.write('k');
      else { try { process.kill(c.hpid, 'SIGKILL'); } catch (e) { } }
      if (c.helperDone) killed(chan, c);
      return;
    }
    noteUsed(c, killAll(c.pid, c.tag || '', c.start));
    killed(chan, c);
  }
  function killed(chan, c) {
    if (c.dSent) return;
    c.dSent = true;
    if (drainErr(chan, c)) frame(SFRAME_DONE, chan, '{' + usageJson(c) + '}');
  }

  function onFrame(kind, chan, body) {
    const c = chans.get(chan);
    if (kind === SFRAME_START) {
      let msg = null;
      try { msg = JSON.parse(body.toString('utf8')); } catch (e) { msg = {}; }
      start(chan, msg || {});
    } else if (kind === SFRAME_HELPER) {
      if (chan === 0 && !helper && !helperErr) setHelper(body);
    } else if (kind === SFRAME_INPUT) {
      if (c && c.scan.inPhase < 3) watchIn(c.scan, body);
      if (c && c.ws && !c.wsBase && c.scan.head) wsBegin(c);
      if (c && !c.exited && c.child.stdin.writable) c.child.stdin.write(body);
    } else if (kind === SFRAME_KILL) {
      if (!c) return;
      let msg = {};
      try { msg = JSON.parse(body.toString('utf8')) || {}; } catch (e) { /* kill anyway */ }
      if (typeof msg.tag === 'string' && /^[0-9a-f]{32}$/.test(msg.tag)) c.tag = msg.tag;
      killNow(chan, c);
    } else if (kind === SFRAME_USAGE) {
      if (!c || c.killed || c.exited) return; // D or X carries the figures
      if (c.pid || c.hpid) noteUsed(c, usageScan(c.hpid || c.pid, c.start, others(c.hpid || c.pid)));
      frame(SFRAME_READING, chan, '{' + usageJson(c) + '}');
    } else {
      shutdown(3);
    }
  }

  // stdin's pieces not yet a whole frame. A frame of a workspace's restore
  // is hundreds of KiB in 64 KiB reads: the pieces are joined once, when
  // the frame is whole, not on every read (each copy then grew with it).
  let inParts = [];
  let inLen = 0;
  function feed(chunk) {
    inParts.push(chunk);
    inLen += chunk.length;
    for (;;) {
      if (inLen < SFRAME_HDR) return;
      if (inParts[0].length < SFRAME_HDR) inParts = [Buffer.concat(inParts, inLen)];
      const head = inParts[0];
      if (head[0] !== SFRAME_MAGIC) { shutdown(3); return; }
      const len = head.readUInt32BE(6);
      if (len > MAX_IN) { shutdown(3); return; }
      const end = SFRAME_HDR + len;
      if (inLen < end) return;
      // Joined here: a buffer of this frame's (and of the next's first bytes,
      // which the next join copies out); else a view of stdin's piece, copied
      // so that what is kept of it (a channel's queued input) holds no more.
      const joined = inParts.length > 1;
      const buf = joined ? Buffer.concat(inParts, inLen) : head;
      const kind = buf[1], chan = buf.readUInt32BE(2);
      const body = buf.subarray(SFRAME_HDR, end);
      const rest = buf.subarray(end);
      inParts = rest.length ? [rest] : [];
      inLen = rest.length;
      onFrame(kind, chan, joined ? body : Buffer.from(body));
    }
  }

  function shutdown(code) {
    // A helper kills its execution when its control socket closes, as it
    // does when this process exits; a scan here would kill the helper first
    // and hand its orphans to the pod's PID 1.
    for (const c of chans.values()) if (!c.hpid) killAll(c.pid, c.tag || '', c.start);
    process.exit(code);
  }

  process.stdout.on('error', () => shutdown(0));
  frame(SFRAME_HELLO, 0, JSON.stringify({ v: 1, pid: process.pid, arch: process.arch }));
  if (leftover && leftover.length) feed(leftover);
  process.stdin.on('data', feed);
  process.stdin.on('end', () => shutdown(0));
  process.stdin.on('error', () => shutdown(0));
});
