"""Fork bombs in several conversations at once against the ceiling on all
sandboxes together (--max-sandbox-pids; runner/local/cgroup.h): the bombs
hold every process their shares allow and spin on the forks the kernel
refuses, and still another conversation's `return 1` starts and succeeds
every time, within its startupTimeoutMs. Once with a small ceiling on this
host's PID space, once in a PID namespace of its own with a small
kernel.pid_max, where the default ceiling (three quarters of it) is what
stands between the bombs and the last PID codepod needs.

What no cgroup shares out: every fork and exit of a bomb takes the mapping
lock (i_mmap_rwsem) of each file it maps, libc's among them, and a starting
Node that maps or splits a mapping of the same file waits on it (seen in its
/proc/PID/stack: vma_prepare). With hundreds of forking tasks that wait has
been 20 s and, once in three runs of the PID-namespace case, over its 60 s
startupTimeoutMs."""
import json
import os
import subprocess
import time

import pytest

from hostile import BACKEND, IS_ROOT, Hostile, _session
from harness import assert_failed, assert_ok

BOMBS = 4
RUNS = 20
STARTUP_MS = 60000
# Every process forks for ever, spinning on the forks the kernel refuses:
# the bomb holds its whole share and keeps the CPU busy.
BOMB = """const cp = require('node:child_process');
cp.spawn('python3', ['-S', '-c', `
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
`], { stdio: 'ignore' });
await new Promise(() => setInterval(() => {}, 1000));"""
BOMB_POLICY = {"timeoutMs": 600000, "maxMemoryMb": 2048}

needs_root = pytest.mark.skipif(BACKEND != "local" or not IS_ROOT,
                                reason="the pids cgroup of the local backend needs root here")


def logged(h, timeout=30):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for raw in list(h.session.stderr_lines):
            line = raw.decode(errors="replace")
            if '"local.cgroup"' in line:
                return json.loads(line)
        time.sleep(0.05)
    raise AssertionError("codepod did not say where its cgroups are")


def current(folder):
    with open(os.path.join(folder, "pids.current")) as f:
        return int(f.read())


def bombs_and_starts(h):
    info = logged(h)
    folder, ceiling = info["pidsFolder"], info["maxSandboxPids"]
    assert folder and ceiling, info
    with open(os.path.join(folder, "pids.max")) as f:
        assert int(f.read()) == ceiling
    pool = (ceiling - max(ceiling // 8, 128)) // 2  # what the bombs may hold together (cgroup.h)
    s = h.session
    bombs = [s.execute(BOMB, conversation=f"bomb-{i}", policy=BOMB_POLICY)
             for i in range(BOMBS)]
    end = time.monotonic() + 300
    while current(folder) < pool * 9 // 10:
        assert time.monotonic() < end, f"the bombs never filled their shares: {current(folder)}"
        for b in bombs:
            assert not s.of(b, "result"), s.of(b, "result")
        time.sleep(0.2)
    for i in range(RUNS):
        res = assert_ok(h.run("return 1;", conversation="starter",
                              policy={"startupTimeoutMs": STARTUP_MS}, timeout=300))
        assert res["result"] == 1 and res["logs"] == "", res  # no thread Node could not make
        assert res["usage"]["startupMs"] < STARTUP_MS, res["usage"]
        assert current(folder) <= ceiling
    # the pressure held all along
    assert current(folder) >= pool * 8 // 10, (current(folder), pool)
    for b in bombs:
        s.stop(b)
    for b in bombs:
        assert_failed(s.wait_result(b, timeout=300), "CANCELLED")
    h.next_works()
    end = time.monotonic() + 60
    while [d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d))]:
        assert time.monotonic() < end, f"execution folders left: {os.listdir(folder)}"
        time.sleep(0.1)


@pytest.fixture
def small_ceiling():
    h = Hostile("root", args=["--prestart", "0", "--max-sandbox-pids", "1000"])
    yield from _session(h)


@pytest.fixture
def small_pid_space():
    """codepod alone in a PID namespace whose kernel.pid_max is 2000 (per
    namespace on Linux 6.14 and later): no --max-sandbox-pids, so its
    default, 1500, is the ceiling."""
    wrap = ["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c",
            'echo 2000 > /proc/sys/kernel/pid_max && exec "$0" "$@"']
    try:
        probe = subprocess.run(wrap[:4] + ["sh", "-c", "echo 2000 > /proc/sys/kernel/pid_max"],
                               capture_output=True)
    except OSError:
        pytest.skip("no unshare here")
    if probe.returncode:
        pytest.skip("kernel.pid_max is not per PID namespace here")
    yield from _session(Hostile("root", args=["--prestart", "0"], wrap=wrap))


@needs_root
def test_four_bombs_under_a_small_ceiling_cannot_stop_a_start(small_ceiling):
    assert logged(small_ceiling)["maxSandboxPids"] == 1000
    bombs_and_starts(small_ceiling)


# Not in `make test`: the mapping-lock wait above has made this case miss
# its startupTimeoutMs in two of four runs on a loaded 2-CPU machine, which
# no cgroup setting removes. CODEPOD_PIDNS_BOMBS=1 runs it.
@needs_root
@pytest.mark.skipif(os.environ.get("CODEPOD_PIDNS_BOMBS") != "1",
                    reason="flaky on a loaded machine (mapping-lock waits); CODEPOD_PIDNS_BOMBS=1 runs it")
def test_four_bombs_in_a_small_pid_space_cannot_stop_a_start(small_pid_space):
    assert logged(small_pid_space)["maxSandboxPids"] == 1500
    bombs_and_starts(small_pid_space)
