"""Session protocol v1.1 (broker/SESSION.md) on both transports (stdio, and
WebSocket when CODEPOD_TRANSPORT=ws): every ambiguity of v1 the issue named,
each with a test that fails on a v1 server. Every message codepod sends is
also checked against broker/schema by the harness."""

import json

import pytest

from harness import assert_failed, assert_ok, tool_decl


def messages_of(session, eid):
    with session.cond:
        return [m for m in session.messages if m.get("id") == eid]


# accepted ---------------------------------------------------------------------
def test_accepted_comes_first_then_calls_then_the_result(session):
    session.serve({"echo": lambda inp: inp})
    eid = session.execute("const a = await tools.echo({ n: 1 }); return a.n;")
    res = assert_ok(session.wait_result(eid))
    assert res["result"] == 1
    types = [m["type"] for m in messages_of(session, eid)]
    assert types[0] == "accepted", types
    assert types.count("accepted") == 1 and types[-1] == "result", types
    acc = messages_of(session, eid)[0]
    assert acc == {"type": "accepted", "id": eid, "inReplyTo": "execute"}


def test_a_refused_execute_gets_an_error_and_no_accepted(session):
    eid = session.execute("return 1;", policy={"timeoutMs": 0})
    err = session.wait_error(eid)
    assert err["inReplyTo"] == "execute" and err["error"]["code"] == "INVALID_REQUEST"
    assert not [m for m in messages_of(session, eid) if m["type"] in ("accepted", "result")]


# error correlation -------------------------------------------------------------
def test_an_error_about_a_tool_result_leaves_the_execution_running(session):
    """v1: an `error` with an execution id meant either "refused, no result"
    or "your tool_result was refused, it goes on". v1.1 says which."""
    eid = session.execute("const a = await tools.slow({}); return a;", tools=["slow"])
    call = session.wait_call(eid, "slow")
    session.send({"type": "tool_result", "id": eid, "call": "99", "output": 1})
    err = session.wait_error(eid)
    assert err["inReplyTo"] == "tool_result" and err["call"] == "99", err
    assert err["error"]["code"] == "INVALID_REQUEST"
    session.send({"type": "tool_error", "id": eid, "call": call["call"]})  # no message
    err2 = session.wait_error(eid)
    assert err2["inReplyTo"] == "tool_error" and err2["call"] == call["call"], err2
    session.answer(call, "fine")
    assert assert_ok(session.wait_result(eid))["result"] == "fine"


def test_errors_name_what_they_answer(session):
    session.send_raw(b"{not json\n")
    assert session.wait_error(None)["inReplyTo"] is None
    session.send({"type": "nope", "id": "x1"})
    e = session.wait_error("x1")
    assert e["inReplyTo"] is None and "unknown message type" in e["error"]["message"]
    session.send({"type": "stop", "id": "never-ran"})
    e = session.wait_error("never-ran")
    assert e["inReplyTo"] == "stop" and "call" not in e


# strictness -------------------------------------------------------------------
def test_a_misspelled_policy_key_is_refused_naming_it(session):
    """v1 ignored `timeoutMS` and ran the program under the 30 s default."""
    eid = session.execute("return 1;", policy={"timeoutMS": 5000})
    err = session.wait_error(eid)
    assert err["inReplyTo"] == "execute" and err["error"]["code"] == "INVALID_REQUEST"
    assert "policy.timeoutMS" in err["error"]["message"]


def test_a_duplicate_tool_name_is_refused_naming_it(session):
    eid = session.execute("return 1;", tools=[tool_decl("lookup"), tool_decl("other"),
                                              tool_decl("lookup", enabled=False)])
    err = session.wait_error(eid)
    assert err["inReplyTo"] == "execute" and err["error"]["code"] == "INVALID_REQUEST"
    assert "duplicate tool name lookup" in err["error"]["message"], err


