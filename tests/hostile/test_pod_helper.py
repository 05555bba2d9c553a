"""Pods as tight as a pod allows (SECURITY.md, "The Kubernetes backend"): every
runner's parent is the pod helper (k8s/pod_helper/pod_helper.c), a child
subreaper that is not dumpable, which puts the runner in a Landlock domain of
its own and under the local sandbox's syscall filter plus its own, and takes
every process of the execution before the outcome is sent.

Each case runs with the chart's pod template and with the built-in one, and
ends with an execution in the same and in another conversation. The fake API
server runs pod processes on this machine, so what is left of an execution
is read from the host's /proc."""
import json
import time
import uuid

import pytest

from harness import BACKEND, assert_ok, processes_with_marker
from hostile import Hostile, _session

pytestmark = pytest.mark.skipif(BACKEND != "kubernetes", reason="pods only")

TRIALS = 20


@pytest.fixture(params=["chart", "builtin"], scope="module")
def ph(request):
    yield from _session(Hostile("pod", template=request.param))


def conv():
    return "ph-" + uuid.uuid4().hex[:12]


def marker():
    return f"1000.{uuid.uuid4().int % 10**9:09d}"


def running(pids):
    """Those of @pids (processes_with_marker's) that can still run: not a
    zombie and no SIGKILL pending. The outcome is sent once every process
    of the execution has SIGKILL pending; the kernel may still be tearing
    them down then."""
    out = []
    for pid, cmd in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                st = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
        except OSError:
            continue
        state = st.get("State", "").strip()[:1]
        pending = int(st.get("SigPnd", "0").strip(), 16) | int(st.get("ShdPnd", "0").strip(), 16)
        if state in ("Z", "X") or pending & (1 << (9 - 1)):
            continue
        out.append((pid, cmd))
    return out


def next_ok(h, c):
    """The next execution of the same and of another conversation succeeds."""
    for k in (c, conv()):
        res = assert_ok(h.run("return require('node:fs').readdirSync('/proc').length > 0;",
                              conversation=k))
        assert res["result"] is True, res


# Fork-and-exit chains, as the audit ran them: each generation starts the
# next and ends, in a session of its own and (env -i) without the execution's
# tag, so neither the runner's process tree nor its environment leads to it.
# "shell": env -i, setsid -f, sh again (a few ms a generation); "fork": a
# Python loop that forks and exits as fast as it can (well under 1 ms).
CHAINS = {
    "shell": ("const fs = require('node:fs');\n"
              "fs.writeFileSync('/tmp/chain-{m}.sh', '#!/bin/sh\\n' +\n"
              "  'echo $$ >> /workspace/chain-{m}.log\\n' +\n"
              "  'exec env -i setsid -f /bin/sh /tmp/chain-{m}.sh {m}\\n', {{ mode: 0o755 }});\n"
              "require('node:child_process').spawn('/bin/sh', ['/tmp/chain-{m}.sh', '{m}'],\n"
              "  {{ detached: true, stdio: 'ignore' }}).unref();\n"),
    "fork": ("require('node:child_process').spawn('python3', ['-c',\n"
             "  'import os, sys\\n' +\n"
             "  'n = 0\\n' +\n"
             "  'while True:\\n' +\n"
             "  '    if os.fork(): os._exit(0)\\n' +\n"
             "  '    os.setsid()\\n' +\n"
             "  '    n += 1\\n' +\n"
             "  '    if n % 200 == 0: open(\"/workspace/chain-{m}.log\", \"a\").write(str(os.getpid()) + \"\\\\n\")\\n',\n"
             "  '{m}'], {{ detached: true, stdio: 'ignore', env: {{}} }}).unref();\n"),
}
# The program waits until the chain has gone through some generations.
WAIT = ("const fs2 = require('node:fs');\n"
        "for (let i = 0; i < 1500; i++) {{\n"
        "  let n = 0;\n"
        "  try {{ n = fs2.readFileSync('/workspace/chain-{m}.log', 'utf8').split('\\n').length; }} catch {{ }}\n"
        "  if (n > 3) break;\n"
        "  await new Promise((r) => setTimeout(r, 10));\n"
        "}}\n"
        "return fs2.readFileSync('/workspace/chain-{m}.log', 'utf8').split('\\n').length;\n")


