#!/usr/bin/env python3
"""The client side of kind/smoke.sh: one execution with a tool call over the
WebSocket API (GET /v1/session, subprotocol codepod.v1, bearer token).

  smoke_client.py --port P --ready
      exit 0 when GET /readyz answers 200
  smoke_client.py --port P --token T --conversation KEY [--namespace NS]
      runs the program, answers its tool call, checks the result, and prints
      the conversation's pod label (codepod.dev/conversation) for NS

Stdlib only (the WebSocket client is tests/serve/wsclient.py).
"""
import argparse
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "serve"))
from wsclient import WsClient, http_request  # noqa: E402

PROGRAM = """
const r = await tools.lookup({ n: 21 });
console.log("hello from the sandbox");
return { doubled: r.doubled, node: process.version };
"""
TOOL = {"name": "lookup", "description": "Doubles n.",
        "inputSchema": {"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]},
        "outputSchema": {"type": "object", "properties": {"doubled": {"type": "number"}}}}


def conversation_label(namespace, key):
    """The value of codepod.dev/conversation codepod puts on the pod."""
    return hashlib.sha256(namespace.encode() + b"\0" + key.encode()).hexdigest()[:40]


def run(host, port, token, conversation, timeout=300):
    ws = WsClient(host, port, token=token, timeout=timeout)
    try:
        ws.send_text(json.dumps({"type": "execute", "id": "smoke-1", "conversation": conversation,
                                 "reason": "kind smoke test", "js": PROGRAM, "tools": [TOOL]}))
        calls = 0
        while True:
            m = json.loads(ws.recv())
            if m["type"] == "tool_call":
                calls += 1
                ws.send_text(json.dumps({"type": "tool_result", "id": m["id"], "call": m["call"],
                                         "output": {"doubled": m["input"]["n"] * 2}}))
            elif m["type"] in ("result", "error"):
                break
    finally:
        ws.close()
    if m["type"] == "error" or m.get("status") != "succeeded":
        raise SystemExit(f"smoke: the execution failed: {json.dumps(m)[:2000]}")
    if m["result"].get("doubled") != 42 or calls != 1 or not m["result"]["node"].startswith("v22."):
        raise SystemExit(f"smoke: unexpected result: {json.dumps(m)[:2000]}")
    if "hello from the sandbox" not in m.get("logs", ""):
        raise SystemExit(f"smoke: the logs are missing: {json.dumps(m)[:2000]}")
    print(f"smoke: result {json.dumps(m['result'])}, {calls} tool call, "
          f"sandbox {m.get('usage', {}).get('sandbox')}", file=sys.stderr)
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--ready", action="store_true")
    ap.add_argument("--token")
    ap.add_argument("--conversation")
    ap.add_argument("--namespace", default="default")
    a = ap.parse_args()
    if a.ready:
        status, _, _ = http_request(a.host, a.port, "GET", "/readyz", timeout=5)
        sys.exit(0 if status == 200 else 1)
    if not a.token or not a.conversation:
        ap.error("--token and --conversation are needed")
    run(a.host, a.port, a.token, a.conversation)
    print(conversation_label(a.namespace, a.conversation))


if __name__ == "__main__":
    main()
