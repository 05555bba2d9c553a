"""The hostile-program suite (SECURITY.md): what a model-written
program set on escaping might try, each case asserting its exact outcome and
that codepod then serves the next execution.

Modes (the `hs` fixture is parametrized over them):
- local backend, codepod as root ("root"): programs run as the sandbox user;
- local backend, codepod unprivileged ("unprivileged"): the test starts
  codepod through setpriv as UNPRIV_UID, with a state folder of that user;
  when the test itself is not root this is the only local mode;
- CODEPOD_BACKEND=kubernetes ("pod"): the fake API server the e2e harness
  starts, with pods made from the chart's template
  (charts/codepod/files/sandbox-pod.yaml), whose securityContext the fake
  applies to every exec.

Files a program must not reach, and the paths it must not write, are put in
`hs.host`, a folder under /var/tmp: the sandbox sees the host there on every
machine, wherever the checkout lives. Not under /tmp (the sandbox's /tmp is a
private tmpfs, so a secret there is ENOENT and a write lands in the tmpfs:
that proves nothing about the host), nor in the checkout (which may be under
/tmp itself).
"""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "e2e"))

import harness  # noqa: E402
from harness import BACKEND, CODEPOD_BIN, NODE_DIR, REPO, Session, assert_ok  # noqa: E402

UNPRIV_UID = harness.UNPRIV_UID  # no user of its own: the suite's unprivileged codepod
POD_TEMPLATE = REPO / "charts" / "codepod" / "files" / "sandbox-pod.yaml"
IS_ROOT = os.geteuid() == 0
def modes():
    if BACKEND == "kubernetes":
        return ["pod"]
    return ["root", "unprivileged"] if IS_ROOT else ["unprivileged"]


def _setpriv(uid):
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]


def _runnable_by(uid):
    """Can `uid` run codepod and the project's Node from where they are?"""
    node = NODE_DIR / "node"
    r = subprocess.run([*_setpriv(uid), "sh", "-c", 'test -x "$0" && test -x "$1"',
                        CODEPOD_BIN, str(node)], capture_output=True)
    return r.returncode == 0


def _link_or_copy(src, dst):
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _reachable_copy():
    """As root, with a checkout UNPRIV_UID cannot search (under /root,
    mode 0700): codepod and Node linked (or copied) into a folder under
    /var/tmp it can, and every mode of this suite run from there, with its
    folders there too, so that the unprivileged cases run from any checkout
    rather than skip. The folder, or None when the checkout is reachable."""
    global CODEPOD_BIN, NODE_DIR
    if not IS_ROOT or BACKEND != "local" or _runnable_by(UNPRIV_UID):
        return None
    top = Path(tempfile.mkdtemp(prefix="codepod-hostile-bin-", dir="/var/tmp"))
    atexit.register(shutil.rmtree, top, True)
    (top / "node" / "bin").mkdir(parents=True)
    for d in (top, top / "node", top / "node" / "bin"):
        os.chmod(d, 0o755)
    _link_or_copy(CODEPOD_BIN, top / "codepod")
    _link_or_copy(NODE_DIR / "node", top / "node" / "bin" / "node")
    CODEPOD_BIN = harness.CODEPOD_BIN = str(top / "codepod")
    NODE_DIR = harness.NODE_DIR = top / "node" / "bin"
    os.environ["CODEPOD_NODE"] = str(NODE_DIR / "node")
    return top


# (set before the test modules import CODEPOD_BIN from harness)
REACHABLE = _reachable_copy()


def new_folder():
    """A new folder (0755) of this suite's, which every mode can reach: in
    the checkout, or beside the linked copy when the checkout is closed."""
    top = (REACHABLE or HERE) / f"codepod-hostile-{uuid.uuid4().hex[:12]}"
    top.mkdir(mode=0o755)
    return top


class Hostile:
    """One codepod session in one mode, with a private folder in the checkout
    (its state dir: under /tmp when the checkout is) and one under /var/tmp
    (`host`, for the host files a program must not reach or write)."""

    def __init__(self, mode, args=(), home=None, state=None, wrap=(), template="chart"):
        """args: more codepod options (e.g. --sandbox-user); home: codepod's
        $HOME, state: its state folder (folders of the test's choosing, not
        there yet for state); wrap: a command codepod is started under (as
        root; the unprivileged mode's setpriv comes after it); template: in
        pod mode, "chart" (the chart's pod template) or "builtin" (codepod's
        own)."""
        self.mode = mode
        self.dir = new_folder()
        state = Path(state) if state is not None else self.dir / "state"
        self.state = state
        args, env, wrap = list(args), os.environ.copy(), tuple(wrap)
        if mode == "pod" and template == "chart":
            args += ["--pod-template", str(POD_TEMPLATE)]
        if mode == "unprivileged" and IS_ROOT:
            if not _runnable_by(UNPRIV_UID):
                shutil.rmtree(self.dir)
                pytest.skip(f"uid {UNPRIV_UID} cannot run {CODEPOD_BIN} and .deps/node "
                            "from this checkout (a folder on the way is not searchable)")
            state.mkdir()
            own_home = self.dir / "home"
            own_home.mkdir()
            for p in (state, own_home):
                os.chown(p, UNPRIV_UID, UNPRIV_UID)
            env["HOME"] = str(own_home)
            wrap = (*wrap, *_setpriv(UNPRIV_UID))
        if home is not None:
            env["HOME"] = str(home)
        self.uid = UNPRIV_UID if mode == "unprivileged" and IS_ROOT else os.geteuid()
        # searchable by all: what stops the program is each file's own mode
        self.host = Path(tempfile.mkdtemp(prefix="codepod-hostile-", dir="/var/tmp"))
        os.chmod(self.host, 0o755)
        try:
            self.session = Session(state, args=args, env=env, wrap=wrap)
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            shutil.rmtree(self.host, ignore_errors=True)
            raise

    def run(self, js, timeout=120, **kw):
        return self.session.run(js, timeout=timeout, **kw)

    def next_works(self):
        """Every case ends here: codepod still serves an ordinary execution."""
        res = assert_ok(self.session.run("console.log('next'); return 'next';", timeout=120))
        assert res["result"] == "next" and res["logs"] == "next\n", res

    def secret(self, text, mode=0o600):
        """A file only its owner (the test's user) may read, where the sandbox sees the host."""
        p = self.host / f"secret-{uuid.uuid4().hex[:8]}"
        p.write_text(text)
        os.chmod(p, mode)
        return p

    def close(self):
        try:
            return self.session.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
            shutil.rmtree(self.host, ignore_errors=True)


def _session(h):
    yield h
    err = b"".join(h.session.stderr_lines[-20:]).decode(errors="replace")
    rc = h.close()
    assert rc == 0, f"codepod exited {rc} after EOF on stdin; stderr tail:\n{err}"
    assert not h.session.stray, f"stray lines on codepod's stdout: {h.session.stray[:5]}"


local_only = pytest.mark.skipif(BACKEND != "local", reason="a property of the local backend")


@pytest.fixture(params=modes())
def hs(request):
    yield from _session(Hostile(request.param))
