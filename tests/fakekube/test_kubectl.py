"""Faithfulness of the fake, judged by the stock kubectl (and the Debian python client)."""
import json
import os
import queue
import random
import re
import subprocess
import threading
import time

import yaml

from conftest import KUBECTL, pod_manifest


def create(fake, name, **kw):
    s, _, p = fake.request("POST", "/api/v1/namespaces/default/pods", pod_manifest(name, **kw))
    assert s == 201, p
    return p


def test_version_answers_with_pid(fake):
    s, h, v = fake.request("GET", "/version")
    assert s == 200 and h["X-Fakekube-Pid"] == str(fake.proc.pid)
    assert v["major"] == "1"
    out = fake.kubectl("version", "-o", "json").stdout
    assert json.loads(out)["serverVersion"]["gitVersion"].startswith("v1.32")


def test_kubectl_get_pods_prints_table(fake):
    r = fake.kubectl("get", "pods", "-n", "kube-system")
    assert b"No resources found in kube-system namespace." in r.stderr
    create(fake, "tbl")
    fake.wait_phase("tbl")
    r = fake.kubectl("get", "pods")
    lines = r.stdout.decode().splitlines()
    assert lines[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    row = next(line.split() for line in lines[1:] if line.startswith("tbl "))
    assert row[1:4] == ["1/1", "Running", "0"]
    assert b"Warning" not in r.stderr, r.stderr
    wide = fake.kubectl("get", "pods", "-o", "wide").stdout.decode().splitlines()
    assert "NOMINATED NODE" in wide[0] and "fakekube-node" in wide[1]


def test_kubectl_create_get_json_delete(fake, tmp_path):
    f = tmp_path / "pod.yaml"
    f.write_text(yaml.safe_dump(pod_manifest("crud", labels={"app": "crud", "tier": "x"})))
    r = fake.kubectl("create", "-f", str(f))
    assert r.stdout.strip() == b"pod/crud created"
    assert b"Warning" not in r.stderr, r.stderr
    r = fake.kubectl("create", "-f", str(f), check=False)
    assert r.returncode == 1
    assert b'Error from server (AlreadyExists): error when creating' in r.stderr
    assert b'pods "crud" already exists' in r.stderr
    pod = json.loads(fake.kubectl("get", "pod", "crud", "-o", "json").stdout)
    assert pod["kind"] == "Pod" and pod["metadata"]["uid"] and pod["metadata"]["resourceVersion"]
    assert pod["metadata"]["creationTimestamp"].endswith("Z")
    assert pod["status"]["phase"] in ("Pending", "Running")
    # kubectl wait: a list + a watch with fieldSelector=metadata.name
    fake.kubectl("wait", "--for=condition=Ready", "pod/crud", "--timeout=20s")
    # selectors as kubectl sends them
    out = fake.kubectl("get", "pods", "-l", "tier=x,app in (crud)", "--field-selector",
                       "status.phase=Running,metadata.name=crud", "-o", "name").stdout
    assert out.split() == [b"pod/crud"]
    out = fake.kubectl("get", "pods", "-l", "tier!=x", "-o", "name").stdout
    assert b"pod/crud" not in out
    r = fake.kubectl("delete", "pod", "crud")
    # kubectl 1.35 added the namespace to the line.
    assert re.fullmatch(rb'pod "crud" deleted( from default namespace)?', r.stdout.strip()), r.stdout
    r = fake.kubectl("get", "pod", "crud", check=False)
    assert r.returncode == 1 and b'Error from server (NotFound): pods "crud" not found' in r.stderr


def test_kubectl_label_and_annotate(fake):
    create(fake, "lab")
    fake.kubectl("label", "pod", "lab", "color=blue")
    fake.kubectl("annotate", "pod", "lab", "note=hi")
    fake.kubectl("label", "pod", "lab", "app-")
    pod = json.loads(fake.kubectl("get", "pod", "lab", "-o", "json").stdout)
    assert pod["metadata"]["labels"] == {"color": "blue"}
    assert pod["metadata"]["annotations"]["note"] == "hi"
    # kubectl label --resource-version is the precondition path: stale -> Conflict
    r = fake.kubectl("label", "pod", "lab", "x=y", "--resource-version=1", check=False)
    assert r.returncode == 1 and b"Error from server (Conflict)" in r.stderr, r.stderr


def test_kubectl_watch_sees_added_and_modified(fake):
    env = {"PATH": os.environ["PATH"], "HOME": fake.home, "KUBECONFIG": fake.kubeconfig}
    # A pod already there: kubectl prints it once its list is done, and
    # watches from that list's resourceVersion, so nothing after is missed.
    create(fake, "anchor", labels={"app": "watched"})
    w = subprocess.Popen([KUBECTL, "get", "pods", "-w", "-l", "app=watched"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in w.stdout] and None, daemon=True).start()
    got = []

    def until(pred, what, timeout=60):  # the deadline only catches a hang
        end = time.monotonic() + timeout
        while not (got and pred(got[-1].split())):
            try:
                got.append(lines.get(timeout=max(0.01, end - time.monotonic())).decode())
            except queue.Empty:
                raise AssertionError(f"kubectl never printed {what}: {got}") from None
    try:
        until(lambda r: r[:1] == ["anchor"], "the listed pod")
        create(fake, "watched")
        until(lambda r: r[:1] == ["watched"] and r[2] == "Running", "the pod Running")
    finally:
        w.terminate()
    _, err = w.communicate(timeout=10)
    rows = [line.split() for line in got]
    assert rows[0][:3] == ["NAME", "READY", "STATUS"], (out, err)
    statuses = [r[2] for r in rows[1:] if r[0] == "watched"]
    assert statuses[0] == "Pending"
    assert "ContainerCreating" in statuses and statuses[-1] == "Running", statuses


def test_kubectl_exec_stdin_round_trip(fake):
    create(fake, "ex")
    fake.wait_phase("ex")
    rnd = random.Random(7)
    data = b"".join(b"%d %s\n" % (i, bytes(rnd.choice(b"abcdefgh") for _ in range(60))) for i in range(20000))
    r = fake.kubectl("exec", "-i", "ex", "--", "cat", input=data, timeout=60)
    assert r.stdout == data, (len(r.stdout), len(data), r.stderr)
    # stdout and stderr stay apart; cwd is the pod's own folder, writable
    r = fake.kubectl("exec", "ex", "--", "sh", "-c", "echo out; echo err >&2; echo x > f; pwd; cat f")
    lines = r.stdout.decode().splitlines()
    assert lines[0] == "out" and lines[1] == os.path.join(fake.state_dir, "pods", "default", "ex") and lines[2] == "x"
    assert r.stderr == b"err\n"
    assert os.path.exists(os.path.join(fake.state_dir, "pods", "default", "ex", "f"))


def test_kubectl_exec_exit_code(fake):
    create(fake, "ex3")
    fake.wait_phase("ex3")
    r = fake.kubectl("exec", "ex3", "--", "sh", "-c", "exit 3", check=False)
    assert r.returncode == 3, r
    assert b"command terminated with exit code 3" in r.stderr


def test_kubectl_exec_into_pending_pod_fails_clearly(fake):
    fake.ctl("schedule", {"scheduled_ms": 5000})
    try:
        create(fake, "notyet")
        r = fake.kubectl("exec", "notyet", "--", "true", check=False, timeout=20)
        assert r.returncode != 0
    finally:
        fake.ctl("schedule", {"scheduled_ms": 50})


def test_token_auth_kubeconfig(fake_token):
    with open(fake_token.kubeconfig) as f:
        user = yaml.safe_load(f)["users"][0]["user"]
    assert "token" in user and "client-certificate-data" not in user
    fake_token.kubectl("get", "pods")
    s, _, _ = fake_token.request("GET", "/api/v1/namespaces/default/pods", cert=False, token=fake_token.token)
    assert s == 200


def test_python_client_list_and_exec_v4(fake):
    from kubernetes import client, config
    from kubernetes.stream import stream
    create(fake, "py", labels={"app": "py", "lang": "python"})
    fake.wait_phase("py")
    api = client.CoreV1Api(config.new_client_from_config(config_file=fake.kubeconfig))
    pods = api.list_namespaced_pod("default", label_selector="lang=python")
    assert [p.metadata.name for p in pods.items] == ["py"]
    assert pods.items[0].status.phase == "Running"
    pods = api.list_namespaced_pod("default", field_selector="metadata.name=py")
    assert len(pods.items) == 1
    out = stream(api.connect_get_namespaced_pod_exec, "py", "default",
                 command=["sh", "-c", "echo hello from $HOSTNAME"], stderr=True, stdin=False, stdout=True, tty=False)
    assert out.strip() == "hello from py"
    # exit code through the v4 error channel
    ws = stream(api.connect_get_namespaced_pod_exec, "py", "default", command=["sh", "-c", "exit 5"],
                stderr=True, stdin=False, stdout=True, tty=False, _preload_content=False)
    ws.run_forever(timeout=10)
    assert ws.returncode == 5
