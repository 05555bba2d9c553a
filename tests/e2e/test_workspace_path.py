"""Inside the sandbox the conversation's workspace is /workspace on both
backends (CODEPOD_BACKEND), and it is the working folder of programs and
commands (broker/SESSION.md, docs/contract.md). On the local backend the
host folder under the state folder is bound there: what a program writes to
/workspace lands in it, another conversation's folder is out of sight, and
the host's own /workspace, if any, is never what a program sees. Under
--no-isolation there is no mount namespace: the folder keeps its host path."""
import os
import shutil
import uuid

import pytest

from harness import BACKEND, Session, assert_ok, local_backend_only
from test_commands import run as run_command


def conv(tag):
    return f"wspath-{tag}-{uuid.uuid4().hex[:8]}"


def host_folder_holding(state_dir, name, content):
    """The one host folder of a workspace whose file @name holds @content."""
    found = []
    for n in os.listdir(os.path.join(state_dir, "workspaces")):
        d = os.path.join(state_dir, "workspaces", n)
        try:
            with open(os.path.join(d, name)) as f:
                if f.read() == content:
                    found.append(d)
        except OSError:
            pass
    assert len(found) == 1, found
    return found[0]


def test_programs_and_commands_run_in_workspace(session):
    c = conv("cwd")
    token = uuid.uuid4().hex
    res = assert_ok(session.run(f"""
const fs = require('node:fs');
fs.writeFileSync('/workspace/x', '{token}');
return {{ cwd: process.cwd(), home: process.env.HOME, rel: fs.readFileSync('x', 'utf8'),
         child: require('node:child_process').execFileSync('pwd', {{ encoding: 'utf8' }}) }};""",
        conversation=c))["result"]
    assert res == {"cwd": "/workspace", "home": "/workspace", "rel": token,
                   "child": "/workspace\n"}, res
    r = run_command(session, conversation=c, command='pwd; echo "$HOME"; cat /workspace/x')
    assert r["status"] == "ok" and r["exitCode"] == 0, r
    assert r["stdout"] == f"/workspace\n/workspace\n{token}", r
    r = run_command(session, conversation=c, argv=["pwd"])
    assert r["stdout"] == "/workspace\n", r
    # bash-tool's way: every command starts with cd "/workspace"
    r = run_command(session, conversation=c, command='cd "/workspace" && cat x && echo back > y')
    assert r["exitCode"] == 0 and r["stdout"] == token, r
    assert assert_ok(session.run("return require('node:fs').readFileSync('/workspace/y', 'utf8');",
                                 conversation=c))["result"] == "back\n"


@local_backend_only
def test_what_a_program_writes_to_workspace_is_in_the_host_folder(session):
    c = conv("host")
    token = uuid.uuid4().hex
    assert_ok(session.run(f"require('node:fs').mkdirSync('/workspace/sub');\n"
                          f"require('node:fs').writeFileSync('/workspace/sub/x', '{token}'); return 1;",
                          conversation=c))
    held = host_folder_holding(session.state_dir, "sub/x", token)
    # and the other way: a file put in the host folder is in /workspace
    with open(os.path.join(held, "from-host.txt"), "w") as f:
        f.write("host " + token)
    res = assert_ok(session.run("return require('node:fs').readFileSync('/workspace/from-host.txt', 'utf8');",
                                conversation=c))
    assert res["result"] == "host " + token


def test_another_conversations_workspace_is_not_visible(session):
    a, b = conv("a"), conv("b")
    secret = uuid.uuid4().hex
    assert_ok(session.run(f"require('node:fs').writeFileSync('/workspace/theirs.txt', '{secret}'); return 1;",
                          conversation=a))
    res = assert_ok(session.run("""
const fs = require('node:fs');
const found = [];
const walk = (d, depth) => { if (depth > 6) return; let es; try { es = fs.readdirSync(d, { withFileTypes: true }); } catch { return; }
  for (const e of es) { const p = d + '/' + e.name; if (e.name === 'theirs.txt') found.push(p); else if (e.isDirectory() && p !== '/proc' && p !== '/sys') walk(p, depth + 1); } };
walk('/', 0);
return { mine: fs.readdirSync('/workspace'), found };""", conversation=b, timeout=180))["result"]
    assert res["mine"] == [] and res["found"] == [], res
    r = run_command(session, conversation=b, command="ls -A /workspace; cat theirs.txt")
    assert r["exitCode"] != 0 and r["stdout"] == "", r


@pytest.fixture
def host_workspace():
    """The host's own /workspace, with a marker file in it: one made for the
    test (and removed after) when the host has none, as a folder or as a
    symlink to one; the host's own left untouched when it has one (then only
    its identity is compared)."""
    made = []

    def make(kind):
        if os.path.lexists("/workspace"):
            return None
        if os.geteuid() != 0:
            pytest.skip("making the host's /workspace needs root")
        marker = f"host-marker-{uuid.uuid4().hex}"
        if kind == "dir":
            os.mkdir("/workspace")
            made.append(("/workspace", True))
            open(os.path.join("/workspace", marker), "w").close()
        else:
            target = f"/var/tmp/codepod-host-workspace-{uuid.uuid4().hex[:8]}"
            os.mkdir(target)
            made.append((target, True))
            open(os.path.join(target, marker), "w").close()
            os.symlink(target, "/workspace")
            made.append(("/workspace", False))
        return marker
    yield make
    for path, is_dir in reversed(made):
        if is_dir:
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.islink(path):
            os.unlink(path)


