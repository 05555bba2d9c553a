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
        self.keep_raw = None          # a list: (raw body, headers) of each request
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(n)
                call = json.loads(raw)
                outer.calls.append((call, dict(self.headers)))
                if outer.keep_raw is not None:
                    outer.keep_raw.append((raw, dict(self.headers)))
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
    # The tool answered an error: not a broker failure.
    assert out["calls"] == [{"id": "1", "tool": "echo", "status": "error",
                             "ms": out["calls"][0]["ms"]}]


CANT_REACH = "The tool echo could not be reached."


@pytest.mark.parametrize("answer,reason", [((200, b"<html>garbage"), "malformed"),
                                           ((200, b"[1,2]"), "malformed"),
                                           ((500, b'{"output": 1}'), "http_status"),
                                           ((200, b""), "malformed")])
def test_broker_failures_are_told_apart_from_tool_errors(serve, broker, answer, reason):
    """v1 reported "the tool broker answered HTTP 500" to the model and an
    ordinary "error" in calls."""
    s = serve()
    b = broker(lambda c, h: answer)
    status, out = post(s, execute(
        "w3", "try { await tools.echo({}); return 'no'; } catch (e) { return e.message; }",
        b.url))
    assert status == 200 and out["status"] == "succeeded", out
    assert out["result"] == CANT_REACH
    c = out["calls"][0]
    assert c["status"] == "error" and c["broker"] is True and c["reason"] == reason, c
    assert (c.get("httpStatus") == 500) == (reason == "http_status")
    schemas.check("outcome.schema.json", out)
    fails = s.wait_logs("webhook.fail", lambda lines: lines)
    assert [f["reason"] for f in fails] == [reason]


def test_unreachable_broker(serve):
    import socket
    s = serve()
    with socket.socket() as sk:  # a port nobody listens on: ours, kept bound, not listening
        sk.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sk.getsockname()[1]}/tools"
        status, out = post(s, execute(
            "w3u", "try { await tools.echo({}); } catch (e) { return e.message; }", url))
    assert status == 200 and out["result"] == CANT_REACH
    assert out["calls"][0]["reason"] == "unreachable" and out["calls"][0]["broker"] is True


def test_hanging_broker_times_out_and_others_carry_on(serve, broker):
    # The other execution starts once the hanging call is in flight and must
    # be done while it still hangs: its outcome comes before the hung one's,
    # which only the webhook timeout can end (10 s: that bound only catches
    # a server that waits for the hung call).
    s = serve("--webhook-timeout-ms", "10000")
    in_flight = threading.Event()

    def hang_up(c, h):
        in_flight.set()
        return None
    hang = broker(hang_up)
    good = broker(echo)
    res = {}

    def slow():
        res["slow"] = post(s, execute(
            "w4", "try { await tools.echo({}); } catch (e) { return e.message; }", hang.url))

    t = threading.Thread(target=slow)
    t.start()
    assert in_flight.wait(60), "the hanging broker never got its call"
    status, out = post(s, execute("w5", "return (await tools.echo({ k: 5 })).got.k", good.url))
    assert status == 200 and out["result"] == 5
    assert "slow" not in res, "the other execution ended only after the hung call"
    t.join(60)
    status, out = res["slow"]
    assert status == 200 and out["result"] == CANT_REACH, out
    assert out["calls"][0]["reason"] == "timeout"


def test_execution_deadline_cancels_the_broker_call(serve, broker):
    """Without --webhook-timeout-ms a call may take the program's whole
    deadline: the execution ends TIMEOUT, its call cancelled (v1 cut every
    call at 30 s whatever timeoutMs said)."""
    s = serve()
    hang = broker(lambda c, h: None)
    # The broker never answers: only the 1.5 s deadline can end the execution.
    status, out = post(s, execute("w6", "return await tools.echo({});", hang.url,
                                  policy={"timeoutMs": 1500}))
    assert status == 200 and out["status"] == "failed"
    assert out["error"]["code"] == "TIMEOUT", out
    assert [c["status"] for c in out["calls"]] == ["cancelled"]


def verify(secret, headers, body, now=None, window=300):
    """The receiver's check, as broker/SESSION.md shows it."""
    import hashlib
    import hmac
    ts = headers["Codepod-Timestamp"]
    if abs((now or time.time()) - int(ts)) > window:
        return False
    mac = hmac.new(secret, ts.encode() + b"." + body, hashlib.sha256).hexdigest()
    return any(hmac.compare_digest("v1=" + mac, v.strip())
               for v in headers["Codepod-Signature"].split(","))


