"""Streamed snapshots (store/snap_upload.h, store/snap_download.h) and the
snapshot flags, against the loopback fake GCS (fakegcs.py; fast, and its
answers can be made to fail or to lag): a part refused mid-upload aborts the
multipart upload (nothing left behind, the previous snapshot intact) and a
later snapshot succeeds; a slow store slows the packing instead of filling
codepod's memory; --snapshot-max-bytes refuses a workspace over it with a
clear warning; --snapshot-delay is honoured. The same paths against the real
Ceph RGW are in test_snapshots.py and the bench."""
import os
import tempfile
import time

import pytest

import snaphelp
from harness import UNDER_ASAN, vm_hwm_kib
from test_gcs_snapshots import session



def write_js(mib, name="big.bin"):
    return ("const fs = require('fs'), crypto = require('crypto');"
            "const f = fs.openSync('%s', 'w');"
            "for (let i = 0; i < %d; i++) fs.writeSync(f, crypto.randomBytes(1 << 20));"
            "fs.closeSync(f); return 1" % (name, mib))


def test_a_part_refused_mid_upload_aborts_it_and_a_later_snapshot_succeeds(gcs):
    md, g = gcs
    d = tempfile.mkdtemp(prefix="stream-")
    prefix = snaphelp.new_prefix()
    s = session(md, g, d, prefix)
    h = snaphelp.conv_hash("c-part")
    try:
        assert s.run(write_js(1, "first.bin"), conversation="c-part")["status"] == "succeeded"
        snaphelp.wait_event(s, "snapshot.done")
        first = dict(g.objects)
        manifest = first["%s/%s/manifest.json" % (prefix, h)][0]
        g.fail_parts = 1  # the first part of the next upload is refused
        assert s.run(write_js(30), conversation="c-part")["status"] == "succeeded"
        failed = snaphelp.wait_event(s, "snapshot.failed")
        assert "503" in failed["reason"] and "ServiceUnavailable" in failed["reason"], failed
        # Aborted: no upload left open; the previous snapshot is still whole.
        assert g.uploads == {}
        assert g.objects["%s/%s/manifest.json" % (prefix, h)][0] == manifest
        done = snaphelp.wait_event(s, "snapshot.done", after=1, timeout=60)
        assert done["bytes"] > 30 << 20
    finally:
        s.close()
    assert g.uploads == {}
    parts = [r for r in g.requests() if r[0] == "PUT" and r[2].startswith("partNumber=")]
    assert len(parts) >= 4  # 30 MiB in parts of 8 MiB, after the refused one


def test_a_slow_store_slows_the_packing_not_codepods_memory(gcs):
    md, g = gcs
    d = tempfile.mkdtemp(prefix="stream-")
    prefix = snaphelp.new_prefix()
    s = session(md, g, d, prefix)
    try:
        assert s.run("return 0", conversation="c-slow")["status"] == "succeeded"
        before = vm_hwm_kib(s.proc.pid)
        g.part_delay = 0.25  # 160 MiB in 8 MiB parts, two at a time: about 2.5 s
        r = s.run(write_js(160), conversation="c-slow", timeout=120)
        assert r["status"] == "succeeded"
        # (a snapshot may catch the file half written, under load: the one
        # of the whole file is the one measured)
        big = lambda m: m.get("bytes", 0) > 150 << 20  # noqa: E731
        up = snaphelp.wait_event(s, "snapshot.upload", big, timeout=120)
        done = snaphelp.wait_event(s, "snapshot.done", big, timeout=120)
        grown_mib = (vm_hwm_kib(s.proc.pid) - before) / 1024
    finally:
        s.close()
    # The packing waited for the store: 20 parts of 8 MiB answered after
    # 0.25 s each, two at a time, at most three waiting: it cannot end
    # before about 2 s (packing alone takes a fraction of that).
    assert up["packMs"] >= 1500, (up, done)
    # At most a few parts of 8 MiB in memory, not the 160 MiB archive (ASan
    # keeps freed memory in quarantine: its peak says nothing of that).
    print("grown %.1f MiB, packMs %d, ms %d" % (grown_mib, up["packMs"], done["ms"]))
    if not UNDER_ASAN:
        assert grown_mib < 64, grown_mib


