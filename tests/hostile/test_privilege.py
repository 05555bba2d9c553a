"""A program holds no privilege: no capability, no_new_privs, the seccomp
filter, a non-root user; mounts, new namespaces and the kernel's dangerous
calls are refused; /proc/sys stays read-only; root-only files stay unreadable."""
import json
import os
import platform
import uuid

import pytest

from hostile import BACKEND, IS_ROOT, UNPRIV_UID, local_only
from harness import REPO, Session, assert_failed, assert_ok

FIRST_UID = 0x70000000  # --sandbox-uids' default range: 65536 users from here

PRELUDE = """const cp = require('node:child_process');
const fs = require('node:fs');
const sh = (c) => { try { cp.execSync(c, { stdio: 'pipe' }); return 0; } catch (e) { return e.status; } };
const code = (f) => { try { f(); return 'ok'; } catch (e) { return e.code; } };
"""


def status_of(hs):
    res = assert_ok(hs.run(
        "const s = require('node:fs').readFileSync('/proc/self/status', 'utf8');\n"
        "const f = (k) => s.match(new RegExp('^' + k + ':[ \\\\t]*(.*)$', 'm'))[1].trim();\n"
        "return Object.fromEntries(['Uid', 'Gid', 'Groups', 'CapInh', 'CapPrm', 'CapEff', 'CapBnd',"
        " 'CapAmb', 'NoNewPrivs', 'Seccomp'].map((k) => [k, f(k)]));"))
    return res["result"]


def test_no_capability_no_new_privs_seccomp_and_not_root(hs):
    st = status_of(hs)
    for k in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert st[k] == "0000000000000000", (k, st)
    uid = st["Uid"].split()
    if hs.mode == "root":
        # a user of the conversation's own from the default range, its group
        # the same number
        assert len(set(uid)) == 1 and FIRST_UID <= int(uid[0]) < FIRST_UID + 65536, st
        assert st["Gid"].split() == uid, st
        assert st["Groups"] == "", st
    elif hs.mode == "unprivileged":
        assert uid == [str(hs.uid)] * 4, st
    else:  # the chart's template: runAsUser 1000, fsGroup 1000
        assert uid == ["1000"] * 4 and st["Groups"].split() == ["1000"], st
    assert st["NoNewPrivs"] == "1", st
    assert st["CapBnd"] == "0000000000000000", st
    if BACKEND == "local":
        assert st["Seccomp"] == "2", st
    hs.next_works()


def test_mount_umount_and_remount_are_refused_and_the_host_stays_read_only(hs):
    # A host folder anyone may write to: only the read-only mount of the host
    # stands between the program and it (not a file mode, not the private /tmp).
    open_dir = hs.host / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    proof = open_dir / f"escape-proof-{uuid.uuid4().hex[:8]}"
    res = assert_ok(hs.run(PRELUDE + f"""
return {{ umountTmp: sh('umount -l /tmp'), umountProc: sh('umount -l /proc'),
         remount: sh('mount -o remount,bind,rw /'), bind: sh('mount --bind /tmp /mnt'),
         write: code(() => fs.writeFileSync({json.dumps(str(proof))}, 'x')),
         atRoot: code(() => fs.mkdirSync('/' + {json.dumps(proof.name)})) }};"""))
    r = res["result"]
    # the sandbox's root (a tmpfs of the program's own user, unprivileged) is read-only too
    assert r["atRoot"] in ("EROFS", "EACCES") and not os.path.exists("/" + proof.name), r
    assert r["umountTmp"] == 32 and r["umountProc"] == 32, r  # umount(8): "must be superuser"
    assert r["remount"] == 32 and r["bind"] == 32, r
    assert r["write"] == "EROFS", r
    assert not proof.exists() and list(open_dir.iterdir()) == [], r
    hs.next_works()


@pytest.mark.skipif(BACKEND != "local" or platform.machine() != "x86_64",
                    reason="syscall numbers are x86_64's; on Kubernetes seccomp is the runtime's "
                           "RuntimeDefault profile, which the fake API server does not emulate")
