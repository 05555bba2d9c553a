"""The disk a program can take. Locally each conversation's workspace is an
ext4 image of its own mounted on its folder (runner/local/workspace.h): a
program past maxWorkspaceBytes or maxWorkspaceFiles sees ENOSPC, and the
host's disk holds at most the image (a sparse file holds only the blocks
written). In a pod the workspace is an emptyDir the kernel does not bound:
codepod's supervisor ends the execution that takes it past the bound, before
the kubelet would evict the pod with the workspace (k8s/backend/supervisor.js).
Each case checks that the next execution, in the same and in another
conversation, succeeds, and that the host's disk is back afterwards: the
blocks held by the test's own folders (codepod's state folder, and in a pod
the fake's, which holds the pods' workspaces), so that other work on the
same disk, another suite beside this one, cannot move the figure.

Unprivileged (no loop devices, no mount) there is no disk bound: codepod
refuses to start unless told --no-disk-bound (which the suite passes), and
these cases skip there with that reason."""
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
import uuid

import pytest

from hostile import (BACKEND, HERE, Hostile, new_folder, IS_ROOT, UNPRIV_UID, _session, _setpriv, local_only,
                     modes)
from harness import CODEPOD_BIN, REPO, assert_failed, assert_ok, kube_state_dir, loop_backing_files

sys.path.insert(0, str(HERE.parent / "serve"))

MIB = 1 << 20
BOUND = 256 * MIB  # maxWorkspaceBytes of the cases: quick to fill
POLICY = {"maxWorkspaceBytes": BOUND, "timeoutMs": 180000}
# What the test's folders may gain besides the write: logs, the metadata of
# the images made for the other conversations a case uses.
NOISE = 192 * MIB


@pytest.fixture(params=modes())
def hs(request):
    """Without runners started ahead: a waiting runner holds its workspace."""
    yield from _session(Hostile(request.param, args=["--prestart", "0"]))


def disk_bound(h, timeout=30):
    """True when codepod said its workspaces have the disk bound (a pod's
    always has the supervisor's); False when it warned it has none."""
    if h.mode == "pod":
        return True
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for raw in list(h.session.stderr_lines):
            line = raw.decode(errors="replace")
            if '"local.disk_bound"' in line:
                return True
            if '"local.no_disk_bound"' in line:
                return False
        time.sleep(0.05)
    raise AssertionError("codepod said neither that its workspaces are bounded nor that they are not")


def need_bound(h):
    if not disk_bound(h):
        assert h.mode == "unprivileged", "as root this machine must give codepod the disk bound"
        pytest.skip("unprivileged: no loop devices or mounts, so no disk bound (codepod warned)")


def ws_hash(conversation):
    return hashlib.sha256(conversation.encode()).hexdigest()[:32]


def mounts_under(path):
    """Mount points under `path` (the host's view)."""
    path = os.path.realpath(str(path))
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4].replace("\\040", " ") for line in f]
    return [p for p in points if p == path or p.startswith(path + "/")]


def loops_of(path):
    """Loop devices whose backing file is under `path`."""
    path = os.path.realpath(str(path))
    return [(dev, back) for dev, back in loop_backing_files() if back.startswith(path + "/")]


