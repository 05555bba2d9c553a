"""Snapshots to Google Cloud Storage with Workload Identity
(`--snapshot-url gs://BUCKET/PREFIX`): codepod takes an access token from the
GCP metadata server ($GCE_METADATA_HOST), and its snapshots and restores go
to the GCS XML API with it; here both are loopback fakes (fakegcs.py), since
a real GCS cannot be reached. The metadata server down or refusing fails a
snapshot (warning, counted, executions unaffected) and a restore
(SANDBOX_UNAVAILABLE naming the metadata server); the token never appears in
codepod's log."""
import os
import socket
import sys
import tempfile
from pathlib import Path

import pytest

import snaphelp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))
import harness  # noqa: E402



def session(md, g, state_dir, prefix, host=None, extra=()):
    e = dict(os.environ)
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        e.pop(k, None)
    e["GCE_METADATA_HOST"] = host or md.host
    args = ["--snapshot-url", "gs://%s/%s" % (g.bucket, prefix), "--s3-endpoint", g.endpoint,
            "--log-level", "debug", "--snapshot-delay", "1", *extra]
    return harness.Session(state_dir, args=args, env=e)


def dead_host():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return "127.0.0.1:%d" % s.getsockname()[1]


def log_text(sess):
    return b"".join(sess.stderr_lines).decode(errors="replace")


WRITE = r"""
const fs = require('fs'), crypto = require('crypto');
fs.mkdirSync('d/e', {recursive: true});
fs.writeFileSync('d/e/f.txt', 'hello');
fs.writeFileSync('big.bin', crypto.randomBytes(20 << 20));
fs.symlinkSync('d/e/f.txt', 'link');
return 1
"""


def test_a_workspace_round_trip_through_gcs(gcs):
    md, g = gcs
    d = tempfile.mkdtemp(prefix="gcs-")
    prefix = snaphelp.new_prefix()
    a = session(md, g, d + "/a", prefix)
    try:
        assert a.run(WRITE, conversation="c-gcs", timeout=120)["status"] == "succeeded"
        snaphelp.wait_event(a, "snapshot.done")
    finally:
        assert a.close(timeout=120) == 0
    before = snaphelp.tree(snaphelp.workspace_of(d + "/a", "c-gcs"))
    h = snaphelp.conv_hash("c-gcs")
    assert "%s/%s/manifest.json" % (prefix, h) in g.objects
    b = session(md, g, d + "/b", prefix)
    try:
        r = b.run("return require('fs').readFileSync('link', 'utf8')", conversation="c-gcs",
                  timeout=120)
        assert r["status"] == "succeeded" and r["result"] == "hello", r
        assert r["usage"]["restoreMs"] >= 0
    finally:
        assert b.close(timeout=120) == 0
    assert snaphelp.tree(snaphelp.workspace_of(d + "/b", "c-gcs")) == before
    # Every request carried a bearer token, none an AWS signature; the
    # 20 MiB archive went up in parts.
    reqs = g.requests()
    assert reqs and all(r[3] == "Bearer" and r[5] == [] for r in reqs)
    assert any(r[0] == "POST" and r[2] == "uploads" for r in reqs)
    # One token per codepod: fetched once, kept.
    assert md.fetches() == 2
    for sess in (a, b):
        text = log_text(sess)
        for tok in md.issued():
            assert tok not in text
        assert "c-gcs" not in text


def test_the_metadata_server_down_during_a_snapshot(gcs):
    md, g = gcs
    d = tempfile.mkdtemp(prefix="gcs-")
    prefix = snaphelp.new_prefix()
    host = dead_host()
    s = session(md, g, d, prefix, host=host)
    try:
        # No snapshot can be looked for: the first execution cannot restore.
        r = s.run("return 0", conversation="c-md")
        assert r["status"] == "failed" and r["error"]["code"] == "SANDBOX_UNAVAILABLE", r
        msg = r["error"]["message"]
        assert "metadata server" in msg and host in msg, msg
        snaphelp.assert_restore_pending(d, "c-md")
    finally:
        s.close()
    assert g.requests() == []


def test_a_snapshot_fails_while_the_metadata_server_is_down_and_then_succeeds(gcs):
    md, g = gcs
    d = tempfile.mkdtemp(prefix="gcs-")
    prefix = snaphelp.new_prefix()
    s = session(md, g, d, prefix)
    try:
        assert s.run("return 0", conversation="c-later")["status"] == "succeeded"
        md.status = 503  # the metadata server answers, without a token
        md.revoke_all()  # and the kept token stops working
        r = s.run("require('fs').writeFileSync('f', 'data'); return 7", conversation="c-later")
        assert r["status"] == "succeeded" and r["result"] == 7
        failed = snaphelp.wait_event(s, "snapshot.failed")
        assert failed["level"] == "warn"
        assert failed["conversation"] == snaphelp.conv_hash("c-later")
        assert "metadata server" in failed["reason"] and "503" in failed["reason"], failed
        md.status = 200
        snaphelp.wait_event(s, "snapshot.done", timeout=60)
    finally:
        s.close()
    text = log_text(s)
    for tok in md.issued():
        assert tok not in text
    assert "%s/%s/manifest.json" % (prefix, snaphelp.conv_hash("c-later")) in g.objects


def test_gs_urls_take_no_keys(gcs, tmp_path):
    md, g = gcs
    creds = tmp_path / "creds"
    creds.write_text("[default]\naws_access_key_id = a\naws_secret_access_key = b\n")
    s = session(md, g, str(tmp_path / "st"), "p", extra=["--s3-credentials-file", str(creds)])
    rc = s.close(timeout=30)
    assert rc != 0
    assert "metadata server" in log_text(s) and "s3://" in log_text(s)
