"""The chart without a cluster: yamllint on its plain YAML, values against
values.schema.json (jsonschema), helm lint and helm template for the default,
kind and GKE values, the rendered objects checked field by field against the
Kubernetes API models (python3-kubernetes), and the one-source-of-truth rules:
the Role's rules and the sandbox pod template are the files under files/."""
import copy
import json
import subprocess
import sys

import jsonschema
import pytest
import yaml

from conftest import (CHART, EXAMPLES, HELM, POD_FILE, REPO, RULES_FILE, needs_helm, one,
                      render, render_fails, rendered_pod)

sys.path.insert(0, str(REPO / "tests" / "fakekube"))
from apimodel import check_against_model  # noqa: E402

PLAIN_YAML = [CHART / "Chart.yaml", CHART / "values.yaml", POD_FILE, RULES_FILE, *EXAMPLES,
              REPO / "kind" / "cluster.yaml"]
SCHEMA = json.loads((CHART / "values.schema.json").read_text())
DEFAULTS = yaml.safe_load((CHART / "values.yaml").read_text())


def merged(base, over):
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


# ------------------------------------------------------------ plain files

def test_yamllint_plain_yaml():
    cfg = ("{extends: default, rules: {line-length: {max: 120}, document-start: disable, "
           "comments: {min-spaces-from-content: 1}, truthy: {check-keys: false}}}")
    r = subprocess.run(["yamllint", "-s", "-d", cfg, *map(str, PLAIN_YAML)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_schema_is_a_valid_draft7_schema():
    jsonschema.Draft7Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("example", [None, *EXAMPLES], ids=lambda p: p.name if p else "defaults")
def test_values_match_the_schema(example):
    values = DEFAULTS if example is None else merged(DEFAULTS, yaml.safe_load(example.read_text()))
    jsonschema.Draft7Validator(SCHEMA).validate(values)


@pytest.mark.parametrize("bad", [
    {"sandbox": {"warmPool": -1}},
    {"sandbox": {"idleTtlSeconds": 100001}},
    {"sandbox": {"podLabels": {"codepod.dev/conversation": "x"}}},
    {"sandbox": {"podLabels": {"app.kubernetes.io/managed-by": "me"}}},
    {"sandbox": {"namespace": "Not_A_Namespace"}},
    {"server": {"logLevel": "loud"}},
    {"networkPolicy": {"backends": []}},
    {"gkeSandbox": "yes"},
    {"unknownKey": 1},
    {"image": {"pullPolicy": "Sometimes"}},
    {"snapshots": {"url": "http://bucket/prefix"}},
    {"snapshots": {"url": "s3://Bad_Bucket/p"}},
    {"snapshots": {"delaySeconds": 0}},
    {"snapshots": {"delaySeconds": 31}},
    {"snapshots": {"maxBytes": "4 GiB"}},
    {"snapshots": {"credentials": {"mode": "volume"}}},
    {"snapshots": {"gcpServiceAccount": "not-an-email"}},
])
def test_schema_refuses_bad_values(bad):
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(SCHEMA).validate(merged(DEFAULTS, bad))


def test_rbac_rules_file_is_exactly_codepods_calls():
    rules = yaml.safe_load(RULES_FILE.read_text())
    got = {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]
           for v in rule["verbs"]}
    assert got == {("", "pods", v) for v in ("get", "list", "watch", "create", "delete", "patch")} | \
        {("", "pods/exec", "get"), ("", "pods/exec", "create")}
    assert all(set(rule) == {"apiGroups", "resources", "verbs"} for rule in rules)


def test_sandbox_pod_file_is_hardened_and_valid_for_codepod():
    pod = yaml.safe_load(POD_FILE.read_text())
    assert pod["kind"] == "Pod" and "name" not in pod["metadata"]
    assert not [k for k in pod["metadata"].get("labels", {})
                if k.startswith("codepod.dev/") or k == "app.kubernetes.io/managed-by"]
    spec = pod["spec"]
    assert spec["automountServiceAccountToken"] is False and spec["restartPolicy"] == "Never"
    assert spec["activeDeadlineSeconds"] > 0
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    (c,) = [c for c in spec["containers"] if c["name"] == "node"]
    sc = c["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert c["resources"]["limits"]["memory"] and c["resources"]["requests"]["cpu"]
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    vols = {v["name"]: v for v in spec["volumes"]}
    assert "emptyDir" in vols[mounts["/workspace"]] and "emptyDir" in vols[mounts["/tmp"]]


# ----------------------------------------------------------------- helm

@needs_helm
@pytest.mark.parametrize("example", [None, *EXAMPLES], ids=lambda p: p.name if p else "defaults")
def test_helm_lint_strict(example):
    args = [] if example is None else ["-f", str(example)]
    r = subprocess.run([HELM, "lint", "--strict", str(CHART), *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@needs_helm
def test_role_rules_are_the_rules_file():
    objs = render("--set", "sandbox.namespace=sb")
    role = one(objs, "Role")
    assert role["rules"] == yaml.safe_load(RULES_FILE.read_text())
    assert role["metadata"]["namespace"] == "sb"
    rb = one(objs, "RoleBinding")
    assert rb["metadata"]["namespace"] == "sb"
    assert rb["subjects"] == [{"kind": "ServiceAccount", "name": one(objs, "ServiceAccount")["metadata"]["name"],
                               "namespace": "codepod"}]
    assert not [o for o in objs if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]


def _strip_value_fields(pod):
    """The pod with the fields values.yaml sets removed (what must stay the file's)."""
    p = copy.deepcopy(pod)
    for k in ("instance", "part-of"):
        p["metadata"]["labels"].pop(f"app.kubernetes.io/{k}", None)
    for k in ("activeDeadlineSeconds", "runtimeClassName", "nodeSelector", "tolerations"):
        p["spec"].pop(k, None)
    for c in p["spec"]["containers"]:
        if c["name"] == "node":
            for k in ("image", "imagePullPolicy", "resources"):
                c.pop(k)
    for v in p["spec"]["volumes"]:
        if v["name"] == "workspace":
            v["emptyDir"].pop("sizeLimit")
    return p


@needs_helm
@pytest.mark.parametrize("example", [None, *EXAMPLES], ids=lambda p: p.name if p else "defaults")
def test_configmap_pod_is_the_file_with_values_applied(example):
    args = [] if example is None else ["-f", str(example)]
    values = DEFAULTS if example is None else merged(DEFAULTS, yaml.safe_load(example.read_text()))
    objs = render(*args)
    pod = rendered_pod(objs)
    assert _strip_value_fields(pod) == _strip_value_fields(yaml.safe_load(POD_FILE.read_text()))
    sb = values["sandbox"]
    (c,) = [c for c in pod["spec"]["containers"] if c["name"] == "node"]
    assert c["image"] == f"{sb['image']['repository']}:{sb['image']['tag']}"
    assert c["resources"] == sb["resources"]
    assert pod["spec"]["activeDeadlineSeconds"] == sb["maxAgeSeconds"]
    # The controller gets it through the mounted ConfigMap and --pod-template.
    dep = one(objs, "Deployment")
    ctr = dep["spec"]["template"]["spec"]["containers"][0]
    assert "--pod-template=/etc/codepod/sandbox-pod.yaml" in ctr["args"]
    (m,) = [m for m in ctr["volumeMounts"] if m["mountPath"] == "/etc/codepod"]
    (v,) = [v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == m["name"]]
    assert v["configMap"]["name"] == one(objs, "ConfigMap", "-sandbox-pod")["metadata"]["name"]
    assert f"--warm-pool={sb['warmPool']}" in ctr["args"]
    assert f"--idle-ttl={sb['idleTtlSeconds']}" in ctr["args"]
    ns = sb["namespace"] or "codepod"
    assert f"--namespace={ns}" in ctr["args"]
    assert one(objs, "NetworkPolicy", "-sandbox-deny-all")["metadata"]["namespace"] == ns


@needs_helm
def test_gke_sandbox_sets_gvisor_node_selector_and_toleration():
    pod = rendered_pod(render("--set", "gkeSandbox=true"))
    assert pod["spec"]["runtimeClassName"] == "gvisor"
    assert pod["spec"]["nodeSelector"] == {"sandbox.gke.io/runtime": "gvisor"}
    assert {"key": "sandbox.gke.io/runtime", "operator": "Equal", "value": "gvisor",
            "effect": "NoSchedule"} in pod["spec"]["tolerations"]
    plain = rendered_pod(render())
    assert "runtimeClassName" not in plain["spec"] and "tolerations" not in plain["spec"]


@needs_helm
def test_deployment_probes_grace_security_and_labels():
    objs = render("--set", "server.drainSeconds=40")
    dep = one(objs, "Deployment")
    spec = dep["spec"]["template"]["spec"]
    ctr = spec["containers"][0]
    assert ctr["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert ctr["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert "--drain-seconds=40" in ctr["args"]
    assert spec["terminationGracePeriodSeconds"] > 40
    assert ctr["securityContext"]["readOnlyRootFilesystem"] is True
    assert ctr["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert ctr["resources"]["limits"]["memory"]
    for o in objs:
        labels = o["metadata"]["labels"]
        for k in ("name", "instance", "version", "managed-by", "part-of"):
            assert f"app.kubernetes.io/{k}" in labels, (o["kind"], k)
    assert "longer than server.drainSeconds" in render_fails("--set", "terminationGracePeriodSeconds=40", "--set", "server.drainSeconds=40")


@needs_helm
def test_the_template_drift_value_becomes_its_flag():
    ctr = one(render(), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert not [a for a in ctr["args"] if a.startswith("--template-drift-idle")]
    ctr = one(render("--set", "sandbox.templateDriftIdleSeconds=600"),
              "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert "--template-drift-idle=600" in ctr["args"]


@needs_helm
def test_controller_networkpolicy_admits_only_the_backends():
    objs = render()
    np = one(objs, "NetworkPolicy", "-controller")
    assert np["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = np["spec"]["ingress"]
    assert rule["from"] == DEFAULTS["networkPolicy"]["backends"] and rule["from"]
    deny = one(objs, "NetworkPolicy", "-sandbox-deny-all")
    assert deny["spec"]["podSelector"] == {"matchLabels": {"app.kubernetes.io/managed-by": "codepod"}}
    assert deny["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert deny["spec"]["ingress"] == [] and deny["spec"]["egress"] == []


@needs_helm
def test_token_secret_or_existing_one():
    objs = render("--set", "api.token=abc")
    import base64
    assert base64.b64decode(one(objs, "Secret")["data"]["token"]) == b"abc"
    objs = render("--set", "api.existingSecret=mine", "--set", "api.existingSecretKey=k")
    assert not [o for o in objs if o["kind"] == "Secret"]
    spec = one(objs, "Deployment")["spec"]["template"]["spec"]
    assert "--token-file=/var/run/codepod/token/k" in spec["containers"][0]["args"]
    (v,) = [v for v in spec["volumes"] if v["name"] == "token"]
    assert v["secret"]["secretName"] == "mine"


@needs_helm
def test_reserved_sandbox_labels_fail_the_render():
    err = render_fails("--set", "sandbox.podLabels.codepod\\.dev/x=1")
    assert "codepod.dev/x" in err


# ---------------------------------------------- API models (python3-kubernetes)

MODELS = {"Deployment": "V1Deployment", "Service": "V1Service", "ServiceAccount": "V1ServiceAccount",
          "Role": "V1Role", "RoleBinding": "V1RoleBinding", "ConfigMap": "V1ConfigMap",
          "Secret": "V1Secret", "NetworkPolicy": "V1NetworkPolicy",
          "PodDisruptionBudget": "V1PodDisruptionBudget", "Namespace": "V1Namespace"}


@needs_helm
@pytest.mark.parametrize("example", [None, *EXAMPLES], ids=lambda p: p.name if p else "defaults")
def test_rendered_objects_fit_the_api_models(example):
    args = [] if example is None else ["-f", str(example)]
    objs = render(*args)
    kinds = {o["kind"] for o in objs}
    assert {"Deployment", "Service", "ServiceAccount", "Role", "RoleBinding", "ConfigMap",
            "NetworkPolicy"} <= kinds
    for o in objs:
        check_against_model(o, MODELS[o["kind"]], f"{o['kind']}/{o['metadata']['name']}")
    check_against_model(rendered_pod(objs), "V1Pod", "sandbox-pod")
    check_against_model(yaml.safe_load(POD_FILE.read_text()), "V1Pod", "files/sandbox-pod.yaml")


# ------------------------------------------------------- snapshots

def _controller(objs):
    spec = one(objs, "Deployment")["spec"]["template"]["spec"]
    return spec, spec["containers"][0]


def _snapshot_args(ctr):
    return [a for a in ctr["args"] if a.startswith(("--snapshot-", "--s3-", "--state-dir"))]


HMAC = ["--set", "snapshots.url=s3://codepod-snaps/prod",
        "--set", "snapshots.endpoint=https://storage.googleapis.com",
        "--set", "snapshots.region=us-central1",
        "--set", "snapshots.credentials.existingSecret=codepod-hmac",
        "--set", "snapshots.ttlSeconds=2592000"]
WORKLOAD_IDENTITY = ["--set", "snapshots.url=gs://codepod-snaps/prod",
                     "--set", "snapshots.gcpServiceAccount=codepod@proj.iam.gserviceaccount.com"]


@needs_helm
def test_snapshots_are_off_by_default():
    objs = render()
    spec, ctr = _controller(objs)
    assert _snapshot_args(ctr) == []
    assert "env" not in ctr
    assert {v["name"] for v in spec["volumes"]} == {"sandbox-pod", "token", "tmp"}
    assert "annotations" not in one(objs, "ServiceAccount")["metadata"]


@needs_helm
def test_snapshots_with_static_hmac_keys_from_a_mounted_secret():
    objs = render(*HMAC)
    spec, ctr = _controller(objs)
    assert _snapshot_args(ctr) == [
        "--snapshot-url=s3://codepod-snaps/prod",
        "--state-dir=/var/lib/codepod",
        "--s3-endpoint=https://storage.googleapis.com",
        "--s3-region=us-central1",
        "--s3-credentials-file=/var/run/codepod/s3/credentials",
        "--snapshot-ttl=2592000", "--snapshot-delay=2", "--snapshot-max-bytes=4G"]
    # The whole Secret as a folder (no subPath), so a rotated key reaches the
    # file codepod reads again; nothing in the environment.
    (m,) = [m for m in ctr["volumeMounts"] if m["mountPath"] == "/var/run/codepod/s3"]
    assert m["readOnly"] is True and "subPath" not in m
    (v,) = [v for v in spec["volumes"] if v["name"] == m["name"]]
    assert v["secret"] == {"secretName": "codepod-hmac", "defaultMode": 0o440}
    assert "env" not in ctr
    # The state folder: an emptyDir of snapshots.spoolSizeLimit.
    (m,) = [m for m in ctr["volumeMounts"] if m["mountPath"] == "/var/lib/codepod"]
    (v,) = [v for v in spec["volumes"] if v["name"] == m["name"]]
    assert v["emptyDir"] == {"sizeLimit": "8Gi"}
    assert "annotations" not in one(objs, "ServiceAccount")["metadata"]


@needs_helm
def test_snapshots_with_keys_in_the_environment():
    objs = render(*HMAC, "--set", "snapshots.credentials.mode=env",
                  "--set", "snapshots.credentials.sessionTokenKey=token")
    spec, ctr = _controller(objs)
    assert not [a for a in ctr["args"] if a.startswith("--s3-credentials-file")]
    assert not [v for v in spec["volumes"] if v["name"] == "s3-credentials"]
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in ctr["env"]}
    assert env == {"AWS_ACCESS_KEY_ID": {"name": "codepod-hmac", "key": "AWS_ACCESS_KEY_ID"},
                   "AWS_SECRET_ACCESS_KEY": {"name": "codepod-hmac", "key": "AWS_SECRET_ACCESS_KEY"},
                   "AWS_SESSION_TOKEN": {"name": "codepod-hmac", "key": "token"}}


@needs_helm
def test_snapshots_with_workload_identity_need_no_keys():
    objs = render(*WORKLOAD_IDENTITY, "--set", "snapshots.delaySeconds=5",
                  "--set", "snapshots.maxBytes=512M")
    spec, ctr = _controller(objs)
    assert _snapshot_args(ctr) == ["--snapshot-url=gs://codepod-snaps/prod",
                                   "--state-dir=/var/lib/codepod", "--snapshot-ttl=0",
                                   "--snapshot-delay=5", "--snapshot-max-bytes=512M"]
    sa = one(objs, "ServiceAccount")
    assert sa["metadata"]["annotations"] == {
        "iam.gke.io/gcp-service-account": "codepod@proj.iam.gserviceaccount.com"}
    assert spec["serviceAccountName"] == sa["metadata"]["name"]
    assert "env" not in ctr
    assert {v["name"] for v in spec["volumes"]} == {"sandbox-pod", "token", "tmp", "state"}
    # Other annotations are kept beside it.
    objs = render(*WORKLOAD_IDENTITY, "--set", "serviceAccount.annotations.team=x")
    assert one(objs, "ServiceAccount")["metadata"]["annotations"] == {
        "team": "x", "iam.gke.io/gcp-service-account": "codepod@proj.iam.gserviceaccount.com"}


@needs_helm
def test_snapshot_encryption_key_from_a_secret():
    objs = render(*WORKLOAD_IDENTITY, "--set", "snapshots.encryption.existingSecret=snapkeys")
    spec, ctr = _controller(objs)
    assert "--snapshot-key-file=/var/run/codepod/snapshot-keys/keys" in ctr["args"]
    (m,) = [m for m in ctr["volumeMounts"] if m["mountPath"] == "/var/run/codepod/snapshot-keys"]
    (v,) = [v for v in spec["volumes"] if v["name"] == m["name"]]
    assert v["secret"]["secretName"] == "snapkeys" and m["readOnly"] is True


@needs_helm
def test_snapshot_configurations_that_cannot_work_fail_the_render():
    err = render_fails("--set", "snapshots.url=gs://b-1/p",
                       "--set", "snapshots.credentials.existingSecret=k")
    assert "gs:// takes its token from the GKE metadata server" in err
    err = render_fails("--set", "snapshots.url=s3://b-1/p")
    assert "snapshots.credentials.existingSecret" in err


@needs_helm
@pytest.mark.parametrize("conf", ["hmac", "workload-identity"])
def test_snapshot_objects_fit_the_api_models(conf):
    objs = render(*(HMAC if conf == "hmac" else WORKLOAD_IDENTITY),
                  "--set", "snapshots.encryption.existingSecret=snapkeys")
    for o in objs:
        check_against_model(o, MODELS[o["kind"]], f"{o['kind']}/{o['metadata']['name']}")


@needs_helm
@pytest.mark.parametrize("conf", ["hmac", "workload-identity"])
def test_codepod_takes_the_rendered_snapshot_args(conf, tmp_path):
    """The snapshot flags as the chart renders them, given to the codepod
    binary (local backend, files at local paths): it starts and stops
    cleanly with them, so every name and value is one codepod takes."""
    import os
    import socket
    bin_ = os.environ.get("CODEPOD_BIN", str(REPO / "build" / "codepod"))
    if not os.access(bin_, os.X_OK):
        pytest.skip("no codepod binary (make)")
    objs = render(*(HMAC if conf == "hmac" else WORKLOAD_IDENTITY),
                  "--set", "snapshots.encryption.existingSecret=snapkeys")
    _, ctr = _controller(objs)
    creds = tmp_path / "credentials"
    creds.write_text("[default]\naws_access_key_id = GOOGTEST\naws_secret_access_key = c2VjcmV0\n")
    keys = tmp_path / "keys"
    keys.write_text("k1 " + "ab" * 32 + "\n")
    swap = {"/var/run/codepod/s3/credentials": str(creds),
            "/var/run/codepod/snapshot-keys/keys": str(keys)}
    args = []
    for a in _snapshot_args(ctr):
        k, _, v = a.partition("=")
        if k != "--state-dir":
            args.append("%s=%s" % (k, swap.get(v, v)))
    with socket.socket() as s:  # nothing is fetched: no execution runs
        s.bind(("127.0.0.1", 0))
        host = "127.0.0.1:%d" % s.getsockname()[1]
    env = dict(os.environ, GCE_METADATA_HOST=host)
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        env.pop(k, None)
    r = subprocess.run([bin_, "serve", "--stdio", "--backend=local", "--no-isolation",
                        "--state-dir", str(tmp_path / "state"), *args],
                       input="", capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