# declarations on the session ---------------------------------------------------
def test_declarations_on_the_session_with_the_id_echoed(session):
    tools = [{"name": "listInvoices", "description": "List invoices.",
              "inputSchema": {"type": "object", "properties": {"month": {"type": "string"}},
                              "required": ["month"]}}]
    session.send({"type": "declarations", "id": "d1", "tools": tools})
    m = session.wait_for(lambda m: m["type"] == "declarations", what="declarations")
    assert m["id"] == "d1"
    assert m["declarations"].startswith("/**\n * The tools a program calls")
    assert "share its workspace" in m["declarations"]
    assert "\ndeclare const tools: {\n" in m["declarations"]
    assert "listInvoices: (input: { month: string; }) => Promise<unknown>;" in m["declarations"]
    session.send({"type": "declarations", "tools": tools})
    m = session.wait_for(lambda m: m["type"] == "declarations", what="declarations")
    assert "id" not in m
    session.send({"type": "declarations", "id": "d2", "tools": [{"name": ""}]})
    e = session.wait_error("d2")
    assert e["inReplyTo"] == "declarations" and e["error"]["code"] == "INVALID_REQUEST"


# live output --------------------------------------------------------------------
def test_stream_sends_logs_in_order_before_the_result(session):
    js = ("for (let i = 0; i < 5; i++) {\n"
          "  console.log('line ' + i);\n"
          "  if (i == 2) console.error('warn ' + i);\n"
          "}\n"
          "await tools.mark({});\n"
          "console.log('after');\n"
          "return 'done';")
    eid = session.execute(js, tools=["mark"], stream=True)
    call = session.wait_call(eid, "mark")
    # The program waits for this call's answer: what came so far was sent
    # while it ran, all of it before the call (the output printed before a
    # call is flushed ahead of it).
    live = [m for m in messages_of(session, eid) if m["type"] == "log"]
    assert live, "no live output before the tool call"
    assert not [m for m in messages_of(session, eid) if m["type"] == "result"]
    assert "".join(m["text"] for m in live) == "line 0\nline 1\nline 2\nwarn 2\nline 3\nline 4\n", live
    session.answer(call, 1)
    res = assert_ok(session.wait_result(eid))
    msgs = messages_of(session, eid)
    types = [m["type"] for m in msgs]
    assert types[-1] == "result" and "log" in types, types
    logs = [m for m in msgs if m["type"] == "log"]
    assert all(types.index("result") > i for i, t in enumerate(types) if t == "log")
    out = "".join(m["text"] for m in logs if m["stream"] == "stdout")
    err = "".join(m["text"] for m in logs if m["stream"] == "stderr")
    assert out == "line 0\nline 1\nline 2\nline 3\nline 4\nafter\n", logs
    assert err == "warn 2\n"
    # Order across the streams is kept; output before the call comes before it.
    merged = "".join(m["text"] for m in logs)
    assert merged.index("warn 2") < merged.index("line 3")
    call_at = types.index("tool_call")
    before = "".join(m["text"] for m in msgs[:call_at] if m["type"] == "log")
    assert "line 4" in before and "after" not in before
    # Several messages: what came before the call, and the output after it,
    # sent once the answer let the program go on. (Coalescing within one
    # flush is tests/unit/test_hub.c's: here the pieces codepod reads, and so
    # the number of messages, depend on the pipe.)
    assert logs[:len(live)] == live
    assert "".join(m["text"] for m in logs[len(live):]) == "after\n", logs
    assert res["logs"] == "line 0\nline 1\nline 2\nwarn 2\nline 3\nline 4\nafter\n"


def test_no_stream_no_logs(session):
    eid = session.execute("console.log('quiet'); return 1;")
    assert assert_ok(session.wait_result(eid))["logs"] == "quiet\n"
    assert not [m for m in messages_of(session, eid) if m["type"] == "log"]


