"""codepod's logs name executions by id and never carry program text, tool
data or what the program writes (README "Using it", SECURITY.md "The control
channel"): even at `--log-level debug`, no stderr line of codepod holds a byte
of the source, a tool's input, output or error, the program's logs, result or
exception. Each of those carries a marker of its own here, and the markers
are looked for in every line codepod wrote."""
import uuid

from harness import ToolError, assert_failed, assert_ok, close_and_check, session_class


def marks(*names):
    return {n: f"mk{n}{uuid.uuid4().hex}" for n in names}


def test_debug_logs_carry_no_program_or_tool_data(tmp_path):
    m = marks("comment", "literal", "input", "output", "toolerror", "denied", "stdout",
              "stderr", "result", "thrown", "stack")
    def refuse(_input):
        raise ToolError(m["toolerror"])

    s = session_class()(tmp_path / "state", args=["--log-level", "debug"])
    s.serve({"echo": lambda inp: {"v": inp["secret"].replace(m["input"], m["output"])},
             "refuse": refuse})
    try:
        js = (f"// {m['comment']}\n"
              f"const lit = '{m['literal']}';\n"
              f"const a = await tools.echo({{ secret: '{m['input']}' }});\n"
              "let e1 = null; try { await tools.refuse({ x: 1 }); } catch (e) { e1 = e.message; }\n"
              # over maxToolInputBytes: refused in codepod, its input never sent
              f"let e2 = null; try {{ await tools.echo({{ secret: '{m['denied']}'.repeat(100) }}); }}"
              " catch (e) { e2 = e.message; }\n"
              f"console.log('{m['stdout']}'); console.error('{m['stderr']}');\n"
              f"return {{ lit, v: a.v, e1, e2, r: '{m['result']}' }};")
        res = assert_ok(s.run(js, policy={"maxToolInputBytes": 1024}, timeout=120))
        r = res["result"]
        # the markers did travel where they belong: to the backend and back
        assert r["v"] == m["output"] and m["toolerror"] in r["e1"] and r["r"] == m["result"], r
        assert [c["status"] for c in res["calls"]] == ["ok", "error", "denied"], res["calls"]
        assert r["e2"] and m["denied"] not in r["e2"], r
        assert m["stdout"] in res["logs"] and m["stderr"] in res["logs"], res
        bad = s.run(f"const err = new Error('{m['thrown']}');\n"
                    f"err.stack = '{m['stack']}';\nthrow err;", tools=[], timeout=120)
        pe = assert_failed(bad, "SCRIPT_ERROR")["programError"]
        assert m["thrown"] in pe["message"] and m["stack"] in pe["stack"], pe
    finally:
        close_and_check(s)
    lines = list(s.stderr_lines)
    events = s.log_events()
    # the log was there to look at: debug lines, and both executions' ends
    assert any(e.get("level") == "debug" for e in events), lines[-20:]
    assert {e["id"] for e in s.log_events("exec.done")} >= {res["id"], bad["id"]}, lines[-20:]
    leaked = [(name, raw[:300]) for raw in lines for name, mark in m.items()
              if mark.encode() in raw]
    assert not leaked, f"codepod's log carries program or tool data: {leaked[:5]}"
