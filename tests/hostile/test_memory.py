"""Memory a program takes outside V8's heap: memfd, shared anonymous
mappings, Node's own Buffers. Locally each execution has a cgroup of its own
(runner/local/cgroup.h) whose limit is maxMemoryMb plus 64 MiB: a program
over it is killed whole and the outcome says it was killed for memory, the
next executions of the same and of another conversation succeed, and what it
took is given back (its folder gone, the sandboxes' usage as before).
Without a cgroup (unprivileged on cgroup v1) codepod refuses to start unless
told --no-memory-bound."""
import json
import os
import re
import shutil
import subprocess
import time
import uuid

import pytest

from hostile import (BACKEND, Hostile, new_folder, IS_ROOT, UNPRIV_UID, _session, _setpriv, local_only,
                     modes)
from harness import CODEPOD_BIN, assert_failed, assert_ok, processes_with_marker

MB = 64  # maxMemoryMb of the hostile cases: a limit of 128 MiB
POLICY = {"maxMemoryMb": MB, "timeoutMs": 60000}

PY_MEMFD = """
import os, mmap
fd = os.memfd_create('hostile')
os.ftruncate(fd, 2 << 30)
m = mmap.mmap(fd, 2 << 30)
for i in range(0, 2 << 30, 4096):
    m[i] = 1
print('mapped 2 GiB')
"""

PY_SHARED = """
import mmap
m = mmap.mmap(-1, 2 << 30, mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
for i in range(0, 2 << 30, 4096):
    m[i] = 1
print('mapped 2 GiB')
"""


def python_js(code):
    return ("const cp = require('node:child_process');\n"
            f"return String(cp.execFileSync('python3', ['-c', {json.dumps(code)}]));")


NODE_BUFFERS = """
const kept = [];
for (let i = 0; i < 32; i++) kept.push(Buffer.alloc(64 << 20, 1));  // 2 GiB off V8's heap
return kept.length;
"""


@pytest.fixture(params=modes())
def hs(request):
    """The suite's session without runners started ahead (--prestart 0): the
    sandboxes' folder is then empty between executions, so what an execution
    leaves behind shows."""
    yield from _session(Hostile(request.param, args=["--prestart", "0"]))


def sandboxes_folder(hs, timeout=30):
    """The memory folder of all sandboxes that codepod logged at start, or
    None when it runs without one (its warning said so)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for raw in list(hs.session.stderr_lines):
            line = raw.decode(errors="replace")
            if '"local.cgroup"' in line:
                return json.loads(line)["folder"]
            if '"local.no_memory_bound"' in line:
                return None
        time.sleep(0.05)
    raise AssertionError("codepod said neither where its cgroups are nor that it has none")


def usage(folder):
    for name in ("memory.usage_in_bytes", "memory.current"):
        p = os.path.join(folder, name)
        if os.path.exists(p):
            with open(p) as f:
                return int(f.read())
    raise AssertionError(f"no memory usage file in {folder}")


def executions(folder):
    return [d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d))]


def settled(folder, before, timeout=30):
    """Waits (a deadline that only catches a hang) until the execution
    folders are gone and the sandboxes' usage is back near `before`."""
    end = time.monotonic() + timeout
    while True:
        left, now = executions(folder), usage(folder)
        if not left and now <= before + (32 << 20):
            return now
        if time.monotonic() > end:
            raise AssertionError(f"not given back: folders {left}, usage {now} (was {before})")
        time.sleep(0.1)


@local_only
@pytest.mark.parametrize("case", ["memfd", "shared_mmap", "node_buffers"])
def test_memory_outside_the_heap_is_bounded(hs, case):
    folder = sandboxes_folder(hs)
    if folder is None:
        assert hs.mode == "unprivileged", "as root this machine must give codepod a memory cgroup"
        pytest.skip("unprivileged on cgroup v1: no memory cgroup (codepod warned it runs unbounded)")
    assert_ok(hs.run("return 1;", conversation="mem-warm", policy=POLICY))
    before = settled(folder, usage(folder) + (1 << 40))  # whatever a runner left warm
    js = {"memfd": python_js(PY_MEMFD), "shared_mmap": python_js(PY_SHARED),
          "node_buffers": NODE_BUFFERS}[case]
    err = assert_failed(hs.run(js, conversation="mem-hostile", policy=POLICY, timeout=180),
                        "PROCESS_EXITED")
    assert "killed for memory (OOM)" in err["message"], err
    assert f"limit of {MB + 64} MiB" in err["message"], err
    settled(folder, before)
    # the next execution, in this conversation and in another
    res = assert_ok(hs.run("return 'again';", conversation="mem-hostile", policy=POLICY))
    assert res["result"] == "again"
    hs.next_works()
    settled(folder, before)


