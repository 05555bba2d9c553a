"""docs/contract.md §3: every limit exceeded once, with small per-execution policies."""

import re

from harness import LOCAL_ERROR_CODES, NO_ANSWER, assert_failed, assert_ok, nested_js, nested_py


def echo(inp):
    return inp


def numbers(text):
    return [int(n) for n in re.findall(r"\d+", text.replace(",", ""))]


def names_size_and_limit(message, size_at_least, limit):
    nums = numbers(message)
    assert limit in nums, f"message does not name the limit {limit}: {message!r}"
    assert any(n >= size_at_least for n in nums if n != limit), \
        f"message does not name the size (>= {size_at_least}): {message!r}"


# timeoutMs --------------------------------------------------------------------
def test_timeout_on_a_timer(session):
    res = session.run("await new Promise((r) => setTimeout(r, 60000));\nreturn 1;",
                      policy={"timeoutMs": 1500})
    assert_failed(res, "TIMEOUT")


def test_timeout_on_a_busy_loop(session):
    res = session.run("for (;;) {}", policy={"timeoutMs": 1500})
    assert_failed(res, "TIMEOUT")


def test_timeout_while_waiting_on_a_tool_that_never_answers(session):
    session.serve({"hang": lambda inp: NO_ANSWER})
    eid = session.execute("return await tools.hang({});", policy={"timeoutMs": 1500})
    res = session.wait_result(eid)
    assert_failed(res, "TIMEOUT")
    call = session.of(eid, "tool_call")[0]
    cancel = session.wait_for(lambda m: m["type"] == "cancel_call" and m.get("id") == eid,
                              30, "cancel_call for the abandoned call")
    assert cancel["call"] == call["call"]


# maxSourceBytes ---------------------------------------------------------------
def test_source_too_large(session):
    js = "return 1;" + " " * 300
    res = session.run(js, policy={"maxSourceBytes": 100})
    err = assert_failed(res, "SOURCE_TOO_LARGE")
    names_size_and_limit(err["message"], 309, 100)


def test_source_too_large_at_default_limit(session):
    js = "return 1;//" + "x" * 131072
    assert_failed(session.run(js), "SOURCE_TOO_LARGE")


# maxResultBytes ---------------------------------------------------------------
def test_result_too_large_names_size_and_limit(session):
    res = session.run("console.log('made it here');\nreturn 'x'.repeat(5000);",
                      policy={"maxResultBytes": 1000})
    err = assert_failed(res, "RESULT_TOO_LARGE")
    names_size_and_limit(err["message"], 5000, 1000)
    assert re.search(r"summary|file", err["message"], re.I), \
        f"no advice to return a summary or save to a file: {err['message']!r}"
    assert "result" not in res
    assert "made it here" in res["logs"]


def test_result_at_the_limit_is_not_truncated(session):
    # JSON of a 998-char string is exactly 1000 bytes.
    res = assert_ok(session.run("return 'y'.repeat(998);", policy={"maxResultBytes": 1000}))
    assert res["result"] == "y" * 998


def test_big_log_keeps_the_last_bytes(session):
    res = assert_ok(session.run(
        "for (let i = 0; i < 5000; i++) console.log('line ' + String(i).padStart(5, '0'));\n"
        "return 'ok';", policy={"maxResultBytes": 1000}))
    full = "".join(f"line {i:05d}\n" for i in range(5000))
    assert res["logsTruncated"] is True
    assert 0 < len(res["logs"].encode()) <= 1000
    assert full.endswith(res["logs"]), "logs are not the tail of what was printed"
    assert res["logs"].endswith("line 04999\n")
    assert len(res["logs"]) >= 900, "the log window should hold about maxResultBytes"


# maxBridgeRequests ------------------------------------------------------------
def test_request_over_the_limit_is_denied_catchably(session):
    session.serve({"echo": echo})
    eid = session.execute(
        "const out = [];\n"
        "for (let i = 0; i < 4; i++) {\n"
        "  try { out.push((await tools.echo({ i })).i); }\n"
        "  catch (e) { out.push('ERR:' + e.message); }\n"
        "}\n"
        "return out;", policy={"maxBridgeRequests": 3})
    res = assert_ok(session.wait_result(eid))
    out = res["result"]
    assert out[:3] == [0, 1, 2]
    assert isinstance(out[3], str) and out[3].startswith("ERR:")
    assert 3 in numbers(out[3]), f"denial does not name the limit: {out[3]!r}"
    assert len(session.of(eid, "tool_call")) == 3, "the denied call reached the backend"
    # calls lists at most maxBridgeRequests entries; the rest are counted by status
    assert [c["status"] for c in res["calls"]] == ["ok", "ok", "ok"]
    assert res["callsOmitted"] == {"denied": 1}
    assert res["usage"]["bridgeRequests"] == 4


