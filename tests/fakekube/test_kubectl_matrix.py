"""The fake driven by every kubectl from 1.30 to 1.35 (scripts/deps.sh puts
them in .deps/kubectl/v1.NN/kubectl): one pytest parameter per version, each
running the same session a user would: create, get/list with label and field
selectors, watch, wait for Ready, label and annotate, exec with stdin and
stdout and stderr apart, exit codes, delete with wait.

Each kubectl runs with its own defaults (no KUBECTL_REMOTE_COMMAND_WEBSOCKETS):
from 1.30 exec goes over the WebSocket by default. kubectl 1.29 and older exec
over SPDY, which the fake does not serve (see README.md)."""
import json
import os
import random
import subprocess
import threading

import pytest
import yaml

from conftest import pod_manifest

HERE = os.path.dirname(os.path.abspath(__file__))
DEPS = os.path.normpath(os.path.join(HERE, "..", "..", ".deps", "kubectl"))
VERSIONS = [f"1.{m}" for m in range(30, 36)]


def kubectl_for(version):
    path = os.path.join(DEPS, "v" + version, "kubectl")
    assert os.access(path, os.X_OK), f"{path} is missing: run scripts/deps.sh"
    return path


class Kubectl:
    def __init__(self, fake, version):
        self.fake, self.version, self.bin = fake, version, kubectl_for(version)
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": fake.home,
                    "KUBECONFIG": fake.kubeconfig}

    def __call__(self, *args, input=None, timeout=60, check=True):
        r = subprocess.run([self.bin, *args], input=input, capture_output=True, timeout=timeout,
                           env=self.env)
        if check and r.returncode != 0:
            raise AssertionError(f"kubectl {self.version} {' '.join(args)} -> {r.returncode}\n"
                                 f"{r.stdout!r}\n{r.stderr!r}")
        return r


@pytest.fixture(params=VERSIONS)
def kubectl(request, fake):
    return Kubectl(fake, request.param)


def name_for(kubectl, what):
    return f"{what}-{kubectl.version.replace('.', '-')}"


def test_client_version_is_the_one_asked_for(kubectl):
    out = json.loads(kubectl("version", "--client", "-o", "json").stdout)
    assert out["clientVersion"]["gitVersion"].startswith("v" + kubectl.version + ".")


def test_create_get_select_watch_wait_label_delete(kubectl, tmp_path):
    name = name_for(kubectl, "life")
    f = tmp_path / "pod.yaml"
    f.write_text(yaml.safe_dump(pod_manifest(name, labels={"app": name, "tier": "m", "group": name})))
    # A watch started before the pod exists sees it go through its states;
    # it lists an older pod of the same group first, so its start is seen.
    anchor = pod_manifest(name + "-old", labels={"group": name})
    assert kubectl.fake.request("POST", "/api/v1/namespaces/default/pods", anchor)[0] == 201
    w = subprocess.Popen([kubectl.bin, "get", "pods", "-w", "-l", f"group={name}", "--request-timeout=0"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=kubectl.env)
    seen, running, listed = [], threading.Event(), threading.Event()

    def read():
        for line in w.stdout:
            seen.append(line.decode())
            if line.split()[:1] == [anchor["metadata"]["name"].encode()]:
                listed.set()
            if line.split()[:1] == [name.encode()] and b" Running " in line:
                running.set()
    threads = [threading.Thread(target=read, daemon=True)]
    for t in threads:
        t.start()
    try:
        assert listed.wait(30), seen  # the watch has listed: now make the pod
        r = kubectl("create", "-f", str(f))
        assert r.stdout.strip() == f"pod/{name} created".encode(), r
        assert b"Warning" not in r.stderr, r.stderr
        kubectl("wait", "--for=condition=Ready", f"pod/{name}", "--timeout=30s")
        assert running.wait(30), seen
    finally:
        w.terminate()
        w.wait(10)
        for t in threads:
            t.join(10)
    statuses = [ln.split()[2] for ln in seen if ln.split()[:1] == [name]]
    assert statuses[0] == "Pending" and statuses[-1] == "Running", seen

    out = kubectl("get", "pods", "-l", f"tier=m,app in ({name})", "--field-selector",
                  f"status.phase=Running,metadata.name={name}", "-o", "name").stdout
    assert out.split() == [f"pod/{name}".encode()]
    out = kubectl("get", "pods", "-l", f"group={name},tier!=m", "-o", "name").stdout
    assert out.split() == [f"pod/{name}-old".encode()]
    rows = kubectl("get", "pods", name).stdout.decode().splitlines()
    assert rows[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert rows[1].split()[1:4] == ["1/1", "Running", "0"]

    kubectl("label", "pod", name, "color=blue")
    kubectl("annotate", "pod", name, "note=hi")
    kubectl("label", "pod", name, "tier-")
    pod = json.loads(kubectl("get", "pod", name, "-o", "json").stdout)
    assert pod["metadata"]["labels"] == {"app": name, "group": name, "color": "blue"}
    assert pod["metadata"]["annotations"]["note"] == "hi"
    r = kubectl("label", "pod", name, "x=y", "--resource-version=1", check=False)
    assert r.returncode == 1 and b"Error from server (Conflict)" in r.stderr, r.stderr

    # delete waits (by default) until the pod is gone
    r = kubectl("delete", "pod", name, "--wait=true", "--timeout=30s")
    assert r.stdout.strip() == f'pod "{name}" deleted'.encode() or \
        r.stdout.strip() == f'pod "{name}" deleted from default namespace'.encode(), r.stdout
    r = kubectl("get", "pod", name, check=False)
    assert r.returncode == 1 and f'pods "{name}" not found'.encode() in r.stderr
    kubectl("delete", "pod", anchor["metadata"]["name"], "--wait=false")


def test_exec_stdin_streams_and_exit_codes(kubectl, fake):
    name = name_for(kubectl, "ex")
    s, _, p = fake.request("POST", "/api/v1/namespaces/default/pods", pod_manifest(name))
    assert s == 201, p
    kubectl("wait", "--for=condition=Ready", f"pod/{name}", "--timeout=30s")
    rnd = random.Random(kubectl.version)
    data = b"".join(b"%d %s\n" % (i, bytes(rnd.choice(b"abcdefgh") for _ in range(60))) for i in range(5000))
    r = kubectl("exec", "-i", name, "--", "cat", input=data)
    assert r.stdout == data, (len(r.stdout), len(data), r.stderr)
    r = kubectl("exec", name, "--", "sh", "-c", "echo out; echo err >&2; echo out2")
    assert r.stdout == b"out\nout2\n" and r.stderr == b"err\n", r
    r = kubectl("exec", name, "--", "sh", "-c", "exit 3", check=False)
    assert r.returncode == 3 and b"command terminated with exit code 3" in r.stderr, r
    r = kubectl("exec", "-i", name, "--", "sh", "-c", "cat >/dev/null; exit 7", input=b"x" * 100000,
                check=False)
    assert r.returncode == 7, r
    r = kubectl("exec", name, "--", "no-such-command", check=False)
    assert r.returncode != 0 and r.stderr, r
    kubectl("delete", "pod", name, "--wait=false")