def held_bytes(h):
    """The disk blocks the files under the session's folders hold, each
    inode once: a workspace's image counts what it holds (it is sparse), the
    file system mounted on it is not walked (it is inside the image)."""
    roots = [str(h.state)] + ([kube_state_dir()] if h.mode == "pod" else [])
    seen, total = set(), 0
    for root in roots:
        top = os.lstat(root).st_dev
        for d, dirs, files in os.walk(root):
            keep = []
            for name in dirs:
                try:
                    if os.lstat(os.path.join(d, name)).st_dev == top:
                        keep.append(name)
                except OSError:
                    pass  # gone meanwhile
            dirs[:] = keep
            for name in files:
                try:
                    st = os.lstat(os.path.join(d, name))
                except OSError:
                    continue
                if st.st_dev == top and (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_blocks * 512
    return total


def delete_conversation(h, conversation, timeout=120):
    did = h.session.new_id("d")
    h.session.send({"type": "delete_conversation", "conversation": conversation, "id": did})
    m = h.session.wait_for(lambda m: m.get("id") == did, timeout, f"the deletion of {conversation}")
    assert m["type"] == "conversation_deleted", m
    return m


def settled_held(h, want, timeout=30):
    """What the session's folders hold back to `want` (plus the noise):
    freed as the sandboxes that held the files let go of them."""
    end = time.monotonic() + timeout
    while True:
        now = held_bytes(h)
        if now <= want + NOISE:
            return now
        if time.monotonic() > end:
            raise AssertionError(f"the disk was not given back: the test's folders hold {now >> 20} MiB, "
                                 f"{want >> 20} MiB before")
        time.sleep(0.2)


WRITE = """
const fs = require('node:fs');
const b = Buffer.alloc(1 << 20, 7);
const fd = fs.openSync(%(name)s, 'w');
let mib = 0, code = null;
try { for (; mib < %(mib)d; mib++) fs.writeSync(fd, b); } catch (e) { code = e.code; }
fs.closeSync(fd);
return { mib, code };
"""


def after(h, conversation):
    """The next execution, in this conversation and in another, succeeds."""
    assert assert_ok(h.run("return 'again';", conversation=conversation, policy=POLICY,
                           timeout=180))["result"] == "again"
    h.next_works()


def test_a_10_gib_write_stops_at_the_bound(hs):
    """Locally: ENOSPC at the bound (at least maxWorkspaceBytes fits), the
    host holding no more than the image; in a pod: the execution is ended
    with the reason, well inside the pod's own limit."""
    need_bound(hs)
    state = hs.state
    before = held_bytes(hs)
    js = WRITE % {"name": json.dumps("big"), "mib": 10240}
    res = hs.run(js, conversation="disk-fill", policy=POLICY, timeout=600)
    if hs.mode == "pod":
        err = assert_failed(res, "PROCESS_EXITED")
        assert "past its bound of %d" % BOUND in err["message"], err
        assert "maxWorkspaceBytes" in err["message"], err
    else:
        r = assert_ok(res)["result"]
        assert r["code"] == "ENOSPC", r
        assert BOUND // MIB <= r["mib"] <= BOUND // MIB * 11 // 10, r
        used = held_bytes(hs) - before
        assert used <= BOUND * 12 // 10 + NOISE, f"the host lost {used >> 20} MiB"
        img = state / "workspaces" / (ws_hash("disk-fill") + ".img")
        assert img.stat().st_blocks * 512 <= img.stat().st_size
    after(hs, "disk-fill")
    if hs.mode == "pod":
        # a program may still clean up a workspace that is over: it was ended
        # for passing the bound, not for being past it
        assert_ok(hs.run("require('fs').unlinkSync('big'); return 1;", conversation="disk-fill",
                         policy=POLICY, timeout=180))
    else:
        # deleting the conversation takes its image
        delete_conversation(hs, "disk-fill")
        assert not mounts_under(state / "workspaces" / ws_hash("disk-fill"))
    settled_held(hs, before)


@pytest.mark.skipif(BACKEND != "kubernetes", reason="the pod's own limits")
def test_in_a_pod_the_bound_comes_before_the_kubelets_eviction(tmp_path):
    """A pod whose workspace may hold 1 GiB (emptyDir sizeLimit, and
    ephemeral-storage): an execution asking for 10 GiB is held to the pod's
    limit less a margin, and ended there, so the kubelet (the fake evicts at
    the limit, looking every 0.6 s) never evicts the pod: the file written
    before is still there for the next execution, in the same pod."""
    import yaml
    tmpl = yaml.safe_load((REPO / "charts" / "codepod" / "files" / "sandbox-pod.yaml").read_text())
    (c,) = [c for c in tmpl["spec"]["containers"] if c["name"] == "node"]
    c["resources"]["limits"]["ephemeral-storage"] = "1Gi"
    for v in tmpl["spec"]["volumes"]:
        if v["name"] == "workspace":
            v["emptyDir"]["sizeLimit"] = "1Gi"
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(tmpl))
    import hostile
    was, hostile.POD_TEMPLATE = hostile.POD_TEMPLATE, path
    try:
        h = Hostile("pod", args=["--prestart", "0"])
    finally:
        hostile.POD_TEMPLATE = was
    try:
        pol = {"maxWorkspaceBytes": 10 << 30, "timeoutMs": 180000}
        assert_ok(h.run("require('fs').writeFileSync('keep', 'kept'); return 1;",
                        conversation="disk-evict", policy=pol))
        js = WRITE % {"name": json.dumps("big"), "mib": 10240}
        err = assert_failed(h.run(js, conversation="disk-evict", policy=pol, timeout=600),
                            "PROCESS_EXITED")
        assert "past its bound of %d" % (512 * MIB) in err["message"], err
        time.sleep(2)  # the fake's eviction looks every 0.6 s
        r = assert_ok(h.run("return require('fs').readFileSync('keep', 'utf8');",
                            conversation="disk-evict", policy=pol))
        assert r["result"] == "kept", r
        h.next_works()
    finally:
        h.close()


