"""The control channel and the outcome under attack: frames forged with the
nonce the program digs out of its own memory, deep JSON, floods of logs and
tool calls, a program stealing its own stdin. codepod re-validates every
frame, so each ends the program's own execution, with a message that names
the rule and never the program's bytes, and the outcome stays bounded."""
import json

from harness import assert_failed, assert_ok, nested_js

# The runner keeps the frame header (with the nonce) in a Buffer; small
# Buffers share Node's 8 KiB pool, which any Buffer of the program exposes.
STEAL = """const fs = require('node:fs');
const pool = Buffer.from(Buffer.from('x').buffer);
const at = pool.indexOf('\\x1ecp1 ');
if (at < 0) throw new Error('no header in the pool');
const head = pool.toString('latin1', at, at + 38); // "\\x1ecp1 " + 32 hex + " "
const forge = (kind, payload) => fs.writeSync(1, head + kind + ' ' + Buffer.byteLength(payload) + '\\n' + payload);
"""


def forged(hs, body, code):
    res = hs.run(STEAL + body + "\nawait new Promise((r) => setTimeout(r, 5000));\nreturn 'not reached';")
    err = assert_failed(res, code)
    assert "SECRET" not in json.dumps(res), res
    return err


def test_forged_result_with_bad_json_names_the_rule_only(hs):
    err = forged(hs, "forge('R', '{\"SECRET\": tru');", "INTERNAL")
    assert err["message"] == "control channel: the result frame is not valid JSON", err
    hs.next_works()


def test_forged_result_size_frames_are_malformed(hs):
    err = forged(hs, "forge('Z', '{\"SECRET\":1}');", "INTERNAL")
    assert err["message"] == "control channel: malformed result-size frame", err
    err = forged(hs, "forge('Z', '{\"size\":10}');", "INTERNAL")
    assert err["message"] == "control channel: malformed result-size frame", err
    hs.next_works()


def test_forged_error_and_call_frames_end_only_their_execution(hs):
    err = forged(hs, "forge('T', 'SECRET');", "INTERNAL")
    assert err["message"] == "control channel: malformed error frame", err
    err = forged(hs, "forge('C', '{\"c\":7,\"t\":\"SECRET\",\"i\":{}}');", "INTERNAL")
    assert err["message"] == "control channel: tool call numbered out of order", err
    err = forged(hs, "forge('Y', '{}');", "INTERNAL")
    assert err["message"] == "control channel: a second ready frame", err
    err = forged(hs, "fs.writeSync(1, head + 'O 999999999999\\nSECRET');", "INTERNAL")
    assert err["message"].startswith("control channel: frame O announces 999999999999 bytes"), err
    hs.next_works()


def test_a_forged_valid_result_is_only_what_the_program_could_return(hs):
    res = assert_ok(hs.run(STEAL + "forge('R', '{\"forged\":true}');\n"
                           "await new Promise((r) => setTimeout(r, 5000));"))
    assert res["result"] == {"forged": True}
    hs.next_works()


def test_a_forged_result_is_measured_against_max_result_bytes(hs):
    """codepod measures a result frame itself: one the runner never measured
    (forged) is taken at exactly maxResultBytes and RESULT_TOO_LARGE one byte
    over, naming both sizes."""
    wait = "\nawait new Promise((r) => setTimeout(r, 5000));"
    at = assert_ok(hs.run(STEAL + "forge('R', JSON.stringify('x'.repeat(998)));" + wait,
                          policy={"maxResultBytes": 1000}))
    assert at["result"] == "x" * 998, at
    over = hs.run(STEAL + "forge('R', JSON.stringify('SECRET'.repeat(166) + 'xyz'));" + wait,
                  policy={"maxResultBytes": 1000})
    err = assert_failed(over, "RESULT_TOO_LARGE")
    assert err["message"].startswith("The result is 1001 bytes, over the limit of 1000 bytes"), err
    assert "SECRET" not in json.dumps(over), over
    hs.next_works()


def test_deep_json_is_refused_with_a_clear_error(hs):
    hs.session.serve({"echo": lambda inp: inp})
    res = assert_failed(hs.run(f"return {nested_js(200)};"), "SCRIPT_ERROR")
    assert res["message"] == "The result nests deeper than 32 levels of JSON; flatten it.", res
    res = assert_ok(hs.run(f"try {{ await tools.echo({nested_js(200)}); return 'sent'; }}"
                           " catch (e) { return e.message; }"))
    assert res["result"] == "Tool input for echo nests deeper than 32 levels of JSON.", res
    hs.next_works()


def test_100000_tool_calls_keep_the_outcome_bounded(hs):
    hs.session.serve({"echo": lambda inp: inp})
    res = assert_ok(hs.run(
        "const all = await Promise.allSettled(Array.from({ length: 100000 }, (_, i) => tools.echo({ i })));\n"
        "return all.filter((r) => r.status === 'fulfilled').length;", timeout=300))
    assert res["result"] == 256
    assert len(res["calls"]) == 256 and {c["status"] for c in res["calls"]} == {"ok"}
    assert res["callsOmitted"] == {"denied": 100000 - 256}
    assert res["usage"]["bridgeRequests"] == 100000
    assert len(json.dumps(res)) < 64 * 1024, len(json.dumps(res))
    hs.next_works()


def test_log_floods_keep_the_last_window(hs):
    res = assert_ok(hs.run(
        "const big = 'x'.repeat(1 << 18) + '\\n';\n"
        "for (let i = 0; i < 200; i++) { process.stdout.write(big); process.stderr.write(big); }\n"
        "require('node:child_process').execSync('head -c 20000000 /dev/zero | tr \"\\\\0\" y', { stdio: 'inherit' });\n"
        "console.log('the end');\nreturn 'flooded';", timeout=300))
    assert res["result"] == "flooded" and res["logsTruncated"] is True
    assert res["logs"].endswith("the end\n") and len(res["logs"].encode()) <= 32768, len(res["logs"])
    hs.next_works()


def test_stealing_stdin_yields_only_the_programs_own_answers(hs):
    hs.session.serve({"echo": lambda inp: inp})
    res = assert_ok(hs.run(
        "const fs = require('node:fs');\n"
        "const pending = tools.echo({ mine: 1 });\n"
        "const buf = Buffer.alloc(1 << 16);\n"
        "let n = 0;\n"
        "for (;;) { try { n = fs.readSync(0, buf, 0, buf.length); break; }"
        " catch (e) { if (e.code !== 'EAGAIN') throw e; } }\n"
        "return buf.toString('utf8', 0, n);", policy={"timeoutMs": 20000}))
    stolen = res["result"]
    assert json.loads(stolen.splitlines()[0]) == {"k": "res", "c": 1, "o": {"mine": 1}}, stolen
    assert [c["status"] for c in res["calls"]] == ["ok"], res["calls"]
    hs.next_works()
