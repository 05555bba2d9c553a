"""webhook_handler on aiohttp, fed by codepod's own signed POSTs
(serve --listen --webhook-secret-file): signature, routing, validation and
to_model_error, with codepod's refusals before POSTing in the TypeScript
SDK's (Ajv's) words."""

import json
import os
import time

import aiohttp
from aiohttp import web

from codepod import Tool, webhook_handler, webhook_signature
from conftest import Fixture, Server, arun

SECRET = "webhook-secret-for-the-python-sdk-" + str(os.getpid())
SCHEMA = {"type": "object",
          "properties": {"q": {"type": "string", "minLength": 1},
                         "limit": {"type": "integer", "minimum": 1, "maximum": 50}},
          "required": ["q"], "additionalProperties": False}
DB_ERROR = 'relation "orders" does not exist (db-7.internal:5432)'
JS = """const out = [];
for (const input of [{}, { q: "a", limit: 51 }, { q: "a", extra: 1 }, { q: "abc", limit: 2 }]) {
  try { out.push(await tools.search(input)); } catch (e) { out.push(e.message); }
}
try { await tools.orders({}); } catch (e) { out.push(e.message); }
return out;"""


def make_tools(seen):
    def search(value, ctx):
        seen.append((value, ctx.conversation, ctx.execution_id))
        return {"hits": len(value["q"])}

    def orders(_):
        raise RuntimeError(DB_ERROR)
    return {"search": Tool(fn=search, input_schema=SCHEMA), "orders": Tool(fn=orders)}


def hide(e, info):
    return "The order database is unavailable." if info["tool"] == "orders" else str(e)


async def broker(handler):
    app = web.Application()
    app.router.add_post("/tools", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    return runner, f"http://127.0.0.1:{port}/tools"


def test_codepods_signed_posts_reach_the_tools(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text(SECRET + "\n")
    srv = Server(tmp_path, args=("--webhook-secret-file", str(secret)))
    seen = []

    async def go():
        runner, url = await broker(webhook_handler(make_tools(seen), secret=SECRET, to_model_error=hide))
        try:
            eid = f"py-w-{os.getpid()}"
            async with aiohttp.ClientSession() as http:
                r = await http.post(f"{srv.url}/v1/executions",
                                    headers={"Authorization": f"Bearer {srv.token}"},
                                    json={"id": eid, "conversation": "c-" + eid, "js": JS,
                                          "tools": [{"name": "search", "inputSchema": SCHEMA},
                                                    {"name": "orders", "inputSchema": {"type": "object"}}],
                                          "broker": {"url": url}})
                assert r.status == 200
                return eid, await r.json()
        finally:
            await runner.cleanup()
    try:
        eid, o = arun(go())
    finally:
        assert srv.stop() == 0
    assert o["status"] == "succeeded", o
    assert o["result"] == [
        "Invalid input for tool search: input must have required property 'q'",
        "Invalid input for tool search: input.limit must be <= 50",
        "Invalid input for tool search: input must NOT have additional properties",
        {"hits": 3},
        "The order database is unavailable.",
    ]
    # codepod checked the inputs: only the valid one was POSTed, signed, and routed.
    assert seen == [({"q": "abc", "limit": 2}, "c-" + eid, eid)]
    assert not any(c.get("broker") for c in o["calls"])


def test_the_handler_checks_signature_and_input_itself(tmp_path):
    """A request codepod did not check (another sender, an older codepod):
    the handler refuses it in the words Codepod.run uses."""
    seen = []
    bad = {"q": "a", "limit": 99}

    async def go():
        fx = Fixture("stdio", tmp_path)
        cp = await fx.open()
        try:
            o = await cp.run(conversation=f"sdk-py-webhook-{os.getpid()}", tools=make_tools([]),
                             js=f"try {{ await tools.search({json.dumps(bad)}); }} catch (e) {{ return e.message; }}")
        finally:
            await fx.aclose()
        runner, url = await broker(webhook_handler(make_tools(seen), secret=SECRET))
        try:
            async with aiohttp.ClientSession() as http:
                async def post(body, ts=None, key=SECRET):
                    ts = ts or str(int(time.time()))
                    h = {"Codepod-Timestamp": ts, "Codepod-Signature": webhook_signature(key, ts, body),
                         "Content-Type": "application/json"}
                    r = await http.post(url, data=body, headers=h)
                    return r.status, await r.text()
                body = json.dumps({"id": "e1", "conversation": "c", "call": "1", "tool": "search",
                                   "input": bad}).encode()
                unsigned = await http.post(url, data=body)
                got = {"unsigned": unsigned.status,
                       "wrong key": (await post(body, key="another-secret-entirely"))[0],
                       "stale": (await post(body, ts=str(int(time.time()) - 3600)))[0],
                       "good": await post(body),
                       "unknown": await post(json.dumps({"id": "e1", "call": "2", "tool": "nope",
                                                         "input": {}}).encode()),
                       "not json": (await post(b"{nope"))[0]}
        finally:
            await runner.cleanup()
        return o["result"], got
    from_run, got = arun(go())
    assert got["unsigned"] == 401 and got["wrong key"] == 401 and got["stale"] == 401
    status, text = got["good"]
    assert status == 200 and json.loads(text) == {"error": from_run}
    assert from_run.startswith("Invalid input for tool search: input.limit")
    assert json.loads(got["unknown"][1]) == {"error": "Unknown tool: nope"}
    assert got["not json"] == 400
    assert seen == []
