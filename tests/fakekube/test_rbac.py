"""serve --rbac: requests mapped to (resource, subresource, verb) as the real
apiserver does, the chart's rules enforced, the real 403 Status otherwise."""
import os

import pytest

from conftest import fixture, pod_manifest, start, stop

from fakekube_srv.rbac import USER, allowed, forbidden, load_rules, request_info

RULES = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..",
                                      "charts", "codepod", "files", "rbac-rules.yaml"))
P = "/api/v1/namespaces/default/pods"


@pytest.mark.parametrize("method,path,query,want", [
    ("GET", P, {}, ("pods", "", "list", "")),
    ("GET", P, {"watch": "1"}, ("pods", "", "watch", "")),
    ("GET", P, {"watch": "true", "labelSelector": "a=b"}, ("pods", "", "watch", "")),
    ("GET", "/api/v1/watch/namespaces/default/pods", {}, ("pods", "", "watch", "")),
    ("GET", P + "/p1", {}, ("pods", "", "get", "p1")),
    ("POST", P, {}, ("pods", "", "create", "")),
    ("PATCH", P + "/p1", {}, ("pods", "", "patch", "p1")),
    ("PUT", P + "/p1", {}, ("pods", "", "update", "p1")),
    ("DELETE", P + "/p1", {}, ("pods", "", "delete", "p1")),
    ("DELETE", P, {}, ("pods", "", "deletecollection", "")),
    ("GET", P + "/p1/exec", {"command": "node"}, ("pods", "exec", "get", "p1")),
    ("POST", P + "/p1/exec", {"command": "node"}, ("pods", "exec", "create", "p1")),
    ("GET", P + "/p1/log", {}, ("pods", "log", "get", "p1")),
    ("GET", "/api/v1/namespaces/default", {}, ("namespaces", "", "get", "default")),
    ("GET", "/api/v1/pods", {}, ("pods", "", "list", "")),
])
def test_request_info_as_the_apiserver(method, path, query, want):
    i = request_info(method, path, query)
    assert i["resource"] and (i["resource_name"], i["subresource"], i["verb"], i["name"]) == want


def test_the_chart_rules_allow_exactly_codepods_calls():
    rules = load_rules(RULES)
    ok = [("GET", P, {}), ("GET", P, {"watch": "1"}), ("GET", P + "/x", {}), ("POST", P, {}),
          ("PATCH", P + "/x", {}), ("DELETE", P + "/x", {}), ("GET", P + "/x/exec", {}),
          ("POST", P + "/x/exec", {}), ("GET", "/version", {}), ("GET", "/api/v1", {})]
    no = [("PUT", P + "/x", {}), ("DELETE", P, {}), ("GET", P + "/x/log", {}),
          ("GET", P + "/x/attach", {}), ("GET", "/api/v1/pods", {}),
          ("GET", "/api/v1/namespaces/kube-system/pods", {}), ("GET", "/api/v1/namespaces/default", {}),
          ("GET", "/api/v1/namespaces/default/secrets", {}), ("POST", "/api/v1/namespaces/default/services", {}),
          ("GET", "/metrics", {}), ("POST", "/version", {})]
    for m, p, q in ok:
        assert allowed(rules, "default", request_info(m, p, q)), (m, p)
    for m, p, q in no:
        assert not allowed(rules, "default", request_info(m, p, q)), (m, p)


def test_forbidden_bodies_are_the_real_ones():
    user = "system:serviceaccount:convo-system:convo-controller"
    got = forbidden(request_info("POST", "/api/v1/namespaces/convo-sandbox/pods", {}), user)
    assert got == fixture("status-403-forbidden-rbac.json")
    got = forbidden(request_info("GET", "/api/v1/namespaces/convo-sandbox/pods/convo-7f3a9c2e1b/exec", {}), user)
    assert got == fixture("status-403-forbidden-exec.json")


@pytest.fixture(scope="module")
def rbac_fake(tmp_path_factory):
    f = start(tmp_path_factory, "--rbac", RULES)
    yield f
    stop(f)


