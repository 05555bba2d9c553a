"""The chart's files in use: codepod on the Kubernetes backend against the fake
API server started with the chart's RBAC rules (--rbac files/rbac-rules.yaml),
creating conversation pods from the chart's template (--pod-template
files/sandbox-pod.yaml, and the template helm renders into the ConfigMap), an
execution with a tool call each time. A Role without pods/exec makes the same
execution fail: the enforcement is real."""
import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.parse
import http.client

import pytest
import yaml

from conftest import CHART, POD_FILE, REPO, RULES_FILE, needs_helm, render, rendered_pod

sys.path.insert(0, str(REPO / "tests" / "e2e"))
from harness import NODE_DIR, Session, assert_ok  # noqa: E402

SERVE = REPO / "tests" / "fakekube" / "serve"


class Fake:
    def __init__(self, d, rules):
        self.d = d
        self.kc = str(d / "kubeconfig")
        port = d / "port"
        self.log = open(d / "fakekube.log", "wb")
        self.proc = subprocess.Popen(
            [str(SERVE), self.kc, "--state-dir", str(d / "state"), "--portfile", str(port),
             "--exec-path", str(NODE_DIR), "--rbac", str(rules),
             # the chart's namespace enforces Pod Security `restricted`
             "--ns-label", "default:pod-security.kubernetes.io/enforce=restricted"],
            stdout=self.log, stderr=subprocess.STDOUT)
        end = time.monotonic() + 60
        while not (port.exists() and os.path.exists(self.kc)):
            assert self.proc.poll() is None and time.monotonic() < end, "the fake did not start"
            time.sleep(0.05)
        self.port = int(port.read_text())
        pki = d / "state" / "pki"
        self.ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self.ctx.load_cert_chain(str(pki / "client.crt"), str(pki / "client.key"))

    def get(self, path):
        c = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=10)
        c.request("GET", path, headers={"Accept": "application/json"})
        r = c.getresponse()
        body = json.loads(r.read())
        c.close()
        return r.status, body

    def pods(self):
        sel = urllib.parse.quote("app.kubernetes.io/managed-by=codepod")
        s, b = self.get(f"/api/v1/namespaces/default/pods?labelSelector={sel}")
        assert s == 200, b
        return b["items"]

    def denied(self):
        return self.get("/fakekube/rbac")[1]["denied"]

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


@pytest.fixture
def fake(tmp_path):
    (tmp_path / "fake").mkdir()
    f = Fake(tmp_path / "fake", RULES_FILE)
    yield f
    f.stop()


def session(tmp_path, kubeconfig, template):
    return Session(tmp_path / "state", args=[
        "--backend", "kubernetes", "--kubeconfig", kubeconfig, "--namespace", "default",
        "--pod-template", str(template)])


def run_with_tool_call(s):
    s.serve({"lookup": lambda inp: {"double": inp["n"] * 2}})
    conv = s.conv_prefix + "chart"
    res = assert_ok(s.run(
        "const r = await tools.lookup({ n: 21 });\n"
        "console.log('from the sandbox pod');\n"
        "return { got: r.double, node: process.version, cwd: process.cwd() };",
        conversation=conv, timeout=120))
    assert res["result"]["got"] == 42
    assert res["result"]["node"].startswith("v22.")
    assert [c["status"] for c in res["calls"]] == ["ok"]
    assert "from the sandbox pod" in res["logs"]
    return conv, res


def the_pod(fake):
    pods = [p for p in fake.pods() if "codepod.dev/conversation" in p["metadata"]["labels"]]
    assert len(pods) == 1, [p["metadata"]["name"] for p in fake.pods()]
    return pods[0]


