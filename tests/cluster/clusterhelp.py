"""Helpers for the `cluster` group: the real cluster of scripts/cluster.sh
(its kubeconfig, kubectl, helm), the namespaces and the chart the tests use,
and the pods codepod makes there. Imports nothing of the e2e harness, whose
settings conftest.py makes from what this module gives."""
import hashlib
import json
import os
import re
import shlex
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
CLUSTER_SH = REPO / "scripts" / "cluster.sh"
HELM = REPO / ".deps" / "helm" / "helm"
IMAGES_ENV = REPO / ".deps" / "cluster-images" / "images.env"
# The out-of-cluster codepod's pods; the chart's release and its sandboxes.
EXT_NS = "codepod-ext"
RELEASE = "codepod"
RELEASE_NS = "codepod"
SANDBOX_NS = "codepod-sandbox"
MANAGED = "app.kubernetes.io/managed-by"
CONV_LABEL = "codepod.dev/conversation"
WARM_LABEL = "codepod.dev/warm"


def _env():
    out = subprocess.run(["bash", str(CLUSTER_SH), "env"], capture_output=True, text=True)
    found = {}
    for line in out.stdout.splitlines():
        k, _, v = line.removeprefix("export ").partition("=")
        found[k] = shlex.split(v)[0] if v else ""
    return found


ENV = _env()
ADMIN_KUBECONFIG = ENV.get("KUBECONFIG", "")
KUBECTL = str(REPO / ".deps" / "kubectl" / "v1.35" / "kubectl")


def kube_version():
    """KUBE_VERSION of scripts/cluster/versions.sh (the one pin), or the
    release CODEPOD_KUBE_VERSION tries instead."""
    if os.environ.get("CODEPOD_KUBE_VERSION"):
        return os.environ["CODEPOD_KUBE_VERSION"]
    for line in (REPO / "scripts" / "cluster" / "versions.sh").read_text().splitlines():
        m = re.fullmatch(r"KUBE_VERSION=\$\{CODEPOD_KUBE_VERSION:-([0-9.]+)\}", line.strip())
        if m:
            return m.group(1)
    raise AssertionError("no KUBE_VERSION in scripts/cluster/versions.sh")


def images():
    """CLUSTER_* of images.env: the imported images' names."""
    found = {}
    for line in IMAGES_ENV.read_text().splitlines():
        k, _, v = line.partition("=")
        found[k] = shlex.split(v)[0] if v else ""
    return found


def kubectl(*args, input=None, check=True, kubeconfig=None, timeout=120):
    r = subprocess.run([KUBECTL, "--kubeconfig", kubeconfig or ADMIN_KUBECONFIG, *args],
                       input=input, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)}: {r.returncode}: {r.stderr.strip()}")
    return r


def kjson(*args, **kw):
    return json.loads(kubectl(*args, "-o", "json", **kw).stdout)


def helm(*args, timeout=600):
    r = subprocess.run([str(HELM), "--kubeconfig", ADMIN_KUBECONFIG, *args],
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)}: {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def require_up():
    r = subprocess.run(["bash", str(CLUSTER_SH), "status"])
    if r.returncode != 0 or not ADMIN_KUBECONFIG:
        raise AssertionError("the cluster is not up: scripts/cluster.sh up (make cluster does)")


def kubeconfig_for(namespace, path=None, token=None):
    """A copy of the admin kubeconfig whose context names `namespace` (and
    whose user is `token`, when given): codepod outside the cluster reads it."""
    with open(ADMIN_KUBECONFIG) as f:
        kc = yaml.safe_load(f)
    kc["contexts"][0]["context"]["namespace"] = namespace
    if token is not None:
        kc["users"][0]["user"] = {"token": token}
    if path is None:
        fd, path = tempfile.mkstemp(prefix="codepod-cluster-", suffix=".kubeconfig")
        os.close(fd)
    with open(path, "w") as f:
        json.dump(kc, f)
    return path


def ext_kubeconfig():
    if not ADMIN_KUBECONFIG or not os.path.exists(ADMIN_KUBECONFIG):
        return "/nonexistent/cluster-is-not-up"
    return kubeconfig_for(EXT_NS)


def ensure_namespace(ns):
    """The namespace, with Pod Security `restricted` enforced, and its
    `default` ServiceAccount (made by the controller manager)."""
    doc = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest"}}}
    kubectl("apply", "-f", "-", input=json.dumps(doc))
    wait_until(lambda: kubectl("-n", ns, "get", "serviceaccount", "default", check=False).returncode == 0,
               60, f"the default ServiceAccount of {ns}")


def wait_until(fn, timeout, what, interval=0.25):
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s (last: {v!r})")
        time.sleep(interval)


def conv_label(key, ns):
    return hashlib.sha256(ns.encode() + b"\0" + key.encode()).hexdigest()[:40]


def pods(ns, selector=None, live=True):
    args = ["-n", ns, "get", "pods"] + (["-l", selector] if selector else [])
    items = kjson(*args)["items"]
    if live:
        items = [p for p in items if not p["metadata"].get("deletionTimestamp")]
    return items


def conv_pods(key, ns=EXT_NS, live=True):
    return pods(ns, f"{MANAGED}=codepod,{CONV_LABEL}={conv_label(key, ns)}", live)


def is_ready(pod):
    return (pod.get("status", {}).get("phase") == "Running"
            and not pod["metadata"].get("deletionTimestamp")
            and any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in pod.get("status", {}).get("conditions", [])))


