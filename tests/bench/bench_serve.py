#!/usr/bin/env python3
"""bench_serve.py - `make bench` section (e): codepod's
session protocol over the WebSocket of `codepod serve --listen` on loopback.

1. Tool-call round trip: one program making COUNT sequential
   `await tools.echo({ i })`, every call answered by this client as soon as
   it arrives; over `serve --listen` (WebSocket) against the same program over
   `serve --stdio`, both answered by the same kind of client (asyncio, one
   coroutine reading messages and writing tool_result at once). Alternating,
   median of RUNS each; the ratio is WebSocket / stdio (goal <= 1.3x).
2. N executions at once over S sessions (WebSocket connections to one
   `serve --listen`), each awaiting one tool call answered after ~1 s: all
   must succeed; codepod's peak RSS (VmHWM of /proc/PID/status).

The client is aiohttp (Debian's python3-aiohttp; tests/serve has its own
stdlib client, too slow for this). So a reader can tell whether the client
was the bottleneck, each figure carries the CPU time the client used
(getrusage of this process) next to codepod's own (utime+stime of
/proc/PID/stat; its descendants, the runner under bwrap, are counted apart:
for the round trip read from /proc at the last call, for the concurrent
executions from cutime+cstime once reaped).

Prints one JSON line on stdout. Exit 1 when an execution failed, 2 when the
bench could not run.

usage: bench_serve.py [--quick] [--calls-only]   (--calls-only: the round trip alone)
env:   CODEPOD_BIN (the built codepod)
"""
import asyncio
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOKEN = "bench-token-0123456789abcdef0123"
TICK = os.sysconf("SC_CLK_TCK")

ECHO = {"name": "echo", "description": "echo", "inputSchema": {"type": "object"}}
WAIT = {"name": "wait", "description": "answered after ~1 s", "inputSchema": {"type": "object"}}


def calls_js(n):
    return ("const n = %d;\n"
            "for (let i = 0; i < n; i++) {\n"
            "  const r = await tools.echo({ i });\n"
            "  if (r.i !== i) throw new Error('echo returned ' + JSON.stringify(r) + ' for ' + i);\n"
            "}\n"
            "return n;\n" % n)


def proc_cpu(pid):
    """(own seconds, reaped children seconds) from /proc/PID/stat."""
    with open("/proc/%d/stat" % pid) as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    ut, st, cut, cst = (int(x) for x in fields[11:15])
    return (ut + st) / TICK, (cut + cst) / TICK


def descendants_cpu(pid):
    """utime+stime seconds of every living descendant of pid (its Node runner)."""
    parent, cpu = {}, {}
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % e) as f:
                s = f.read()
        except OSError:
            continue
        fields = s[s.rindex(")") + 2:].split()
        parent[int(e)] = int(fields[1])
        cpu[int(e)] = (int(fields[11]) + int(fields[12])) / TICK
    total = 0.0
    for p in cpu:
        q = parent.get(p)
        while q and q != pid:
            q = parent.get(q)
        if q == pid:
            total += cpu[p]
    return total


def proc_status_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return None


def self_cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Failed(Exception):
    pass


class Skip(Exception):
    pass


# ----------------------------------------------------------------- transports

class StdioConn:
    """`codepod serve --stdio`: JSON lines on its stdin/stdout."""

    def __init__(self, proc):
        self.proc = proc

    async def send(self, obj):
        self.proc.stdin.write(json.dumps(obj).encode() + b"\n")

    def send_nowait(self, obj):
        self.proc.stdin.write(json.dumps(obj).encode() + b"\n")

    async def recv(self):
        line = await self.proc.stdout.readline()
        if not line:
            return None
        return json.loads(line)


