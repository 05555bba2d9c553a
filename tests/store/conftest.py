"""pytest wiring for the snapshot tests: one Ceph cluster (tests/store/ceph.py)
per test module, stopped when the module's tests are done; and `gcs`, a fake
GCP metadata server with a fake GCS (fakegcs.py), per test."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import ceph  # noqa: E402
import fakegcs  # noqa: E402


@pytest.fixture(scope="module")
def store():
    try:
        c = ceph.Ceph.start()
    except ceph.CephUnavailable as e:
        pytest.fail("the test store did not start: %s" % e)
    try:
        yield c
    finally:
        c.stop()


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
