"""POST /v1/executions with a webhook broker served by the test."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import schemas
from wsclient import http_request


class Broker:
    def __init__(self, behave):
        self.behave = behave          # fn(call dict, headers) -> (status, bytes) or None to hang
        self.calls = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                call = json.loads(self.rfile.read(n))
                outer.calls.append((call, dict(self.headers)))
                r = outer.behave(call, self.headers)
                if r is None:
                    time.sleep(30)
                    return
                status, body = r
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/tools"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()


@pytest.fixture
def broker():
    made = []

    def make(behave):
        b = Broker(behave)
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()


def post(s, req, token=None, timeout=60):
    status, _, body = http_request(s.host, s.port, "POST", "/v1/executions",
                                   token=s.token if token is None else token,
                                   body=json.dumps(req).encode(), timeout=timeout)
    return status, json.loads(body)


def execute(eid, js, url, tools=("echo",), **extra):
    req = {"id": eid, "conversation": f"c-{eid}", "js": js,
           "tools": [{"name": t, "description": t, "inputSchema": {"type": "object"}}
                     for t in tools],
           "broker": {"url": url, "headers": {"X-Tenant": "t1"}}}
    req.update(extra)
    return req


def echo(call, headers):
    return 200, json.dumps({"output": {"got": call["input"], "tool": call["tool"]}}).encode()


def test_tool_calls_go_to_the_broker(serve, broker):
    s = serve()
    b = broker(echo)
    status, out = post(s, execute(
        "w1", "const a = await tools.echo({ n: 1 });\n"
              "const [x, y] = await Promise.all([tools.echo({ n: 2 }), tools.echo({ n: 3 })]);\n"
              "return [a.got.n, x.got.n, y.got.n];", b.url))
    assert status == 200, out
    assert out["status"] == "succeeded" and out["result"] == [1, 2, 3]
    assert out["executionId"] == "w1" and "type" not in out
    assert len(out["calls"]) == 3
    call, headers = b.calls[0]
    assert set(call) == {"id", "conversation", "call", "tool", "input"} and call["id"] == "w1"
    assert call["conversation"] == "c-w1"
    schemas.check("webhook_request.schema.json", call)
    schemas.check("outcome.schema.json", out)
    assert headers.get("X-Tenant") == "t1"
    assert headers.get("Content-Type") == "application/json"


def test_broker_errors_reach_the_program(serve, broker):
    s = serve()
    b = broker(lambda c, h: (200, b'{"error": "no such invoice"}'))
    status, out = post(s, execute(
        "w2", "try { await tools.echo({}); } catch (e) { return e.message; }", b.url))
    assert status == 200 and out["result"] == "no such invoice"


@pytest.mark.parametrize("answer", [(200, b"<html>garbage"), (200, b"[1,2]"),
                                    (500, b'{"output": 1}'), (200, b"")])
def test_broker_garbage_is_a_tool_error(serve, broker, answer):
    s = serve()
    b = broker(lambda c, h: answer)
    status, out = post(s, execute(
        "w3", "try { await tools.echo({}); return 'no'; } catch (e) { return e.message; }",
        b.url))
    assert status == 200 and out["status"] == "succeeded", out
    assert "broker" in out["result"]


def test_hanging_broker_times_out_and_others_carry_on(serve, broker):
    s = serve("--webhook-timeout-ms", "1000")
    hang = broker(lambda c, h: None)
    good = broker(echo)
    res = {}

    def slow():
        res["slow"] = post(s, execute(
            "w4", "try { await tools.echo({}); } catch (e) { return e.message; }", hang.url))

    t = threading.Thread(target=slow)
    t.start()
    status, out = post(s, execute("w5", "return (await tools.echo({ k: 5 })).got.k", good.url))
    assert status == 200 and out["result"] == 5
    t.join(30)
    status, out = res["slow"]
    assert status == 200 and "did not answer" in out["result"], out


def test_execution_deadline_cancels_the_broker_call(serve, broker):
    s = serve()
    hang = broker(lambda c, h: None)
    # The broker never answers: only the 1.5 s deadline can end the execution.
    status, out = post(s, execute("w6", "return await tools.echo({});", hang.url,
                                  policy={"timeoutMs": 1500}))
    assert status == 200 and out["status"] == "failed"
    assert out["error"]["code"] == "TIMEOUT", out


def test_bad_requests(serve, broker):
    s = serve()
    b = broker(echo)
    status, _, body = http_request(s.host, s.port, "POST", "/v1/executions", token=s.token,
                                   body=b"{nope")
    assert status == 400 and json.loads(body)["error"]["code"] == "INVALID_REQUEST"
    status, out = post(s, {"id": "x", "js": "return 1", "tools": []})
    assert status == 400 and "broker.url" in out["error"]["message"]
    status, out = post(s, execute("w7", "return 1", "file:///etc/passwd"))
    assert status == 400
    status, out = post(s, execute("w8", "return 1", b.url))
    assert status == 200
    status, out = post(s, execute("w8", "return 1", b.url))   # reused id
    assert status == 400 and out["error"]["code"] == "INVALID_REQUEST"
    status, out = post(s, execute("w9", "return 1", b.url), token="wrong")
    assert status == 401
    audits = {a["id"] for a in s.logs("audit")}
    assert audits == {"w8"}
