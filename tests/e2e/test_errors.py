"""docs/contract.md §4: the outcome, every error code the local backend produces, usage."""

import json
import os
import re
import shutil
import uuid

from harness import (BACKEND, NODE_DIR, NO_ANSWER, Session, assert_failed, assert_ok,
                     local_backend_only)


def echo(inp):
    return inp


def invalid_request(session, eid):
    """INVALID_REQUEST arrives as an `error` message or as a failed `result` for eid."""
    m = session.wait_for(lambda m: m.get("id") == eid and m["type"] in ("result", "error"),
                         60, f"answer to invalid execute {eid}")
    if m["type"] == "result":
        assert_failed(m, "INVALID_REQUEST")
    assert m["error"]["code"] == "INVALID_REQUEST", m
    return m["error"]["message"]


# outcome shape ----------------------------------------------------------------
def test_outcome_has_every_field(session):
    session.serve({"echo": echo})
    eid = session.execute("console.log('hi');\nawait tools.echo({ a: 1 });\nreturn { n: 1 };")
    res = assert_ok(session.wait_result(eid))
    assert res["type"] == "result" and res["id"] == eid
    assert res["result"] == {"n": 1}
    assert res["logs"] == "hi\n" and res["logsTruncated"] is False
    assert "error" not in res
    assert len(res["calls"]) == 1
    c = res["calls"][0]
    assert c["tool"] == "echo" and c["status"] == "ok"
    assert isinstance(c["id"], str) and c["id"] == session.of(eid, "tool_call")[0]["call"]
    assert isinstance(c["ms"], (int, float)) and c["ms"] >= 0
    u = res["usage"]
    assert u["bridgeRequests"] == 1
    assert isinstance(u["startupMs"], (int, float)) and u["startupMs"] >= 0
    assert isinstance(u["runMs"], (int, float)) and u["runMs"] >= 0
    assert u["sandbox"] == BACKEND
    assert re.fullmatch(r"[0-9a-f]{64}", u["digest"]), u["digest"]


def test_bridge_requests_counted(session):
    session.serve({"echo": echo})
    res = assert_ok(session.run(
        "for (let i = 0; i < 5; i++) await tools.echo({ i });\nreturn 1;"))
    assert res["usage"]["bridgeRequests"] == 5
    assert len(res["calls"]) == 5
    assert len({c["id"] for c in res["calls"]}) == 5, "call ids must be distinct"


def test_digest_same_for_same_program_and_different_for_another(session):
    session.serve({"echo": echo})
    conv = f"conv-{uuid.uuid4().hex[:8]}"
    pol = {"timeoutMs": 9000}
    a = assert_ok(session.run("return 1;", conversation=conv, policy=pol))
    b = assert_ok(session.run("return 1;", conversation=conv, policy=pol))
    c = assert_ok(session.run("return 2;", conversation=conv, policy=pol))
    d = assert_ok(session.run("return 1;", conversation=conv, policy={"timeoutMs": 8000}))
    e = assert_ok(session.run("return 1;", conversation=conv, policy=pol, tools=[]))
    da, db, dc, dd, de = (r["usage"]["digest"] for r in (a, b, c, d, e))
    assert da == db, "identical source, tools and policy must give the same digest"
    assert da != dc, "a different source must give a different digest"
    assert da != dd, "a different policy must give a different digest"
    assert da != de, "different tool declarations must give a different digest"


# INVALID_REQUEST --------------------------------------------------------------
def test_invalid_request_missing_js(session):
    eid = session.new_id("bad")
    session.send({"type": "execute", "id": eid, "conversation": "c1", "tools": []})
    message = invalid_request(session, eid)
    assert "js" in message, f"the message does not name the missing field: {message!r}"
    assert_ok(session.run("return 'still fine';"))


def test_invalid_request_bad_policy_type(session):
    eid = session.execute("return 1;", policy={"timeoutMs": "soon"})
    message = invalid_request(session, eid)
    assert "timeoutMs" in message, f"the message does not name the bad field: {message!r}"
    assert session.of(eid, "tool_call") == []


def test_invalid_request_negative_limit(session):
    eid = session.execute("return 1;", policy={"maxResultBytes": -5})
    message = invalid_request(session, eid)
    assert "maxResultBytes" in message, message


def test_unknown_fields_are_ignored(session):
    eid = session.execute("return 'fine';", flavour="vanilla", policy={"timeoutMs": 5000})
    assert assert_ok(session.wait_result(eid))["result"] == "fine"


