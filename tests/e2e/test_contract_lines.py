"""Contract lines no other test checked: packages through require and import
(2.4), queued calls counting toward the total and sharing the deadline (3),
the 32/33 nesting boundary (3), logs kept with TIMEOUT and PROCESS_EXITED
(4), INTERNAL end to end (4), and no thread per execution (8)."""

import json
import os
import sys
import uuid
from pathlib import Path

from harness import (BACKEND, NO_ANSWER, Session, assert_failed, assert_ok, local_backend_only,
                     nested_js, nested_py)


def echo(inp):
    return inp


# 2.4 -------------------------------------------------------------------------
def test_installed_packages_work_through_require_and_import(session):
    """A package installed in the workspace (node_modules, as `npm install`
    leaves it) is found by require() and by await import()."""
    conv = f"pkg-{uuid.uuid4().hex[:8]}"
    pkg = {"name": "shout", "version": "1.0.0", "main": "index.js"}
    assert_ok(session.run(
        "const fs = require('node:fs');\n"
        "fs.mkdirSync('node_modules/shout', { recursive: true });\n"
        f"fs.writeFileSync('node_modules/shout/package.json', {json.dumps(json.dumps(pkg))});\n"
        "fs.writeFileSync('node_modules/shout/index.js',"
        " 'module.exports = (s) => s.toUpperCase() + \"!\";');\n"
        "return 1;", conversation=conv))
    res = assert_ok(session.run(
        "const shout = require('shout');\n"
        "const viaImport = (await import('shout')).default;\n"
        "return [shout('hi'), viaImport('ho'), typeof require('node:path').join];",
        conversation=conv))
    assert res["result"] == ["HI!", "HO!", "function"]


# 3 ---------------------------------------------------------------------------
def test_queued_calls_count_toward_the_total(session):
    """Six calls at once, two in flight at most, four in all: the two that
    waited in the queue past the total are denied, catchably, and never
    reach the backend."""
    session.serve({"echo": echo}, delay=0.2)
    eid = session.execute(
        "const rs = await Promise.allSettled([0, 1, 2, 3, 4, 5].map((i) => tools.echo({ i })));\n"
        "return rs.map((r) => r.status === 'fulfilled' ? r.value.i : 'denied: ' + r.reason.message);",
        policy={"maxInFlightBridgeRequests": 2, "maxBridgeRequests": 4})
    res = assert_ok(session.wait_result(eid))
    out = res["result"]
    assert out[:4] == [0, 1, 2, 3], out
    assert all(isinstance(m, str) and m.startswith("denied: ") and "4" in m for m in out[4:]), out
    assert len(session.of(eid, "tool_call")) == 4
    assert session.max_outstanding[eid] <= 2
    # calls lists at most maxBridgeRequests entries; the rest are counted by status
    assert [c["status"] for c in res["calls"]] == ["ok"] * 4
    assert res["callsOmitted"] == {"denied": 2}


def test_queued_calls_share_the_deadline(session):
    """One call in flight at a time, the backend answering none: the queued
    calls never start, and the program's deadline ends everything."""
    session.serve({"hang": lambda inp: NO_ANSWER})
    eid = session.execute(
        "return await Promise.all([1, 2, 3].map((i) => tools.hang({ i })));",
        policy={"maxInFlightBridgeRequests": 1, "timeoutMs": 2000})
    res = session.wait_result(eid)
    assert_failed(res, "TIMEOUT")
    assert len(session.of(eid, "tool_call")) == 1, "a queued call started while one was in flight"


