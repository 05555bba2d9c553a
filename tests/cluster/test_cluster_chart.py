"""charts/codepod installed by helm on the real cluster: its Namespace (Pod
Security `restricted`), ServiceAccount, Role and RoleBinding, NetworkPolicy
and Deployment, the controller in its pod with the in-cluster
service-account config (a projected token, the cluster's CA from the
kube-root-ca.crt ConfigMap), reached through its Service as a backend
reaches it; the Role is all it needs, and the API server refuses it the rest;
`helm upgrade` of the sandbox template while a conversation is in use."""
import json
import uuid

import pytest

import clusterhelp as ch
from smoke_client import conversation_label
from smoke_client import run as run_smoke
from wsclient import WsClient, http_request


def ws_run(chart, conv, js, timeout=300):
    """One execution over the WebSocket API; its result message."""
    ws = WsClient(chart["host"], chart["port"], token=chart["token"], timeout=timeout)
    try:
        ws.send_text(json.dumps({"type": "execute", "id": "e-" + uuid.uuid4().hex[:8],
                                 "conversation": conv, "js": js, "tools": []}))
        while True:
            m = json.loads(ws.recv())
            if m["type"] in ("result", "error"):
                return m
    finally:
        ws.close()


def test_the_chart_serves_programs_from_inside_the_cluster(chart):
    status, _, _ = http_request(chart["host"], chart["port"], "GET", "/readyz")
    assert status == 200
    status, _, _ = http_request(chart["host"], chart["port"], "GET", "/v1/executions/x")
    assert status == 401, "the API answered without the token"
    conv = "chart-" + uuid.uuid4().hex[:8]
    run_smoke(chart["host"], chart["port"], chart["token"], conv)
    (pod,) = ch.pods(ch.SANDBOX_NS, f"{ch.CONV_LABEL}={conversation_label(ch.SANDBOX_NS, conv)}")
    assert ch.is_ready(pod)
    ns = ch.kjson("get", "namespace", ch.SANDBOX_NS)
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    # The controller runs with the token the kubelet projected and the CA
    # the controller manager published, nothing else.
    (ctl,) = ch.pods(ch.RELEASE_NS, "app.kubernetes.io/name=codepod")
    vols = {v["name"]: v for v in ctl["spec"]["volumes"]}
    projected = [v for v in vols.values() if "projected" in v]
    assert projected and any("serviceAccountToken" in s for v in projected
                             for s in v["projected"]["sources"]), ctl["spec"]["volumes"]
    assert ch.kjson("-n", ch.RELEASE_NS, "get", "configmap", "kube-root-ca.crt")["data"]["ca.crt"]
    rs = ch.kjson("-n", ch.RELEASE_NS, "get", "replicasets")["items"]
    assert any(r["status"].get("readyReplicas") for r in rs), "no ReplicaSet made by the controller manager"


def sa_kubeconfig(tmp_path):
    token = ch.kubectl("-n", ch.RELEASE_NS, "create", "token", ch.RELEASE).stdout.strip()
    return ch.kubeconfig_for(ch.SANDBOX_NS, str(tmp_path / "sa.kubeconfig"), token=token)


@pytest.mark.parametrize("verb,resource,allowed", [
    ("create", "pods", True), ("watch", "pods", True), ("create", "pods/exec", True),
    ("get", "pods/exec", True), ("update", "pods", False), ("get", "secrets", False),
    ("create", "pods/portforward", False), ("create", "pods/attach", False),
    ("create", "deployments", False)])
def test_the_role_allows_what_codepod_needs_and_no_more(chart, tmp_path, verb, resource, allowed):
    kc = sa_kubeconfig(tmp_path)
    # (`can-i create pods/exec` would ask for the pod named "exec")
    what, _, sub = resource.partition("/")
    r = ch.kubectl("auth", "can-i", verb, what, *(["--subresource", sub] if sub else []),
                   "-n", ch.SANDBOX_NS, kubeconfig=kc, check=False)
    assert (r.stdout.strip() == "yes") == allowed, (verb, resource, r.stdout, r.stderr)


def test_the_api_server_refuses_what_the_role_leaves_out(chart, tmp_path):
    kc = sa_kubeconfig(tmp_path)
    r = ch.kubectl("-n", ch.SANDBOX_NS, "get", "secrets", kubeconfig=kc, check=False)
    assert r.returncode != 0 and "forbidden" in r.stderr.lower(), r.stderr
    r = ch.kubectl("-n", ch.RELEASE_NS, "get", "pods", kubeconfig=kc, check=False)
    assert r.returncode != 0 and "forbidden" in r.stderr.lower(), r.stderr


def test_a_helm_upgrade_of_the_sandbox_template_loses_nothing(chart):
    conv = "upgrade-" + uuid.uuid4().hex[:8]
    m = ws_run(chart, conv, "require('node:fs').writeFileSync('kept.txt', 'before'); return 1")
    assert m.get("status") == "succeeded", m
    before = ch.kjson("-n", ch.RELEASE_NS, "get", "deployment", ch.RELEASE)["metadata"]["generation"]
    # A changed template (a pod annotation) rolls the controller.
    ch.install_chart(("--set", "sandbox.podAnnotations.codepod-test/upgrade=" + conv))
    after = ch.kjson("-n", ch.RELEASE_NS, "get", "deployment", ch.RELEASE)["metadata"]["generation"]
    assert after > before
    m = ws_run(chart, conv, "return require('node:fs').readFileSync('kept.txt', 'utf8')")
    assert m.get("status") == "succeeded" and m["result"] == "before", m
    # A new conversation gets the new template.
    conv2 = "upgrade2-" + uuid.uuid4().hex[:8]
    m = ws_run(chart, conv2, "return 2")
    assert m.get("status") == "succeeded", m
    (pod,) = ch.pods(ch.SANDBOX_NS, f"{ch.CONV_LABEL}={conversation_label(ch.SANDBOX_NS, conv2)}")
    assert pod["metadata"]["annotations"].get("codepod-test/upgrade") == conv, pod["metadata"]
