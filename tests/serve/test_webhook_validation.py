"""POST /v1/executions checks each tool input against its inputSchema before
the webhook broker is asked, in the TypeScript SDK's (Ajv's) words."""

import json

import pytest

from test_webhook import Broker, echo, post

SCHEMA = {
    "type": "object",
    "properties": {
        "q": {"type": "string", "minLength": 1, "maxLength": 5, "pattern": "^[a-z]+\\d*$"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 50},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True},
        "page": {"$ref": "#/$defs/page"},
    },
    "required": ["q"],
    "additionalProperties": False,
    "$defs": {"page": {"type": "integer", "exclusiveMinimum": 0, "multipleOf": 2}},
}

# (input, what the program hears)
CASES = [
    ({}, "input must have required property 'q'"),
    ({"q": 1}, "input.q must be string"),
    ({"q": ""}, "input.q must NOT have fewer than 1 characters"),
    ({"q": "abcdef"}, "input.q must NOT have more than 5 characters"),
    ({"q": "ab-1"}, 'input.q must match pattern "^[a-z]+\\d*$"'),
    ({"q": "a", "limit": 0}, "input.limit must be >= 1"),
    ({"q": "a", "limit": 51}, "input.limit must be <= 50"),
    ({"q": "a", "limit": 2.5}, "input.limit must be integer"),
    ({"q": "a", "tags": ["c"]}, "input.tags.0 must be equal to one of the allowed values"),
    ({"q": "a", "tags": ["a", "a"]},
     "input.tags must NOT have duplicate items (items ## 0 and 1 are identical)"),
    ({"q": "a", "page": 0}, "input.page must be > 0"),
    ({"q": "a", "page": 3}, "input.page must be multiple of 2"),
    ({"q": "a", "extra": 1}, "input must NOT have additional properties"),
]


@pytest.fixture
def broker():
    made = []
    yield lambda behave: made.append(Broker(behave)) or made[-1]
    for b in made:
        b.close()


def test_invalid_inputs_are_refused_before_the_broker_sees_them(serve, broker):
    s = serve()
    b = broker(echo)
    inputs = [i for i, _ in CASES] + [{"q": "ab12", "limit": 50, "tags": ["a", "b"], "page": 2}]
    js = ("const out = [];\n"
          f"for (const input of {json.dumps(inputs)}) {{\n"
          "  try { out.push((await tools.search(input)).got); }\n"
          "  catch (e) { out.push(e.message); }\n"
          "}\nreturn out;")
    status, out = post(s, {"id": "v1", "conversation": "c-v1", "js": js,
                           "tools": [{"name": "search", "inputSchema": SCHEMA}],
                           "broker": {"url": b.url}})
    assert status == 200 and out["status"] == "succeeded", out
    assert out["result"][:-1] == [f"Invalid input for tool search: {m}" for _, m in CASES]
    assert out["result"][-1] == inputs[-1]
    # Only the valid call was POSTed; the refused ones are tool errors, not broker failures.
    assert [c["input"] for c, _ in b.calls] == [inputs[-1]]
    assert [c["status"] for c in out["calls"]] == ["error"] * len(CASES) + ["ok"]
    assert not any(c.get("broker") for c in out["calls"])


def test_schemas_it_cannot_judge_are_left_to_the_broker(serve, broker):
    s = serve()
    b = broker(echo)
    schema = {"type": "object", "properties": {
        "w": {"type": "string", "pattern": "^(?=a)"},     # lookahead: not POSIX
        "r": {"$ref": "https://example.com/remote.json"},
        "f": {"type": "string", "format": "email"}}}
    js = "return (await tools.t({ w: 'b', r: 1, f: 'not an email' })).got;"
    status, out = post(s, {"id": "v2", "conversation": "c-v2", "js": js,
                           "tools": [{"name": "t", "inputSchema": schema}],
                           "broker": {"url": b.url}})
    assert status == 200 and out["status"] == "succeeded", out
    assert out["result"] == {"w": "b", "r": 1, "f": "not an email"}
    assert len(b.calls) == 1