def test_nesting_boundary_is_32_levels(session):
    """32 levels of JSON cross the boundary; 33 are refused, in all three
    directions: the result, a tool's input, a tool's output."""
    assert assert_ok(session.run(f"return {nested_js(32)};"))["result"] == nested_py(32)
    res = session.run(f"return {nested_js(33)};")
    err = assert_failed(res, "SCRIPT_ERROR")
    assert "32" in err["message"] and "result" not in res, err
    session.serve({"echo": echo, "deep": lambda inp: nested_py(inp["d"])})
    res = assert_ok(session.run(
        "const tryIt = async (f) => { try { await f(); return 'ok'; } catch (e) { return e.message; } };\n"
        f"return [await tryIt(() => tools.echo({nested_js(32)})),\n"
        f"        await tryIt(() => tools.echo({nested_js(33)})),\n"
        "        await tryIt(() => tools.deep({ d: 32 })),\n"
        "        await tryIt(() => tools.deep({ d: 33 }))];", tools=["echo", "deep"]))
    r = res["result"]
    assert r[0] == "ok" and r[2] == "ok", r
    assert "input" in r[1] and "32" in r[1], r
    assert "output" in r[3] and "32" in r[3], r


# 4 ---------------------------------------------------------------------------
def test_logs_are_kept_with_timeout_and_process_exited(session):
    res = session.run("console.log('before the wait');\nconsole.error('and on stderr');\n"
                      "await new Promise(() => setInterval(() => {}, 1000));",
                      policy={"timeoutMs": 1500})
    assert_failed(res, "TIMEOUT")
    assert "before the wait\n" in res["logs"] and "and on stderr\n" in res["logs"], res["logs"]
    res = session.run("console.log('last words');\nprocess.exit(3);")
    assert_failed(res, "PROCESS_EXITED")
    assert res["logs"] == "last words\n", res["logs"]


FAKE_NODE = r'''#!/usr/bin/python3
# A "node" that speaks the control channel wrongly: it answers the hello
# with a ready frame, and then with a second one.
import re, sys
if sys.argv[1:2] == ["--version"]:
    print("v22.13.0")
    sys.exit(0)
for line in sys.stdin.buffer:
    m = re.search(rb'"k":"hello".*"nonce":"([0-9a-f]{32})"', line)
    if m:
        n = m.group(1).decode()
        sys.stdout.buffer.write(b"\x1ecp1 %s Y 10\n{\"pid\":42}" % n.encode())
        sys.stdout.buffer.write(b"\x1ecp1 %s Y 10\n{\"pid\":43}" % n.encode())
        sys.stdout.flush()
        sys.stdin.read()
        break
'''


@local_backend_only
def test_internal_end_to_end(tmp_path):
    """A runner that breaks the control channel: INTERNAL, with a message
    that names the channel and no program text; the session goes on."""
    node = tmp_path / "fake-node" / "bin" / "node"
    node.parent.mkdir(parents=True)
    node.write_text(FAKE_NODE)
    node.chmod(0o755)
    s = Session(tmp_path / "state", args=["--node", str(node)])
    try:
        res = s.run("return 'SECRET-PROGRAM-TEXT';")
        err = assert_failed(res, "INTERNAL")
        assert "control channel" in err["message"] and "SECRET" not in err["message"], err
        assert "result" not in res
        assert s.proc.poll() is None, "codepod ended with the execution"
    finally:
        s.close()


# 8 ---------------------------------------------------------------------------
def threads(pid):
    return len(os.listdir(f"/proc/{pid}/task"))


def test_no_thread_per_execution(session):
    """Thirty executions running at once (each waits for its tool call) add
    no thread per execution to codepod."""
    session.serve({"hold": lambda inp: NO_ANSWER})
    conv = f"threads-{uuid.uuid4().hex[:8]}"
    assert_ok(session.run("return 1;", conversation=conv))  # pools and caches are up
    first = session.execute("return await tools.hold({});", conversation=conv, tools=["hold"])
    session.wait_call(first, "hold", timeout=120)
    base = threads(session.proc.pid)
    ids = [session.execute("return await tools.hold({});", conversation=conv, tools=["hold"])
           for _ in range(30)]
    for eid in ids:
        session.wait_call(eid, "hold", timeout=180)
    busy = threads(session.proc.pid)
    for eid in [first, *ids]:
        session.stop(eid)
    for eid in [first, *ids]:
        assert_failed(session.wait_result(eid, 120), "CANCELLED")
    # libuv's worker pool may start once (4 threads); 31 executions must not
    # mean 31 threads, nor anything close.
    assert busy - base <= 4, f"{base} threads with one execution, {busy} with 31 ({BACKEND})"
