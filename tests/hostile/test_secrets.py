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
    "continuation-key-file": "k1:" + uuid.uuid4().hex + uuid.uuid4().hex + "\n",
    "s3-credentials-file": ("[default]\naws_access_key_id = AKIDTEST\n"
                            "aws_secret_access_key = " + uuid.uuid4().hex + "\n"),
    "snapshot-key-file": "k1 " + uuid.uuid4().hex + uuid.uuid4().hex + "\n",
    "otlp-headers-file": "X-Api-Key: " + uuid.uuid4().hex + "\n",
}
# What else an option needs beside its file for codepod to start.
WITH = {"otlp-headers-file": ["--otlp-endpoint", "http://127.0.0.1:9"]}


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
            srv = _serve(hs, server_dir, [f"--{opt}", str(path), *WITH.get(opt, [])])
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


POD_LOOK = """const fs = require('node:fs');
const path = require('node:path');
const seen = [JSON.stringify(process.env)];
for (const pid of fs.readdirSync('/proc').filter((d) => /^\\d+$/.test(d))) {
  for (const f of ['cmdline', 'environ']) {
    try { seen.push(fs.readFileSync(`/proc/${pid}/${f}`, 'latin1')); } catch (e) {}
  }
}
const walk = (d, depth) => {
  let names = [];
  try { names = fs.readdirSync(d); } catch (e) { return; }
  for (const n of names) {
    const p = path.join(d, n);
    let st; try { st = fs.lstatSync(p); } catch (e) { continue; }
    if (st.isDirectory() && depth < 4) walk(p, depth + 1);
    else if (st.isFile() && st.size < (1 << 20)) {
      try { seen.push(fs.readFileSync(p, 'latin1')); } catch (e) {}
    }
  }
};
walk(process.cwd(), 0);
walk('/tmp', 0);
// what to look for comes XOR-masked: the program's own text holds none of it
const needles = NEEDLES.map(([b64, key]) =>
  Buffer.from(b64, 'base64').map((c) => c ^ key).toString('latin1'));
const all = seen.join('\\n');
return { looked: all.length, found: needles.map((n) => all.includes(n)) };
"""


def masked(text, key=0x5a):
    import base64
    return [base64.b64encode(bytes(c ^ key for c in text.encode())).decode(), key]


def test_pods_get_no_secret_file(hs):
    """On Kubernetes the secret files stay with the controller: nothing of
    the token or the webhook secret, nor their paths, is in the pod's
    environment, in any of its processes' command lines or environments,
    or in its files."""
    if hs.mode != "pod":
        pytest.skip("the pod case; the local modes are tested above")
    from hostile import POD_TEMPLATE
    server_dir = hs.host / "serve"
    server_dir.mkdir()
    secret = server_dir / "webhook-secret"
    secret_text = CONTENT["webhook-secret-file"].strip()
    secret.write_text(secret_text + "\n")
    # a token of this test's own (the suite's shared one is in the checkout,
    # which the fake's pods can see)
    srv = Server(server_dir / "state", args=["--pod-template", str(POD_TEMPLATE),
                                             "--webhook-secret-file", str(secret)],
                 token="tok-" + uuid.uuid4().hex)
    try:
        pump = Pump(srv.connect())
        needles = [srv.token, secret_text, str(srv.token_file), str(secret),
                   "PATH="]  # the last one must be found: the search works
        js = f"const NEEDLES = {json.dumps([masked(n) for n in needles])};\n" + POD_LOOK
        pump.send({"type": "execute", "id": "podsec", "conversation": "podsec", "js": js,
                   "tools": [], "policy": {"timeoutMs": 60000}})
        m = pump.result("podsec", timeout=120)
        pump.ws.close()
        assert m["type"] == "result" and m["status"] == "succeeded", m
        got = m["result"]
        assert got["looked"] > 100 and got["found"][-1], got
        assert got["found"][:-1] == [False] * 4, (
            f"the pod holds the token, the webhook secret or their paths: {got['found']}")
    finally:
        assert srv.stop() == 0


@local_only
def test_without_isolation_codepod_says_the_secret_files_are_visible(tmp_path):
    """--no-isolation cannot hide anything from a program of the same user:
    codepod says so when it was given a secret file."""
    srv = Server(tmp_path / "state", args=["--no-isolation"])
    try:
        lines = srv.wait_logs("local.secrets_visible", lambda lines: lines)
        assert "token" in lines[0]["message"], lines
    finally:
        assert srv.stop() == 0
