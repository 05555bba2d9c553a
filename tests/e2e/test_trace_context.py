"""W3C trace context: an execute's traceparent reaches every tool_call as the
context of that call's own span, and a malformed one is refused."""

import re

import pytest

from harness import assert_ok

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
TP = f"00-{TRACE}-{PARENT}-01"
TP_RE = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-(0[01])$")

THREE_CALLS = ("const a = await tools.echo({ n: 1 });\n"
               "const [b, c] = await Promise.all([tools.echo({ n: 2 }), tools.echo({ n: 3 })]);\n"
               "return a.n + b.n + c.n;")


def test_each_call_carries_its_own_span_under_the_callers_trace(session):
    session.serve({"echo": lambda x: x})
    eid = session.execute(THREE_CALLS, traceparent=TP, tracestate="congo=t61rcWkgMzE,rojo=00f067")
    res = session.wait_result(eid)
    assert_ok(res)
    assert res["result"] == 6
    calls = session.of(eid, "tool_call")
    assert len(calls) == 3
    spans = set()
    for c in calls:
        m = TP_RE.match(c["traceparent"])
        assert m, c["traceparent"]
        assert m.group(1) == TRACE                  # the caller's trace
        assert m.group(2) not in (PARENT, "0" * 16)  # a span of codepod's, not the caller's
        assert m.group(3) == "01"                   # sampled, as the caller said
        assert c["tracestate"] == "congo=t61rcWkgMzE,rojo=00f067"
        spans.add(m.group(2))
    assert len(spans) == 3, "one span per call"


def test_not_sampled_stays_not_sampled(session):
    session.serve({"echo": lambda x: x})
    eid = session.execute("return (await tools.echo({ n: 1 })).n;",
                          traceparent=f"00-{TRACE}-{PARENT}-00")
    assert_ok(session.wait_result(eid))
    (c,) = session.of(eid, "tool_call")
    assert c["traceparent"].endswith("-00") and "tracestate" not in c


def test_untraced_calls_carry_no_trace_fields(session):
    session.serve({"echo": lambda x: x})
    eid = session.execute("return (await tools.echo({ n: 1 })).n;")
    assert_ok(session.wait_result(eid))
    (c,) = session.of(eid, "tool_call")
    assert "traceparent" not in c and "tracestate" not in c


def test_a_later_version_is_read_by_its_four_fields(session):
    session.serve({"echo": lambda x: x})
    eid = session.execute("return (await tools.echo({ n: 1 })).n;",
                          traceparent=f"01-{TRACE}-{PARENT}-01-what-comes-next")
    assert_ok(session.wait_result(eid))
    (c,) = session.of(eid, "tool_call")
    assert TP_RE.match(c["traceparent"]).group(1) == TRACE


BAD = [
    (f"00-{TRACE}-{PARENT}-1", "traceparent must be 55 characters"),
    (f"00-{TRACE.upper()}-{PARENT}-01", "traceparent: bad trace id"),
    (f"00-{'0' * 32}-{PARENT}-01", "traceparent: bad trace id"),
    (f"00-{TRACE}-{'0' * 16}-01", "traceparent: bad parent id"),
    (f"ff-{TRACE}-{PARENT}-01", "traceparent: bad version"),
    (f"00-{TRACE}-{PARENT}-01-x", "traceparent must be 55 characters"),
    (f"00-{TRACE}-{PARENT}-0g", "traceparent: bad flags"),
    (f"00_{TRACE}-{PARENT}-01", "traceparent: bad version"),
    (f"01-{TRACE}-{PARENT}-01x", "traceparent: bad field after the flags"),
]


@pytest.mark.parametrize("tp,why", BAD)
def test_a_malformed_traceparent_is_refused_without_echoing_it(session, tp, why):
    eid = session.execute("return 1;", traceparent=tp)
    err = session.wait_error(eid)
    assert err["error"]["code"] == "INVALID_REQUEST"
    assert why in err["error"]["message"]
    assert tp not in err["error"]["message"]
    assert not session.of(eid, "result")


@pytest.mark.parametrize("ts", ["a=1," * 33, "x" * 300 + "=1,b=" + "y" * 300, "Upper=1",
                                "a=b=c", "a=", "=b", "a=1 ,b=\x01", "@a=1"])
def test_a_malformed_tracestate_is_refused(session, ts):
    eid = session.execute("return 1;", traceparent=TP, tracestate=ts)
    err = session.wait_error(eid)
    assert err["error"]["code"] == "INVALID_REQUEST"
    assert "tracestate" in err["error"]["message"]


def test_a_tracestate_alone_or_a_mistyped_field_is_refused(session):
    for extra in ({"tracestate": "a=1"}, {"traceparent": 7}, {"traceparent": TP, "tracestate": []}):
        eid = session.execute("return 1;", **extra)
        assert session.wait_error(eid)["error"]["code"] == "INVALID_REQUEST"


def test_a_valid_tracestate_with_spaces_and_tenants_is_kept(session):
    session.serve({"echo": lambda x: x})
    ts = "  t1@sys=a b ,, k_-*/=v , "
    eid = session.execute("return (await tools.echo({ n: 1 })).n;", traceparent=TP, tracestate=ts)
    assert_ok(session.wait_result(eid))
    (c,) = session.of(eid, "tool_call")
    assert c["tracestate"] == ts


def test_refused_calls_still_finish(session):
    """An undeclared tool is denied before the host sees it: the execution is unaffected."""
    eid = session.execute("try { await tools.nope(1); } catch (e) { return 'denied'; }",
                          traceparent=TP, tools=[])
    res = session.wait_result(eid)
    assert_ok(res)
    assert not session.of(eid, "tool_call")