@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_a_fork_and_exit_chain_never_survives_its_execution(ph, chain):
    c = conv()
    survived = []
    for trial in range(TRIALS):
        m = marker()
        res = assert_ok(ph.run(CHAINS[chain].format(m=m) + WAIT.format(m=m), conversation=c))
        assert res["result"] > 3, f"trial {trial}: the chain never ran: {res}"
        # The outcome is sent once every process of the execution has
        # SIGKILL pending: none may run now, and none may be there a moment
        # later (a chain that got away keeps making new ones).
        left = running(processes_with_marker(m))
        time.sleep(0.5)
        left += processes_with_marker(m)
        if left:
            survived.append((trial, left))
            for pid, _ in left:
                try:
                    __import__("os").kill(pid, 9)
                except OSError:
                    pass
        # ...and the log it writes stays as it was through the next execution.
        before = assert_ok(ph.run(f"return require('node:fs').readFileSync('/workspace/chain-{m}.log', 'utf8');",
                                  conversation=c))["result"]
        after = assert_ok(ph.run(f"return require('node:fs').readFileSync('/workspace/chain-{m}.log', 'utf8');",
                                 conversation=c))["result"]
        assert before == after, f"trial {trial}: the chain still ran after its execution"
    assert survived == [], f"{len(survived)} of {TRIALS} trials left a process: {survived[:3]}"
    next_ok(ph, c)


# What a program tries against the processes around it: opening
# /proc/PID/mem read-write, /proc/PID/fd/0 (the stdin pipe: the next
# program, tool answers), PTRACE_SEIZE, pidfd_open + pidfd_getfd, and
# signals. Python's ctypes makes the calls Node has no API for.
PROBE = r"""
import ctypes, errno, json, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
SYS = {"x86_64": (434, 438), "aarch64": (434, 438)}[os.uname().machine]
def err(f):
    try:
        f()
        return 0
    except OSError as e:
        return e.errno
def ptrace_seize(pid):
    if libc.ptrace(ctypes.c_long(0x4206), ctypes.c_long(pid), None, None) != 0:
        raise OSError(ctypes.get_errno(), "ptrace")
    libc.ptrace(ctypes.c_long(17), ctypes.c_long(pid), None, None)  # detach
def pidfd_getfd(pid):
    fd = libc.syscall(SYS[0], ctypes.c_int(pid), 0)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "pidfd_open")
    try:
        if libc.syscall(SYS[1], ctypes.c_int(fd), 0, 0) < 0:
            raise OSError(ctypes.get_errno(), "pidfd_getfd")
    finally:
        os.close(fd)
def pidfd_open(pid):
    fd = libc.syscall(SYS[0], ctypes.c_int(pid), 0)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "pidfd_open")
    os.close(fd)
def opener(path, flags):
    return lambda: os.close(os.open(path, flags))
out = {}
for name, pid in json.loads(sys.argv[1]).items():
    out[name] = {
        "mem_rw": err(opener(f"/proc/{pid}/mem", os.O_RDWR)),
        "mem_r": err(opener(f"/proc/{pid}/mem", os.O_RDONLY)),
        "environ": err(opener(f"/proc/{pid}/environ", os.O_RDONLY)),
        "fd0": err(opener(f"/proc/{pid}/fd/0", os.O_RDONLY | os.O_NONBLOCK)),
        "ptrace_seize": err(lambda: ptrace_seize(pid)),
        "pidfd_getfd": err(lambda: pidfd_getfd(pid)),
        "sig0": err(lambda: os.kill(pid, 0)),
    }
out["landlock_abi"] = libc.syscall(444, None, 0, 1)  # landlock_create_ruleset(VERSION)
print(json.dumps(out))
"""


