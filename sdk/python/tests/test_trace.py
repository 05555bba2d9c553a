"""W3C trace context through the Python client: run(traceparent=...) makes
codepod's spans children of the caller's, and each tool sees its call's own
span as ctx.traceparent."""

import re

from codepod import Tool
from conftest import arun

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


def test_each_tool_gets_its_calls_traceparent(fx):
    seen = []

    def lookup(i, ctx):
        seen.append((i["n"], ctx.traceparent, ctx.tracestate))
        return {"n": i["n"] * 2}

    tools = {"lookup": Tool(fn=lookup, description="doubles", input_schema={"type": "object"})}

    async def go():
        cp = await fx.open()
        try:
            traced = await cp.run(conversation="sdk-py-trace", tools=tools,
                                  js="const a = await tools.lookup({ n: 1 });\n"
                                     "const b = await tools.lookup({ n: 2 });\nreturn a.n + b.n;",
                                  traceparent=f"00-{TRACE}-{PARENT}-01", tracestate="k=v")
            plain = await cp.run(conversation="sdk-py-trace", tools=tools,
                                 js="return (await tools.lookup({ n: 5 })).n;")
        finally:
            await fx.aclose()
        return traced, plain
    traced, plain = arun(go())
    assert traced["status"] == "succeeded" and traced["result"] == 6
    assert plain["status"] == "succeeded" and plain["result"] == 10
    spans = set()
    for n, tp, ts in seen[:2]:
        m = re.fullmatch(r"00-([0-9a-f]{32})-([0-9a-f]{16})-01", tp or "")
        assert m and m.group(1) == TRACE and m.group(2) != PARENT, tp
        assert ts == "k=v"
        spans.add(m.group(2))
    assert len(spans) == 2
    assert seen[2] == (5, None, None)      # untraced: nothing to nest under
