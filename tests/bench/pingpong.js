// pingpong.js - `make bench` (g)(d): the baseline of the tool bridge. A Node
// parent and a Node child (this same file and Node) play N sequential JSON-lines
// round trips over pipes, the shape of a tool call (child -> parent request,
// parent -> child answer, the child awaiting each answer in its event loop).
// Prints {"calls_per_s": X, "n": N} (first request sent -> last answer read).
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
    for (let i = 0; i < n; i++) {
      const answer = new Promise((r) => { resolve = r; });
      process.stdout.write(JSON.stringify({ c: i + 1, t: 'echo', i: { i } }) + '\n');
      const a = await answer;
      if (a.o.i !== i) throw new Error('bad answer');
    }
    process.exit(0);
  })();
} else {
  const n = +process.argv[2] || 2000;
  const child = spawn(process.execPath, [__filename, '--child', String(n)],
                      { stdio: ['pipe', 'pipe', 'inherit'] });
  const rl = readline.createInterface({ input: child.stdout });
  let t0 = 0, seen = 0;
  rl.on('line', (line) => {
    if (seen === 0) t0 = process.hrtime.bigint();
    const m = JSON.parse(line);
    seen++;
    child.stdin.write(JSON.stringify({ k: 'res', c: m.c, o: m.i }) + '\n');
  });
  child.on('exit', (code) => {
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    if (code !== 0 || seen !== n) process.exit(1);
    process.stdout.write(JSON.stringify({ calls_per_s: n / s, n }) + '\n');
  });
}
