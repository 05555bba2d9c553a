"""Shared helpers of the chart tests: paths, helm, rendering."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "codepod"
POD_FILE = CHART / "files" / "sandbox-pod.yaml"
RULES_FILE = CHART / "files" / "rbac-rules.yaml"
EXAMPLES = sorted((CHART / "examples").glob("*.yaml"))
HELM = os.environ.get("HELM") or str(REPO / ".deps" / "helm" / "helm")


def have_helm():
    return os.access(HELM, os.X_OK) or bool(shutil.which(HELM))


def render(*args, release="rel", namespace="codepod"):
    """`helm template` of the chart: the list of objects."""
    r = subprocess.run([HELM, "template", release, str(CHART), "-n", namespace, *args],
                       capture_output=True, text=True, timeout=120)
    if r.returncode:
        raise AssertionError(f"helm template {' '.join(args)}: {r.stderr}")
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def render_fails(*args):
    r = subprocess.run([HELM, "template", "rel", str(CHART), "-n", "codepod", *args],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0, "helm template should have failed"
    return r.stderr


def one(objs, kind, name_suffix=""):
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"].endswith(name_suffix)]
    assert len(found) == 1, f"{kind} *{name_suffix}: {[o['metadata']['name'] for o in found]}"
    return found[0]


def rendered_pod(objs):
    cm = one(objs, "ConfigMap", "-sandbox-pod")
    return yaml.safe_load(cm["data"]["sandbox-pod.yaml"])


# make chart-tests fetches helm first and sets CHART_TESTS_NEED_HELM=1: there a
# missing helm fails instead of skipping.
if os.environ.get("CHART_TESTS_NEED_HELM") == "1" and not have_helm():
    raise RuntimeError(f"no helm at {HELM}: tests/chart/get-helm.sh puts one there")
needs_helm = pytest.mark.skipif(not have_helm(), reason="no helm: run tests/chart/get-helm.sh")