def test_requests_are_signed_with_the_secret(serve, broker, tmp_path):
    secret = b"0123456789abcdef-webhook-secret"
    (tmp_path / "secret").write_bytes(secret + b"\n")
    s = serve("--webhook-secret-file", str(tmp_path / "secret"))
    raw = []

    def behave(call, headers):
        return 200, json.dumps({"output": 1}).encode()
    b = broker(behave)
    b.keep_raw = raw
    req = execute("sig1", "return await tools.echo({ a: 'é' });", b.url)
    req["broker"]["headers"]["codepod-signature"] = "v1=forged"  # the caller cannot set ours
    status, out = post(s, req)
    assert status == 200 and out["result"] == 1, out
    (body, headers), = raw
    assert verify(secret, headers, body)
    assert not verify(b"another-secret-of-16+", headers, body)
    assert not verify(secret, headers, body + b" ")
    assert not verify(secret, headers, body, now=int(headers["Codepod-Timestamp"]) + 301)


def test_unsigned_without_a_secret_and_a_bad_secret_file_refused(serve, broker, tmp_path):
    s = serve()
    raw = []
    b = broker(echo)
    b.keep_raw = raw
    req = execute("sig2", "return 1 + (await tools.echo({})).tool.length;", b.url)
    # headers under codepod's names are codepod's, with a secret or without
    req["broker"]["headers"].update({"Codepod-Signature": "v1=forged", "codepod-timestamp": "1"})
    assert post(s, req)[0] == 200
    sent = {k.lower(): v for k, v in raw[0][1].items()}
    assert "codepod-signature" not in sent and "codepod-timestamp" not in sent, sent
    assert sent["x-tenant"] == "t1", sent
    (tmp_path / "short").write_text("short\n")
    import subprocess
    import harness
    r = subprocess.run([harness.CODEPOD_BIN, "serve", "--listen", "127.0.0.1:0", "--token-file",
                        str(tmp_path / "short"), "--webhook-secret-file", str(tmp_path / "short"),
                        "--state-dir", str(tmp_path / "st")], capture_output=True, timeout=30)
    assert r.returncode == 2 and b"16 to 4096 bytes" in r.stderr


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


def test_approval_suspends_and_resumes_over_http(serve, broker):
    """POST /v1/executions with a tool that needs approval answers the
    suspended outcome; the resume is another POST, and the approved call
    reaches the webhook once, with its idempotency key."""
    s = serve()
    b = broker(echo)
    js = "const a = await tools.echo({ n: 1 }); const p = await tools.pay({ n: 2 }); return [a.got.n, p.got.n];"
    tools = [{"name": "echo"}, {"name": "pay", "approval": "required"}]
    req = execute("wa1", js, b.url)
    req["tools"] = tools
    status, out = post(s, req)
    assert status == 200, out
    assert out["status"] == "suspended", out
    assert out["pending"] == [{"call": "2", "tool": "pay", "input": {"n": 2}}]
    schemas.check("outcome.schema.json", out)
    assert [c["tool"] for c, _ in b.calls] == ["echo"]
    again = dict(req, id="wa2", resume={"continuation": out["continuation"],
                                        "decisions": [{"call": "2", "approved": True}]})
    status, res = post(s, again)
    assert status == 200, res
    assert res["status"] == "succeeded" and res["result"] == [1, 2], res
    assert [c["tool"] for c, _ in b.calls] == ["echo", "pay"]
    paid = b.calls[1][0]
    assert paid["idempotencyKey"].endswith(":2")
    schemas.check("webhook_request.schema.json", paid)
    # once only, here
    status, err = post(s, dict(again, id="wa3"))
    assert status == 400 and err["error"]["code"] == "INVALID_REQUEST", err
    assert "already resumed" in err["error"]["message"]
    assert len(b.calls) == 2


def test_webhook_answers_suspend(serve, broker):
    """A webhook decides per call: {"suspend": true} makes the call pending;
    on resume the same call comes again with its idempotencyKey."""
    s = serve()

    def decide(call, headers):
        if call["tool"] == "pay" and "idempotencyKey" not in call:
            return 200, b'{"suspend": true}'
        return echo(call, headers)
    b = broker(decide)
    js = "const a = await tools.echo({ n: 1 }); const p = await tools.pay({ n: 2 }); return [a.got.n, p.got.n];"
    req = execute("ws1", js, b.url, tools=("echo", "pay"))
    status, out = post(s, req)
    assert status == 200 and out["status"] == "suspended", out
    assert out["pending"] == [{"call": "2", "tool": "pay", "input": {"n": 2}}]
    again = dict(req, id="ws2", resume={"continuation": out["continuation"],
                                        "decisions": [{"call": "2", "approved": True}]})
    status, res = post(s, again)
    assert status == 200 and res["result"] == [1, 2], res
    assert [(c["tool"], "idempotencyKey" in c) for c, _ in b.calls] == \
        [("echo", False), ("pay", False), ("pay", True)]
