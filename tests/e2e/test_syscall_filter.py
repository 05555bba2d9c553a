"""The local sandbox's seccomp filter (runner/local/syscall_filter.c), call by
call: a program runs tests/e2e/seccomp_probe.c, which makes each refused call
where only the filter can answer it (see the probe's header), and every
verdict must be the filter's: EPERM, ENOSYS for clone3, SIGSYS for another
architecture's entry point. The same probe on the host, where no such filter
is, shows what the kernel alone answers. On the Kubernetes backend the same
filter is the pod helper's (k8s/pod_helper/pod_helper.c installs it in each
runner), so the same verdicts hold in a pod."""
import base64
import errno
import json
import os
import platform
import shutil
import signal
import subprocess
import tempfile

import pytest

from harness import BACKEND, REPO, assert_ok

PROBE_SRC = REPO / "tests" / "e2e" / "seccomp_probe.c"

pytestmark = [
    pytest.mark.skipif(BACKEND not in ("local", "kubernetes"), reason="a sandbox's filter"),
    pytest.mark.skipif(platform.machine() != "x86_64",
                       reason="the probe's system call numbers and its own filter are "
                              "x86_64's; tests/unit/test_syscall_filter.c checks the "
                              "aarch64 filter as data"),
]

# What the filter refuses with EPERM whatever the arguments: the list of
# syscall_filter.h (x86_64 has no umount or stime).
REFUSED = [
    "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr",
    "unshare", "setns",
    "keyctl", "add_key", "request_key", "bpf", "ptrace", "process_vm_readv",
    "process_vm_writev", "kcmp", "pidfd_getfd",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "create_module", "get_kernel_syms", "query_module", "uselib", "lookup_dcookie",
    "nfsservctl", "_sysctl", "iopl", "ioperm", "reboot", "swapon", "swapoff", "acct",
    "quotactl", "quotactl_fd", "syslog", "vhangup",
    "open_by_handle_at", "name_to_handle_at",
    "perf_event_open", "userfaultfd", "fanotify_init", "io_uring_setup", "io_uring_enter",
    "io_uring_register",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname",
    "setdomainname", "modify_ldt",
]
# Refused for these arguments only: clone with each CLONE_NEW* flag, a unix
# socket of its own, terminal injection.
REFUSED_FOR_ARGS = [
    "clone_newns", "clone_newcgroup", "clone_newuts", "clone_newipc", "clone_newuser",
    "clone_newpid", "clone_newnet", "clone_newtime", "socket_unix", "ioctl_tiocsti",
    "ioctl_tiocsti_high_bits", "ioctl_tioclinux",
    "socket_vsock", "socket_packet", "socket_netlink_audit", "socket_netlink_uevent",
    "socket_netlink_sock_diag", "socket_bluetooth", "socket_alg", "socket_family_1000",
    "personality_addr_no_randomize", "personality_read_implies_exec", "personality_query",
]
# The same calls with arguments the filter lets through (fork, threads,
# network sockets, socketpair, a terminal query): past the filter, ENOSYS.
ALLOWED = ["allowed_clone_fork", "allowed_clone_thread", "allowed_socket_inet",
           "allowed_socketpair_unix", "allowed_ioctl_tcgets", "allowed_socket_inet6",
           "allowed_socket_netlink_route", "allowed_personality_linux",
           "allowed_personality_linux32"]


@pytest.fixture(scope="module")
def probe():
    cc = shutil.which("cc")
    assert cc, "no C compiler (scripts/deps.sh installs build-essential)"
    # Under /tmp, mode 0755: the host run below is as an unprivileged user.
    d = tempfile.mkdtemp(prefix="codepod-seccomp-probe-", dir="/tmp")
    try:
        os.chmod(d, 0o755)
        exe = os.path.join(d, "seccomp_probe")
        subprocess.run([cc, "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror", "-Os",
                        "-s", "-o", exe, str(PROBE_SRC)], check=True)
        yield exe
    finally:
        shutil.rmtree(d, ignore_errors=True)


def yama_ptrace_scope():
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            return int(f.read())
    except OSError:
        return 0  # no Yama: the kernel's own ptrace rules only


def host_run(exe):
    """The probe on the host as a user with no capability, no filter but its own."""
    argv = [exe]
    if os.geteuid() == 0:
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", "--"] + argv
    return json.loads(subprocess.run(argv, check=True, capture_output=True, timeout=60).stdout)


def sandbox_run(session, exe):
    with open(exe, "rb") as f:
        b64 = base64.b64encode(f.read()).decode()
    # The sandbox sees none of the host's /tmp: the program writes the probe
    # into its own.
    res = assert_ok(session.run(f"""const fs = require('node:fs');
fs.writeFileSync('/tmp/seccomp_probe', Buffer.from('{b64}', 'base64'), {{ mode: 0o755 }});
const out = require('node:child_process').execFileSync('/tmp/seccomp_probe');
return JSON.parse(out.toString());""", timeout=120))
    return res["result"]


def test_each_refused_call_gets_the_filters_answer_not_the_kernels(session, probe):
    host = host_run(probe)
    names = REFUSED + REFUSED_FOR_ARGS + ALLOWED
    # Without the sandbox's filter, the probe's own one answers every call:
    # none reaches the kernel, so an EPERM below can only be the filter's.
    assert host["marked"] == {n: errno.ENOSYS for n in names}, host
    # What the kernel answers an unprivileged process for the real calls
    # (Yama's "admin only" and "no attach" scopes refuse ptrace themselves;
    # the marked ptrace call above stays the filter's alone).
    kernel_ptrace = 0 if yama_ptrace_scope() < 2 else errno.EPERM
    assert host["real"] == {"ptrace_traceme": kernel_ptrace, "ptrace_attach_child": kernel_ptrace,
                            "clone3_short_args": errno.EINVAL}, host
    # No SIGSYS without a filter: the kernel runs i386 and x32 calls, or
    # (built without them) answers ENOSYS or SIGSEGV.
    assert signal.SIGSYS not in host["signal"].values(), host

    got = sandbox_run(session, probe)
    want = {
        "marked": {**{n: errno.EPERM for n in REFUSED + REFUSED_FOR_ARGS},
                   **{n: errno.ENOSYS for n in ALLOWED}},
        # ptrace on itself and on its own child, which the kernel allows, and
        # clone3, answered ENOSYS before the kernel reads its arguments (the
        # C library then falls back to clone, whose flags the filter sees).
        "real": {"ptrace_traceme": errno.EPERM, "ptrace_attach_child": errno.EPERM,
                 "clone3_short_args": errno.ENOSYS},
        # a call through another architecture's entry point kills the process
        "signal": {"i386_getpid": signal.SIGSYS, "x32_getpid": signal.SIGSYS},
    }
    # A kernel without the i386 entry point (IA32 emulation built out or
    # turned off at boot) faults `int $0x80` before any filter runs, so no
    # program there can reach the filter's i386 rule: the sandbox must see
    # the same fault, and tests/unit/test_syscall_filter.c checks that rule
    # as data. The x32 calls go through the 64-bit entry point, where the
    # filter always runs first.
    if host["signal"]["i386_getpid"] == signal.SIGSEGV:
        want["signal"]["i386_getpid"] = signal.SIGSEGV
    wrong = {f"{part}.{n}": {"got": got[part].get(n), "want": w}
             for part in want for n, w in want[part].items() if got[part].get(n) != w}
    assert not wrong, f"errno (signal for the entry points) per call: {wrong}"
    assert {part: set(got[part]) for part in got} == {part: set(want[part]) for part in want}, got
    assert_ok(session.run("return 1;"))
