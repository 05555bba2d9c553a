"""Runners already started (runner/prestart.h). A conversation's next
runner is started ahead of time and waits for its program; it serves exactly one
execution (docs/contract.md §2.11), goes after the conversation's idle time, and a policy
needing another Node start gets a fresh one. These tests force the pool on
(--prestart) whatever CODEPOD_PRESTART says; the rest of the suite runs with it
on by default and off with CODEPOD_PRESTART=0."""
import base64
import os
import signal
import time

import pytest

from harness import BACKEND, Session, assert_ok, children, local_backend_only

# A program that looks for any trace of an earlier one in its process, leaves
# traces of its own (globals, environment, a timer that would keep a reused
# process busy), and says which process it ran in.
PROBE = r"""
const fs = require('node:fs');
const seen = { mark: globalThis.__codepodMark ?? null, env: process.env.CODEPOD_TEST_MARK ?? null,
               listeners: process.listenerCount('exit') };
globalThis.__codepodMark = 'used';
process.env.CODEPOD_TEST_MARK = 'used';
process.on('exit', () => {});
setInterval(() => {}, 1000).unref();
const stat = fs.readFileSync('/proc/self/stat', 'utf8');
const start = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
return { seen, id: [fs.readlinkSync('/proc/self/ns/pid'), process.pid, start].join('/') };
"""




def wait_event(session, event, count=1, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        got = session.log_events(event)
        if len(got) >= count:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"no {count}x {event} within {timeout}s; {session._context()}")
        time.sleep(0.05)


def logged(session, event, eid, timeout=60):
    """eid's @event log line, which may be read a little after the result."""
    deadline = time.monotonic() + timeout
    while True:
        got = [m for m in session.log_events(event) if m.get("id") == eid]
        if got:
            return got[0]
        assert time.monotonic() < deadline, f"no {event} for {eid}"
        time.sleep(0.02)


def prestarted(session, eid):
    """Whether eid's runner was waiting for it (its exec.done line)."""
    return logged(session, "exec.done", eid).get("prestarted")


@pytest.fixture
def pool(tmp_path):
    s = Session(tmp_path / "state", args=["--prestart", "4", "--log-level", "debug"])
    yield s
    s.close()


def test_a_runner_serves_exactly_one_execution(pool):
    conv = pool.conv_prefix + "once"
    ids, used, fresh = set(), [], None
    for i in range(4):
        if i:
            wait_event(pool, "prestart.started", count=i)
        eid = pool.execute(PROBE, tools=[], conversation=conv)
        res = assert_ok(pool.wait_result(eid, timeout=120))["result"]
        # the first runner started on demand: what a fresh process has
        fresh = res["seen"]["listeners"] if fresh is None else fresh
        assert res["seen"] == {"mark": None, "env": None, "listeners": fresh}, (i, res)
        ids.add(res["id"])
        used.append(prestarted(pool, eid))
    assert len(ids) == 4, ids  # four processes, none used twice
    assert used == [False, True, True, True]


def test_a_typescript_conversation_gets_its_stripper_warm_and_still_a_fresh_runner(pool):
    # The probe with a type annotation needs the type stripper; after one, the
    # conversation's next runner warms it up while it waits: the program still
    # sees nothing of any other, and plain JavaScript after it runs as well.
    conv = pool.conv_prefix + "ts"
    ts_probe = "const typed: number = 1;\n" + PROBE
    ids, used = set(), []
    for i, js in enumerate((ts_probe, ts_probe, ts_probe, PROBE)):
        if i:
            wait_event(pool, "prestart.started", count=i)
        eid = pool.execute(js, tools=[], conversation=conv)
        res = assert_ok(pool.wait_result(eid, timeout=120))["result"]
        assert res["seen"]["mark"] is None and res["seen"]["env"] is None, (i, res)
        ids.add(res["id"])
        used.append(prestarted(pool, eid))
    assert len(ids) == 4, ids
    assert used == [False, True, True, True]


LOADED_CHILD_PROCESS = "return process.moduleLoadList.includes('NativeModule child_process');"


