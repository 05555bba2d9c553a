"""Discovery (broker/SESSION.md, "Discovery"): `{"type":"hello"}` on a
session answers the protocol version, codepod's release and the features
this server has, on both transports (stdio, and WebSocket when
CODEPOD_TRANSPORT=ws). The harness checks the answers against
broker/schema (hello_reply.schema.json)."""

import os
import re
import subprocess

from harness import CODEPOD_BIN, REPO, assert_ok

SESSION_MD = (REPO / "broker" / "SESSION.md").read_text()
WS = os.environ.get("CODEPOD_TRANSPORT") == "ws"


def documented_features():
    """The feature names of SESSION.md's Discovery table."""
    section = SESSION_MD.split("\n## Discovery")[1].split("\n## ")[0]
    return re.findall(r"^\| `([a-z][a-z0-9_-]*)` \|", section, re.M)


def hello(session, **extra):
    session.send({"type": "hello", **extra})
    return session.wait_for(lambda m: m["type"] == "hello", what="hello")


def test_hello_answers_protocol_version_and_features(session):
    m = hello(session, id="h1")
    assert m["id"] == "h1" and m["protocol"] == "1.1"
    version = subprocess.run([CODEPOD_BIN, "--version"], capture_output=True, text=True).stdout
    assert version == f"codepod {m['version']}\n"
    assert {"executions", "stream", "declarations"} <= set(m["features"])
    # attach and the webhook are serve --listen's: a stdio client has no
    # dropped session to come back to and no HTTP
    listen_only = {"attach", "webhook"}
    if WS:
        assert listen_only <= set(m["features"]), m
    else:
        assert not listen_only & set(m["features"]), m
    assert len(m["features"]) == len(set(m["features"]))
    undocumented = set(m["features"]) - set(documented_features())
    assert not undocumented, f"features SESSION.md's Discovery does not describe: {undocumented}"


def test_hello_without_id_any_time_and_other_fields_ignored(session):
    first = hello(session, client="my-backend/1.0", protocol="9.9")
    assert "id" not in first
    # while an execution runs, and the session goes on
    session.serve({"wait": lambda inp: inp})
    eid = session.execute("return (await tools.wait({ n: 3 })).n;")
    again = hello(session)
    assert {k: again[k] for k in ("protocol", "version", "features")} == \
        {k: first[k] for k in ("protocol", "version", "features")}
    assert assert_ok(session.wait_result(eid))["result"] == 3