def test_kernel_calls_of_the_container_profiles_answer_eperm(hs):
    # Each call made raw (python3 ctypes), with harmless arguments: the filter
    # answers before the kernel looks at them.
    py = r"""
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
def nr(n, *a):
    ctypes.set_errno(0)
    r = libc.syscall(n, *[ctypes.c_long(x) for x in a])
    return ctypes.get_errno() if r == -1 else 'ok'
print(json.dumps({
  'unshare_user': nr(272, 0x10000000), 'unshare_ns': nr(272, 0x00020000),
  'clone_newuser': nr(56, 0x10000000 | 17, 0, 0, 0, 0), 'clone3': nr(435, 0, 0),
  'setns': nr(308, 0, 0), 'mount': nr(165, 0, 0, 0, 0, 0), 'umount2': nr(166, 0, 0),
  'pivot_root': nr(155, 0, 0), 'keyctl': nr(250, 0, 0), 'add_key': nr(248, 0, 0, 0, 0, 0),
  'request_key': nr(249, 0, 0, 0, 0), 'bpf': nr(321, 0, 0, 0), 'ptrace': nr(101, 16, 1, 0, 0),
  'process_vm_readv': nr(310, 1, 0, 0, 0, 0, 0), 'kexec_load': nr(246, 0, 0, 0, 0),
  'open_by_handle_at': nr(304, 0, 0, 0), 'init_module': nr(175, 0, 0, 0),
  'finit_module': nr(313, 0, 0, 0), 'delete_module': nr(176, 0, 0),
  'perf_event_open': nr(298, 0, 0, 0, 0, 0), 'userfaultfd': nr(323, 0),
  'swapon': nr(167, 0, 0), 'reboot': nr(169, 0, 0, 0, 0), 'acct': nr(163, 0),
  'quotactl': nr(179, 0, 0, 0, 0), 'syslog': nr(103, 3, 0, 0), 'io_uring_setup': nr(425, 1, 0),
  'socket_unix': nr(41, 1, 1, 0), 'tiocsti': nr(16, 0, 0x5412, 0),
}))
"""
    res = assert_ok(hs.run(PRELUDE + f"""
const out = cp.execFileSync('python3', ['-c', {json.dumps(py)}]).toString();
return {{ calls: JSON.parse(out), unshareCmd: sh('unshare -Ur true') }};"""))
    calls = res["result"]["calls"]
    want = {k: 1 for k in calls}  # EPERM
    want["clone3"] = 38  # ENOSYS: the C library falls back to clone, whose flags are checked
    assert calls == want
    assert res["result"]["unshareCmd"] == 1, res["result"]
    hs.next_works()


def test_proc_sys_and_sysrq_trigger_stay_read_only(hs):
    res = assert_ok(hs.run(PRELUDE + """
return { core: code(() => fs.writeFileSync('/proc/sys/kernel/core_pattern', '|/bin/sh')),
         sysrq: code(() => fs.writeFileSync('/proc/sysrq-trigger', 'h')),
         mountedRo: fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\\n')
           .filter((l) => / \\/proc\\/sys /.test(l)).map((l) => / ro[, ]/.test(l)) };"""))
    r = res["result"]
    assert r["core"] in ("EACCES", "EROFS"), r
    sysrq_exists = os.path.exists("/proc/sysrq-trigger")  # a kernel without MAGIC_SYSRQ has none
    assert r["sysrq"] in (("EACCES", "EROFS") if sysrq_exists else ("ENOENT",)), r
    if BACKEND == "local":
        assert r["mountedRo"] == [True], r  # bubblewrap covers /proc/sys read-only
    assert open("/proc/sys/kernel/core_pattern").read() != "|/bin/sh\n"
    hs.next_works()


