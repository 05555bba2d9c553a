"""docs/contract.md §4: the usage figures of every outcome (cpuMs,
maxRssBytes, wallMs, toolCalls, the bytes that crossed the bridge), and §3's
CPU budget, maxCpuMs, ending a program with CPU_LIMIT. On both backends
(CODEPOD_BACKEND=kubernetes: the pod's supervisor reads them).

The programs burn CPU time by process.cpuUsage(), not by the clock, so a
loaded machine changes how long they take, never what they use."""

import json
import os

import pytest

from harness import BACKEND, NO_ANSWER, Session, ToolError, assert_failed, assert_ok

MIB = 1 << 20

# A pod without a supervisor has nobody to read /proc (tests/kube covers it).
if BACKEND == "kubernetes" and os.environ.get("CODEPOD_SUPERVISOR") == "0":
    pytest.skip("no usage readings without the pod's supervisor", allow_module_level=True)

# Spends about `ms` of this process's CPU time (user + system).
BURN = ("const burn = (ms) => { const t0 = process.cpuUsage(); for (;;) { const t = process.cpuUsage(t0);"
        " if (t.user + t.system >= ms * 1000) return; } };\n")


def burn_src(ms):
    return ("const t0=process.cpuUsage();for(;;){const t=process.cpuUsage(t0);"
            f"if(t.user+t.system>={ms * 1000})break;}}")


def usage(res):
    u = res["usage"]
    for k in ("cpuMs", "maxRssBytes", "wallMs", "toolCalls", "toolInputBytes",
              "toolOutputBytes", "logBytes", "resultBytes"):
        assert isinstance(u.get(k), int) and u[k] >= 0, f"usage.{k} missing: {json.dumps(u)}"
    return u


def test_cpu_time_of_a_busy_program(session):
    u = usage(assert_ok(session.run(BURN + "burn(200); return 1;")))
    assert 180 <= u["cpuMs"] <= 400, u
    assert u["wallMs"] == u["startupMs"] + u["runMs"], u


def test_peak_rss_of_a_program_that_allocates(session):
    res = session.run("const b = Buffer.alloc(300 * 1024 * 1024).fill(1); return b.length;")
    u = usage(assert_ok(res))
    assert 300 * MIB <= u["maxRssBytes"] <= 450 * MIB, u


def test_a_child_process_is_counted(session):
    js = ("const { execFileSync } = require('node:child_process');\n"
          f"execFileSync(process.execPath, ['-e', {json.dumps(burn_src(200))}]);\n"
          "return 1;")
    u = usage(assert_ok(session.run(js)))
    assert 180 <= u["cpuMs"] <= 400, u


def test_a_shell_child_is_counted(session):
    # A CPU-bound `sh -c` loop, reaped by the runner: its time is what the
    # runner's /proc/self/stat says its children used (fields 16, 17, ticks).
    js = ("const { execFileSync } = require('node:child_process');\n"
          "execFileSync('sh', ['-c', 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done']);\n"
          "const st = require('node:fs').readFileSync('/proc/self/stat', 'utf8');\n"
          "const f = st.slice(st.lastIndexOf(')') + 2).split(' ');\n"
          "return (+f[13] + +f[14]) * 10;")
    res = assert_ok(session.run(js, timeout=120))
    kids_ms = res["result"]
    assert kids_ms >= 50, res
    # (the runner's own ticks, user and system apiece, may read up to 20 ms
    # under the precise figure its hello was taken off from)
    assert usage(res)["cpuMs"] >= kids_ms - 25, (res["usage"], kids_ms)


def test_a_timed_out_execution_reports_usage(session):
    res = session.run(BURN + "burn(200); await new Promise(() => setInterval(() => {}, 1000));",
                      policy={"timeoutMs": 3000})
    assert_failed(res, "TIMEOUT")
    u = usage(res)
    assert 180 <= u["cpuMs"] <= 400, u


def test_a_killed_child_is_counted(session):
    # The child burns, then stays: it is killed at the deadline, its time counts.
    js = ("const { spawn } = require('node:child_process');\n"
          f"spawn(process.execPath, ['-e', {json.dumps(burn_src(200) + ';setInterval(()=>{},1000)')}],"
          " { stdio: 'ignore', detached: true }).unref();\n"
          "await new Promise(() => setInterval(() => {}, 1000));")
    res = session.run(js, policy={"timeoutMs": 4000})
    assert_failed(res, "TIMEOUT")
    assert 180 <= usage(res)["cpuMs"] <= 400, res["usage"]


def test_a_runner_that_exits_by_itself_is_counted(session):
    res = session.run(BURN + "burn(200); process.exit(3);")
    err = assert_failed(res, "PROCESS_EXITED")
    assert "code 3" in err["message"], err
    assert 180 <= usage(res)["cpuMs"] <= 400, res["usage"]


