"""Helpers for the Kubernetes scenarios: the fake API server's pods and
faults, codepod sessions pointed at it, conversation names and labels."""
import datetime
import hashlib
import json
import os
import signal
import subprocess
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


def log_events(s):
    return s.log_events()


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
