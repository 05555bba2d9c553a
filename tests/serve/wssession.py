"""A WebSocket-backed `Session` for the e2e harness: the same API, but each
session starts `codepod serve --listen 127.0.0.1:0 --token-file F` and
speaks protocol v1 over one WebSocket (subprotocol codepod.v1)."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "e2e"))

import harness  # noqa: E402
from wsclient import Closed, WsClient  # noqa: E402

TOKEN = "e2e-token-0123456789abcdef"


class Server:
    """One `codepod serve --listen` process; stderr collected, port parsed."""

    def __init__(self, state_dir, args=(), env=None, token=TOKEN, listen=("127.0.0.1:0",)):
        self.dir = Path(state_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.token_file = self.dir.parent / f"token-{os.getpid()}-{id(self)}"
        self.token_file.write_text(token + "\n")
        self.token = token
        cmd = [harness.CODEPOD_BIN, "serve", "--state-dir", str(self.dir),
               "--token-file", str(self.token_file), *harness.backend_args()]
        for addr in listen:
            cmd += ["--listen", addr]
        cmd += list(args)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, cwd=str(harness.REPO),
                                     env=env or os.environ.copy())
        self.stderr_lines = []
        self.cond = threading.Condition()
        self.ports = []
        self.started = False  # serve.start: SIGTERM is handled from then on
        self._t = threading.Thread(target=self._read_stderr, daemon=True)
        self._t.start()
        deadline = time.monotonic() + 30
        with self.cond:
            # serve.listen comes as each address is bound, serve.start once
            # the signals are handled: a SIGTERM before that would kill
            # codepod outright, and stop() would see -15, not a drain
            while len(self.ports) < len(listen) or not self.started:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("codepod serve did not start: " + self.stderr_text())
                self.cond.wait(0.2)
        self.host = "127.0.0.1"
        self.port = self.ports[0]

    def _read_stderr(self):
        for raw in self.proc.stderr:
            with self.cond:
                self.stderr_lines.append(raw)
                try:
                    m = json.loads(raw)
                    if m.get("event") == "serve.listen":
                        self.ports.append(m["port"])
                    elif m.get("event") == "serve.start":
                        self.started = True
                except ValueError:
                    pass
                self.cond.notify_all()

    def stderr_text(self):
        with self.cond:
            return b"".join(self.stderr_lines[-30:]).decode(errors="replace")

    def logs(self, event=None):
        with self.cond:
            lines = list(self.stderr_lines)
        return harness.parse_log_lines(lines, event)

    def wait_logs(self, event, done, timeout=30):
        """The log lines of one event once done(lines) holds. stderr is read by
        a thread of ours, so a line codepod wrote before a result may arrive
        here after it; the deadline only catches a hang."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                lines = self.logs(event)
                if done(lines):
                    return lines
                left = deadline - time.monotonic()
                assert left > 0, "no such %s log lines: %s" % (event, self.stderr_text())
                self.cond.wait(min(left, 0.5))

    def connect(self, token=None, **kw):
        return WsClient(self.host, self.port, token=self.token if token is None else token, **kw)

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            left = harness.process_tree(self.proc.pid)
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"codepod serve did not exit within {timeout}s of {sig}; "
                                 f"its processes then: {left}; "
                                 f"stderr tail:\n{self.stderr_text()[-3000:]}")
        self._t.join(10)
        return rc


class WsSession(harness.Session):
    def __init__(self, state_dir, args=(), env=None):
        self.server = Server(state_dir, args=args, env=env)
        self.proc = self.server.proc
        self.ws = self.server.connect()
        self._pending = b""
        self._init_common()

    def _init_common(self):
        import itertools
        import queue
        self.state_dir = str(self.server.dir)
        self.cond = threading.Condition()
        self.messages, self.stray, self.consumed = [], [], set()
        self.first_look = None
        self.schema_errors = []
        self.stdout_eof = False
        self.closed = False
        self.handlers, self.delay = {}, None
        self.outstanding, self.max_outstanding = {}, {}
        self._wlock = threading.Lock()
        self._seq = itertools.count(1)
        self._answers = queue.Queue()
        self._timers = []
        self._reader = threading.Thread(target=self._read_ws, daemon=True)
        self._answerer = threading.Thread(target=self._answer_loop, daemon=True)
        self._reader.start()
        self._answerer.start()

    @property
    def stderr_lines(self):
        return self.server.stderr_lines

    def _read_ws(self):
        try:
            while True:
                text = self.ws.recv()
                try:
                    msg = json.loads(text)
                    if not isinstance(msg, dict) or msg.get("type") not in harness.OUT_TYPES:
                        raise ValueError("not a protocol message")
                except ValueError:
                    with self.cond:
                        self.stray.append(text[:500])
                        self.cond.notify_all()
                    continue
                if self.first_look:
                    self.first_look(msg)
                self._check_schema(msg)
                with self.cond:
                    self._track(msg)
                    self.messages.append(msg)
                    self.cond.notify_all()
                if msg["type"] == "tool_call" and msg.get("tool") in self.handlers:
                    self._schedule(msg)
        except (Closed, OSError):
            pass
        with self.cond:
            self.stdout_eof = True
            self.cond.notify_all()

    def send_raw(self, data):
        """Lines of `data` become one text message each (stdio framing)."""
        with self._wlock:
            self._pending += data
            *lines, self._pending = self._pending.split(b"\n")
            for line in lines:
                if line.strip():
                    try:
                        self.ws.send_text(line)
                    except OSError:
                        pass

    def send(self, obj):
        with self._wlock:
            try:
                self.ws.send_text(json.dumps(obj).encode())
            except OSError:
                pass

    def close(self, timeout=60):
        """Close the WebSocket, then SIGTERM the server; its exit code."""
        if not self.closed:
            self.closed = True
            self.ws.close()
        self._reader.join(10)
        rc = self.server.stop(timeout=timeout)
        self._answers.put(None)
        for t in self._timers:
            t.cancel()
        return rc