def test_bytes_of_a_known_tool_exchange(session):
    def fail(inp):
        raise ToolError("no")
    session.serve({"echo": lambda inp: {"b": [1, 2], "t": "x"}, "fail": fail})
    js = ("const r = await tools.echo({ a: 1, s: 'h\u00e9llo' });\n"
          "try { await tools.fail({}); } catch (e) {}\n"
          "try { await tools.echo({ pad: 'x'.repeat(100) }); } catch (e) {}\n"
          "console.log('abc'); console.error('de');\n"
          "return r;")
    res = assert_ok(session.run(js, policy={"maxToolInputBytes": 64}))
    u = usage(res)
    assert u["bridgeRequests"] == 3, u      # the one over maxToolInputBytes too
    assert u["toolCalls"] == 2, u           # it never reached the tool
    assert u["toolInputBytes"] == len('{"a":1,"s":"h\u00e9llo"}'.encode()) + len(b"{}"), u
    assert u["toolOutputBytes"] == len(b'{"b":[1,2],"t":"x"}'), u
    assert u["logBytes"] == len(b"abc\nde\n"), u
    assert u["resultBytes"] == len(b'{"b":[1,2],"t":"x"}'), u
    assert res["result"] == {"b": [1, 2], "t": "x"}


def test_no_result_no_bytes(session):
    u = usage(assert_ok(session.run("return;")))
    assert u["resultBytes"] == 0 and u["toolCalls"] == 0 and u["logBytes"] == 0, u


def test_cpu_limit_ends_a_busy_loop_near_the_limit(session):
    res = session.run("let x = 0; for (;;) x++;", policy={"maxCpuMs": 200, "timeoutMs": 20000})
    err = assert_failed(res, "CPU_LIMIT")
    u = usage(res)
    assert 200 < u["cpuMs"] <= 700, u
    assert "200 ms" in err["message"] and "maxCpuMs" in err["message"], err
    # the figure it names is over the limit
    used = int(err["message"].split("used ")[1].split(" ms")[0])
    assert 200 < used <= u["cpuMs"], (err, u)


def test_cpu_limit_counts_a_child_process(session):
    js = ("const { execFileSync } = require('node:child_process');\n"
          f"execFileSync(process.execPath, ['-e', {json.dumps(burn_src(5000))}]);\n"
          "return 1;")
    res = session.run(js, policy={"maxCpuMs": 300, "timeoutMs": 30000}, timeout=90)
    assert_failed(res, "CPU_LIMIT")
    assert 300 < usage(res)["cpuMs"] <= 900, res["usage"]


def test_waiting_on_a_slow_tool_is_not_cpu_time(session):
    session.serve({"slow": lambda inp: {"ok": True}}, delay=1.0)
    res = session.run("return await tools.slow({});", policy={"maxCpuMs": 200})
    u = usage(assert_ok(res))
    assert res["result"] == {"ok": True}
    assert u["cpuMs"] < 200 and u["runMs"] >= 1000, u


def test_max_cpu_ms_is_validated_like_the_other_limits(session):
    for bad in (0, -5, "100", 1.5):
        eid = session.execute("return 1", policy={"maxCpuMs": bad})
        err = session.wait_error(eid)
        assert err["inReplyTo"] == "execute" and err["error"]["code"] == "INVALID_REQUEST", err
        assert "maxCpuMs" in err["error"]["message"], err


def test_max_cpu_ms_over_the_deployment_ceiling(tmp_path):
    s = Session(tmp_path / "state", args=["--policy-ceiling", '{"maxCpuMs":1000}'])
    try:
        eid = s.execute("return 1", policy={"maxCpuMs": 5000})
        err = s.wait_error(eid)
        assert err["error"]["code"] == "INVALID_REQUEST" and "1000" in err["error"]["message"], err
        # the default, none, comes down to the ceiling
        res = s.run("let x = 0; for (;;) x++;", policy={"timeoutMs": 20000})
        assert_failed(res, "CPU_LIMIT")
        assert "1000 ms" in res["error"]["message"], res["error"]
    finally:
        assert s.close() == 0


def test_a_runner_started_ahead_does_not_bill_its_boot(tmp_path):
    s = Session(tmp_path / "state", args=["--prestart", "2"])
    try:
        first = assert_ok(s.run("return 1", conversation="ahead"))
        second = None
        for _ in range(40):  # until the next runner has booted and waits
            second = assert_ok(s.run("return 2", conversation="ahead"))
            if second["usage"]["startupMs"] < first["usage"]["startupMs"] / 2:
                break
        # Node's start alone is tens of ms of CPU; the program's own is ~1
        assert usage(second)["cpuMs"] < 30, (first["usage"], second["usage"])
    finally:
        assert s.close() == 0


@pytest.mark.parametrize("js", ["return 1", "throw new Error('x')", "for (;;) {}"])
def test_every_outcome_has_the_figures(session, js):
    res = session.run(js, policy={"timeoutMs": 1000})
    usage(res)
    assert res["usage"]["maxRssBytes"] > 10 * MIB, res["usage"]


def test_waiting_for_a_tool_that_never_answers_then_stopped(session):
    session.serve({"hang": lambda inp: NO_ANSWER})
    eid = session.execute(BURN + "burn(100); return await tools.hang({});")
    session.wait_call(eid, "hang")
    session.stop(eid)
    res = session.wait_result(eid)
    assert_failed(res, "CANCELLED")
    u = usage(res)
    # (/proc counts 10 ms ticks, user and system apiece)
    assert 80 <= u["cpuMs"] <= 300 and u["toolCalls"] == 1 and u["toolInputBytes"] == 2, u