class WsConn:
    def __init__(self, ws):
        self.ws = ws

    async def send(self, obj):
        await self.ws.send_str(json.dumps(obj))

    def send_nowait(self, obj):
        # aiohttp's send_str writes to the transport synchronously; the
        # coroutine only awaits the drain, so a task is fine.
        asyncio.ensure_future(self.ws.send_str(json.dumps(obj)))

    async def recv(self):
        import aiohttp
        m = await self.ws.receive()
        if m.type != aiohttp.WSMsgType.TEXT:
            return None
        return json.loads(m.data)


async def start_stdio(codepod, state):
    proc = await asyncio.create_subprocess_exec(
        codepod, "serve", "--stdio", "--state-dir", state,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, limit=1 << 24, cwd=ROOT)
    return proc


async def start_listen(codepod, state, extra=()):
    tok = os.path.join(state, "token")
    with open(tok, "w") as f:
        f.write(TOKEN + "\n")
    proc = await asyncio.create_subprocess_exec(
        codepod, "serve", "--listen", "127.0.0.1:0", "--token-file", tok,
        "--state-dir", os.path.join(state, "s"), *extra,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE, limit=1 << 24, cwd=ROOT)
    port = None
    deadline = time.monotonic() + 30
    while port is None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Failed("codepod serve --listen did not report its port")
        line = await asyncio.wait_for(proc.stderr.readline(), left)
        if not line:
            raise Failed("codepod serve --listen exited: %s" % await proc.wait())
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if m.get("event") == "serve.listen":
            port = m["port"]

    async def drain():   # keep its stderr from filling the pipe
        while await proc.stderr.readline():
            pass
    asyncio.ensure_future(drain())
    return proc, port


async def stop_proc(proc, stdio_conn=None):
    if stdio_conn is not None:
        proc.stdin.close()
    else:
        proc.terminate()
    try:
        await asyncio.wait_for(proc.wait(), 60)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()


# ----------------------------------------------------------------- 1. round trip

async def calls_once(conn, eid, count, pid=None):
    """Run the echo program on conn; (submit->result, first->last call) in ms,
    and the CPU seconds of codepod's descendants (the runner) at the last call."""
    msg = {"type": "execute", "id": eid, "conversation": "bench-" + eid, "js": calls_js(count),
           "tools": [ECHO], "policy": {"maxBridgeRequests": count, "timeoutMs": 600000}}
    t0 = time.perf_counter()
    await conn.send(msg)
    first = None
    n = 0
    node_cpu = None
    while True:
        m = await conn.recv()
        if m is None:
            raise Failed("connection closed during %s" % eid)
        t = m.get("type")
        if t == "tool_call":
            if first is None:
                first = time.perf_counter()
            n += 1
            if n == count and pid:
                node_cpu = descendants_cpu(pid)
            await conn.send({"type": "tool_result", "id": m["id"], "call": m["call"],
                             "output": m["input"]})
        elif t == "result" and m.get("id") == eid:
            t1 = time.perf_counter()
            if m.get("status") != "succeeded" or n != count:
                raise Failed("%s: %d calls, %s" % (eid, n, json.dumps(m)[:300]))
            return (t1 - t0) * 1000, (t1 - (first or t0)) * 1000, node_cpu
        elif t == "error":
            raise Failed("%s: %s" % (eid, json.dumps(m)[:300]))