def install_chart(extra=()):
    """helm upgrade --install of charts/codepod with tests/cluster/values.yaml
    and the imported images; waits for the rollout. Returns the Service's
    address and the token."""
    img = images()
    ctrl_repo, _, ctrl_tag = img["CLUSTER_CONTROLLER_IMAGE"].rpartition(":")
    sbx_repo, _, sbx_tag = img["CLUSTER_SANDBOX_IMAGE"].rpartition(":")
    helm("upgrade", "--install", RELEASE, str(REPO / "charts" / "codepod"),
         "--namespace", RELEASE_NS, "--create-namespace",
         "-f", str(REPO / "tests" / "cluster" / "values.yaml"),
         "--set", f"image.repository={ctrl_repo}", "--set", f"image.tag={ctrl_tag}",
         "--set", f"sandbox.image.repository={sbx_repo}", "--set", f"sandbox.image.tag={sbx_tag}",
         *extra, "--wait", "--timeout", "5m")
    kubectl("-n", RELEASE_NS, "rollout", "status", f"deployment/{RELEASE}", "--timeout=300s")
    svc = kjson("-n", RELEASE_NS, "get", "service", RELEASE)
    with open(REPO / "tests" / "cluster" / "values.yaml") as f:
        token = yaml.safe_load(f)["api"]["token"]
    return {"host": svc["spec"]["clusterIP"], "port": svc["spec"]["ports"][0]["port"], "token": token}


def cluster_up():
    """scripts/cluster.sh up: starts again what stopped (etcd running)."""
    r = subprocess.run(["bash", str(CLUSTER_SH), "up"], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise AssertionError(f"scripts/cluster.sh up: {r.returncode}: {r.stderr[-2000:]}")


def stop_component(name):
    """Stops one of the cluster's processes as a crash would (SIGKILL)."""
    run_dir = os.environ.get("CODEPOD_CLUSTER_RUN", "/run/codepod-cluster")
    with open(os.path.join(run_dir, f"{name}.pid")) as f:
        pid = int(f.read())
    os.kill(pid, 9)
    wait_until(lambda: not os.path.exists(f"/proc/{pid}") or _zombie(pid), 30, f"{name} to end")


def _zombie(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1].startswith("Z")
    except OSError:
        return True


def kill_container(pod, ns):
    """The runtime kills the pod's container (crictl stop, timeout 0)."""
    bin_dir = REPO / ".deps" / "kube" / f"v{kube_version()}" / "bin"
    run_dir = os.environ.get("CODEPOD_CLUSTER_RUN", "/run/codepod-cluster")
    crictl = [str(bin_dir / "crictl"), "--runtime-endpoint", f"unix://{run_dir}/containerd.sock"]
    ids = subprocess.run([*crictl, "ps", "-q", "--label", f"io.kubernetes.pod.name={pod}",
                          "--label", f"io.kubernetes.pod.namespace={ns}"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert ids, f"no container of pod {pod}"
    subprocess.run([*crictl, "stop", "--timeout", "0", *ids], capture_output=True, check=True)
