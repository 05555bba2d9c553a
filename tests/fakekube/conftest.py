"""Fixtures: start tests/fakekube/serve, wait for it, SIGTERM it at the end."""
import http.client
import json
import os
import signal
import ssl
import subprocess
import sys
import time

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SERVE = os.path.join(HERE, "serve")
# The repository's own copy of the reference fixtures (tests/fixtures/kubernetes).
FIXTURES = os.path.normpath(os.path.join(HERE, "..", "fixtures", "kubernetes"))
# kubectl from scripts/deps.sh (.deps/kubectl/v1.NN/kubectl); CODEPOD_KUBECTL picks another.
KUBECTL = os.environ.get("CODEPOD_KUBECTL") or os.path.normpath(
    os.path.join(HERE, "..", "..", ".deps", "kubectl", "v1.35", "kubectl"))


class Fake:
    """A running fakekube: its kubeconfig, an HTTPS client and kubectl."""

    def __init__(self, proc, kubeconfig, state_dir, home):
        self.proc, self.kubeconfig, self.state_dir, self.home = proc, kubeconfig, state_dir, home
        with open(kubeconfig) as f:
            cfg = yaml.safe_load(f)
        self.server = cfg["clusters"][0]["cluster"]["server"]
        self.port = int(self.server.rsplit(":", 1)[1])
        pki = os.path.join(state_dir, "pki")
        self.ca = os.path.join(pki, "ca.crt")
        with open(os.path.join(pki, "token")) as f:
            self.token = f.read().strip()
        self.ctx = ssl.create_default_context(cafile=self.ca)
        self.ctx.load_cert_chain(os.path.join(pki, "client.crt"), os.path.join(pki, "client.key"))
        self.bare_ctx = ssl.create_default_context(cafile=self.ca)  # no client cert

    def conn(self, timeout=10, cert=True):
        return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout,
                                           context=self.ctx if cert else self.bare_ctx)

    def request(self, method, path, body=None, headers=None, timeout=10, cert=True, token=None):
        """Returns (status, headers, parsed JSON or raw bytes)."""
        c = self.conn(timeout, cert)
        h = {"Accept": "application/json", **(headers or {})}
        if token:
            h["Authorization"] = "Bearer " + token
        data = None
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            h.setdefault("Content-Type", "application/json")
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        raw = r.read()
        c.close()
        try:
            return r.status, r.headers, json.loads(raw)
        except ValueError:
            return r.status, r.headers, raw

    def ctl(self, path, body=None, method="POST"):
        s, _, b = self.request(method, "/fakekube/" + path, body)
        assert s == 200, b
        return b

    def kubectl(self, *args, input=None, timeout=30, check=True):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self.home,
               "KUBECONFIG": self.kubeconfig, "KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "true"}
        r = subprocess.run([KUBECTL, *args], input=input, capture_output=True, timeout=timeout, env=env)
        if check and r.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} -> {r.returncode}\n{r.stdout!r}\n{r.stderr!r}")
        return r

    def wait_phase(self, name, want="Running", ready=True, timeout=10):
        end = time.time() + timeout
        while time.time() < end:
            s, _, p = self.request("GET", f"/api/v1/namespaces/default/pods/{name}")
            if s == 200 and p["status"].get("phase") == want and (
                    not ready or any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))):
                return p
            time.sleep(0.05)
        raise AssertionError(f"pod {name} never reached {want}: {p}")

    def wait_waiting(self, name, reasons, timeout=30):
        """Until the pod is scheduled and its container waits for one of reasons."""
        end = time.time() + timeout
        while time.time() < end:
            s, _, p = self.request("GET", f"/api/v1/namespaces/default/pods/{name}")
            cs = p.get("status", {}).get("containerStatuses", []) if s == 200 else []
            if p.get("spec", {}).get("nodeName") and any(
                    (c.get("state", {}).get("waiting") or {}).get("reason") in reasons for c in cs):
                return p
            time.sleep(0.05)
        raise AssertionError(f"pod {name} never waited for {reasons}: {p}")


def start(tmp_path_factory, *extra):
    d = tmp_path_factory.mktemp("fakekube")
    kc, state, home = str(d / "kubeconfig"), str(d / "state"), str(d / "home")
    os.makedirs(home)
    proc = subprocess.Popen([SERVE, kc, "--state-dir", state, "--pidfile", str(d / "pid"), *extra],
                            stdout=sys.stderr, stderr=sys.stderr)
    end = time.time() + 20
    while True:
        assert proc.poll() is None, "serve exited early"
        assert time.time() < end, "serve did not come up"
        if os.path.exists(kc):
            try:
                fake = Fake(proc, kc, state, home)
                s, h, _ = fake.request("GET", "/version", timeout=2)
                # The pid header proves we reached the server we started, not a leftover.
                if s == 200 and h.get("X-Fakekube-Pid") == str(proc.pid):
                    return fake
            except (OSError, ssl.SSLError):
                pass
        time.sleep(0.05)


def stop(fake):
    fake.proc.send_signal(signal.SIGTERM)
    try:
        fake.proc.wait(10)
    except subprocess.TimeoutExpired:
        fake.proc.kill()
        raise


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    f = start(tmp_path_factory)
    yield f
    stop(f)
    assert f.proc.returncode == 0


@pytest.fixture(scope="module")
def fake_token(tmp_path_factory):
    f = start(tmp_path_factory, "--auth", "token")
    yield f
    stop(f)


@pytest.fixture(autouse=True)
def _clear_faults(request):
    yield
    for name in ("fake", "fake_token"):
        if name in request.fixturenames:
            request.getfixturevalue(name).ctl("faults", method="DELETE")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return json.load(f)


def pod_manifest(name, image="busybox:1.36", labels=None, annotations=None):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {"app": name}, "annotations": annotations or {}},
            "spec": {"containers": [{"name": "main", "image": image, "command": ["sleep", "infinity"]}]}}