SPARSE = """
const fs = require('node:fs');
const out = {};
const fd = fs.openSync('sparse', 'w');
try { fs.ftruncateSync(fd, 2 ** 40); out.truncate = 'made'; } catch (e) { out.truncate = e.code; }
try { fs.writeSync(fd, 'x', 2 ** 40); out.write = 'made'; } catch (e) { out.write = e.code; }
fs.closeSync(fd);
out.size = fs.statSync('sparse').size;
return out;
"""


def test_a_1_tib_sparse_file(hs):
    """A 1 TiB sparse file (ftruncate, and a byte written at 1 TiB) holds
    one block: the workspace, and the host's disk, hold that, and the
    execution is not ended for it (locally the image holds it; in a pod the
    supervisor, like the kubelet, counts blocks). Filling it is the 10 GiB
    case."""
    need_bound(hs)
    before = held_bytes(hs)
    r = assert_ok(hs.run(SPARSE, conversation="disk-sparse", policy=POLICY, timeout=180))["result"]
    assert r == {"truncate": "made", "write": "made", "size": 2 ** 40 + 1}, r
    if hs.mode != "pod":
        img = hs.state / "workspaces" / (ws_hash("disk-sparse") + ".img")
        assert img.stat().st_blocks * 512 < 64 * MIB
    assert held_bytes(hs) - before <= NOISE
    after(hs, "disk-sparse")


MANY = """
const fs = require('node:fs');
fs.mkdirSync('many', { recursive: true });
let n = 0, code = null;
try { for (; n < 200000; n++) fs.writeFileSync('many/' + n, ''); } catch (e) { code = e.code; }
return { n, code };
"""


def test_200k_files_stop_at_the_file_bound(hs):
    """maxWorkspaceFiles (default 100000): locally the image's inodes, ENOSPC
    past them; in a pod the execution is ended."""
    need_bound(hs)
    pol = dict(POLICY, maxWorkspaceFiles=20000)
    res = hs.run(MANY, conversation="disk-many", policy=pol, timeout=600)
    if hs.mode == "pod":
        err = assert_failed(res, "PROCESS_EXITED")
        assert "past its bound of 20000 (maxWorkspaceFiles)" in err["message"], err
    else:
        r = assert_ok(res)["result"]
        assert r["code"] == "ENOSPC", r
        # the filesystem rounds the inodes up to fill its tables
        assert 20000 - 16 <= r["n"] <= 20000 * 11 // 10, r
    after(hs, "disk-many")


def _http_server(h, bound):
    from wssession import Server  # noqa: E402 (tests/serve)
    args = ["--prestart", "0", "--policy-defaults", json.dumps({"maxWorkspaceBytes": bound})]
    if h.mode == "pod":
        args += ["--pod-template", str(REPO / "charts" / "codepod" / "files" / "sandbox-pod.yaml")]
    return Server(h.dir / "http-state", args=args)


