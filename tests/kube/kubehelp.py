"""Helpers for the Kubernetes scenarios: the fake API server's pods and
faults, codepod sessions pointed at it, conversation names and labels."""
import datetime
import hashlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
import uuid
from pathlib import Path

import harness
from harness import Session

REPO = Path(__file__).resolve().parents[2]
NODE_DIR = harness.NODE_DIR
NS = "default"
PODS = f"/api/v1/namespaces/{NS}/pods"
MANAGED = "app.kubernetes.io/managed-by"
CONV_LABEL = "codepod.dev/conversation"
WARM_LABEL = "codepod.dev/warm"
LAST_USED = "codepod.dev/last-used"


def conv_label(key, ns=NS):
    return hashlib.sha256(ns.encode() + b"\0" + key.encode()).hexdigest()[:40]


def pod_name(key, ns=NS):
    return "codepod-" + hashlib.sha256(ns.encode() + b"\0" + key.encode()).hexdigest()[:24]


def new_conv(prefix="c"):
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def is_ready(pod):
    return (pod.get("status", {}).get("phase") == "Running"
            and not pod["metadata"].get("deletionTimestamp")
            and any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in pod.get("status", {}).get("conditions", [])))


def wait_until(fn, timeout, what, interval=0.1):
    """Polls fn until it returns something truthy; fails naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s (last: {v!r})")
        time.sleep(interval)


class FakeApi:
    """The fake API server of a test module (tests/fakekube/conftest.Fake)."""

    def __init__(self, raw):
        self.raw = raw
        self.kubeconfig = raw.kubeconfig

    def pods(self, selector=None, live=True):
        q = "?labelSelector=" + urllib.parse.quote(selector) if selector else ""
        s, _, b = self.raw.request("GET", PODS + q)
        assert s == 200, b
        items = b["items"]
        if live:
            items = [p for p in items if not p["metadata"].get("deletionTimestamp")]
        return items

    def conv_pods(self, key, live=True):
        return self.pods(f"{MANAGED}=codepod,{CONV_LABEL}={conv_label(key)}", live)

    def warm_pods(self, ready=True):
        pods = self.pods(f"{MANAGED}=codepod,{WARM_LABEL}=true")
        return [p for p in pods if is_ready(p)] if ready else pods

    def pod(self, name):
        s, _, b = self.raw.request("GET", f"{PODS}/{name}")
        return b if s == 200 else None

    def delete_pod(self, name, grace=None):
        body = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace is not None:
            body["gracePeriodSeconds"] = grace
        s, _, b = self.raw.request("DELETE", f"{PODS}/{name}", body)
        assert s in (200, 202), b
        return b

    def set_last_used(self, name, seconds_ago):
        t = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=seconds_ago)
        patch = {"metadata": {"annotations": {LAST_USED: t.strftime("%Y-%m-%dT%H:%M:%SZ")}}}
        s, _, b = self.raw.request("PATCH", f"{PODS}/{name}", patch,
                                   headers={"Content-Type": "application/merge-patch+json"})
        assert s == 200, b
        return b

    def fault(self, *rules):
        return self.raw.ctl("faults", list(rules))["added"]

    def faults_left(self):
        return self.raw.ctl("faults", method="GET")

    def clear_faults(self):
        self.raw.ctl("faults", method="DELETE")

    def hold(self, name, **match):
        """A request matching `match` (method, path, count) is kept at the
        server until release(name): the test decides when it goes through."""
        return self.fault({"type": "hold", "name": name, **match})

    def release(self, name):
        self.raw.ctl("release", {"name": name})

    def held(self, name):
        """How many requests the hold `name` keeps now."""
        return self.faults_left()["held"].get(name, 0)

    def set_schedule(self, **kw):
        return self.raw.ctl("schedule", kw)

    def force_state(self, name, state):
        return self.raw.ctl(f"pods/{NS}/{name}/state", {"state": state})

    def kubectl(self, *args, **kw):
        return self.raw.kubectl(*args, **kw)


def start_session(fake, state_dir, args=()):
    """`codepod serve --stdio --backend kubernetes` on `fake`, logging at debug.
    Conversation keys are sent as given (no per-session prefix), so several
    processes can share one and the test knows the pod's name and label."""
    s = Session(state_dir, args=["--backend", "kubernetes", "--kubeconfig", fake.kubeconfig,
                                 "--log-level", "debug", *args])
    s.conv_prefix = ""
    return s


