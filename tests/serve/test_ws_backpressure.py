"""A WebSocket client that stops reading: codepod writes a message at once
while nothing waits, and queues the rest once the socket is full (lws keeps
the part the kernel did not take). Every message still arrives whole and in
order once the client reads again."""

import json
import time

import schemas

N_CALLS = 40
BIG = 900000


def test_messages_arrive_whole_and_in_order_after_the_client_stalls(serve):
    s = serve()
    ws = s.connect()
    js = ("const big = 'x'.repeat(%d);\n"
          "const out = await Promise.all(Array.from({ length: %d }, (_, i) => tools.echo({ i, big })));\n"
          "return out.map((r) => r.i);" % (BIG, N_CALLS))
    ws.send_text(json.dumps({
        "type": "execute", "id": "stall", "conversation": "stall", "js": js,
        "tools": [{"name": "echo", "description": "echo", "inputSchema": {"type": "object"}}],
        "policy": {"maxToolInputBytes": 1000000, "maxInFlightBridgeRequests": 32,
                   "timeoutMs": 120000}}))
    # 32 tool calls of ~900 KB go out at once: far more than the loopback
    # socket holds, so most of them queue while this client does not read.
    time.sleep(2)
    ws.sock.settimeout(120)  # only catches a hang
    calls, result = [], None
    while result is None:
        m = json.loads(ws.recv())
        schemas.check_from_server(m)
        if m["type"] == "tool_call":
            inp = m["input"]
            assert inp["big"] == "x" * BIG, "a tool call's input arrived cut or mixed"
            calls.append(int(m["call"]))
            ws.send_text(json.dumps({"type": "tool_result", "id": "stall", "call": m["call"],
                                     "output": {"i": inp["i"]}}))
        elif m["type"] == "result":
            result = m
        else:
            assert m["type"] == "accepted", m
    assert result["status"] == "succeeded", result
    assert result["result"] == list(range(N_CALLS))
    assert calls == list(range(1, N_CALLS + 1)), "tool calls out of order: %s" % calls
    ws.close()
