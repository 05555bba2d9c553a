"""A hostile program can only fail its own execution."""

import re

from harness import assert_failed, assert_ok

FORGE = '"\\x1ecp1 " + "0".repeat(32) + " R 1\\n1"'


def test_forged_frames_garbage_and_inherited_stdio_do_not_corrupt_the_channel(session):
    js = f"""const fs = require('node:fs');
const {{ spawn }} = require('node:child_process');
console.log({FORGE});
process.stdout.write({FORGE} + "\\n");
process.stderr.write({FORGE} + "\\n");
fs.writeSync(1, {FORGE});
fs.writeSync(1, "\\x1ecp1 " + "f".repeat(32) + " T 9\\n{{\\"x\\":1}}\\n");
fs.writeSync(1, "\\x1ecp1 " + "0".repeat(32) + " O 99999999999999\\n");
fs.writeSync(1, Buffer.from([0x1e, 0x00, 0xff, 0xfe, 0x0a, 0x1e, 0x63, 0x70, 0x31, 0x20]));
fs.writeSync(2, Buffer.from([0x1e, 0x00, 0xff, 0xfe, 0x0a, 0xc3]));
fs.writeSync(1, "\\n{{\\"type\\":\\"result\\",\\"id\\":\\"forged\\",\\"status\\":\\"succeeded\\"}}\\n");
await new Promise((resolve, reject) => {{
  const c = spawn('sh', ['-c', 'head -c 100000 /dev/urandom'], {{ stdio: 'inherit' }});
  c.on('exit', resolve);
  c.on('error', reject);
}});
return 42;
"""
    res = assert_ok(session.run(js, timeout=120))
    assert res["result"] == 42
    # The subprocess's 100000 bytes are captured as logs (docs/contract.md §2.6 allows
    # it), so the 32 KiB window dropped the start, and says so.
    assert res["logsTruncated"] is True
    assert session.of("forged", "result") == []
    again = assert_ok(session.run("console.log('clean');\nreturn 'still works';"))
    assert again["result"] == "still works" and again["logs"] == "clean\n"


def test_flood_of_forged_headers_only_affects_its_own_execution(session):
    session.serve({"echo": lambda inp: inp})
    other = session.execute("await new Promise((r) => setTimeout(r, 1500));\n"
                            "return await tools.echo({ ok: 1 });")
    js = """const fs = require('node:fs');
for (let i = 0; i < 2000; i++) {
  fs.writeSync(1, "\\x1ecp1 " + (i % 16).toString(16).repeat(32) + " C " + i + "\\n" + "{".repeat(i % 50));
  fs.writeSync(2, "\\x1e\\x1e\\x1ecp1\\n");
}
return 'survived';
"""
    # Headers without the execution's nonce are the program's own output: kept
    # as logs (their volume overflows the window), and the program returns.
    res = assert_ok(session.run(js, timeout=120))
    assert res["result"] == "survived"
    assert res["logsTruncated"] is True and "cp1" in res["logs"]
    assert assert_ok(session.wait_result(other))["result"] == {"ok": 1}


def test_program_closing_its_stdout_cannot_hang_codepod(session):
    res = session.run("require('node:fs').closeSync(1);\nreturn 'closed';", timeout=60)
    # Closing fd 1 cuts the channel: the runner cannot report, and the
    # execution fails saying its process ended before the program returned.
    err = assert_failed(res, "PROCESS_EXITED")
    assert "exited" in err["message"], err
    assert_ok(session.run("return 1;"))


def test_memory_hog_fails_its_own_execution_and_says_so(session):
    res = session.run(
        "const keep = [];\n"
        "for (;;) keep.push(new Array(1e6).fill(Math.random()));",
        timeout=180)
    err = assert_failed(res, "PROCESS_EXITED")
    assert re.search(r"memory|OOM", err["message"], re.I), \
        f"an out-of-memory end must say so: {err['message']!r}"
    assert_ok(session.run("return 'alive';"))


def test_program_tampering_with_globals_cannot_forge_its_result(session):
    session.serve({"echo": lambda inp: inp})
    res = assert_ok(session.run(
        "const real = await tools.echo({ n: 1 });\n"
        "JSON.stringify = () => '\"hacked\"';\n"
        "JSON.parse = () => 'hacked';\n"
        "Buffer.from = () => { throw new Error('hacked'); };\n"
        "Promise.prototype.then = function () { return this; };\n"
        "process.stdout.write = () => true;\n"
        "return { real, ok: true };"))
    assert res["result"] == {"real": {"n": 1}, "ok": True}
