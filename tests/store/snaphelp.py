"""Helpers of the snapshot tests: a codepod serve --stdio session (the e2e
harness) with snapshots on against the test store, waiting for codepod's
own log events, and a workspace's contents as a comparable tree."""
import hashlib
import json
import os
import stat
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "e2e"))
import harness  # noqa: E402


def session(store, state_dir, prefix, extra=(), env=None, endpoint=None, secret=None):
    e = dict(os.environ)
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        e.pop(k, None)
    e.update(store.env())
    if secret:
        e["AWS_SECRET_ACCESS_KEY"] = secret
    e.update(env or {})
    args = ["--snapshot-url", "s3://%s/%s" % (store.bucket, prefix),
            "--s3-endpoint", endpoint or store.endpoint, "--s3-region", store.region,
            "--log-level", "debug", *extra]
    return harness.Session(state_dir, args=args, env=e)


def new_prefix():
    return "t" + uuid.uuid4().hex[:10]


def conv_hash(conversation):
    return hashlib.sha256(conversation.encode()).hexdigest()[:32]


def workspace_of(state_dir, conversation):
    return Path(state_dir) / "workspaces" / conv_hash(conversation)


def restore_mark(state_dir, conversation):
    """The file that says a workspace waits for its restore."""
    ws = workspace_of(state_dir, conversation)
    return ws.with_name(ws.name + ".restoring")


def assert_restore_pending(state_dir, conversation):
    """A restore that failed left nothing in the workspace, and its mark,
    so the next execution tries again."""
    ws = workspace_of(state_dir, conversation)
    assert not ws.exists() or not any(ws.iterdir()), list(ws.iterdir())
    assert restore_mark(state_dir, conversation).exists()


def wait_until(pred, timeout=120):
    """Polls @pred until it holds; the deadline only catches a hang."""
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "still not so after %d s" % timeout
        time.sleep(0.005)


def wait_event(sess, event, pred=lambda m: True, timeout=120, after=0):
    """The first log line of @event (past the first @after of them) that
    @pred accepts; waits for it (the deadline only catches a hang)."""
    deadline = time.monotonic() + timeout
    while True:
        evs = [m for m in sess.log_events(event)[after:] if pred(m)]
        if evs:
            return evs[0]
        if time.monotonic() > deadline:
            raise AssertionError("no %s log line within %ds; %s" % (event, timeout,
                                                                   sess._context()))
        time.sleep(0.1)


def count_events(sess, event, conversation=None):
    return len([m for m in sess.log_events(event)
                if conversation is None or m.get("conversation") == conv_hash(conversation)])


def tree(root):
    """{relative path: what it is} of a folder: kind, mode, size, content
    hash and mtime of files; mode of folders; target of links. A workspace
    kept in an image of its own (as root: runner/local/workspace.h) and not
    mounted now (its codepod ended) is read from the image, mounted
    read-only for the walk."""
    root = str(root)
    img = root + ".img"
    if os.path.exists(img) and not os.path.ismount(root):
        import subprocess
        import tempfile
        # Unmounted here is not yet let go of: a sandbox's mount namespace
        # may hold the file system a moment longer (its journal not yet
        # clean, which a read-only mount cannot replay). Its loop device
        # detaches itself once it is (LO_FLAGS_AUTOCLEAR): wait for that.
        end = time.monotonic() + 60
        while _loops_holding(img):
            assert time.monotonic() < end, "the ended workspace's image is still held: %s" % img
            time.sleep(0.1)
        mnt = tempfile.mkdtemp(prefix="snap-img-")
        # A loop device of its own: `mount -o loop` would reuse the one the
        # ended codepod named (codepod-NS-PID) while it is still attached,
        # and any codepod starting meanwhile sweeps a mount of a dead
        # codepod's device (runner/local/workspace.h), this one too.
        dev = subprocess.run(["losetup", "--find", "--show", "--read-only", img],
                             capture_output=True, text=True, check=True).stdout.strip()
        try:
            subprocess.run(["mount", "-t", "ext4", "-o", "ro", dev, mnt], check=True)
            try:
                return _tree(mnt)
            finally:
                subprocess.run(["umount", mnt], check=True)
        finally:
            subprocess.run(["losetup", "--detach", dev], check=True)
            os.rmdir(mnt)
    return _tree(root)


def _loops_holding(img):
    """The loop devices whose backing file is @img."""
    img = os.path.realpath(img)
    return [dev for dev, back in harness.loop_backing_files() if back == img]


def _tree(root):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", mode)
            else:
                h = hashlib.sha256()
                with open(p, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
                out[rel] = ("file", mode, st.st_size, h.hexdigest(), st.st_mtime_ns)
    return out


def manifest(store, prefix, conversation):
    st, body = store.request("GET", "/%s/%s/%s/manifest.json" % (
        store.bucket, prefix, conv_hash(conversation)))
    return json.loads(body) if st == 200 else None
