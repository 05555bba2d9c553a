"""POST /v1/executions: which broker URLs codepod sends tool calls to
(broker/url_guard.h), and which headers reach the broker.

By default link-local and metadata addresses in every spelling, URLs with a
user name or password, and codepod's own listener are refused with a 400
INVALID_REQUEST naming the rule, before anything is connected to; a name is
checked on the address it connects to. --broker-allow admits exactly what
it names. No test here connects anywhere but loopback: every refused
address is refused before a connection is made (a broken guard would show
as a 200 here, not as traffic)."""
import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import harness
from test_webhook import execute, post


class LoopBroker:
    """An echo broker on one loopback address, keeping each request's headers."""

    def __init__(self, host="127.0.0.1"):
        self.requests = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outer.requests.append(([(k, v) for k, v in self.headers.items()], raw))
                body = json.dumps({"output": json.loads(raw)["input"]}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer((host, 0), H)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://{host}:{self.port}/tools"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def loop_broker():
    made = []

    def make(host="127.0.0.1"):
        b = LoopBroker(host)
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()


CALL = "return await tools.echo({ n: 7 });"
CANT_REACH = "The tool echo could not be reached."


def refused(s, url, rule, eid):
    status, out = post(s, execute(eid, CALL, url))
    assert status == 400, (url, out)
    err = out["error"]
    assert err["code"] == "INVALID_REQUEST" and rule in err["message"], (url, err)
    return err


METADATA = [
    ("http://169.254.169.254/latest/meta-data/", "169.254.0.0/16"),
    ("http://2852039166/", "169.254.0.0/16"),             # decimal
    ("http://0xa9fea9fe/", "169.254.0.0/16"),             # hex
    ("http://0251.0376.0251.0376/", "169.254.0.0/16"),    # octal
    ("http://169.254.43518/", "169.254.0.0/16"),          # fewer parts
    ("http://[::ffff:169.254.169.254]/", "169.254.0.0/16"),  # IPv4-mapped
    ("http://[::ffff:a9fe:a9fe]/", "169.254.0.0/16"),
    ("http://[64:ff9b::a9fe:a9fe]/", "169.254.0.0/16"),   # NAT64
    ("http://[fe80::1]:8080/", "fe80::/10"),
    ("http://[fd00:ec2::254]/", "fd00:ec2::254"),
]


@pytest.mark.parametrize("url,rule", METADATA)
def test_link_local_and_metadata_addresses_are_refused_in_every_spelling(serve, url, rule):
    s = serve()
    err = refused(s, url, rule, "meta")
    assert "link-local or metadata" in err["message"] and "--broker-allow" in err["message"]
    assert not s.logs("webhook.fail"), "refused before any call"


def test_userinfo_in_the_url_is_refused(serve, loop_broker):
    s = serve()
    b = loop_broker()
    refused(s, b.url.replace("http://", "http://user:pw@"), "user name or password", "ui1")
    refused(s, b.url.replace("http://", "http://user@"), "user name or password", "ui2")
    assert b.requests == []


@pytest.mark.parametrize("spelling", ["127.0.0.1", "0x7f000001", "2130706433", "0.0.0.0",
                                      "[::ffff:127.0.0.1]"])
def test_codepods_own_listener_is_refused(serve, spelling):
    s = serve()
    refused(s, f"http://{spelling}:{s.port}/v1/executions", "codepod's own listener", "self")


def test_a_name_is_checked_on_the_address_it_connects_to(serve):
    """localhost resolves to codepod's own listener: the execution starts (a
    name is not resolved on the request's path), and the call is refused
    where libcurl would connect, as a broker failure whose log names the rule."""
    s = serve()
    status, out = post(s, execute(
        "dns1", "try { await tools.echo({}); return 'no'; } catch (e) { return e.message; }",
        f"http://localhost:{s.port}/v1/executions"))
    assert status == 200 and out["status"] == "succeeded", out
    assert out["result"] == CANT_REACH
    c = out["calls"][0]
    assert c["broker"] is True and c["reason"] == "unreachable", c
    fails = s.wait_logs("webhook.fail", lambda lines: lines)
    assert "codepod's own listener" in fails[0]["message"], fails


def test_loopback_and_other_names_stay_allowed_by_default(serve, loop_broker):
    s = serve()
    b = loop_broker("127.0.0.2")
    for eid, url in (("lb1", b.url), ("lb2", f"http://localhost:{loop_broker().port}/tools")):
        status, out = post(s, execute(eid, CALL, url))
        assert status == 200 and out["status"] == "succeeded" and out["result"] == {"n": 7}, out


def test_an_explicit_list_admits_exactly_what_it_names(serve, loop_broker):
    listed, other = loop_broker("127.0.0.2"), loop_broker("127.0.0.1")
    s = serve("--broker-allow", "127.0.0.2/32", "--broker-allow", "broker.invalid, 10.0.0.0/8")
    status, out = post(s, execute("al1", CALL, listed.url))
    assert status == 200 and out["result"] == {"n": 7}, out
    refused(s, other.url, "not named by --broker-allow", "al2")
    # a name not listed: refused where it connects (a CIDR could have admitted it)
    status, out = post(s, execute("al3", "try { await tools.echo({}); } catch (e) { return e.message; }",
                                  f"http://localhost:{other.port}/tools"))
    assert status == 200 and out["result"] == CANT_REACH, out
    assert other.requests == []
    fails = s.wait_logs("webhook.fail", lambda lines: lines)
    assert "not named by --broker-allow" in fails[0]["message"], fails


def test_names_only_refuse_an_unlisted_name_at_once(serve, loop_broker):
    b = loop_broker()
    s = serve("--broker-allow", "localhost")
    status, out = post(s, execute("nm1", CALL, f"http://localhost:{b.port}/tools"))
    assert status == 200 and out["result"] == {"n": 7}, out
    refused(s, f"http://broker.invalid:{b.port}/tools", "not named by --broker-allow", "nm2")
    refused(s, b.url, "not named by --broker-allow", "nm3")


def test_a_bad_broker_allow_entry_stops_the_server(tmp_path):
    token = tmp_path / "token"
    token.write_text("t" * 32 + "\n")
    r = subprocess.run([harness.CODEPOD_BIN, "serve", "--listen", "127.0.0.1:0", "--token-file",
                        str(token), "--state-dir", str(tmp_path / "state"),
                        "--broker-allow", "10.0.0.0/33", *harness.backend_args()],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and "--broker-allow 10.0.0.0/33" in r.stderr, r.stderr


def test_only_broker_headers_reach_the_broker(serve, loop_broker):
    """codepod's bearer token, the caller's Host and its other headers stay
    with codepod; broker.headers go as given (an Authorization for the
    broker included)."""
    s = serve()
    b = loop_broker()
    req = execute("hd1", CALL, b.url)
    req["broker"]["headers"] = {"Authorization": "Bearer for-the-broker", "X-Tenant": "t1"}
    status, _, body = harness_request(s, req, extra=["X-Forwarded-For: 203.0.113.9",
                                                     "Cookie: session=caller"])
    assert status == 200 and json.loads(body)["result"] == {"n": 7}, body
    (headers, _), = b.requests
    got = {}
    for k, v in headers:
        got.setdefault(k.lower(), []).append(v)
    assert got["authorization"] == ["Bearer for-the-broker"], got
    assert got["x-tenant"] == ["t1"], got
    assert got["host"] == [f"127.0.0.1:{b.port}"], got
    assert "x-forwarded-for" not in got and "cookie" not in got, got
    assert not any(s.token in v for vs in got.values() for v in vs), "codepod's token reached the broker"


def harness_request(s, req, extra=()):
    from wsclient import http_request
    return http_request(s.host, s.port, "POST", "/v1/executions", token=s.token,
                        body=json.dumps(req).encode(), headers=list(extra), timeout=60)
