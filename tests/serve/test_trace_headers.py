"""POST /v1/executions takes the W3C trace context as headers, and each
webhook POST carries its call's span as its traceparent header."""

import json
import re

from test_webhook import Broker, echo, execute
from wsclient import http_request

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TP = f"00-{TRACE}-00f067aa0ba902b7-01"


def post(s, req, headers=()):
    status, _, body = http_request(s.host, s.port, "POST", "/v1/executions", token=s.token,
                                   body=json.dumps(req).encode(), headers=headers)
    return status, json.loads(body)


def test_headers_reach_each_webhook_call_as_its_own_span(serve):
    s = serve()
    b = Broker(echo)
    try:
        req = execute("tr1", "const a = await tools.echo({ n: 1 });\n"
                             "const b = await tools.echo({ n: 2 });\nreturn a.got.n + b.got.n;",
                      b.url)
        # The caller's own traceparent in broker.headers is replaced, not doubled.
        req["broker"]["headers"]["TraceParent"] = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
        status, out = post(s, req, [f"traceparent: {TP}", "tracestate: vendor=abc"])
        assert status == 200 and out["result"] == 3, out
        spans = []
        for call, headers in b.calls:
            low = {k.lower(): v for k, v in headers.items()}
            m = re.match(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-01$", low["traceparent"])
            assert m and m.group(1) == TRACE, low["traceparent"]
            assert low["tracestate"] == "vendor=abc"
            assert "traceparent" not in call      # a header, not part of the body
            assert list(k.lower() for k in headers).count("traceparent") == 1
            spans.append(m.group(2))
        assert len(set(spans)) == 2 and "00f067aa0ba902b7" not in spans
    finally:
        b.close()


def test_the_body_wins_over_the_header(serve):
    s = serve()
    b = Broker(echo)
    try:
        body_tp = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
        status, out = post(s, execute("tr2", "return (await tools.echo({})).tool;", b.url,
                                      traceparent=body_tp), [f"traceparent: {TP}"])
        assert status == 200, out
        (call, headers) = b.calls[0]
        low = {k.lower(): v for k, v in headers.items()}
        assert low["traceparent"].startswith("00-" + "a" * 32 + "-")
    finally:
        b.close()


def test_a_malformed_header_is_a_400(serve):
    s = serve()
    b = Broker(echo)
    try:
        for h in [f"traceparent: {TP.upper()}", "traceparent: " + "0" * 200,
                  f"traceparent: {TP}\r\ntracestate: {'a=1,' * 200}"]:
            status, out = post(s, execute("tr3", "return 1;", b.url), [h])
            assert status == 400 and out["error"]["code"] == "INVALID_REQUEST", out
        assert not b.calls
    finally:
        b.close()


def test_without_a_traceparent_no_trace_header_is_sent(serve):
    s = serve()
    b = Broker(echo)
    try:
        status, out = post(s, execute("tr4", "return (await tools.echo({})).tool;", b.url))
        assert status == 200, out
        (call, headers) = b.calls[0]
        assert "traceparent" not in {k.lower() for k in headers}
        assert headers.get("X-Tenant") == "t1"
    finally:
        b.close()


def dropped_total(s):
    _, _, body = http_request(s.host, s.port, "GET", "/metrics")
    for line in body.decode().splitlines():
        if line.startswith("codepod_otlp_spans_dropped_total "):
            return int(line.split()[1])
    raise AssertionError("no codepod_otlp_spans_dropped_total in /metrics")


def test_spans_a_dead_collector_cannot_take_are_counted(serve):
    import socket
    import time
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()                 # nothing listens there
    s = serve("--otlp-endpoint", dead)
    b = Broker(echo)
    try:
        assert dropped_total(s) == 0
        status, out = post(s, execute("tr5", "return (await tools.echo({})).tool;", b.url),
                           [f"traceparent: {TP}"])
        assert status == 200 and out["result"] == "echo", out
        # acquire, runner.start, program, execution and one tool call, after
        # the retries; the deadline only catches a hang
        deadline = time.monotonic() + 60
        while dropped_total(s) < 5:
            assert time.monotonic() < deadline, "the drops were not counted"
            time.sleep(0.2)
        assert dropped_total(s) == 5
    finally:
        b.close()


def test_metrics_say_zero_without_an_exporter(serve):
    s = serve()
    assert dropped_total(s) == 0