def sigkill(s):
    """Kills codepod on purpose: its teardown then only reaps it."""
    s.killed = True
    s.proc.send_signal(signal.SIGKILL)
    s.proc.wait(10)
    s.closed = True


def log(s, n=60):
    """codepod's stderr (debug log) tail, for failure messages."""
    with s.cond:
        lines = list(s.stderr_lines[-n:])
    return b"".join(lines).decode(errors="replace")


def log_events(s, event=None):
    return s.log_events(event)


def result_of(s, eid, timeout):
    """The result of eid, with codepod's log in the failure message."""
    try:
        return s.wait_result(eid, timeout)
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- codepod log ---\n{log(s)}") from None


def describe(res, s=None):
    text = json.dumps(res)[:2000]
    return text + (f"\n--- codepod log ---\n{log(s)}" if s is not None else "")


def marker():
    return f"1000.{uuid.uuid4().int % 10**9:09d}"


def wait_no_process(mark, timeout=20):
    deadline = time.monotonic() + timeout
    left = harness.processes_with_marker(mark)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = harness.processes_with_marker(mark)
    return left


def kill_marker(mark):
    for pid, _ in harness.processes_with_marker(mark):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


HOSTNAME_JS = "return require('node:os').hostname();"


def codepod_cmd(fake, *args):
    return [harness.CODEPOD_BIN, "serve", "--stdio", "--backend", "kubernetes",
            "--kubeconfig", fake.kubeconfig, *args]


def run_refused(fake, state_dir, *args, timeout=30):
    r = subprocess.run(codepod_cmd(fake, "--state-dir", str(state_dir), *args), stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=timeout)
    return r


TEMPLATE_LABEL = "codepod.dev/template"
CHART_TEMPLATE = str(REPO / "charts" / "codepod" / "files" / "sandbox-pod.yaml")


