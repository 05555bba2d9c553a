"""Where the Kubernetes backend finds its cluster (README "Using it"):
`--kubeconfig`, else `$KUBECONFIG`, else `~/.kube/config`, else the in-cluster
service account; `--context` picks a context of the kubeconfig instead of its
current one.

Every source here leads to this module's fake API server, each with a
namespace of its own (a context's namespace, the service account's namespace
file), so where an execution's pod was made says which source codepod used;
the ones it must not use are there as well, each with its namespace. The
unreachable context is a server on a closed port."""
import os
import shutil
import socket
import subprocess

import pytest
import yaml

import harness
from harness import CODEPOD_BIN, Session, assert_failed, assert_ok, close_and_check
from kubehelp import HOSTNAME_JS, new_conv, result_of

NAMESPACES = ("from-flag", "from-env", "from-home", "from-cluster", "ctx-up", "ctx-other")
IN_CLUSTER_ENV = ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "POD_NAMESPACE")


@pytest.fixture(scope="module")
def namespaces(fake):
    for ns in NAMESPACES:
        s, _, b = fake.raw.request("POST", "/api/v1/namespaces", {
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        assert s in (201, 409), b
    return NAMESPACES


@pytest.fixture(autouse=True)
def own_flags(monkeypatch):
    # The e2e harness adds its own --kubeconfig under CODEPOD_BACKEND=kubernetes:
    # these tests give codepod exactly the options they are about.
    monkeypatch.setattr(harness, "backend_args", lambda: [])


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    return port


def kubeconfig(fake, path, contexts, current):
    """A copy of the fake's kubeconfig with contexts {name: (namespace,
    server or None for the fake's)}, `current` its current context."""
    with open(fake.kubeconfig) as f:
        cfg = yaml.safe_load(f)
    cluster, user = cfg["clusters"][0], cfg["users"][0]
    cfg["clusters"], cfg["contexts"] = [], []
    for name, (ns, server) in contexts.items():
        cfg["clusters"].append({"name": name, "cluster": dict(cluster["cluster"],
                                                              server=server or cluster["cluster"]["server"])})
        cfg["contexts"].append({"name": name, "context": {"cluster": name, "user": user["name"],
                                                          "namespace": ns}})
    cfg["current-context"] = current
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        yaml.safe_dump(cfg, f)
    return path


def one(fake, path, ns):
    return kubeconfig(fake, path, {"only": (ns, None)}, "only")


def service_account(fake, d, ns):
    """A service account folder as the kubelet mounts it, for the fake."""
    os.makedirs(d)
    with open(os.path.join(d, "token"), "w") as f:
        f.write(fake.raw.token)
    shutil.copy(fake.raw.ca, os.path.join(d, "ca.crt"))
    with open(os.path.join(d, "namespace"), "w") as f:
        f.write(ns)
    return d


def env_without(*names, **more):
    env = {k: v for k, v in os.environ.items() if k not in names}
    env.update(more)
    return env


def where_it_ran(fake, s, want_ns):
    """Runs one execution; asserts its pod is in `want_ns` on the fake."""
    res = assert_ok(result_of(s, s.execute(HOSTNAME_JS, tools=[], conversation=new_conv("kc")), 120))
    pod = res["result"]
    status, _, body = fake.raw.request("GET", f"/api/v1/namespaces/{want_ns}/pods/{pod}")
    assert status == 200, f"pod {pod} is not in namespace {want_ns}: {status} {body}"
    return pod


def start(state, args=(), env=None, wrap=()):
    return Session(state, args=["--backend", "kubernetes", "--log-level", "debug", *args],
                   env=env, wrap=wrap)


def config_used(s):
    return [e["config"] for e in s.log_events("kube.start")]


def in_cluster_env(fake):
    return {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(fake.raw.port)}


def test_kubeconfig_flag_wins_over_env_home_and_in_cluster(fake, namespaces, tmp_path):
    flag = one(fake, str(tmp_path / "flag.yaml"), "from-flag")
    envkc = one(fake, str(tmp_path / "env.yaml"), "from-env")
    one(fake, str(tmp_path / "home" / ".kube" / "config"), "from-home")
    env = env_without(*IN_CLUSTER_ENV, KUBECONFIG=envkc, HOME=str(tmp_path / "home"),
                      **in_cluster_env(fake))
    s = start(tmp_path / "state", ["--kubeconfig", flag], env)
    try:
        where_it_ran(fake, s, "from-flag")
    finally:
        close_and_check(s)
    assert config_used(s) == [flag]


def test_kubeconfig_env_wins_over_home_and_in_cluster(fake, namespaces, tmp_path):
    envkc = one(fake, str(tmp_path / "env.yaml"), "from-env")
    one(fake, str(tmp_path / "home" / ".kube" / "config"), "from-home")
    env = env_without(*IN_CLUSTER_ENV, KUBECONFIG=envkc, HOME=str(tmp_path / "home"),
                      **in_cluster_env(fake))
    s = start(tmp_path / "state", (), env)
    try:
        where_it_ran(fake, s, "from-env")
    finally:
        close_and_check(s)
    assert config_used(s) == [envkc]


def test_home_kube_config_wins_over_in_cluster(fake, namespaces, tmp_path):
    home_kc = one(fake, str(tmp_path / "home" / ".kube" / "config"), "from-home")
    env = env_without("KUBECONFIG", *IN_CLUSTER_ENV, HOME=str(tmp_path / "home"),
                      **in_cluster_env(fake))
    s = start(tmp_path / "state", (), env)
    try:
        where_it_ran(fake, s, "from-home")
    finally:
        close_and_check(s)
    assert config_used(s) == [home_kc]


def test_in_cluster_service_account_when_there_is_no_kubeconfig(fake, namespaces, tmp_path):
    # The service account where a pod has it, /var/run/secrets/...: in a
    # mount namespace of codepod's own, over a /run of its own, so the host's
    # is untouched. The token and CA are the fake's; the namespace file says
    # where pods go.
    if os.geteuid() != 0:
        pytest.skip("a mount namespace for the service account folder needs root")
    sa = service_account(fake, str(tmp_path / "sa"), "from-cluster")
    wrap = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount -t tmpfs tmpfs /run && d=/run/secrets/kubernetes.io/serviceaccount && '
            'mkdir -p "$d" && cp "$1"/* "$d"/ && shift && exec "$@"', "sh", sa]
    probe = subprocess.run([*wrap, "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no private mount namespace here: {probe.stderr[-300:]!r}")
    home = tmp_path / "home"  # no .kube/config in it
    home.mkdir()
    env = env_without("KUBECONFIG", *IN_CLUSTER_ENV, HOME=str(home), **in_cluster_env(fake))
    s = start(tmp_path / "state", (), env, wrap)
    try:
        where_it_ran(fake, s, "from-cluster")
    finally:
        close_and_check(s)
    assert config_used(s) == ["the in-cluster service account"]


@pytest.fixture
def three_contexts(fake, namespaces, tmp_path):
    down = f"https://127.0.0.1:{closed_port()}"
    return kubeconfig(fake, str(tmp_path / "contexts.yaml"),
                      {"up": ("ctx-up", None), "other": ("ctx-other", None),
                       "down": ("default", down)}, "other"), down


def test_without_context_the_current_one_is_used(fake, three_contexts, tmp_path):
    kc, _ = three_contexts
    s = start(tmp_path / "state", ["--kubeconfig", kc])
    try:
        where_it_ran(fake, s, "ctx-other")
    finally:
        close_and_check(s)


def test_context_picks_another_context_of_the_kubeconfig(fake, three_contexts, tmp_path):
    kc, _ = three_contexts
    s = start(tmp_path / "state", ["--kubeconfig", kc, "--context", "up"])
    try:
        where_it_ran(fake, s, "ctx-up")
    finally:
        close_and_check(s)


def test_context_of_an_unreachable_server_is_that_server(fake, three_contexts, tmp_path):
    kc, down = three_contexts
    s = start(tmp_path / "state", ["--kubeconfig", kc, "--context", "down"])
    try:
        res = result_of(s, s.execute("return 1;", tools=[], conversation=new_conv("down")), 120)
        err = assert_failed(res, "SANDBOX_UNAVAILABLE")
        assert down.split("//")[1] in err["message"], err
    finally:
        close_and_check(s)
    assert [e["server"] for e in s.log_events("kube.start")] == [down]


def test_an_unknown_context_is_refused_at_start(fake, three_contexts, tmp_path):
    kc, _ = three_contexts
    r = subprocess.run([CODEPOD_BIN, "serve", "--stdio", "--state-dir", str(tmp_path / "state"),
                        "--backend", "kubernetes", "--kubeconfig", kc, "--context", "nosuch"],
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 2 and r.stdout == b"", (r.returncode, r.stdout, err)
    assert '"nosuch"' in err, err
