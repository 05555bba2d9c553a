"""No process of an execution is left in the pod after it returned, timed
out or was stopped (closing the exec stream does not kill anything: codepod
must). The fake runs pod processes on this machine, so /proc shows them."""
import time

import pytest

from harness import assert_failed, assert_ok
from kubehelp import describe, kill_marker, marker, new_conv, result_of, wait_no_process

SPAWN = ("const {{ spawn }} = require('node:child_process');\n"
         "const c = spawn({cmd}, {{ detached: {detached}, stdio: 'ignore' }});\n"
         "await new Promise((resolve, reject) => {{ c.on('spawn', resolve); c.on('error', reject); }});\n"
         "{unref}")


def spawn_js(mark, detached, how="sleep"):
    cmd = (f"'sleep', ['{mark}']" if how == "sleep"
           else f"'sh', ['-c', 'sleep {mark} & sleep {mark} & wait']")
    return SPAWN.format(cmd=cmd, detached="true" if detached else "false",
                        unref="c.unref();\n" if detached else "")


def check_gone(mark, s):
    left = wait_no_process(mark, timeout=20)
    kill_marker(mark)
    assert left == [], f"`sleep {mark}` outlived its execution: {left}\n{describe({}, s)}"


CASES = [(d, how) for d in (False, True) for how in ("sleep", "tree")]
IDS = [f"{'detached' if d else 'attached'}-{how}" for d, how in CASES]


@pytest.mark.parametrize("detached,how", CASES, ids=IDS)
def test_no_process_left_after_the_program_returns(fake, codepods, detached, how):
    s = codepods()
    mark = marker()
    res = result_of(s, s.execute(spawn_js(mark, detached, how) + "return 'spawned';",
                                 conversation=new_conv("ret"), tools=[]), 60)
    assert_ok(res), describe(res, s)
    check_gone(mark, s)


@pytest.mark.parametrize("detached,how", CASES, ids=IDS)
def test_no_process_left_after_a_timeout(fake, codepods, detached, how):
    s = codepods()
    mark = marker()
    res = result_of(s, s.execute(spawn_js(mark, detached, how) +
                                 "console.log('spawned');\nawait new Promise((r) => setTimeout(r, 60000));",
                                 conversation=new_conv("tmo"), tools=[],
                                 policy={"timeoutMs": 2500}), 60)
    assert_failed(res, "TIMEOUT")
    check_gone(mark, s)


@pytest.mark.parametrize("detached,how", CASES, ids=IDS)
def test_no_process_left_after_stop(fake, codepods, detached, how):
    s = codepods()
    mark = marker()
    eid = s.execute(spawn_js(mark, detached, how) + "return await tools.wait({});",
                    conversation=new_conv("stop"), tools=["wait"])
    s.wait_call(eid, "wait", timeout=60)
    time.sleep(0.3)
    s.stop(eid)
    res = result_of(s, eid, 30)
    assert res["status"] == "failed", describe(res, s)
    check_gone(mark, s)


def test_no_process_left_when_the_program_leaves_its_tree_and_environment(fake, codepods):
    """A hostile program: its child double-forks out of the process tree with
    an empty environment (no execution tag)."""
    s = codepods()
    mark = marker()
    js = ("const { spawn } = require('node:child_process');\n"
          f"const c = spawn('/bin/sh', ['-c', '(sleep {mark} &) ; exit 0'], "
          "{ detached: true, stdio: 'ignore', env: {} });\n"
          "await new Promise((r) => c.on('exit', r));\n"
          "await new Promise((r) => setTimeout(r, 300));\n"
          "return 'escaped';")
    res = result_of(s, s.execute(js, conversation=new_conv("esc"), tools=[]), 60)
    assert_ok(res), describe(res, s)
    check_gone(mark, s)
