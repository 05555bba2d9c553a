"""DELETE /v1/conversations/{key}: a conversation's workspace and the
outcomes kept for its executions are gone when it answers 200."""
import hashlib
import json

from util import Pump
from wsclient import http_request


def test_delete_takes_the_workspace_and_the_kept_outcomes(serve):
    srv = serve()
    p = Pump(srv.connect())
    p.execute("e1", "require('fs').writeFileSync('f', 'x'); return 1", conversation="c-http")
    assert p.result("e1")["type"] == "result"
    ws = srv.dir / "workspaces" / hashlib.sha256(b"c-http").hexdigest()[:32]
    assert (ws / "f").exists()
    st, _, _ = http_request(srv.host, srv.port, "GET", "/v1/executions/e1", token=srv.token)
    assert st == 200
    # The token is needed, as everywhere.
    st, _, _ = http_request(srv.host, srv.port, "DELETE", "/v1/conversations/c-http")
    assert st == 401 and ws.exists()
    st, _, body = http_request(srv.host, srv.port, "DELETE", "/v1/conversations/c-http",
                               token=srv.token)
    assert st == 200 and json.loads(body) == {"conversation": "c-http"}
    assert not ws.exists()
    st, _, _ = http_request(srv.host, srv.port, "GET", "/v1/executions/e1", token=srv.token)
    assert st == 404
    # Another conversation's outcome is untouched.
    p.execute("e2", "return 2", conversation="c-other")
    assert p.result("e2")["type"] == "result"
    st, _, _ = http_request(srv.host, srv.port, "DELETE", "/v1/conversations/c-http",
                            token=srv.token)
    assert st == 200
    st, _, _ = http_request(srv.host, srv.port, "GET", "/v1/executions/e2", token=srv.token)
    assert st == 200
