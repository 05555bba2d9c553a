// kill_scan.js - every process of one execution in a pod gets SIGKILL.
// The one copy for both places that kill in a pod: the supervisor
// (k8s/backend/supervisor.js, after each execution) and, in a pod without
// one, the killer exec of k8s/backend/kube_backend.c (k8s/backend/killer.js).
// The build puts this file where either has the line `// @insert kill-scan`
// (scripts/gen-js.sh): function declarations and their state, using `fs`
// (node:fs) from around them; killScan() is the entry, usageScan() reads
// the same set without signalling it (the supervisor's usage readings).
//
// Taken: the runner's process tree and process group, every process
// carrying the execution's tag in its environment (the runner sets
// CODEPOD_TAG before the program runs, and every process it starts
// inherits it), and every orphan (a child of the pod's PID 1) started after
// the runner, in a later clock tick, so the pod's own processes, started
// before it, are never taken: a daemon that double-forked with an empty
// environment is found too. (An orphan of another execution running at the
// same time is taken as well; it escaped its own execution's end the same
// way.) Never PID 1, this process, or a process of @others (the runners of
// other executions) or below one. It needs nothing but node and /proc.

// /proc files, read with one reused buffer: open, read to EOF, close (no
// fstat, no new buffer per file as readFileSync takes). A scan reads two
// per process, on the path of every execution's outcome.
let procBuf = Buffer.allocUnsafe(4096);
// An environment larger than this is read only this far.
const PROC_MAX = 4 << 20;
function readProc(path) {
  let fd;
  try { fd = fs.openSync(path, 'r'); } catch (e) { return -1; }
  let n = 0;
  try {
    for (;;) {
      if (n === procBuf.length) {
        if (n >= PROC_MAX) break;
        const b = Buffer.allocUnsafe(n * 2);
        procBuf.copy(b, 0, 0, n);
        procBuf = b;
      }
      const r = fs.readSync(fd, procBuf, n, procBuf.length - n, null);
      if (r === 0) break;
      n += r;
    }
  } catch (e) {
    n = -1;
  } finally {
    fs.closeSync(fd);
  }
  return n;
}
// Fields 4 (ppid) and 22 (start time, clock ticks since boot) of
// /proc/<pid>/stat, and 14 to 17 summed (ticks: the CPU time of its
// threads and of the children it reaped), or null when the process is gone.
function statOf(pid) {
  const n = readProc('/proc/' + pid + '/stat');
  if (n <= 0) return null;
  // after "comm) "
  const s = procBuf.toString('latin1', procBuf.lastIndexOf(0x29, n - 1) + 2, n);
  const f = s.split(' ', 20);
  return { ppid: +f[1], start: +f[19], ticks: (+f[11] || 0) + (+f[12] || 0) + (+f[13] || 0) + (+f[14] || 0) };
}
// VmHWM of /proc/<pid>/status (the peak resident set), KiB; 0 when gone.
function hwmOf(pid) {
  const n = readProc('/proc/' + pid + '/status');
  if (n <= 0) return 0;
  const i = procBuf.indexOf('\nVmHWM:', 0, 'latin1');
  if (i < 0 || i >= n) return 0;
  return parseInt(procBuf.toString('latin1', i + 7, Math.min(n, i + 40)).trim(), 10) || 0;
}
// Whether /proc/<pid>/environ holds exactly the entry `mark`.
function hasEnv(pid, mark) {
  const n = readProc('/proc/' + pid + '/environ');
  for (let i = n > 0 ? procBuf.indexOf(mark, 0, 'latin1') : -1; i >= 0 && i < n;
    i = procBuf.indexOf(mark, i + 1, 'latin1')) {
    const e = i + mark.length;
    if ((i === 0 || procBuf[i - 1] === 0) && e <= n && (e === n || procBuf[e] === 0)) return true;
  }
  return false;
}

// The /proc entries (none without /proc: the runner and its group only).
function procNames() {
  try { return fs.readdirSync('/proc'); } catch (e) { return []; }
}

