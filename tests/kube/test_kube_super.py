"""One exec per pod. A supervisor (k8s/backend/supervisor.js) runs over one
long-lived exec per pod and codepod replica, starts every fresh runner and kills
it; executions cost no exec request once it is up. (--supervisor: on whatever
$CODEPOD_SUPERVISOR says.) When it is killed (by the
program, or from outside) or its stream drops, the executions on it end with a
clear outcome and the conversation falls back to one exec per script."""
import json
import os
import signal

import pytest

from harness import assert_ok
from kubehelp import describe, log_events, new_conv, pod_name, result_of, wait_until

SLEEP_JS = ("console.log('started');\n"
            "await new Promise((r) => setTimeout(r, 20000));\nreturn 'late';")


def exec_requests(fake, pod=None):
    st = fake.raw.ctl("exec-stats", method="GET")
    if pod is None:
        return st["requests"]
    return sum(p["requests"] for p in st["pods"] if p["name"] == pod)


def events(s, name):
    return [e for e in log_events(s) if e.get("event") == name]


def wait_event(s, name, count=1, timeout=60):
    wait_until(lambda: len(events(s, name)) >= count, timeout, f"{count}x {name} in codepod's log")
    return events(s, name)


def supervisor_host_pids(pod):
    """Host PIDs of node processes of the pod whose parent is not a node
    process or the pod helper: the supervisor (runners are its children, or
    the helper's, k8s/pod_helper/pod_helper.c)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{d}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
            ppid = int(st[st.rindex(")") + 2:].split()[1])
            with open(f"/proc/{ppid}/comm") as f:
                pcomm = f.read().strip()
            with open(f"/proc/{ppid}/cmdline", "rb") as f:
                if f.read().startswith(b"codepod-helper\0"):
                    continue
        except (OSError, ValueError):
            continue
        if comm == "node" and pcomm != "node" and f"FAKEKUBE_POD={pod}".encode() in env:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                if b"killer" not in f.read():
                    out.append(int(d))
    return out


def test_steady_state_costs_no_exec_request(fake, codepods):
    s = codepods("--supervisor")
    conv = new_conv("steady")
    pod = pod_name(conv)
    assert_ok(result_of(s, s.execute("return 1", conversation=conv, tools=[]), 120))
    wait_event(s, "kube.supervisor_ready")
    before = exec_requests(fake, pod)
    for i in range(4):
        res = assert_ok(result_of(s, s.execute(f"return {i}", conversation=conv, tools=[]), 120))
        assert res["result"] == i
    # After the last execution the conversation's next runner starts (the
    # log says so once it is asked of the supervisor, or of an exec). The
    # kills came before each result: whatever they cost is counted by now.
    wait_event(s, "exec.done", 5)
    last = max(i for i, e in enumerate(log_events(s)) if e.get("event") == "exec.done")
    wait_until(lambda: [e for e in log_events(s)[last:] if e.get("event") == "prestart.started"],
               60, "the next runner after the last execution")
    ready = min(i for i, e in enumerate(log_events(s)) if e.get("event") == "kube.supervisor_ready")
    runners = [e for e in log_events(s)[ready:] if e.get("event") == "kube.exec"]
    # every runner since (the five executions' and the next one) came through it
    assert len(runners) >= 6 and all("channel" in e for e in runners), runners
    assert exec_requests(fake, pod) == before, describe({}, s)
    assert events(s, "kube.supervisor_fallback") == []


def test_processes_left_behind_are_killed_by_the_supervisor(fake, codepods):
    from test_kube_procs import check_gone, spawn_js
    from kubehelp import marker
    s = codepods("--supervisor")
    conv = new_conv("superkill")
    assert_ok(result_of(s, s.execute("return 1", conversation=conv, tools=[]), 120))
    wait_event(s, "kube.supervisor_ready")
    before = exec_requests(fake, pod_name(conv))
    mark = marker()
    assert_ok(result_of(s, s.execute(spawn_js(mark, True) + "return 1", conversation=conv,
                                     tools=[]), 120))
    check_gone(mark, s)
    assert exec_requests(fake, pod_name(conv)) == before


def test_a_process_forking_while_the_execution_ends_leaves_nothing(fake, codepods):
    """The supervisor kills in rounds (k8s/backend/kill_scan.js killScan): what a
    process forks while a round runs is found by the next one, although a
    round reads only the processes it has not seen before."""
    from test_kube_procs import SEEN, check_gone
    from kubehelp import marker
    s = codepods("--supervisor")
    conv = new_conv("forkkill")
    assert_ok(result_of(s, s.execute("return 1", conversation=conv, tools=[]), 120))
    wait_event(s, "kube.supervisor_ready")
    mark = marker()
    # A shell in a session of its own (out of the runner's process group)
    # starting `sleep MARK` in the background, 1,000 at most: the program
    # returns once 20 run, while the shell is still forking.
    js = ("const { spawn } = require('node:child_process');\n"
          "const c = spawn('sh', ['-c', 'i=0; while [ $i -lt 1000 ]; do sleep " + mark +
          " & i=$((i+1)); done; wait'], { detached: true, stdio: 'ignore' });\n"
          "c.unref();\n" + SEEN.format(mark=mark, want=20) + "return 1;")
    res = assert_ok(result_of(s, s.execute(js, conversation=conv, tools=[]), 120))
    seen = [int(w) for w in res["logs"].split("seen ")[1:2] for w in [w.split()[0]]]
    assert seen and seen[0] >= 20, f"the shell never forked: {res['logs']!r}"
    check_gone(mark, s)


def fallback_then_ok(s, conv, helper=False):
    """Without the pod helper the pod falls back to one exec per script;
    with it, no runner starts without the helper: the next execution starts
    another supervisor (and its runner's parent is a helper again)."""
    wait_event(s, "kube.supervisor_lost" if helper else "kube.supervisor_fallback")
    res = assert_ok(result_of(s, s.execute(
        "let s = '';\n"
        "try { s = require('node:fs').readFileSync('/proc/' + process.ppid + '/cmdline', 'latin1'); } catch { }\n"
        "return [require('node:os').hostname(), s.split('\\0')[0]];",
        conversation=conv, tools=[]), 120))
    assert res["result"][0] == pod_name(conv)
    if helper:
        assert res["result"][1] == "codepod-helper", res["result"]
        assert events(s, "kube.supervisor_fallback") == []
        assert len(events(s, "kube.supervisor_ready")) >= 2


def test_the_program_cannot_kill_its_helper_or_the_supervisor(fake, codepods):
    """The runner's parent is the pod helper (k8s/pod_helper/pod_helper.c),
    whose own filter refuses every signal to it, to the supervisor and to -1:
    a helper killed would hand the execution's orphans to the pod's PID 1."""
    s = codepods("--supervisor", "--prestart", "0")
    conv = new_conv("nokill")
    assert_ok(result_of(s, s.execute("return 1", conversation=conv, tools=[]), 120))
    wait_event(s, "kube.supervisor_ready")
    js = ("const fs = require('node:fs');\n"
          "const stat = fs.readFileSync('/proc/' + process.ppid + '/stat', 'latin1');\n"
          "const sup = +stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1];\n"
          "const out = [];\n"
          "for (const [pid, sig] of [[process.ppid, 'SIGKILL'], [process.ppid, 'SIGSTOP'], [-process.ppid, 'SIGKILL'],\n"
          "                          [sup, 'SIGKILL'], [sup, 'SIGTERM'], [-1, 'SIGKILL']]) {\n"
          "  try { process.kill(pid, sig); out.push('sent'); } catch (e) { out.push(e.code); }\n"
          "}\n"
          "return out;")
    res = assert_ok(result_of(s, s.execute(js, conversation=conv, tools=[]), 60))
    assert res["result"] == ["EPERM"] * 6, describe(res, s)
    res = assert_ok(result_of(s, s.execute("return require('node:os').hostname()",
                                           conversation=conv, tools=[]), 60))
    assert res["result"] == pod_name(conv)
    assert not log_events(s, "kube.supervisor_fallback"), describe(res, s)


def test_supervisor_killed_by_the_program(fake, codepods):
    # no waiting runner: one started before the supervisor was up would have
    # come through a direct exec; without the pod helper, which refuses it
    s = codepods("--supervisor", "--prestart", "0", "--no-pod-helper")
    conv = new_conv("suicide")
    assert_ok(result_of(s, s.execute("return 1", conversation=conv, tools=[]), 120))
    # until the supervisor is up, executions take a direct exec (ppid 0)
    wait_event(s, "kube.supervisor_ready")
    res = result_of(s, s.execute("process.kill(process.ppid, 'SIGKILL');\n"
                                 "await new Promise((r) => setTimeout(r, 20000));",
                                 conversation=conv, tools=[]), 60)
    assert res["status"] == "failed", describe(res, s)
    assert res["error"]["code"] == "PROCESS_EXITED", describe(res, s)
    assert res["error"]["message"] == ("The connection to the runner process was lost: "
                                       "the supervisor was killed by signal 9"), describe(res, s)
    fallback_then_ok(s, conv)


@pytest.mark.parametrize("helper", [True, False], ids=["helper", "no-helper"])
def test_supervisor_killed_from_outside_mid_execution(fake, codepods, helper):
    s = codepods("--supervisor", *([] if helper else ["--no-pod-helper"]))
    conv = new_conv("outside")
    pod = pod_name(conv)
    assert_ok(result_of(s, s.execute("return 1", conversation=conv, tools=[]), 120))
    eid = s.execute("return await tools.slow({});", conversation=conv, tools=["slow"])
    s.wait_call(eid, "slow", timeout=60)
    pids = supervisor_host_pids(pod)
    assert len(pids) == 1, pids
    os.kill(pids[0], signal.SIGKILL)
    res = result_of(s, eid, 60)
    # a tool call was in flight: its fate, and so the program's, is unknown
    assert res["status"] == "failed" and res["error"]["code"] == "OUTCOME_UNKNOWN", describe(res, s)
    fallback_then_ok(s, conv, helper)


@pytest.mark.parametrize("helper", [True, False], ids=["helper", "no-helper"])
def test_stream_drop_with_several_executions_in_flight(fake, codepods, helper):
    s = codepods("--supervisor", *([] if helper else ["--no-pod-helper"]))
    conv = new_conv("sdrop")
    # The first exec of the pod is its supervisor's: drop it mid-run.
    fake.fault({"type": "exec_drop", "after_ms": 4000, "path": f"/pods/{pod_name(conv)}/exec"})
    assert_ok(result_of(s, s.execute("return 1", conversation=conv, tools=[]), 120))
    ids = [s.execute(SLEEP_JS, conversation=conv, tools=[], policy={"timeoutMs": 30000})
           for _ in range(3)]
    calls = s.execute("return await tools.slow({});", conversation=conv, tools=["slow"],
                      policy={"timeoutMs": 30000})
    s.wait_call(calls, "slow", timeout=60)
    for eid in ids:
        res = result_of(s, eid, 60)
        assert res["status"] == "failed" and res["error"]["code"] == "PROCESS_EXITED", describe(res, s)
        assert "lost" in res["error"]["message"]
    res = result_of(s, calls, 60)
    assert res["status"] == "failed" and res["error"]["code"] == "OUTCOME_UNKNOWN", describe(res, s)
    fallback_then_ok(s, conv, helper)


def test_no_supervisor_means_one_exec_per_script(fake, codepods):
    s = codepods("--no-supervisor", "--prestart", "0")
    conv = new_conv("nosup")
    pod = pod_name(conv)
    assert_ok(result_of(s, s.execute("return 1", conversation=conv, tools=[]), 120))
    # Each script is an exec request of its own: its runner's, and its
    # killer's when the runner had not ended by itself first (a race the
    # test does not decide, so the killer may or may not have been sent).
    before = exec_requests(fake, pod)
    assert before in (1, 2), describe({}, s)
    res = assert_ok(result_of(s, s.execute("return 2", conversation=conv, tools=[]), 120))
    # The second's runner, perhaps its killer, and perhaps the first's
    # killer, which may reach the fake only after `before` was read: never
    # a supervisor's, never none.
    assert exec_requests(fake, pod) - before in (1, 2, 3), describe({}, s)
    assert events(s, "kube.supervisor_ready") == []
    # nobody in the pod reads /proc for it: no CPU figures, and no budget held
    assert "cpuMs" not in res["usage"] and "maxRssBytes" not in res["usage"], res["usage"]
    res = assert_ok(result_of(s, s.execute(
        "const t0 = process.cpuUsage(); for (;;) { const t = process.cpuUsage(t0);"
        " if (t.user + t.system >= 300000) break; } return 3", conversation=conv, tools=[],
        policy={"maxCpuMs": 100}), 120))
    assert res["result"] == 3 and "cpuMs" not in res["usage"], res


def test_warm_pod_comes_with_its_supervisor_and_a_runner(fake, codepods):
    s = codepods("--supervisor", "--warm-pool", "1")
    wait_event(s, "kube.warm_standby")
    conv = new_conv("warmsb")
    eid = s.execute("return [require('node:os').hostname(), globalThis.__used ?? null]",
                    conversation=conv, tools=[])
    res = assert_ok(result_of(s, eid, 120))
    pod, seen = res["result"]
    assert pod.startswith("codepod-warm-") and seen is None, describe(res, s)
    taken = wait_event(s, "kube.standby_taken")
    assert [e["id"] for e in taken] == [eid]
    # the pod's only exec request is its supervisor's, made before the claim
    assert exec_requests(fake, pod) == 1, describe(res, s)


def test_an_execution_started_while_another_streams_output(fake, codepods):
    """The pod's frames keep their place in the supervisor's stream whatever
    channels open meanwhile: an execution started while another one's output
    is on its way (its frames cut across the exec stream's messages) leaves
    both whole, and the stream standing."""
    s = codepods("--supervisor")
    conv = new_conv("loudopen")
    assert_ok(result_of(s, s.execute("return 1", conversation=conv, tools=[]), 120))
    wait_event(s, "kube.supervisor_ready")
    loud = s.execute("const line = 'x'.repeat(999);\nconst t0 = Date.now();\n"
                     "while (Date.now() - t0 < 4000) {\n"
                     "  for (let i = 0; i < 100; i++) console.log(line);\n"
                     "  await new Promise((r) => setImmediate(r));\n}\nreturn 'loud';",
                     conversation=conv, tools=[], policy={"timeoutMs": 30000}, stream=True)
    # its output is on its way before the others start
    s.wait_for(lambda m: m.get("type") == "log" and m.get("id") == loud, timeout=60,
               what="the loud execution's first output", consume=False)
    for i in range(8):
        res = assert_ok(result_of(s, s.execute(f"return {i}", conversation=conv, tools=[]), 120))
        assert res["result"] == i
    assert assert_ok(result_of(s, loud, 120))["result"] == "loud"
    assert events(s, "kube.supervisor_protocol") == [], describe({}, s)
    assert events(s, "kube.supervisor_fallback") == []
