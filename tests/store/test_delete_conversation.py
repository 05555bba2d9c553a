"""Deleting a conversation (session message delete_conversation): its
running executions end CANCELLED, then its workspace and every snapshot of
it are deleted, and the answer comes only once they are gone."""
import os
import tempfile
import time
from urllib.parse import quote

import snaphelp
from snaphelp import harness


def delete(sess, conversation, id_="d1"):
    sess.send({"type": "delete_conversation", "conversation": conversation, "id": id_})
    return sess.wait_for(lambda m: m.get("id") == id_ and m["type"] in (
        "conversation_deleted", "error"), 120, "the delete's answer")


def keys_of(store, prefix, conversation):
    st, body = store.request("GET", "/" + store.bucket, query="list-type=2&prefix=" + quote(
        "%s/%s" % (prefix, snaphelp.conv_hash(conversation)), safe=""))
    assert st == 200
    return body.count(b"<Key>")


def test_delete_takes_the_workspace_and_its_snapshots(store):
    d = tempfile.mkdtemp(prefix="snap-")
    prefix = snaphelp.new_prefix()
    s = snaphelp.session(store, d, prefix)
    try:
        s.run("require('fs').writeFileSync('kept', 'x'); return 1", conversation="c-del")
        snaphelp.wait_event(s, "snapshot.done")
        assert keys_of(store, prefix, "c-del") == 2  # the manifest and its archive
        ws = snaphelp.workspace_of(d, "c-del")
        assert ws.exists()
        m = delete(s, "c-del")
        assert m == {"type": "conversation_deleted", "conversation": "c-del", "id": "d1"}
        assert not ws.exists()
        assert keys_of(store, prefix, "c-del") == 0
        assert [n for n in os.listdir(os.path.join(d, "workspaces"))
                if snaphelp.conv_hash("c-del") in n] == []
        # Gone for good: the next execution starts empty, nothing restored.
        r = s.run("return require('fs').readdirSync('.')", conversation="c-del")
        assert r["status"] == "succeeded", r
        assert r["result"] == [] and "restoreMs" not in r["usage"]
    finally:
        s.close()


def test_delete_racing_an_execution(store):
    d = tempfile.mkdtemp(prefix="snap-")
    prefix = snaphelp.new_prefix()
    s = snaphelp.session(store, d, prefix)
    try:
        eid = s.execute("""
            const fs = require('fs');
            fs.writeFileSync('before', 'x');
            await new Promise(r => setTimeout(r, 600000));
            fs.writeFileSync('after', 'y');
            return 1""", conversation="c-race")
        s.wait_for(lambda m: m["type"] == "accepted" and m.get("id") == eid, 60, "accepted")
        ws = snaphelp.workspace_of(d, "c-race")
        end = time.monotonic() + 120
        while not (ws / "before").exists():
            assert time.monotonic() < end, "the program did not start"
            time.sleep(0.05)
        m = delete(s, "c-race")
        assert m["type"] == "conversation_deleted", m
        r = s.wait_result(eid)
        assert r["status"] == "failed" and r["error"]["code"] == "CANCELLED"
        assert "deleted" in r["error"]["message"]
        assert not ws.exists()
        assert keys_of(store, prefix, "c-race") == 0
    finally:
        s.close()
    # Nothing of it came back at the drain either.
    assert keys_of(store, prefix, "c-race") == 0


def test_delete_without_snapshots_and_a_bad_request(tmp_path):
    s = harness.Session(tmp_path / "state")
    try:
        s.run("require('fs').writeFileSync('f', 'x'); return 1", conversation="c-plain")
        ws = snaphelp.workspace_of(tmp_path / "state", "c-plain")
        assert ws.exists()
        assert delete(s, "c-plain")["type"] == "conversation_deleted"
        assert not ws.exists()
        # Deleting what is not there is what was asked.
        assert delete(s, "c-never", "d2")["type"] == "conversation_deleted"
        s.send({"type": "delete_conversation", "id": "d3"})
        m = s.wait_for(lambda m: m.get("id") == "d3", 60, "the error")
        assert m["type"] == "error" and m["error"]["code"] == "INVALID_REQUEST"
        assert m["inReplyTo"] == "delete_conversation"
    finally:
        s.close()


def test_snapshots_older_than_the_ttl_are_deleted(store):
    d = tempfile.mkdtemp(prefix="snap-")
    prefix = snaphelp.new_prefix()
    s = snaphelp.session(store, d, prefix, extra=["--snapshot-ttl", "2"])
    try:
        s.run("require('fs').writeFileSync('f', 'x'); return 1", conversation="c-ttl")
        snaphelp.wait_event(s, "snapshot.done")
        assert keys_of(store, prefix, "c-ttl") == 2
        expired = snaphelp.wait_event(s, "snapshot.expired")
        assert expired["conversation"] == snaphelp.conv_hash("c-ttl")
        end = time.monotonic() + 60
        while keys_of(store, prefix, "c-ttl"):
            assert time.monotonic() < end, "the expired snapshot is still there"
            time.sleep(0.1)
        # The local workspace is not the TTL's: it stays.
        assert (snaphelp.workspace_of(d, "c-ttl") / "f").exists()
    finally:
        s.close()
