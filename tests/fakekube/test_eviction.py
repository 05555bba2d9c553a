"""The kubelet's eviction for local storage (fakekube_srv/store.py
check_eviction), judged by kubectl: a pod whose workspace volume holds more
than its emptyDir sizeLimit, or than the container's ephemeral-storage
limit, is Failed with reason Evicted and its container's processes killed;
under the limits nothing happens. codepod's supervisor must end an execution
before this (tests/hostile/test_disk.py)."""
import json

from conftest import pod_manifest


def limited(name, size_limit=None, ephemeral=None):
    pod = pod_manifest(name)
    pod["spec"]["restartPolicy"] = "Never"
    pod["spec"]["containers"][0]["workingDir"] = "/workspace"
    if size_limit:
        pod["spec"]["volumes"] = [{"name": "workspace", "emptyDir": {"sizeLimit": size_limit}}]
    if ephemeral:
        pod["spec"]["containers"][0]["resources"] = {"limits": {"ephemeral-storage": ephemeral}}
    return pod


def status_of(fake, name):
    return json.loads(fake.kubectl("get", "pod", name, "-o", "json").stdout)["status"]


def fill(fake, name, mib):
    return fake.kubectl("exec", name, "--", "sh", "-c",
                        f"dd if=/dev/zero of=big bs=1M count={mib} 2>/dev/null; sync; sleep 3; echo survived",
                        check=False, timeout=60)


def wait_phase(fake, name, phase, timeout=10):
    import time
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        st = status_of(fake, name)
        if st["phase"] == phase:
            return st
        time.sleep(0.2)
    raise AssertionError(f"{name} is {status_of(fake, name)['phase']}, not {phase}")


def test_an_emptydir_past_its_size_limit_evicts_the_pod(fake):
    assert fake.request("POST", "/api/v1/namespaces/default/pods", limited("ev-size", size_limit="4Mi"))[0] == 201
    fake.kubectl("wait", "--for=condition=Ready", "pod/ev-size", "--timeout=30s")
    r = fill(fake, "ev-size", 8)
    assert b"survived" not in r.stdout, r
    st = wait_phase(fake, "ev-size", "Failed")
    assert st["reason"] == "Evicted", st
    assert 'Usage of EmptyDir volume "workspace" exceeds the limit "4Mi"' in st["message"], st


def test_ephemeral_storage_past_its_limit_evicts_the_pod(fake):
    assert fake.request("POST", "/api/v1/namespaces/default/pods", limited("ev-eph", ephemeral="4Mi"))[0] == 201
    fake.kubectl("wait", "--for=condition=Ready", "pod/ev-eph", "--timeout=30s")
    fill(fake, "ev-eph", 8)
    st = wait_phase(fake, "ev-eph", "Failed")
    assert st["reason"] == "Evicted" and "ephemeral local storage" in st["message"], st


def test_under_the_limits_nothing_happens(fake):
    assert fake.request("POST", "/api/v1/namespaces/default/pods",
                        limited("ev-fine", size_limit="64Mi", ephemeral="64Mi"))[0] == 201
    fake.kubectl("wait", "--for=condition=Ready", "pod/ev-fine", "--timeout=30s")
    r = fill(fake, "ev-fine", 8)
    assert r.stdout.endswith(b"survived\n"), r
    assert status_of(fake, "ev-fine")["phase"] == "Running"
