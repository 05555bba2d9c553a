"""Faults of the API server and of pods, during acquisition and during a run:
every case ends with the right code, and no execution hangs past its
deadlines (bounds here are generous: they catch hangs, not slowness). A
fault that ends acquisition early shows in its code: waiting for the 120 s
startup allowance would end STARTUP_TIMEOUT, after the result deadline."""
import uuid
from pathlib import Path

import pytest

from harness import assert_failed
from kubehelp import HOSTNAME_JS, describe, new_conv, pod_name, result_of, wait_until


def ok_run(s, conv, js=HOSTNAME_JS, timeout=60, **kw):
    res = result_of(s, s.execute(js, conversation=conv, tools=kw.pop("tools", []), **kw), timeout)
    assert res["status"] == "succeeded", describe(res, s)
    return res


def failed(s, res, code):
    assert res["status"] == "failed" and res.get("error", {}).get("code") == code, \
        f"expected {code}: {describe(res, s)}"
    return assert_failed(res, code)


def all_consumed(fake):
    left = fake.faults_left()
    return not left["rules"] and not left["pod_fates"]


# ---- acquisition: 500s, 429s, dropped and expired watches ------------------

RETRIED = {
    "list-500": [{"type": "status", "code": 500, "method": "GET", "path": "/pods", "count": 2}],
    "list-429": [{"type": "status", "code": 429, "retry_after": 1, "method": "GET", "path": "/pods",
                  "count": 2}],
    "create-429": [{"type": "status", "code": 429, "retry_after": 1, "method": "POST",
                    "path": "/pods(\\?|$)", "count": 2}],
    "create-500": [{"type": "status", "code": 500, "method": "POST", "path": "/pods(\\?|$)", "count": 1}],
    "create-503": [{"type": "status", "code": 503, "retry_after": 1, "method": "POST",
                    "path": "/pods(\\?|$)", "count": 1}],
    "watch-500": [{"type": "status", "code": 500, "method": "GET", "path": "watch", "count": 2}],
}


@pytest.mark.parametrize("case", sorted(RETRIED))
def test_api_errors_during_acquisition_are_retried(fake, codepods, case):
    s = codepods()
    fake.set_schedule(running_ms=1500)  # so there is a watch to wait in
    conv = new_conv(case)
    fake.fault(*RETRIED[case])
    res = ok_run(s, conv)
    assert res["result"] == pod_name(conv)
    assert all_consumed(fake), f"the faults were not all hit: {fake.faults_left()}"
    assert len(fake.conv_pods(conv)) == 1


WATCH = {
    "dropped-clean": {"type": "watch_drop", "after_ms": 300, "mode": "end", "path": "watch"},
    "dropped-reset": {"type": "watch_drop", "after_ms": 300, "mode": "reset", "path": "watch"},
    "dropped-after-event": {"type": "watch_drop", "after_events": 1, "mode": "reset", "path": "watch"},
    "410-in-stream": {"type": "watch_410", "path": "watch"},
    "410-http": {"type": "watch_410", "http": True, "path": "watch"},
}


@pytest.mark.parametrize("case", sorted(WATCH))
def test_watch_dropped_or_expired_while_waiting_is_resumed(fake, codepods, case):
    s = codepods()
    fake.set_schedule(running_ms=2000)
    conv = new_conv(case)
    fake.fault(dict(WATCH[case], count=2))
    if case.startswith("410"):
        fake.raw.ctl("compact", {})
    res = ok_run(s, conv)
    assert res["result"] == pod_name(conv)
    assert all_consumed(fake), f"the faults were not all hit: {fake.faults_left()}"


# ---- pods that never become ready -------------------------------------------

def test_readiness_that_never_comes_is_startup_timeout(fake, codepods):
    s = codepods()
    fake.set_schedule(running_ms=10 ** 7)
    conv = new_conv("never")
    res = result_of(s, s.execute(HOSTNAME_JS, conversation=conv, tools=[],
                                 policy={"startupTimeoutMs": 3000}), 60)
    # The pod never gets ready: only the startup allowance can end this.
    failed(s, res, "STARTUP_TIMEOUT")
    # once the pod comes up, the conversation works
    fake.force_state(pod_name(conv), "Running")
    res = ok_run(s, conv)
    assert res["result"] == pod_name(conv)


