"""The cluster failing under codepod while programs run: the API server,
the kubelet and the container runtime stopped and started again, and a pod's
container killed by the runtime. The exec streams run through all three
(API server -> kubelet -> containerd's streaming server), so each drops the
stream of the pod's supervisor: the executions on it end with the codes the
README gives for a lost supervisor (PROCESS_EXITED, OUTCOME_UNKNOWN when a
tool call was in flight), each exactly once, no tool call is delivered twice,
and once the cluster is back the conversation's next program runs."""
import collections
import time
import uuid

import pytest

import clusterhelp as ch
from harness import assert_ok
from test_cluster_pods import FIRST, WHO, new_conv, result, run


def one_result(s, eid):
    return [m for m in s.messages if m.get("id") == eid and m["type"] in ("result", "error")]


def calls_by_id(s, eid):
    return collections.Counter(m["call"] for m in s.messages
                               if m["type"] == "tool_call" and m.get("id") == eid)


def started(s, conv, marker):
    """Waits until the program's marker file is in the pod's workspace."""
    probe = f"return require('node:fs').existsSync('{marker}')"
    ch.wait_until(lambda: assert_ok(run(s, probe, conv, 60))["result"], 60, "the program to start")


@pytest.fixture
def restore_cluster():
    yield
    ch.cluster_up()


@pytest.mark.parametrize("component", ["kube-apiserver", "kubelet", "containerd"])
@pytest.mark.parametrize("with_call", [False, True], ids=["sleeping", "tool-call-in-flight"])
def test_a_component_restarted_mid_execution(codepods, restore_cluster, component, with_call):
    s = codepods()
    conv = new_conv("fault")
    key = s.conv_prefix + conv
    first = assert_ok(run(s, WHO, conv))["result"]
    uid = ch.conv_pods(key)[0]["metadata"]["uid"]
    marker = f"started-{uuid.uuid4().hex[:8]}"
    js = (f"require('node:fs').writeFileSync('{marker}', '');\n"
          + ("return await tools.slow({});" if with_call else
             "await new Promise((r) => setTimeout(r, 30000));\nreturn 'late';"))
    eid = s.execute(js, conversation=conv, tools=["slow"] if with_call else [],
                    policy={"timeoutMs": 60000})
    if with_call:
        s.wait_call(eid, "slow", timeout=60)
    else:
        time.sleep(2)
    ch.stop_component(component)
    res = result(s, eid, 90)  # before the program's own end or its deadline
    code = (res.get("error") or {}).get("code")
    assert code == ("OUTCOME_UNKNOWN" if with_call else "PROCESS_EXITED"), res
    ch.cluster_up()
    # Once back: the same pod (it kept running), a new supervisor, a program.
    again = ch.wait_until(lambda: _ok_or_none(s, conv), FIRST, "a program after the restart")
    assert again["result"]["host"] == first["host"]
    assert ch.conv_pods(key)[0]["metadata"]["uid"] == uid
    assert len(one_result(s, eid)) == 1
    assert all(n == 1 for n in calls_by_id(s, eid).values())


def _ok_or_none(s, conv):
    res = run(s, WHO, conv, FIRST)
    return res if res.get("status") == "succeeded" else None


def test_a_container_killed_by_the_runtime_ends_its_execution(codepods):
    s = codepods()
    conv = new_conv("rtkill")
    key = s.conv_prefix + conv
    assert_ok(run(s, WHO, conv))
    pod = ch.conv_pods(key)[0]
    eid = s.execute("await new Promise((r) => setTimeout(r, 30000));\nreturn 'late';",
                    conversation=conv, tools=[], policy={"timeoutMs": 60000})
    time.sleep(2)
    ch.kill_container(pod["metadata"]["name"], ch.EXT_NS)
    res = result(s, eid, 90)
    assert (res.get("error") or {}).get("code") == "PROCESS_EXITED", res
    # The pod (restartPolicy Never) is Failed; the next program gets a new one.
    res = assert_ok(run(s, WHO, conv))
    now = ch.conv_pods(key)
    assert len(now) == 1 and now[0]["metadata"]["uid"] != pod["metadata"]["uid"], now
    assert res["result"]["host"] == now[0]["metadata"]["name"]