def test_root_only_files_and_the_shadow_file_are_unreadable(hs):
    secret = hs.secret("top secret " + uuid.uuid4().hex)
    res = assert_ok(hs.run(PRELUDE + f"""
return {{ secret: code(() => fs.readFileSync({json.dumps(str(secret))}, 'utf8')),
         shadow: code(() => fs.readFileSync('/etc/shadow', 'utf8')),
         root: (() => {{ try {{ return fs.readdirSync('/root'); }} catch (e) {{ return e.code; }} }})() }};"""))
    r = res["result"]
    if hs.mode == "unprivileged" and not IS_ROOT:
        pytest.skip("the test's own files belong to codepod's user here")
    assert r["secret"] == "EACCES" and r["shadow"] == "EACCES", r
    # /root is 0700 root: unreadable, or hidden behind an empty folder. A
    # checkout under /root is the one thing the sandbox (or the fake API
    # server's pods) puts back into /root: the programs' Node lives in it.
    # That is not the host's /root showing.
    host_root = set(os.listdir("/root")) if IS_ROOT else set()
    if REPO.parts[:2] == ("/", "root") and len(REPO.parts) > 2:
        host_root.discard(REPO.parts[2])
    assert r["root"] == "EACCES" or (isinstance(r["root"], list) and not host_root & set(r["root"])), r
    hs.next_works()


OWNERSHIP = PRELUDE + """
fs.writeFileSync('mine-' + Date.now() + '.txt', 'x');
const st = fs.statSync('.');
const files = fs.readdirSync('.').filter((f) => f.startsWith('mine-'));
return { me: process.getuid(), uid: st.uid, mode: (st.mode & 0o777).toString(8),
         files: files.map((f) => fs.statSync(f).uid) };"""


@local_only
def test_the_workspace_belongs_to_the_sandbox_user(hs):
    """As root, each conversation has a user of its own that owns its
    workspace (0700), and keeps it from one execution to the next; another
    conversation has another user."""
    a1 = assert_ok(hs.run(OWNERSHIP, conversation="own-a"))["result"]
    a2 = assert_ok(hs.run(OWNERSHIP, conversation="own-a"))["result"]
    b = assert_ok(hs.run(OWNERSHIP, conversation="own-b"))["result"]
    for r in (a1, a2, b):
        assert r["uid"] == r["me"] and set(r["files"]) == {r["me"]}, r
    assert len(a2["files"]) == 2 and a2["me"] == a1["me"], (a1, a2)
    if hs.mode == "root":
        assert a1["mode"] == "700" and b["mode"] == "700", (a1, b)
        assert b["me"] != a1["me"], "two conversations ran as one user"
        assert FIRST_UID <= b["me"] < FIRST_UID + 65536, b
    else:
        assert b["me"] == a1["me"] == hs.uid, (a1, b)
    hs.next_works()


@local_only
@pytest.mark.skipif(not IS_ROOT, reason="only root can switch users")
def test_a_conversation_keeps_its_user_across_a_restart():
    """The workspace's owner is the record of the conversation's user: a new
    codepod on the same state folder runs it as the same user again."""
    from hostile import Hostile
    h = Hostile("root")
    try:
        first = assert_ok(h.run(OWNERSHIP, conversation="restart"))["result"]
        assert h.session.close() == 0
        again = Session(h.state)
        try:
            second = assert_ok(again.run(OWNERSHIP, conversation="restart", timeout=120))["result"]
        finally:
            assert again.close() == 0
    finally:
        h.close()
    assert second["me"] == first["me"] and set(second["files"]) == {first["me"]}, (first, second)
    assert len(second["files"]) == 2, second


@local_only
@pytest.mark.skipif(not IS_ROOT, reason="only root can switch users")
def test_sandbox_user_runs_every_conversation_as_that_one_user():
    from hostile import Hostile
    h = Hostile("root", args=["--sandbox-user", "54321"])
    try:
        got = [assert_ok(h.run(OWNERSHIP, conversation=c))["result"] for c in ("one-x", "one-y")]
        h.next_works()
    finally:
        h.close()
    assert [r["me"] for r in got] == [54321, 54321] and [r["uid"] for r in got] == [54321] * 2, got


