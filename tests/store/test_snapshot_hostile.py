"""A snapshot archive written by someone else (the bucket is not ours to
trust): whatever it holds, a restore never writes outside the workspace.
Each archive below is well formed and matches its manifest (right size,
file count and SHA-256), so only the entry checks stand between it and the
host; the restore must end SANDBOX_UNAVAILABLE with nothing made."""
import hashlib
import io
import json
import os
import subprocess
import tarfile
import tempfile
import uuid

import pytest

import snaphelp

OUTSIDE = "/tmp/codepod-snap-outside-" + uuid.uuid4().hex[:8]


def entry(name, type_=tarfile.REGTYPE, data=b"", linkname=""):
    ti = tarfile.TarInfo(name)
    ti.type = type_
    ti.size = len(data) if type_ == tarfile.REGTYPE else 0
    ti.linkname = linkname
    ti.mode = 0o644
    if type_ == tarfile.CHRTYPE:
        ti.devmajor, ti.devminor = 1, 3
    return ti, data


CASES = {
    "dotdot": [entry("ok.txt", data=b"ok"), entry("../../escaped", data=b"x")],
    "dotdot-inside": [entry("a/../../escaped", data=b"x")],
    "absolute": [entry(OUTSIDE + "-abs", data=b"x")],
    "device": [entry("null", tarfile.CHRTYPE)],
    "fifo": [entry("pipe", tarfile.FIFOTYPE)],
    "hardlink": [entry("h", tarfile.LNKTYPE, linkname="/etc/passwd")],
    "symlink-absolute": [entry("out", tarfile.SYMTYPE, linkname="/etc")],
    "symlink-climbs": [entry("sub", tarfile.DIRTYPE), entry("sub/up", tarfile.SYMTYPE,
                                                           linkname="../../..")],
    "through-a-link": [entry("d", tarfile.DIRTYPE), entry("l", tarfile.SYMTYPE, linkname="d"),
                       entry("l/f", data=b"x")],
    "twice": [entry("f", data=b"1"), entry("f", data=b"2")],
}


WHY = {"dotdot": "'..'", "dotdot-inside": "'..'", "absolute": "absolute path",
       "device": "device node", "fifo": "FIFO", "hardlink": "hard link",
       "symlink-absolute": "link out of the workspace",
       "symlink-climbs": "link out of the workspace",
       "through-a-link": "a link or not a folder", "twice": "cannot be made"}


def archive(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for ti, data in entries:
            t.addfile(ti, io.BytesIO(data) if ti.type == tarfile.REGTYPE else None)
    return subprocess.run(["zstd", "-q", "-c"], input=buf.getvalue(), capture_output=True,
                          check=True).stdout


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_archive_is_never_extracted_outside(store, case):
    prefix = snaphelp.new_prefix()
    conv = "c-" + case
    h = snaphelp.conv_hash(conv)
    body = archive(CASES[case])
    key = "%s/%s/archive-hostile.tar.zst" % (prefix, h)
    assert store.request("PUT", "/%s/%s" % (store.bucket, key), body=body)[0] == 200
    m = {"version": 1, "archive": key, "size": len(body), "files": len(CASES[case]),
         "bytes": 0, "sha256": hashlib.sha256(body).hexdigest(),
         "fingerprint": "0" * 64, "created": 1}
    assert store.request("PUT", "/%s/%s/%s/manifest.json" % (store.bucket, prefix, h),
                         body=json.dumps(m).encode())[0] == 200
    d = tempfile.mkdtemp(prefix="snap-")
    s = snaphelp.session(store, d, prefix)
    ws_root = os.path.join(d, "workspaces")
    try:
        r = s.run("return 1", conversation=conv)
        assert r["status"] == "failed" and r["error"]["code"] == "SANDBOX_UNAVAILABLE", r
        assert "does not verify" in r["error"]["message"]
        assert WHY[case] in r["error"]["message"]
        # Nothing kept: the workspace (still mounted, if an image) empty and
        # its restore still to come; no half-restored folder beside it.
        snaphelp.assert_restore_pending(d, conv)
        assert sorted(n for n in os.listdir(ws_root) if h in n) in (
            [h, h + ".img", h + ".restoring"], [h, h + ".restoring"])
    finally:
        s.close()
    assert not os.path.exists(os.path.join(d, "escaped"))
    assert not os.path.exists(os.path.join(ws_root, "escaped"))
    assert not os.path.exists(OUTSIDE + "-abs")