def _put(srv, conversation, path, body):
    """(status, headers, body) of a PUT whose answer may come before its body
    went (a refusal): codepod then stops reading, and the answer is read all
    the same."""
    import socket
    from wsclient import read_http_response  # noqa: E402 (tests/serve)
    sock = socket.create_connection((srv.host, srv.port), timeout=300)
    try:
        sock.sendall((f"PUT /v1/conversations/{conversation}/files/{path} HTTP/1.1\r\n"
                      f"Host: {srv.host}:{srv.port}\r\nConnection: close\r\n"
                      f"Authorization: Bearer {srv.token}\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n").encode())
        try:
            for off in range(0, len(body), 1 << 20):
                sock.sendall(body[off:off + (1 << 20)])
        except OSError:
            pass  # answered early: it stopped reading
        status, hdrs, data, _ = read_http_response(sock)
        return status, hdrs, data
    finally:
        sock.close()


def _get(srv, conversation, path):
    from wsclient import http_request  # noqa: E402 (tests/serve)
    return http_request(srv.host, srv.port, "GET", f"/v1/conversations/{conversation}/files/{path}",
                        token=srv.token, timeout=300)


def test_an_upload_past_the_bound_leaves_the_old_file(hs):
    """PUT /v1/conversations/{key}/files/{path} past maxWorkspaceBytes: 413
    TOO_LARGE saying the workspace is full, the old file as it was (its
    etag), no temporary left, and the next upload that fits works."""
    need_bound(hs)
    if hs.mode == "unprivileged":
        pytest.skip("no disk bound unprivileged")
    bound = 64 * MIB
    srv = _http_server(hs, bound)
    conv = "disk-upload-" + uuid.uuid4().hex[:8]
    try:
        old = os.urandom(24 * MIB)
        st, _, body = _put(srv, conv, "keep.bin", old)
        assert st == 201, body
        etag = json.loads(body)["etag"]
        for what, data in (("replaced", os.urandom(48 * MIB)), ("new", os.urandom(80 * MIB))):
            name = "keep.bin" if what == "replaced" else "new.bin"
            st, _, body = _put(srv, conv, name, data)
            assert st == 413, (what, st, body[:300])
            err = json.loads(body)["error"]
            assert err["code"] == "TOO_LARGE" and "workspace is full" in err["message"], err
        st, hdrs, got = _get(srv, conv, "keep.bin")
        assert st == 200 and got == old
        assert etag in json.dumps(hdrs)
        st, _, got = _get(srv, conv, "new.bin")
        assert st == 404
        # nothing half-written stays behind: the next upload that fits fits
        st, _, body = _put(srv, conv, "small.bin", os.urandom(8 * MIB))
        assert st == 201, body
    finally:
        rc = srv.stop()
    assert rc == 0, srv.stderr_text()[-2000:]


@local_only
def test_nothing_is_mounted_after_delete_and_after_codepod_exits(hs):
    """The workspace's mount and loop device go with DELETE; at exit every
    workspace of codepod's is unmounted, the workspaces' own mount too, and
    no loop device is left on an image of its."""
    need_bound(hs)
    ws_root = hs.state / "workspaces"
    for c in ("disk-m1", "disk-m2"):
        assert_ok(hs.run("require('fs').writeFileSync('f', 'x'); return 1;", conversation=c))
    assert len([p for p in mounts_under(ws_root) if p != str(ws_root.resolve())]) == 2
    delete_conversation(hs, "disk-m1")
    mine = ws_root / ws_hash("disk-m1")
    assert not mounts_under(mine)
    end = time.monotonic() + 10
    while [b for _, b in loops_of(ws_root) if ws_hash("disk-m1") in b] and time.monotonic() < end:
        time.sleep(0.1)
    assert not [b for _, b in loops_of(ws_root) if ws_hash("disk-m1") in b]
    assert not (ws_root / (ws_hash("disk-m1") + ".img")).exists()
    # another conversation is untouched by it
    assert (ws_root / ws_hash("disk-m2") / "f").read_text() == "x"
    assert hs.close() == 0
    assert not mounts_under(ws_root), mounts_under(ws_root)
    end = time.monotonic() + 10  # (a sandbox being set up may hold one a moment)
    while loops_of(ws_root) and time.monotonic() < end:
        time.sleep(0.1)
    assert not loops_of(ws_root), loops_of(ws_root)


