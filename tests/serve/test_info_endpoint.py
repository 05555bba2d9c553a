"""GET /v1/info (broker/SESSION.md, "Discovery") with Python's own HTTP
client, and the hello message over a WebSocket with the websocket-client
library (Debian's python3-websocket): both say the same."""

import json
import re
import signal
import subprocess
import urllib.error
import urllib.request

import pytest
import websocket

import harness
import schemas
from util import Pump


def get_info(s, token, method="GET"):
    req = urllib.request.Request(f"http://{s.host}:{s.port}/v1/info", method=method,
                                 data=b"{}" if method == "POST" else None)
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers.get("Content-Type"), json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), json.loads(e.read())


def test_info_says_protocol_version_and_features(serve):
    s = serve()
    status, ctype, body = get_info(s, s.token)
    assert status == 200 and ctype.startswith("application/json"), (status, ctype)
    schemas.check(schemas.INDEX["http"]["GET /v1/info"]["200"], body)
    assert body["protocol"] == "1.1"
    version = subprocess.run([harness.CODEPOD_BIN, "--version"], capture_output=True,
                             text=True).stdout
    assert version == f"codepod {body['version']}\n"
    assert {"executions", "stream", "declarations", "attach", "webhook"} <= set(body["features"])
    # serve --listen has every feature; SESSION.md's Discovery table lists
    # exactly those (a feature added to broker/features.c needs its line)
    md = (harness.REPO / "broker" / "SESSION.md").read_text()
    section = md.split("\n## Discovery")[1].split("\n## ")[0]
    documented = re.findall(r"^\| `([a-z][a-z0-9_-]*)` \|", section, re.M)
    assert sorted(body["features"]) == sorted(documented), (body["features"], documented)


@pytest.mark.parametrize("token", [None, "e2e-token-0123456789abcdeX"])
def test_info_needs_the_token(serve, token):
    s = serve()
    status, _, body = get_info(s, token)
    assert status == 401 and body["error"]["code"] == "UNAUTHORIZED"
    assert "features" not in json.dumps(body)


def test_info_is_get_only(serve):
    s = serve()
    status, _, body = get_info(s, s.token, method="POST")
    assert status == 405 and body["error"]["code"] == "INVALID_REQUEST", body


def test_hello_over_the_websocket_matches_info(serve):
    s = serve()
    ws = websocket.create_connection(f"ws://{s.host}:{s.port}/v1/session", timeout=30,
                                     subprotocols=["codepod.v1"],
                                     header=[f"Authorization: Bearer {s.token}"])
    try:
        ws.send(json.dumps({"type": "hello", "id": "h-ws"}))
        m = json.loads(ws.recv())
    finally:
        ws.close()
    schemas.check_from_server(m)
    assert m["type"] == "hello" and m["id"] == "h-ws"
    _, _, info = get_info(s, s.token)
    assert {k: m[k] for k in info} == info


def test_info_still_answers_while_draining(serve):
    """A draining server refuses new work (503) but still says what it is."""
    s = serve("--drain-seconds", "60")
    p = Pump(s.connect(), {"hold": lambda inp: None})
    p.execute("d1", "await new Promise((r) => setTimeout(r, 120000)); return 1;")
    p.wait(lambda m: m.get("type") == "accepted", what="accepted")
    s.proc.send_signal(signal.SIGTERM)
    s.wait_logs("serve.draining", lambda lines: lines)
    status, _, body = get_info(s, s.token)
    assert status == 200 and body["features"], body
    p.send({"type": "stop", "id": "d1"})
    assert p.result("d1")["status"] == "failed"
