"""Helpers for the serve tests: a message pump over one WebSocket."""

import json
import threading
import time

import schemas
from wsclient import Closed


class Pump:
    """Reads every message of a WsClient on a thread; answers tool calls with
    handlers (name -> fn(input) -> output)."""

    made = []  # every pump of a test: conftest checks their schema_errors

    def __init__(self, ws, handlers=None):
        Pump.made.append(self)
        self.ws = ws
        self.handlers = handlers or {}
        self.msgs = []
        self.schema_errors = []
        self.cond = threading.Condition()
        self.eof = False
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        try:
            while True:
                m = json.loads(self.ws.recv())
                try:
                    schemas.check_from_server(m)
                except AssertionError as e:
                    self.schema_errors.append(str(e))
                if m.get("type") == "tool_call" and m.get("tool") in self.handlers:
                    out = self.handlers[m["tool"]](m.get("input"))
                    if out is not None:
                        self.ws.send_text(json.dumps({"type": "tool_result", "id": m["id"],
                                                      "call": m["call"], "output": out}))
                with self.cond:
                    self.msgs.append(m)
                    self.cond.notify_all()
        except (Closed, OSError, ValueError):
            pass
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def send(self, obj):
        self.ws.send_text(json.dumps(obj))

    def execute(self, eid, js, tools=(), **extra):
        msg = {"type": "execute", "id": eid, "conversation": f"conv-{eid}", "js": js,
               "tools": [{"name": t, "description": t, "inputSchema": {"type": "object"}}
                         for t in tools]}
        msg.update(extra)
        self.send(msg)

    def wait(self, pred, timeout=60, what="message"):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for m in self.msgs:
                    if pred(m):
                        return m
                if self.eof:
                    raise AssertionError(f"connection closed before {what}: {self.msgs[-5:]}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {what} in {timeout}s: {self.msgs[-5:]}")
                self.cond.wait(min(left, 0.5))

    def result(self, eid, timeout=60):
        return self.wait(lambda m: m.get("id") == eid and m["type"] in ("result", "error"),
                         timeout, f"result of {eid}")

    def wait_eof(self, timeout=30):
        deadline = time.monotonic() + timeout
        with self.cond:
            while not self.eof:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(min(left, 0.5))
        return True