def test_image_pull_backoff_is_sandbox_unavailable_at_once(fake, codepods):
    """The pod is driven to ImagePullBackOff while codepod waits for it."""
    s = codepods()
    fake.set_schedule(running_ms=10 ** 7)
    conv = new_conv("ipbo")
    eid = s.execute(HOSTNAME_JS, conversation=conv, tools=[], policy={"startupTimeoutMs": 120000})
    wait_until(lambda: fake.pod(pod_name(conv)), 20, "the conversation's pod")
    fake.force_state(pod_name(conv), "ImagePullBackOff")
    res = result_of(s, eid, 60)
    err = failed(s, res, "SANDBOX_UNAVAILABLE")
    assert "ImagePullBackOff" in err["message"], err
    # the broken pod goes; the next execution gets a fresh one
    fake.set_schedule(running_ms=200)
    res = ok_run(s, conv)
    assert res["result"] == pod_name(conv)


@pytest.mark.parametrize("fate", ["ImagePullBackOff", "Unschedulable"])
def test_pod_fates_end_acquisition_early_naming_the_reason(fake, codepods, fate):
    """The pod goes the way of a bad image / no room on any node (the fake's
    pod_fate: ErrImagePull then ImagePullBackOff; PodScheduled False)."""
    s = codepods()
    conv = new_conv("fate")
    fake.fault({"type": "pod_fate", "fate": fate, "name": "^" + pod_name(conv) + "$"})
    # codepod's deletes of the dead pod are kept at the server: the next
    # execution comes while the pod is still there, and must wait it out
    # (asking for the delete again), not be refused again
    fake.hold("delete", method="DELETE", path="/pods/" + pod_name(conv) + r"(\?|$)", count=2)
    res = result_of(s, s.execute(HOSTNAME_JS, conversation=conv, tools=[],
                                 policy={"startupTimeoutMs": 120000}), 60)
    err = failed(s, res, "SANDBOX_UNAVAILABLE")
    want = {"ImagePullBackOff": ("ImagePullBackOff", "ErrImagePull")}.get(fate, (fate,))
    assert any(w in err["message"] for w in want), err
    wait_until(lambda: fake.held("delete") == 1, 60, "codepod's delete of the dead pod")
    assert fake.pod(pod_name(conv)), "the dead pod was gone before the next execution"
    eid = s.execute(HOSTNAME_JS, conversation=conv, tools=[])
    wait_until(lambda: fake.held("delete") == 2 or s.of(eid, "result"), 60,
               "the next execution to wait for the dead pod to go")
    assert not s.of(eid, "result"), describe(s.of(eid, "result"), s)
    fake.release("delete")
    res = result_of(s, eid, 60)
    assert res["status"] == "succeeded", describe(res, s)
    assert res["result"] == pod_name(conv)


@pytest.mark.parametrize("state", ["CrashLoopBackOff", "Unschedulable"])
def test_pod_forced_into_a_dead_end_while_waiting_is_sandbox_unavailable(fake, codepods, state):
    s = codepods()
    fake.set_schedule(running_ms=10 ** 7)
    conv = new_conv("dead")
    eid = s.execute(HOSTNAME_JS, conversation=conv, tools=[], policy={"startupTimeoutMs": 120000})
    wait_until(lambda: fake.pod(pod_name(conv)), 20, "the conversation's pod")
    fake.force_state(pod_name(conv), state)
    res = result_of(s, eid, 60)
    err = failed(s, res, "SANDBOX_UNAVAILABLE")
    assert state in err["message"], err
    fake.set_schedule(running_ms=200)
    assert ok_run(s, conv)["result"] == pod_name(conv)


# ---- during a run: exec stream dropped, pod deleted -----------------------------

# More than the runner writes before it starts the program, less than the
# 64 KiB line the programs below print: an exec_drop after this many output
# bytes comes while the program runs.
DROP_AFTER = 16384


