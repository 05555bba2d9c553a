"""A runner that wrote anything while waiting is never handed out
(runner/prestart.h): a waiting runner says nothing until its hello, so output
means something reached it that no program asked for, and its process is no
longer the pristine one an execution is owed (docs/contract.md §2.11).

The trigger is one a host really sends: SIGUSR1, which opens Node's inspector
and makes Node write "Debugger listening on ..." to stderr. A program handed
that runner would run with the inspector open; the pool must kill it and
the execution start afresh."""
import os
import signal
import time

from harness import Session, assert_ok, children, descendants, local_backend_only
from test_prestart import prestarted, wait_event

pytestmark = local_backend_only

INSPECTOR_PORT = 9229


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def inspector_listening(pid):
    """Whether the inspector of Node `pid` listens, in its network namespace."""
    try:
        with open(f"/proc/{pid}/net/tcp") as f:
            rows = [line.split() for line in f.readlines()[1:]]
    except OSError:
        return False
    return any(r[1].endswith(f":{INSPECTOR_PORT:04X}") and r[3] == "0A" for r in rows)


def catches_sigusr1(pid):
    """Whether Node `pid` has installed its SIGUSR1 handler (the inspector's):
    before that, early in Node's start, SIGUSR1 would simply kill it."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) & (1 << (signal.SIGUSR1 - 1)))
    except OSError:
        pass
    return False


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_a_runner_that_wrote_while_waiting_is_not_handed_out(tmp_path):
    s = Session(tmp_path / "state", args=["--prestart", "2", "--log-level", "debug"])
    try:
        conv = s.conv_prefix + "out"
        assert_ok(s.run("return 1;", tools=[], conversation=conv, timeout=120))
        wait_event(s, "prestart.started")
        deadline = time.monotonic() + 30
        while len(children(s.proc.pid)) != 1:  # the first runner's tree goes
            assert time.monotonic() < deadline, children(s.proc.pid)
            time.sleep(0.05)
        # the waiting runner's Node, once bubblewrap has started it
        while True:
            nodes = [p for p in descendants(s.proc.pid) if comm(p) == "node"]
            if len(nodes) == 1:
                break
            assert time.monotonic() < deadline, [(p, comm(p)) for p in descendants(s.proc.pid)]
            time.sleep(0.02)
        node = nodes[0]
        while not catches_sigusr1(node):
            assert time.monotonic() < deadline, f"runner {node} never caught SIGUSR1"
            time.sleep(0.02)
        os.kill(node, signal.SIGUSR1)
        # Node has answered the signal: the pool saw its output (and drops
        # it), or the inspector is up in a runner still waiting.
        deadline = time.monotonic() + 30
        while True:
            dropped = [d for d in s.log_events("prestart.dropped")
                       if d["reason"] == "output while waiting"]
            if dropped or inspector_listening(node):
                break
            assert time.monotonic() < deadline, f"SIGUSR1 changed nothing; {s._context()}"
            time.sleep(0.02)
        eid = s.execute("return { inspector: require('node:inspector').url() ?? null };",
                        tools=[], conversation=conv)
        res = assert_ok(s.wait_result(eid, timeout=120))
        deadline = time.monotonic() + 30
        assert res["result"] == {"inspector": None}, res
        assert prestarted(s, eid) is False
        # the drop's log line, which may come after the inspector was seen
        while not [d for d in s.log_events("prestart.dropped") if d["reason"] == "output while waiting"]:
            assert time.monotonic() < deadline, s.log_events("prestart.dropped")
            time.sleep(0.02)
        deadline = time.monotonic() + 30
        while alive(node):  # killed, not left behind
            assert time.monotonic() < deadline, f"the runner {node} outlived its drop"
            time.sleep(0.05)
    finally:
        assert s.close() == 0
