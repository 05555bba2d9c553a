#!/usr/bin/env python3
"""bench_trace.py - section (h) of `make bench`: what tracing costs.

`codepod serve --stdio` (the built $CODEPOD_BIN, local backend) with tracing
on (every execute carries a traceparent, spans exported with
--otlp-endpoint to a collector on 127.0.0.1 that answers 200 at once) vs
off (no traceparent, no exporter), alternating runs:

  return1: executions of `return 1`, one after another, submit -> result
  calls:   one execution of N sequential `await tools.echo({ i })`, each
           answered at once by this script, submit -> result

Prints one JSON line: medians and the ratios on/off, of the wall time and
of codepod's own CPU time over the run (its /proc stat: the part tracing
adds to, and less at the mercy of a loaded machine than the wall time).
Figures only.
usage: bench_trace.py [--quick]
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


COLLECTOR = r"""
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        sys.stderr.write("%d\n" % body.count(b'"spanId"'))
        sys.stderr.flush()
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")
httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(httpd.server_address[1], flush=True)
httpd.serve_forever()
"""


class Collector:
    """An OTLP endpoint in a process of its own: reading the spans must not
    take this process's time (its client answers the tool calls)."""

    def __init__(self):
        self.p = subprocess.Popen([sys.executable, "-c", COLLECTOR], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        self.url = "http://127.0.0.1:%d" % int(self.p.stdout.readline())

    def stop(self):
        """The number of spans it received."""
        self.p.terminate()
        _, err = self.p.communicate(30)
        return sum(int(x) for x in err.split() if x.isdigit())


class Serve:
    def __init__(self, state, extra):
        self.p = subprocess.Popen([os.environ["CODEPOD_BIN"], "serve", "--stdio", "--state-dir", state,
                                   *extra], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, bufsize=0)
        self.n = 0

    def send(self, m):
        self.p.stdin.write((json.dumps(m) + "\n").encode())

    def execute(self, js, traced, policy=None):
        """Submit -> result in seconds, answering every tool call at once."""
        self.n += 1
        eid = "b%d" % self.n
        m = {"type": "execute", "id": eid, "conversation": "bench-trace", "js": js,
             "tools": [{"name": "echo"}]}
        if policy:
            m["policy"] = policy
        if traced:
            m["traceparent"] = TP
        t = time.perf_counter()
        self.send(m)
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError("codepod exited")
            msg = json.loads(line)
            if msg.get("type") == "tool_call":
                self.p.stdin.write(b'{"type":"tool_result","id":"%s","call":"%s","output":{"ok":1}}\n'
                                   % (eid.encode(), msg["call"].encode()))
            elif msg.get("type") == "result" and msg.get("id") == eid:
                if msg.get("status") != "succeeded":
                    raise RuntimeError("execution failed: %s" % json.dumps(msg)[:300])
                return time.perf_counter() - t

    def cpu_s(self):
        with open("/proc/%d/stat" % self.p.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self):
        self.p.stdin.close()
        self.p.wait(60)


def main():
    quick = "--quick" in sys.argv
    runs, n_ret, n_calls = (3, 10, 500) if quick else (5, 40, 2000)
    col = Collector()
    state = tempfile.mkdtemp(prefix="codepod-bench-trace-")
    on = Serve(state + "/on", ["--otlp-endpoint", col.url])
    off = Serve(state + "/off", [])
    calls_js = "for (let i = 0; i < %d; i++) await tools.echo({ i }); return 1;" % n_calls
    pol = {"maxBridgeRequests": n_calls + 10}
    try:
        for s, tr in ((on, True), (off, False)):  # warm both (first runner, caches)
            s.execute("return 1", tr)
            s.execute(calls_js, tr, pol)
        ret = {"on": [], "off": []}
        calls = {"on": [], "off": []}
        ret_cpu = {"on": [], "off": []}
        calls_cpu = {"on": [], "off": []}
        for r in range(runs):
            pair = (("on", on, True), ("off", off, False))
            for key, s, tr in (pair if r % 2 == 0 else pair[::-1]):  # either goes first
                c0 = s.cpu_s()
                ret[key].append(statistics.median(s.execute("return 1", tr) for _ in range(n_ret)) * 1e3)
                c1 = s.cpu_s()
                calls[key].append(s.execute(calls_js, tr, pol) * 1e3)
                c2 = s.cpu_s()
                ret_cpu[key].append((c1 - c0) * 1e3 / n_ret)
                calls_cpu[key].append((c2 - c1) * 1e3)
    finally:
        on.close()
        off.close()
        spans = col.stop()
    med = {k: {"return1_ms": statistics.median(ret[k]), "calls_ms": statistics.median(calls[k]),
               "return1_codepod_cpu_ms": statistics.median(ret_cpu[k]),
               "calls_codepod_cpu_ms": statistics.median(calls_cpu[k])}
           for k in ("on", "off")}
    cpu_ratio = lambda a: (med["on"][a] / med["off"][a]) if med["off"][a] else None
    print(json.dumps({
        "runs": runs, "return1_per_run": n_ret, "calls": n_calls, "spans_received": spans,
        "on": med["on"], "off": med["off"],
        "ratio_return1": med["on"]["return1_ms"] / med["off"]["return1_ms"],
        "ratio_calls": med["on"]["calls_ms"] / med["off"]["calls_ms"],
        "ratio_return1_codepod_cpu": cpu_ratio("return1_codepod_cpu_ms"),
        "ratio_calls_codepod_cpu": cpu_ratio("calls_codepod_cpu_ms"),
        "return1_runs_ms": ret, "calls_runs_ms": calls,
    }))


if __name__ == "__main__":
    main()
