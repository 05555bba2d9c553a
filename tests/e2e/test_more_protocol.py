"""Further session-protocol behaviours a backend relies on."""

import re

from harness import NO_ANSWER, Session, assert_failed, assert_ok, tool_decl


def echo(inp):
    return inp


def test_stop_with_queued_calls_cancels_only_what_was_sent(session):
    session.serve({"hang": lambda inp: NO_ANSWER})
    eid = session.execute(
        "await Promise.all([1, 2, 3, 4].map((i) => tools.hang({ i })));",
        policy={"maxInFlightBridgeRequests": 1})
    first = session.wait_call(eid, "hang")
    session.stop(eid)
    res = session.wait_result(eid)
    assert_failed(res, "CANCELLED")
    assert len(session.of(eid, "tool_call")) == 1, "queued calls must not be sent after stop"
    cancels = session.of(eid, "cancel_call")
    assert [c["call"] for c in cancels] == [first["call"]]
    assert all(c["status"] == "cancelled" for c in res["calls"]), res["calls"]


def test_late_answer_after_cancel_is_harmless(session):
    session.serve({"hang": lambda inp: NO_ANSWER, "echo": echo})
    eid = session.execute("tools.hang({}).catch(() => {});\nawait tools.echo({});\nreturn 'done';")
    call = session.wait_call(eid, "hang")
    assert assert_ok(session.wait_result(eid))["result"] == "done"
    session.send({"type": "tool_result", "id": eid, "call": call["call"], "output": "late"})
    session.send({"type": "tool_error", "id": eid, "call": call["call"], "message": "late"})
    assert assert_ok(session.run("return 'next';"))["result"] == "next"


def test_null_and_scalar_tool_outputs(session):
    outs = {"n": None, "s": "text", "b": False, "z": 0, "a": []}
    session.serve({"val": lambda inp: outs[inp["k"]]})
    res = assert_ok(session.run(
        "const out = {};\n"
        "for (const k of ['n', 's', 'b', 'z', 'a']) out[k] = await tools.val({ k });\n"
        "return out;"))
    assert res["result"] == outs


def test_call_without_input_sends_an_object(session):
    session.serve({"echo": echo})
    eid = session.execute("return await tools.echo();")
    res = assert_ok(session.wait_result(eid))
    assert session.of(eid, "tool_call")[0]["input"] == {}
    assert res["result"] == {}


def test_tool_declaration_without_name_is_invalid(session):
    eid = session.execute("return 1;", tools=[{"description": "no name", "inputSchema": {}}])
    m = session.wait_for(lambda m: m.get("id") == eid and m["type"] in ("result", "error"),
                         60, "answer to a bad tool declaration")
    err = m["error"]
    assert err["code"] == "INVALID_REQUEST", m
    assert re.search(r"name|tool", err["message"], re.I), m


def test_stack_of_an_uncaught_tool_rejection_names_the_calling_line(session):
    from harness import ToolError

    def broken(inp):
        raise ToolError("firm not found")

    session.serve({"getFirm": broken})
    res = session.run("const id = 'f-1';\nconst firm = await tools.getFirm({ id });\nreturn firm;")
    pe = assert_failed(res, "SCRIPT_ERROR")["programError"]
    assert pe["message"] == "firm not found"
    assert ":2:" in pe["stack"], f"the stack does not name line 2: {pe['stack']!r}"


def test_result_size_is_measured_in_bytes(session):
    res = session.run("return 'é'.repeat(500);", policy={"maxResultBytes": 1000})
    err = assert_failed(res, "RESULT_TOO_LARGE")
    assert "1002" in err["message"], err


def test_workspace_survives_a_new_session_on_the_same_state_dir(tmp_path):
    state = tmp_path / "shared-state"
    s1 = Session(state)
    try:
        assert_ok(s1.run("require('node:fs').writeFileSync('kept.txt', 'from session 1');\n"
                         "return 1;", conversation="conv-kept"))
    finally:
        assert s1.close() == 0
    s2 = Session(state)
    try:
        res = assert_ok(s2.run("return require('node:fs').readFileSync('kept.txt', 'utf8');",
                               conversation="conv-kept"))
        assert res["result"] == "from session 1"
    finally:
        assert s2.close() == 0


def test_timeout_while_calls_are_queued(session):
    session.serve({"hang": lambda inp: NO_ANSWER})
    eid = session.execute("await Promise.all([1, 2, 3].map((i) => tools.hang({ i })));",
                          policy={"maxInFlightBridgeRequests": 1, "timeoutMs": 1500})
    res = session.wait_result(eid)
    assert_failed(res, "TIMEOUT")
    assert len(session.of(eid, "tool_call")) == 1
    assert len(res["calls"]) == 3 and all(c["status"] == "cancelled" for c in res["calls"]), \
        res["calls"]


def test_disabled_tool_is_still_denied_when_named_by_alias(session):
    session.serve({"echo": echo})
    eid = session.execute(
        "try { await tools.my_secret({}); return 'no error'; } catch (e) { return e.message; }",
        tools=["echo", tool_decl("my-secret", enabled=False)])
    res = assert_ok(session.wait_result(eid))
    assert res["result"] == "Tool is disabled: my-secret"
    assert session.of(eid, "tool_call") == []
