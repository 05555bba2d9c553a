"""DESIGN section 6, local backend: bubblewrap isolation and finding Node 22."""

import json
import os
import subprocess
import uuid

from harness import CODEPOD_BIN, REPO, Session, assert_ok, local_backend_only

# The whole module is about the local backend's isolation and Node lookup.
pytestmark = local_backend_only


def test_no_network(session):
    res = assert_ok(session.run(
        "const ifs = Object.keys(require('node:os').networkInterfaces());\n"
        "const net = require('node:net');\n"
        "const outcome = await new Promise((resolve) => {\n"
        "  const s = net.connect({ host: '1.1.1.1', port: 53, timeout: 3000 });\n"
        "  s.on('connect', () => { s.destroy(); resolve('connected'); });\n"
        "  s.on('timeout', () => { s.destroy(); resolve('timeout'); });\n"
        "  s.on('error', (e) => resolve('error ' + e.code));\n"
        "});\n"
        "return { ifs, outcome };"))
    assert [i for i in res["result"]["ifs"] if i != "lo"] == [], res["result"]
    assert res["result"]["outcome"] != "connected"


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


def test_old_node_is_refused_with_a_clear_message(tmp_path):
    old = "/usr/bin/node"
    version = subprocess.run([old, "--version"], capture_output=True, text=True).stdout.strip()
    assert version.startswith("v20"), f"this test needs the system Node 20, found {version}"
    s = Session(tmp_path / "state", args=["--node", old])
    try:
        eid = s.execute("return 1;")
        m = None
        try:
            m = s.wait_for(lambda m: m.get("id") == eid, 60, "an answer")
        except AssertionError:
            # refusing at start is fine too: codepod exits non-zero, saying why
            assert s.proc.wait(30) != 0, "codepod neither refused Node 20 nor answered"
        text = ""
        if m is not None:
            assert m["type"] == "error" or m.get("status") == "failed", \
                f"an execution ran on Node 20: {m}"
            text = json.dumps(m)
    finally:
        s.close()
    text += b"".join(s.stderr_lines).decode(errors="replace")  # complete once closed
    assert "22" in text, f"the refusal does not say Node 22 is needed: {text[-2000:]}"


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
