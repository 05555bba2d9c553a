"""codepod's pods under admission (tests/fakekube/fakekube_srv/admission.py,
itself checked by kubectl in tests/fakekube/test_admission.py): the namespace
enforces Pod Security `restricted`, as the chart's namespace does. The
built-in template and the chart's pass; a template that breaks the profile,
or carries a field the API does not know (codepod creates with
fieldValidation=Strict), fails the execution with SANDBOX_UNAVAILABLE and
the API server's own message. And the built-in template, as codepod sends
it, fits the API's V1Pod model field by field."""
import json
import pathlib
import sys

import pytest
import yaml

from harness import assert_ok
from kubehelp import HOSTNAME_JS, new_conv, result_of

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "fakekube"))
from apimodel import check_against_model  # noqa: E402

CHART_POD = REPO / "charts" / "codepod" / "files" / "sandbox-pod.yaml"
FAKE_ARGS = ["--ns-label", "default:pod-security.kubernetes.io/enforce=restricted"]


def chart_template(tmp_path, edit=None):
    pod = yaml.safe_load(CHART_POD.read_text())
    if edit:
        edit(pod)
    f = tmp_path / "sandbox-pod.yaml"
    f.write_text(yaml.safe_dump(pod))
    return f


def node_container(pod):
    (c,) = [c for c in pod["spec"]["containers"] if c["name"] == "node"]
    return c


def test_namespace_enforces_restricted(fake):
    s, _, ns = fake.raw.request("GET", "/api/v1/namespaces/default")
    assert s == 200 and ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_builtin_template_passes_restricted_and_fits_v1pod(fake, codepods):
    s = codepods()
    conv = new_conv("builtin")
    res = assert_ok(result_of(s, s.execute(HOSTNAME_JS, conversation=conv, tools=[]), 90))
    (pod,) = fake.conv_pods(conv)
    assert res["result"] == pod["metadata"]["name"]
    sent = [b for b in fake.raw.ctl("created", method="GET")
            if b["metadata"]["name"] == pod["metadata"]["name"]]
    assert len(sent) == 1
    # What codepod POSTed, checked against the API's own model (no unknown
    # field, nothing at the wrong level) and deserialized into V1Pod.
    check_against_model(sent[0], "V1Pod", "built-in template")
    from kubernetes import client
    model = client.ApiClient().deserialize(type("R", (), {"data": json.dumps(sent[0])})(), "V1Pod")
    c = model.spec.containers[0]
    assert (c.name, c.security_context.allow_privilege_escalation, c.security_context.capabilities.drop) == \
        ("node", False, ["ALL"])
    assert model.spec.security_context.run_as_non_root is True
    assert model.spec.security_context.seccomp_profile.type == "RuntimeDefault"
    assert c.resources.limits["memory"] and model.spec.automount_service_account_token is False


def test_charts_template_passes_restricted(fake, codepods, tmp_path):
    s = codepods("--pod-template", str(chart_template(tmp_path)))
    res = assert_ok(result_of(s, s.execute("return 6 * 7", conversation=new_conv("chart"), tools=[]), 90))
    assert res["result"] == 42


def _drop_escalation_guard(pod):
    node_container(pod)["securityContext"].pop("allowPrivilegeEscalation")
    pod["spec"]["volumes"].append({"name": "host", "hostPath": {"path": "/"}})


def _typo(pod):
    node_container(pod)["securityContext"]["runAsNonRot"] = True


@pytest.mark.parametrize("edit, words", [
    (_drop_escalation_guard,
     'violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "node" must set '
     'securityContext.allowPrivilegeEscalation=false), restricted volume types (volume "host" uses restricted '
     'volume type "hostPath")'),
    (_typo, 'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
            'unknown field "spec.containers[0].securityContext.runAsNonRot"'),
], ids=["pod-security", "unknown-field"])
def test_a_refused_template_fails_with_the_servers_message(fake, codepods, tmp_path, edit, words):
    s = codepods("--pod-template", str(chart_template(tmp_path, edit)))
    conv = new_conv("refused")
    res = result_of(s, s.execute("return 1", conversation=conv, tools=[]), 90)
    assert res["status"] == "failed" and res["error"]["code"] == "SANDBOX_UNAVAILABLE", res
    assert words in res["error"]["message"], res["error"]["message"]
    assert fake.conv_pods(conv) == []
