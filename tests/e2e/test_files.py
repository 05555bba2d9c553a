"""Files of a conversation's workspace over the session protocol
(broker/SESSION.md, files): write, read (ranges), stat, list, delete,
chunks acknowledged one at a time, ifMatch and maxFileBytes, and the path
attacks of a hostile program or client, on both backends (CODEPOD_BACKEND)
and both transports (CODEPOD_TRANSPORT)."""

import base64
import glob
import hashlib
import json
import os
import time
import uuid

from harness import BACKEND, assert_ok

CHUNK = 262144


def host_folder(session, cwd, name, content):
    """Where a conversation's workspace is on the host, for a symlink aimed
    at it: its program sees /workspace (the local sandbox binds the host
    folder there), so the folder is found by its file @name, which holds
    @content (unique to the test)."""
    if BACKEND != "local" or cwd != "/workspace":
        return cwd

    def holds(d):
        try:
            with open(os.path.join(d, name), "rb") as f:
                return f.read() == content.encode()
        except OSError:
            return False
    found = [d for d in glob.glob(os.path.join(session.state_dir, "workspaces", "*")) if holds(d)]
    assert len(found) == 1, found
    return found[0]


def conv_name(tag):
    return f"files-{tag}-{uuid.uuid4().hex[:8]}"


def answer(s, fid, reply_to, timeout=60):
    """The file_result or error that ends operation fid."""
    m = s.wait_for(lambda m: m.get("id") == fid and (
        m["type"] == "file_result" or (m["type"] == "error" and m.get("inReplyTo") == reply_to)),
        timeout, f"the end of {reply_to} {fid}")
    return m


def write_file(s, conv, path, data, **fields):
    fid = s.new_id("w")
    s.send({"type": "file_write", "id": fid, "conversation": conv, "path": path, **fields})
    pieces = [data[i:i + CHUNK] for i in range(0, len(data), CHUNK)] or [b""]
    for i, p in enumerate(pieces):
        m = s.wait_for(lambda m: m.get("id") == fid and m["type"] in ("file_ack", "error", "file_result"),
                       60, f"file_ack for {fid}")
        if m["type"] != "file_ack":
            return m
        msg = {"type": "file_chunk", "id": fid, "data": base64.b64encode(p).decode()}
        if i == len(pieces) - 1:
            msg["last"] = True
        s.send(msg)
    return answer(s, fid, "file_write")


def read_file(s, conv, path, **fields):
    """(bytes, the file_result), or (None, the error)."""
    fid = s.new_id("r")
    s.send({"type": "file_read", "id": fid, "conversation": conv, "path": path, **fields})
    got = b""
    while True:
        m = s.wait_for(lambda m: m.get("id") == fid and m["type"] in ("file_chunk", "error", "file_result"),
                       60, f"a chunk of {fid}")
        if m["type"] == "file_chunk":
            got += base64.b64decode(m["data"])
            s.send({"type": "file_ack", "id": fid})
            continue
        return (got, m) if m["type"] == "file_result" else (None, m)


def op(s, type_, conv, **fields):
    fid = s.new_id("f")
    s.send({"type": type_, "id": fid, "conversation": conv, **fields})
    return answer(s, fid, type_)


def error_code(m):
    assert m["type"] == "error", m
    assert isinstance(m["error"]["message"], str) and m["error"]["message"]
    return m["error"]["code"]


