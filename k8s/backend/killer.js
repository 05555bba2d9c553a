// killer.js - the kill scan (k8s/backend/kill_scan.js) as a program of its
// own, for a pod without a supervisor, or whose supervisor is gone:
// k8s/backend/kube_backend.c starts `node -e BOOT ROOT TAG START` in the
// pod through a second exec request when an execution ends (closing the
// runner's stream does not end its processes), and writes this program on
// its stdin as to a runner's (runner/boot.js evaluates it as one function
// expression). The exec request's URL has no room for the program itself:
// libwebsockets sends at most about 2 KB of request line. ROOT is the
// runner's PID (0: unknown), TAG the execution's tag, START the runner's
// start in clock ticks since boot (0: unknown).
(function codepodKiller(require) {
  'use strict';
  const fs = require('node:fs');
  // @insert kill-scan
  killScan(+process.argv[1] || 0, process.argv[2] || '', +process.argv[3] || 0, new Set());
})
