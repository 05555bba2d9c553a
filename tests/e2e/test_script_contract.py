"""docs/contract.md §2: the script contract, one test per behaviour."""

import json
import random
import time
import uuid
from pathlib import Path

from harness import (NO_ANSWER, ToolError, assert_failed, assert_ok, processes_with_marker,
                     local_backend_only, tool_decl)


def echo(inp):
    return inp


# 2.1 -----------------------------------------------------------------------
def test_async_body_top_level_await_and_return(session):
    res = assert_ok(session.run(
        "const v = await new Promise((r) => setTimeout(() => r(20), 10));\n"
        "return v + 22;"))
    assert res["result"] == 42


def test_early_return_skips_rest_of_body(session):
    res = assert_ok(session.run("if (true) return 'early';\nthrow new Error('not reached');"))
    assert res["result"] == "early"


# 2.2 -----------------------------------------------------------------------
def test_tool_call_sends_json_input_and_resolves_with_json_output(session):
    seen = []

    def lookup(inp):
        seen.append(inp)
        return {"got": inp, "rows": [1, 2.5, None, True, "é✓"], "nested": {"a": {"b": []}}}

    session.serve({"lookup": lookup})
    eid = session.execute(
        "const out = await tools.lookup({ month: '2026-08', n: 3, tags: ['a', 'b'], x: null });\n"
        "return { out, type: typeof out.rows[1] };")
    res = assert_ok(session.wait_result(eid))
    inp = {"month": "2026-08", "n": 3, "tags": ["a", "b"], "x": None}
    assert seen == [inp]
    call = session.of(eid, "tool_call")[0]
    assert call["tool"] == "lookup" and call["input"] == inp
    assert isinstance(call["call"], str) and call["call"]
    assert res["result"] == {
        "out": {"got": inp, "rows": [1, 2.5, None, True, "é✓"], "nested": {"a": {"b": []}}},
        "type": "number"}
    assert [c["tool"] for c in res["calls"]] == ["lookup"]
    assert res["calls"][0]["status"] == "ok"


def test_tool_with_non_identifier_name_reachable_both_ways(session):
    session.serve({"my-tool": lambda inp: {"echo": inp["x"]}})
    eid = session.execute(
        "const a = await tools['my-tool']({ x: 1 });\n"
        "const b = await tools.my_tool({ x: 2 });\n"
        "return [a.echo, b.echo];")
    res = assert_ok(session.wait_result(eid))
    assert res["result"] == [1, 2]
    assert [c["tool"] for c in session.of(eid, "tool_call")] == ["my-tool", "my-tool"]


# 2.3 -----------------------------------------------------------------------
CATCH = ("try {{ await {call}; return 'no error'; }}\n"
         "catch (e) {{ return {{ isError: e instanceof Error, message: e.message }}; }}")


def test_disabled_tool_rejects_catchably(session):
    session.serve({"listInvoices": echo})
    eid = session.execute(CATCH.format(call="tools.secret({})"),
                          tools=["listInvoices", tool_decl("secret", enabled=False)])
    res = assert_ok(session.wait_result(eid))
    assert res["result"] == {"isError": True, "message": "Tool is disabled: secret"}
    assert session.of(eid, "tool_call") == [], "a disabled tool must not reach the backend"


def test_unknown_tool_rejects_catchably(session):
    session.serve({"listInvoices": echo})
    eid = session.execute(CATCH.format(call="tools.nope({})"))
    res = assert_ok(session.wait_result(eid))
    assert res["result"] == {"isError": True, "message": "Unknown tool: nope"}
    assert session.of(eid, "tool_call") == []


def test_tool_error_message_is_catchable(session):
    def broken(inp):
        raise ToolError("The invoice store is unavailable, try later.")

    session.serve({"listInvoices": broken})
    eid = session.execute(CATCH.format(call="tools.listInvoices({ month: '2026-08' })"))
    res = assert_ok(session.wait_result(eid))
    assert res["result"] == {"isError": True,
                             "message": "The invoice store is unavailable, try later."}
    assert [c["status"] for c in res["calls"]] == ["error"]