@local_only
def test_an_unused_workspace_is_unmounted_and_comes_back():
    """--workspace-idle-s: a workspace nothing used for that long is
    unmounted (its loop device detached), and its next use mounts it again
    with its files."""
    if not IS_ROOT:
        pytest.skip("the disk bound needs root")
    h = Hostile("root", args=["--prestart", "0", "--workspace-idle-s", "2"])
    try:
        need_bound(h)
        ws = h.state / "workspaces" / ws_hash("disk-idle")
        assert_ok(h.run("require('fs').writeFileSync('f', 'kept'); return 1;", conversation="disk-idle"))
        assert mounts_under(ws)
        end = time.monotonic() + 30
        while mounts_under(ws) and time.monotonic() < end:
            time.sleep(0.2)
        assert not mounts_under(ws), "still mounted after 30 s unused"
        # its loop device detaches once nothing holds the filesystem (a
        # sandbox being set up meanwhile holds a copy of the host's mounts
        # for a moment)
        while [b for _, b in loops_of(h.state) if ws_hash("disk-idle") in b] and time.monotonic() < end:
            time.sleep(0.2)
        assert not [b for _, b in loops_of(h.state) if ws_hash("disk-idle") in b]
        r = assert_ok(h.run("return require('fs').readFileSync('f', 'utf8');", conversation="disk-idle"))
        assert r["result"] == "kept" and mounts_under(ws), r
    finally:
        h.close()


@local_only
def test_a_dead_codepods_mounts_are_swept_at_the_next_start():
    """codepod killed (SIGKILL) leaves its workspaces mounted, and its
    workspaces' folder bound on itself; the next codepod (of any state
    folder) unmounts those of codepods that are gone."""
    if not IS_ROOT:
        pytest.skip("the disk bound needs root")
    h = Hostile("root", args=["--prestart", "0"])
    state = h.state
    h2 = None
    try:
        need_bound(h)
        assert_ok(h.run("require('fs').writeFileSync('f', 'kept'); return 1;", conversation="disk-dead"))
        assert mounts_under(state / "workspaces" / ws_hash("disk-dead"))
        h.session.proc.kill()
        h.session.proc.wait(30)
        assert mounts_under(state / "workspaces" / ws_hash("disk-dead"))
        h2 = Hostile("root", args=["--prestart", "0"])
        need_bound(h2)
        assert not mounts_under(state / "workspaces"), mounts_under(state / "workspaces")
        swept = [json.loads(raw) for raw in h2.session.stderr_lines
                 if b'"local.workspace_swept"' in raw]
        # Any codepod that starts sweeps: where other suites run on the
        # same host (tests/loaded/run.sh says so) one of theirs may come
        # first, and this one finds nothing left (gone, as checked above).
        if not os.environ.get("CODEPOD_TEST_HOST_SHARED"):
            assert any(s["mountPoint"].endswith(ws_hash("disk-dead")) for s in swept), swept
            assert any(s["mountPoint"] == str((state / "workspaces").resolve()) for s in swept), swept
        h2.next_works()
    finally:
        if h2:
            h2.close()
        h.close()


def _plant(ws, uid, outside):
    """A workspace as an older codepod left it: a folder of `uid`'s with a
    nested file, a hard-linked pair, a symlink to a host file, and one to
    `outside`, a host file of that same user's (what a program of that
    user could have planted a link to)."""
    (ws / "sub" / "deeper").mkdir(parents=True)
    (ws / "sub" / "deeper" / "f").write_text("data")
    (ws / "a").write_text("linked")
    os.link(ws / "a", ws / "b")
    os.symlink("/etc/passwd", ws / "link")
    outside.write_text("not the workspace's")
    os.chown(outside, uid, uid)
    os.symlink(str(outside), ws / "sub" / "out")
    for root, dirs, files in os.walk(ws):
        for n in dirs + files:
            os.lchown(os.path.join(root, n), uid, uid)
    os.lchown(ws, uid, uid)


