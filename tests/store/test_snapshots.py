"""Snapshots of a conversation's workspace (--snapshot-url) on the local
backend, against a real S3 store: a workspace written by one codepod comes
back byte for byte in another one's empty state folder (another machine);
an unchanged workspace is not uploaded again; a store that is down never
holds up an execution, and a later snapshot succeeds; a restore that cannot
be done, or an archive that does not match its manifest, is
SANDBOX_UNAVAILABLE naming why, never an empty workspace."""
import json
import os
import tempfile

import snaphelp

WRITE_MANY = r"""
const fs = require('fs');
const crypto = require('crypto');
fs.mkdirSync('deep/a/b/c', {recursive: true});
fs.mkdirSync('empty/inner', {recursive: true});
for (let i = 0; i < 300; i++) {
  const d = 'many/' + (i % 10);
  fs.mkdirSync(d, {recursive: true});
  fs.writeFileSync(d + '/f' + i + '.txt', 'file ' + i + '\n'.repeat(i));
}
fs.writeFileSync('empty.txt', '');
fs.writeFileSync('run.sh', '#!/bin/sh\necho hi\n'); fs.chmodSync('run.sh', 0o750);
fs.writeFileSync('secret', 'x'); fs.chmodSync('secret', 0o600);
fs.mkdirSync('ro'); fs.writeFileSync('ro/kept', 'k'); fs.chmodSync('ro', 0o555);
fs.symlinkSync('deep/a/b', 'to-b');
fs.symlinkSync('../../run.sh', 'deep/a/up-link');
fs.symlinkSync('missing-target', 'dangling');
fs.utimesSync('secret', new Date(1000000000000), new Date(1000000000000));
const big = fs.openSync('big.bin', 'w');
for (let i = 0; i < BIG_MIB; i++) fs.writeSync(big, crypto.randomBytes(1 << 20));
fs.closeSync(big);
return fs.readdirSync('.').length;
"""


def test_a_workspace_comes_back_byte_for_byte_elsewhere(store):
    d = tempfile.mkdtemp(prefix="snap-")
    prefix = snaphelp.new_prefix()
    a = snaphelp.session(store, d + "/a", prefix)
    try:
        r = a.run(WRITE_MANY.replace("BIG_MIB", "200"), conversation="c-many", timeout=300)
        assert r["status"] == "succeeded", r
        # No snapshot of it yet: the first execution started empty, no restore.
        assert "restoreMs" not in r["usage"]
    finally:
        assert a.close(timeout=600) == 0  # drain: the snapshot is taken before the end
    assert snaphelp.count_events(a, "snapshot.done", "c-many") == 1
    before = snaphelp.tree(snaphelp.workspace_of(d + "/a", "c-many"))
    assert len(before) > 300
    m = snaphelp.manifest(store, prefix, "c-many")
    assert m["files"] == len(before)
    assert m["bytes"] >= 200 << 20
    # Never the raw conversation key in the store.
    st, body = store.request("GET", "/" + store.bucket, query="list-type=2&prefix=" + prefix)
    assert b"c-many" not in body

    b = snaphelp.session(store, d + "/b", prefix)
    try:
        r = b.run("return require('fs').readFileSync('many/3/f3.txt', 'utf8')",
                  conversation="c-many", timeout=300)
        assert r["status"] == "succeeded", r
        assert r["result"] == "file 3" + "\n" * 3
        assert r["usage"]["restoreMs"] >= 0
        r2 = b.run("return 2", conversation="c-many")
        assert "restoreMs" not in r2["usage"]
    finally:
        assert b.close(timeout=600) == 0
    after = snaphelp.tree(snaphelp.workspace_of(d + "/b", "c-many"))
    assert after == before
    # Unchanged since its restore: nothing uploaded at the drain.
    assert snaphelp.count_events(b, "snapshot.done") == 0


def test_an_unchanged_workspace_is_not_uploaded_again(store):
    d = tempfile.mkdtemp(prefix="snap-")
    prefix = snaphelp.new_prefix()
    s = snaphelp.session(store, d, prefix)
    try:
        s.run("require('fs').writeFileSync('a', 'one'); return 1", conversation="c-same")
        snaphelp.wait_event(s, "snapshot.done")
        first = snaphelp.manifest(store, prefix, "c-same")
        s.run("return require('fs').readFileSync('a', 'utf8')", conversation="c-same")
        snaphelp.wait_event(s, "snapshot.unchanged")
        assert snaphelp.manifest(store, prefix, "c-same") == first
        s.run("require('fs').writeFileSync('a', 'two'); return 1", conversation="c-same")
        snaphelp.wait_event(s, "snapshot.done", after=1)
        second = snaphelp.manifest(store, prefix, "c-same")
        assert second["archive"] != first["archive"]
        # The archive the old manifest named is gone, the new one is there.
        st, _ = store.request("HEAD", "/%s/%s" % (store.bucket, first["archive"]))
        assert st == 404
    finally:
        s.close()