# SCRIPT_ERROR -----------------------------------------------------------------
def test_script_error_with_stack_naming_the_line(session):
    js = ("const a = 1;\n"
          "const b = 2;\n"
          "function check(x) {\n"
          "  if (x > 2) {\n"
          "    // the next line is line 5\n"
          "    throw new TypeError('secret boom ' + x);\n"
          "  }\n"
          "}\n"
          "check(a + b);\n"
          "return 'unreachable';")
    res = session.run(js)
    err = assert_failed(res, "SCRIPT_ERROR")
    pe = err["programError"]
    assert pe["name"] == "TypeError"
    assert pe["message"] == "secret boom 3"
    assert ":6:" in pe["stack"], f"stack does not name line 6: {pe['stack']!r}"
    assert ":9:" in pe["stack"], f"stack does not name the caller on line 9: {pe['stack']!r}"
    assert "secret boom" not in err["message"], "error.message must not contain program text"
    assert "result" not in res


def test_script_error_throw_on_line_3(session):
    res = session.run("const x = 1;\nconst y = x + 1;\nthrow new Error('line three ' + y);")
    pe = assert_failed(res, "SCRIPT_ERROR")["programError"]
    assert pe["name"] == "Error" and pe["message"] == "line three 2"
    assert ":3:" in pe["stack"], pe["stack"]


def test_script_error_for_a_non_error_throw(session):
    res = session.run("throw 'just a string';")
    pe = assert_failed(res, "SCRIPT_ERROR")["programError"]
    assert "just a string" in pe["message"]


def test_syntax_error_is_script_error(session):
    res = session.run("const x = ;\nreturn x;")
    pe = assert_failed(res, "SCRIPT_ERROR")["programError"]
    assert pe["name"] == "SyntaxError"


def test_unhandled_rejection_fails_the_execution(session):
    res = session.run(
        "Promise.reject(new RangeError('stray'));\n"
        "await new Promise((r) => setTimeout(r, 200));\n"
        "return 1;")
    pe = assert_failed(res, "SCRIPT_ERROR")["programError"]
    assert pe["name"] == "RangeError" and pe["message"] == "stray", pe


# PROCESS_EXITED ---------------------------------------------------------------
def test_process_exit_code_reported(session):
    res = session.run("console.log('bye');\nprocess.exit(7);")
    err = assert_failed(res, "PROCESS_EXITED")
    assert re.search(r"\b7\b", err["message"]), f"exit code 7 not named: {err['message']!r}"


def test_process_killed_by_signal_reported(session):
    res = session.run("process.kill(process.pid, 'SIGKILL');\nawait new Promise((r) => setTimeout(r, 5000));")
    err = assert_failed(res, "PROCESS_EXITED")
    assert re.search(r"SIGKILL|signal 9|\bkill", err["message"], re.I), \
        f"the signal is not named: {err['message']!r}"


def test_process_exit_zero_before_return_is_still_a_failure(session):
    res = session.run("process.exit(0);\nreturn 1;")
    err = assert_failed(res, "PROCESS_EXITED")
    assert re.search(r"\b0\b", err["message"]), err


# CANCELLED --------------------------------------------------------------------
def test_stop_cancels_the_execution_and_its_calls(session):
    session.serve({"hang": lambda inp: NO_ANSWER})
    eid = session.execute("console.log('started');\nreturn await tools.hang({});")
    call = session.wait_call(eid, "hang")
    session.stop(eid)
    res = session.wait_result(eid)
    assert_failed(res, "CANCELLED")
    assert "started" in res["logs"]
    cancel = session.wait_for(lambda m: m["type"] == "cancel_call" and m.get("id") == eid,
                              30, "cancel_call after stop")
    assert cancel["call"] == call["call"]
    assert [c["status"] for c in res["calls"]] == ["cancelled"]
    assert_ok(session.run("return 'session still works';"))


def test_stop_a_busy_loop(session):
    session.serve({"ping": echo})
    eid = session.execute("await tools.ping({});\nconsole.log('looping');\nfor (;;) {}",
                          stream=True)
    # The line the program prints on its way into the loop, sent live while
    # it runs: from then on it spins, and only the stop can end it.
    session.wait_for(lambda m: m["type"] == "log" and m.get("id") == eid
                     and "looping" in m["text"], 60, "the program entering its loop")
    session.stop(eid)
    res = session.wait_result(eid)
    err = assert_failed(res, "CANCELLED")
    assert "stopped by the backend" in err["message"], err
    assert res["logs"] == "looping\n", res


