"""Every file codepod reads that a program must not see is hidden from the
sandbox by one rule: an option marked as naming a secret file registers its
argument, and the local backend covers every registered path (and its real
path), and PID 1's command line (bubblewrap's) names none of them. The list of such options is read from `codepod --help`, which says
"hidden from programs" for each, so a `-file` option added without the mark
fails here, and one added with it is tried here like the others.

The files live where the sandbox sees the host (hs.host, under /var/tmp) and
are readable by anyone (0644): only the hiding stops the program, not the
file's mode or owner."""
import json
import os
import re
import subprocess
import sys
import uuid

import pytest

from hostile import HERE, IS_ROOT, local_only
from harness import CODEPOD_BIN

sys.path.insert(0, str(HERE.parent / "serve"))
import harness as h  # noqa: E402
from util import Pump  # noqa: E402
from wssession import Server  # noqa: E402

HIDDEN = "hidden from programs"


def help_options():
    """{name: help text} for every option `codepod --help` lists."""
    out = subprocess.run([CODEPOD_BIN, "--help"], capture_output=True, text=True,
                         check=True).stdout
    opts, name = {}, None
    for line in out.splitlines():
        m = re.match(r"^  (?:-\w, )?--([a-z0-9-]+)(?: \S+)?\s*(.*)$", line)
        if m:
            name = m.group(1)
            opts[name] = m.group(2)
        elif name and line.startswith(" " * 10):
            opts[name] += " " + line.strip()
        else:
            name = None
    return opts


OPTIONS = help_options()
SECRET_OPTS = sorted(n for n, text in OPTIONS.items() if HIDDEN in text)

# What each secret file holds for codepod to start with it (the token is
# written by Server itself). A new secret option needs its line here.
CONTENT = {
    "token-file": None,
    "audit-file": '{"event":"audit","id":"earlier"}\n',
    "webhook-secret-file": "whsec-" + uuid.uuid4().hex + "\n",
}


def test_every_file_option_is_registered_as_a_secret():
    files = sorted(n for n in OPTIONS if n.endswith("-file"))
    assert files, "no -file option in --help: the parse above is wrong"
    unmarked = [n for n in files if HIDDEN not in OPTIONS[n]]
    assert not unmarked, (f"--{unmarked[0]} names a file but is not marked CLI_SECRET "
                          "(cli/options.h): programs could read it")
    assert set(SECRET_OPTS) <= set(CONTENT), (
        f"a secret option without a case in this test: {sorted(set(SECRET_OPTS) - set(CONTENT))}")


def _serve(hs, server_dir, args):
    """A serve --listen of hs's mode (unprivileged: as hs.uid) with its state under server_dir."""
    state = server_dir / "state"
    state.mkdir(parents=True)
    if hs.mode == "unprivileged" and IS_ROOT:
        for p in (server_dir, state):
            os.chown(p, hs.uid, hs.uid)
        launcher = server_dir / "codepod-as-user"
        launcher.write_text(f"#!/bin/sh\nexec setpriv --reuid={hs.uid} --regid={hs.uid} "
                            f"--clear-groups -- {h.CODEPOD_BIN} \"$@\"\n")
        launcher.chmod(0o755)
        saved = h.CODEPOD_BIN
        h.CODEPOD_BIN = str(launcher)  # Server builds its command line from it
        try:
            return Server(state, args=args)
        finally:
            h.CODEPOD_BIN = saved
    return Server(state, args=args)


def _readable(hs, path):
    """Anyone may read it (and codepod's user owns it): only hiding can stop the program."""
    os.chmod(path, 0o644)
    if hs.mode == "unprivileged" and IS_ROOT:
        os.chown(path, hs.uid, hs.uid)


READ = """const fs = require('node:fs');
const read = (p) => { try { return fs.readFileSync(p, 'utf8'); } catch (e) { return e.code; } };
"""


def _read_as_program(srv, paths, with_cmdline=False):
    pump = Pump(srv.connect())
    js = READ + f"const got = {json.dumps([str(p) for p in paths])}.map(read);\n"
    js += ("return [got, read('/proc/1/cmdline')];" if with_cmdline else "return got;")
    eid = "sec-" + uuid.uuid4().hex[:8]
    pump.send({"type": "execute", "id": eid, "conversation": eid, "js": js, "tools": []})
    m = pump.result(eid)
    pump.ws.close()
    assert m["type"] == "result" and m["status"] == "succeeded", m
    return m["result"]


@local_only
@pytest.mark.parametrize("opt", SECRET_OPTS)
def test_a_secret_file_is_unreadable_by_programs(hs, opt):
    server_dir = hs.host / "serve"
    path = server_dir / f"{opt}-{uuid.uuid4().hex[:6]}"
    server_dir.mkdir()
    srv = None
    try:
        if opt == "token-file":
            srv = _serve(hs, server_dir, [])
            path, text = srv.token_file, srv.token
        else:
            text = CONTENT[opt]
            path.write_text(text)
            _readable(hs, path)
            srv = _serve(hs, server_dir, [f"--{opt}", str(path)])
        _readable(hs, path)
        got, cmdline = _read_as_program(srv, [path], with_cmdline=True)
        assert text.strip() not in json.dumps(got), f"the program read --{opt}"
        # PID 1 is bubblewrap: its command line names no hidden path
        assert cmdline.split("\0")[:3] == ["bwrap", "--args", "4"], cmdline
        assert str(path) not in cmdline and str(server_dir) not in cmdline, cmdline
        # covered by /dev/null on a nodev mount: no one can open it
        assert got == ["EACCES"], got
        assert text.strip() in path.read_text()
    finally:
        if srv is not None:
            assert srv.stop() == 0
    hs.next_works()


@local_only
def test_a_secret_named_through_a_symlink_is_hidden_at_its_target_too(hs):
    """--webhook-secret-file given as a symlink: the link and its target are covered."""
    server_dir = hs.host / "serve"
    server_dir.mkdir()
    real = server_dir / "real-secret"
    text = CONTENT["webhook-secret-file"]
    real.write_text(text)
    _readable(hs, real)
    link = server_dir / "link-secret"
    link.symlink_to(real)
    srv = None
    try:
        srv = _serve(hs, server_dir, ["--webhook-secret-file", str(link)])
        got = _read_as_program(srv, [real, link])
        assert got == ["EACCES", "EACCES"], got
    finally:
        if srv is not None:
            assert srv.stop() == 0
    hs.next_works()
