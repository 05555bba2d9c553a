"""A runner killed for memory on the Kubernetes backend: the fake enforces the
container's memory limit with a cgroup and reports OOMKilled in the
container status as the kubelet does (tests/fakekube/test_oom.py checks that
with kubectl). codepod, seeing the runner die of a SIGKILL it did not send,
reads the pod and says plainly that the runner ran out of memory, naming the
container and its limit; the conversation's next execution gets a fresh pod.
A SIGKILL that is not an OOM kill stays a plain signal death."""
import pathlib

import pytest
import yaml

from harness import assert_ok
from kubehelp import HOSTNAME_JS, describe, new_conv, result_of

CHART_POD = pathlib.Path(__file__).resolve().parents[2] / "charts" / "codepod" / "files" / "sandbox-pod.yaml"
HOG = ("const keep = [];\n"
       "for (;;) keep.push(Buffer.alloc(8 << 20, 1));\n")


@pytest.fixture(autouse=True)
def _needs_memcg(fake):
    if fake.raw.ctl("memcg", method="GET")["memcg"] == "none":
        pytest.skip("the fake cannot enforce memory limits here (needs root and a memory cgroup)")


def template(tmp_path, memory, restart="Never"):
    pod = yaml.safe_load(CHART_POD.read_text())
    pod["spec"]["restartPolicy"] = restart
    (c,) = [c for c in pod["spec"]["containers"] if c["name"] == "node"]
    # The API server refuses a request above the limit.
    c["resources"]["limits"]["memory"] = c["resources"]["requests"]["memory"] = memory
    f = tmp_path / "pod.yaml"
    f.write_text(yaml.safe_dump(pod))
    return f


def test_oom_kill_is_said_plainly(fake, codepods, tmp_path):
    s = codepods("--pod-template", str(template(tmp_path, "200Mi")))
    conv = new_conv("oom")
    first = assert_ok(result_of(s, s.execute(HOSTNAME_JS, conversation=conv, tools=[]), 90))["result"]
    uid = fake.pod(first)["metadata"]["uid"]
    # Deleting the pod is kept at the server until the test has read it.
    fake.hold("delete", method="DELETE", path=f"/pods/{first}" + r"(\?|$)", count=-1)
    res = result_of(s, s.execute(HOG, conversation=conv, tools=[], policy={"timeoutMs": 60000}), 90)
    err = res.get("error") or {}
    assert err.get("code") == "PROCESS_EXITED", describe(res, s)
    assert err["message"] == (f'The runner process ran out of memory and was killed: the container "node" of '
                              f"pod {first} was OOMKilled (memory limit 200Mi)."), describe(res, s)
    pod = fake.pod(first)
    assert pod["metadata"]["uid"] == uid and pod["status"]["phase"] == "Failed", pod["status"]
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] == "OOMKilled", \
        pod["status"]
    fake.release("delete")
    # the Failed pod is replaced: the next execution runs in a fresh one (same name)
    assert_ok(result_of(s, s.execute(HOSTNAME_JS, conversation=conv, tools=[]), 90))
    assert fake.pod(first)["metadata"]["uid"] != uid


def test_oom_kill_of_a_restarted_container_is_read_from_last_state(fake, codepods, tmp_path):
    s = codepods("--pod-template", str(template(tmp_path, "200Mi", restart="Always")))
    conv = new_conv("oomre")
    name = assert_ok(result_of(s, s.execute(HOSTNAME_JS, conversation=conv, tools=[]), 90))["result"]
    uid = fake.pod(name)["metadata"]["uid"]
    res = result_of(s, s.execute(HOG, conversation=conv, tools=[], policy={"timeoutMs": 60000}), 90)
    err = res.get("error") or {}
    assert err.get("code") == "PROCESS_EXITED" and "was OOMKilled (memory limit 200Mi)" in err["message"], \
        describe(res, s)
    cs = fake.pod(name)["status"]["containerStatuses"][0]
    assert cs["restartCount"] == 1 and cs["lastState"]["terminated"]["reason"] == "OOMKilled"
    # the container came back in the same pod, which the conversation keeps using
    assert_ok(result_of(s, s.execute(HOSTNAME_JS, conversation=conv, tools=[]), 90))
    assert fake.pod(name)["metadata"]["uid"] == uid


def test_a_sigkill_that_is_no_oom_kill_stays_a_signal(fake, codepods, tmp_path):
    s = codepods("--pod-template", str(template(tmp_path, "512Mi")))
    res = result_of(s, s.execute("process.kill(process.pid, 'SIGKILL')", conversation=new_conv("kill9"),
                                 tools=[]), 90)
    err = res.get("error") or {}
    assert err.get("code") == "PROCESS_EXITED" and "signal 9" in err["message"], describe(res, s)
    assert "memory" not in err["message"]