def test_after_a_command_the_next_runner_has_child_process_loaded(pool):
    # A command's runner needs node:child_process; once the conversation
    # has run a command, its next runners load it while they wait (a
    # program can see that, as a loaded built-in module, and nothing else).
    conv = pool.conv_prefix + "cmd"
    assert assert_ok(pool.run(LOADED_CHILD_PROCESS, tools=[], conversation=conv))["result"] is False
    started = 1
    for i in range(2):
        wait_event(pool, "prestart.started", count=started)
        cid = pool.new_id("c")
        pool.send({"type": "command", "id": cid, "conversation": conv, "argv": ["sh", "-c", "echo ran"]})
        res = pool.wait_for(lambda m: m.get("id") == cid and m["type"] in ("command_result", "error"),
                            60, "command_result")
        assert res["type"] == "command_result" and res["exitCode"] == 0 and res["stdout"] == "ran\n", res
        assert prestarted(pool, cid) is True
        started += 1
    wait_event(pool, "prestart.started", count=started)
    eid = pool.execute(LOADED_CHILD_PROCESS, tools=[], conversation=conv)
    assert assert_ok(pool.wait_result(eid))["result"] is True
    assert prestarted(pool, eid) is True
    wait_event(pool, "prestart.started", count=started + 1)
    eid = pool.execute(LOADED_CHILD_PROCESS, tools=[], conversation=conv)
    assert assert_ok(pool.wait_result(eid))["result"] is True
    assert prestarted(pool, eid) is True
    # another conversation's runners, which never ran one, do not load it
    other = conv + "-js"
    assert assert_ok(pool.run(LOADED_CHILD_PROCESS, tools=[], conversation=other))["result"] is False
    wait_event(pool, "prestart.started", count=started + 3)  # (its own, after conv's next)
    eid = pool.execute(LOADED_CHILD_PROCESS, tools=[], conversation=other)
    assert assert_ok(pool.wait_result(eid))["result"] is False
    assert prestarted(pool, eid) is True


# A program that waits until no process of its sandbox is a parked shell
# (what a command's runner starts ahead): what it finds each time it looks.
NO_PARKED_SHELL = r"""
const fs = require('node:fs');
const parked = () => fs.readdirSync('/proc').filter((p) => /^[0-9]+$/.test(p)).filter((p) => {
  try { return fs.readFileSync('/proc/' + p + '/cmdline', 'latin1').includes('_cp_l'); } catch (_) { return false; }
});
for (;;) {
  if (parked().length === 0) return true;
  await new Promise((r) => setTimeout(r, 20));
}
"""


def test_a_command_behaves_the_same_as_the_shell_started_ahead(pool):
    # Once a conversation has run a command, its next runner starts a shell
    # while it waits and the command replaces that shell: arguments,
    # environment, folder, stdin, exit code and signal as a fresh spawn
    # gives them; a program that starts finds no such shell.
    conv = pool.conv_prefix + "ahead"
    started = 0  # runners started ahead for conv so far

    def command(stdin_data=None, **fields):
        # (shellAhead, of its command.ended line: whether the shell its
        # runner started ahead became the command)
        nonlocal started
        wait_event(pool, "prestart.started", count=started)
        started += 1
        cid = pool.new_id("c")
        pool.send(dict(type="command", id=cid, conversation=conv, **fields))
        if stdin_data is not None:
            pool.send({"type": "command_stdin", "id": cid, "eof": True,
                       "data": base64.b64encode(stdin_data).decode()})
        r = pool.wait_for(lambda m: m.get("id") == cid and m["type"] in ("command_result", "error"),
                          60, "command_result")
        assert r["type"] == "command_result" and r["status"] == "ok", r
        return r, logged(pool, "command.ended", cid)["shellAhead"]

    r, ahead = command(argv=["sh", "-c", "mkdir -p \"it's a dir\""])
    assert r["exitCode"] == 0 and ahead is False, r  # the conversation's first
    odd = "it's\n$HOME `x` \\ \"q\" *"
    r, ahead = command(argv=["printf", "%s|", odd, ""], env={"ODD": odd, "PATH": "/usr/bin:/bin"},
                       cwd="it's a dir")
    assert ahead is True and r["exitCode"] == 0 and r["stdout"] == odd + "||", r
    r, ahead = command(argv=["sh", "-c", 'printf "%s|%s|%s" "$ODD" "$(pwd)" "$PATH"; exit 7'],
                       env={"ODD": odd, "PATH": "/usr/bin:/bin"}, cwd="it's a dir")
    out = r["stdout"].split("|")
    assert ahead is True and r["exitCode"] == 7, r
    assert out[0] == odd and out[1].endswith("/it's a dir") and out[2] == "/usr/bin:/bin", r
    r, ahead = command(argv=["sh", "-c", "read a; read b; echo \"$b$a\""], stdin=True,
                       stdin_data=b"x\ny\n")
    assert ahead is True and r["stdout"] == "yx\n", r
    r, ahead = command(argv=["cat"])  # no stdin asked for: it reads an end at once
    assert ahead is True and r["exitCode"] == 0 and r["stdout"] == "", r
    r, ahead = command(argv=["sh", "-c", "kill -TERM $$; sleep 5"])
    assert ahead is True and r["exitCode"] == 143 and r["signal"] == "SIGTERM", r
    # what a shell would say differently takes the plain spawn, as before
    r, ahead = command(argv=["no-such-program-x"])
    assert ahead is False and r["exitCode"] in (126, 127) and "cannot run" in r["stderr"], r
    r, ahead = command(argv=["true"], cwd="no-such-dir")
    assert ahead is False and r["exitCode"] in (126, 127), r
    r, ahead = command(argv=["printf", "%s", "y" * 5000])  # a shell reads it a byte at a time
    assert ahead is False and r["stdout"] == "y" * 5000, r
    r, ahead = command(argv=["printf", "%s", "y" * 3000])
    assert ahead is True and r["stdout"] == "y" * 3000, r
    wait_event(pool, "prestart.started", count=started)
    assert assert_ok(pool.run(NO_PARKED_SHELL, tools=[], conversation=conv))["result"] is True


