"""Files and commands figures (section (h) of make bench): a 64 MiB upload
and download through `codepod serve --listen` against the same bytes with
curl to a plain Python HTTP server on loopback, the controller's memory
while 8 such uploads run at once, and run("true") against a `return 1`
program in a conversation that has a sandbox. Prints one JSON line of
figures on stdout, reported with their goals, never asserted.

Environment: CODEPOD_BIN. --quick: fewer runs. --backend kubernetes: the
same against the fake API server (reported, not a goal). --transfers-only:
the upload and download alone.

Each measured transfer goes to a conversation whose sandbox is ready, as
one in a chat does (the user's turn between two): every file operation
takes the conversation's waiting runner, and the next one starts beside
it (runner/prestart.h), so the bench pauses a second before each. The
same transfers back to back, each then waiting for part of that start,
are reported beside them (not the goal's figure)."""

import argparse
import http.server
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "serve"))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

MIB = 1 << 20


class PutHandler(http.server.SimpleHTTPRequestHandler):
    def do_PUT(self):
        n = int(self.headers.get("Content-Length", "0"))
        with open(os.path.join(self.directory, "up.bin"), "wb") as f:
            while n > 0:
                b = self.rfile.read(min(n, 1 << 16))
                if not b:
                    break
                f.write(b)
                n -= len(b)
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


def curl(args):
    t = time.perf_counter()
    # no "Expect: 100-continue": curl would wait a second for it on either side
    subprocess.run(["curl", "-sS", "-f", "-H", "Expect:", "-o", "/dev/null", *args], check=True)
    return time.perf_counter() - t


def rss_kib(pid, key="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--backend", default="local")
    ap.add_argument("--transfers-only", action="store_true")
    a = ap.parse_args()
    if a.backend == "kubernetes":
        os.environ["CODEPOD_BACKEND"] = "kubernetes"
    import harness  # noqa: E402  (reads CODEPOD_BACKEND)
    from wssession import Server  # noqa: E402
    runs = 3 if a.quick else 5
    tmp = tempfile.mkdtemp(prefix="codepod-bench-files-")
    figs = {"backend": a.backend}
    try:
        src = os.path.join(tmp, "src.bin")
        with open(src, "wb") as f:
            for _ in range(64):
                f.write(os.urandom(MIB))
        # the plain copy: curl to a Python HTTP server
        plain_dir = os.path.join(tmp, "plain")
        os.makedirs(plain_dir)
        shutil.copy(src, os.path.join(plain_dir, "src.bin"))
        httpd = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), lambda *x: PutHandler(*x, directory=plain_dir))
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{httpd.server_address[1]}"
        s = Server(os.path.join(tmp, "state"))
        try:
            auth = ["-H", f"Authorization: Bearer {s.token}"]
            url = f"http://{s.host}:{s.port}/v1/conversations/bench/files/big.bin"
            curl([*auth, "-T", src, url])  # the sandbox exists from here on

            def ready(args):
                time.sleep(1.0)  # the next runner has started meanwhile (both, alike)
                return curl(args)
            # the plain copy and codepod's in turn, so that a change of the
            # machine's load meanwhile falls on both alike
            plain_ups, cp_ups, plain_downs, cp_downs = [], [], [], []
            for _ in range(runs):
                plain_ups.append(ready(["-T", src, base + "/up.bin"]))
                cp_ups.append(ready([*auth, "-T", src, url]))
            for _ in range(runs):
                plain_downs.append(ready([base + "/src.bin"]))
                cp_downs.append(ready([*auth, url]))
            plain_up, cp_up = statistics.median(plain_ups), statistics.median(cp_ups)
            plain_down, cp_down = statistics.median(plain_downs), statistics.median(cp_downs)
            b2b_up = statistics.median(curl([*auth, "-T", src, url]) for _ in range(runs))
            b2b_down = statistics.median(curl([*auth, url]) for _ in range(runs))
            httpd.shutdown()
            figs.update(plain_up_s=plain_up, plain_down_s=plain_down, up_s=cp_up, down_s=cp_down,
                        up_ratio=plain_up / cp_up, down_ratio=plain_down / cp_down,
                        b2b_up_s=b2b_up, b2b_down_s=b2b_down)
            if a.transfers_only:
                return print(json.dumps(figs))
            # 8 uploads at once: the controller's RSS above idle
            time.sleep(0.5)
            idle = rss_kib(s.proc.pid)
            procs = [subprocess.Popen(["curl", "-sS", "-f", "-H", "Expect:", "-o", "/dev/null", *auth, "-T", src,
                                       f"http://{s.host}:{s.port}/v1/conversations/bench{i}/files/big.bin"])
                     for i in range(8)]
            peak = idle
            while any(p.poll() is None for p in procs):
                peak = max(peak, rss_kib(s.proc.pid))
                time.sleep(0.02)
            figs.update(idle_rss_kib=idle, peak_rss_kib=peak, uploads_ok=sum(p.returncode == 0 for p in procs))
        finally:
            s.stop()
        # run("true") against return 1, a conversation with a sandbox, over stdio;
        # after the uploads' 512 MiB reached the disk (writeback slows every
        # exec meanwhile, and a command is mostly an exec)
        os.sync()
        sess = harness.Session(os.path.join(tmp, "stdio"))
        try:
            conv = "bench-" + uuid.uuid4().hex[:6]
            sess.run("return 1;", conversation=conv)
            n = 10 if a.quick else 40
            def cmd():
                cid = sess.new_id("c")
                sess.send({"type": "command", "id": cid, "conversation": conv, "argv": ["true"]})
                return cid
            # alternated, one of each in turn, so that a change of the
            # machine's load meanwhile falls on both alike; each after a
            # pause, into a ready sandbox (as a chat's turns come), not
            # waiting for part of the runner the one before used up
            progs, coms = [], []
            for _ in range(n):
                time.sleep(0.5)
                t = time.perf_counter()
                sess.wait_result(sess.execute("return 1;", conversation=conv))
                progs.append(time.perf_counter() - t)
                time.sleep(0.5)
                t = time.perf_counter()
                i = cmd()
                sess.wait_for(lambda m: m.get("id") == i and m["type"] == "command_result", 60, "result")
                coms.append(time.perf_counter() - t)
            prog, com = statistics.median(progs), statistics.median(coms)
            figs.update(return1_ms=prog * 1000, true_ms=com * 1000, true_ratio=com / prog)
        finally:
            sess.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(figs))


if __name__ == "__main__":
    main()
