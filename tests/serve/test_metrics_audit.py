"""/metrics in the Prometheus text format (promtool check metrics), the
audit line, and what operational logs must never hold."""

import hashlib
import shutil
import subprocess

import pytest

from wsclient import http_request
from util import Pump

SECRET_JS = "const marker = 'PROGRAM-TEXT-MARKER'; return await tools.echo({ v: 'TOOL-DATA-MARKER' });"


def run_some(s):
    p = Pump(s.connect(), {"echo": lambda inp: {"echoed": inp}})
    p.execute("m1", SECRET_JS, tools=["echo"], conversation="secret-conversation-key")
    assert p.result("m1")["status"] == "succeeded"
    p.execute("m2", "throw new Error('boom')")
    assert p.result("m2")["error"]["code"] == "SCRIPT_ERROR"
    p.execute("m3", "return 3")
    assert p.result("m3")["result"] == 3
    return p


def test_metrics_pass_promtool_and_count(serve):
    s = serve()
    run_some(s)
    status, headers, body = http_request(s.host, s.port, "GET", "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    text = body.decode()
    assert 'codepod_executions_total{status="succeeded",code="OK"} 2' in text
    assert 'codepod_executions_total{status="failed",code="SCRIPT_ERROR"} 1' in text
    assert "codepod_execution_startup_seconds_count 3" in text
    assert "codepod_execution_run_seconds_bucket" in text
    assert 'codepod_tool_calls_total{status="' in text
    assert "codepod_sessions 1" in text
    assert "codepod_executions_in_flight 0" in text
    promtool = shutil.which("promtool")
    if not promtool:
        pytest.skip("promtool (Debian package prometheus) is not installed")
    r = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True)
    assert r.returncode == 0, (r.stdout + r.stderr).decode()


def test_audit_lines_and_clean_logs(serve):
    s = serve()
    run_some(s)
    lines = s.wait_logs("audit", lambda ls: {"m1", "m2", "m3"} <= {a.get("id") for a in ls})
    audits = {a["id"]: a for a in lines}
    assert set(audits) == {"m1", "m2", "m3"}
    a = audits["m1"]
    assert a["conversationHash"] == hashlib.sha256(b"secret-conversation-key").hexdigest()
    assert a["code"] == "OK" and isinstance(a["digest"], str) and a["digest"]
    assert a["tools"][0]["tool"] == "echo" and a["tools"][0]["status"]
    assert audits["m2"]["code"] == "SCRIPT_ERROR"
    text = s.stderr_text() + "".join(str(x) for x in s.logs())
    for leak in ("PROGRAM-TEXT-MARKER", "TOOL-DATA-MARKER", "secret-conversation-key", s.token):
        assert leak not in text, leak


def test_audit_file(serve, tmp_path):
    f = tmp_path / "audit.jsonl"
    s = serve("--audit-file", str(f))
    run_some(s)
    import json
    lines = [json.loads(x) for x in f.read_text().splitlines()]
    assert sorted(x["id"] for x in lines) == ["m1", "m2", "m3"]
    assert not s.logs("audit")


def test_usage_histograms(serve):
    s = serve()
    run_some(s)
    status, _, body = http_request(s.host, s.port, "GET", "/metrics")
    assert status == 200
    text = body.decode()
    for name in ("codepod_execution_cpu_seconds", "codepod_execution_max_rss_bytes",
                 "codepod_tool_bytes"):
        assert f"# TYPE {name} histogram" in text, name
    # by status and backend, no other label (no conversation, no id)
    assert 'codepod_execution_cpu_seconds_count{status="succeeded",backend="local"} 2' in text \
        or 'codepod_execution_cpu_seconds_count{status="succeeded",backend="kubernetes"} 2' in text, text
    assert 'codepod_execution_cpu_seconds_count{status="failed",backend="' in text
    assert 'codepod_execution_max_rss_bytes_bucket{status="succeeded",backend="' in text
    # one execution called a tool: one observation a direction
    for d in ("input", "output"):
        assert f'codepod_tool_bytes_count{{direction="{d}",status="succeeded",backend="' in text, d
    assert 'le="16777216"' in text  # byte buckets as whole numbers
    assert "secret-conversation-key" not in text
    promtool = shutil.which("promtool")
    if not promtool:
        pytest.skip("promtool (Debian package prometheus) is not installed")
    r = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True)
    assert r.returncode == 0, (r.stdout + r.stderr).decode()


def test_audit_line_carries_the_usage(serve, tmp_path):
    import json
    f = tmp_path / "audit.jsonl"
    s = serve("--audit-file", str(f))
    run_some(s)
    lines = {x["id"]: x for x in (json.loads(t) for t in f.read_text().splitlines())}
    u = lines["m1"]["usage"]
    assert u["toolCalls"] == 1 and u["toolInputBytes"] == len(b'{"v":"TOOL-DATA-MARKER"}'), u
    assert isinstance(u["cpuMs"], int) and u["maxRssBytes"] > 0 and u["wallMs"] >= u["runMs"], u
    assert u["digest"] == lines["m1"]["digest"]
