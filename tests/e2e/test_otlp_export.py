"""Spans exported over OTLP/HTTP JSON (--otlp-endpoint): the tree under the
caller's span, the ids tool calls carry, attributes without program text,
inputs or the conversation key, and a collector that is down or hangs
costing nothing but counted drops; a hosted collector's headers from a file
or OTEL_EXPORTER_OTLP_HEADERS, and the OpenTelemetry endpoint variables."""

import hashlib
import json
import os
import subprocess

import pytest

from harness import BACKEND, CODEPOD_BIN, Session, assert_ok, close_and_check
from otlp_util import Collector, decode, otel_modules

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
TP = f"00-{TRACE}-{PARENT}-01"
SECRET_JS = "PROGRAM_TEXT_MARK_31337"
SECRET_IN = "TOOL_INPUT_MARK_4242"
SECRET_OUT = "TOOL_OUTPUT_MARK_777"
CONV = "conversation-key-MARK-9000"


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    return otel_modules(tmp_path_factory.mktemp("otel"))


@pytest.fixture
def collector():
    made = []

    def make(mode="ok"):
        c = Collector(mode)
        made.append(c)
        return c
    yield make
    for c in made:
        c.close()


def start(tmp_path, endpoint):
    return Session(tmp_path / "state", args=["--otlp-endpoint", endpoint])


def test_spans_nest_under_the_callers_and_name_no_content(tmp_path, collector, modules):
    col = collector()
    s = start(tmp_path, col.url)
    try:
        s.serve({"echo": lambda x: {"back": SECRET_OUT, "n": x["n"]},
                 "fail": lambda x: (_ for _ in ()).throw(Exception("x"))})
        js = (f"const tag = '{SECRET_JS}';\n"
              f"const a = await tools.echo({{ n: 1, s: '{SECRET_IN}' }});\n"
              f"const b = await tools.echo({{ n: 2, s: '{SECRET_IN}' }});\n"
              "return a.n + b.n;")
        eid = s.execute(js, tools=["echo"], traceparent=TP, conversation=CONV,
                        tracestate="vendor=v1")
        res = s.wait_result(eid)
        assert_ok(res)
        calls = {c["call"]: c["traceparent"] for c in s.of(eid, "tool_call")}
        # Flushed while the server still runs, not only at exit.
        col.wait_spans(lambda sp: len(sp) >= 6)
    finally:
        close_and_check(s)
    spans = decode(col, modules, tmp_path)
    assert [p for p, _, _ in col.requests] == ["/v1/traces"] * len(col.requests)
    assert all(h.get("Content-Type") == "application/json" for _, h, _ in col.requests)
    by = {}
    for sp in spans:
        by.setdefault(sp["name"], []).append(sp)
    assert sorted(by) == ["codepod.acquire", "codepod.execution", "codepod.program",
                          "codepod.runner.start", "codepod.tool_call"]
    (ex,) = by["codepod.execution"]
    assert all(sp["traceId"] == TRACE for sp in spans)
    assert all(sp["traceState"] == "vendor=v1" for sp in spans)
    assert ex["parentSpanId"] == PARENT
    for name in ("codepod.acquire", "codepod.runner.start", "codepod.program"):
        (sp,) = by[name]
        assert sp["parentSpanId"] == ex["spanId"], name
        assert int(ex["start"]) <= int(sp["start"]) <= int(sp["end"]) <= int(ex["end"]), name
    (prog,) = by["codepod.program"]
    tcs = sorted(by["codepod.tool_call"], key=lambda sp: sp["attributes"]["codepod.call.id"])
    assert len(tcs) == 2 and len({sp["spanId"] for sp in spans}) == len(spans)
    for sp in tcs:
        assert sp["parentSpanId"] == prog["spanId"]
        assert sp["kind"] == 3 and sp["status"] == 0
        # the span a tool_call's traceparent names is this very span
        assert calls[str(sp["attributes"]["codepod.call.id"])] == f"00-{TRACE}-{sp['spanId']}-01"
        a = sp["attributes"]
        assert a["codepod.tool.name"] == "echo" and a["codepod.call.status"] == "ok"
        assert a["codepod.call.input_bytes"] > len(SECRET_IN)
        assert a["codepod.call.output_bytes"] > len(SECRET_OUT)
    a = ex["attributes"]
    assert a["codepod.execution.id"] == eid and a["codepod.status"] == "OK"
    assert a["codepod.tool_calls"] == 2 and a["codepod.source.bytes"] == len(js.encode())
    assert a["codepod.digest"] == res["usage"]["digest"]
    # the audit line's conversationHash: the two can be joined, the key is not there
    sent = (s.conv_prefix if BACKEND == "kubernetes" else "") + CONV  # as harness.send puts it
    assert a["codepod.conversation.hash"] == hashlib.sha256(sent.encode()).hexdigest()
    assert by["codepod.acquire"][0]["attributes"]["codepod.acquire.kind"] in ("warm", "cold")
    raw = b"".join(r for _, _, r in col.requests)
    for mark in (SECRET_JS, SECRET_IN, SECRET_OUT, CONV, "tools.echo"):
        assert mark.encode() not in raw, mark
    res_attrs = json.loads(col.requests[0][2])["resourceSpans"][0]["resource"]["attributes"]
    assert {x["key"]: x["value"]["stringValue"] for x in res_attrs}["service.name"] == "codepod"