class PodWatch:
    """Every ADDED, MODIFIED and DELETED event of the pods matching `selector`,
    from a watch on the fake API server (re-watched from the last
    resourceVersion if the server ends it), so a test sees each pod that
    existed, however briefly, not only those a poll happens to catch."""

    def __init__(self, fake, selector, rv=None):
        self.fake, self.selector = fake, selector
        self.events = []            # (type, uid, name, terminating, annotations)
        self.cond = threading.Condition()
        self.error = None
        self._stop = False
        self._conn = None
        if rv is None:
            s, _, b = fake.raw.request("GET", PODS + "?labelSelector=" + urllib.parse.quote(selector))
            assert s == 200, b
            rv = b["metadata"]["resourceVersion"]
            self.initial = b["items"]
        else:
            self.initial = []
        self.rv = rv
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        try:
            while not self._stop:
                q = urllib.parse.urlencode({"watch": "1", "labelSelector": self.selector,
                                            "resourceVersion": self.rv, "timeoutSeconds": "600"})
                c = self.fake.raw.conn(timeout=None)
                self._conn = c
                c.request("GET", f"{PODS}?{q}", headers={"Accept": "application/json"})
                r = c.getresponse()
                if r.status != 200:
                    raise AssertionError(f"watch: HTTP {r.status}: {r.read()[:500]!r}")
                while not self._stop:
                    line = r.readline()
                    if not line:
                        break
                    ev = json.loads(line)
                    obj = ev["object"]
                    if ev["type"] == "ERROR":
                        raise AssertionError(f"watch: {obj}")
                    self.rv = obj["metadata"].get("resourceVersion", self.rv)
                    if ev["type"] == "BOOKMARK":
                        continue
                    m = obj["metadata"]
                    with self.cond:
                        self.events.append((ev["type"], m["uid"], m["name"],
                                            bool(m.get("deletionTimestamp")),
                                            dict(m.get("annotations") or {})))
                        self.cond.notify_all()
                c.close()
        except Exception as e:  # noqa: BLE001 (reported by check())
            if not self._stop:
                with self.cond:
                    self.error = e
                    self.cond.notify_all()

    def wait(self, pred, timeout, what):
        """Until pred(events) holds; fails naming `what`."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not pred(self.events):
                if self.error:
                    raise AssertionError(f"{what}: the watch failed: {self.error}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{what}: not within {timeout}s; events {self.events[-10:]}")
                self.cond.wait(min(left, 0.5))

    def barrier(self, pod, timeout=30):
        """Marks `pod` with a fresh annotation and waits for the watch to
        report it: every event before the mark has been seen."""
        mark = uuid.uuid4().hex
        patch = {"metadata": {"annotations": {"test.codepod.dev/barrier": mark}}}
        s, _, b = self.fake.raw.request("PATCH", f"{PODS}/{pod}", patch,
                                        headers={"Content-Type": "application/merge-patch+json"})
        assert s == 200, b
        self.wait(lambda evs: any(e[4].get("test.codepod.dev/barrier") == mark for e in evs),
                  timeout, f"the watch to see the mark on {pod}")

    def uids(self):
        """Every pod uid seen: listed at the start or in an event."""
        with self.cond:
            return {p["metadata"]["uid"] for p in self.initial} | {e[1] for e in self.events}

    def most_at_once(self):
        """The most pods (terminating ones included) that existed at one time."""
        live = {p["metadata"]["uid"] for p in self.initial}
        most = len(live)
        with self.cond:
            for etype, uid, *_ in self.events:
                if etype == "DELETED":
                    live.discard(uid)
                else:
                    live.add(uid)
                most = max(most, len(live))
        return most

    def deleted(self):
        with self.cond:
            return [e for e in self.events if e[0] == "DELETED" or e[3]]

    def stop(self):
        self._stop = True
        c = self._conn
        if c is not None and c.sock is not None:
            try:
                c.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._t.join(10)


class Listener:
    """`codepod serve --listen` on `fake` (a controller replica as the chart
    runs it, with /metrics), driven by POST /v1/executions."""

    TOKEN = "kube-tests-token"

    def __init__(self, fake, state_dir, args=()):
        d = Path(state_dir)
        d.mkdir(parents=True, exist_ok=True)
        tok = d / "token"
        tok.write_text(self.TOKEN + "\n")
        cmd = [harness.CODEPOD_BIN, "serve", "--listen", "127.0.0.1:0", "--token-file", str(tok),
               "--state-dir", str(d / "state"), "--backend", "kubernetes",
               "--kubeconfig", fake.kubeconfig, "--log-level", "debug", *args]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, cwd=str(REPO))
        self.stderr_lines = []
        self.cond = threading.Condition()
        self.port = None
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()
        with self.cond:
            self.cond.wait_for(lambda: self.port or self.proc.poll() is not None, 30)
        assert self.port, "codepod serve did not start: " + self.stderr_text()

    def _read(self):
        for raw in self.proc.stderr:
            with self.cond:
                self.stderr_lines.append(raw)
                try:
                    m = json.loads(raw)
                    if m.get("event") == "serve.listen":
                        self.port = m["port"]
                except ValueError:
                    pass
                self.cond.notify_all()

    def stderr_text(self, n=40):
        with self.cond:
            return b"".join(self.stderr_lines[-n:]).decode(errors="replace")

    def log_events(self, event=None):
        with self.cond:
            lines = list(self.stderr_lines)
        return harness.parse_log_lines(lines, event)

    def request(self, method, path, body=None, timeout=60):
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = {"Authorization": "Bearer " + self.TOKEN}
        data = None
        if body is not None:
            data = json.dumps(body)
            h["Content-Type"] = "application/json"
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        raw = r.read()
        c.close()
        return r.status, raw

    def execute(self, js, conversation, timeout=60):
        """The outcome of one execution (no tools: the broker is never called)."""
        s, raw = self.request("POST", "/v1/executions",
                              {"id": "h" + uuid.uuid4().hex[:12], "conversation": conversation,
                               "js": js, "tools": [], "broker": {"url": "http://127.0.0.1:9/"}},
                              timeout)
        assert s == 200, (s, raw[:2000], self.stderr_text())
        return json.loads(raw)

    def metrics(self):
        """{"name{labels}": value} of /metrics."""
        s, raw = self.request("GET", "/metrics")
        assert s == 200, raw
        out = {}
        for line in raw.decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout)
        self._t.join(10)
        return rc