@local_only
@pytest.mark.skipif(not IS_ROOT, reason="sandbox users need root")
def test_a_shared_users_workspace_moves_to_its_own_user_and_into_an_image():
    """A workspace made under --sandbox-user (one user for all), used under
    --sandbox-uids (a user per conversation): on its first use every entry
    goes to the conversation's own user (links themselves, never what they
    point at), and the folder moves into an image of its own, files and all."""
    shared = 65534
    passwd = os.stat("/etc/passwd")
    h = Hostile("root", args=["--prestart", "0"])
    try:
        need_bound(h)
        # the conversation's folder as a codepod with --sandbox-user left it
        ws = h.state / "workspaces" / ws_hash("disk-old")
        ws.mkdir(parents=True)
        outside = h.host / "shared-users-file"
        _plant(ws, shared, outside)
        r = assert_ok(h.run("""const cp = require('node:child_process');
return { me: process.getuid(),
         ls: String(cp.execSync('ls -lanR --time-style=+ /workspace')),
         read: require('fs').readFileSync('sub/deeper/f', 'utf8'),
         linked: require('fs').statSync('b').nlink,
         df: String(cp.execSync('df -P /workspace | tail -1')) };""", conversation="disk-old"))["result"]
        me = r["me"]
        assert me != shared and me >= 1879048192, r
        owners = {int(m.group(1)) for m in re.finditer(r"^\S+\s+\d+\s+(\d+)\s+\d+", r["ls"], re.M)}
        assert owners <= {me, 0}, r["ls"]  # 0: the folder above /workspace
        assert r["read"] == "data" and r["linked"] == 2, r
        assert "/workspace" in r["df"] and "loop" in r["df"], r
        # the links were not followed: what they point at keeps its owner
        now = os.stat("/etc/passwd")
        assert (now.st_uid, now.st_gid, now.st_mode) == (passwd.st_uid, passwd.st_gid, passwd.st_mode)
        assert os.stat(outside).st_uid == shared
        assert os.lstat(ws).st_uid == me
        moved = [json.loads(raw) for raw in h.session.stderr_lines if b'"local.workspace_moved"' in raw]
        assert moved and moved[0]["from"] == shared and moved[0]["to"] == me, moved
        assert any(b'"local.workspace_bounded"' in raw and b'"folder"' in raw
                   for raw in h.session.stderr_lines)
        h.next_works()
    finally:
        h.close()
    assert os.stat("/etc/passwd").st_uid == passwd.st_uid


@pytest.mark.skipif(BACKEND != "local" or not IS_ROOT, reason="needs root to be unprivileged")
def test_unprivileged_without_the_disk_bound_refuses_unless_told():
    """Unprivileged codepod cannot mount an image: it says so and does not
    start; --no-disk-bound starts it, warning (the suite passes it)."""
    h = Hostile("unprivileged")
    try:
        assert disk_bound(h) is False
        assert_ok(h.run("return 1;"))
    finally:
        h.close()
    top = new_folder()
    try:
        state = top / "state"
        state.mkdir()
        os.chown(state, UNPRIV_UID, UNPRIV_UID)
        r = subprocess.run([*_setpriv(UNPRIV_UID), CODEPOD_BIN, "serve", "--stdio",
                            "--state-dir", str(state), "--no-memory-bound"], input=b"",
                           capture_output=True, timeout=120, cwd=str(top),
                           env=dict(os.environ, HOME=str(state)))
    finally:
        shutil.rmtree(top, ignore_errors=True)
    err = r.stderr.decode(errors="replace")
    assert r.returncode != 0, err
    assert "no image can bound the workspaces' disk" in err, err
    assert "--no-disk-bound" in err, err