@local_backend_only
@pytest.mark.parametrize("kind", ["dir", "symlink"])
def test_the_hosts_own_workspace_is_not_what_programs_see(session, host_workspace, kind):
    marker = host_workspace(kind)
    c = conv("hostws")
    token = uuid.uuid4().hex
    res = assert_ok(session.run(f"""
const fs = require('node:fs');
fs.writeFileSync('mine.txt', '{token}');
const st = fs.lstatSync('/workspace');
return {{ list: fs.readdirSync('/workspace'), link: st.isSymbolicLink(), ino: st.ino, dev: st.dev }};""",
        conversation=c))["result"]
    assert res["list"] == ["mine.txt"] and not res["link"], res
    st = os.stat(host_folder_holding(session.state_dir, "mine.txt", token))
    assert (res["ino"], res["dev"]) == (st.st_ino, st.st_dev), res
    if os.path.exists("/workspace"):
        host = os.stat("/workspace")
        assert (res["ino"], res["dev"]) != (host.st_ino, host.st_dev), res
    if marker:
        assert marker not in res["list"]
        # nothing of the program's landed in the host's /workspace
        assert os.listdir(os.path.realpath("/workspace")) == [marker]


@local_backend_only
def test_without_isolation_the_workspace_keeps_its_host_path(tmp_path):
    s = Session(tmp_path / "state", args=["--no-isolation"])
    try:
        c = conv("noiso")
        res = assert_ok(s.run("require('node:fs').writeFileSync('here.txt', 'x');\n"
                              "return [process.cwd(), process.env.HOME];", conversation=c))["result"]
        r = run_command(s, conversation=c, command="pwd")
    finally:
        assert s.close() == 0
    cwd = res[0]
    assert cwd != "/workspace" and cwd == res[1], res
    assert os.path.realpath(cwd).startswith(os.path.realpath(tmp_path / "state" / "workspaces") + "/"), res
    assert os.path.exists(os.path.join(cwd, "here.txt"))
    assert r["stdout"] == cwd + "\n", r


@local_backend_only
def test_the_root_is_read_only_and_has_the_hosts_later_entries(tmp_path):
    """The sandbox's root holds the host's top-level entries, read at each
    start (runners started ahead are off here: they would have read it
    before the entry was made): one the host gains later is there, read-only;
    nothing new can be made at the root."""
    if os.geteuid() != 0:
        pytest.skip("making a top-level entry on the host needs root")
    later = f"/codepod-later-{uuid.uuid4().hex[:8]}"
    s = Session(tmp_path / "state", args=["--prestart", "0"])
    try:
        probe = f"""
const fs = require('node:fs');
const code = (f) => {{ try {{ f(); return 'ok'; }} catch (e) {{ return e.code; }} }};
return {{ later: code(() => fs.readFileSync("{later}/f", "utf8")),
         writeLater: code(() => fs.writeFileSync("{later}/g", "x")),
         newTop: code(() => fs.mkdirSync('/codepod-made-inside')),
         bin: (() => {{ try {{ return fs.readlinkSync('/bin'); }} catch (e) {{ return e.code; }} }})() }};"""
        before = assert_ok(s.run(probe))["result"]
        os.mkdir(later)
        with open(later + "/f", "w") as f:
            f.write("from the host")
        after = assert_ok(s.run(probe))["result"]
    finally:
        shutil.rmtree(later, ignore_errors=True)
        assert s.close() == 0
    assert before["later"] == "ENOENT" and after["later"] == "ok", (before, after)
    assert after["writeLater"] in ("EROFS", "EACCES"), after
    assert before["newTop"] in ("EROFS", "EACCES") and after["newTop"] in ("EROFS", "EACCES"), after
    assert not os.path.exists("/codepod-made-inside")
    if os.path.islink("/bin"):
        assert before["bin"] == os.readlink("/bin"), before


@local_backend_only
def test_a_node_under_the_hosts_workspace_is_refused(tmp_path):
    """The conversation's folder covers /workspace inside: a Node installed
    under the host's own /workspace could not run there, and codepod says
    so at start rather than fail every execution."""
    if os.path.lexists("/workspace"):
        pytest.skip("the host has a /workspace of its own: not touched")
    if os.geteuid() != 0:
        pytest.skip("making the host's /workspace needs root")
    import subprocess
    from harness import CODEPOD_BIN, NODE_DIR
    os.makedirs("/workspace/node/bin")
    try:
        node = "/workspace/node/bin/node"
        try:
            os.link(NODE_DIR / "node", node)
        except OSError:
            shutil.copy2(NODE_DIR / "node", node)
        p = subprocess.run([CODEPOD_BIN, "serve", "--stdio", "--no-memory-bound", "--state-dir",
                            str(tmp_path / "state"), "--node", node],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree("/workspace", ignore_errors=True)
    assert p.returncode != 0, p.stderr
    assert "/workspace/node is under /workspace" in p.stderr, p.stderr