def test_without_a_traceparent_a_trace_starts_at_codepod(tmp_path, collector, modules):
    col = collector()
    s = start(tmp_path, col.url)
    try:
        s.serve({"echo": lambda x: x})
        eid = s.execute("await tools.echo({}); throw new Error('boom');", tools=["echo"])
        res = s.wait_result(eid)
        assert res["status"] == "failed"
        (call,) = s.of(eid, "tool_call")
    finally:
        close_and_check(s)
    spans = decode(col, modules, tmp_path)
    (ex,) = [sp for sp in spans if sp["name"] == "codepod.execution"]
    assert ex["parentSpanId"] is None and ex["status"] == 2      # a root, in error
    assert ex["attributes"]["codepod.status"] == "SCRIPT_ERROR"
    (tc,) = [sp for sp in spans if sp["name"] == "codepod.tool_call"]
    assert call["traceparent"] == f"00-{ex['traceId']}-{tc['spanId']}-01"
    # an undeclared tool's name is the program's text: not in a span
    assert {sp["traceId"] for sp in spans} == {ex["traceId"]}
    assert all(sp["traceState"] is None for sp in spans)


def test_an_undeclared_tool_name_stays_out(tmp_path, collector, modules):
    col = collector()
    s = start(tmp_path, col.url)
    try:
        eid = s.execute("try { await tools.SECRET_NAME_MARK(1); } catch (e) {} return 1;",
                        tools=[], traceparent=TP)
        assert_ok(s.wait_result(eid))
    finally:
        close_and_check(s)
    spans = decode(col, modules, tmp_path)
    names = [sp["attributes"].get("codepod.tool.name") for sp in spans
             if sp["name"] == "codepod.tool_call"]
    assert names == ["(undeclared)"]
    assert b"SECRET_NAME_MARK" not in b"".join(r for _, _, r in col.requests)


@pytest.mark.parametrize("mode", ["down", "refuse", "hang"])
def test_a_collector_down_refusing_or_hanging_costs_only_drops(tmp_path, collector, mode):
    if mode == "down":
        c = Collector()
        url = c.url
        c.close()               # nothing listens there any more
        col = None
    else:
        col = collector(mode)
        url = col.url
    s = start(tmp_path, url)
    try:
        s.serve({"echo": lambda x: x})
        for i in range(3):
            eid = s.execute("return (await tools.echo({ n: 7 })).n;", tools=["echo"],
                            traceparent=TP)
            res = s.wait_result(eid)
            assert_ok(res)
            assert res["result"] == 7
        if mode == "refuse":    # a refused batch is sent again (before the exit)
            with col.cond:
                col.cond.wait_for(lambda: len(col.requests) >= 2, 60)
    finally:
        close_and_check(s)      # exits: the hanging collector does not hold it
    (closed,) = s.log_events("otlp.closed")
    assert closed["exported"] == 0
    assert closed["dropped"] == 3 * 5, closed
    assert s.log_events("otlp.dropped")
    if mode == "refuse":
        assert len(col.requests) >= 2, "a refused batch is retried"


def test_a_declared_name_of_any_text_stays_valid_json(tmp_path, collector, modules):
    name = 'q"\\é\x01\u2028'
    col = collector()
    s = start(tmp_path, col.url)
    try:
        s.serve({name: lambda x: 1})
        eid = s.execute("return await tools[%s]({});" % json.dumps(name), tools=[name],
                        traceparent=TP)
        assert_ok(s.wait_result(eid))
    finally:
        close_and_check(s)
    spans = decode(col, modules, tmp_path)
    (tc,) = [sp for sp in spans if sp["name"] == "codepod.tool_call"]
    assert tc["attributes"]["codepod.tool.name"] == name


