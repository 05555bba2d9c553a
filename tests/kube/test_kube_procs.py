"""No process of an execution is left in the pod after it returned, timed
out or was stopped (closing the exec stream does not kill anything: codepod
must). The fake runs pod processes on this machine, so /proc shows them."""
import pytest

from harness import assert_failed, assert_ok
from kubehelp import describe, kill_marker, marker, new_conv, result_of, wait_no_process

SPAWN = ("const {{ spawn }} = require('node:child_process');\n"
         "const c = spawn({cmd}, {{ detached: {detached}, stdio: 'ignore' }});\n"
         "await new Promise((resolve, reject) => {{ c.on('spawn', resolve); c.on('error', reject); }});\n"
         "{unref}")


# Waits (in the pod) until `want` processes carry the marker, and logs how
# many it saw: the test then knows they existed before it checks they are gone.
SEEN = ("const seen = await (async () => {{\n"
        "  const fs = require('node:fs');\n"
        "  for (let i = 0; i < 1500; i++) {{\n"
        "    let k = 0;\n"
        "    for (const d of fs.readdirSync('/proc')) {{\n"
        "      if (!/^\\d+$/.test(d)) continue;\n"
        "      try {{ if (fs.readFileSync('/proc/' + d + '/cmdline', 'utf8').includes('{mark}')) k++; }} catch {{ }}\n"
        "    }}\n"
        "    if (k >= {want}) return k;\n"
        "    await new Promise((r) => setTimeout(r, 20));\n"
        "  }}\n"
        "  return 0;\n"
        "}})();\n"
        "console.log('seen ' + seen);\n")


def spawn_js(mark, detached, how="sleep"):
    cmd = (f"'sleep', ['{mark}']" if how == "sleep"
           else f"'sh', ['-c', 'sleep {mark} & sleep {mark} & wait']")
    return (SPAWN.format(cmd=cmd, detached="true" if detached else "false",
                         unref="c.unref();\n" if detached else "") +
            SEEN.format(mark=mark, want=want(how)))


def want(how):
    return 1 if how == "sleep" else 3  # sh -c and its two sleeps


def saw(res, how):
    assert f"seen {want(how)}\n" in res["logs"], f"the processes never ran: {res['logs']!r}"


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
    saw(res, how)
    check_gone(mark, s)


@pytest.mark.parametrize("detached,how", CASES, ids=IDS)
def test_no_process_left_after_a_timeout(fake, codepods, detached, how):
    s = codepods()
    mark = marker()
    res = result_of(s, s.execute(spawn_js(mark, detached, how) +
                                 "console.log('spawned');\nawait new Promise((r) => setTimeout(r, 60000));",
                                 conversation=new_conv("tmo"), tools=[],
                                 policy={"timeoutMs": 5000}), 60)
    assert_failed(res, "TIMEOUT")
    saw(res, how)
    check_gone(mark, s)


@pytest.mark.parametrize("detached,how", CASES, ids=IDS)
def test_no_process_left_after_stop(fake, codepods, detached, how):
    s = codepods()
    mark = marker()
    eid = s.execute(spawn_js(mark, detached, how) + "return await tools.wait({});",
                    conversation=new_conv("stop"), tools=["wait"])
    s.wait_call(eid, "wait", timeout=60)  # sent after the processes were seen
    s.stop(eid)
    res = result_of(s, eid, 30)
    assert_failed(res, "CANCELLED")
    saw(res, how)
    check_gone(mark, s)


def test_no_process_left_when_the_program_leaves_its_tree_and_environment(fake, codepods):
    """A hostile program: its child double-forks out of the process tree with
    an empty environment (no execution tag)."""
    s = codepods()
    mark = marker()
    js = ("const { spawn } = require('node:child_process');\n"
          f"const c = spawn('/bin/sh', ['-c', '(sleep {mark} &) ; exit 0'], "
          "{ detached: true, stdio: 'ignore', env: {} });\n"
          "await new Promise((r) => c.on('exit', r));\n" +
          SEEN.format(mark=mark, want=1) +
          "return 'escaped';")
    res = result_of(s, s.execute(js, conversation=new_conv("esc"), tools=[]), 60)
    assert_ok(res), describe(res, s)
    saw(res, "sleep")
    check_gone(mark, s)
