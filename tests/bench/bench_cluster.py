#!/usr/bin/env python3
"""bench_cluster.py - `make bench` section (m): the Kubernetes backend on the
real single-node cluster of scripts/cluster.sh (skipped, said, when it is not
up), against the fake API server and the local backend in the same run.

Each figure is an execution of `return 1` over `codepod serve --stdio`,
execute written -> result read (bench_kube.Stdio):

  later   a later execution in an existing conversation, 300 ms after the
          one before: real cluster, fake API server, local backend,
          interleaved; ratios real/fake and real/local
  cold    a new conversation's first execution on the real cluster with no
          warm pool: the pod created, scheduled, started by the kubelet,
          Ready, then the exec
  warm    the same with --warm-pool 1, the pool Ready before each: a pod
          claimed
  execs   pods/exec requests the API server counted per later execution
          (its apiserver_request_total for pods/exec, read from /metrics
          before and after): goal 0, the supervisor's exec and the runner
          started ahead are reused

Prints one JSON line on stdout. Exit 1 when an execution failed, 2 when the
bench could not run.

usage: bench_cluster.py [--quick]
env:   CODEPOD_BIN (the built codepod)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))

from bench_kube import Failed, Fake, Stdio, summary  # noqa: E402

# A namespace of each run's own (the last run's may still be terminating).
NS = "codepod-bench-" + os.urandom(3).hex()


def cluster_up():
    return subprocess.run(["bash", os.path.join(ROOT, "scripts", "cluster.sh"), "status"],
                          capture_output=True).returncode == 0


def exec_requests(ch):
    """pods/exec requests the API server has served, from its /metrics."""
    out = ch.kubectl("get", "--raw", "/metrics").stdout
    n = 0
    for line in out.splitlines():
        if line.startswith("apiserver_request_total{") and 'subresource="exec"' in line \
                and 'resource="pods"' in line:
            n += int(float(line.rsplit(" ", 1)[1]))
    return n


def warm_ready(ch):
    return sum(1 for p in ch.pods(NS, "codepod.dev/warm=true") if ch.is_ready(p))


def bench(codepod, tmp, runs):
    import clusterhelp as ch
    ch.ensure_namespace(NS)
    kc = ch.kubeconfig_for(NS, os.path.join(tmp, "real.kubeconfig"))
    real_args = ["--backend", "kubernetes", "--kubeconfig", kc]
    figs = {"runs": runs, "kube_version": ch.kube_version()}
    fake = Fake(os.path.join(tmp, "fake"))
    try:
        print("bench: (m) later executions: real cluster, fake, local ...", file=sys.stderr, flush=True)
        real = Stdio(codepod, os.path.join(tmp, "real"), real_args)
        fk = Stdio(codepod, os.path.join(tmp, "fake-cp"),
                   ["--backend", "kubernetes", "--kubeconfig", fake.kc])
        loc = Stdio(codepod, os.path.join(tmp, "local"))
        r_conv, f_conv = "later-" + os.urandom(4).hex(), "later-" + os.urandom(4).hex()
        lr, lf, ll = [], [], []
        try:
            for _ in range(3):  # pods made, supervisors up, runners started ahead
                real.run(r_conv, "later")
                fk.run(f_conv, "later")
                loc.run("local", "local")
            e0 = exec_requests(ch)
            # Each after 300 ms idle: the runner started ahead is up in all
            # three (back to back is issue of its own, bench_latency.py).
            for _ in range(runs):
                for s, conv, into in ((real, r_conv, lr), (fk, f_conv, lf), (loc, "local", ll)):
                    time.sleep(0.3)
                    into.append(s.run(conv, "later"))
            time.sleep(0.5)
            figs["exec_requests_per_later"] = (exec_requests(ch) - e0) / runs
        finally:
            for s in (real, fk, loc):
                s.close()
        figs["later_real"], figs["later_fake"], figs["later_local"] = \
            summary(lr), summary(lf), summary(ll)
        figs["later_real_vs_fake"] = figs["later_real"]["median_ms"] / figs["later_fake"]["median_ms"]
        figs["later_real_vs_local"] = figs["later_real"]["median_ms"] / figs["later_local"]["median_ms"]

        print("bench: (m) cold pod creates and warm claims on the real cluster ...",
              file=sys.stderr, flush=True)
        cold_cp = Stdio(codepod, os.path.join(tmp, "cold"), real_args)
        warm_cp = Stdio(codepod, os.path.join(tmp, "warm"), real_args + ["--warm-pool", "1"])
        cold, warm = [], []
        try:
            for i in range(max(3, runs // 2)):
                cold.append(cold_cp.run("cold-%d-%s" % (i, os.urandom(4).hex()), "cold"))
                t0 = time.monotonic()
                while warm_ready(ch) < 1:
                    if time.monotonic() - t0 > 180:
                        raise Failed("no warm pod Ready in 180 s")
                    time.sleep(0.2)
                time.sleep(0.5)
                warm.append(warm_cp.run("warm-%d-%s" % (i, os.urandom(4).hex()), "warm"))
        finally:
            cold_cp.close()
            warm_cp.close()
        figs["cold"], figs["warm"] = summary(cold), summary(warm)
        figs["cold_vs_warm"] = figs["cold"]["median_ms"] / figs["warm"]["median_ms"]
    finally:
        fake.stop()
        ch.kubectl("delete", "namespace", NS, "--wait=false", check=False)
    return figs


def main():
    quick = "--quick" in sys.argv[1:]
    codepod = os.environ.get("CODEPOD_BIN")
    if not codepod or not os.access(codepod, os.X_OK):
        print("bench_cluster: CODEPOD_BIN must name the built codepod", file=sys.stderr)
        sys.exit(2)
    if not cluster_up():
        print(json.dumps({"skipped": "the cluster is not up (scripts/cluster.sh up)"}))
        return 0
    tmp = tempfile.mkdtemp(prefix="codepod-bench-cluster-")
    rc = 0
    try:
        figs = bench(codepod, tmp, 5 if quick else 9)
    except Failed as e:
        figs = {"failed": [str(e)]}
        rc = 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(figs))
    return rc


if __name__ == "__main__":
    sys.exit(main())