async def bench_calls(codepod, tmp, count, runs):
    import aiohttp
    sp = await start_stdio(codepod, os.path.join(tmp, "stdio"))
    stdio = StdioConn(sp)
    lp, port = await start_listen(codepod, os.path.join(tmp, "ws"))
    http = aiohttp.ClientSession()
    ws = await http.ws_connect("http://127.0.0.1:%d/v1/session" % port, protocols=("codepod.v1",),
                               headers={"Authorization": "Bearer " + TOKEN},
                               max_msg_size=0, compress=0, autoping=True, heartbeat=None)
    wsc = WsConn(ws)
    res = {"stdio": {"total_ms": [], "calls_ms": [], "client_cpu_s": [], "codepod_cpu_s": [],
                     "node_cpu_s": []},
           "ws": {"total_ms": [], "calls_ms": [], "client_cpu_s": [], "codepod_cpu_s": [],
                  "node_cpu_s": []}}
    try:
        # one warm-up each (page cache, JIT of the client)
        await calls_once(stdio, "warm-stdio", min(count, 1000))
        await calls_once(wsc, "warm-ws", min(count, 1000))
        for r in range(runs):
            for name, conn, proc in (("stdio", stdio, sp), ("ws", wsc, lp)) if r % 2 == 0 else \
                                    (("ws", wsc, lp), ("stdio", stdio, sp)):
                c0, k0 = self_cpu(), proc_cpu(proc.pid)
                total, calls, node = await calls_once(conn, "%s-%d" % (name, r), count, proc.pid)
                c1, k1 = self_cpu(), proc_cpu(proc.pid)
                d = res[name]
                d["total_ms"].append(round(total, 2))
                d["calls_ms"].append(round(calls, 2))
                d["client_cpu_s"].append(round(c1 - c0, 3))
                d["codepod_cpu_s"].append(round(k1[0] - k0[0], 3))
                d["node_cpu_s"].append(round(node or 0.0, 3))
    finally:
        await ws.close()
        await http.close()
        await stop_proc(sp, stdio)
        await stop_proc(lp)
    out = {"count": count, "runs": runs}
    for name, d in res.items():
        m = statistics.median(d["calls_ms"])
        out[name] = dict(d, calls_median_ms=m, total_median_ms=statistics.median(d["total_ms"]),
                         round_trip_us=m * 1000 / count, calls_per_s=count / m * 1000,
                         client_cpu_median_s=statistics.median(d["client_cpu_s"]),
                         codepod_cpu_median_s=statistics.median(d["codepod_cpu_s"]),
                         node_cpu_median_s=statistics.median(d["node_cpu_s"]))
    out["ratio_ws_vs_stdio"] = out["ws"]["calls_median_ms"] / out["stdio"]["calls_median_ms"]
    out["ratio_total_ws_vs_stdio"] = out["ws"]["total_median_ms"] / out["stdio"]["total_median_ms"]
    return out


# ----------------------------------------------------------------- 2. concurrency