// One pass over /proc into @st = { seen, kids, ticksOf, hit }: each process
// not seen yet (and not this one, PID 1 or one of @others) gets its CPU
// ticks and its parent noted; orphans started after @t0 (clock ticks since
// boot, 0: none) and, with @mark, processes whose environment holds it are
// taken into @st.hit; then every descendant of what @st.hit holds.
function scanPass(st, t0, mark, others) {
  for (const d of procNames()) {
    if (!/^\d+$/.test(d)) continue;
    const p = +d;
    if (st.seen.has(p) || p === process.pid || p === 1 || others.has(p)) continue;
    st.seen.add(p);
    const s = statOf(p);
    if (!s) continue;
    st.ticksOf.set(p, s.ticks);
    if (!st.kids.has(s.ppid)) st.kids.set(s.ppid, []);
    st.kids.get(s.ppid).push(p);
    if (s.ppid === 1 && t0 > 0 && s.start > t0) st.hit.add(p);
    else if (mark && !st.hit.has(p) && hasEnv(p, mark)) st.hit.add(p);
  }
  const q = [...st.hit];
  while (q.length) {
    const p = q.pop();
    for (const c of st.kids.get(p) || []) if (!st.hit.has(c) && !others.has(c)) { st.hit.add(c); q.push(c); }
  }
  st.hit.delete(process.pid);
  st.hit.delete(1);
}

function newScanState(root) {
  const st = { seen: new Set(), kids: new Map(), ticksOf: new Map(), hit: new Set() };
  if (root > 1) st.hit.add(root);
  return st;
}

// Adds what @pids used (their ticks as read, their peak RSS now) to @used.
function addUsage(used, pids, ticksOf) {
  for (const p of pids) {
    used.ticks += ticksOf.get(p) || 0;
    used.hwmKb = Math.max(used.hwmKb, hwmOf(p));
  }
  return used;
}

// @root: the runner's PID (0: unknown, then no tree); @tag: 32 hex or ''
// (none); @t0: the runner's start in clock ticks since boot (0: unknown,
// then no orphans); @others: a Set of PIDs to spare.
// A round finds what forked meanwhile; at most three, fewer when a round
// finds nothing new. A process is read once: a later round reads only
// PIDs it has not seen (what an earlier round signalled is dying, and
// reading the /proc files of a dying process waits for its memory to be
// torn down). Each is stopped before any is killed, so none of them forks
// past the round.
// Returns what the processes taken had used, read before any of them was
// signalled: { ticks, hwmKb } (CPU clock ticks, theirs and their reaped
// children's; the largest peak RSS of one of them).
function killScan(root, tag, t0, others) {
  const st = newScanState(root), signalled = new Set();
  const used = { ticks: 0, hwmKb: 0 };
  for (let round = 0; round < 3; round++) {
    scanPass(st, t0, tag ? 'CODEPOD_TAG=' + tag : '', others);
    const fresh = [...st.hit].filter((p) => !signalled.has(p));
    addUsage(used, fresh, st.ticksOf);
    // (no group: the runner did not make one)
    if (root > 1) { try { process.kill(-root, 'SIGKILL'); } catch (e) { } }
    if (!fresh.length) break;
    // (a process gone meanwhile throws: nothing to do)
    for (const p of fresh) { try { process.kill(p, 'SIGSTOP'); } catch (e) { } }
    for (const p of fresh) { try { process.kill(p, 'SIGKILL'); } catch (e) { } signalled.add(p); }
  }
  return used;
}

// What the runner @root's processes have used so far, read and never
// signalled: its tree and the orphans started after it (@t0), as killScan
// would take them but for tagged processes elsewhere (reading every
// environment would wait on processes being torn down, and a process that
// carries the tag and is neither is rare: reparented to another reaper).
// Returns { ticks, hwmKb } as killScan.
function usageScan(root, t0, others) {
  const st = newScanState(root);
  scanPass(st, t0, '', others);
  return addUsage({ ticks: 0, hwmKb: 0 }, st.hit, st.ticksOf);
}
