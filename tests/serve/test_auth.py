"""Bearer token on every endpoint but the probes."""

import json
import os

import pytest

from wsclient import Rejected, http_request
from util import Pump


def assert_401(status, body):
    assert status == 401
    err = json.loads(body)["error"]
    assert err["code"] == "UNAUTHORIZED" and err["message"]


@pytest.mark.parametrize("token", [None, "e2e-token-0123456789abcdeX", "short", "x" * 500, ""])
def test_websocket_without_the_right_token_gets_401(serve, token):
    s = serve()
    with pytest.raises(Rejected) as ex:
        s.connect(token=token if token is not None else "", extra_headers=())
    assert_401(ex.value.status, ex.value.body)


def test_no_authorization_header_at_all(serve):
    s = serve()
    from wsclient import WsClient
    with pytest.raises(Rejected) as ex:
        WsClient(s.host, s.port, token=None)
    assert_401(ex.value.status, ex.value.body)
    status, _, body = http_request(s.host, s.port, "POST", "/v1/executions", body=b"{}")
    assert_401(status, body)


@pytest.mark.parametrize("token", ["wrong-token-of-same-len-xx", "a", "Bearer"])
def test_post_executions_wrong_token(serve, token):
    s = serve()
    status, _, body = http_request(s.host, s.port, "POST", "/v1/executions", token=token,
                                   body=b"{}")
    assert_401(status, body)


@pytest.mark.parametrize("token", [None, "wrong-token-of-same-len-xx"])
def test_every_endpoint_but_the_probes_needs_the_token(serve, token):
    """A kept outcome too: GET /v1/executions/{id} of an execution that ran
    answers 401 without the right token, and none of the outcome."""
    s = serve()
    p = Pump(s.connect())
    p.execute("kept1", "return 'the outcome of kept1';")
    assert p.result("kept1")["status"] == "succeeded"
    status, _, body = http_request(s.host, s.port, "GET", "/v1/executions/kept1", token=s.token)
    assert status == 200 and json.loads(body)["result"] == "the outcome of kept1", body
    for method, path, payload in (("GET", "/v1/executions/kept1", None),
                                  ("GET", "/v1/executions/unknown", None),
                                  ("POST", "/v1/executions", b"{}"),
                                  ("POST", "/v1/declarations", b"{}"),
                                  ("GET", "/v1/session", None)):
        status, _, body = http_request(s.host, s.port, method, path, token=token, body=payload)
        assert b"the outcome of kept1" not in body, (method, path, body)
        assert_401(status, body)


def test_probes_need_no_token_and_the_token_never_logs(serve):
    s = serve()
    for path in ("/healthz", "/readyz", "/metrics"):
        status, _, _ = http_request(s.host, s.port, "GET", path)
        assert status == 200, path
    status, _, _ = http_request(s.host, s.port, "GET", "/nope")
    assert status == 401
    status, _, _ = http_request(s.host, s.port, "GET", "/nope", token=s.token)
    assert status == 404
    assert s.token not in s.stderr_text()


def test_changed_token_file_is_picked_up(serve):
    s = serve()
    p = Pump(s.connect())
    p.execute("a1", "return 1")
    assert p.result("a1")["status"] == "succeeded"
    new = s.token_file.with_suffix(".new")
    new.write_text("the-new-token\n")
    os.rename(new, s.token_file)          # atomic, like a Kubernetes secret volume
    with pytest.raises(Rejected) as ex:
        s.connect()                       # the old token
    assert_401(ex.value.status, ex.value.body)
    p2 = Pump(s.connect(token="the-new-token"))
    p2.execute("a2", "return 2")
    assert p2.result("a2")["result"] == 2
    # rewritten in place too
    s.token_file.write_text("third-token-longer-than-before\n")
    with pytest.raises(Rejected):
        s.connect(token="the-new-token")
    s.connect(token="third-token-longer-than-before").close()
    # the open session goes on
    p.execute("a3", "return 3")
    assert p.result("a3")["result"] == 3