def test_a_log_flood_is_bounded_and_counted(session):
    js = ("const line = 'x'.repeat(1023) + '\\n';\n"
          "for (let i = 0; i < 4096; i++) process.stdout.write(line);\n"
          "return 1;")
    eid = session.execute(js, stream=True, policy={"maxResultBytes": 4096})
    res = assert_ok(session.wait_result(eid, timeout=120))
    logs = [m for m in messages_of(session, eid) if m["type"] == "log"]
    sent = sum(len(m["text"]) for m in logs)
    dropped = sum(m.get("dropped", 0) for m in logs)
    assert sent + dropped == 4096 * 1024, (sent, dropped)
    assert all(len(m["text"]) <= 65536 for m in logs)
    assert res["logsTruncated"] is True and len(res["logs"]) == 4096


def test_stream_must_be_a_boolean(session):
    eid = session.execute("return 1;", stream="yes")
    err = session.wait_error(eid)
    assert err["inReplyTo"] == "execute" and "stream" in err["error"]["message"]


# serve --stdio caps executions as serve --listen does ----------
def test_max_executions_caps_what_runs_at_once(tmp_path):
    import harness
    s = harness.session_class()(tmp_path / "state", args=["--max-executions", "2"])
    try:
        s.serve({"hold": lambda inp: harness.NO_ANSWER})
        held = [s.execute("return await tools.hold({});") for _ in range(2)]
        calls = [s.wait_call(eid, "hold") for eid in held]
        third = s.execute("return 3;")
        err = s.wait_error(third)
        assert err["inReplyTo"] == "execute" and err["error"]["code"] == "TOO_MANY_EXECUTIONS"
        s.answer(calls[0], 1)
        assert assert_ok(s.wait_result(held[0]))["result"] == 1
        assert assert_ok(s.run("return 4;"))["result"] == 4
        s.answer(calls[1], 2)
        assert assert_ok(s.wait_result(held[1]))["result"] == 2
    finally:
        assert s.close() == 0
    assert not s.schema_errors, s.schema_errors[:3]


def test_declared_aliases_are_the_ones_the_runner_resolves(session):
    """Every alias the declarations name reaches its tool (docs/contract.md §2.2)."""
    names = ["a-b", "a.b", "x-y", "x_y", "h\u00e9-\U0001F600", "my-tool"]
    tools = [tool_decl(n) for n in names]
    session.send({"type": "declarations", "id": "al", "tools": tools})
    decl = session.wait_for(lambda m: m["type"] == "declarations" and m.get("id") == "al")
    assert "  a_b: " in decl["declarations"] and "  h____: " in decl["declarations"]
    assert "  my_tool: " in decl["declarations"]
    session.serve({n: (lambda n: lambda inp: n)(n) for n in names})
    eid = session.execute("return [await tools.a_b({}), await tools.h____({}), "
                          "await tools.my_tool({}), await tools.x_y({})];", tools=tools)
    res = assert_ok(session.wait_result(eid))
    assert res["result"] == ["a-b", "h\u00e9-\U0001F600", "my-tool", "x_y"]


def test_a_deployment_sets_its_ceiling_and_defaults(tmp_path):
    """--policy-ceiling lowers the built-in ceiling (a default over it comes
    down to it), --policy-defaults sets defaults within it."""
    import harness
    s = harness.session_class()(tmp_path / "state", args=[
        "--policy-ceiling", '{"timeoutMs": 1000}', "--policy-defaults", '{"maxResultBytes": 100}'])
    try:
        eid = s.execute("return 1;", policy={"timeoutMs": 2000})
        err = s.wait_error(eid)
        assert err["inReplyTo"] == "execute" and "ceiling of 1000" in err["error"]["message"]
        res = s.run("await new Promise((r) => setTimeout(r, 5000)); return 1;")
        assert_failed(res, "TIMEOUT")
        assert "1000 ms" in res["error"]["message"]
        assert_failed(s.run("return 'x'.repeat(200);"), "RESULT_TOO_LARGE")
        assert assert_ok(s.run("return 'x'.repeat(200);", policy={"maxResultBytes": 1000}))
    finally:
        assert s.close() == 0
    assert not s.schema_errors, s.schema_errors[:3]
