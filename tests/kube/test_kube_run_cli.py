"""`codepod run FILE --backend kubernetes` (docs/contract.md §5): one program
from the shell, in a pod of the fake API server, its tools commands run by
codepod on this machine; the outcome on stdout, exit 0 / 1."""
import json
import subprocess

from harness import CODEPOD_BIN, REPO, assert_failed, assert_ok
from kubehelp import pod_name


def run(fake, tmp_path, js, tools=(), conv="cli"):
    prog = tmp_path / "prog.ts"
    prog.write_text(js)
    tools_file = tmp_path / "tools.json"
    tools_file.write_text(json.dumps({"tools": list(tools)}))
    return subprocess.run(
        [CODEPOD_BIN, "run", str(prog), "--tools", str(tools_file), "--conversation", conv,
         "--backend", "kubernetes", "--kubeconfig", fake.kubeconfig],
        cwd=str(REPO), capture_output=True, text=True, timeout=180)


def test_run_on_the_kubernetes_backend(fake, tmp_path):
    script = tmp_path / "double.py"
    script.write_text("import json, sys\nj = json.load(sys.stdin)\njson.dump({'n': j['n'] * 2}, sys.stdout)\n")
    double = {"name": "double", "description": "Doubles n.", "inputSchema": {"type": "object"},
              "command": ["/usr/bin/python3", str(script)]}
    p = run(fake, tmp_path, "const n: number = (await tools.double({ n: 21 })).n;\n"
                            "console.log('in', require('node:os').hostname());\nreturn n;",
            [double], conv="cli-ok")
    assert p.returncode == 0, p.stderr[-3000:]
    out = assert_ok(json.loads(p.stdout))
    assert out["result"] == 42
    assert out["logs"] == f"in {pod_name('cli-ok')}\n", out["logs"]
    assert out["usage"]["sandbox"] == "kubernetes"
    assert [c["status"] for c in out["calls"]] == ["ok"]
    assert fake.pod(pod_name("cli-ok")) is not None


def test_run_failure_on_the_kubernetes_backend_exits_1(fake, tmp_path):
    p = run(fake, tmp_path, "throw new Error('nope');", conv="cli-fail")
    assert p.returncode == 1, p.stderr[-3000:]
    out = json.loads(p.stdout)
    err = assert_failed(out, "SCRIPT_ERROR")
    assert err["programError"]["message"] == "nope"
