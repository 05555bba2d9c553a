"""The `code` tool for a model (definition, text output), the invoices
example run as a backend runs it, and the offline install."""

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

from conftest import BIN, REPO, Server, arun, expected_top3
from test_client import INVOICE_TOOLS

HERE = Path(__file__).resolve().parent
PKG = HERE.parent
EXAMPLE = PKG / "examples" / "invoices_agent.py"
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def test_code_tool_definition_and_model_output(fx):
    async def go():
        cp = await fx.open()
        try:
            code = await cp.code_tool(conversation=f"py-code-{fx.transport}", tools=INVOICE_TOOLS,
                                      policy={"timeoutMs": 10000, "maxResultBytes": 16384})
            js = open(REPO / "tests" / "example" / "invoices.js").read()
            ok = json.loads(await code(json.dumps({"reason": "top firms", "js": "console.log('hi');\n" + js})))
            bad = json.loads(await code({"reason": "r", "js": "const x = null;\nreturn x.y;"}))
            junk = json.loads(await code("not json"))
        finally:
            await fx.aclose()
        d = code.definition
        assert d["type"] == "function" and d["function"]["name"] == "code"
        assert d["function"]["parameters"]["required"] == ["reason", "js"]
        desc = d["function"]["description"]
        assert "body of an async function" in desc
        assert "files written there persist across calls, JavaScript variables do not" in desc
        assert "10 s per program" in desc and "16 KiB" in desc
        assert "declare const tools: {" in desc and "listInvoices: (input: {" in desc
        assert ok == {"status": "succeeded", "result": expected_top3(), "logs": "hi\n"}
        assert bad["status"] == "failed"
        assert bad["error"]["code"] == "SCRIPT_ERROR"
        assert bad["error"]["programError"]["name"] == "TypeError"
        assert bad["error"]["message"]
        assert junk["error"]["code"] == "INVALID_REQUEST"
    arun(go())


def run_example(env):
    r = subprocess.run([PY, str(EXAMPLE)], env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_example_over_stdio(tmp_path):
    out = run_example({"CODEPOD_BIN": BIN, "CODEPOD_STATE_DIR": str(tmp_path), "CODEPOD_URL": ""})
    assert out.startswith(f"Top firms by paid invoices, August 2026: {expected_top3()[0]['firm']} ("), out


def test_example_over_websocket(tmp_path):
    srv = Server(tmp_path)
    try:
        out = run_example({"CODEPOD_URL": srv.url, "CODEPOD_TOKEN": srv.token})
    finally:
        assert srv.stop() == 0
    assert out.startswith("Top firms by paid invoices, August 2026: "), out


def test_integration_is_at_most_15_lines():
    src = EXAMPLE.read_text()
    body = src.split("# --- integration: begin")[1].split("# --- integration: end")[0]
    lines = [x for x in body.splitlines() if x.strip() and not x.strip().startswith("#")]
    print(f"integration lines in examples/invoices_agent.py: {len(lines)}")
    assert len(lines) <= 15, len(lines)


def test_pip_installs_offline(tmp_path):
    """`pip install sdk/python` with no index: setuptools and the dependencies from Debian."""
    # From a copy: setuptools writes build/ and *.egg-info next to pyproject.toml.
    src = tmp_path / "src"
    shutil.copytree(PKG, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "tests"))
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    py = str(env_dir / "bin" / "python")
    # The venv's interpreter runs Debian's pip (python3-pip) from the system site packages.
    r = subprocess.run([py, "-m", "pip", "install", "--no-index", "--no-build-isolation", "--quiet",
                        "--no-warn-script-location", str(src)],
                       capture_output=True, text=True, timeout=300, cwd=str(tmp_path),
                       env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONDONTWRITEBYTECODE": "1"})
    assert r.returncode == 0, r.stdout + r.stderr
    probe = ("import codepod, pathlib; p = pathlib.Path(codepod.__file__).resolve(); "
             "print(p.parent.parent.name, codepod.__version__, hasattr(codepod, 'Codepod'))")
    r = subprocess.run([py, "-c", probe], capture_output=True, text=True, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["site-packages", "0.1.0", "True"]