def test_write_read_stat_list_delete(session):
    conv = conv_name("basic")
    data = b"hello, workspace\n"
    w = write_file(session, conv, "reports/q1/summary.txt", data)
    assert w["type"] == "file_result" and w["op"] == "write", w
    assert w["size"] == len(data) and w["etag"] == hashlib.sha256(data).hexdigest()
    assert w["created"] is True
    assert write_file(session, conv, "reports/q1/summary.txt", data)["created"] is False
    got, r = read_file(session, conv, "reports/q1/summary.txt")
    assert got == data and r["op"] == "read" and r["size"] == len(data) and r["etag"] == w["etag"]
    st = op(session, "file_stat", conv, path="reports/q1/summary.txt")
    assert st["stat"]["type"] == "file" and st["stat"]["size"] == len(data), st
    assert st["stat"]["mode"] == 0o644 and st["stat"]["mtimeMs"] > 0
    assert op(session, "file_stat", conv, path="reports")["stat"]["type"] == "directory"
    assert op(session, "file_stat", conv, path="")["stat"]["type"] == "directory"
    write_file(session, conv, "reports/a.txt", b"a", mode=0o600)
    assert op(session, "file_stat", conv, path="reports/a.txt")["stat"]["mode"] == 0o600
    ls = op(session, "file_list", conv, path="reports")
    assert ls["entries"] == [{"name": "a.txt", "type": "file", "size": 1},
                             {"name": "q1", "type": "directory", "size": 0}], ls
    assert "next" not in ls
    assert [e["name"] for e in op(session, "file_list", conv)["entries"]] == ["reports"]
    # an empty file sends no chunk
    assert write_file(session, conv, "empty", b"")["size"] == 0
    got, r = read_file(session, conv, "empty")
    assert got == b"" and r["size"] == 0 and not session.of(r["id"], "file_chunk")
    # delete: a file, a missing one, a folder
    assert op(session, "file_delete", conv, path="reports/a.txt")["op"] == "delete"
    assert error_code(op(session, "file_delete", conv, path="reports/a.txt")) == "NOT_FOUND"
    assert error_code(op(session, "file_delete", conv, path="reports")) == "INVALID_REQUEST"
    assert op(session, "file_delete", conv, path="reports", recursive=True)["op"] == "delete"
    assert error_code(op(session, "file_stat", conv, path="reports")) == "NOT_FOUND"
    assert error_code(read_file(session, conv, "reports/q1/summary.txt")[1]) == "NOT_FOUND"


def test_big_file_chunks_each_wait_for_their_ack(session):
    conv = conv_name("big")
    data = os.urandom(3 * CHUNK + 12345)
    w = write_file(session, conv, "blob.bin", data)
    assert w["size"] == len(data) and w["etag"] == hashlib.sha256(data).hexdigest(), w
    fid = session.new_id("r")
    session.send({"type": "file_read", "id": fid, "conversation": conv, "path": "blob.bin"})
    first = session.wait_for(lambda m: m.get("id") == fid and m["type"] == "file_chunk", 60, "chunk")
    assert len(base64.b64decode(first["data"])) == CHUNK
    assert first["size"] == len(data) and first["etag"] == w["etag"], "the first chunk says both"
    time.sleep(0.5)  # no ack yet: nothing more may come
    assert len(session.of(fid, "file_chunk")) == 1 and not session.of(fid, "file_result")
    got = base64.b64decode(first["data"])
    session.send({"type": "file_ack", "id": fid})
    while True:
        m = session.wait_for(lambda m: m.get("id") == fid and m["type"] in ("file_chunk", "file_result"),
                             60, "the rest")
        if m["type"] == "file_result":
            break
        got += base64.b64decode(m["data"])
        session.send({"type": "file_ack", "id": fid})
    assert got == data and m["etag"] == w["etag"] and m["size"] == len(data)
    # a range across a chunk boundary, and one past the end
    got, r = read_file(session, conv, "blob.bin", offset=CHUNK - 10, length=30)
    assert got == data[CHUNK - 10:CHUNK + 20] and r["size"] == len(data) and r["etag"] == w["etag"]
    got, r = read_file(session, conv, "blob.bin", offset=len(data) + 5)
    assert got == b"" and r["size"] == len(data)
    # an ack nothing waits for, a chunk before the write's file_ack
    session.send({"type": "file_ack", "id": fid})
    assert session.wait_error(fid)["inReplyTo"] == "file_ack"


