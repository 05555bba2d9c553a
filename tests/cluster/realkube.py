"""pytest plugin for suites run on the real cluster (`-p realkube`, with
tests/cluster on sys.path; tests/cluster/conftest.py loads it too): every
codepod Session of the e2e harness is a Kubernetes one on the cluster, in
clusterhelp.EXT_NS (CODEPOD_BACKEND, CODEPOD_KUBECONFIG, set before the
harness is imported), and after each test the pods it made there are
deleted: the node has two CPUs, and twenty pods of 100m requests fill it."""
import os

import pytest

import clusterhelp as ch


def use_cluster():
    """Points the harness at the cluster (before it is imported); once."""
    if os.environ.get("CODEPOD_KUBECONFIG"):
        return
    os.environ["CODEPOD_BACKEND"] = "kubernetes"
    os.environ["CODEPOD_KUBECONFIG"] = ch.ext_kubeconfig()
    if ch.ADMIN_KUBECONFIG:
        ch.require_up()
        ch.ensure_namespace(ch.EXT_NS)


def pytest_configure(config):
    use_cluster()


@pytest.fixture(autouse=True)
def _sweep_pods():
    yield
    ch.kubectl("-n", ch.EXT_NS, "delete", "pods", "--all", "--wait=false", check=False)
