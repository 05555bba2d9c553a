"""Commands in a conversation's sandbox over the session protocol
(broker/SESSION.md, "command"): a shell line or an argv in a fresh process
with a program's isolation and deadline, its output streamed when asked,
its stdin fed when asked, stopped, timed out, and nothing it started left
running. Runs on both backends (CODEPOD_BACKEND) and both transports
(CODEPOD_TRANSPORT)."""

import base64
import time
import uuid

from harness import assert_ok, processes_with_marker


def command(s, conversation=None, **fields):
    cid = s.new_id("c")
    msg = {"type": "command", "id": cid, "conversation": conversation or f"conv-{cid}"}
    msg.update(fields)
    s.send(msg)
    return cid


def wait_command(s, cid, timeout=60):
    def pred(m):
        return m.get("id") == cid and (m["type"] == "command_result"
                                       or (m["type"] == "error" and m.get("inReplyTo") == "command"))
    m = s.wait_for(pred, timeout, f"command_result for {cid}")
    assert m["type"] == "command_result", f"expected a command_result, got {m}"
    assert m["executionId"] == cid
    return m


def run(s, timeout=60, **fields):
    return wait_command(s, command(s, **fields), timeout)


def refused(s, **fields):
    cid = command(s, **fields)
    m = s.wait_for(lambda m: m.get("id") == cid and m["type"] in ("error", "command_result"),
                   60, f"error for {cid}")
    assert m["type"] == "error" and m["inReplyTo"] == "command", m
    assert m["error"]["code"] == "INVALID_REQUEST", m
    return m["error"]["message"]


def test_shell_line_exit_code_and_both_streams(session):
    r = run(session, command="echo out; echo err >&2; exit 3")
    assert r["status"] == "ok" and r["exitCode"] == 3, r
    assert r["stdout"] == "out\n" and r["stderr"] == "err\n", r
    assert r["stdoutTruncated"] is False and r["stderrTruncated"] is False
    assert "signal" not in r and "error" not in r
    assert r["usage"]["wallMs"] >= 0


def test_argv_runs_without_a_shell(session):
    r = run(session, argv=["printf", "%s|", "a b", "$HOME", "*"])
    assert r["status"] == "ok" and r["exitCode"] == 0, r
    assert r["stdout"] == "a b|$HOME|*|", r


def test_missing_program_is_127_not_an_error(session):
    r = run(session, argv=["no-such-program-" + uuid.uuid4().hex[:6]])
    # 127 as a shell says "not found"; 126 when a folder of PATH could not
    # be searched on the way (the fake API server's pods see the host's PATH)
    assert r["status"] == "ok" and r["exitCode"] in (126, 127), (r["exitCode"], r["stderr"])
    assert "cannot run" in r["stderr"]
    r = run(session, command="exit 255")
    assert r["exitCode"] == 255


def test_killed_by_a_signal_reports_128_plus_n(session):
    r = run(session, command="kill -TERM $$; sleep 5")
    assert r["status"] == "ok" and r["exitCode"] == 128 + 15 and r["signal"] == "SIGTERM", r
    r = run(session, command="kill -KILL $$")
    assert r["exitCode"] == 137 and r["signal"] == "SIGKILL", r


def test_cwd_env_and_the_workspace(session):
    conv = "cmd-cwd-" + uuid.uuid4().hex[:6]
    assert_ok(session.run("require('node:fs').mkdirSync('sub/dir', {recursive: true}); return 1;",
                          conversation=conv))
    r = run(session, conversation=conv, command='pwd; echo "$GREETING"', cwd="sub/dir",
            env={"GREETING": "hi there"})
    assert r["status"] == "ok" and r["exitCode"] == 0, r
    pwd, greeting = r["stdout"].splitlines()
    assert pwd.endswith("/sub/dir") and greeting == "hi there", r
    r = run(session, conversation=conv, command="cd missing-dir-x", cwd="nope")
    assert r["status"] == "ok" and r["exitCode"] != 0, r


def test_a_program_and_a_command_share_the_workspace(session):
    conv = "cmd-share-" + uuid.uuid4().hex[:6]
    token = uuid.uuid4().hex
    assert_ok(session.run(f"require('node:fs').writeFileSync('from-program.txt', '{token}'); return 1;",
                          conversation=conv))
    r = run(session, conversation=conv, command="cat from-program.txt; printf back > from-command.txt")
    assert r["stdout"] == token, r
    res = assert_ok(session.run("return require('node:fs').readFileSync('from-command.txt', 'utf8');",
                                conversation=conv))
    assert res["result"] == "back"
    # and another conversation sees none of it
    r = run(session, command="cat from-program.txt")
    assert r["exitCode"] != 0 and r["stdout"] == "", r