# maxInFlightBridgeRequests ----------------------------------------------------
def test_in_flight_calls_are_capped_and_the_rest_queue(session):
    n = 2
    session.serve({"echo": echo}, delay=0.3)
    eid = session.execute(
        f"const xs = Array.from({{ length: {3 * n} }}, (_, i) => i);\n"
        "const out = await Promise.all(xs.map((i) => tools.echo({ i })));\n"
        "return out.map((o) => o.i);",
        policy={"maxInFlightBridgeRequests": n})
    res = assert_ok(session.wait_result(eid))
    assert res["result"] == list(range(3 * n))
    assert len(session.of(eid, "tool_call")) == 3 * n
    assert 1 <= session.max_outstanding[eid] <= n, \
        f"{session.max_outstanding[eid]} calls were outstanding at once (limit {n})"
    assert [c["status"] for c in res["calls"]] == ["ok"] * (3 * n)


# maxToolInputBytes / maxToolOutputBytes ---------------------------------------
def test_tool_input_over_the_limit_is_denied_catchably(session):
    session.serve({"echo": echo})
    eid = session.execute(
        "let message = 'no error', isError = false;\n"
        "try { await tools.echo({ s: 'x'.repeat(5000) }); }\n"
        "catch (e) { message = e.message; isError = e instanceof Error; }\n"
        "const after = await tools.echo({ small: 1 });\n"
        "return { isError, message, after };",
        policy={"maxToolInputBytes": 1000})
    res = assert_ok(session.wait_result(eid))
    r = res["result"]
    assert r["isError"] is True, r
    names_size_and_limit(r["message"], 5000, 1000)
    assert r["after"] == {"small": 1}, "a later small call must still work"
    assert [c["input"] for c in session.of(eid, "tool_call")] == [{"small": 1}], \
        "the oversized input reached the backend"


def test_tool_output_over_the_limit_is_denied_catchably(session):
    session.serve({"big": lambda inp: {"s": "y" * 5000}, "echo": echo})
    eid = session.execute(
        "let message;\n"
        "try { await tools.big({}); message = 'no error'; } catch (e) { message = e.message; }\n"
        "const after = await tools.echo({ small: 1 });\n"
        "return { message, after };",
        policy={"maxToolOutputBytes": 1000})
    res = assert_ok(session.wait_result(eid))
    names_size_and_limit(res["result"]["message"], 5000, 1000)
    assert res["result"]["after"] == {"small": 1}
    assert "yyyyyyyyyy" not in res["logs"] + res["result"]["message"]


# JSON nesting -----------------------------------------------------------------
def test_deeply_nested_tool_input_is_refused(session):
    session.serve({"echo": echo})
    eid = session.execute(
        f"const ok = await tools.echo({{ v: {nested_js(20)} }});\n"
        "let message = 'no error';\n"
        f"try {{ await tools.echo({{ v: {nested_js(40)} }}); }} catch (e) {{ message = e.message; }}\n"
        "return { okDepth: JSON.stringify(ok).split('[').length - 1, message };")
    res = assert_ok(session.wait_result(eid))
    assert res["result"]["okDepth"] == 20
    assert re.search(r"nest|depth", res["result"]["message"], re.I), res["result"]
    assert len(session.of(eid, "tool_call")) == 1, "the over-deep input reached the backend"


def test_deeply_nested_tool_output_is_refused(session):
    session.serve({"deep": lambda inp: {"v": nested_py(inp["depth"])}})
    eid = session.execute(
        "const ok = await tools.deep({ depth: 20 });\n"
        "let message = 'no error';\n"
        "try { await tools.deep({ depth: 40 }); } catch (e) { message = e.message; }\n"
        "return { okDepth: JSON.stringify(ok).split('[').length - 1, message };")
    res = assert_ok(session.wait_result(eid))
    assert res["result"]["okDepth"] == 20
    assert re.search(r"nest|depth", res["result"]["message"], re.I), res["result"]


def test_deeply_nested_result_is_refused(session):
    res = session.run(f"return {nested_js(40)};")
    assert res["status"] == "failed", res
    assert res["error"]["code"] in LOCAL_ERROR_CODES, res
    assert re.search(r"nest|depth", res["error"]["message"] +
                     (res["error"].get("programError") or {}).get("message", ""), re.I), res
    assert "result" not in res


def test_moderately_nested_result_is_fine(session):
    res = assert_ok(session.run(f"return {nested_js(25)};"))
    assert res["result"] == nested_py(25)
