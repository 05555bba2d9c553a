#!/usr/bin/env python3
"""runner_probe.py - where the runner's startup time goes (diagnosis for
`make bench`; figures only, nothing asserted).

Starts Node the way codepod does without bubblewrap (same flags, boot.js on
the command line, runner.js and the hello frame on stdin) and times spawn ->
ready (Y) -> result (R) -> exit, for variants of the runner made in memory
(runner/runner.js itself is not changed):

  bare        node -e 0
  bare-flags  node with the runner's flags, -e 0
  boot-exit   boot.js reads a one-line "runner" that exits at once: the cost
              of the stdin stream and of boot itself
  boot-stdio  the same runner touching process.stdout and process.stderr first
  runner      runner.js as shipped, `return 1` (plain JS: no type stripping)
  runner-ts   runner.js, `let x: number = 1; return x` (the stripper runs)
  no-dynimp   `return 1`, vm.Script without importModuleDynamically
  sync-boot   a sketch of the suggested fix, `return 1`: boot.js reads the
              runner and the hello line with fs.readSync(0) (no stream, no
              loop turn), and the runner opens process.stdin in a
              setImmediate after the program started instead of first thing
  sync-lazy   sync-boot, and process.stdout/stderr captured on first access
              (a lazy getter) instead of at start: a pipe stream costs Node
              ~4-5 ms the first time (net.Socket and its modules)

Runner variants are killed at their result frame, as codepod does.

usage: runner_probe.py [--runs N] [--node PATH]   (prints JSON)
"""
import json
import os
import selectors
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def read(p):
    with open(os.path.join(ROOT, p), "rb") as f:
        return f.read()


def once(node, runner, src, env, flags=True, bare=False, boot=None):
    nonce = "0123456789abcdef0123456789abcdef"
    boot = boot or read("runner/boot.js").decode()
    pre = [node, "--disable-warning=ExperimentalWarning", "--max-old-space-size=512"] if flags else [node]
    argv = pre + ["-e", "0" if bare else boot]
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env, cwd="/tmp")
    marks = {}
    if not bare:
        hello = json.dumps({"k": "hello", "nonce": nonce, "src": src, "file": "script.ts",
                            "tools": [], "lim": {"maxToolInputBytes": 65536,
                                                 "maxResultBytes": 32768, "maxDepth": 32}})
        p.stdin.write(b"%d\n" % len(runner) + runner + hello.encode() + b"\n")
        p.stdin.flush()
        sel = selectors.DefaultSelector()
        sel.register(p.stdout, selectors.EVENT_READ)
        buf = b""
        while True:
            sel.select()
            chunk = os.read(p.stdout.fileno(), 65536)
            if not chunk:
                break
            buf += chunk
            now = time.perf_counter()
            if b" Y " in buf and "ready" not in marks:
                marks["ready"] = now
            if b" R " in buf or b" T " in buf:
                marks["result"] = now
                p.kill()  # codepod kills the tree at the result
                break
        sel.close()
    p.wait()
    t_exit = time.perf_counter()
    if p.stdin:
        p.stdin.close()
    p.stdout.close()
    ms = lambda t: (t - t0) * 1000
    return {"exit": ms(t_exit), "ready": ms(marks["ready"]) if "ready" in marks else None,
            "result": ms(marks["result"]) if "result" in marks else None}


def main():
    runs, node = 20, os.environ.get("CODEPOD_NODE", "node")
    a = sys.argv[1:]
    while a:
        if a[0] == "--runs":
            runs = int(a[1]); a = a[2:]
        elif a[0] == "--node":
            node = a[1]; a = a[2:]
        else:
            sys.exit("usage: runner_probe.py [--runs N] [--node PATH]")
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}
    runner = read("runner/runner.js")
    no_dyn = runner.replace(
        b"importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,", b"")
    boot_exit = b"(function(){process.exit(0)})"
    boot_stdio = b"(function(){process.stdout;process.stderr;process.exit(0)})"
    js, ts = "return 1", "let x: number = 1; return x"
    lazy = runner.replace(b"const stdin = process.stdin;",
                          b"let stdin = { ref() {}, unref() {}, on() {} };")
    lazy = lazy.replace(
        b"  stdin.on('data', onData);\n  stdin.on('end', () => exit(0)); // codepod is gone\n"
        b"  stdin.on('error', () => exit(0));\n  if (leftover && leftover.length) onData(leftover);",
        b"  if (leftover && leftover.length) onData(leftover);\n"
        b"  setImmediate(() => { stdin = process.stdin; stdin.on('data', onData);"
        b" stdin.on('end', () => exit(0)); stdin.on('error', () => exit(0));"
        b" if (done) stdin.unref(); else refresh(); });")
    assert lazy.count(b"setImmediate(() => { stdin") == 1, "runner.js changed: update the sketch"
    lazy_cap = lazy.replace(
        b"  capture(process.stdout, 'O');\n  capture(process.stderr, 'E');",
        b"  for (const [nm, kind] of [['stdout', 'O'], ['stderr', 'E']]) {\n"
        b"    const d = Object.getOwnPropertyDescriptor(process, nm); let st = null;\n"
        b"    Object.defineProperty(process, nm, { configurable: true, enumerable: d.enumerable,\n"
        b"      get() { if (!st) { st = d.get.call(process); capture(st, kind); } return st; } });\n"
        b"  }")
    assert lazy_cap != lazy, "runner.js changed: update the sketch"
    sync_boot = ("{const fs=require('fs'),t=Buffer.alloc(65536);let b=Buffer.alloc(0),n=-1;"
                 "for(;;){const k=fs.readSync(0,t);if(!k)break;b=Buffer.concat([b,t.subarray(0,k)]);"
                 "if(n<0){const i=b.indexOf(10);if(i<0)continue;n=+b.subarray(0,i);b=b.subarray(i+1)}"
                 "if(b.length>n&&b.indexOf(10,n)>=0)break}"
                 "const r=b.subarray(0,n)+'',l=b.subarray(n);"
                 "require('vm').runInThisContext(r,{filename:'codepod-runner.js'})(require,l)}")
    variants = [
        ("bare", lambda: once(node, b"", "", env, flags=False, bare=True)),
        ("bare-flags", lambda: once(node, b"", "", env, bare=True)),
        ("boot-exit", lambda: once(node, boot_exit, js, env)),
        ("boot-stdio", lambda: once(node, boot_stdio, js, env)),
        ("runner", lambda: once(node, runner, js, env)),
        ("runner-ts", lambda: once(node, runner, ts, env)),
        ("no-dynimp", lambda: once(node, no_dyn, js, env)),
        ("sync-boot", lambda: once(node, lazy, js, env, boot=sync_boot)),
        ("sync-lazy", lambda: once(node, lazy_cap, js, env, boot=sync_boot)),
    ]
    res = {k: [] for k, _ in variants}
    for _ in range(2):  # warm-up
        for _, f in variants:
            f()
    for _ in range(runs):
        for k, f in variants:
            res[k].append(f())
    out = {"runs": runs}
    for k, rs in res.items():
        o = {}
        for m in ("ready", "result", "exit"):
            v = [r[m] for r in rs if r[m] is not None]
            if v:
                o[m + "_ms"] = round(statistics.median(v), 2)
        out[k] = o
    print(json.dumps(out))


if __name__ == "__main__":
    main()
