"""docs/contract.md §5: many executions multiplexed on one session, answered in any order."""

import random

from harness import assert_ok


def test_fifty_executions_at_once_answered_out_of_order(session):
    n = 50
    ids = [session.execute(
        f"const a = await tools.double({{ n: {i} }});\n"
        f"console.log('exec {i}');\n"
        "const b = await tools.double({ n: a.n + 1 });\n"
        f"return {{ i: {i}, v: b.n }};",
        tools=["double"], conversation=f"conv-many-{i % 5}") for i in range(n)]
    rng = random.Random(1234)
    for round_ in range(2):
        calls = [session.wait_call(eid, "double", timeout=120) for eid in ids]
        rng.shuffle(calls)
        for c in calls:
            session.answer(c, {"n": c["input"]["n"] * 2})
    for i, eid in enumerate(ids):
        res = assert_ok(session.wait_result(eid, timeout=120))
        assert res["result"] == {"i": i, "v": (2 * i + 1) * 2}, (i, res)
        assert res["logs"] == f"exec {i}\n"
        assert [c["status"] for c in res["calls"]] == ["ok", "ok"]


def test_many_calls_in_one_execution_answered_with_random_delays(session):
    rng = random.Random(99)
    session.serve({"echo": lambda inp: inp}, delay=lambda m: rng.uniform(0, 0.2))
    res = assert_ok(session.run(
        "const xs = Array.from({ length: 40 }, (_, i) => i);\n"
        "const out = await Promise.all(xs.map((i) => tools.echo({ i })));\n"
        "return out.map((o) => o.i);", timeout=120))
    assert res["result"] == list(range(40))


def test_answer_for_one_execution_does_not_leak_into_another(session):
    a = session.execute("return await tools.t({});", tools=["t"])
    b = session.execute("return await tools.t({});", tools=["t"])
    ca = session.wait_call(a)
    cb = session.wait_call(b)
    session.answer(cb, "for b")
    session.answer(ca, "for a")
    assert session.wait_result(a)["result"] == "for a"
    assert session.wait_result(b)["result"] == "for b"