def ready_conv(fake, s, prefix):
    conv = new_conv(prefix)
    ok_run(s, conv)
    return conv


def drop_exec_streams(fake):
    """Every exec stream opened from now on drops once it carried DROP_AFTER
    bytes of output. Every one, not the next: without a supervisor the
    execution before may still open its killer exec (k8s/backend/killer.js)
    after the test added the fault, which would take a one-time rule; a
    killer's output is far below the bound. With a runner started ahead
    (--prestart) or a supervisor, the execution's stream would be open
    before the fault (tests/kube/test_kube_super.py drops a supervisor's)."""
    fake.fault({"type": "exec_drop", "after_bytes": DROP_AFTER, "path": "/exec", "count": -1})


def test_exec_stream_dropped_mid_run_is_process_exited(fake, codepods):
    s = codepods("--prestart", "0", "--no-supervisor")
    conv = ready_conv(fake, s, "xdrop")
    # The stream drops in the middle of the program's own output (64 KiB,
    # more than the runner writes before it starts the program): the
    # program runs when it goes. Were the drop missed, the program would
    # return 'late' or end TIMEOUT.
    drop_exec_streams(fake)
    try:
        res = result_of(s, s.execute("console.log('started');\n"
                                     "console.log('x'.repeat(65536));\n"
                                     "await new Promise((r) => setTimeout(r, 20000));\nreturn 'late';",
                                     conversation=conv, tools=[], policy={"timeoutMs": 30000}), 60)
    finally:
        fake.clear_faults()
    failed(s, res, "PROCESS_EXITED")
    assert res["logs"].startswith("started\nxxx"), describe(res, s)
    assert ok_run(s, conv)["result"] == pod_name(conv)


def test_exec_stream_dropped_with_a_tool_call_in_flight_is_outcome_unknown(fake, codepods):
    # The fault drops the next exec stream opened: with a runner started
    # ahead (--prestart) or a supervisor, the execution's stream is open
    # before the fault (tests/kube/test_kube_super.py drops a supervisor's).
    s = codepods("--prestart", "0", "--no-supervisor")
    conv = ready_conv(fake, s, "xdropt")
    # "slow" is in flight (never answered) once "go" is: answering "go"
    # makes the program write 64 KiB, in the middle of which the stream drops.
    drop_exec_streams(fake)
    try:
        eid = s.execute("const slow = tools.slow({});\n"
                        "await tools.go({});\n"
                        "console.log('x'.repeat(65536));\n"
                        "return await slow;", conversation=conv, tools=["slow", "go"],
                        policy={"timeoutMs": 30000})
        s.wait_call(eid, "slow", timeout=30)
        s.answer(s.wait_call(eid, "go", timeout=30), 1)
        res = result_of(s, eid, 60)  # before the 30 s deadline's TIMEOUT
    finally:
        fake.clear_faults()
    failed(s, res, "OUTCOME_UNKNOWN")
    assert ok_run(s, conv)["result"] == pod_name(conv)


@pytest.mark.parametrize("with_call", [False, True], ids=["sleeping", "tool-call-in-flight"])
def test_pod_deleted_mid_run_then_next_execution_gets_a_new_pod(fake, codepods, with_call):
    s = codepods()
    conv = ready_conv(fake, s, "pdel")
    old = fake.conv_pods(conv)[0]["metadata"]["uid"]
    started = f"started-{uuid.uuid4().hex}"
    js = ("return await tools.slow({});" if with_call else
          f"require('node:fs').writeFileSync('{started}', '');\n"
          "await new Promise((r) => setTimeout(r, 20000));\nreturn 'late';")
    eid = s.execute(js, conversation=conv, tools=["slow"] if with_call else [],
                    policy={"timeoutMs": 30000})
    if with_call:
        s.wait_call(eid, "slow", timeout=30)
    else:  # the program runs: its file is in the pod's folder on this machine
        wait_until(lambda: list(Path(fake.raw.state_dir).rglob(started)), 30, "the program to start")
    fake.delete_pod(pod_name(conv))
    res = result_of(s, eid, 60)  # before the 30 s deadline's TIMEOUT
    # The pod's deletion kills the runner, and the exec reports it ended (its
    # stream is not lost): PROCESS_EXITED, with or without a call in flight.
    failed(s, res, "PROCESS_EXITED")
    res = ok_run(s, conv)
    assert res["result"] == pod_name(conv)
    pods = fake.conv_pods(conv)
    assert len(pods) == 1 and pods[0]["metadata"]["uid"] != old


