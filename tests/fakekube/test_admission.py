"""Admission in the fake (fakekube_srv/admission.py), judged by kubectl:
namespaces a client creates and labels, Pod Security `restricted` and
`baseline` enforced from those labels with the real 403 listing every
violation, strict field validation (kubectl's default) with the real 400,
and the Warn and Ignore modes. The chart's sandbox pod passes `restricted`."""
import copy
import json
import pathlib

import pytest
import yaml

from conftest import fixture, pod_manifest

REPO = pathlib.Path(__file__).resolve().parents[2]
CHART_POD = REPO / "charts" / "codepod" / "files" / "sandbox-pod.yaml"
RESTRICTED = "pod-security.kubernetes.io/enforce=restricted"
BASELINE = "pod-security.kubernetes.io/enforce=baseline"


def ns(fake, name, label=None):
    # from a manifest: `kubectl create namespace` sends protobuf, which the fake does not read
    manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    r = fake.kubectl("create", "-f", "-", check=False, input=json.dumps(manifest).encode())
    assert r.returncode == 0 or b"AlreadyExists" in r.stderr, r
    if label:
        fake.kubectl("label", "--overwrite", "namespace", name, label)


def kubectl_create(fake, tmp_path, obj, *flags, namespace=None):
    f = tmp_path / f"{obj['metadata']['name']}.yaml"
    f.write_text(yaml.safe_dump(obj))
    ns_args = ["-n", namespace] if namespace else []
    return fake.kubectl("create", *ns_args, *flags, "-f", str(f), check=False), str(f)


