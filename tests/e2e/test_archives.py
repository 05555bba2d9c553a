"""The whole workspace as a tar over the session protocol (broker/SESSION.md,
archive_read and archive_write), read and written with Python's tarfile,
and the entries a hostile archive carries refused with nothing outside the
workspace touched. Both backends (CODEPOD_BACKEND), both transports."""

import base64
import io
import os
import tarfile
import uuid

from harness import assert_ok
from test_files import CHUNK, error_code, read_file, write_file


def archive_write(s, conv, data):
    fid = s.new_id("aw")
    s.send({"type": "archive_write", "id": fid, "conversation": conv})
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
    return s.wait_for(lambda m: m.get("id") == fid and m["type"] in ("error", "file_result"), 60, "end")


def archive_read(s, conv):
    fid = s.new_id("ar")
    s.send({"type": "archive_read", "id": fid, "conversation": conv})
    got = b""
    while True:
        m = s.wait_for(lambda m: m.get("id") == fid and m["type"] in ("file_chunk", "error", "file_result"),
                       60, f"a chunk of {fid}")
        if m["type"] != "file_chunk":
            return got, m
        got += base64.b64decode(m["data"])
        s.send({"type": "file_ack", "id": fid})


def tar_of(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, kind, data in entries:
            ti = tarfile.TarInfo(name)
            if kind == "file":
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
            elif kind == "dir":
                ti.type = tarfile.DIRTYPE
                t.addfile(ti)
            elif kind == "symlink":
                ti.type, ti.linkname = tarfile.SYMTYPE, data
                t.addfile(ti)
            elif kind == "fifo":
                ti.type = tarfile.FIFOTYPE
                t.addfile(ti)
            elif kind == "char":
                ti.type, ti.devmajor, ti.devminor = tarfile.CHRTYPE, 1, 3
                t.addfile(ti)
    return buf.getvalue()


def test_round_trip_through_a_tar(session):
    conv = f"arch-{uuid.uuid4().hex[:8]}"
    big = os.urandom(CHUNK + 999)
    long_name = "deep/" + "n" * 180 + ".txt"
    r = archive_write(session, conv, tar_of([
        ("data", "dir", None), ("data/a.csv", "file", b"a,b\n"), ("data/big.bin", "file", big),
        ("link", "symlink", "data/a.csv"), (long_name, "file", b"long")]))
    assert r["type"] == "file_result" and r["op"] == "archive_write" and r["files"] == 5, r
    res = assert_ok(session.run("const fs = require('node:fs'); return [fs.readFileSync('data/a.csv', 'utf8'),"
                                " fs.readlinkSync('link'), fs.statSync('data/big.bin').size];", conversation=conv))
    assert res["result"] == ["a,b\n", "data/a.csv", len(big)]
    assert_ok(session.run("require('node:fs').writeFileSync('data/from-program.txt', 'p'); return 1;",
                          conversation=conv))
    data, end = archive_read(session, conv)
    assert end["type"] == "file_result" and end["op"] == "archive_read" and end["size"] == len(data)
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        got = {m.name: m for m in t.getmembers()}
        assert t.extractfile(got["data/big.bin"]).read() == big
        assert t.extractfile(got["data/from-program.txt"]).read() == b"p"
        assert t.extractfile(got[long_name]).read() == b"long"
        assert got["link"].issym() and got["link"].linkname == "data/a.csv"
    # an empty workspace is an empty tar
    data, end = archive_read(session, f"arch-empty-{uuid.uuid4().hex[:8]}")
    assert end["type"] == "file_result" and data == b"\0" * 1024


def test_hostile_archives_are_refused(session):
    conv = f"arch-hostile-{uuid.uuid4().hex[:8]}"
    write_file(session, conv, "keep.txt", b"kept")
    for entries, rule in [
        ([("../escape.txt", "file", b"x")], ".."),
        ([("/tmp/codepod-abs-" + uuid.uuid4().hex, "file", b"x")], "absolute"),
        ([("out", "symlink", "/etc")], "absolute"),
        ([("out", "symlink", "../../etc")], "leading out"),
        ([("dev", "char", None)], "device"),
        ([("fifo", "fifo", None)], "device"),
    ]:
        m = archive_write(session, conv, tar_of(entries))
        assert error_code(m) == "INVALID_REQUEST" and rule in m["error"]["message"], (entries, m)
    # a symlink planted first, then a file through it
    m = archive_write(session, conv, tar_of([("inside", "symlink", "keep.txt"), ("d", "symlink", "."),
                                             ("d/through.txt", "file", b"x")]))
    assert error_code(m) == "INVALID_REQUEST" and "symlink" in m["error"]["message"], m
    m = archive_write(session, conv, b"this is not a tar archive at all" * 40)
    assert error_code(m) == "INVALID_REQUEST", m
    assert not os.path.exists("/escape.txt")
    assert read_file(session, conv, "keep.txt")[0] == b"kept"
    res = assert_ok(session.run("return require('node:fs').readdirSync('.').sort();", conversation=conv))
    assert res["result"] == ["d", "inside", "keep.txt"], res