@pytest.mark.skipif(not IS_ROOT or BACKEND != "local", reason="only root can give the token file a user")
def test_the_serve_token_and_audit_files_are_unreadable(hs):
    """serve --listen: its token and audit files are hidden (and, as root, not the
    sandbox user's to read anyway)."""
    import sys
    from hostile import HERE
    sys.path.insert(0, str(HERE.parent / "serve"))
    import harness as h
    from wssession import Server
    from util import Pump
    # where a user would keep them: a host folder the sandbox sees (not the
    # private /tmp, where hiding them would prove nothing)
    server_dir = hs.host / "serve"
    state = server_dir / "state"
    state.mkdir(parents=True)
    wrap = []
    if hs.mode == "unprivileged":
        os.chown(server_dir, hs.uid, hs.uid)
        os.chown(state, hs.uid, hs.uid)
        wrap = ["setpriv", f"--reuid={hs.uid}", f"--regid={hs.uid}", "--clear-groups", "--"]
    saved = h.CODEPOD_BIN
    srv = None
    try:
        if wrap:
            # Server builds its own command line: give it a codepod that is setpriv'd.
            launcher = server_dir / "codepod-as-user"
            launcher.write_text("#!/bin/sh\nexec " + " ".join(wrap) + f" {saved} \"$@\"\n")
            launcher.chmod(0o755)
            h.CODEPOD_BIN = str(launcher)
        audit = server_dir / "audit.log"
        audit.write_text('{"event":"audit","id":"earlier"}\n')
        if wrap:
            os.chown(audit, hs.uid, hs.uid)
        srv = Server(state, args=["--audit-file", str(audit)])
        os.chmod(srv.token_file, 0o600)
        if wrap:
            os.chown(srv.token_file, hs.uid, hs.uid)
        pump = Pump(srv.connect())
        read = "(p) => code(() => fs.readFileSync(p, 'utf8')) === 'ok' ? fs.readFileSync(p, 'utf8') : 'EACCES'"
        js = (PRELUDE + f"const read = {read};\n"
              f"return [read({json.dumps(str(srv.token_file))}), read({json.dumps(str(audit))})];")
        pump.send({"type": "execute", "id": "tok", "conversation": "tok", "js": js, "tools": []})
        m = pump.result("tok")
        assert m["type"] == "result" and m["status"] == "succeeded", m
        assert srv.token not in json.dumps(m), "the program read the serve token"
        # the token and the audit records: covered by /dev/null on a nodev mount,
        # which no one can open, whoever owns the file underneath
        assert m["result"] == ["EACCES", "EACCES"], m
        assert "earlier" in audit.read_text()
        pump.ws.close()
    finally:
        h.CODEPOD_BIN = saved
        if srv is not None:
            assert srv.stop() == 0
    hs.next_works()


def test_the_unprivileged_mode_really_is_unprivileged(hs):
    if hs.mode != "unprivileged" or not IS_ROOT:
        pytest.skip("checks the suite's own set-up of the unprivileged mode")
    hs.next_works()  # codepod is up: setpriv has made it the unprivileged user by now
    pid = hs.session.proc.pid
    with open(f"/proc/{pid}/status") as f:
        uid_line = next(line for line in f if line.startswith("Uid:"))
    assert uid_line.split()[1:] == [str(UNPRIV_UID)] * 4


@local_only
@pytest.mark.skipif(not IS_ROOT, reason="only root can switch users")
def test_sandbox_uids_takes_users_from_its_range_and_says_when_it_is_full():
    from hostile import Hostile
    # three users: the start-up probe's workspace holds one of them
    h = Hostile("root", args=["--sandbox-uids", "3000000000-3000000002"])
    try:
        got = [assert_ok(h.run(OWNERSHIP, conversation=c))["result"]["me"] for c in ("r1", "r2")]
        full = h.run("return 1;", conversation="r3")
        again = assert_ok(h.run("return 'still';", conversation="r1"))
    finally:
        h.close()
    assert len(set(got)) == 2 and all(3000000000 <= u <= 3000000002 for u in got), got
    err = assert_failed(full, "SANDBOX_UNAVAILABLE")
    assert "widen the range" in err["message"], err
    assert again["result"] == "still"