def test_live_allowed_and_denied(rbac_fake):
    f = rbac_fake
    s, _, b = f.request("POST", P, pod_manifest("rb1"))
    assert s == 201, b
    assert f.request("GET", P + "/rb1")[0] == 200
    assert f.request("GET", P + "?labelSelector=app%3Drb1")[0] == 200
    s, _, b = f.request("PUT", P + "/rb1", b)
    assert s == 403 and b["reason"] == "Forbidden" and b["code"] == 403
    assert b["message"] == (f'pods "rb1" is forbidden: User "{USER}" cannot update resource "pods" '
                            'in API group "" in the namespace "default"')
    assert b["details"] == {"name": "rb1", "kind": "pods"}
    s, _, b = f.request("GET", "/api/v1/namespaces/kube-system/pods")
    assert s == 403 and 'cannot list resource "pods" in API group "" in the namespace "kube-system"' in b["message"]
    s, _, b = f.request("GET", "/api/v1/pods")
    assert s == 403 and b["message"].endswith("at the cluster scope")
    s, _, b = f.request("GET", P + "/rb1/log")
    assert s == 403 and 'cannot get resource "pods/log"' in b["message"]
    # kubectl sees the same refusal, and the allowed calls work.
    assert b"rb1" in f.kubectl("get", "pods").stdout
    r = f.kubectl("get", "pods", "-A", check=False)
    assert r.returncode != 0 and b"forbidden" in r.stderr
    # No credentials stay a 401 (authentication comes first).
    assert f.request("GET", P, cert=False)[0] == 401
    denied = f.ctl("rbac", method="GET")["denied"]
    assert [d["method"] for d in denied] == ["PUT", "GET", "GET", "GET", "GET"]
    assert f.request("DELETE", P + "/rb1")[0] == 200


def test_websocket_exec_also_needs_create_as_from_1_35():
    from fakekube_srv.rbac import websocket_create
    ws = {"Upgrade": "websocket"}
    got = websocket_create(request_info("GET", P + "/x/exec", {"command": "node"}), ws)
    assert (got["resource_name"], got["subresource"], got["verb"]) == ("pods", "exec", "create")
    for sub in ("attach", "portforward"):
        assert websocket_create(request_info("GET", P + f"/x/{sub}", {}), ws)["verb"] == "create"
    assert websocket_create(request_info("GET", P + "/x/exec", {}), {}) is None  # not an upgrade
    assert websocket_create(request_info("GET", P + "/x/log", {}), ws) is None
    assert websocket_create(request_info("POST", P + "/x/exec", {}), ws) is None  # SPDY: create already


@pytest.mark.parametrize("verbs, refused", [
    (["get", "create"], None),
    (["get"], 'cannot create resource "pods/exec"'),
    (["create"], 'cannot get resource "pods/exec"'),
])
def test_kubectl_exec_needs_get_and_create_on_pods_exec(tmp_path_factory, tmp_path, verbs, refused):
    rules = tmp_path / "rules.yaml"
    rules.write_text(f"""
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch", "create", "delete"]
- apiGroups: [""]
  resources: ["pods/exec"]
  verbs: {verbs}
""")
    f = start(tmp_path_factory, "--rbac", str(rules))
    try:
        assert f.request("POST", P, pod_manifest("rx"))[0] == 201
        f.wait_phase("rx")
        r = f.kubectl("exec", "rx", "--", "sh", "-c", "echo hi", check=False)
        denied = f.ctl("rbac", method="GET")["denied"]
        if refused is None:
            assert r.returncode == 0 and r.stdout == b"hi\n", r
            assert denied == []
        else:
            assert r.returncode != 0, r
            # the WebSocket GET is refused with the real 403 naming the missing verb
            ws = [d for d in denied if d["method"] == "GET" and "/exec" in d["path"]]
            assert ws and all(refused in d["message"] for d in ws), denied
            assert ws[0]["message"].startswith(f'pods "rx" is forbidden: User "{USER}" ')
    finally:
        stop(f)
