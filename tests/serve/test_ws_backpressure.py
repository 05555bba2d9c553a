"""A WebSocket client that stops reading: codepod writes a message at once
while nothing waits, and queues the rest once the socket is full (lws keeps
the part the kernel did not take). Every message still arrives whole and in
order once the client reads again."""

import json
import time

import schemas

N_CALLS = 40
BIG = 900000
IN_FLIGHT = 32


def tcp(local, remote):
    """(tx_queue, rx_queue, timer) of the loopback TCP socket from port
    `local` to port `remote` (/proc/net/tcp), or None."""
    want = (f"0100007F:{local:04X}", f"0100007F:{remote:04X}")
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            col = line.split()
            if (col[1], col[2]) == want:
                tx, rx = col[4].split(":")
                return int(tx, 16), int(rx, 16), int(col[5].split(":")[0], 16)
    return None


def stalled(server_port, client_port):
    """codepod's end of the connection holds bytes the client's full receive
    window does not take: the kernel probes the zero window (timer 4)."""
    srv, cli = tcp(server_port, client_port), tcp(client_port, server_port)
    if srv and cli and srv[2] == 4 and srv[0] > 0:
        return srv[0], cli[1]
    return None


def test_messages_arrive_whole_and_in_order_after_the_client_stalls(serve):
    s = serve()
    ws = s.connect()
    js = ("const big = 'x'.repeat(%d);\n"
          "const out = await Promise.all(Array.from({ length: %d }, (_, i) => tools.echo({ i, big })));\n"
          "return out.map((r) => r.i);" % (BIG, N_CALLS))
    ws.send_text(json.dumps({
        "type": "execute", "id": "stall", "conversation": "stall", "js": js,
        "tools": [{"name": "echo", "description": "echo", "inputSchema": {"type": "object"}}],
        "policy": {"maxToolInputBytes": 1000000, "maxInFlightBridgeRequests": IN_FLIGHT,
                   "timeoutMs": 120000}}))
    # 32 tool calls of ~900 KB go out at once: far more than the loopback
    # socket holds, so most of them queue while this client does not read.
    # It reads once the socket is full: codepod's side probes a zero window
    # with less in the kernel, both ends, than the calls in flight.
    port = ws.sock.getsockname()[1]
    deadline = time.monotonic() + 60  # only catches a hang
    while not (held := stalled(s.port, port)):
        assert time.monotonic() < deadline, f"the socket never filled: {tcp(s.port, port)}"
        time.sleep(0.05)
    assert sum(held) < IN_FLIGHT * BIG // 2, f"the kernel holds most of the calls: {held}"
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