@local_only
def test_memory_within_the_limit_is_not_touched(hs):
    """A program's own 40 MiB outside the heap, under a 64 MiB maxMemoryMb: the
    slack is for Node, and this fits."""
    folder = sandboxes_folder(hs)
    if folder is None:
        pytest.skip("no memory cgroup in this mode")
    res = assert_ok(hs.run("const b = Buffer.alloc(40 << 20, 1); return b.length;",
                           conversation="mem-fits", policy=POLICY))
    assert res["result"] == 40 << 20


@pytest.mark.skipif(BACKEND != "local" or not IS_ROOT, reason="needs root to be unprivileged")
def test_unprivileged_without_a_cgroup_refuses_unless_told():
    """On cgroup v1 an unprivileged codepod cannot have a cgroup: it says so
    and does not start; --no-memory-bound starts it, warning."""
    h = Hostile("unprivileged")  # started with the suite's --no-memory-bound
    try:
        if sandboxes_folder(h) is not None:
            pytest.skip("this host hands an unprivileged codepod a cgroup")
        assert_ok(h.run("return 1;"))
    finally:
        h.close()
    top = new_folder()
    try:
        state = top / "state"
        state.mkdir()
        os.chown(state, UNPRIV_UID, UNPRIV_UID)
        r = subprocess.run([*_setpriv(UNPRIV_UID), CODEPOD_BIN, "serve", "--stdio",
                            "--state-dir", str(state)], input=b"", capture_output=True,
                           timeout=120, cwd=str(top), env=dict(os.environ, HOME=str(state)))
    finally:
        shutil.rmtree(top, ignore_errors=True)
    err = r.stderr.decode(errors="replace")
    assert r.returncode != 0, err
    assert "no cgroup can bound the sandboxes' memory" in err, err
    assert "--no-memory-bound" in err, err
    assert not re.search(r'"exec\.start"', err), err


def _ppid(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _cgroups(pid):
    """The process's cgroup per v1 hierarchy of codepod's (memory, pids, cpu), as the host sees it."""
    with open(f"/proc/{pid}/cgroup") as f:
        return sorted(line.strip() for line in f
                      if re.match(r"\d+:(memory|pids|cpu)(,[a-z]+)*:", line) or
                      line.startswith("0::"))


@local_only
def test_every_process_of_the_sandbox_is_in_the_execution_cgroup(hs):
    """bubblewrap, its namespace's init, the runner and a child the program
    starts are all in the execution's own folder in every hierarchy, as the
    host sees them; inside, the cgroup namespace bubblewrap made is rooted
    at that folder (it was made after the join): the program sees "/"."""
    folder = sandboxes_folder(hs)
    if folder is None:
        pytest.skip("no cgroup in this mode")
    marker = f"hostile-cgjoin-{uuid.uuid4().hex}"
    s = hs.session
    eid = s.execute(f"""process.title = '{marker}';
const cp = require('node:child_process');
cp.spawn('sh', ['-c', 'sleep 120', '{marker}-child'], {{ stdio: 'ignore' }});
await tools.hold({{}});
return require('node:fs').readFileSync('/proc/self/cgroup', 'utf8');""", tools=["hold"],
                    conversation="mem-join", policy=POLICY)
    call = s.wait_call(eid, "hold", timeout=120)
    # sh's own fork carries its command line until it execs sleep: wait
    # until that has passed and one runner and one sh are left.
    end = time.monotonic() + 60
    while True:
        found = dict(processes_with_marker(marker))
        runner = [p for p, cmd in found.items() if "-child" not in cmd]
        child = [p for p, cmd in found.items() if "-child" in cmd]
        if (len(runner), len(child)) == (1, 1) or time.monotonic() > end:
            break
        time.sleep(0.1)
    assert len(runner) == 1 and len(child) == 1, found
    init = _ppid(runner[0])
    bwrap = _ppid(init)
    want = _cgroups(runner[0])
    mem = [line for line in want if ":memory:" in line] or want
    assert all(re.search(r"/codepod-\d+-\d+/e\d+$", line) for line in mem), want
    for pid in (child[0], init, bwrap):
        assert _cgroups(pid) == want, (pid, _cgroups(pid), want)
    s.answer(call, 1)
    res = assert_ok(s.wait_result(eid, timeout=120))
    inside = [line for line in res["result"].splitlines() if ":memory:" in line]
    assert inside and all(line.endswith(":/") for line in inside), res["result"]
