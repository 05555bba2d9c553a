"""pytest wiring for the Kubernetes scenarios: each test module gets
its own fake API server (tests/fakekube/serve) so faults, schedules and reapers
of one module never reach another; codepod sessions come from the e2e harness
(tests/e2e/harness.py) pointed at that server."""
import importlib.util
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

import kubehelp  # noqa: E402
from harness import close_and_check  # noqa: E402


def _fakekube_conftest():
    # The fake's own test helpers (start/stop/Fake), loaded under another name
    # so they do not clash with this conftest.
    path = os.path.join(HERE, "..", "fakekube", "conftest.py")
    spec = importlib.util.spec_from_file_location("fakekube_helpers", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


FK = _fakekube_conftest()


@pytest.fixture(scope="module")
def fake(request, tmp_path_factory):
    # A module may start its fake with more flags: FAKE_ARGS = [...].
    extra = getattr(request.module, "FAKE_ARGS", ())
    f = FK.start(tmp_path_factory, "--exec-path", str(kubehelp.NODE_DIR), *extra)
    f.default_schedule = f.ctl("schedule", method="GET")
    yield kubehelp.FakeApi(f)
    FK.stop(f)


@pytest.fixture(autouse=True)
def _reset_fake(request):
    yield
    if "fake" in request.fixturenames:
        f = request.getfixturevalue("fake")
        f.clear_faults()
        f.set_schedule(**{k: v for k, v in f.raw.default_schedule.items()
                          if k in ("scheduled_ms", "creating_ms", "running_ms", "deletion_ms")})


@pytest.fixture
def codepods(fake, tmp_path):
    """A factory of `codepod serve --stdio --backend kubernetes` sessions on this
    module's fake; every session is closed (or killed) at teardown."""
    made = []

    def make(*args, name=None):
        s = kubehelp.start_session(fake, tmp_path / (name or f"cp{len(made)}"), args)
        made.append(s)
        return s
    yield make
    # Every session is closed and checked, even after one fails its check.
    failures = []
    for s in made:
        try:
            close_and_check(s)
        except AssertionError as e:
            failures.append(str(e))
    assert not failures, "\n".join(failures)