def env_without_otel(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(extra)
    return env


def one_traced_execution(s):
    eid = s.execute("return 1;", traceparent=TP)
    assert_ok(s.wait_result(eid))


def test_a_headers_file_and_the_environments_headers_reach_the_collector(tmp_path, collector):
    col = collector()
    hfile = tmp_path / "otlp-headers"
    hfile.write_text("# the hosted collector's key\nX-Api-Key: FILE_SECRET_MARK\n")
    env = env_without_otel(OTEL_EXPORTER_OTLP_HEADERS="x-tenant=acme%2Cwest , x-team=t1")
    s = Session(tmp_path / "state", env=env,
                args=["--otlp-endpoint", col.url, "--otlp-headers-file", str(hfile)])
    try:
        one_traced_execution(s)
        with col.cond:
            col.cond.wait_for(lambda: col.requests, 60)
    finally:
        close_and_check(s)
    path, headers, _ = col.requests[0]
    got = {k.lower(): v for k, v in headers.items()}
    assert path == "/v1/traces"
    assert got["x-api-key"] == "FILE_SECRET_MARK"
    assert got["x-tenant"] == "acme,west" and got["x-team"] == "t1"
    assert got["content-type"] == "application/json"
    (start_line,) = s.log_events("otlp.start")
    assert start_line["endpointFrom"] == "--otlp-endpoint" and start_line["headers"] == 3
    assert b"FILE_SECRET_MARK" not in b"".join(s.stderr_lines)


@pytest.mark.parametrize("var,path", [("OTEL_EXPORTER_OTLP_ENDPOINT", "/base/v1/traces"),
                                      ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "/exact/path")])
def test_the_opentelemetry_endpoint_variables_turn_export_on(tmp_path, collector, var, path):
    col = collector()
    url = col.url + ("/base/" if var == "OTEL_EXPORTER_OTLP_ENDPOINT" else "/exact/path")
    s = Session(tmp_path / "state", env=env_without_otel(**{var: url,
                                                             "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}))
    try:
        one_traced_execution(s)
        with col.cond:
            col.cond.wait_for(lambda: col.requests, 60)
    finally:
        close_and_check(s)
    assert col.requests[0][0] == path
    assert s.log_events("otlp.start")[0]["endpointFrom"] == var


@pytest.mark.parametrize("off", [{"OTEL_SDK_DISABLED": "true"}, {"OTEL_TRACES_EXPORTER": "none"}])
def test_the_opentelemetry_off_switches_keep_the_variables_endpoint_off(tmp_path, collector, off):
    col = collector()
    s = Session(tmp_path / "state",
                env=env_without_otel(OTEL_EXPORTER_OTLP_ENDPOINT=col.url, **off))
    try:
        one_traced_execution(s)
    finally:
        close_and_check(s)      # queued spans would go out at exit
    assert col.requests == [] and s.log_events("otlp.start") == []


@pytest.mark.parametrize("setup,says", [
    ({"env": {"OTEL_EXPORTER_OTLP_HEADERS": "a=SECRET_MARK%0d%0aX-Evil: 1"}},
     "OTEL_EXPORTER_OTLP_HEADERS: entry 1: the value of a holds a control character"),
    ({"file": "Authorization: Bearer SECRET_MARK\nno colon SECRET_MARK\n"},
     "line 2 is not \"Name: value\""),
    ({"file": "Content-Type: text/SECRET_MARK\n"}, "Content-Type is written by codepod"),
    ({"env": {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}}, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"),
    ({"env": {"OTEL_EXPORTER_OTLP_HEADERS": "a=1"}, "file": "A: 2\n"}, "A is given twice"),
], ids=["crlf-in-env", "bad-line", "reserved", "grpc", "twice"])
def test_bad_exporter_settings_stop_the_start_without_repeating_values(tmp_path, collector, setup, says):
    col = collector()
    args = ["serve", "--stdio", "--state-dir", str(tmp_path / "state"), "--otlp-endpoint", col.url]
    if "file" in setup:
        (tmp_path / "h").write_text(setup["file"])
        args += ["--otlp-headers-file", str(tmp_path / "h")]
    p = subprocess.run([CODEPOD_BIN, *args], env=env_without_otel(**setup.get("env", {})),
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    assert p.returncode == 2, p
    err = p.stderr.decode()
    assert says in err, err
    assert "SECRET_MARK" not in err, err
    assert p.stdout == b""


def test_a_headers_file_without_an_endpoint_is_said_and_unused(tmp_path):
    (tmp_path / "h").write_text("a: 1\n")
    p = subprocess.run([CODEPOD_BIN, "serve", "--stdio", "--state-dir", str(tmp_path / "state"),
                        "--otlp-headers-file", str(tmp_path / "h")], env=env_without_otel(),
                       input=b"", capture_output=True, timeout=60)   # EOF at once: it ends
    assert p.returncode == 0, p
    events = [json.loads(line) for line in p.stderr.decode().splitlines() if line.startswith("{")]
    assert [e["event"] for e in events if e["event"].startswith("otlp.")] == ["otlp.headers_unused"]
