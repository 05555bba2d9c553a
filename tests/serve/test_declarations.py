"""POST /v1/declarations: tools with JSON Schemas in, TypeScript out, behind auth."""

import json
from pathlib import Path

from wsclient import http_request

CASES = Path(__file__).resolve().parents[1] / "decl" / "cases"


def post(s, body, token=None):
    status, _, raw = http_request(s.host, s.port, "POST", "/v1/declarations",
                                  token=s.token if token is None else token, body=body)
    return status, json.loads(raw)


def test_invoices_tools_render_as_the_golden_file(serve):
    s = serve()
    status, out = post(s, (CASES / "invoices.json").read_bytes())
    assert status == 200, out
    assert out["declarations"] == (CASES / "invoices.d.ts").read_text()
    assert "listInvoices: (input: { /** @pattern ^\\d{4}-\\d{2}$ */ month: string; })" \
        in out["declarations"]


def test_disabled_tools_are_left_out(serve):
    s = serve()
    tools = {"tools": [{"name": "a", "inputSchema": {"type": "object"}},
                       {"name": "b", "enabled": False, "inputSchema": {"type": "object"}}]}
    status, out = post(s, json.dumps(tools).encode())
    assert status == 200, out
    assert "  a: " in out["declarations"] and "  b: " not in out["declarations"]


def test_bad_bodies_get_a_clear_400(serve):
    s = serve()
    status, out = post(s, b"{not json")
    assert status == 400 and out["error"]["code"] == "INVALID_REQUEST"
    status, out = post(s, json.dumps({"tools": 7}).encode())
    assert status == 400 and "array" in out["error"]["message"]


def test_needs_the_token_and_post(serve):
    s = serve()
    status, out = post(s, b"[]", token="wrong")
    assert status == 401
    status, _, _ = http_request(s.host, s.port, "GET", "/v1/declarations", token=s.token)
    assert status == 405


def test_bounds_render_as_the_golden_file(serve):
    s = serve()
    status, out = post(s, (CASES / "bounds.json").read_bytes())
    assert status == 200, out
    assert out["declarations"] == (CASES / "bounds.d.ts").read_text()
    assert "/** @integer @minimum 1 @maximum 50 @default 10 */ limit?: number;" \
        in out["declarations"]


def test_the_preamble_says_no_network_and_names_the_deployments_packages(serve):
    tools = json.dumps([{"name": "t"}]).encode()
    status, out = post(serve(), tools)
    assert status == 200, out
    assert "no network access" in out["declarations"]
    assert "require() gives Node's built-in modules only." in out["declarations"]
    status, out = post(serve("--sandbox-packages", "lodash, zod"), tools)
    assert status == 200, out
    assert "no network access" in out["declarations"]
    assert "built-in modules and these packages: lodash, zod.\n */\n" in out["declarations"]