def test_if_match_and_max_file_bytes_leave_the_old_file(session):
    conv = conv_name("cond")
    w = write_file(session, conv, "doc.txt", b"version 1")
    stale = w["etag"]
    w2 = write_file(session, conv, "doc.txt", b"version 2", ifMatch=stale)
    assert w2["type"] == "file_result" and w2["etag"] == hashlib.sha256(b"version 2").hexdigest()
    m = write_file(session, conv, "doc.txt", b"version 3", ifMatch=stale)
    assert error_code(m) == "PRECONDITION_FAILED", m
    assert read_file(session, conv, "doc.txt")[0] == b"version 2"
    assert error_code(write_file(session, conv, "new.txt", b"x", ifMatch=stale)) == "PRECONDITION_FAILED"
    # over maxFileBytes mid-upload: refused, the old file intact, no temporary left
    m = write_file(session, conv, "doc.txt", b"z" * (CHUNK + 10), policy={"maxFileBytes": CHUNK})
    assert error_code(m) == "TOO_LARGE" and "maxFileBytes" in m["error"]["message"], m
    assert read_file(session, conv, "doc.txt")[0] == b"version 2"
    assert [e["name"] for e in op(session, "file_list", conv)["entries"]] == ["doc.txt"]
    # (a listing leaves temporaries out: a program sees the folder as it is)
    seen = assert_ok(session.run("return require('fs').readdirSync('.').sort();", conversation=conv))
    assert seen["result"] == ["doc.txt"], seen


def test_a_program_and_the_api_see_the_same_files(session):
    conv = conv_name("shared")
    token = uuid.uuid4().hex
    assert_ok(session.run(f"require('node:fs').mkdirSync('out'); require('node:fs').writeFileSync('out/chart.svg', '<svg>{token}</svg>'); return 1;",
                          conversation=conv))
    assert read_file(session, conv, "out/chart.svg")[0] == f"<svg>{token}</svg>".encode()
    write_file(session, conv, "upload.csv", b"a,b\n1,2\n")
    res = assert_ok(session.run("return require('node:fs').readFileSync('upload.csv', 'utf8').split('\\n')[1];",
                                conversation=conv))
    assert res["result"] == "1,2"


def test_a_program_s_change_to_a_file_gives_a_new_etag(session):
    """A read may take the ETag codepod knows from an earlier read instead
    of hashing again (runner/etags.h): a program's change to the file, in
    place, of the same size, with its mtime set back as it was, still
    gives the new content's ETag (its ctime moved; no program can set that
    back)."""
    conv = conv_name("etag")
    old, new = b"a" * 100000, b"b" * 100000
    write_file(session, conv, "f.bin", old)
    time.sleep(0.1)  # older than the timestamp granularity: its hash may be kept
    for _ in range(2):
        data, m = read_file(session, conv, "f.bin")
        assert data == old and m["etag"] == hashlib.sha256(old).hexdigest(), m
        assert "seen" not in m, m  # what the runner saw is codepod's, not the client's
    # (touch -r: the mtime to the nanosecond; JS's utimes rounds it)
    assert_ok(session.run("""
        const fs = require('node:fs');
        const { execFileSync } = require('node:child_process');
        const st = fs.statSync('f.bin', { bigint: true });
        execFileSync('touch', ['-r', 'f.bin', 'ref']);
        const fd = fs.openSync('f.bin', 'r+');
        fs.writeSync(fd, Buffer.alloc(100000, 'b'), 0, 100000, 0);
        fs.closeSync(fd);
        execFileSync('touch', ['-r', 'ref', 'f.bin']);
        fs.unlinkSync('ref');
        const now = fs.statSync('f.bin', { bigint: true });
        if (now.mtimeNs !== st.mtimeNs || now.size !== st.size || now.ino !== st.ino) throw new Error('not set back');
        return 1;""", conversation=conv))
    data, m = read_file(session, conv, "f.bin")
    assert data == new and m["etag"] == hashlib.sha256(new).hexdigest(), m
    # and an If-Match with the old ETag is refused: the file changed
    m = write_file(session, conv, "f.bin", b"c", ifMatch=hashlib.sha256(old).hexdigest())
    assert error_code(m) == "PRECONDITION_FAILED", m


