"""pytest wiring for the snapshot tests: one Ceph cluster (tests/store/ceph.py)
per test module, stopped when the module's tests are done."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import ceph  # noqa: E402


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
