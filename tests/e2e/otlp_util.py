"""A test OTLP/HTTP collector on 127.0.0.1, and the OpenTelemetry JS
packages (installed offline from .deps/npm-cache) that check what it got."""

import json
import os
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from harness import NODE_DIR, REPO

# Pinned in scripts/deps.sh, which caches them in .deps/npm-cache.
OTEL_PACKAGES = ["@opentelemetry/api@1.9.1", "@opentelemetry/sdk-trace-base@2.12.1",
                 "@opentelemetry/sdk-trace-node@2.12.1", "@opentelemetry/otlp-transformer@0.223.1"]


class Collector:
    """Keeps every POST's path, headers and raw body. mode: "ok" answers 200,
    "refuse" 503, "hang" never answers."""

    def __init__(self, mode="ok"):
        self.mode = mode
        self.requests = []
        self.cond = threading.Condition()
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with outer.cond:
                    outer.requests.append((self.path, dict(self.headers), raw))
                    outer.cond.notify_all()
                if outer.mode == "hang":
                    time.sleep(60)
                    return
                status = 200 if outer.mode == "ok" else 503
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def spans_raw(self):
        with self.cond:
            return [json.loads(raw) for path, _, raw in self.requests if path == "/v1/traces"]

    def wait_spans(self, pred, timeout=60):
        """Blocks until pred(list of span dicts) holds; the deadline only catches a hang."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                spans = [s for body in (json.loads(r) for p, _, r in self.requests)
                         for rs in body["resourceSpans"] for ss in rs["scopeSpans"]
                         for s in ss["spans"]]
                if pred(spans):
                    return spans
                left = deadline - time.monotonic()
                assert left > 0, f"the collector did not get the spans; it has {len(spans)}"
                self.cond.wait(left)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def otel_modules(dest):
    """A node_modules with the pinned OpenTelemetry packages (offline)."""
    dest = str(dest)
    os.makedirs(dest, exist_ok=True)
    env = dict(os.environ, npm_config_cache=str(REPO / ".deps" / "npm-cache"),
               PATH=f"{NODE_DIR}:{os.environ.get('PATH', '')}")
    npm = shutil.which("npm", path=env["PATH"])
    subprocess.run([npm, "install", "--offline", "--no-audit", "--no-fund", "--loglevel=error",
                    "--ignore-scripts", "--prefix", dest, *OTEL_PACKAGES],
                   check=True, env=env, stdout=subprocess.DEVNULL, timeout=600)
    return os.path.join(dest, "node_modules")


def decode(collector, modules, tmp_path):
    """The spans as tests/e2e/otlp_check.mjs reads them with the OpenTelemetry
    packages' encoding (it fails the test if any field differs in form)."""
    bodies = [raw.decode() for path, _, raw in collector.requests if path == "/v1/traces"]
    f = tmp_path / "bodies.json"
    f.write_text(json.dumps(bodies))
    r = subprocess.run([str(NODE_DIR / "node"), str(REPO / "tests" / "e2e" / "otlp_check.mjs"), str(f)],
                       capture_output=True, text=True, env=dict(os.environ, NODE_PATH=modules),
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)
