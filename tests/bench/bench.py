#!/usr/bin/env python3
"""bench.py - `make bench`: codepod's speed and memory figures (
"Speed and memory"), measured through the C library by bench_codepod, written
to OUT (human-readable with the goals, then a JSON block) and printed.

Figures are reported, never asserted: the exit status is non-zero only when
an execution failed (or the bench could not run at all).

The exec figures (exec through the fake API server vs a local
spawn; stdout throughput) come from bench_exec (tests/bench/bench_exec.c).

Section (g) (per-script latency, the peer @ai-sdk/code-mode, one exec
per pod), comes from bench_latency.py and bench_codepod startup --prestart.

The serve figures (tool-call round trip over the WebSocket of
`serve --listen` vs `serve --stdio`; 500 executions over 10 sessions) come
from bench_serve.py, section (e); the Kubernetes backend figures
(cold pod, warm-pool pod, existing pod vs local) from bench_kube.py, (f);
snapshots on Kubernetes (cold acquire restoring a 10 MiB workspace vs an
empty one, on the fake with the Ceph test store) from bench_kube_snap.py, (k);
files and commands (64 MiB through serve --listen vs curl to a Python
http.server, 8 uploads at once, run("true") vs return 1) from
bench_files.py, (i); snapshots to a one-node Ceph RGW vs curl PUT/GET of
the same archive from tests/store/bench_snapshots.py, (l).

usage: bench.py [--quick] [--only=SECTION,...] OUT
       bench.py [--quick] --latency-only SECTIONS OUT
       --only: these sections alone, of startup calls concurrent exec serve
       serve-calls (its round trip alone) kube trace latency latency-a latency-load
       latency-b latency-c latency-d resume files kube-snap snapshots cluster (the tool-bridge figures alone: `make bench
       BENCH_ARGS=--only=calls,serve-calls,latency-d`)
       --latency-only: section (g) alone, only SECTIONS of bench_latency.py
       (`make bench-latency BENCH_SECTIONS=a,b`, into build/bench-latency.txt)
env:   BENCH_BIN (tests/bench/bench_codepod built), CODEPOD_NODE (Node 22),
       BENCH_EXEC_BIN (tests/bench/bench_exec built; skipped when unset),
       CODEPOD_BIN (the built codepod; (e) and (f) skipped when unset)
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

GOAL_RATIO_PLAIN = 1.15
GOAL_RATIO_BWRAP = 1.35
GOAL_CALLS = 20000
GOAL_KIB = 64
GOAL_WS_RATIO = 1.3
GOAL_WARM_SPEEDUP = 10.0
GOAL_LATER_RATIO = 1.3
# section (g)
GOAL12_SPAWN = 0.5
GOAL12_LATER = 1.2
GOAL12_WARM = 10.0
GOAL12_BRIDGE = 1.5
GOAL12_WS = 1.3


def run_bench(binary, args, state):
    cmd = [binary] + args + ["--state-dir", state]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    fig = None
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            fig = json.loads(line)
    return p.returncode, fig, p.stderr.strip()


def verdict(ok):
    return "meets goal" if ok else "MISSES goal"


def exec_lines(f):
    """Section (d): the exec figures from bench_exec."""
    L = ["(d) Kubernetes exec through the fake API server (tests/fakekube, TLS + WebSocket v5),",
         "    k8s/api/pod_exec.h on the uv loop, vs the same Node spawned locally with uv_spawn on that loop"]
    if not f or "exec_node_e0" not in f:
        L.append("    not measured")
        return L
    bw = f.get("fake_exec_in_bwrap")
    L.append("    round trip `node -e 0`: exec stream open -> exit status back vs spawn -> exit,")
    L.append("    alternating, median of %d runs each (the fake runs execs %s)"
             % (f["runs"], "in bwrap" if bw else "as plain subprocesses"))
    L.append("    exec %6.1f ms  local %6.1f ms  ratio %.2fx  (+%.1f ms)"
             % (f["exec_node_e0"]["median_ms"], f["local_node_e0"]["median_ms"],
                f["ratio_exec_vs_local"], f["exec_overhead_ms"]))
    if "local_bwrap_node_e0" in f:
        L.append("    local in the fake's bwrap argv %6.1f ms -> exec vs that %.2fx: the wire (TLS,"
                 % (f["local_bwrap_node_e0"]["median_ms"], f["ratio_exec_vs_local_bwrap"]))
        L.append("    upgrade, Python fake, status channel) adds %.1f ms" % f["wire_overhead_ms"])
    for t in f.get("stdout_throughput", []):
        less = t.get("exec_mib_per_s_less_baseline")
        lless = t.get("local_mib_per_s_less_baseline")
        L.append("    %2d MiB stdout `process.stdout.write(Buffer.alloc(N))`, median of %d:"
                 % (t["mib"], len(t["exec"]["runs_ms"])))
        L.append("        exec  %7.1f ms  %7.1f MiB/s  (%s without the node -e 0 exec baseline)"
                 % (t["exec"]["median_ms"], t["exec_mib_per_s"],
                    "%.1f MiB/s" % less if less else "n/a"))
        L.append("        local %7.1f ms  %7.1f MiB/s  (%s without the local baseline)"
                 % (t["local"]["median_ms"], t["local_mib_per_s"],
                    "%.1f MiB/s" % lless if lless else "n/a"))
    return L


def run_script(name, script, quick, figs, failed, notes, extra=()):
    """Run tests/bench/SCRIPT (one JSON line on stdout) into figs[name]."""
    args = [sys.executable, os.path.join(HERE, script)] + (["--quick"] if quick else []) + list(extra)
    p = subprocess.run(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err = p.stderr.strip()
    if err:
        print(err, file=sys.stderr, flush=True)
    fig = None
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            fig = json.loads(line)
    if fig:
        figs[name] = fig
        failed.extend("%s: %s" % (name, x) for x in fig.get("failed", []))
    if p.returncode == 1 and not (fig and fig.get("failed")):
        failed.append("%s: %s" % (name, err.splitlines()[-1] if err else "failed"))
    elif p.returncode not in (0, 1):
        notes.append("%s figures not measured: %s" % (name, err[-300:] if err else p.returncode))


def serve_lines(f):
    """Section (e): the serve figures from bench_serve.py."""
    L = ["(e) codepod serve --listen 127.0.0.1 (WebSocket, protocol v1) vs serve --stdio,",
         "    client: Python asyncio + aiohttp (one coroutine reads a message and answers it)"]
    c = (f or {}).get("calls")
    if c:
        s, w = c["stdio"], c["ws"]
        L.append("    tool-call round trip: %d sequential `await tools.echo({ i })` answered at once"
                 % c["count"])
        L.append("    by the client, first call -> result, alternating, median of %d runs each:"
                 % c["runs"])
        for name, d in (("stdio", s), ("ws   ", w)):
            L.append("      %s %7.0f ms  %6.1f us/call  %6.0f calls/s   CPU per run: client %.2f s,"
                     " codepod %.2f s, runner %.2f s"
                     % (name, d["calls_median_ms"], d["round_trip_us"], d["calls_per_s"],
                        d["client_cpu_median_s"], d["codepod_cpu_median_s"],
                        d["node_cpu_median_s"]))
        L.append("      ratio ws/stdio %.2fx  (goal <= %.2fx: %s); whole execution %.2fx"
                 % (c["ratio_ws_vs_stdio"], GOAL_WS_RATIO,
                    verdict(c["ratio_ws_vs_stdio"] <= GOAL_WS_RATIO), c["ratio_total_ws_vs_stdio"]))
        L.append("      per call: client CPU %.1f us (stdio) / %.1f us (ws), codepod CPU %.1f / %.1f us"
                 % (s["client_cpu_median_s"] * 1e6 / c["count"], w["client_cpu_median_s"] * 1e6 / c["count"],
                    s["codepod_cpu_median_s"] * 1e6 / c["count"], w["codepod_cpu_median_s"] * 1e6 / c["count"]))
        L.append("      (runner CPU: the Node under bwrap, start included; sequential, so every")
        L.append("      process's CPU is on the round trip: none of them is saturated)")
    else:
        L.append("    tool-call round trip: not measured")
    k = (f or {}).get("concurrent")
    if k:
        L.append("    %d executions sent at once over %d WebSocket sessions, each awaiting one tool"
                 % (k["n"], k["sessions"]))
        L.append("    call answered by the client after %.0f s:" % k["delay_s"])
        L.append("      succeeded %d/%d; wall %.0f ms; most tool calls waiting at once %d"
                 % (k["succeeded"], k["n"], k["wall_ms"], k["max_in_flight"]))
        L.append("      codepod RSS before %d KiB, peak (VmHWM) %d KiB -> %.1f KiB per execution"
                 % (k["rss_before_kib"], k["hwm_peak_kib"], k["peak_kib_per_exec"]))
        L.append("      CPU: client %.2f s, codepod %.2f s, runners (bwrap + Node, reaped) %.2f s"
                 % (k["client_cpu_s"], k["codepod_cpu_s"], k["node_cpu_s"]))
    else:
        L.append("    concurrent executions: not measured")
    return L


def resume_lines(f):
    """The resume of an approved execution (bench_resume.py) vs the same run fresh."""
    if not f:
        return ["(h) resume after an approval: not measured"]
    return ["(h) resume after an approval: %d calls answered from the continuation's log, then"
            % f["calls"],
            "    the approved call, vs the same program fresh with every tool answered at once;",
            "    median of %d runs each: fresh %.0f ms, resume %.0f ms, ratio %.2fx (goal <= %.1fx: %s);"
            % (f["runs"], f["fresh_median_ms"], f["resume_median_ms"], f["ratio_resume_vs_fresh"],
               f["goal_ratio"], verdict(f["ratio_resume_vs_fresh"] <= f["goal_ratio"])),
            "    continuation %d bytes; codepod RSS %d KiB -> %d KiB over %d suspended executions"
            % (f["continuation_bytes"], f["rss_before_kib"], f["rss_after_kib"], f["suspended_n"]),
            "    (%.2f KiB each; as many executions that did not suspend: %.2f KiB each;"
            % (f["kib_per_suspended"], f["kib_per_plain"]),
            "    goal: a suspended one holds < 1 KiB more than any other: %s)"
            % verdict(f["kib_per_suspended"] - f["kib_per_plain"] < 1)]


def kube_lines(f):
    """Section (f): the Kubernetes backend figures from bench_kube.py."""
    L = ["(f) Kubernetes backend against the fake API server (tests/fakekube, schedule",
         "    50,50,200 ms to Running, execs in %s), `serve --stdio --backend kubernetes`:"
         % (f or {}).get("fake_exec", "?"),
         "    `return 1`, execute written -> result read, vs the same on the local backend"]
    if not f or "local" not in f or "warm" not in f:
        L.append("    not measured")
        return L
    lm = f["local"]["median_ms"]
    L.append("    medians of %d runs (local %d, later %d):"
             % (f["runs"], len(f["local"]["runs_ms"]), len(f["later"]["runs_ms"])))
    L.append("      local                                 %6.1f ms" % lm)
    L.append("      cold pod (create + wait for Ready)     %6.1f ms  %5.2fx local  (pod Ready at +%.0f ms)"
             % (f["cold"]["median_ms"], f["cold"]["ratio_vs_local"],
                f["cold"].get("ready_at_ms_median") or -1))
    L.append("      warm-pool pod (--warm-pool %d, full)    %6.1f ms  %5.2fx local  (claimed at +%.0f ms;"
             " %d/%d claimed)" % (f["warm_pool"], f["warm"]["median_ms"], f["warm"]["ratio_vs_local"],
                                  f["warm"].get("claimed_at_ms_median") or -1,
                                  f["warm"]["claimed"], f["runs"]))
    L.append("      later execution in an existing pod     %6.1f ms  %5.2fx local  (goal <= %.2fx: %s)"
             % (f["later"]["median_ms"], f["later"]["ratio_vs_local"], GOAL_LATER_RATIO,
                verdict(f["later"]["ratio_vs_local"] <= GOAL_LATER_RATIO)))
    L.append("    warm vs cold, first execution end to end: %.1fx faster  (goal >= %.0fx: %s)"
             % (f["cold_vs_warm"], GOAL_WARM_SPEEDUP, verdict(f["cold_vs_warm"] >= GOAL_WARM_SPEEDUP)))
    if "acquire_cold_vs_warm" in f:
        L.append("    the pod alone (execute -> kube.ready after create / kube.claimed, from codepod's")
        L.append("    debug log): cold %.0f ms, warm %.1f ms -> claim %.0fx faster than create"
                 "  (goal >= %.0fx: %s)"
                 % (f["acquire_cold_ms"], f["acquire_warm_ms"], f["acquire_cold_vs_warm"],
                    GOAL_WARM_SPEEDUP, verdict(f["acquire_cold_vs_warm"] >= GOAL_WARM_SPEEDUP)))
        L.append("    (both then pay the same exec of the runner, ~%.0f ms, which bounds the end-to-end"
                 % (f["warm"]["median_ms"] - f["acquire_warm_ms"]))
        L.append("    ratio to (schedule + exec) / exec)")
    return L


def files_lines(f, k=None):
    """Section (i): files and commands, from bench_files.py (k: its
    transfers on the Kubernetes backend)."""
    L = ["(i) files and commands: a 64 MiB file through serve --listen (curl) vs curl to a",
         "    Python http.server on loopback; 8 uploads at once; run(\"true\") vs return 1"]
    if not f:
        return L + ["    not measured"]
    L.append("    upload   %.2f s vs plain %.2f s: %.0f%% of plain (goal >= 50%%: %s)"
             % (f["up_s"], f["plain_up_s"], 100 * f["up_ratio"], verdict(f["up_ratio"] >= 0.5)))
    L.append("    download %.2f s vs plain %.2f s: %.0f%% of plain (goal >= 50%%: %s)"
             % (f["down_s"], f["plain_down_s"], 100 * f["down_ratio"], verdict(f["down_ratio"] >= 0.5)))
    if "b2b_up_s" in f:
        L.append("    (each into a conversation whose sandbox is ready; back to back, each waiting for the"
                 " next runner's start: upload %.2f s, %.0f%%; download %.2f s, %.0f%%; reported)"
                 % (f["b2b_up_s"], 100 * f["plain_up_s"] / f["b2b_up_s"], f["b2b_down_s"],
                    100 * f["plain_down_s"] / f["b2b_down_s"]))
    grown = (f["peak_rss_kib"] - f["idle_rss_kib"]) / 1024
    L.append("    8 uploads at once (%d ok): controller RSS %.1f MiB above idle (goal < 32 MiB: %s)"
             % (f["uploads_ok"], grown, verdict(grown < 32)))
    L.append("    run(\"true\") %.1f ms vs return 1 %.1f ms: %.2fx (goal <= 1.5x: %s)"
             % (f["true_ms"], f["return1_ms"], f["true_ratio"], verdict(f["true_ratio"] <= 1.5)))
    if k and "up_s" in k:
        L.append("    Kubernetes backend (fake API server; reported, not a goal): upload %.2f s (%.0f%%"
                 " of plain), download %.2f s (%.0f%%)"
                 % (k["up_s"], 100 * k["up_ratio"], k["down_s"], 100 * k["down_ratio"]))
    return L


def trace_lines(f):
    """Section (j): tracing on vs off, from bench_trace.py."""
    L = ["(j) tracing on (traceparent on every execute, spans exported to a collector on",
         "    127.0.0.1) vs off, `serve --stdio`, alternating, median of the runs:"]
    if not f:
        return L + ["    not measured"]
    for key, label, goal in (("return1", "`return 1` (median of %d each run)" % f["return1_per_run"], 1.05),
                             ("calls", "%d sequential tool calls" % f["calls"], 1.10)):
        L.append("    %s: on %.1f ms, off %.1f ms, ratio %.2fx (goal <= %.2fx: %s);"
                 % (label, f["on"][key + "_ms"], f["off"][key + "_ms"], f["ratio_" + key], goal,
                    verdict(f["ratio_" + key] <= goal)))
        cpu = f.get("ratio_%s_codepod_cpu" % key)
        L.append("      codepod CPU on %.1f ms, off %.1f ms%s"
                 % (f["on"][key + "_codepod_cpu_ms"], f["off"][key + "_codepod_cpu_ms"],
                    ", ratio %.2fx" % cpu if cpu else ""))
    L.append("    spans received by the collector: %d" % f["spans_received"])
    return L


def kube_snap_lines(f):
    """Section (k): snapshots on the Kubernetes backend, from bench_kube_snap.py."""
    L = ["(k) snapshots on Kubernetes: the fake API server (default schedule) and the Ceph test",
         "    store, `return 1` in a new pod, execute written -> result read, alternating:"]
    if not f or not f.get("ratio"):
        return L + ["    not measured"]
    L.append("    empty conversation (store: no snapshot)     %7.1f ms" % f["empty"]["median_ms"])
    L.append("    restoring %.1f MiB (%d runs)                 %7.1f ms  (usage.restoreMs median %d)"
             % ((f.get("workspace_bytes") or 0) / 1048576.0, f["runs"], f["restore"]["median_ms"],
                f["restore"]["restoreMs_median"]))
    L.append("    ratio %.2fx (goal <= 1.30x: %s)" % (f["ratio"], verdict(f["ratio"] <= 1.3)))
    return L


def cluster_lines(f):
    """Section (m): the real single-node cluster, from bench_cluster.py."""
    L = ["(m) Kubernetes backend on the real cluster (scripts/cluster.sh: kube-apiserver,",
         "    kubelet, containerd), `return 1`, execute written -> result read, medians:"]
    if not f or f.get("skipped") or "later_real" not in f:
        return L + ["    not measured" + (": " + f["skipped"] if f and f.get("skipped") else "")]
    L.append("    later program, existing pod: real %7.1f ms, fake %7.1f ms, local %7.1f ms"
             % (f["later_real"]["median_ms"], f["later_fake"]["median_ms"],
                f["later_local"]["median_ms"]))
    L.append("    ratio real/fake %.2fx, real/local %.2fx" % (f["later_real_vs_fake"],
                                                             f["later_real_vs_local"]))
    L.append("    pods/exec requests per later program: %.2f (goal 0: %s)"
             % (f["exec_requests_per_later"], verdict(f["exec_requests_per_later"] == 0)))
    L.append("    first program: cold pod create %7.1f ms, warm pod claimed %7.1f ms: %.1fx"
             % (f["cold"]["median_ms"], f["warm"]["median_ms"], f["cold_vs_warm"]))
    return L


def snapshot_lines(f):
    """Section (l): snapshots and restores vs curl, from tests/store/bench_snapshots.py."""
    L = ["(l) snapshots: a workspace of %s MiB in %s files to a one-node Ceph RGW on loopback"
         % (f.get("mib", 100) if f else 100, f.get("files", 1000) if f else 1000),
         "    (tests/store/ceph.py) vs curl PUT/GET of the same archive to the same store,",
         "    median of the rounds (curl's time / codepod's, per round)"]
    if not f:
        return L + ["    not measured"]
    mb = f["archive_bytes"] / 1e6
    for k, what, verb in (("snapshot", "snapshot (pack + upload, streamed)", "PUT"),
                          ("restore", "restore (download + unpack, streamed, verified)", "GET")):
        L.append("    %s %.2f s vs curl %s %.2f s (%.0f MB): ratio %.2f (goal >= 0.50: %s);"
                 " rounds %s" % (what, f[k + "_s"], verb, f[k + "_curl_s"], mb, f[k + "_ratio"],
                                 verdict(f[k + "_ratio"] >= 0.5),
                                 " ".join("%.2f" % (x["curl_s"] / x["s"]) for x in f[k])))
    if "restore_wall_s" in f:
        L.append("    the restoring execution's wall time (restore, workspace, runner; reported): "
                 "%.2f s" % f["restore_wall_s"])
    return L


def latency_lines(figs):
    """Section (g): the per-script latency figures (bench_latency.py, bench_codepod startup --prestart)."""
    f = figs.get("latency") or {}
    L = ["(g) per-script latency: after = a runner already started (--prestart, default)",
         "    and, on Kubernetes, the pod's supervisor (one exec per pod); before = --prestart 0",
         "    --no-supervisor. Executions %d ms apart (the model's turn), medians of %s."
         % (f.get("gap_ms", 0), f.get("runs", "?"))]
    p, b = figs.get("startup_prestart"), figs.get("startup_isolated") or figs.get("startup_plain")
    if p:
        L.append("  (a) `return 1` through the C library vs a bare `node -e 0` spawned through the same")
        L.append("      backend: after %.2fx (%.1f vs %.1f ms)%s  (goal <= %.1fx: %s)"
                 % (p["ratio"], p["codepod_median_ms"], p["bare_median_ms"],
                    ", before %.2fx" % b["ratio"] if b else "", GOAL12_SPAWN,
                    verdict(p["ratio"] <= GOAL12_SPAWN)))
    for key, label in (("return1", "`return 1`"), ("invoices", "invoices program")):
        d = f.get(key)
        if not d:
            continue
        if "after_vs_peer" in d:
            L.append("      %-17s end to end (serve --stdio) vs %s in-process: after %.2fx, before"
                     " %.2fx  (goal <= 1x: %s)" % (label, f.get("peer"), d["after_vs_peer"],
                                                  d["before_vs_peer"], verdict(d["after_vs_peer"] <= 1)))
        L.append("      %-17s after / before %.2fx" % (label, d["after_vs_before"]))
    c = f.get("calls_2000_per_s")
    if c:
        L.append("      2,000 sequential tool calls: after / peer %.2fx, before / peer %.2fx (calls/s ratios)"
                 % (c["after"] / c["peer"], c["before"] / c["peer"]) if "peer" in c else
                 "      2,000 sequential tool calls: after / before %.2fx" % (c["after"] / c["before"]))
    k = f.get("concurrent_100x500ms")
    if k:
        L.append("      100 at once, 500 ms tool: succeeded " + ", ".join(
            "%s %d/100 (wall %.2fx after's)" % (n, v["succeeded"], v["wall_ms"] / k["after"]["wall_ms"])
            for n, v in k.items()))
    if "waiting_runner_rss_kib" in f:
        L.append("      RSS of one waiting runner (bwrap + Node): %d KiB" % f["waiting_runner_rss_kib"])
    kl = f.get("kube_later")
    if kl:
        L.append("  (b) Kubernetes on the fake, %d ms modeled exec latency: a later execution in an"
                 % f.get("exec_latency_ms", 0))
        L.append("      existing pod vs local: after %.2fx (vs local before %.2fx), before %.2fx"
                 "  (goal <= %.1fx: %s)" % (kl["later_after_vs_local_after"],
                                             kl["later_after_vs_local_before"],
                                             kl["later_before_vs_local_before"], GOAL12_LATER,
                                             verdict(kl["later_after_vs_local_after"] <= GOAL12_LATER)))
        r = kl["exec_requests_per_script"]
        L.append("      exec requests per script in steady state: after %s, before %s  (goal 0: %s)"
                 % (r["after"], r["before"], verdict(r["after"] == 0)))
    w = f.get("warm_vs_cold")
    if w:
        L.append("  (c) warm-pool first execution vs a cold one, end to end: after %.1fx faster, before"
                 " %.1fx  (goal >= %.0fx: %s)" % (w["after"]["cold_vs_warm"], w["before"]["cold_vs_warm"],
                                                  GOAL12_WARM,
                                                  verdict(w["after"]["cold_vs_warm"] >= GOAL12_WARM)))
    br = f.get("bridge")
    if br:
        if "bridge_c_library_vs_pingpong" in br:
            L.append("  (d) tool bridge (C library host, bwrap, as (b)) vs a Node<->Node JSON-lines ping-pong,")
            L.append("      %d round trips each, interleaved, medians of %d: %.2fx  (goal >= %.1fx: %s)"
                     % (br["round_trips"], br["runs"], br["bridge_c_library_vs_pingpong"], GOAL12_BRIDGE,
                        verdict(br["bridge_c_library_vs_pingpong"] >= GOAL12_BRIDGE)))
            cpu = (" (CPU per call: codepod %.1f us, runner %.1f us)"
                   % (br["bridge_codepod_cpu_us_per_call"], br["bridge_runner_cpu_us_per_call"])
                   if br.get("bridge_runner_cpu_us_per_call") is not None else "")
            L.append("      bridge %.0f calls/s%s;" % (br["bridge_c_library_calls_per_s"], cpu))
            if "bridge_vs_pingpong_round_median" in br:
                L.append("      median of each round's own ratio (its two runs back to back): %.2fx"
                         % br["bridge_vs_pingpong_round_median"])
            L.append("      ping-pong %.0f calls/s (CPU per call: parent %.1f us, child %.1f us)"
                     % (br["pingpong_calls_per_s"], br["pingpong_parent_cpu_us_per_call"],
                        br["pingpong_child_cpu_us_per_call"]))
            if "floor_c_calls_per_s" in br:
                L.append("      this machine's floor, two bare C processes ping-ponging over a socketpair:"
                         " %.0f calls/s" % br["floor_c_calls_per_s"])
                L.append("      (= %.2fx the ping-pong; the runs, noisy on a shared VM, are in the JSON)"
                         % (br["floor_c_calls_per_s"] / br["pingpong_calls_per_s"]))
        if "bridge_stdio_vs_pingpong" in br:
            L.append("      through serve --stdio with this bench's Python client: %.2fx"
                     % br["bridge_stdio_vs_pingpong"])
    ws = ((figs.get("serve") or {}).get("calls") or {}).get("ratio_ws_vs_stdio")
    if ws:
        L.append("      WebSocket vs stdio round trip ((e) above): %.2fx  (goal <= %.1fx: %s)"
                 % (ws, GOAL12_WS, verdict(ws <= GOAL12_WS)))
    if f.get("peer_note"):
        L.append("      peer not measured: " + f["peer_note"])
    return L


def main():
    argv = sys.argv[1:]
    quick = "--quick" in argv
    only = None
    for a in argv:
        if a.startswith("--only="):
            only = set(a.split("=", 1)[1].split(","))
    argv = [a for a in argv if a != "--quick" and not a.startswith("--only=")]
    if len(argv) == 3 and argv[0] == "--latency-only":
        return latency_only(argv[1], quick, argv[2])
    if len(argv) != 1:
        sys.exit("usage: bench.py [--quick] [--only=SECTION,...] [--latency-only SECTIONS] OUT")

    def wanted(name):
        return only is None or name in only
    out_path = argv[0]
    binary = os.environ.get("BENCH_BIN")
    if not binary or not os.access(binary, os.X_OK):
        sys.exit("bench.py: BENCH_BIN must name the built bench_codepod (run `make bench`)")
    runs = 10 if quick else 30
    count = 2000 if quick else 10000

    failed = []
    figs = {}
    notes = []
    state = tempfile.mkdtemp(prefix="codepod-bench-")
    try:
        def step(name, args):
            print("bench: %s ..." % name, file=sys.stderr, flush=True)
            rc, fig, err = run_bench(binary, args, state)
            if rc == 1:
                failed.append("%s: %s" % (name, err))
            elif rc != 0:
                notes.append("%s not measured: %s" % (name, err.splitlines()[-1] if err else rc))
            if fig:
                figs[name] = fig
            return rc

        if wanted("startup"):
            step("startup_isolated", ["startup", "--runs", str(runs)])
            step("startup_plain", ["startup", "--runs", str(runs), "--no-isolation"])
            step("startup_nocgroup", ["startup", "--runs", str(runs), "--no-cgroup"])
        if wanted("disk"):
            # the workspaces' disk bound on and off, in turn (a process each:
            # the bound is the backend's), so load drifts over both alike
            pairs = 2 if quick else 3
            for i in range(pairs):
                step("disk_on_%d" % i, ["startup", "--runs", "10"])
                step("disk_off_%d" % i, ["startup", "--runs", "10", "--no-disk-bound"])
                step("first_on_%d" % i, ["first", "--runs", "10"])
                step("first_off_%d" % i, ["first", "--runs", "10", "--no-disk-bound"])
        iso = "startup_isolated" in figs or not wanted("startup")
        iso_args = [] if iso else ["--no-isolation"]
        if wanted("startup"):
            step("startup_prestart", ["startup", "--runs", str(runs), "--prestart", "200"] + iso_args)
        if wanted("calls"):
            step("calls", ["calls", "--count", str(count)] + iso_args)
        if wanted("concurrent"):
            step("concurrent", ["concurrent", "--n", "200", "--delay-ms", "1000"] + iso_args)
        exec_bin = os.environ.get("BENCH_EXEC_BIN")
        if exec_bin and wanted("exec"):
            print("bench: exec through the fake API server ...", file=sys.stderr, flush=True)
            # Run from the repository root: it starts tests/fakekube/serve.
            p = subprocess.run([exec_bin, "--runs", str(runs), "--big-runs", "5" if quick else "10"],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            err = p.stderr.strip()
            for line in p.stdout.splitlines():
                if line.startswith("{"):
                    figs["exec"] = json.loads(line)
            if p.returncode == 1:
                failed.append("exec: %s" % (err.splitlines()[-1] if err else "failed"))
            elif p.returncode != 0:
                notes.append("exec figures not measured: %s" % (err[-300:] if err else p.returncode))
        if os.environ.get("CODEPOD_BIN"):
            if wanted("serve") or wanted("serve-calls"):
                run_script("serve", "bench_serve.py", quick, figs, failed, notes,
                           [] if wanted("serve") else ["--calls-only"])
            if wanted("files"):
                print("bench: (i) files and commands ...", file=sys.stderr, flush=True)
                run_script("files", "bench_files.py", quick, figs, failed, notes)
                print("bench: (i) file transfers on the Kubernetes backend ...", file=sys.stderr, flush=True)
                run_script("files_kube", "bench_files.py", True, figs, failed, notes,
                           ["--backend", "kubernetes", "--transfers-only"])
            if wanted("kube"):
                print("bench: Kubernetes backend against the fake API server ...", file=sys.stderr,
                      flush=True)
                run_script("kube", "bench_kube.py", quick, figs, failed, notes)
            if wanted("cluster"):
                print("bench: (m) the real cluster ...", file=sys.stderr, flush=True)
                run_script("cluster", "bench_cluster.py", quick, figs, failed, notes)
            if wanted("resume"):
                print("bench: resume after an approval vs fresh ...", file=sys.stderr, flush=True)
                run_script("resume", "bench_resume.py", quick, figs, failed, notes)
            if wanted("trace"):
                print("bench: tracing on vs off ...", file=sys.stderr, flush=True)
                run_script("trace", "bench_trace.py", quick, figs, failed, notes)
            if wanted("kube-snap"):
                print("bench: (k) snapshots on Kubernetes ...", file=sys.stderr, flush=True)
                run_script("kube_snap", "bench_kube_snap.py", quick, figs, failed, notes)
            if wanted("snapshots"):
                print("bench: (l) snapshots vs curl against a one-node Ceph ...", file=sys.stderr,
                      flush=True)
                run_script("snapshots", os.path.join("..", "store", "bench_snapshots.py"), quick,
                           figs, failed, notes, ["--json"])
            calls = figs.get("calls", {}).get("calls_per_s")
            if calls:
                os.environ["BENCH_BRIDGE_CALLS_PER_S"] = str(calls)
            lat = [x for x in ("a", "load", "b", "c", "d") if wanted("latency") or wanted("latency-" + x)]
            if lat:
                print("bench: (g) latency figures ...", file=sys.stderr, flush=True)
                run_script("latency", "bench_latency.py", quick, figs, failed, notes,
                           [] if wanted("latency") else ["--sections", ",".join(lat)])
    finally:
        shutil.rmtree(state, ignore_errors=True)

    node = os.environ.get("CODEPOD_NODE", "node")
    try:
        node_v = subprocess.run([node, "--version"], stdout=subprocess.PIPE, text=True).stdout.strip()
    except OSError:
        node_v = "?"
    L = []
    L.append("codepod bench  %s  (node %s, %d CPUs)" % (time.strftime("%Y-%m-%d %H:%M:%S"),
                                                     node_v, os.cpu_count() or 0))
    L.append("command: make BUILD=<dir> bench   (figures only; nothing here is asserted)")
    L.append("")
    L.append("(a) startup: one execution of `return 1` through the C library (submit -> done)")
    L.append("    vs a bare `node -e 0` spawned through the same backend (spawn -> exited),")
    L.append("    alternating, median of %d runs each" % runs)
    for key, label, goal in (("startup_plain", "without bwrap (--no-isolation)", GOAL_RATIO_PLAIN),
                             ("startup_isolated", "with bwrap                    ", GOAL_RATIO_BWRAP)):
        f = figs.get(key)
        if not f:
            L.append("    %s  not measured" % label)
            continue
        L.append("    %s  codepod %6.1f ms  bare %6.1f ms  ratio %.2fx  (goal <= %.2fx: %s)"
                 % (label, f["codepod_median_ms"], f["bare_median_ms"], f["ratio"], goal,
                    verdict(f["ratio"] <= goal)))
        L.append("    %s  (usage.startupMs median %.0f ms: submit -> runner ready)"
                 % (" " * len(label), f["codepod_startupMs_median"]))
    if "startup_nocgroup" in figs and "startup_isolated" in figs:
        a, b = figs["startup_isolated"], figs["startup_nocgroup"]
        L.append("    with bwrap, without its cgroup  codepod %6.1f ms: the cgroup per execution "
                 "costs %.2fx (goal <= 1.10x: %s)" % (b["codepod_median_ms"],
                                                      a["codepod_median_ms"] / b["codepod_median_ms"],
                                                      verdict(a["codepod_median_ms"]
                                                              <= 1.10 * b["codepod_median_ms"])))
    on = [figs["disk_on_%d" % i] for i in range(3) if "disk_on_%d" % i in figs]
    off = [figs["disk_off_%d" % i] for i in range(3) if "disk_off_%d" % i in figs]
    if on and off and len(on) == len(off):
        ratios = [a["codepod_median_ms"] / b["codepod_median_ms"] for a, b in zip(on, off)]
        L.append("    the workspace's disk bound (an image per conversation, mounted): `return 1`")
        L.append("      on/off, in turn: %s  (median %.2fx; goal <= 1.10x: %s)"
                 % (" ".join("%.2fx" % r for r in ratios), statistics.median(ratios),
                    verdict(statistics.median(ratios) <= 1.10)))
    fon = [figs["first_on_%d" % i] for i in range(3) if "first_on_%d" % i in figs]
    foff = [figs["first_off_%d" % i] for i in range(3) if "first_off_%d" % i in figs]
    if fon and foff and len(fon) == len(foff):
        L.append("      a new conversation's first `return 1`: %s ms with, %s ms without "
                 "(mkfs.ext4 and a mount); median %+.0f ms"
                 % ("/".join("%.0f" % f["median_ms"] for f in fon),
                    "/".join("%.0f" % f["median_ms"] for f in foff),
                    statistics.median([a["median_ms"] - b["median_ms"] for a, b in zip(fon, foff)])))
    if "startup_plain" in figs and "startup_isolated" in figs:
        L.append("    bwrap alone: bare node %.2fx" % (figs["startup_isolated"]["bare_median_ms"]
                                                    / figs["startup_plain"]["bare_median_ms"]))
    L.append("")
    f = figs.get("calls")
    L.append("(b) tool-call throughput: %d sequential `await tools.echo({i})`, answered" % count)
    L.append("    inside tool_call (maxBridgeRequests raised to %d)" % count)
    if f:
        L.append("    %s  %8.0f calls/s  (goal >= %d/s: %s)"
                 % ("isolated" if f["isolated"] else "no isolation", f["calls_per_s"], GOAL_CALLS,
                    verdict(f["calls_per_s"] >= GOAL_CALLS)))
        L.append("    first -> last call %.0f ms; whole execution submit -> done %.0f ms"
                 % (f["first_to_last_call_ms"], f["submit_to_done_ms"]))
        if "codepod_cpu_us_per_call" in f:
            L.append("    CPU per call: codepod %.1f us, runner (bwrap + Node) %.1f us"
                     % (f["codepod_cpu_us_per_call"], f["runner_cpu_us_per_call"]))
    else:
        L.append("    not measured")
    L.append("")
    f = figs.get("concurrent")
    L.append("(c) 200 executions submitted at once, each awaiting a tool answered after 1 s")
    L.append("    by a uv timer in the host")
    if f:
        L.append("    %s; succeeded %d/%d; wall %.0f ms; most tool calls waiting at once %d"
                 % ("isolated (bwrap)" if f["isolated"] else "no isolation", f["succeeded"], f["n"],
                    f["wall_ms"], f["max_in_flight"]))
        L.append("    codepod RSS before %d KiB, peak (VmHWM) %d KiB -> %.1f KiB per execution"
                 "  (goal <= %d KiB: %s)" % (f["rss_before_kib"], f["hwm_peak_kib"],
                                             f["peak_kib_per_exec"], GOAL_KIB,
                                             verdict(f["peak_kib_per_exec"] <= GOAL_KIB)))
        L.append("    (codepod's own RSS: the Node children are separate processes either way)")
    else:
        L.append("    not measured")
    if os.environ.get("BENCH_EXEC_BIN"):
        L.append("")
        L.extend(exec_lines(figs.get("exec")))
    if os.environ.get("CODEPOD_BIN"):
        L.append("")
        L.extend(serve_lines(figs.get("serve")))
        L.append("")
        L.extend(kube_lines(figs.get("kube")))
        L.append("")
        L.extend(latency_lines(figs))
        L.append("")
        L.extend(resume_lines(figs.get("resume")))
        L.append("")
        L.extend(files_lines(figs.get("files"), figs.get("files_kube")))
        L.append("")
        L.extend(trace_lines(figs.get("trace")))
        L.append("")
        L.extend(kube_snap_lines(figs.get("kube_snap")))
        L.extend(snapshot_lines(figs.get("snapshots")))
        L.append("")
        L.extend(cluster_lines(figs.get("cluster")))
    for n in notes:
        L.append("note: " + n)
    if failed:
        L.append("")
        L.append("FAILED EXECUTIONS:")
        L.extend("    " + x for x in failed)
    L.append("")
    L.append("JSON:")
    L.append(json.dumps(figs, indent=1, sort_keys=True))
    text = "\n".join(L) + "\n"
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    with open(out_path, "w") as fh:
        fh.write(text)
    # The full run lists stay in the file; the terminal gets the summary.
    print(text.split("\nJSON:\n")[0])
    print("(figures and JSON written to %s)" % out_path)
    return 1 if failed else 0


def latency_only(sections, quick, out_path):
    """Section (g) alone (bench_latency.py --sections SECTIONS) into OUT."""
    if not os.environ.get("CODEPOD_BIN"):
        sys.exit("bench.py: CODEPOD_BIN must name the built codepod")
    figs, failed, notes = {}, [], []
    run_script("latency", "bench_latency.py", quick, figs, failed, notes, ["--sections", sections])
    L = latency_lines(figs) + ["note: " + n for n in notes]
    if failed:
        L += ["", "FAILED EXECUTIONS:"] + ["    " + x for x in failed]
    text = "\n".join(L) + "\n"
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    with open(out_path, "w") as fh:
        fh.write(text + "\nJSON:\n" + json.dumps(figs, indent=1, sort_keys=True) + "\n")
    print(text)
    print("(figures and JSON written to %s)" % out_path)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