def test_the_workspace_ceiling(gcs):
    md, g = gcs
    d = tempfile.mkdtemp(prefix="stream-")
    prefix = snaphelp.new_prefix()
    s = session(md, g, d, prefix, extra=["--snapshot-max-bytes", "2M"])
    try:
        r = s.run(write_js(3), conversation="c-ceil")
        assert r["status"] == "succeeded" and r["result"] == 1  # the execution is not affected
        failed = snaphelp.wait_event(s, "snapshot.failed")
        assert failed["level"] == "warn"
        assert "workspace over the snapshot ceiling of 2097152 bytes" in failed["reason"], failed
        # Not tried again until the workspace changes.
        time.sleep(3)
        assert snaphelp.count_events(s, "snapshot.failed") == 1
        r = s.run("require('fs').unlinkSync('big.bin'); require('fs').writeFileSync('s', 'x');"
                  " return 2", conversation="c-ceil")
        assert r["result"] == 2
        snaphelp.wait_event(s, "snapshot.done")
    finally:
        s.close()
    assert not [k for k, v in g.objects.items() if len(v[0]) > 2 << 20]


def test_the_snapshot_delay(gcs):
    md, g = gcs
    d = tempfile.mkdtemp(prefix="stream-")
    s = session(md, g, d, snaphelp.new_prefix(), extra=["--snapshot-delay", "4"])
    try:
        t0 = time.monotonic()
        assert s.run("require('fs').writeFileSync('a', 'x'); return 1",
                     conversation="c-delay")["status"] == "succeeded"
        t_end = time.monotonic()
        snaphelp.wait_event(s, "snapshot.done", timeout=30)
        t_done = time.monotonic()
    finally:
        s.close()
    assert t_done - t_end >= 3.5, (t0, t_end, t_done)


@pytest.mark.parametrize("value", ["0", "31", "x"])
def test_the_delay_flag_is_checked(value, tmp_path):
    import subprocess
    r = subprocess.run([os.environ.get("CODEPOD_BIN", "build/codepod"), "serve", "--stdio",
                        "--snapshot-delay", value], input="", capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and "--snapshot-delay must be a number from 1 to 30" in r.stderr


@pytest.mark.parametrize("value", ["0", "4X", "-1", "4 G", "2000T"])
def test_the_ceiling_flag_is_checked(value):
    import subprocess
    r = subprocess.run([os.environ.get("CODEPOD_BIN", "build/codepod"), "serve", "--stdio",
                        "--snapshot-max-bytes", value], input="", capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and "--snapshot-max-bytes must be a number of bytes" in r.stderr


def test_an_encrypted_workspace_streams_both_ways(gcs, tmp_path):
    """Encrypted parts upload as they are packed; the restore decrypts and
    unpacks while it downloads (pieces of any size), byte for byte."""
    md, g = gcs
    keys = tmp_path / "keys"
    keys.write_text("k2 " + os.urandom(32).hex() + "\n")
    d = tempfile.mkdtemp(prefix="stream-")
    prefix = snaphelp.new_prefix()
    extra = ["--snapshot-key-file", str(keys)]
    a = session(md, g, d + "/a", prefix, extra=extra)
    try:
        assert a.run(write_js(24) .replace("return 1", "fs.mkdirSync('e'); return 1"),
                     conversation="c-enc", timeout=120)["status"] == "succeeded"
        snaphelp.wait_event(a, "snapshot.done", lambda m: m["bytes"] > 24 << 20)
    finally:
        a.close()
    before = snaphelp.tree(snaphelp.workspace_of(d + "/a", "c-enc"))
    h = snaphelp.conv_hash("c-enc")
    arch = [v[0] for k, v in g.objects.items() if k.startswith("%s/%s/archive-" % (prefix, h))]
    assert len(arch) == 1 and arch[0][:4] != b"\x28\xb5\x2f\xfd"  # not a plain zstd frame
    b = session(md, g, d + "/b", prefix, extra=extra)
    try:
        r = b.run("return require('fs').statSync('big.bin').size", conversation="c-enc",
                  timeout=120)
        assert r["status"] == "succeeded" and r["result"] == 24 << 20, r
    finally:
        b.close()
    assert snaphelp.tree(snaphelp.workspace_of(d + "/b", "c-enc")) == before
