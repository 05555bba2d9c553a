"""A pod template codepod cannot use is refused at start, with a message
naming the file and the problem, and exit code 2; a good one is used."""
import json

import pytest

from harness import assert_ok
from kubehelp import HOSTNAME_JS, new_conv, result_of, run_refused

GOOD = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"labels": {"team": "tests"}, "annotations": {"example.com/note": "hi"}},
    "spec": {"containers": [{"name": "node", "image": "node:22-bookworm-slim",
                             "command": ["node", "-e", "setInterval(() => {}, 1 << 30)"]}]},
}


def variant(**changes):
    t = json.loads(json.dumps(GOOD))
    for path, value in changes.items():
        cur = t
        keys = path.split("__")
        for k in keys[:-1]:
            cur = cur[k]
        cur[keys[-1]] = value
    return json.dumps(t)


BAD = {
    "no-node-container": (variant(spec__containers=[{"name": "main", "image": "node:22"}]),
                          ["node"]),
    "no-containers": (variant(spec__containers=[]), ["containers"]),
    "reserved-conversation-label": (variant(metadata__labels={"codepod.dev/conversation": "x"}),
                                    ["codepod.dev/conversation"]),
    "reserved-managed-by-label": (variant(metadata__labels={"app.kubernetes.io/managed-by": "me"}),
                                  ["app.kubernetes.io/managed-by"]),
    "reserved-warm-label": (variant(metadata__labels={"codepod.dev/warm": "true"}),
                            ["codepod.dev/warm"]),
    "invalid-yaml": ("apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: node\n"
                     "    image: [unclosed\n  bad: : :\n", []),
    "not-a-pod": ("- just\n- a\n- list\n", []),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_unusable_template_is_refused_at_start(fake, tmp_path, case):
    text, words = BAD[case]
    f = tmp_path / f"{case}.yaml"
    f.write_text(text)
    r = run_refused(fake, tmp_path / "state", "--pod-template", str(f))
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 2, f"exit {r.returncode}; stderr: {err}"
    assert r.stdout == b"", r.stdout
    assert str(f) in err, f"the message does not name the template file: {err}"
    for w in words:
        assert w in err, f"the message does not name {w!r}: {err}"


def test_missing_template_file_is_refused(fake, tmp_path):
    f = tmp_path / "nope.yaml"
    r = run_refused(fake, tmp_path / "state", "--pod-template", str(f))
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 2 and str(f) in err, (r.returncode, err)


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_good_template_is_used(fake, codepods, tmp_path, fmt):
    t = json.loads(variant(metadata__labels={"team": "tests-" + fmt}))
    f = tmp_path / f"tmpl.{fmt}"
    if fmt == "json":
        f.write_text(json.dumps(t))
    else:  # YAML by hand (stdlib only): block style
        f.write_text(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  labels:\n    team: tests-yaml\n"
            "spec:\n  containers:\n  - name: node\n    image: node:22-bookworm-slim\n"
            "    command: [node, -e, 'setInterval(() => {}, 1 << 30)']\n")
    s = codepods("--pod-template", str(f))
    conv = new_conv("tmpl")
    res = assert_ok(result_of(s, s.execute(HOSTNAME_JS, conversation=conv, tools=[]), 60))
    pods = fake.conv_pods(conv)
    assert len(pods) == 1 and res["result"] == pods[0]["metadata"]["name"]
    assert pods[0]["metadata"]["labels"]["team"] == "tests-" + fmt
    assert [c["name"] for c in pods[0]["spec"]["containers"]] == ["node"]