def test_tool_error_message_is_cut_at_4096_bytes_on_a_character(session):
    """A tool's failure reaches the program cut at 4096 bytes, never inside a
    UTF-8 character (4096 is not a multiple of 3: the cut moves back)."""
    messages = {"ascii": "x" * 5000, "wide": "\u2713" * 2000}
    session.serve({name: (lambda m: lambda inp: (_ for _ in ()).throw(ToolError(m)))(m)
                   for name, m in messages.items()})
    eid = session.execute(
        "const out = {};\n"
        "for (const t of ['ascii', 'wide']) {\n"
        "  try { await tools[t]({}); } catch (e) { out[t] = e.message; }\n"
        "}\n"
        "return out;")
    res = assert_ok(session.wait_result(eid))["result"]
    assert res["ascii"] == "x" * 4096, len(res["ascii"])
    assert res["wide"] == "\u2713" * 1365, (len(res["wide"]), res["wide"][:20])


def test_uncaught_tool_error_is_script_error(session):
    def broken(inp):
        raise ToolError("no such firm")

    session.serve({"listFirms": broken})
    res = session.run("await tools.listFirms({});\nreturn 1;")
    assert_failed(res, "SCRIPT_ERROR")
    assert res["error"]["programError"]["message"] == "no such firm"


# 2.4 -----------------------------------------------------------------------
def test_require_and_dynamic_import_of_builtins(session):
    res = assert_ok(session.run(
        "const fs = require('node:fs');\n"
        "const os = require('os');\n"
        "const path = await import('node:path');\n"
        "const { createHash } = await import('node:crypto');\n"
        "return [typeof fs.readFileSync, typeof os.cpus, path.join('a', 'b'),\n"
        "        createHash('sha256').update('x').digest('hex').length];"))
    assert res["result"] == ["function", "function", "a/b", 64]


def test_static_import_is_script_error(session):
    res = session.run("import fs from 'node:fs';\nreturn typeof fs;")
    assert_failed(res, "SCRIPT_ERROR")
    assert res["error"]["programError"]["message"]


# 2.5 -----------------------------------------------------------------------
def test_workspace_files_survive_within_a_conversation(session):
    conv = f"conv-a-{uuid.uuid4().hex[:8]}"
    token = uuid.uuid4().hex
    res = assert_ok(session.run(
        "const fs = require('node:fs');\n"
        f"fs.writeFileSync('note.txt', '{token}');\n"
        "fs.mkdirSync('sub', { recursive: true });\n"
        "await (await import('node:fs/promises')).writeFile('sub/data.json', JSON.stringify({ n: 7 }));\n"
        "return process.cwd();", conversation=conv))
    assert isinstance(res["result"], str)
    res2 = assert_ok(session.run(
        "const fs = require('node:fs');\n"
        "return [fs.readFileSync('note.txt', 'utf8'), JSON.parse(fs.readFileSync('sub/data.json', 'utf8')).n];",
        conversation=conv))
    assert res2["result"] == [token, 7]


def test_workspace_invisible_to_another_conversation(session):
    conv_a = f"conv-a-{uuid.uuid4().hex[:8]}"
    conv_b = f"conv-b-{uuid.uuid4().hex[:8]}"
    assert_ok(session.run("require('node:fs').writeFileSync('note.txt', 'for a only'); return 1;",
                          conversation=conv_a))
    res = assert_ok(session.run(
        "const fs = require('node:fs');\n"
        "return [fs.existsSync('note.txt'), fs.readdirSync('.').length];",
        conversation=conv_b))
    assert res["result"] == [False, 0]


@local_backend_only  # on Kubernetes each conversation is its own pod (tests/kube)
def test_workspace_of_another_conversation_unreachable_by_host_path(session):
    """With isolation on, conversation B cannot read A's files even by the host path."""
    conv_a = f"conv-a-{uuid.uuid4().hex[:8]}"
    conv_b = f"conv-b-{uuid.uuid4().hex[:8]}"
    name = f"secret-{uuid.uuid4().hex}.txt"
    assert_ok(session.run(f"require('node:fs').writeFileSync('{name}', 'top secret'); return 1;",
                          conversation=conv_a))
    mine = f"mine-{uuid.uuid4().hex}.txt"
    res = assert_ok(session.run(
        "const fs = require('node:fs'); const path = require('node:path');\n"
        f"fs.writeFileSync('{mine}', 'own');\n"
        "const found = [];\n"
        "function walk(dir, depth) {\n"
        "  if (depth > 6) return;\n"
        "  let entries; try { entries = fs.readdirSync(dir, { withFileTypes: true }); } catch { return; }\n"
        "  for (const e of entries) {\n"
        "    const p = path.join(dir, e.name);\n"
        f"    if (e.name === '{name}' || e.name === '{mine}') {{ try {{ found.push(fs.readFileSync(p, 'utf8')); }} catch {{ }} }}\n"
        "    else if (e.isDirectory()) walk(p, depth + 1);\n"
        "  }\n"
        "}\n"
        f"walk({json.dumps(session.state_dir)}, 0);\n"
        "walk('/workspace', 0);\n"
        "return found;", conversation=conv_b))
    # The walk reaches B's own file at /workspace, and nothing by the host
    # path: the state folder is covered, B's own folder too.
    assert res["result"] == ["own"], "conversation B read conversation A's workspace file"


