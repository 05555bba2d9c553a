"""The outcome goes out only once every process of the execution has been
sent SIGKILL (README "The local backend", runner/sandbox.h killed()): a
backend holding the result knows that nothing the program started runs on,
not even for the milliseconds the kernel takes to reap it.

The program starts children that leave its session (detached: setsid),
shells among them with children of their own, and returns. The test learns
their host PIDs while they run (a tool call the program makes once all are
up) and looks at each the moment the result is read, on the reader thread:
gone, a zombie, exiting, or SIGKILL pending; one still sleeping with no
SIGKILL is a process the outcome did not wait for. Processes die in
microseconds once signalled, and the PID namespace's teardown kills the rest
soon after, so one look proves little: each test runs many executions. (A
shell the kill walk signals may be gone before its children are listed,
leaving them to the namespace's init: without a second look there, this
test failed most runs.)"""
import json
import os
import shutil
import signal
import tempfile
import time
import uuid

import pytest

from harness import (UNPRIV_UID, Session, assert_ok, close_and_check, local_backend_only,
                     processes_with_marker, unprivileged_wrap)

pytestmark = local_backend_only
IS_ROOT = os.geteuid() == 0

TRIALS = 12
PF_EXITING = 0x4
SIGKILL_BIT = 1 << (signal.SIGKILL - 1)

# A detached `sleep`, SHELLS detached shells with two `sleep`s each, and a
# detached shell whose child shell has a `sleep`: WANT processes carry the
# marker. A shell killed while its children are listed may be gone before
# they are, handing them to the namespace's init: several give that race
# several chances per execution.
SHELLS = 6
WANT = 1 + 3 * SHELLS + 3
SPAWN = """
const { spawn } = require('node:child_process');
const kids = [
  spawn('sleep', ['MARK'], { detached: true, stdio: 'ignore' }),
  spawn('sh', ['-c', 'sh -c "sleep MARK & wait" MARK & wait', 'MARK'], { detached: true, stdio: 'ignore' }),
];
for (let i = 0; i < SHELLS; i++)
  kids.push(spawn('sh', ['-c', 'sleep MARK & sleep MARK & wait', 'MARK'], { detached: true, stdio: 'ignore' }));
await Promise.all(kids.map((k) => new Promise((ok, bad) => { k.on('spawn', ok); k.on('error', bad); })));
for (const k of kids) k.unref();
let seen = 0;
for (let i = 0; i < 1000 && seen < WANT; i++) {
  seen = await tools.spawned({});
  if (seen < WANT) await new Promise((r) => setTimeout(r, 10));
}
return seen;
"""


def state(pid):
    """What became of `pid`: gone, zombie, exiting, killed (SIGKILL pending),
    or its /proc state letter when none of these."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/status") as f:
            status = f.read()
    except OSError:
        return "gone"
    if fields[0] in ("Z", "X"):
        return "zombie"
    if int(fields[6]) & PF_EXITING:
        return "exiting"
    for line in status.splitlines():
        if line.startswith(("SigPnd:", "ShdPnd:")) and int(line.split()[1], 16) & SIGKILL_BIT:
            return "killed"
    return fields[0]


@pytest.fixture(params=["root", "unprivileged"] if IS_ROOT else ["unprivileged"])
def codepod(request, tmp_path):
    """codepod as root (programs as sandbox users), or as an unprivileged
    user (programs in a user namespace of that user's)."""
    if request.param == "root" or not IS_ROOT:
        yield Session(tmp_path / "state")
        return
    wrap = unprivileged_wrap()
    if not wrap:
        pytest.skip(f"uid {UNPRIV_UID} cannot run this checkout's codepod and Node")
    top = tempfile.mkdtemp(prefix="codepod-kill-", dir="/var/tmp")
    os.chmod(top, 0o755)
    state = os.path.join(top, "state")
    os.mkdir(state)
    os.chown(state, UNPRIV_UID, UNPRIV_UID)
    try:
        yield Session(state, env=dict(os.environ, HOME=state), wrap=wrap)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_every_process_was_sent_sigkill_when_the_outcome_arrives(codepod):
    s = codepod
    pids, at_result = {}, {}

    def spawned(_input):
        pids["now"] = [p for p, _ in processes_with_marker(pids["mark"])]
        return len(pids["now"])

    def first_look(msg):
        if msg["type"] == "result":
            at_result[msg["id"]] = {p: state(p) for p in pids.get("now", ())}

    s.serve({"spawned": spawned})
    s.first_look = first_look
    try:
        for trial in range(TRIALS):
            mark = f"1000.{uuid.uuid4().int % 10**9:09d}"
            pids.clear()
            pids["mark"] = mark
            js = (SPAWN.replace("MARK", mark).replace("WANT", str(WANT))
                  .replace("SHELLS", str(SHELLS)))
            res = assert_ok(s.run(js, conversation=f"kill-{trial % 3}", timeout=120))
            assert res["result"] == WANT, res
            states = at_result[res["id"]]
            assert len(states) == WANT, states
            running = {p: st for p, st in states.items()
                       if st not in ("gone", "zombie", "exiting", "killed")}
            assert not running, (f"trial {trial}: the outcome came while these ran on, "
                                 f"never sent SIGKILL: {running} (all: {json.dumps(states)})")
            deadline = time.monotonic() + 30
            while processes_with_marker(mark):
                assert time.monotonic() < deadline, processes_with_marker(mark)
                time.sleep(0.02)
    finally:
        for p, _ in processes_with_marker(pids.get("mark", "-")):
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        close_and_check(s)