# ---- the API server hanging ------------------------------------------------------

def test_api_server_hanging_during_acquisition_ends_by_the_startup_allowance(fake, codepods):
    s = codepods()
    conv = new_conv("hang")
    fake.fault({"type": "hang", "path": "/pods", "count": -1})
    res = result_of(s, s.execute(HOSTNAME_JS, conversation=conv, tools=[],
                                 policy={"startupTimeoutMs": 4000}), 60)
    failed(s, res, "STARTUP_TIMEOUT")
    fake.clear_faults()
    # the server is back: the same conversation works
    assert ok_run(s, conv, timeout=60)["result"] == pod_name(conv)


def test_api_server_hanging_when_an_execution_times_out(fake, codepods):
    """The killer exec cannot get through: the execution still ends TIMEOUT
    without waiting for the server."""
    # Without a supervisor an execution ends with a killer exec (`node -e`,
    # which no runner is): the server hangs on that one, whenever it comes.
    s = codepods("--no-supervisor", "--prestart", "0")
    conv = new_conv("hangk")
    fake.fault({"type": "hang", "path": f"/pods/{pod_name(conv)}/exec" + r"\?command=node&command=-e&"})
    eid = s.execute("await new Promise((r) => setTimeout(r, 30000));\nreturn 1;",
                    conversation=conv, tools=[], policy={"timeoutMs": 4000})
    # Were codepod to wait for the hung server, no result would ever come.
    res = result_of(s, eid, 60)
    failed(s, res, "TIMEOUT")
    wait_until(lambda: not fake.faults_left()["rules"], 30, "the killer exec to reach the hung server")
    fake.clear_faults()
    assert ok_run(s, conv)["result"] == pod_name(conv)


def test_api_server_hanging_on_lists_does_not_stall_a_ready_conversation(fake, codepods):
    s = codepods()
    conv = ready_conv(fake, s, "hango")
    fake.fault({"type": "hang", "method": "GET", "path": r"/pods(\?|$)", "count": -1})
    other = s.execute(HOSTNAME_JS, conversation=new_conv("hangnew"), tools=[],
                      policy={"startupTimeoutMs": 4000})
    # the pod of the ready conversation needs no list: it still runs
    assert ok_run(s, conv, timeout=30)["result"] == pod_name(conv)
    res = result_of(s, other, 60)
    failed(s, res, "STARTUP_TIMEOUT")


# ---- a supervisor that never comes up ---------------------------------------------


def test_a_supervisor_that_fails_at_once_is_tried_once_more_not_until_the_deadline(fake, codepods):
    # Every exec answered 500 (a server whose exec codepod cannot use): the
    # supervisor fails before it is up; the execution looks for its pod
    # again once, then ends SANDBOX_UNAVAILABLE. It used to start another
    # supervisor at once, again and again (hundreds of exec requests a
    # second on a real cluster), until the startup allowance ended it
    # STARTUP_TIMEOUT.
    s = codepods("--log-level", "debug")
    conv = new_conv("superfail")
    ok_run(s, conv)  # the pod, made and ready
    s.close(timeout=60)
    s = codepods("--log-level", "debug")  # a new codepod: no supervisor yet
    fake.fault({"type": "status", "code": 500, "method": "GET", "path": "/exec", "count": -1})
    try:
        res = result_of(s, s.execute(HOSTNAME_JS, conversation=conv, tools=[],
                                     policy={"startupTimeoutMs": 30000}), 60)
    finally:
        fake.clear_faults()
    failed(s, res, "SANDBOX_UNAVAILABLE")
    assert len(s.log_events("kube.supervisor_gone")) <= 2, s.log_events("kube.supervisor_gone")