async def bench_concurrent(codepod, tmp, n, sessions, delay_s):
    import aiohttp
    lp, port = await start_listen(codepod, os.path.join(tmp, "conc"),
                                  ("--max-executions", str(max(1000, 2 * n))))
    pid = lp.pid
    http = aiohttp.ClientSession()
    loop = asyncio.get_running_loop()
    wss = []
    results = {}
    stats = {"in_flight": 0, "max_in_flight": 0, "calls": 0}
    peak = {"hwm": 0}
    done = asyncio.Event()

    def answer(conn, m):
        stats["in_flight"] -= 1
        conn.send_nowait({"type": "tool_result", "id": m["id"], "call": m["call"],
                          "output": {"ok": True}})

    async def reader(conn):
        while True:
            m = await conn.recv()
            if m is None:
                return
            t = m.get("type")
            if t == "tool_call":
                stats["calls"] += 1
                stats["in_flight"] += 1
                stats["max_in_flight"] = max(stats["max_in_flight"], stats["in_flight"])
                loop.call_later(delay_s, answer, conn, m)
            elif t in ("result", "error") and m.get("id"):
                results[m["id"]] = m
                if len(results) == n:
                    done.set()

    async def sampler():
        while not done.is_set():
            try:
                peak["hwm"] = max(peak["hwm"], proc_status_kib(pid, "VmHWM") or 0)
            except OSError:
                return
            await asyncio.sleep(0.1)

    try:
        for _ in range(sessions):
            ws = await http.ws_connect("http://127.0.0.1:%d/v1/session" % port,
                                       protocols=("codepod.v1",),
                                       headers={"Authorization": "Bearer " + TOKEN},
                                       max_msg_size=0, compress=0, heartbeat=None)
            wss.append(WsConn(ws))
        await asyncio.sleep(0.2)
        rss_before = proc_status_kib(pid, "VmRSS")
        hwm_before = proc_status_kib(pid, "VmHWM")
        readers = [asyncio.ensure_future(reader(c)) for c in wss]
        samp = asyncio.ensure_future(sampler())
        c0, k0 = self_cpu(), proc_cpu(pid)
        t0 = time.perf_counter()
        for i in range(n):
            conn = wss[i % sessions]
            await conn.send({"type": "execute", "id": "c%d" % i, "conversation": "conc-%d" % i,
                             "js": "const r = await tools.wait({ i: %d });\nreturn r.ok ? %d : -1;\n"
                                   % (i, i),
                             "tools": [WAIT], "policy": {"timeoutMs": 300000}})
        try:
            await asyncio.wait_for(done.wait(), 600)
        except asyncio.TimeoutError:
            pass
        wall = (time.perf_counter() - t0) * 1000
        c1, k1 = self_cpu(), proc_cpu(pid)
        hwm = max(peak["hwm"], proc_status_kib(pid, "VmHWM") or 0)
        rss_after = proc_status_kib(pid, "VmRSS")
        done.set()
        await samp
        for ws in wss:
            await ws.ws.close()
        for r in readers:
            r.cancel()
    finally:
        await http.close()
        await stop_proc(lp)
    ok = sum(1 for i in range(n) if results.get("c%d" % i, {}).get("status") == "succeeded"
             and results["c%d" % i].get("result") == i)
    bad = [m for m in results.values() if m.get("status") != "succeeded"][:3]
    return {"n": n, "sessions": sessions, "delay_s": delay_s, "succeeded": ok,
            "answered": len(results), "tool_calls": stats["calls"],
            "max_in_flight": stats["max_in_flight"], "wall_ms": round(wall, 1),
            "rss_before_kib": rss_before, "hwm_before_kib": hwm_before, "hwm_peak_kib": hwm,
            "rss_after_kib": rss_after,
            "peak_kib_per_exec": (hwm - rss_before) / n,
            "client_cpu_s": round(c1 - c0, 3), "codepod_cpu_s": round(k1[0] - k0[0], 3),
            "node_cpu_s": round(k1[1] - k0[1], 3),
            "failures": [json.dumps(m)[:300] for m in bad]}


async def amain(quick, calls_only=False):
    codepod = os.environ.get("CODEPOD_BIN")
    if not codepod or not os.access(codepod, os.X_OK):
        print("bench_serve: CODEPOD_BIN must name the built codepod", file=sys.stderr)
        return 2
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        print("bench_serve: needs python3-aiohttp", file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="codepod-bench-serve-")
    figs = {}
    failed = []
    try:
        for d in ("stdio", "ws", "conc"):
            os.makedirs(os.path.join(tmp, d))
        print("bench: (e) tool-call round trip over WebSocket vs stdio ...", file=sys.stderr,
              flush=True)
        try:
            figs["calls"] = await bench_calls(codepod, tmp, 10000, 3 if quick else 5)
        except Failed as e:
            failed.append("calls: %s" % e)
        n = 500
        print("bench: (e) %d executions at once over 10 WebSocket sessions ..." % n,
              file=sys.stderr, flush=True)
        try:
            if calls_only:
                raise Skip()
            c = await bench_concurrent(codepod, tmp, n, 10, 1.0)
            figs["concurrent"] = c
            if c["succeeded"] != n:
                failed.append("concurrent: %d/%d succeeded: %s" % (c["succeeded"], n,
                                                                  c["failures"]))
        except Skip:
            pass
        except Failed as e:
            failed.append("concurrent: %s" % e)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    figs["failed"] = failed
    print(json.dumps(figs))
    return 1 if failed else 0


def main():
    quick = "--quick" in sys.argv[1:]
    sys.exit(asyncio.run(amain(quick, "--calls-only" in sys.argv[1:])))


if __name__ == "__main__":
    main()