def test_stdin_and_streamed_output(session):
    cid = command(session, command="while read l; do echo \"got $l\"; done; echo bye >&2",
                  stdin=True, stream=True)
    session.wait_for(lambda m: m.get("id") == cid and m["type"] == "accepted", 60, "accepted")
    session.send({"type": "command_stdin", "id": cid, "data": base64.b64encode(b"one\n").decode()})
    first = session.wait_for(lambda m: m.get("id") == cid and m["type"] == "command_output",
                             60, "the first output, before stdin ends")
    assert first["stream"] == "stdout" and base64.b64decode(first["data"]) == b"got one\n", first
    session.send({"type": "command_stdin", "id": cid, "data": base64.b64encode(b"two\n").decode(),
                  "eof": True})
    r = wait_command(session, cid)
    assert r["status"] == "ok" and r["exitCode"] == 0, r
    assert r["stdout"] == "got one\ngot two\n" and r["stderr"] == "bye\n", r
    streamed = {"stdout": b"", "stderr": b""}
    for m in session.of(cid, "command_output"):
        streamed[m["stream"]] += base64.b64decode(m["data"])
    assert streamed == {"stdout": b"got one\ngot two\n", "stderr": b"bye\n"}
    # every output came before the result
    order = [m["type"] for m in session.messages if m.get("id") == cid]
    assert order[-1] == "command_result" and "command_output" not in order[order.index("command_result"):]


def test_without_stdin_true_stdin_is_closed_and_refused(session):
    r = run(session, command="cat; echo done")
    assert r["stdout"] == "done\n", r
    cid = command(session, command="sleep 30")
    session.wait_for(lambda m: m.get("id") == cid and m["type"] == "accepted", 60, "accepted")
    session.send({"type": "command_stdin", "id": cid, "data": "aGk="})
    err = session.wait_error(cid)
    assert err["inReplyTo"] == "command_stdin" and err["error"]["code"] == "INVALID_REQUEST", err
    session.stop(cid)
    assert wait_command(session, cid)["error"]["code"] == "CANCELLED"


def test_stop_cancels_and_the_deadline_times_out(session):
    cid = command(session, command="echo started; sleep 60", stream=True)
    session.wait_for(lambda m: m.get("id") == cid and m["type"] == "command_output", 60, "output")
    session.stop(cid)
    r = wait_command(session, cid)
    assert r["status"] == "error" and r["error"]["code"] == "CANCELLED", r
    assert r["exitCode"] is None and r["stdout"] == "started\n", r
    r = run(session, command="sleep 60", policy={"timeoutMs": 500})
    assert r["status"] == "error" and r["error"]["code"] == "TIMEOUT", r
    assert "timeoutMs" in r["error"]["message"]


def gone_within(marker, seconds=20):
    deadline = time.monotonic() + seconds
    while processes_with_marker(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_daemons_floods_and_sigterm_ignorers_leave_nothing_running(session):
    # a daemon that ignores SIGTERM and left the command's process group
    n = f"{7000 + uuid.uuid4().int % 999}.{uuid.uuid4().int % 9973}"
    r = run(session, command=f"(trap '' TERM HUP; setsid sleep {n} </dev/null >/dev/null 2>&1 &); echo started")
    assert r["status"] == "ok" and r["exitCode"] == 0 and r["stdout"] == "started\n", r
    assert gone_within(f"sleep {n}"), "the daemon outlived its command"
    # one that keeps the output open: the command still ends with its shell
    n2 = f"{8000 + uuid.uuid4().int % 999}.{uuid.uuid4().int % 9973}"
    r = run(session, command=f"sleep {n2} & echo bg")
    assert r["status"] == "ok" and r["exitCode"] == 0 and r["stdout"] == "bg\n", r
    assert gone_within(f"sleep {n2}"), "the background child outlived its command"
    # a flood: bounded output, the deadline ends it
    r = run(session, command="trap '' TERM; yes flood", policy={"timeoutMs": 1500})
    assert r["status"] == "error" and r["error"]["code"] == "TIMEOUT", r
    assert r["stdoutTruncated"] is True and len(r["stdout"]) <= 3 * 32768, len(r["stdout"])
    assert r["stdout"].endswith("flood\n") or r["stdout"].endswith("flood") or "flood" in r["stdout"]


def test_invalid_requests_are_refused(session):
    assert "exactly one of command and argv" in refused(session, command="true", argv=["true"])
    assert "exactly one of command and argv" in refused(session)
    assert "relative" in refused(session, command="true", cwd="/etc")
    assert ".." in refused(session, command="true", cwd="a/../../b")
    assert "argv" in refused(session, argv=[])
    assert "argv[1]" in refused(session, argv=["echo", 3])
    assert "env" in refused(session, command="true", env={"A=B": "x"})
    assert "CODEPOD_TAG" in refused(session, command="true", env={"CODEPOD_TAG": "x"})
    assert "stdin" in refused(session, command="true", stdin="yes")
    assert "timeoutMs" in refused(session, command="true", policy={"timeoutMs": -1})


def test_command_ids_share_the_execution_namespace(session):
    eid = session.execute("await new Promise(r => setTimeout(r, 3000)); return 1;")
    session.wait_for(lambda m: m.get("id") == eid and m["type"] == "accepted", 60, "accepted")
    session.send({"type": "command", "id": eid, "conversation": "x", "command": "true"})
    err = session.wait_error(eid)
    assert err["inReplyTo"] == "command" and "already running" in err["error"]["message"], err
    assert_ok(session.wait_result(eid))
