"""pytest wiring for the snapshot tests: one Ceph cluster (tests/store/ceph.py)
per test module, stopped when the module's tests are done; `gcs`, a fake
GCP metadata server with a fake GCS (fakegcs.py), per test; and every
codepod a test started checked at its end."""
import os
import signal
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import ceph  # noqa: E402
import fakegcs  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "e2e"))
import harness  # noqa: E402

# How a codepod of these tests may end: 0; 2, a configuration refused at
# start (the tests that cause it check it); SIGKILL, sent by the test (a
# crash in the middle of a snapshot or restore). Not a sanitizer's report
# (exit 23, or text on stderr), nor a crash of its own.
ENDS_OK = (0, 2, -signal.SIGKILL)


@pytest.fixture(autouse=True)
def _codepods_end_cleanly(monkeypatch):
    made = []
    init = harness.Session.__init__

    def tracked(self, *a, **kw):
        init(self, *a, **kw)
        made.append(self)
    monkeypatch.setattr(harness.Session, "__init__", tracked)
    yield
    bad = []
    for s in made:
        rc = s.close(timeout=600)
        if rc not in ENDS_OK:
            err = b"".join(s.stderr_lines[-20:]).decode(errors="replace")
            bad.append("codepod exited %s; stderr tail:\n%s" % (rc, err))
        elif rc == 0 and s.stray_stderr():
            bad.append("non-JSON diagnostics on codepod's stderr: %s" % s.stray_stderr()[:5])
    assert not bad, "\n".join(bad)


@pytest.fixture(scope="module")
def store():
    with ceph.running(pytest.fail) as c:
        yield c


@pytest.fixture
def gcs():
    """A fake GCP metadata server and a fake GCS that checks its tokens (fakegcs.py)."""
    md = fakegcs.MetadataServer()
    g = fakegcs.FakeGCS(md)
    try:
        yield md, g
    finally:
        g.stop()
        md.stop()