def probe_js(targets_js):
    return ("const targets = " + targets_js + ";\n"
            "const out = require('node:child_process').execFileSync('python3', ['-c', " +
            json.dumps(PROBE) + ", JSON.stringify(targets)]);\n"
            "return JSON.parse(out.toString());\n")


# The runner's parent is the helper, the helper's is the supervisor.
PPID_OF = ("function ppidOf(p) {\n"
           "  const s = require('node:fs').readFileSync('/proc/' + p + '/stat', 'latin1');\n"
           "  return +s.slice(s.lastIndexOf(')') + 2).split(' ')[1];\n"
           "}\n")

REFUSED = {"mem_rw": 13, "mem_r": 13, "environ": 13, "fd0": 13, "ptrace_seize": 1,
           "pidfd_getfd": 1}


def test_the_supervisor_and_the_helper_are_out_of_reach(ph):
    c = conv()
    assert_ok(ph.run("return 1", conversation=c))
    got = assert_ok(ph.run(PPID_OF + probe_js(
        "{ helper: process.ppid, supervisor: ppidOf(process.ppid) }"), conversation=c))["result"]
    assert got["landlock_abi"] >= 1, "this kernel has no Landlock: see SECURITY.md"
    for who in ("helper", "supervisor"):
        # The kernel's answers: EACCES for the /proc files (ptrace_may_access
        # under Landlock, the helper not dumpable), EPERM for the calls (the
        # filter); signals refused by the helper's own filter.
        want = dict(REFUSED, sig0=1)
        assert got[who] == want, (who, got)
    next_ok(ph, c)


def test_a_concurrent_execution_is_out_of_reach(ph):
    """Two executions of one conversation at once: the second tries every
    way into the first's runner (its stdin is the first one's next tool
    answer). The same calls on its own child succeed, so the refusals are
    the containment's, not a missing /proc or python3."""
    c = conv()
    m = uuid.uuid4().hex[:8]
    ph.run("return 1", conversation=c)
    first = ph.session.execute(
        f"require('node:fs').writeFileSync('/workspace/first-{m}', String(process.pid));\n"
        "await new Promise((r) => setTimeout(r, 8000)); return 'first';",
        conversation=c, tools=[])
    got = assert_ok(ph.run(
        "const fs = require('node:fs');\n"
        f"let pid = 0;\nfor (let i = 0; i < 500 && !pid; i++) {{ try {{ pid = +fs.readFileSync('/workspace/first-{m}', 'utf8'); }} catch {{ await new Promise((r) => setTimeout(r, 10)); }} }}\n"
        "const kid = require('node:child_process').spawn('sleep', ['30'], { stdio: ['pipe', 'ignore', 'ignore'] });\n"
        "try {\n" + probe_js("{ first: pid, own_child: kid.pid }").replace("return JSON", "const r = JSON") +
        "return r; } finally { kid.kill('SIGKILL'); }\n", conversation=c))["result"]
    # Signals to another execution: refused where Landlock scopes them (ABI
    # 6, Linux 6.12), else the kernel's (same user: allowed; SECURITY.md).
    assert got["first"] == dict(REFUSED, sig0=1 if got["landlock_abi"] >= 6 else 0), got
    # (its stdin is a socket: opening it through /proc answers ENXIO once
    # the access is allowed)
    # (ptrace and pidfd_getfd stay the filter's to refuse)
    assert got["own_child"] == dict({k: 0 for k in got["own_child"]}, fd0=6, ptrace_seize=1,
                                    pidfd_getfd=1), got
    assert assert_ok(ph.session.wait_result(first, timeout=60))["result"] == "first"
    next_ok(ph, c)
