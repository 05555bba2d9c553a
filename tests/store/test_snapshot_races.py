"""Snapshots when things go wrong at the worst moment: codepod killed in the
middle of an upload leaves the previous snapshot readable; two codepods
snapshotting one conversation leave one of their workspaces, whole, never
a mix of the two."""
import os
import signal
import tempfile

import snaphelp


def restored_tree(store, prefix, conversation):
    d = tempfile.mkdtemp(prefix="snap-")
    s = snaphelp.session(store, d, prefix)
    try:
        r = s.run("return 1", conversation=conversation, timeout=300)
        assert r["status"] == "succeeded", r
    finally:
        s.close(timeout=300)
    return snaphelp.tree(snaphelp.workspace_of(d, conversation))


def test_a_crash_mid_upload_leaves_the_previous_snapshot(store):
    prefix = snaphelp.new_prefix()
    d = tempfile.mkdtemp(prefix="snap-")
    s = snaphelp.session(store, d, prefix)
    try:
        s.run("require('fs').writeFileSync('v', 'one'); return 1", conversation="c-crash")
        snaphelp.wait_event(s, "snapshot.done")
        first = snaphelp.tree(snaphelp.workspace_of(d, "c-crash"))
        s.run("""
            const fs = require('fs'), crypto = require('crypto');
            fs.writeFileSync('v', 'two');
            const f = fs.openSync('big', 'w');
            for (let i = 0; i < 150; i++) fs.writeSync(f, crypto.randomBytes(1 << 20));
            fs.closeSync(f);
            return 1""", conversation="c-crash", timeout=300)
        snaphelp.wait_event(s, "snapshot.upload", timeout=300)
        os.kill(s.proc.pid, signal.SIGKILL)  # mid-upload: 150 MiB take a while
    finally:
        s.close(timeout=60)
    assert snaphelp.count_events(s, "snapshot.done") == 1
    assert restored_tree(store, prefix, "c-crash") == first


def test_two_codepods_snapshotting_one_conversation(store):
    prefix = snaphelp.new_prefix()
    trees = []
    sessions = []
    dirs = [tempfile.mkdtemp(prefix="snap-") for _ in range(2)]
    try:
        for i, d in enumerate(dirs):
            s = snaphelp.session(store, d, prefix)
            sessions.append(s)
            # Both start empty (no snapshot yet) and write their own files.
            r = s.run("""
                const fs = require('fs');
                for (let j = 0; j < 200; j++) fs.writeFileSync('f' + j, 'REPLICA'.repeat(j + 1));
                fs.writeFileSync('who', 'REPLICA');
                return 1""".replace("REPLICA", "replica%d" % i), conversation="c-two")
            assert r["status"] == "succeeded", r
        for s in sessions:
            snaphelp.wait_event(s, "snapshot.done")
    finally:
        for s in sessions:
            s.close()
    for d in dirs:
        trees.append(snaphelp.tree(snaphelp.workspace_of(d, "c-two")))
    got = restored_tree(store, prefix, "c-two")
    assert got in trees  # one of the two, whole


def test_a_crash_mid_restore_restores_whole_at_the_next_start(store):
    """codepod killed while it unpacks a snapshot into the workspace: the
    workspace's restore mark stays, and the next codepod on that state
    folder empties it and restores it whole (never a half workspace
    taken for the conversation's files, never snapshotted)."""
    prefix = snaphelp.new_prefix()
    d = tempfile.mkdtemp(prefix="snap-")
    s = snaphelp.session(store, d, prefix)
    try:
        s.run("""
            const fs = require('fs'), crypto = require('crypto');
            for (let i = 0; i < 150; i++) fs.writeFileSync('f' + i, crypto.randomBytes(1 << 20));
            return 1""", conversation="c-mid", timeout=300)
        snaphelp.wait_event(s, "snapshot.done", timeout=300)
        first = snaphelp.tree(snaphelp.workspace_of(d, "c-mid"))
    finally:
        s.close(timeout=300)
    d2 = tempfile.mkdtemp(prefix="snap-")
    ws = snaphelp.workspace_of(d2, "c-mid")
    s = snaphelp.session(store, d2, prefix)
    try:
        s.execute("return 1", conversation="c-mid")
        # the first files written (the workspace mounted, if an image):
        # the restore is under way
        snaphelp.wait_until(lambda: ws.is_dir() and len(os.listdir(ws)) > 2, timeout=300)
        os.kill(s.proc.pid, signal.SIGKILL)
    finally:
        s.close(timeout=60)
    assert snaphelp.restore_mark(d2, "c-mid").exists()  # killed before its end
    s = snaphelp.session(store, d2, prefix)
    try:
        r = s.run("return require('fs').readdirSync('.').length", conversation="c-mid",
                  timeout=300)
        assert r["result"] == 150, r
        assert r["usage"]["restoreMs"] >= 0, r
    finally:
        s.close(timeout=300)
    assert not snaphelp.restore_mark(d2, "c-mid").exists()
    assert snaphelp.tree(ws) == first
    assert snaphelp.count_events(s, "snapshot.done") == 0  # nothing changed since