def test_javascript_variables_do_not_survive(session):
    conv = f"conv-{uuid.uuid4().hex[:8]}"
    assert_ok(session.run("globalThis.leftover = 41; return 1;", conversation=conv))
    res = assert_ok(session.run("return typeof globalThis.leftover;", conversation=conv))
    assert res["result"] == "undefined"


# 2.6 -----------------------------------------------------------------------
def test_logs_in_order_across_all_streams(session):
    res = assert_ok(session.run(
        "console.log('one', 1);\n"
        "console.error('two');\n"
        "process.stdout.write('three\\n');\n"
        "process.stderr.write('four\\n');\n"
        "console.warn('five');\n"
        "console.info({ six: 6 });\n"
        "await new Promise((r) => setTimeout(r, 5));\n"
        "console.log('seven');\n"
        "return 'done';"))
    assert res["logs"] == "one 1\ntwo\nthree\nfour\nfive\n{ six: 6 }\nseven\n"
    assert res["logsTruncated"] is False
    assert res["result"] == "done"


def test_logs_empty_when_nothing_printed(session):
    res = assert_ok(session.run("return 1;"))
    assert res["logs"] == "" and res["logsTruncated"] is False


def test_logs_come_back_with_a_failure(session):
    res = session.run("console.log('before the throw');\nthrow new Error('boom');")
    assert_failed(res, "SCRIPT_ERROR")
    assert "before the throw" in res["logs"]


# 2.7 -----------------------------------------------------------------------
def test_return_map_and_set_serialize_as_empty_objects(session):
    res = assert_ok(session.run(
        "return { m: new Map([[1, 2]]), s: new Set([1]), d: new Date(0), u: undefined, n: 1n === 1n };"))
    assert res["result"] == {"m": {}, "s": {}, "d": "1970-01-01T00:00:00.000Z", "n": True}


def test_return_top_level_map_is_empty_object(session):
    res = assert_ok(session.run("return new Map([['a', 1]]);"))
    assert res["result"] == {}


def test_no_return_means_no_result_key(session):
    res = assert_ok(session.run("const x = 1 + 1;\nconsole.log(x);"))
    assert "result" not in res
    assert res["logs"] == "2\n"


def test_return_null_and_falsy_values_kept(session):
    assert assert_ok(session.run("return null;"))["result"] is None
    assert assert_ok(session.run("return 0;"))["result"] == 0
    assert assert_ok(session.run("return '';"))["result"] == ""
    assert assert_ok(session.run("return false;"))["result"] is False


# 2.8 -----------------------------------------------------------------------
def test_pending_calls_at_return_are_cancelled(session):
    session.serve({"hang": lambda inp: NO_ANSWER, "echo": echo})
    eid = session.execute(
        "const p = tools.hang({ slow: true });\n"
        "p.catch(() => {});\n"
        "await tools.echo({ quick: true });\n"
        "return 'done';")
    res = assert_ok(session.wait_result(eid))
    assert res["result"] == "done"
    hang = [c for c in session.of(eid, "tool_call") if c["tool"] == "hang"]
    assert len(hang) == 1
    cancel = session.wait_for(lambda m: m["type"] == "cancel_call" and m.get("id") == eid,
                              30, "cancel_call")
    assert cancel["call"] == hang[0]["call"]
    by_tool = {c["tool"]: c["status"] for c in res["calls"]}
    assert by_tool == {"hang": "cancelled", "echo": "ok"}


# 2.9 -----------------------------------------------------------------------
def test_never_settling_promise_fails_at_once(session):
    res = session.run("await new Promise(() => {});\nreturn 1;", timeout=60)
    assert_failed(res, "NEVER_SETTLES")
    assert res["usage"]["runMs"] < 30000, "NEVER_SETTLES must come well before the deadline"


