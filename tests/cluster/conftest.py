"""pytest wiring for the `cluster` group: codepod against the real
single-node Kubernetes of scripts/cluster.sh (started by `make cluster`
before pytest, stopped after).

Two codepods run here, as users run them:
- outside the cluster, `codepod serve --stdio --backend kubernetes` with a
  kubeconfig (the e2e harness's Session, pointed at the cluster through
  CODEPOD_KUBECONFIG), its pods in the namespace EXT_NS;
- inside the cluster, charts/codepod installed by helm (the `chart` fixture),
  with the in-cluster service-account config, reached through its Service.
"""
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))
sys.path.insert(0, str(REPO / "tests" / "serve"))
sys.path.insert(0, str(REPO / "kind"))
sys.path.insert(0, str(HERE))

import clusterhelp  # noqa: E402
import realkube  # noqa: E402
from realkube import _sweep_pods  # noqa: E402,F401  (autouse)

# Every Session of this suite is a Kubernetes one on the real cluster, in
# EXT_NS, and each test's pods there are deleted after it (realkube.py).
realkube.use_cluster()

from harness import close_and_check  # noqa: E402
import harness  # noqa: E402


@pytest.fixture(scope="session")
def cluster():
    """The cluster, Ready, with EXT_NS made (Pod Security `restricted`)."""
    clusterhelp.require_up()
    return clusterhelp


@pytest.fixture
def codepods(cluster, tmp_path):
    """A factory of out-of-cluster codepod sessions on the real cluster;
    every session is closed and checked at teardown."""
    made = []

    def make(*args, name=None):
        s = harness.Session(tmp_path / (name or f"cp{len(made)}"), args)
        made.append(s)
        return s
    yield make
    failures = []
    for s in made:
        try:
            close_and_check(s, timeout=120)
        except AssertionError as e:
            failures.append(str(e))
    assert not failures, "\n".join(failures)


@pytest.fixture(scope="session")
def chart(cluster):
    """charts/codepod installed (or upgraded) by helm, the controller
    Available; its Service's address and the API token."""
    return clusterhelp.install_chart()
