"""The local sandbox hides codepod's own `$HOME` and the host's `/run`
(runner/local/local_sandbox.c, SECURITY.md "hidden"): a program sees an empty
folder at each, whatever the host's file modes would let its user read.

As root the program runs as a sandbox user, so only a home others may read
(0755, as Debian makes them) shows the hiding; unprivileged, the program runs
as codepod's own user, for whom the hiding is all that stands between the
program and that user's home. Both modes are run when the test is root.

The home lives under /var/tmp, which the sandbox sees as the host: a folder
under /tmp proves nothing (the sandbox's /tmp is a private tmpfs) and the
checkout may be under /tmp."""
import json
import os
import shutil
import tempfile
import uuid

import pytest

from harness import (UNPRIV_UID, Session, assert_ok, close_and_check, local_backend_only,
                     unprivileged_wrap)

pytestmark = local_backend_only

IS_ROOT = os.geteuid() == 0


def modes():
    return ["root", "unprivileged"] if IS_ROOT else ["unprivileged"]


PROBE = """
const fs = require('node:fs');
const list = (p) => { try { return fs.readdirSync(p).sort(); } catch (e) { return e.code; } };
const read = (p) => { try { return fs.readFileSync(p, 'utf8'); } catch (e) { return e.code; } };
fs.writeFileSync('in-workspace.txt', 'x');
return { home: list(HOME), secret: read(HOME + '/secret.txt'), inner: list(HOME + '/inner'),
         run: list('/run'), ws: list('.') };
"""


@pytest.fixture(params=modes())
def home(request):
    """(mode, a home folder under /var/tmp with a secret in it, env, wrap)."""
    mode = request.param
    top = tempfile.mkdtemp(prefix="codepod-home-", dir="/var/tmp")
    os.chmod(top, 0o755)
    h = os.path.join(top, "home")
    os.makedirs(os.path.join(h, "inner"))
    marker = f"home secret {uuid.uuid4().hex}"
    for p in (os.path.join(h, "secret.txt"), os.path.join(h, "inner", "more.txt")):
        with open(p, "w") as f:
            f.write(marker)
    env, wrap = dict(os.environ, HOME=h), ()
    if mode == "root":
        # readable by anyone: only the hiding keeps the sandbox user out
        for d in (h, os.path.join(h, "inner")):
            os.chmod(d, 0o755)
    elif IS_ROOT:
        wrap = unprivileged_wrap()
        if not wrap:
            shutil.rmtree(top)
            pytest.skip(f"uid {UNPRIV_UID} cannot run this checkout's codepod and Node")
        # the user's own, 0700: the program runs as that very user
        for root, dirs, files in os.walk(top):
            for n in [root, *(os.path.join(root, x) for x in dirs + files)]:
                os.chown(n, UNPRIV_UID, UNPRIV_UID)
        os.chmod(h, 0o700)
    try:
        yield mode, h, marker, env, wrap
    finally:
        shutil.rmtree(top, ignore_errors=True)


def probe(session, h):
    js = f"const HOME = {json.dumps(h)};\n" + PROBE
    return assert_ok(session.run(js, tools=[], timeout=120))["result"]


def test_home_and_run_are_empty_for_the_program(home):
    mode, h, marker, env, wrap = home
    host_run = os.listdir("/run")
    assert host_run, "the host's /run is empty: nothing to hide"
    state = os.path.join(os.path.dirname(h), "state")
    os.makedirs(state)
    if mode == "unprivileged" and IS_ROOT:
        os.chown(state, UNPRIV_UID, UNPRIV_UID)
    s = Session(state, env=env, wrap=wrap)
    try:
        r = probe(s, h)
    finally:
        close_and_check(s)
    assert r["ws"] == ["in-workspace.txt"], r  # the program ran where it should
    assert r["home"] == [], f"{mode}: the program sees codepod's home: {r}"
    assert r["secret"] == "ENOENT" and r["inner"] == "ENOENT", f"{mode}: {r}"
    assert r["run"] == [], f"{mode}: the program sees the host's /run ({host_run}): {r}"
    assert marker not in json.dumps(r)


def test_home_stays_hidden_around_a_state_folder_inside_it(home):
    # codepod's default state folder is $HOME/.local/state/codepod: the home
    # is hidden and the program still reaches its own workspace through it,
    # and sees nothing of the home but the folders on that way.
    mode, h, marker, env, wrap = home
    state = os.path.join(h, ".local", "state", "codepod")
    os.makedirs(state)
    if mode == "unprivileged" and IS_ROOT:
        for d in (os.path.join(h, ".local"), os.path.join(h, ".local", "state"), state):
            os.chown(d, UNPRIV_UID, UNPRIV_UID)
    s = Session(state, env=env, wrap=wrap)
    try:
        r = probe(s, h)
    finally:
        close_and_check(s)
    assert r["ws"] == ["in-workspace.txt"], r
    assert r["home"] == [".local"], f"{mode}: the program sees codepod's home: {r}"
    assert r["secret"] == "ENOENT" and r["inner"] == "ENOENT", f"{mode}: {r}"
    assert r["run"] == [], f"{mode}: {r}"
    assert marker not in json.dumps(r)
