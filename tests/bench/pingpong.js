// pingpong.js - `make bench` (g)(d): the baseline of the tool bridge. A Node
// parent and a Node child (this same file and Node) play N sequential JSON-lines
// round trips over pipes, the shape of a tool call (child -> parent request,
// parent -> child answer, the child awaiting each answer in its event loop).
// Prints {"calls_per_s": X, "n": N, "parent_cpu_us_per_call", "child_cpu_us_per_call"}
// (first request read -> last answer read; CPU over the same span).
//   node pingpong.js N
'use strict';
const { spawn } = require('node:child_process');
const readline = require('node:readline');

if (process.argv[2] === '--child') {
  const n = +process.argv[3];
  const rl = readline.createInterface({ input: process.stdin });
  let resolve = null;
  rl.on('line', (line) => { const r = resolve; resolve = null; r(JSON.parse(line)); });
  (async () => {
    let cpu0 = null;
    for (let i = 0; i < n; i++) {
      const answer = new Promise((r) => { resolve = r; });
      process.stdout.write(JSON.stringify({ c: i + 1, t: 'echo', i: { i } }) + '\n');
      if (i === 0) cpu0 = process.cpuUsage();
      const a = await answer;
      if (a.o.i !== i) throw new Error('bad answer');
    }
    const cpu = process.cpuUsage(cpu0);
    process.stdout.write(JSON.stringify({ cpu_us: cpu.user + cpu.system }) + '\n');
    process.exit(0);
  })();
} else {
  const n = +process.argv[2] || 2000;
  const child = spawn(process.execPath, [__filename, '--child', String(n)],
                      { stdio: ['pipe', 'pipe', 'inherit'] });
  const rl = readline.createInterface({ input: child.stdout });
  let t0 = 0, seen = 0, t1 = 0, cpu0 = null, cpu = null, childCpu = 0;
  rl.on('line', (line) => {
    const m = JSON.parse(line);
    if (m.cpu_us !== undefined) { childCpu = m.cpu_us; return; }
    if (seen === 0) { cpu0 = process.cpuUsage(); t0 = process.hrtime.bigint(); }
    seen++;
    if (seen === n) { t1 = process.hrtime.bigint(); cpu = process.cpuUsage(cpu0); }
    child.stdin.write(JSON.stringify({ k: 'res', c: m.c, o: m.i }) + '\n');
  });
  child.on('exit', (code) => {
    const s = Number(t1 - t0) / 1e9;
    if (code !== 0 || seen !== n) process.exit(1);
    process.stdout.write(JSON.stringify({
      calls_per_s: (n - 1) / s, n,
      parent_cpu_us_per_call: (cpu.user + cpu.system) / (n - 1),
      child_cpu_us_per_call: childCpu / (n - 1),
    }) + '\n');
  });
}