def test_namespaces_are_created_labelled_and_listed_by_kubectl(fake):
    ns(fake, "lab-ns")
    fake.kubectl("label", "namespace", "lab-ns", "team=a")
    got = json.loads(fake.kubectl("get", "namespace", "lab-ns", "-o", "json").stdout)
    assert got["metadata"]["labels"] == {"team": "a", "kubernetes.io/metadata.name": "lab-ns"}
    out = fake.kubectl("get", "namespaces", "-l", "team=a", "-o", "name").stdout
    assert out.split() == [b"namespace/lab-ns"]
    r = fake.kubectl("create", "-f", "-", check=False, input=json.dumps(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lab-ns"}}).encode())
    assert r.returncode == 1 and b'namespaces "lab-ns" already exists' in r.stderr
    r = fake.kubectl("create", "-n", "no-such-ns", "-f", "-", check=False,
                     input=json.dumps(pod_manifest("orphan")).encode())
    assert r.returncode == 1 and b'namespaces "no-such-ns" not found' in r.stderr


def test_restricted_refuses_a_plain_pod_with_every_violation(fake, tmp_path):
    ns(fake, "psa-r", RESTRICTED)
    r, f = kubectl_create(fake, tmp_path, pod_manifest("plain"), namespace="psa-r")
    assert r.returncode == 1
    assert r.stderr.decode().strip() == (
        f'Error from server (Forbidden): error when creating "{f}": pods "plain" is forbidden: '
        'violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "main" must set '
        'securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "main" must set '
        'securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "main" must set '
        'securityContext.runAsNonRoot=true), seccompProfile (pod or container "main" must set '
        'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")')
    # the same pod where nothing is enforced
    r, _ = kubectl_create(fake, tmp_path, pod_manifest("plain"), namespace="default")
    assert r.returncode == 0, r


def test_restricted_checks_in_the_real_order(fake, tmp_path):
    ns(fake, "psa-r", RESTRICTED)
    fake.kubectl("label", "--overwrite", "namespace", "psa-r", "pod-security.kubernetes.io/enforce-version=v1.33")
    try:
        pod = pod_manifest("worst")
        spec = pod["spec"]
        spec.update(hostNetwork=True, hostPID=True,
                    securityContext={"runAsUser": 0, "seccompProfile": {"type": "Unconfined"}},
                    volumes=[{"name": "host", "hostPath": {"path": "/"}}, {"name": "scratch", "emptyDir": {}}])
        c = spec["containers"][0]
        c["ports"] = [{"containerPort": 80, "hostPort": 8080}]
        c["securityContext"] = {"privileged": True, "runAsNonRoot": False,
                                "capabilities": {"add": ["SYS_ADMIN", "NET_BIND_SERVICE"], "drop": ["ALL"]}}
        spec["initContainers"] = [{"name": "init", "image": "busybox", "securityContext": {
            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]
        r, f = kubectl_create(fake, tmp_path, pod, namespace="psa-r")
        assert r.returncode == 1
        want = (
            'violates PodSecurity "restricted:v1.33": host namespaces (hostNetwork, hostPID), hostPort '
            '(container "main" uses hostPort 8080), privileged (container "main" must not set '
            'securityContext.privileged=true), allowPrivilegeEscalation != false (container "main" must set '
            'securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "main" must '
            'not include "SYS_ADMIN" in securityContext.capabilities.add), restricted volume types (volume "host" '
            'uses restricted volume type "hostPath"), runAsNonRoot != true (container "main" must not set '
            'securityContext.runAsNonRoot=false), runAsUser=0 (pod must not set runAsUser=0), seccompProfile '
            '(pod must not set securityContext.seccompProfile.type to "Unconfined")')
        assert r.stderr.decode().strip().endswith(f'pods "worst" is forbidden: {want}'), r.stderr
    finally:
        fake.kubectl("label", "namespace", "psa-r", "pod-security.kubernetes.io/enforce-version-")


def test_baseline_allows_what_restricted_refuses(fake, tmp_path):
    ns(fake, "psa-b", BASELINE)
    r, _ = kubectl_create(fake, tmp_path, pod_manifest("plain-b"), namespace="psa-b")
    assert r.returncode == 0, r
    pod = pod_manifest("hostpath-b")
    pod["spec"]["volumes"] = [{"name": "h", "hostPath": {"path": "/var"}}]
    pod["spec"]["containers"][0]["securityContext"] = {"capabilities": {"add": ["NET_RAW", "CHOWN"]}}
    r, _ = kubectl_create(fake, tmp_path, pod, namespace="psa-b")
    assert r.returncode == 1
    assert r.stderr.decode().strip().endswith(
        'pods "hostpath-b" is forbidden: violates PodSecurity "baseline:latest": non-default capabilities '
        '(container "main" must not include "NET_RAW" in securityContext.capabilities.add), hostPath volumes '
        '(volume "h")'), r.stderr


def test_the_403_status_body_is_the_fixture(fake):
    ns(fake, "psa-r", RESTRICTED)
    pod = pod_manifest("convo-7f3a9c2e1b")
    pod["spec"]["securityContext"] = {"seccompProfile": {"type": "RuntimeDefault"}}
    pod["spec"]["containers"][0]["name"] = "node"
    pod["spec"]["containers"][0]["securityContext"] = {"capabilities": {"drop": ["ALL"]}}
    s, _, b = fake.request("POST", "/api/v1/namespaces/psa-r/pods", pod)
    assert s == 403 and b == fixture("status-403-forbidden-podsecurity.json")


def test_the_charts_sandbox_pod_passes_restricted(fake, tmp_path):
    ns(fake, "psa-r", RESTRICTED)
    pod = yaml.safe_load(CHART_POD.read_text())
    pod["metadata"]["name"] = "chart-pod"
    r, _ = kubectl_create(fake, tmp_path, pod, namespace="psa-r")
    assert r.returncode == 0 and r.stdout.strip() == b"pod/chart-pod created", r
    assert b"Warning" not in r.stderr, r.stderr


def test_strict_field_validation_is_kubectls_default(fake, tmp_path):
    pod = pod_manifest("typo")
    pod["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    pod["spec"]["restartPolicy"] = "Never"
    pod["spec"]["securityContext"] = {"runAsNonRot": True}
    pod["metadata"]["labels"] = {"anything/goes": "in a map"}
    r, f = kubectl_create(fake, tmp_path, pod)
    assert r.returncode == 1
    assert r.stderr.decode().strip() == (
        f'Error from server (BadRequest): error when creating "{f}": Pod in version "v1" cannot be handled as '
        'a Pod: strict decoding error: unknown field "spec.containers[0].imagePullPolicyy", '
        'unknown field "spec.securityContext.runAsNonRot"')
    r, _ = kubectl_create(fake, tmp_path, pod, "--validate=warn")
    assert r.returncode == 0, r
    assert r.stderr.decode().splitlines() == [
        'Warning: unknown field "spec.containers[0].imagePullPolicyy"',
        'Warning: unknown field "spec.securityContext.runAsNonRot"']
    pod["metadata"]["name"] = "typo-ignored"
    r, _ = kubectl_create(fake, tmp_path, pod, "--validate=false")
    assert r.returncode == 0 and r.stderr == b"", r


def test_field_validation_on_the_wire(fake):
    path = "/api/v1/namespaces/default/pods"
    raw = json.dumps(pod_manifest("dups")).replace('"kind": "Pod"', '"kind": "Pod", "kind": "Pod"')
    raw = raw.replace('"spec": {', '"spec": {"bogus": 1, ', 1)
    s, _, b = fake.request("POST", path + "?fieldValidation=Strict", raw)
    assert s == 400 and b["reason"] == "BadRequest" and b["kind"] == "Status", b
    assert b["message"] == ('Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
                            'duplicate field "kind", unknown field "spec.bogus"')
    s, h, b = fake.request("POST", path, raw)  # no parameter: Warn
    assert s == 201, b
    assert h.get_all("Warning") == ['299 - "duplicate field \\"kind\\""', '299 - "unknown field \\"spec.bogus\\""']
    s, _, b = fake.request("POST", path + "?fieldValidation=Sloppy", pod_manifest("sloppy"))
    assert s == 400 and "fieldValidation" in b["message"], b
    # newer fields than the python models know are fields all the same
    pod = copy.deepcopy(pod_manifest("newer"))
    pod["spec"]["hostUsers"] = False
    pod["spec"]["containers"][0]["resizePolicy"] = [{"resourceName": "cpu", "restartPolicy": "NotRequired"}]
    s, h, b = fake.request("POST", path + "?fieldValidation=Strict", pod)
    assert s == 201 and not h.get_all("Warning"), b


@pytest.mark.parametrize("bad", ["default", "sb:k", ":k=v", "sb:=v"])
def test_ns_label_flag_is_checked(bad):
    from fakekube_srv.namespaces import parse_ns_label
    assert parse_ns_label("sb:a/b=c=d") == ("sb", "a/b", "c=d")
    with pytest.raises(ValueError):
        parse_ns_label(bad)


def test_a_request_above_its_limit_is_refused_as_the_api_server_does(fake):
    pod = pod_manifest("over-limit")
    pod["spec"]["containers"][0]["resources"] = {
        "requests": {"memory": "128Mi", "cpu": "1500m"}, "limits": {"memory": "64Mi", "cpu": "1"}}
    status, _, body = fake.request("POST", "/api/v1/namespaces/default/pods", pod)
    assert status == 422 and body["reason"] == "Invalid", body
    msgs = [c["message"] for c in body["details"]["causes"]]
    assert 'Invalid value: "128Mi": must be less than or equal to memory limit of 64Mi' in msgs, msgs
    assert 'Invalid value: "1500m": must be less than or equal to cpu limit of 1' in msgs, msgs