# OUTCOME_UNKNOWN --------------------------------------------------------------
def test_backend_vanishing_mid_call_is_outcome_unknown(session):
    session.serve({"hang": lambda inp: NO_ANSWER})
    eid = session.execute("const r = await tools.hang({ write: true });\nreturn r;")
    session.wait_call(eid, "hang")
    rc = session.close()
    assert rc == 0
    results = session.of(eid, "result")
    assert len(results) == 1, f"expected one result written before exit, got {results}"
    err = assert_failed(results[0], "OUTCOME_UNKNOWN")
    assert "result" not in results[0]
    assert err["message"]


def test_eof_stops_running_executions_with_a_result(session):
    eid = session.execute("await new Promise((r) => setTimeout(r, 60000));\nreturn 1;")
    # make sure it started: a second quick execution finishing shows the loop is alive
    assert_ok(session.run("return 0;"))
    rc = session.close()
    assert rc == 0
    results = session.of(eid, "result")
    assert len(results) == 1, f"no result for the running execution before exit: {results}"
    # No tool call was in flight: nothing's fate is unknown, the execution is
    # simply stopped (OUTCOME_UNKNOWN is for a call in flight, tested above).
    assert_failed(results[0], "CANCELLED")


def test_error_messages_never_contain_program_text(session):
    secret = "TOPSECRET-" + uuid.uuid4().hex
    for js in (f"throw new Error('{secret}');",
               f"process.stderr.write('{secret}'); process.exit(3);",
               f"return '{secret}'.repeat(100);"):
        res = session.run(js, policy={"maxResultBytes": 200})
        assert res["status"] == "failed", res
        assert secret not in res["error"]["message"], res["error"]
    diagnostics = b"".join(session.stderr_lines).decode(errors="replace")
    assert secret not in diagnostics, "codepod's diagnostics contain program text"


# STARTUP_TIMEOUT / the separate startup allowance ------------------------------
def test_startup_allowance_exceeded_is_startup_timeout(session):
    res = session.run("return 1;", policy={"startupTimeoutMs": 1})
    assert_failed(res, "STARTUP_TIMEOUT")
    assert "result" not in res


@local_backend_only
def test_startup_does_not_eat_the_program_deadline(tmp_path):
    # A Node whose start is held: a wrapper that, in the held conversation's
    # workspace, waits for a file before it runs the real Node (hard-linked
    # beside it, so the sandbox sees it wherever the checkout is; the sandbox
    # sees that folder, read-only, so a file the test makes there shows). It
    # is released once another execution, sent after it, has used up its own
    # 300 ms deadline: had the held program's 300 ms been counted from its
    # start, they would have run out first. They start once the runner is
    # ready, so the program returns in time.
    root = tmp_path / "slow-node"
    (root / "bin").mkdir(parents=True)
    real = root / "bin" / "node.real"
    try:
        os.link(NODE_DIR / "node", real)
    except OSError:
        shutil.copy2(NODE_DIR / "node", real)
    # the held conversation is known by a file in its workspace (every
    # workspace is /workspace inside the sandbox: the path tells none apart)
    held, release = root / "hold", root / "release"
    slow = root / "bin" / "node"
    slow.write_text(f'#!/bin/sh\n'
                    f'if [ -e "{held}" ] && [ -e held-here ]; then\n'
                    f'  while [ ! -e "{release}" ]; do sleep 0.02; done\n'
                    f'fi\n'
                    f'exec "{real}" "$@"\n')
    slow.chmod(0o755)
    s = Session(tmp_path / "state", args=["--node", str(slow), "--prestart", "0"])
    try:
        assert_ok(s.run("require('node:fs').writeFileSync('held-here', ''); return 1;",
                        conversation="held"))
        held.touch()
        eid = s.execute("return 'in time';", conversation="held", policy={"timeoutMs": 300})
        assert_failed(s.run("for (;;) {}", policy={"timeoutMs": 300}), "TIMEOUT")
        release.touch()
        res = assert_ok(s.wait_result(eid))
    finally:
        s.close()
    assert res["result"] == "in time"
    # the held start was seen: it began before the other execution's 300 ms
    # and ended after them
    assert res["usage"]["startupMs"] >= 300, res["usage"]
