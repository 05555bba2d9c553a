"""A pod is one process namespace: a conversation's next runner, started
ahead of its program, must not exist while a program of that conversation
runs, or the program could see, read and signal it (and so the next
program). The runner is started once the conversation's executions have
ended."""
import os

import pytest

from harness import assert_ok, tool_decl
from kubehelp import describe, new_conv, result_of, wait_until

# The runner processes of the pod beside this program's own (pid/start
# time; its ancestors are the pod helper and the pod's supervisor; a runner
# is the boot with a heap ceiling, which the killer exec's boot has not; one
# with SIGKILL pending is an ended execution's, being torn down), and this
# program's own,
# looked at before or after a tool call: a waiting runner would be among them.
RUNNERS = r"""
const fs = require('node:fs');
const id = (pid) => pid + '/' + fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')[19];
const parent = (pid) => +fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')[1];
const me = id(process.pid);
@HOLD_BEFORE@
const mine = new Set();
for (let p = process.pid; p > 1; p = parent(p)) mine.add(p);
const runners = [];
for (const d of fs.readdirSync('/proc')) {
  if (!/^\d+$/.test(d) || mine.has(+d)) continue;
  try {
    const argv = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0');
    // (not the pod helper, whose argv holds its runner's; not a process
    // with SIGKILL pending: one of an execution that ended, being torn down)
    const st = fs.readFileSync(`/proc/${d}/status`, 'utf8');
    const pend = (k) => BigInt('0x' + ((st.match(new RegExp('\\n' + k + ':\\s*([0-9a-f]+)')) || [])[1] || '0'));
    const dying = ((pend('SigPnd') | pend('ShdPnd')) & 0x100n) !== 0n;
    if (argv[0] !== 'codepod-helper' && !dying &&
        argv.some((a) => a.startsWith('--max-old-space-size=')) && argv.some((a) => a.includes('codepod runner bootstrap')))
      runners.push(id(d));
  } catch { }
}
@HOLD_AFTER@
return { me, runners };
"""
RUNNERS_AFTER_A_CALL = RUNNERS.replace("@HOLD_BEFORE@", "await tools.hold({});").replace("@HOLD_AFTER@", "")
RUNNERS_BEFORE_A_CALL = RUNNERS.replace("@HOLD_BEFORE@", "").replace("@HOLD_AFTER@", "await tools.hold({});")


def events(s, *names):
    return [m for m in s.log_events() if m.get("event") in names]


def wait_done(s, eid):
    """exec.done of eid (a log line, which may come a little after the result)."""
    wait_until(lambda: [m for m in s.log_events("exec.done") if m.get("id") == eid], 60,
               f"exec.done of {eid}")


def wait_events(s, name, count):
    wait_until(lambda: len(events(s, name)) >= count, 120, f"{count}x {name} in codepod's log")


@pytest.mark.skipif(os.geteuid() != 0, reason="the fake gives a pod its own PID namespace as root")
@pytest.mark.parametrize("mode", ["--supervisor", "--no-supervisor"])
def test_no_runner_is_started_while_a_program_of_its_pod_runs(fake, codepods, mode):
    """Two executions of one conversation at once: when the first ends, the
    conversation's next runner still waits until the second has ended too."""
    s = codepods(mode, "--prestart", "2")
    conv = new_conv("two")
    assert_ok(result_of(s, s.execute("return 1", conversation=conv, tools=[]), 120))
    wait_events(s, "prestart.started", 1)
    first = s.execute(RUNNERS_AFTER_A_CALL, conversation=conv, tools=[tool_decl("hold")])
    second = s.execute(RUNNERS_AFTER_A_CALL, conversation=conv, tools=[tool_decl("hold")])
    hold_first, hold_second = s.wait_call(first, "hold", 120), s.wait_call(second, "hold", 120)
    s.answer(hold_first, {})
    gone = assert_ok(result_of(s, first, 120))["result"]["me"]
    wait_done(s, first)
    s.answer(hold_second, {})
    res = assert_ok(result_of(s, second, 120))
    others = [r for r in res["result"]["runners"] if r != gone]
    assert others == [], f"a program saw another runner in its pod: {others} (first: {gone}, second: {res['result']})"
    # The conversation's next runner starts only after both ended.
    wait_done(s, second)
    wait_events(s, "prestart.started", 2)
    seq = [(m["event"], m.get("id")) for m in events(s, "prestart.started", "exec.done")]
    started = [i for i, (e, _) in enumerate(seq) if e == "prestart.started"]
    assert started[1] > seq.index(("exec.done", second)), \
        f"a runner was started while {second} ran: {seq}\n{describe(res, s)}"


SELF = r"""
const fs = require('node:fs');
return process.pid + '/' + fs.readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ')[19];
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="the fake gives a pod its own PID namespace as root")
@pytest.mark.parametrize("mode", ["--supervisor", "--no-supervisor"])
def test_a_runner_a_program_could_see_never_runs_a_later_program(fake, codepods, mode):
    """An execution whose policy needs another Node start does not take the
    conversation's waiting runner; that runner, which the program can see,
    must never serve a later execution (here one started while the program
    still runs, with the waiting runner's policy)."""
    s = codepods(mode, "--prestart", "2")
    conv = new_conv("other-policy")
    assert_ok(result_of(s, s.execute("return 1", conversation=conv, tools=[]), 120))
    wait_events(s, "prestart.started", 1)
    first = s.execute(RUNNERS_BEFORE_A_CALL, conversation=conv, tools=[tool_decl("hold")], policy={"maxMemoryMb": 300})
    hold = s.wait_call(first, "hold", 120)
    later = assert_ok(result_of(s, s.execute(SELF, conversation=conv, tools=[]), 120))["result"]
    s.answer(hold, {})
    seen = assert_ok(result_of(s, first, 120))["result"]["runners"]
    assert later not in seen, \
        f"a runner another program saw ran a later one: {later} in {seen}\n{describe({}, s)}"