def test_another_heap_size_gets_a_fresh_start(pool):
    conv = pool.conv_prefix + "heap"
    assert_ok(pool.run("return 1", tools=[], conversation=conv, timeout=120))
    wait_event(pool, "prestart.started")
    eid = pool.execute("return 2", tools=[], conversation=conv, policy={"maxMemoryMb": 300})
    assert assert_ok(pool.wait_result(eid, timeout=120))["result"] == 2
    assert prestarted(pool, eid) is False
    # the waiting runner now follows the latest policy
    wait_event(pool, "prestart.started", count=2)
    eid = pool.execute("return 3", tools=[], conversation=conv, policy={"maxMemoryMb": 300})
    assert assert_ok(pool.wait_result(eid, timeout=120))["result"] == 3
    assert prestarted(pool, eid) is True


def test_memory_ceiling_holds_on_a_waiting_runner(pool):
    conv = pool.conv_prefix + "oom"
    pol = {"maxMemoryMb": 64}
    assert_ok(pool.run("return 1", tools=[], conversation=conv, policy=pol, timeout=120))
    wait_event(pool, "prestart.started")
    eid = pool.execute("const a = []; for (;;) a.push('x'.repeat(1024) + a.length);",
                       tools=[], conversation=conv, policy=pol)
    res = pool.wait_result(eid, timeout=120)
    assert prestarted(pool, eid) is True
    assert res["status"] == "failed" and res["error"]["code"] == "PROCESS_EXITED", res
    assert "out of memory" in res["error"]["message"], res


@local_backend_only
def test_waiting_runner_is_gone_after_the_idle_time(tmp_path):
    s = Session(tmp_path / "state", args=["--prestart", "4", "--prestart-idle", "1",
                                          "--log-level", "debug"])
    try:
        assert_ok(s.run("return 1", tools=[], conversation=s.conv_prefix + "idle", timeout=120))
        wait_event(s, "prestart.started")
        wait_event(s, "prestart.expired")
        deadline = time.monotonic() + 30
        while children(s.proc.pid):
            assert time.monotonic() < deadline, f"runner still there: {children(s.proc.pid)}"
            time.sleep(0.05)
        # the conversation's next execution starts afresh and works
        eid = s.execute("return 2", tools=[], conversation=s.conv_prefix + "idle")
        assert assert_ok(s.wait_result(eid, timeout=120))["result"] == 2
        assert prestarted(s, eid) is False
    finally:
        s.close()


@local_backend_only
def test_a_waiting_runner_killed_from_outside_is_not_used(pool):
    conv = pool.conv_prefix + "killed"
    assert_ok(pool.run("return 1", tools=[], conversation=conv, timeout=120))
    wait_event(pool, "prestart.started")
    deadline = time.monotonic() + 30
    while len(children(pool.proc.pid)) != 1:  # the first runner's tree goes
        assert time.monotonic() < deadline, children(pool.proc.pid)
        time.sleep(0.05)
    os.kill(children(pool.proc.pid)[0], signal.SIGKILL)
    wait_event(pool, "prestart.died")
    eid = pool.execute("return 2", tools=[], conversation=conv)
    assert assert_ok(pool.wait_result(eid, timeout=120))["result"] == 2
    assert prestarted(pool, eid) is False


def test_off_means_every_runner_starts_on_demand(tmp_path):
    s = Session(tmp_path / "state", args=["--prestart", "0", "--log-level", "debug"])
    try:
        conv = s.conv_prefix + "off"
        for _ in range(2):
            eid = s.execute("return 1", tools=[], conversation=conv)
            assert_ok(s.wait_result(eid, timeout=120))
            assert prestarted(s, eid) is False
        assert s.log_events("prestart.started") == []
    finally:
        assert s.close() == 0
