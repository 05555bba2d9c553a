"""The outcome's typed dicts (codepod.outcome) name exactly the keys of
broker/schema/outcome.schema.json, required where the schema requires
them, so billing code that follows ``outcome["usage"]["cpuMs"]`` through a
type checker reads what codepod really sends; and a real outcome, with the
figures a tool call and a resume add, has only keys the types declare."""

import json
import os
from typing import get_type_hints

import pytest

from codepod import Outcome, Tool, Usage
from codepod.outcome import CallRecord, OutcomeError, PendingCall, ProgramError
from conftest import SCHEMA_DIR, arun

SCHEMA = json.loads((SCHEMA_DIR / "outcome.schema.json").read_text())
# The SDK makes outcomes of its own without usage (codepod unreachable, the
# link lost before the result came): the one key the types relax.
RELAXED = {("Outcome", "usage")}


def pairs():
    props = SCHEMA["properties"]
    err = props["error"]
    return [("Outcome", Outcome, SCHEMA), ("Usage", Usage, props["usage"]),
            ("OutcomeError", OutcomeError, err),
            ("ProgramError", ProgramError, err["properties"]["programError"]),
            ("CallRecord", CallRecord, props["calls"]["items"]),
            ("PendingCall", PendingCall, props["pending"]["items"])]


@pytest.mark.parametrize("name,td,schema", pairs(), ids=[p[0] for p in pairs()])
def test_each_type_has_the_schemas_keys(name, td, schema):
    keys = set(get_type_hints(td))
    assert keys == set(schema["properties"]), (
        f"{name}: missing {sorted(set(schema['properties']) - keys)}, "
        f"extra {sorted(keys - set(schema['properties']))}")
    required = {k for k in td.__required_keys__ if (name, k) not in RELAXED}
    schema_required = {k for k in schema.get("required", []) if (name, k) not in RELAXED}
    assert required == schema_required, f"{name}: required {sorted(required)}, schema {sorted(schema_required)}"


def declared(td):
    return set(get_type_hints(td))


def test_a_real_outcome_has_only_declared_keys(fx):
    conv = f"sdk-py-types-{os.getpid()}"
    gated = Tool(fn=lambda _: "sent", needs_approval=True)
    tools = {"ping": Tool(fn=lambda _: "pong"), "send": gated}
    js = "const a = await tools.ping({}); const b = await tools.send({}); console.log(a); return b"

    async def go():
        cp = await fx.open()
        try:
            first = await cp.run(conversation=conv, js=js, tools=tools)
            assert first["status"] == "suspended", first
            done = await cp.resume(first["continuation"], [{"call": p["call"], "approved": True}
                                                           for p in first["pending"]],
                                   conversation=conv, js=js, tools=tools)
            failed = await cp.run(conversation=conv, js="throw new TypeError('x')")
            return first, done, failed
        finally:
            await cp.close()

    first, done, failed = arun(go())
    assert done["status"] == "succeeded" and done["result"] == "sent", done
    assert done["usage"]["runs"] == 2 and done["usage"]["toolCalls"] == 2, done["usage"]
    assert failed["error"]["programError"]["name"] == "TypeError", failed
    for o in (first, done, failed):
        assert set(o) <= declared(Outcome), sorted(set(o) - declared(Outcome))
        assert Outcome.__required_keys__ - {"usage"} <= set(o)
        assert set(o["usage"]) <= declared(Usage), sorted(set(o["usage"]) - declared(Usage))
        assert Usage.__required_keys__ <= set(o["usage"])
        for c in o["calls"]:
            assert set(c) <= declared(CallRecord) and CallRecord.__required_keys__ <= set(c), c
    assert set(failed["error"]) <= declared(OutcomeError)
    for p in first["pending"]:
        assert set(p) == declared(PendingCall), p
