"""The container's memory limit on exec'd processes (fakekube_srv/memcg.py)
and the OOM kill reported as the kubelet does, judged by kubectl: the exec
ends with 137, and the pod's container status says OOMKilled (terminated with
restartPolicy Never, lastState with a restart otherwise). Needs root and a
memory cgroup; skipped where the fake reports `memcg none`."""
import json
import sys

import pytest

from conftest import pod_manifest

HOG = [sys.executable if sys.executable.startswith("/usr/") else "/usr/bin/python3", "-c",
       "x = []\nfor i in range(1024): x.append(bytearray(1 << 20))\nprint('survived')"]


@pytest.fixture(autouse=True)
def _needs_memcg(fake):
    if fake.ctl("memcg", method="GET")["memcg"] == "none":
        pytest.skip("no memory cgroup here (needs root and cgroup v2 memory or the v1 memory hierarchy)")


def limited(name, restart, limit="64Mi"):
    pod = pod_manifest(name)
    pod["spec"]["restartPolicy"] = restart
    pod["spec"]["containers"][0]["resources"] = {"limits": {"memory": limit}}
    return pod


def status_of(fake, name):
    return json.loads(fake.kubectl("get", "pod", name, "-o", "json").stdout)["status"]


def test_oom_kill_fails_a_pod_that_never_restarts(fake):
    assert fake.request("POST", "/api/v1/namespaces/default/pods", limited("oom-never", "Never"))[0] == 201
    fake.kubectl("wait", "--for=condition=Ready", "pod/oom-never", "--timeout=30s")
    r = fake.kubectl("exec", "oom-never", "--", *HOG, check=False, timeout=60)
    assert r.returncode == 137 and b"survived" not in r.stdout, r
    assert b"command terminated with exit code 137" in r.stderr
    st = status_of(fake, "oom-never")
    (cs,) = st["containerStatuses"]
    assert st["phase"] == "Failed" and cs["ready"] is False
    t = cs["state"]["terminated"]
    assert (t["reason"], t["exitCode"]) == ("OOMKilled", 137) and t["finishedAt"]
    row = fake.kubectl("get", "pod", "oom-never").stdout.decode().splitlines()[1].split()
    assert row[1:3] == ["0/1", "OOMKilled"], row
    # the container is gone: a further exec cannot reach it
    r = fake.kubectl("exec", "oom-never", "--", "true", check=False)
    assert r.returncode != 0


def test_oom_kill_restarts_a_container_that_always_restarts(fake):
    assert fake.request("POST", "/api/v1/namespaces/default/pods", limited("oom-always", "Always"))[0] == 201
    fake.kubectl("wait", "--for=condition=Ready", "pod/oom-always", "--timeout=30s")
    r = fake.kubectl("exec", "oom-always", "--", *HOG, check=False, timeout=60)
    assert r.returncode == 137, r
    (cs,) = status_of(fake, "oom-always")["containerStatuses"]
    assert cs["restartCount"] == 1 and "running" in cs["state"]
    assert cs["lastState"]["terminated"]["reason"] == "OOMKilled"
    assert cs["lastState"]["terminated"]["exitCode"] == 137
    r = fake.kubectl("exec", "oom-always", "--", "sh", "-c", "echo back")
    assert r.stdout == b"back\n"


def test_under_the_limit_nothing_happens(fake):
    assert fake.request("POST", "/api/v1/namespaces/default/pods", limited("oom-fine", "Never", "512Mi"))[0] == 201
    fake.kubectl("wait", "--for=condition=Ready", "pod/oom-fine", "--timeout=30s")
    small = [HOG[0], "-c", "x = bytearray(32 << 20); print('survived')"]
    r = fake.kubectl("exec", "oom-fine", "--", *small)
    assert r.stdout == b"survived\n"
    (cs,) = status_of(fake, "oom-fine")["containerStatuses"]
    assert "running" in cs["state"] and cs["lastState"] == {} and cs["restartCount"] == 0

