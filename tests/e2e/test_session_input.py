"""Bad input on the session: each gets an `error` naming the problem; nothing else is lost."""

import re

import pytest

from harness import UNDER_ASAN, assert_ok, vm_hwm_kib


def start_witness(session):
    """An execution that is mid-call while the bad input arrives."""
    eid = session.execute("console.log('witness');\nconst r = await tools.hold({});\n"
                          "return { got: r };", tools=["hold"])
    call = session.wait_call(eid, "hold")
    return eid, call


def finish_witness(session, eid, call):
    session.answer(call, "released")
    res = assert_ok(session.wait_result(eid))
    assert res["result"] == {"got": "released"} and res["logs"] == "witness\n"
    assert_ok(session.run("return 'after';"))


def error_without_id(session):
    return session.wait_for(lambda m: m["type"] == "error" and m.get("id") is None,
                            60, "error without an id")


def check_error(m, pattern):
    assert m["error"]["code"], m
    assert re.search(pattern, m["error"]["message"], re.I), \
        f"error does not name the problem ({pattern}): {m}"


def test_malformed_json(session):
    eid, call = start_witness(session)
    session.send_raw(b'{"type":"execute","id":"half", "js": \n')
    check_error(error_without_id(session), r"json|parse|malformed|syntax")
    finish_witness(session, eid, call)


@pytest.mark.parametrize("line", [b"[1,2,3]", b'"execute"', b"42", b"null"])
def test_json_that_is_not_an_object(session, line):
    eid, call = start_witness(session)
    session.send_raw(line + b"\n")
    check_error(error_without_id(session), r"object|json|message|type")
    finish_witness(session, eid, call)


def test_invalid_utf8(session):
    eid, call = start_witness(session)
    session.send_raw(b'{"type":"execute","id":"bad-utf8","js":"return \xff\xfe"}\n')
    m = session.wait_for(lambda m: m["type"] == "error" and m.get("id") in (None, "bad-utf8"),
                         60, "error for invalid UTF-8")
    check_error(m, r"utf|json|encoding|invalid|parse")
    finish_witness(session, eid, call)


def test_missing_required_field(session):
    eid, call = start_witness(session)
    bad = session.new_id("nojs")
    session.send({"type": "execute", "id": bad, "conversation": "c", "tools": []})
    m = session.wait_error(bad)
    assert m["error"]["code"] == "INVALID_REQUEST", m
    check_error(m, r"\bjs\b")
    finish_witness(session, eid, call)


def test_missing_type(session):
    eid, call = start_witness(session)
    bad = session.new_id("notype")
    session.send({"id": bad, "js": "return 1", "conversation": "c", "tools": []})
    m = session.wait_for(lambda m: m["type"] == "error" and m.get("id") in (None, bad),
                         60, "error for a message without type")
    check_error(m, r"type")
    finish_witness(session, eid, call)
    assert session.of(bad, "result") == [], "a message without type must not run"


def test_unknown_type(session):
    eid, call = start_witness(session)
    bad = session.new_id("weird")
    session.send({"type": "frobnicate", "id": bad})
    m = session.wait_error(bad)
    check_error(m, r"frobnicate|unknown|type")
    finish_witness(session, eid, call)


def test_hundred_megabyte_line(session):
    eid, call = start_witness(session)
    before = vm_hwm_kib(session.proc.pid)
    mb = b"a" * (1 << 20)
    chunks = [b'{"type":"execute","id":"huge","conversation":"c","tools":[],"js":"']
    chunks += [mb] * 100
    chunks += [b'"}\n']
    session.send_chunks(chunks, timeout=300)
    m = session.wait_for(lambda m: m["type"] == "error" and m.get("id") in (None, "huge"),
                         120, "error for a 100 MB line")
    check_error(m, r"too (large|long|big)|limit|exceed|size|bytes|length")
    assert session.of("huge", "result") == []
    finish_witness(session, eid, call)
    after = vm_hwm_kib(session.proc.pid)
    if before is not None and after is not None and not UNDER_ASAN:
        assert after - before < 64 * 1024, \
            f"codepod's peak RSS grew by {after - before} KiB reading a 100 MB line"


def test_tool_result_for_unknown_call(session):
    eid, call = start_witness(session)
    session.send({"type": "tool_result", "id": eid, "call": "999999", "output": {"x": 1}})
    m = session.wait_error(eid)
    check_error(m, r"call")
    finish_witness(session, eid, call)


def test_tool_error_for_unknown_call(session):
    eid, call = start_witness(session)
    session.send({"type": "tool_error", "id": eid, "call": "999999", "message": "nope"})
    m = session.wait_error(eid)
    check_error(m, r"call")
    finish_witness(session, eid, call)


def test_tool_result_for_unknown_execution(session):
    eid, call = start_witness(session)
    session.send({"type": "tool_result", "id": "no-such-execution", "call": "1", "output": 1})
    m = session.wait_error("no-such-execution")
    check_error(m, r"execution|unknown|not running|no such|not found")
    finish_witness(session, eid, call)


def test_tool_result_missing_call_field(session):
    eid, call = start_witness(session)
    session.send({"type": "tool_result", "id": eid, "output": 1})
    m = session.wait_error(eid)
    assert m["error"]["code"] == "INVALID_REQUEST", m
    check_error(m, r"call")
    finish_witness(session, eid, call)


def test_second_answer_to_the_same_call(session):
    eid, call = start_witness(session)
    session.answer(call, "released")
    session.send({"type": "tool_result", "id": eid, "call": call["call"], "output": "again"})
    res = assert_ok(session.wait_result(eid))
    assert res["result"] == {"got": "released"}
    assert_ok(session.run("return 'after';"))


def test_reused_id_while_running(session):
    eid, call = start_witness(session)
    session.execute("return 'impostor';", id=eid)
    m = session.wait_error(eid)
    check_error(m, r"reuse|duplicate|already|in use|exists|unique")
    finish_witness(session, eid, call)
    assert len(session.of(eid, "result")) == 1


def test_reused_id_after_finishing(session):
    eid, call = start_witness(session)
    done = session.execute("return 'first';")
    assert session.wait_result(done)["result"] == "first"
    session.execute("return 'second';", id=done)
    m = session.wait_error(done)
    check_error(m, r"reuse|duplicate|already|in use|exists|unique")
    finish_witness(session, eid, call)
    assert [r.get("result") for r in session.of(done, "result")] == ["first"]


def test_stop_for_unknown_execution(session):
    eid, call = start_witness(session)
    session.send({"type": "stop", "id": "never-started"})
    m = session.wait_error("never-started")
    check_error(m, r"execution|unknown|not running|no such|not found")
    finish_witness(session, eid, call)


def test_blank_lines_are_harmless(session):
    """Empty lines (and a lone CR) are skipped (broker/SESSION.md: "empty
    lines skipped"): no `error`, nothing else changes."""
    eid, call = start_witness(session)
    session.send_raw(b"\n\n\r\n")
    # codepod answers its input in order: once the error for this stop is
    # here, one for the empty lines would have come before it.
    session.send({"type": "stop", "id": "after-empty-lines"})
    session.wait_error("after-empty-lines")
    with session.cond:
        errors = [m for m in session.messages if m["type"] == "error"]
    assert [m.get("id") for m in errors] == ["after-empty-lines"], errors
    finish_witness(session, eid, call)
