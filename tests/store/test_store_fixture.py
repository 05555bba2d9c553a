"""The test store itself: it checks signatures as S3 does (so a test that
passes against it proves codepod signs), and stop() leaves none of its
processes behind."""
import os

import ceph


def test_the_store_checks_signatures(store):
    st, _ = store.request("PUT", "/%s/fixture-probe" % store.bucket, body=b"x")
    assert st == 200
    st, body = store.request("GET", "/%s/fixture-probe" % store.bucket, secret="not-the-secret")
    assert st == 403 and b"SignatureDoesNotMatch" in body
    st, body = store.request("GET", "/%s/fixture-probe" % store.bucket)
    assert (st, body) == (200, b"x")


def test_stop_ends_exactly_its_processes():
    c = ceph.Ceph.start()
    pids = [c._pid_of(n) for n in ("client.rgw", "osd.0", "mon.a")]
    assert all(pids), pids
    c.stop()
    for pid in pids:
        assert not os.path.exists("/proc/%d" % pid) or c.conf.encode() not in open(
            "/proc/%d/cmdline" % pid, "rb").read()
    assert not os.path.exists(c.dir)
