"""`codepod run FILE --tools TOOLS.json`: outcome on stdout, exit 0 / 1 / 2."""

import json
import subprocess

from harness import CODEPOD_BIN, REPO, assert_failed, assert_ok


def write_tools(tmp_path, tools):
    p = tmp_path / "tools.json"
    p.write_text(json.dumps({"tools": tools}))
    return p


def py_tool(tmp_path, name, body):
    script = tmp_path / f"{name}.py"
    script.write_text("import json, sys\ninp = json.load(sys.stdin)\n" + body)
    return {"name": name, "description": f"{name} test tool",
            "inputSchema": {"type": "object"}, "outputSchema": {},
            "command": ["/usr/bin/python3", str(script)]}


def run(tmp_path, js, tools=(), extra=()):
    prog = tmp_path / "prog.js"
    prog.write_text(js)
    tools_file = write_tools(tmp_path, list(tools))
    return subprocess.run(
        [CODEPOD_BIN, "run", str(prog), "--tools", str(tools_file),
         "--state-dir", str(tmp_path / "state"), *extra],
        cwd=str(REPO), capture_output=True, text=True, timeout=120)


def test_run_succeeds_with_exit_0(tmp_path):
    double = py_tool(tmp_path, "double", "json.dump({'n': inp['n'] * 2}, sys.stdout)\n")
    p = run(tmp_path, "console.log('hi');\nreturn (await tools.double({ n: 21 })).n;", [double])
    assert p.returncode == 0, p.stderr
    out = assert_ok(json.loads(p.stdout))
    assert out["result"] == 42 and out["logs"] == "hi\n"
    assert out["calls"][0]["tool"] == "double" and out["calls"][0]["status"] == "ok"


def test_run_failure_exits_1_with_outcome(tmp_path):
    p = run(tmp_path, "throw new Error('nope');")
    assert p.returncode == 1, p.stderr
    out = json.loads(p.stdout)
    assert_failed(out, "SCRIPT_ERROR")
    assert out["error"]["programError"]["message"] == "nope"


def test_run_tool_failure_rejects_with_last_stderr_line(tmp_path):
    bad = py_tool(tmp_path, "bad",
                  "sys.stderr.write('debug noise\\nFirm f-9 does not exist\\n')\nsys.exit(3)\n")
    p = run(tmp_path, "try { await tools.bad({}); return 'no error'; }\n"
                      "catch (e) { return e.message; }", [bad])
    assert p.returncode == 0, p.stderr
    out = assert_ok(json.loads(p.stdout))
    assert out["result"] == "Firm f-9 does not exist"
    assert out["calls"][0]["status"] == "error"


def test_run_policy_flag(tmp_path):
    p = run(tmp_path, "return 'x'.repeat(500);", extra=["--policy", '{"maxResultBytes":100}'])
    assert p.returncode == 1
    assert_failed(json.loads(p.stdout), "RESULT_TOO_LARGE")


def test_run_conversation_keeps_workspace(tmp_path):
    p1 = run(tmp_path, "require('node:fs').writeFileSync('kept.txt', 'yes'); return 1;",
             extra=["--conversation", "cli-conv"])
    assert p1.returncode == 0, p1.stdout + p1.stderr
    p2 = run(tmp_path, "return require('node:fs').readFileSync('kept.txt', 'utf8');",
             extra=["--conversation", "cli-conv"])
    assert p2.returncode == 0, p2.stdout + p2.stderr
    assert json.loads(p2.stdout)["result"] == "yes"


def test_run_bad_usage_exits_2(tmp_path):
    p = subprocess.run([CODEPOD_BIN, "run"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert p.stderr.strip(), "bad usage must say what is wrong"
    p = subprocess.run([CODEPOD_BIN, "run", str(tmp_path / "prog.js"), "--frobnicate"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