def test_ten_thousand_files_list_in_bounded_pages(session):
    conv = conv_name("many")
    assert_ok(session.run("const fs = require('node:fs'); fs.mkdirSync('d');"
                          "for (let i = 0; i < 10000; i++) fs.writeFileSync('d/f' + String(i).padStart(5, '0'), '');"
                          "return 1;", conversation=conv, policy={"timeoutMs": 120000}))
    names, cursor, pages = [], None, 0
    while True:
        fields = {"path": "d"}
        if cursor:
            fields["cursor"] = cursor
        ls = op(session, "file_list", conv, **fields)
        assert ls["type"] == "file_result", ls
        assert len(ls["entries"]) <= 1000
        pages += 1
        names += [e["name"] for e in ls["entries"]]
        cursor = ls.get("next")
        if not cursor:
            break
    assert pages == 10 and names == [f"f{i:05d}" for i in range(10000)]
    ls = op(session, "file_list", conv, path="d", limit=3)
    assert [e["name"] for e in ls["entries"]] == ["f00000", "f00001", "f00002"] and ls["next"]
    assert error_code(op(session, "file_list", conv, path="d", limit=0)) == "INVALID_REQUEST"


def sha_of(path):
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError as e:
        return e.errno


def test_hostile_paths_are_refused_and_nothing_outside_is_touched(session):
    conv = conv_name("hostile")
    shadow = sha_of("/etc/shadow")
    # the string rules
    for bad, rule in [("../x", ".."), ("a/../../x", ".."), ("/etc/passwd", "absolute"),
                      ("a\u0000b", "NUL"), ("", "workspace itself")]:
        m = op(session, "file_read", conv, path=bad)
        assert error_code(m) == "INVALID_REQUEST" and rule in m["error"]["message"], (bad, m)
        m = write_file(session, conv, bad, b"owned")
        assert error_code(m) == "INVALID_REQUEST", (bad, m)
    # another conversation's workspace, where its program sees it
    other = conv_name("victim")
    theirs = f"theirs {uuid.uuid4().hex}"
    ws = assert_ok(session.run(f"require('node:fs').writeFileSync('secret.txt', '{theirs}'); return process.cwd();",
                               conversation=other))["result"]
    ws = host_folder(session, ws, "secret.txt", theirs)
    # symlinks planted by this conversation's program
    planted = assert_ok(session.run(f"""
const fs = require('node:fs');
fs.symlinkSync('/etc/shadow', 'shadow');
fs.symlinkSync('/etc', 'etc');
fs.symlinkSync({json.dumps(ws)}, 'theirs');
fs.symlinkSync({json.dumps(ws + '/secret.txt')}, 'secret');
require('node:child_process').execFileSync('mkfifo', ['pipe']);
return fs.readdirSync('.').sort();""", conversation=conv))["result"]
    assert planted == ["etc", "pipe", "secret", "shadow", "theirs"], planted
    for path in ["shadow", "etc/shadow", "etc/passwd", "theirs/secret.txt", "secret"]:
        m = read_file(session, conv, path)[1]
        assert error_code(m) == "INVALID_REQUEST" and "symlink" in m["error"]["message"], (path, m)
        assert theirs not in json.dumps(m)
        m = write_file(session, conv, path, b"owned")
        assert error_code(m) == "INVALID_REQUEST", (path, m)
    for path in ["etc/codepod-owned", "theirs/owned.txt", "theirs/sub/owned.txt"]:
        assert error_code(write_file(session, conv, path, b"owned")) == "INVALID_REQUEST", path
    assert error_code(op(session, "file_list", conv, path="theirs")) == "INVALID_REQUEST"
    assert error_code(op(session, "file_list", conv, path="etc")) == "INVALID_REQUEST"
    # a special file is refused, not read (it would block) or replaced
    m = read_file(session, conv, "pipe")[1]
    assert error_code(m) == "INVALID_REQUEST" and "regular file" in m["error"]["message"], m
    assert error_code(write_file(session, conv, "pipe", b"x")) == "INVALID_REQUEST"
    # stat and delete see the symlink itself, never its target
    assert op(session, "file_stat", conv, path="shadow")["stat"]["type"] == "symlink"
    assert op(session, "file_delete", conv, path="theirs")["op"] == "delete"
    # nothing outside was touched
    assert sha_of("/etc/shadow") == shadow
    assert not os.path.exists("/etc/codepod-owned")
    res = assert_ok(session.run("return require('node:fs').readdirSync('.').sort();", conversation=other))
    assert res["result"] == ["secret.txt"], res
    assert read_file(session, other, "secret.txt")[0] == theirs.encode()


