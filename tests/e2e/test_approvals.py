"""Approvals inside programs (broker/SESSION.md, "Approvals"): a call of a
tool declared "approval": "required", or one the backend answers with
`suspend`, ends the execution `suspended` with its pending calls and a signed
continuation; an `execute` with `resume` runs the program again from the
start, answers the calls of the runs before from the continuation's log,
sends the approved call to the backend with an idempotency key, throws the
denied one's message, and ends REPLAY_DIVERGED when the program makes
another call than the log says. Every side-effecting tool here counts its
calls: no path runs one twice. On both backends."""

import base64
import json
import threading
import time

import pytest

from harness import assert_failed, assert_ok, close_and_check, session_class, tool_decl

KEY_A = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
KEY_B = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"

INVOICES = [{"id": "A", "amount": 120}, {"id": "B", "amount": 80}]

PAY_ONE = """
const inv = await tools.list_invoices({});
console.log('read', inv.length);
const r = await tools.pay({ id: inv[0].id, amount: inv[0].amount });
console.log('paid', r.ref);
return { paid: r.ref, n: inv.length };
"""


class Counting:
    """The test tools, each counting its calls; pay also keeps the
    idempotency keys its calls carried (from the tool_call messages)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {"list_invoices": 0, "pay": 0, "audit": 0}

    def bump(self, name):
        with self.lock:
            self.counts[name] += 1
            return self.counts[name]

    def handlers(self):
        return {
            "list_invoices": lambda i: (self.bump("list_invoices"), INVOICES)[1],
            "pay": lambda i: {"ref": f"pay-{i['id']}-{self.bump('pay')}"},
            "audit": lambda i: (self.bump("audit"), "ok")[1],
        }


def gated(name):
    return dict(tool_decl(name), approval="required")


TOOLS = [tool_decl("list_invoices"), gated("pay"), tool_decl("audit")]


def write_keys(path, *lines):
    path.write_text("".join(line + "\n" for line in lines))
    return str(path)


@pytest.fixture
def keyfile(tmp_path):
    return write_keys(tmp_path / "keys", f"k1:{KEY_A}")


def open_session(state, keyfile, *extra):
    return session_class()(state, args=["--continuation-key-file", keyfile, *extra])


def same_conversations(first, *others):
    """On the fake cluster a session prefixes its conversations: another
    replica of the same backend must use the same ones."""
    for o in others:
        if hasattr(first, "conv_prefix"):
            o.conv_prefix = first.conv_prefix


@pytest.fixture
def approvals(tmp_path, keyfile):
    s = open_session(tmp_path / "state", keyfile)
    tools = Counting()
    s.serve(tools.handlers())
    yield s, tools
    close_and_check(s)


def suspend(s, js, conv, tools=TOOLS, **kw):
    res = s.run(js, tools=tools, conversation=conv, **kw)
    assert res["status"] == "suspended", json.dumps(res)[:2000]
    assert "error" not in res and "result" not in res
    assert isinstance(res["continuation"], str) and res["continuation"]
    return res


def resume(s, js, conv, cont, decisions, tools=TOOLS, **kw):
    return s.execute(js, tools=tools, conversation=conv,
                     resume={"continuation": cont, "decisions": decisions}, **kw)


def refused(s, eid, what):
    m = s.wait_for(lambda m: m.get("id") == eid and m["type"] in ("error", "result"),
                   60, f"the refusal of {eid}")
    assert m["type"] == "error" and m["inReplyTo"] == "execute", m
    assert m["error"]["code"] == "INVALID_REQUEST", m
    assert what in m["error"]["message"], m
    assert not s.of(eid, "tool_call") and not s.of(eid, "accepted")
    return m


def test_approve(approvals):
    s, t = approvals
    first = suspend(s, PAY_ONE, "c-approve")
    assert first["pending"] == [{"call": "2", "tool": "pay",
                                 "input": {"id": "A", "amount": 120}}]
    assert [c["status"] for c in first["calls"]] == ["ok", "pending"]
    assert "read 2" in first["logs"]
    assert t.counts == {"list_invoices": 1, "pay": 0, "audit": 0}
    eid = resume(s, PAY_ONE, "c-approve", first["continuation"],
                 [{"call": "2", "approved": True}])
    res = assert_ok(s.wait_result(eid))
    assert res["result"] == {"paid": "pay-A-1", "n": 2}
    assert "paid pay-A-1" in res["logs"] and "read 2" in res["logs"]
    # the read came from the log; the approved call reached the backend once
    calls = s.of(eid, "tool_call")
    assert [c["tool"] for c in calls] == ["pay"]
    assert calls[0]["call"] == "2"
    assert calls[0]["idempotencyKey"].endswith(":2")
    assert t.counts == {"list_invoices": 1, "pay": 1, "audit": 0}
    # the outcome's calls and usage are those of both runs
    assert [(c["tool"], c["status"]) for c in res["calls"]] == [("list_invoices", "ok"),
                                                                ("pay", "ok")]
    assert res["usage"]["toolCalls"] == 2
    assert res["usage"]["runs"] == 2


def test_deny(approvals):
    s, t = approvals
    js = """
    const inv = await tools.list_invoices({});
    try { await tools.pay({ id: inv[1].id }); return 'paid'; }
    catch (e) { return 'not paid: ' + e.message; }
    """
    first = suspend(s, js, "c-deny")
    eid = resume(s, js, "c-deny", first["continuation"],
                 [{"call": "2", "approved": False, "message": "Over the monthly budget."}])
    res = assert_ok(s.wait_result(eid))
    assert res["result"] == "not paid: Over the monthly budget."
    assert not s.of(eid, "tool_call")
    assert res["calls"][1]["status"] == "denied"
    assert t.counts == {"list_invoices": 1, "pay": 0, "audit": 0}
    long = "ü" * 2048  # the longest refusal: 4096 bytes
    first = suspend(s, js, "c-deny-long")
    eid = resume(s, js, "c-deny-long", first["continuation"],
                 [{"call": "2", "approved": False, "message": long}])
    assert assert_ok(s.wait_result(eid))["result"] == "not paid: " + long
    # without a message the Error still says what happened
    first = suspend(s, js, "c-deny2")
    eid = resume(s, js, "c-deny2", first["continuation"], [{"call": "2", "approved": False}])
    assert assert_ok(s.wait_result(eid))["result"] == "not paid: The call to pay was not approved."
    assert t.counts["pay"] == 0


def test_approve_then_second_gated_call(approvals):
    s, t = approvals
    js = """
    const inv = await tools.list_invoices({});
    const out = [];
    for (const i of inv) out.push((await tools.pay({ id: i.id })).ref);
    await tools.audit({ out });
    return out;
    """
    first = suspend(s, js, "c-two")
    assert [p["input"] for p in first["pending"]] == [{"id": "A"}]
    eid = resume(s, js, "c-two", first["continuation"], [{"call": "2", "approved": True}])
    second = s.wait_result(eid)
    assert second["status"] == "suspended", second
    assert second["pending"] == [{"call": "3", "tool": "pay", "input": {"id": "B"}}]
    assert second["continuation"] != first["continuation"]
    assert t.counts == {"list_invoices": 1, "pay": 1, "audit": 0}
    eid = resume(s, js, "c-two", second["continuation"], [{"call": "3", "approved": True}])
    res = assert_ok(s.wait_result(eid))
    assert res["result"] == ["pay-A-1", "pay-B-2"]
    assert [c["tool"] for c in s.of(eid, "tool_call")] == ["pay", "audit"]
    assert t.counts == {"list_invoices": 1, "pay": 2, "audit": 1}
    assert res["usage"]["toolCalls"] == 4 and res["usage"]["runs"] == 3


def test_several_pending_from_promise_all(approvals):
    s, t = approvals
    js = """
    const r = await Promise.allSettled([
      tools.pay({ id: 'A' }), tools.list_invoices({}), tools.pay({ id: 'B' })]);
    return r.map(x => x.status === 'fulfilled' ? (x.value.ref || x.value.length) : x.reason.message);
    """
    first = suspend(s, js, "c-all")
    assert first["pending"] == [{"call": "1", "tool": "pay", "input": {"id": "A"}},
                                {"call": "3", "tool": "pay", "input": {"id": "B"}}]
    assert [c["status"] for c in first["calls"]] == ["pending", "ok", "pending"]
    eid = resume(s, js, "c-all", first["continuation"],
                 [{"call": "3", "approved": False, "message": "B is disputed."},
                  {"call": "1", "approved": True}])
    res = assert_ok(s.wait_result(eid))
    assert res["result"] == ["pay-A-1", 2, "B is disputed."]
    assert t.counts == {"list_invoices": 1, "pay": 1, "audit": 0}


def test_gated_call_whose_result_is_ignored(approvals):
    s, t = approvals
    js = "await tools.pay({ id: 'A' }); return 'sent';"
    first = suspend(s, js, "c-ignored")
    eid = resume(s, js, "c-ignored", first["continuation"], [{"call": "1", "approved": True}])
    assert assert_ok(s.wait_result(eid))["result"] == "sent"
    assert t.counts["pay"] == 1


def test_backend_decides_with_suspend(approvals):
    """The backend holds any call with `suspend`; on resume the approved
    call comes again, with its idempotency key, and is answered as usual."""
    s, t = approvals
    js = "const a = await tools.audit({ n: 1 }); const b = await tools.audit({ n: 2 }); return [a, b];"
    tools = [tool_decl("audit")]
    hold = object()
    held = []

    def audit(i):
        if i["n"] == 2 and not held:
            held.append(i)
            return hold
        return t.handlers()["audit"](i)
    s.handlers["audit"] = audit
    plain_answer = s.answer

    def answer(call_msg, output):
        if output is hold and s._still_open(call_msg):
            s.send({"type": "suspend", "id": call_msg["id"], "call": call_msg["call"]})
        elif output is not hold:
            plain_answer(call_msg, output)
    s.answer = answer
    first = suspend(s, js, "c-backend", tools=tools)
    assert first["pending"] == [{"call": "2", "tool": "audit", "input": {"n": 2}}]
    assert t.counts["audit"] == 1
    eid = resume(s, js, "c-backend", first["continuation"], [{"call": "2", "approved": True}],
                 tools=tools)
    res = assert_ok(s.wait_result(eid))
    assert res["result"] == ["ok", "ok"]
    calls = s.of(eid, "tool_call")
    assert len(calls) == 1 and calls[0]["input"] == {"n": 2} and "idempotencyKey" in calls[0]
    assert t.counts["audit"] == 2


def test_divergence_runs_nothing_new(approvals):
    """A program that takes another path on the re-run (here: on a file it
    wrote the first time) ends REPLAY_DIVERGED at the first call that
    differs, naming its position, and that call never reaches a tool."""
    s, t = approvals
    js = """
    const fs = require('node:fs');
    const again = fs.existsSync('ran-once');
    fs.writeFileSync('ran-once', '1');
    await tools.list_invoices({});
    await tools.audit({ again });
    await tools.pay({ id: 'A' });
    return 'done';
    """
    first = suspend(s, js, "c-diverge")
    assert t.counts == {"list_invoices": 1, "pay": 0, "audit": 1}
    eid = resume(s, js, "c-diverge", first["continuation"], [{"call": "3", "approved": True}])
    err = assert_failed(s.wait_result(eid), "REPLAY_DIVERGED")
    assert "tool call 2 " in err["message"] and "audit" in err["message"]
    assert not s.of(eid, "tool_call")
    assert t.counts == {"list_invoices": 1, "pay": 0, "audit": 1}
    # returning before the calls the log holds diverges too: the approved call
    # would otherwise be dropped without a word
    early = """
    const fs = require('node:fs');
    if (fs.existsSync('early-once')) return 'early';
    fs.writeFileSync('early-once', '1');
    await tools.pay({ id: 'B' });
    """
    first = suspend(s, early, "c-early")
    eid = resume(s, early, "c-early", first["continuation"], [{"call": "1", "approved": True}])
    err = assert_failed(s.wait_result(eid), "REPLAY_DIVERGED")
    assert "before its tool call 1" in err["message"]
    assert t.counts == {"list_invoices": 1, "pay": 0, "audit": 1}


def test_resume_that_times_out_runs_each_tool_once(approvals):
    s, t = approvals
    js = """
    await tools.list_invoices({});
    await tools.pay({ id: 'A' });
    await new Promise(r => setTimeout(r, 60000));
    """
    first = suspend(s, js, "c-timeout", policy={"timeoutMs": 3000})
    eid = resume(s, js, "c-timeout", first["continuation"], [{"call": "2", "approved": True}],
                 policy={"timeoutMs": 3000})
    assert_failed(s.wait_result(eid), "TIMEOUT")
    assert t.counts == {"list_invoices": 1, "pay": 1, "audit": 0}
    # spent: a second try is refused and runs nothing
    eid = resume(s, js, "c-timeout", first["continuation"], [{"call": "2", "approved": True}],
                 policy={"timeoutMs": 3000})
    refused(s, eid, "already resumed")
    assert t.counts == {"list_invoices": 1, "pay": 1, "audit": 0}


def test_refusals(tmp_path, approvals):
    s, t = approvals
    first = suspend(s, PAY_ONE, "c-refuse")
    cont = first["continuation"]
    ok = [{"call": "2", "approved": True}]
    # one byte edited, in each of its three parts
    kid, payload, mac = cont.split(".")
    for edited in (f"k2.{payload}.{mac}", f"{kid}.{payload[:-5]}x{payload[-4:]}.{mac}",
                   f"{kid}.{payload}.{mac[:10]}{'A' if mac[10] != 'A' else 'B'}{mac[11:]}"):
        refused(s, resume(s, PAY_ONE, "c-refuse", edited, ok), "resume.continuation")
    # the payload itself re-encoded with another conversation: the MAC fails
    body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    body["conv"] = "elsewhere"
    forged = base64.urlsafe_b64encode(json.dumps(body).encode()).decode().rstrip("=")
    refused(s, resume(s, PAY_ONE, "c-refuse", f"{kid}.{forged}.{mac}", ok), "signature")
    refused(s, resume(s, PAY_ONE, "c-refuse", cont[:-7], ok), "resume.continuation")
    refused(s, resume(s, PAY_ONE, "c-refuse", cont[: len(cont) // 2], ok), "resume.continuation")
    refused(s, resume(s, PAY_ONE, "another-conv", cont, ok), "another conversation")
    refused(s, resume(s, PAY_ONE + "\n// edited", "c-refuse", cont, ok), "digest")
    refused(s, resume(s, PAY_ONE, "c-refuse", cont, ok, policy={"timeoutMs": 12345}), "digest")
    refused(s, resume(s, PAY_ONE, "c-refuse", cont, []), "no decision for pending call 2")
    refused(s, resume(s, PAY_ONE, "c-refuse", cont, [{"call": "1", "approved": True}]),
            "not pending")
    refused(s, resume(s, PAY_ONE, "c-refuse", cont, [{"call": "2", "approved": "yes"}]),
            "decisions[0]")
    eid = s.execute(PAY_ONE, tools=TOOLS, conversation="c-refuse", resume={"continuation": 7})
    refused(s, eid, "resume must be")
    big = "x" * (4 * 1024 * 1024 + 1)
    refused(s, resume(s, PAY_ONE, "c-refuse", big, ok), "over the limit")
    assert t.counts == {"list_invoices": 1, "pay": 0, "audit": 0}
    # none of these spent it: it resumes once, then never again
    eid = resume(s, PAY_ONE, "c-refuse", cont, ok)
    assert_ok(s.wait_result(eid))
    refused(s, resume(s, PAY_ONE, "c-refuse", cont, ok), "already resumed")
    assert t.counts == {"list_invoices": 1, "pay": 1, "audit": 0}


def test_other_key_and_expiry(tmp_path, keyfile):
    other = write_keys(tmp_path / "other", f"k9:{KEY_B}")
    rotated = write_keys(tmp_path / "rotated", f"k2:{KEY_B}", f"k1:{KEY_A}")
    t = Counting()
    a = open_session(tmp_path / "a", keyfile, "--continuation-ttl", "2")
    b = open_session(tmp_path / "b", other)
    c = open_session(tmp_path / "c", rotated)
    same_conversations(a, b, c)
    try:
        for x in (a, b, c):
            x.serve(t.handlers())
        first = suspend(a, PAY_ONE, "c-keys")
        ok = [{"call": "2", "approved": True}]
        refused(b, resume(b, PAY_ONE, "c-keys", first["continuation"], ok), "key")
        # a second key first: it signs, the old one still verifies
        eid = resume(c, PAY_ONE, "c-keys", first["continuation"], ok)
        assert_ok(c.wait_result(eid))
        assert t.counts == {"list_invoices": 1, "pay": 1, "audit": 0}
        second = suspend(a, PAY_ONE, "c-keys2")
        time.sleep(3.1)  # past its 2 s TTL
        refused(a, resume(a, PAY_ONE, "c-keys2", second["continuation"], ok), "expired")
        assert t.counts == {"list_invoices": 2, "pay": 1, "audit": 0}
    finally:
        for x in (a, b, c):
            close_and_check(x)


def test_resume_on_another_replica_and_after_restart(tmp_path, keyfile):
    t = Counting()
    a = open_session(tmp_path / "a", keyfile)
    b = open_session(tmp_path / "b", keyfile)
    same_conversations(a, b)
    ok = [{"call": "2", "approved": True}]
    try:
        a.serve(t.handlers())
        b.serve(t.handlers())
        first = suspend(a, PAY_ONE, "c-replica")
        second = suspend(a, PAY_ONE, "c-restart")
        third = suspend(a, PAY_ONE, "c-restart2")
        eid = resume(b, PAY_ONE, "c-replica", first["continuation"], ok)
        assert assert_ok(b.wait_result(eid))["result"]["paid"].startswith("pay-A-")
        assert t.counts == {"list_invoices": 3, "pay": 1, "audit": 0}
        eid = resume(a, PAY_ONE, "c-restart2", third["continuation"], ok)
        assert_ok(a.wait_result(eid))
    finally:
        close_and_check(a)
    a2 = open_session(tmp_path / "a", keyfile)
    same_conversations(a, a2)
    try:
        a2.serve(t.handlers())
        eid = resume(a2, PAY_ONE, "c-restart", second["continuation"], ok)
        assert_ok(a2.wait_result(eid))
        # spent before the restart: still refused after it
        refused(a2, resume(a2, PAY_ONE, "c-restart2", third["continuation"], ok),
                "already resumed")
        assert t.counts == {"list_invoices": 3, "pay": 3, "audit": 0}
    finally:
        close_and_check(a2)
        b.close()


HOLD_JS = """
const inv = await tools.list_invoices({});
try { const r = await tools.pay({ id: inv[0].id }); return 'paid ' + r.ref; }
catch (e) { return 'not paid: ' + e.message; }
"""


def held(wait_ms):
    return [tool_decl("list_invoices"),
            dict(tool_decl("pay"), approval="hold", approvalWaitMs=wait_ms)]


def test_hold_waits_with_the_deadline_paused(approvals):
    """"approval": "hold": the call goes out as approval_request and the
    program waits, here longer than its whole timeoutMs; approved, the same
    call then comes as a tool_call."""
    s, t = approvals
    eid = s.execute(HOLD_JS, tools=held(60000), conversation="c-hold", policy={"timeoutMs": 1500})
    req = s.wait_for(lambda m: m["type"] == "approval_request" and m["id"] == eid, 60,
                     "approval_request")
    assert (req["call"], req["tool"], req["input"]) == ("2", "pay", {"id": "A"})
    assert not s.of(eid, "tool_call") or all(c["tool"] != "pay" for c in s.of(eid, "tool_call"))
    time.sleep(2.5)  # past the 1.5 s deadline: paused while the call is held
    assert not s.of(eid, "result")
    s.send({"type": "approval", "id": eid, "call": "2", "approved": True})
    res = assert_ok(s.wait_result(eid))
    assert res["result"] == "paid pay-A-1"
    assert [c["tool"] for c in s.of(eid, "tool_call")] == ["list_invoices", "pay"]
    assert t.counts == {"list_invoices": 1, "pay": 1, "audit": 0}


def test_hold_refused_and_unanswered(approvals):
    s, t = approvals
    eid = s.execute(HOLD_JS, tools=held(60000), conversation="c-hold-no")
    s.wait_for(lambda m: m["type"] == "approval_request" and m["id"] == eid, 60, "approval_request")
    s.send({"type": "approval", "id": eid, "call": "2", "approved": False,
            "message": "Not this month."})
    assert assert_ok(s.wait_result(eid))["result"] == "not paid: Not this month."
    # a long refusal in any script reaches the program whole
    long = "é" * 2000  # 4000 bytes of UTF-8
    eid2 = s.execute(HOLD_JS, tools=held(60000), conversation="c-hold-long")
    s.wait_for(lambda m: m["type"] == "approval_request" and m["id"] == eid2, 60, "approval_request")
    s.send({"type": "approval", "id": eid2, "call": "2", "approved": False, "message": long})
    assert assert_ok(s.wait_result(eid2))["result"] == "not paid: " + long
    # an answer to a call that is not held is refused
    s.send({"type": "approval", "id": eid, "call": "2", "approved": True})
    err = s.wait_error(eid)
    assert err["inReplyTo"] == "approval" and err["error"]["code"] == "INVALID_REQUEST"
    # nobody answers: refused after approvalWaitMs, the request withdrawn
    eid = s.execute(HOLD_JS, tools=held(300), conversation="c-hold-late")
    res = assert_ok(s.wait_result(eid))
    assert res["result"].startswith("not paid: No approval for the call to pay came within")
    assert s.of(eid, "cancel_call")[0]["call"] == "2"
    assert t.counts == {"list_invoices": 3, "pay": 0, "audit": 0}
    refusal = s.execute(HOLD_JS, tools=[dict(tool_decl("pay"), approval="later")],
                        conversation="c-bad")
    refused(s, refusal, "approval must be")