def test_chart_template_and_rbac_on_the_fake(tmp_path, fake):
    s = session(tmp_path, fake.kc, POD_FILE)
    try:
        run_with_tool_call(s)
        # The same conversation again: its pod is found by label (list/get/patch).
        res = assert_ok(s.run("return 7", conversation=s.conv_prefix + "chart", timeout=120))
        assert res["result"] == 7
    finally:
        s.close()
    pod = the_pod(fake)
    want = yaml.safe_load(POD_FILE.read_text())
    (c,) = [c for c in pod["spec"]["containers"] if c["name"] == "node"]
    (wc,) = want["spec"]["containers"]
    assert c["image"] == wc["image"] and c["securityContext"] == wc["securityContext"]
    assert pod["spec"]["activeDeadlineSeconds"] == want["spec"]["activeDeadlineSeconds"]
    assert pod["spec"]["automountServiceAccountToken"] is False
    for k, v in want["metadata"]["labels"].items():
        assert pod["metadata"]["labels"][k] == v
    assert pod["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "codepod"
    assert fake.denied() == [], "codepod made calls the chart's Role does not allow"


@needs_helm
def test_helm_rendered_template_on_the_fake(tmp_path, fake):
    """What the ConfigMap holds (kind values: another image, resources, maximum
    age), fed to codepod as the Deployment feeds it."""
    pod = rendered_pod(render("-f", str(CHART / "examples" / "kind.yaml"), "--set", "sandbox.warmPool=1"))
    tmpl = tmp_path / "sandbox-pod.yaml"
    tmpl.write_text(yaml.safe_dump(pod))
    s = session(tmp_path, fake.kc, tmpl)
    try:
        run_with_tool_call(s)
    finally:
        s.close()
    got = the_pod(fake)
    assert got["spec"]["containers"][0]["image"] == "localhost/codepod-sandbox:dev"
    assert got["spec"]["activeDeadlineSeconds"] == 3600
    assert got["metadata"]["labels"]["app.kubernetes.io/instance"] == "rel"
    assert fake.denied() == []


@pytest.mark.parametrize("exec_verbs, refused", [
    (None, 'cannot get resource "pods/exec"'),
    # From 1.35 the WebSocket upgrade also needs `create` (the fake enforces it).
    (["get"], 'cannot create resource "pods/exec"'),
], ids=["no-pods-exec", "get-only"])
def test_a_role_without_both_exec_verbs_fails_the_execution(tmp_path, exec_verbs, refused):
    rules = yaml.safe_load(RULES_FILE.read_text())
    narrow = [r for r in rules if r["resources"] != ["pods/exec"]]
    assert len(narrow) == len(rules) - 1
    if exec_verbs:
        narrow.append({"apiGroups": [""], "resources": ["pods/exec"], "verbs": exec_verbs})
    (tmp_path / "fake").mkdir()
    rfile = tmp_path / "rules.yaml"
    rfile.write_text(yaml.safe_dump(narrow))
    f = Fake(tmp_path / "fake", rfile)
    s = session(tmp_path, f.kc, POD_FILE)
    try:
        res = s.run("return 1", timeout=120)
        assert res["status"] == "failed", res
        msg = res["error"]["message"]
        assert res["error"]["code"] == "SANDBOX_UNAVAILABLE" and "HTTP 403" in msg, res
        assert "needs both get and create on pods/exec" in msg, res
        denied = f.denied()
        assert denied and all("/exec" in d["path"] for d in denied), denied
        assert refused in denied[0]["message"]
    finally:
        s.close()
        f.stop()


def _listen_port(log_path, proc, deadline):
    """The port `serve --listen 127.0.0.1:0` bound (its serve.listen log line)."""
    while True:
        assert proc.poll() is None, log_path.read_text()
        for line in log_path.read_text(errors="replace").splitlines():
            try:
                m = json.loads(line)
            except ValueError:
                continue
            if isinstance(m, dict) and m.get("event") == "serve.listen":
                return m["port"]
        assert time.monotonic() < deadline, "codepod serve never said where it listens"
        time.sleep(0.05)


@needs_helm
def test_deployment_args_and_kind_smoke_client_on_the_fake(tmp_path, fake):
    """`codepod serve` with exactly the args the chart's Deployment passes (the
    in-container paths swapped for local files, plus --kubeconfig for the fake),
    driven by kind/smoke_client.py as kind/smoke.sh drives it."""
    import importlib.util
    from conftest import one
    objs = render("-f", str(CHART / "examples" / "kind.yaml"), "--set", "sandbox.namespace=default")
    ctr = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    tmpl = tmp_path / "sandbox-pod.yaml"
    tmpl.write_text(yaml.safe_dump(rendered_pod(objs)))
    token = tmp_path / "token"
    token.write_text("smoke-token\n")
    swap = {"--listen": "127.0.0.1:0", "--token-file": str(token), "--pod-template": str(tmpl)}
    args = []
    for a in ctr["args"]:
        k, _, v = a.partition("=")
        args.append(f"{k}={swap.get(k, v)}")
    assert [a.partition("=")[0] for a in args].count("--backend") == 1
    bin_ = os.environ.get("CODEPOD_BIN", str(REPO / "build" / "codepod"))
    log = open(tmp_path / "serve.log", "wb")
    proc = subprocess.Popen([bin_, "serve", *args, "--kubeconfig", fake.kc], stdout=log, stderr=log)
    spec = importlib.util.spec_from_file_location("smoke_client", REPO / "kind" / "smoke_client.py")
    smoke = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(smoke)
    try:
        end = time.monotonic() + 30
        port = _listen_port(tmp_path / "serve.log", proc, end)
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                if smoke.http_request("127.0.0.1", port, "GET", "/readyz", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < end, "codepod serve never became ready"
            time.sleep(0.1)
        conv = f"smoke-{os.getpid()}"
        m = smoke.run("127.0.0.1", port, "smoke-token", conv, timeout=120)
        assert m["result"]["doubled"] == 42
        label = smoke.conversation_label("default", conv)
        pods = [p for p in fake.pods() if p["metadata"]["labels"].get("codepod.dev/conversation") == label]
        assert len(pods) == 1, [p["metadata"]["labels"] for p in fake.pods()]
        assert pods[0]["spec"]["containers"][0]["image"] == "localhost/codepod-sandbox:dev"
        assert fake.denied() == []
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
    assert proc.returncode == 0, (tmp_path / "serve.log").read_text()[-3000:]