def test_a_file_swapped_for_a_symlink_is_never_followed(session):
    conv = conv_name("swap")
    secret = uuid.uuid4().hex
    other = conv_name("swap-victim")
    ws = assert_ok(session.run(f"require('node:fs').writeFileSync('s.txt', '{secret}'); return process.cwd();",
                               conversation=other))["result"]
    ws = host_folder(session, ws, "s.txt", secret)
    # a program swaps f between a regular file and a symlink, as fast as it can
    eid = session.execute(f"""
const fs = require('node:fs');
const end = Date.now() + 20000;
// each swap a rename: f is always whole, a file or a symlink
fs.writeFileSync('t', 'plain');
while (Date.now() < end && !fs.existsSync('stop')) {{
  fs.linkSync('t', 't2'); fs.renameSync('t2', 'f');
  try {{ fs.unlinkSync('l'); }} catch (_) {{}}
  fs.symlinkSync({json.dumps(ws + '/s.txt')}, 'l'); fs.renameSync('l', 'f');
}}
return 1;""", conversation=conv, policy={"timeoutMs": 60000})
    seen = set()
    for _ in range(25):
        got, m = read_file(session, conv, "f")
        if got is None:
            seen.add(m["error"]["code"])
        else:
            assert got == b"plain", got
            seen.add("plain")
        assert secret.encode() not in (got or b"")
    write_file(session, conv, "stop", b"")
    assert_ok(session.wait_result(eid, timeout=90))
    assert seen <= {"plain", "INVALID_REQUEST", "NOT_FOUND"}, seen
    assert read_file(session, other, "s.txt")[0] == secret.encode()


def test_invalid_file_requests(session):
    conv = conv_name("invalid")
    assert "path" in op(session, "file_read", conv)["error"]["message"]
    assert "ifMatch" in write_file(session, conv, "x", b"", ifMatch="abc")["error"]["message"]
    assert "offset" in op(session, "file_read", conv, path="x", offset=-1)["error"]["message"]
    assert "mode" in write_file(session, conv, "x", b"", mode=4096)["error"]["message"]
    assert "cursor" in op(session, "file_list", conv, cursor="!!")["error"]["message"]
    assert "recursive" in op(session, "file_delete", conv, path="x", recursive=1)["error"]["message"]
    assert "maxFileBytes" in op(session, "file_read", conv, path="x", policy={"maxFileBytes": 0})["error"]["message"]
    # a chunk too big, a chunk before its file_ack
    fid = session.new_id("w")
    session.send({"type": "file_write", "id": fid, "conversation": conv, "path": "big"})
    session.wait_for(lambda m: m.get("id") == fid and m["type"] == "file_ack", 60, "ready")
    session.send({"type": "file_chunk", "id": fid, "data": base64.b64encode(b"x" * (CHUNK + 1)).decode()})
    assert "at most" in session.wait_error(fid)["error"]["message"]
    # the refused chunk changed nothing: the write still takes its first chunk
    session.send({"type": "file_chunk", "id": fid, "data": "eA=="})
    session.wait_for(lambda m: m.get("id") == fid and m["type"] == "file_ack", 60, "the next ack")
    session.stop(fid)
    assert error_code(answer(session, fid, "file_write")) == "CANCELLED"
    assert error_code(op(session, "file_stat", conv, path="big")) == "NOT_FOUND"
    # a chunk with no file_ack before it: after the last one
    fid = session.new_id("w")
    session.send({"type": "file_write", "id": fid, "conversation": conv, "path": "once"})
    session.wait_for(lambda m: m.get("id") == fid and m["type"] == "file_ack", 60, "ready")
    session.send({"type": "file_chunk", "id": fid, "data": "eA==", "last": True})
    session.send({"type": "file_chunk", "id": fid, "data": "eQ==", "last": True})
    err = session.wait_error(fid)
    assert err["inReplyTo"] == "file_chunk", err
    assert answer(session, fid, "file_write")["size"] == 1
    assert read_file(session, conv, "once")[0] == b"x"
