"""Client-side encryption of snapshots (--snapshot-key-file): the bucket
holds only ciphertext; the key id in the manifest picks the key; a new
first key rotates (old snapshots still restore with the old key listed);
a snapshot whose key is gone fails naming the key id, and deleting it
still works."""
import os
import tempfile

import snaphelp

MARK = "PLAINTEXT-MARK-" + "q" * 40


def keyfile(tmp, *ids):
    p = os.path.join(tmp, "keys-" + "-".join(ids))
    with open(p, "w") as f:
        f.write("# snapshot keys, newest first\n")
        for i in ids:
            f.write("%s %s\n" % (i, os.urandom(32).hex() if i not in KEYS else KEYS[i]))
    return p


KEYS = {}


def key(i):
    KEYS.setdefault(i, os.urandom(32).hex())
    return i


def run_in(store, prefix, conv, js, keys, tmp):
    d = tempfile.mkdtemp(prefix="snap-", dir=tmp)
    s = snaphelp.session(store, d, prefix, extra=["--snapshot-key-file", keys] if keys else [])
    try:
        return s.run(js, conversation=conv), s, d
    finally:
        s.close()


def test_encrypted_snapshots_restore_rotate_and_name_a_missing_key(store, tmp_path):
    tmp = str(tmp_path)
    prefix = snaphelp.new_prefix()
    k1 = keyfile(tmp, key("k1"))
    r, s, _ = run_in(store, prefix, "c-enc",
                     "require('fs').writeFileSync('note', '%s'); return 1" % MARK, k1, tmp)
    assert r["status"] == "succeeded"
    m = snaphelp.manifest(store, prefix, "c-enc")
    assert m["keyId"] == "k1" and len(m["iv"]) == 24
    st, body = store.request("GET", "/%s/%s" % (store.bucket, m["archive"]))
    assert st == 200 and len(body) == m["size"]
    assert MARK.encode() not in body
    # Restored with the key elsewhere.
    r, _, _ = run_in(store, prefix, "c-enc", "return require('fs').readFileSync('note','utf8')",
                     k1, tmp)
    assert r["result"] == MARK
    # Rotation: k2 first, k1 still listed: the old snapshot restores, and the
    # next one is made with k2.
    k21 = keyfile(tmp, key("k2"), "k1")
    r, _, _ = run_in(store, prefix, "c-enc",
                     "const fs=require('fs'); fs.writeFileSync('more','x'); "
                     "return fs.readFileSync('note','utf8')", k21, tmp)
    assert r["result"] == MARK
    assert snaphelp.manifest(store, prefix, "c-enc")["keyId"] == "k2"
    # Without its key: refused, naming the key id; never an empty workspace.
    k3 = keyfile(tmp, key("k3"))
    r, _, d = run_in(store, prefix, "c-enc", "return 1", k3, tmp)
    assert r["error"]["code"] == "SANDBOX_UNAVAILABLE"
    assert "k2" in r["error"]["message"]
    snaphelp.assert_restore_pending(d, "c-enc")
    # ... and the empty workspace it left was not snapshotted over the
    # conversation's (the session's drain took none either)
    assert snaphelp.manifest(store, prefix, "c-enc")["keyId"] == "k2"
    r, _, _ = run_in(store, prefix, "c-enc", "return 1", None, tmp)
    assert r["error"]["code"] == "SANDBOX_UNAVAILABLE" and "k2" in r["error"]["message"]
    # A wrong key under the right id does not decrypt.
    KEYS["k2"] = os.urandom(32).hex()
    r, _, _ = run_in(store, prefix, "c-enc", "return 1", keyfile(tmp, "k2"), tmp)
    assert r["error"]["code"] == "SANDBOX_UNAVAILABLE" and "decrypt" in r["error"]["message"]
    # Deleting needs no key.
    d = tempfile.mkdtemp(prefix="snap-", dir=tmp)
    s = snaphelp.session(store, d, prefix)
    try:
        s.send({"type": "delete_conversation", "conversation": "c-enc", "id": "d"})
        m = s.wait_for(lambda m: m.get("id") == "d", 120, "the delete's answer")
        assert m["type"] == "conversation_deleted"
    finally:
        s.close()
    assert snaphelp.manifest(store, prefix, "c-enc") is None


def test_a_bad_key_file_is_refused_at_start(store, tmp_path):
    bad = tmp_path / "keys"
    bad.write_text("k1 not-hex\n")
    s = snaphelp.session(store, tmp_path / "s", snaphelp.new_prefix(),
                         extra=["--snapshot-key-file", str(bad)])
    rc = s.close()
    assert rc == 2
    err = "".join(l.decode(errors="replace") for l in s.stderr_lines)
    assert "line 1" in err and "not-hex" not in err