def test_the_store_down_during_a_snapshot(store):
    d = tempfile.mkdtemp(prefix="snap-")
    prefix = snaphelp.new_prefix()
    s = snaphelp.session(store, d, prefix)
    try:
        # The workspace exists (its restore found no snapshot), then the store goes.
        assert s.run("return 0", conversation="c-down")["status"] == "succeeded"
        store.stop_gateway()
        try:
            r = s.run("require('fs').writeFileSync('f', 'data'); return 7", conversation="c-down")
            assert r["status"] == "succeeded" and r["result"] == 7
            failed = snaphelp.wait_event(s, "snapshot.failed")
            assert failed["level"] == "warn"
            assert failed["conversation"] == snaphelp.conv_hash("c-down")
            assert "unreachable" in failed["reason"]
            # Executions go on meanwhile.
            assert s.run("return 8", conversation="c-down")["result"] == 8
        finally:
            store.start_gateway()
        # Retried: a later snapshot succeeds.
        snaphelp.wait_event(s, "snapshot.done")
        assert snaphelp.manifest(store, prefix, "c-down") is not None
    finally:
        s.close()
    assert "c-down" not in "".join(l.decode(errors="replace") for l in s.stderr_lines)


def _snapshot_of(store, prefix, conversation, js):
    d = tempfile.mkdtemp(prefix="snap-")
    s = snaphelp.session(store, d, prefix)
    try:
        assert s.run(js, conversation=conversation)["status"] == "succeeded"
    finally:
        s.close()
    return snaphelp.manifest(store, prefix, conversation)


def _restore_error(store, prefix, conversation, d=None, **kw):
    d = d or tempfile.mkdtemp(prefix="snap-")
    s = snaphelp.session(store, d, prefix, **kw)
    try:
        r = s.run("return 1", conversation=conversation)
        assert r["status"] == "failed", r
        assert r["error"]["code"] == "SANDBOX_UNAVAILABLE", r
        # Never a silently empty workspace: nothing in it (still mounted, if
        # an image), and its restore still to come.
        snaphelp.assert_restore_pending(d, conversation)
    finally:
        s.close()
    return r["error"]["message"]


def test_a_failed_restore_is_tried_again_by_the_next_execution(store):
    prefix = snaphelp.new_prefix()
    assert _snapshot_of(store, prefix, "c-again",
                        "require('fs').writeFileSync('f','x'); return 1")
    d = tempfile.mkdtemp(prefix="snap-")
    store.stop_gateway()
    try:
        assert "unreachable" in _restore_error(store, prefix, "c-again", d=d)
    finally:
        store.start_gateway()
    s = snaphelp.session(store, d, prefix)
    try:
        r = s.run("return require('fs').readFileSync('f', 'utf8')", conversation="c-again")
        assert r["result"] == "x", r
        assert r["usage"]["restoreMs"] >= 0, r
    finally:
        s.close()
    assert not snaphelp.restore_mark(d, "c-again").exists()


def test_the_store_down_or_refusing_during_a_restore(store):
    prefix = snaphelp.new_prefix()
    assert _snapshot_of(store, prefix, "c-r", "require('fs').writeFileSync('f','x'); return 1")
    msg = _restore_error(store, prefix, "c-r", secret="0" * len(store.secret_key))
    assert "refused" in msg and "SignatureDoesNotMatch" in msg
    store.stop_gateway()
    try:
        msg = _restore_error(store, prefix, "c-r")
        assert "unreachable" in msg
    finally:
        store.start_gateway()


def test_a_corrupted_or_truncated_archive_is_refused(store):
    prefix = snaphelp.new_prefix()
    m = _snapshot_of(store, prefix, "c-bad",
                     "require('fs').writeFileSync('f', 'y'.repeat(100000)); return 1")
    path = "/%s/%s" % (store.bucket, m["archive"])
    st, body = store.request("GET", path)
    assert st == 200 and len(body) == m["size"]
    flipped = bytearray(body)
    flipped[len(flipped) // 2] ^= 0xFF
    assert store.request("PUT", path, body=bytes(flipped))[0] == 200
    assert "SHA-256" in _restore_error(store, prefix, "c-bad")
    assert store.request("PUT", path, body=body[: len(body) // 2])[0] == 200
    assert "bytes" in _restore_error(store, prefix, "c-bad")
    assert store.request("DELETE", path)[0] == 204
    assert "missing" in _restore_error(store, prefix, "c-bad")


def test_a_snapshot_larger_than_the_workspace_bounds_is_restored_whole(store):
    """A snapshot taken under larger bounds (another machine, a policy
    since made smaller) restored where maxWorkspaceBytes is smaller: as
    root the workspace (an image) is made as large as the files need, never
    a restore cut short."""
    prefix = snaphelp.new_prefix()
    assert _snapshot_of(store, prefix, "c-big", """
        const fs = require('fs'), crypto = require('crypto');
        for (let i = 0; i < 40; i++) fs.writeFileSync('f' + i, crypto.randomBytes(1 << 20));
        return 1""")
    d = tempfile.mkdtemp(prefix="snap-")
    small = json.dumps({"maxWorkspaceBytes": 16 << 20})
    s = snaphelp.session(store, d, prefix, extra=["--policy-defaults", small])
    try:
        r = s.run("""const fs = require('fs');
            return fs.readdirSync('.').reduce((n, f) => n + fs.statSync(f).size, 0)""",
                  conversation="c-big")
        assert r["result"] == 40 << 20, r
        if os.geteuid() == 0:  # an image: made larger for it once
            grown = snaphelp.wait_event(s, "snapshot.workspace_grown")
            assert grown["bytes"] > 40 << 20, grown
    finally:
        s.close()
    assert not snaphelp.restore_mark(d, "c-big").exists()
