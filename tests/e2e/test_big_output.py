"""docs/contract.md §2.6 with a flood: 10 MB of output keeps the last maxResultBytes, memory stays flat."""

from harness import UNDER_ASAN, assert_ok, vm_hwm_kib


def test_ten_megabytes_of_output(session):
    assert_ok(session.run("console.log('warm up'); return 1;"))
    before = vm_hwm_kib(session.proc.pid)
    res = assert_ok(session.run(
        "const chunk = 'x'.repeat(1023) + '\\n';\n"
        "for (let i = 0; i < 10240; i++) process.stdout.write(chunk);\n"
        "for (let i = 0; i < 1024; i++) console.error('e'.repeat(1023));\n"
        "console.log('END-MARKER');\n"
        "return 'ok';", timeout=180))
    assert res["result"] == "ok"
    assert res["logsTruncated"] is True
    logs = res["logs"]
    assert len(logs.encode()) <= 32768
    assert len(logs) >= 30000, "the default log window is 32768 bytes"
    assert logs.endswith("e" * 1023 + "\nEND-MARKER\n")
    after = vm_hwm_kib(session.proc.pid)
    if before is not None and after is not None and not UNDER_ASAN:
        assert after - before < 10 * 1024, \
            f"codepod's peak RSS grew by {after - before} KiB while relaying 11 MB of output"
