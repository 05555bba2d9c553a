"""The JSON Schemas of broker/schema (the session protocol v1.1 and the HTTP
bodies of serve --listen): every message codepod sends in the tests goes
through `check_from_server`, so the reference, the server and the client
libraries (which validate against the same files) cannot drift apart."""

import json
from pathlib import Path

from jsonschema import Draft202012Validator, RefResolver

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "broker" / "schema"
INDEX = json.loads((SCHEMA_DIR / "index.json").read_text())


def _load():
    # Debian bookworm's python3-jsonschema (4.10) resolves $refs with a
    # RefResolver; the store maps every schema's $id to it.
    store, by_file = {}, {}
    for p in sorted(SCHEMA_DIR.glob("*.schema.json")):
        doc = json.loads(p.read_text())
        Draft202012Validator.check_schema(doc)
        store[doc["$id"]] = doc
        by_file[p.name] = doc
    return {name: Draft202012Validator(doc, resolver=RefResolver(doc["$id"], doc, store=store))
            for name, doc in by_file.items()}


VALIDATORS = _load()


def check(file, value):
    """Raise AssertionError naming the first violation of `file`'s schema."""
    errors = sorted(VALIDATORS[file].iter_errors(value), key=lambda e: list(e.path))
    if errors:
        e = errors[0]
        raise AssertionError(f"{file}: {e.message} at {list(e.path)} in {json.dumps(value)[:600]}")


def check_from_server(msg):
    """A session message codepod sent (WebSocket or stdio)."""
    assert isinstance(msg, dict), msg
    file = INDEX["fromServer"].get(msg.get("type"))
    assert file, f"codepod sent a message of unknown type: {json.dumps(msg)[:300]}"
    check(file, msg)


def check_to_server(msg):
    """A session message a test sends, when it means to send a valid one."""
    check(INDEX["toServer"][msg["type"]], msg)