def test_waiting_on_a_slow_tool_is_not_never_settles(session):
    session.serve({"slow": lambda inp: {"ok": True}}, delay=1.5)
    res = assert_ok(session.run("return await tools.slow({});"))
    assert res["result"] == {"ok": True}


def test_waiting_on_a_timer_is_not_never_settles(session):
    res = assert_ok(session.run("await new Promise((r) => setTimeout(r, 1200));\nreturn 'woke';"))
    assert res["result"] == "woke"


# 2.10 ----------------------------------------------------------------------
def wait_gone(marker, timeout=15):
    deadline = time.monotonic() + timeout
    left = processes_with_marker(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = processes_with_marker(marker)
    return left


def test_child_processes_end_with_the_execution(session):
    marker = f"1000.{random.randrange(10**8, 10**9)}"
    res = assert_ok(session.run(
        "const { spawn } = require('node:child_process');\n"
        f"const c = spawn('sleep', ['{marker}'], {{ detached: false, stdio: 'ignore' }});\n"
        "await new Promise((resolve, reject) => { c.on('spawn', resolve); c.on('error', reject); });\n"
        "return typeof c.pid;"))
    assert res["result"] == "number"
    left = wait_gone(marker)
    assert left == [], f"`sleep {marker}` survived its execution: {left}"


def test_grandchild_processes_end_with_the_execution(session):
    marker = f"1000.{random.randrange(10**8, 10**9)}"
    res = assert_ok(session.run(
        "const { spawn } = require('node:child_process');\n"
        f"const c = spawn('sh', ['-c', 'sleep {marker} & sleep {marker}'], {{ stdio: 'ignore' }});\n"
        "await new Promise((resolve, reject) => { c.on('spawn', resolve); c.on('error', reject); });\n"
        "await new Promise((r) => setTimeout(r, 300));\n"
        "return 'spawned';"))
    assert res["result"] == "spawned"
    left = wait_gone(marker)
    assert left == [], f"grandchildren survived their execution: {left}"


def test_nothing_of_a_program_runs_once_its_outcome_is_out(session):
    # A child that left the runner's tree and the runner's own timer both
    # keep appending to a workspace file after the program returns; from the
    # moment the outcome is delivered (every process killed), the file stops
    # growing: the conversation's next program sees it still.
    conv = f"still-{uuid.uuid4().hex[:8]}"
    res = assert_ok(session.run(
        "const { spawn } = require('node:child_process');\n"
        "const fs = require('node:fs');\n"
        "const c = spawn('sh', ['-c', '(while :; do echo x >> ticks; done) &'],"
        " { detached: true, stdio: 'ignore' });\n"
        "await new Promise((resolve) => c.on('exit', resolve));\n"
        "setInterval(() => fs.appendFileSync('ticks', 'y\\n'), 1);\n"
        "while (!fs.existsSync('ticks') || fs.statSync('ticks').size < 100)"
        " await new Promise((r) => setTimeout(r, 5));\n"
        "return 'running';", conversation=conv))
    assert res["result"] == "running"
    res = assert_ok(session.run(
        "const fs = require('node:fs');\n"
        "const a = fs.statSync('ticks').size;\n"
        "await new Promise((r) => setTimeout(r, 300));\n"
        "return [a, fs.statSync('ticks').size];", conversation=conv))
    before, after = res["result"]
    assert before == after, f"the previous program's processes still wrote {after - before} bytes"


def test_raw_stderr_written_just_before_returning_is_in_the_logs(session):
    # fd 2 is another pipe than the frames' fd 1: what was written to it
    # before the result frame still reaches the logs.
    for i in range(5):
        res = assert_ok(session.run(
            "const fs = require('node:fs');\n"
            "const { spawnSync } = require('node:child_process');\n"
            f"fs.writeSync(2, 'raw {i}\\n');\n"
            f"spawnSync('sh', ['-c', 'echo child {i} >&2'], {{ stdio: 'inherit' }});\n"
            "return 1;"))
        assert f"raw {i}\n" in res["logs"] and f"child {i}\n" in res["logs"], res["logs"]


@local_backend_only  # on Kubernetes a key only names a pod, by its hash (tests/kube)
def test_conversation_key_cannot_escape_the_state_dir(session, tmp_path):
    for conv in ("../escape", "/tmp", "..", "a/../../b"):
        res = assert_ok(session.run(
            "require('node:fs').writeFileSync('escaped.txt', 'x');\nreturn 1;", conversation=conv))
        assert res["result"] == 1
    state = Path(session.state_dir).resolve()
    outside = [p for p in tmp_path.rglob("escaped.txt") if state not in p.resolve().parents]
    outside += [p for p in (Path("/tmp/escaped.txt"), state.parent / "escaped.txt") if p.exists()]
    assert outside == [], f"a conversation key wrote outside --state-dir: {outside}"
    inside = list(state.rglob("escaped.txt"))
    assert len(inside) == 4, f"each key has its own workspace under --state-dir: {inside}"
    res = assert_ok(session.run("return require('node:fs').existsSync('escaped.txt');",
                                conversation=f"fresh-{uuid.uuid4().hex[:8]}"))
    assert res["result"] is False


def test_unicode_logs_survive_frame_splits_and_the_window(session):
    res = assert_ok(session.run(
        "process.stdout.write('é'.repeat(20000));\n"
        "process.stdout.write(Buffer.from('✓', 'utf8').subarray(0, 1));\n"
        "process.stdout.write(Buffer.from('✓', 'utf8').subarray(1));\n"
        "console.log('😀 end');\n"
        "return 'ok';", policy={"maxResultBytes": 1001}))
    logs = res["logs"]
    assert res["logsTruncated"] is True
    assert "\ufffd" not in logs, "a multi-byte character was cut"
    assert logs.endswith("é✓😀 end\n")
    assert set(logs[:-len("✓😀 end\n")]) == {"é"}
    assert len(logs.encode()) <= 1001


def test_unicode_round_trip_through_a_tool(session):
    session.serve({"echo": echo})
    res = assert_ok(session.run(
        "const s = 'Zürich ✓ 😀 \\u0000 \\u2028 \"q\" \\\\';\n"
        "const r = await tools.echo({ s });\n"
        "return { same: r.s === s, s: r.s };"))
    assert res["result"] == {"same": True, "s": 'Zürich ✓ 😀 \u0000 \u2028 "q" \\'}


def test_large_tool_output_under_the_default_limit(session):
    session.serve({"rows": lambda inp: [{"i": i, "pad": "x" * 90} for i in range(9000)]})
    res = assert_ok(session.run("const rows = await tools.rows({});\n"
                                "return { n: rows.length, last: rows[rows.length - 1].i };",
                                timeout=120))
    assert res["result"] == {"n": 9000, "last": 8999}


def test_tool_names_beyond_ascii_and_odd_inputs_reach_the_tool(session):
    # codepod reads the runner's common tool-call frame by hand and the rest
    # (a name beyond ASCII or with a quote) through the full JSON parse: both
    # reach the backend the same way. An integer beyond 64 bits (JavaScript
    # writes plain digits up to 1e21) arrives as a number, not as a broken
    # control channel (INTERNAL before).
    seen = []

    def rec(inp):
        seen.append(inp)
        return inp

    session.serve({"zähler": rec, 'q"t': rec, "echo": rec})
    eid = session.execute(
        "const a = await tools['zähler']({ n: 1 });\n"
        "const b = await tools['q\"t']({ n: 2 });\n"
        "const c = await tools.echo({ big: 1e20, r: 0.1, s: '\"' });\n"
        "const d = await tools.echo([]);\n"
        "return [a.n, b.n, c.big, c.r, c.s, d];",
        tools=["zähler", 'q"t', "echo"])
    res = assert_ok(session.wait_result(eid))
    assert res["result"] == [1, 2, 1e20, 0.1, '"', []]
    assert [c["tool"] for c in session.of(eid, "tool_call")] == ["zähler", 'q"t', "echo", "echo"]
    assert seen[2]["big"] == 1e20


def test_a_tool_name_too_long_for_any_tool_is_unknown(session):
    # codepod keeps 128 bytes of a name; cut inside a character it was not
    # valid UTF-8, and the denial could not be sent (INTERNAL).
    res = assert_ok(session.run(CATCH.format(call="tools['a' + 'é'.repeat(100)]({})")))
    assert res["result"]["isError"] is True
    assert res["result"]["message"].startswith("Unknown tool: a" + "é" * 10)
