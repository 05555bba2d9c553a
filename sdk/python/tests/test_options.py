"""Mistakes a backend makes are reported where it makes them: a policy typo
raises from code_tool()/run() (not an INVALID_REQUEST shown to the model), a
codepod that is not there is UNAVAILABLE with the system's code, and
codepod's own log lines go to a logger (by default only warnings show)."""

import json
import logging
import os
import socket
import subprocess
import sys

import pytest

from codepod import Codepod, ConnectError, Tool
from conftest import BIN, HERE, arun

TOOLS = {"ping": Tool(fn=lambda _: "pong")}


def conv(tag):
    return f"sdk-py-opts-{tag}-{os.getpid()}"


def test_policy_keys_are_checked_before_anything_is_sent(fx):
    async def go():
        cp = await fx.open()
        try:
            sent = len(fx.log.seen)
            with pytest.raises(ValueError, match=r"code_tool\(\): policy\.timeoutMS is not a policy field "
                                                 r"\(did you mean timeoutMs\?\)"):
                await cp.code_tool(conversation=conv("typo"), tools=TOOLS, policy={"timeoutMS": 5000})
            with pytest.raises(ValueError, match=r"run\(\): policy\.nope is not a policy field \(known: timeoutMs, "):
                await cp.run(conversation=conv("run"), js="return 1", policy={"nope": 1})
            for bad in (0, -1, 1.5, True, "10"):
                with pytest.raises(ValueError, match=r"policy\.timeoutMs must be a positive integer"):
                    await cp.run(conversation=conv("run"), js="return 1", policy={"timeoutMs": bad})
            assert len(fx.log.seen) == sent, "nothing was sent to codepod"
            a = await cp.code_tool(conversation=conv("p"), tools=TOOLS, policy={"timeoutMs": 2000})
            b = await cp.code_tool(conversation=conv("p"), tools=TOOLS, execution_policy={"timeoutMs": 2000})
            assert "Limits: 2 s per program" in a.description and a.description == b.description
            out = json.loads(await b({"reason": "r", "js": "await new Promise((r) => setTimeout(r, 60000));"}))
            assert out["error"]["code"] == "TIMEOUT", "the alias's policy reached the run"
            with pytest.raises(ValueError, match="not both"):
                await cp.code_tool(conversation=conv("p"), tools=TOOLS, policy={"timeoutMs": 1},
                                   execution_policy={"timeoutMs": 2})
        finally:
            await fx.aclose()
    arun(go())


def test_spawn_of_a_missing_command_is_unavailable_enoent(tmp_path):
    async def go():
        with pytest.raises(ConnectError) as ei:
            await Codepod.spawn([str(tmp_path / "codepod"), "serve", "--stdio"])
        return ei.value
    e = arun(go())
    assert e.code == "UNAVAILABLE" and e.cause_code == "ENOENT", (e.code, e.cause_code, str(e))
    assert "ENOENT" in str(e)


def test_connect_to_a_closed_port_is_unavailable_econnrefused():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()

    async def go():
        with pytest.raises(ConnectError) as ei:
            await Codepod.connect(f"http://127.0.0.1:{port}", "t")
        return ei.value
    e = arun(go())
    assert e.code == "UNAVAILABLE" and e.cause_code == "ECONNREFUSED", (e.code, e.cause_code, str(e))


def spawn_args(tmp_path):
    return [BIN, "serve", "--stdio", "--no-isolation", "--log-level", "debug", "--state-dir", str(tmp_path / "st")]


def test_spawn_gives_every_log_line_to_the_logger_at_its_level(tmp_path):
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    logger = logging.getLogger(f"codepod.test.{os.getpid()}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.addHandler(Keep())

    async def go():
        cp = await Codepod.spawn(spawn_args(tmp_path), logger=logger)
        try:
            assert (await cp.run(conversation=conv("log"), js="return 1"))["result"] == 1
        finally:
            await cp.close()
    arun(go())
    by = {}
    for r in records:
        by.setdefault(r.levelno, []).append(r.codepod["event"])
    assert "local.no_isolation" in by[logging.WARNING], by
    assert "serve.start" in by[logging.INFO]
    assert by.get(logging.DEBUG)
    assert all(json.loads(r.getMessage()) == r.codepod for r in records)


def test_by_default_only_warnings_reach_the_applications_stderr(tmp_path):
    script = ("import asyncio, sys\n"
              f"sys.path.insert(0, {str(HERE.parent)!r})\n"
              "from codepod import Codepod\n"
              "async def main():\n"
              f"    cp = await Codepod.spawn({spawn_args(tmp_path)!r})\n"
              "    o = await cp.run(conversation='quiet', js='return 1')\n"
              "    await cp.close()\n"
              "    print(o['result'])\n"
              "asyncio.run(main())\n")
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "1"
    assert '"event":"local.no_isolation"' in p.stderr
    assert '"level":"info"' not in p.stderr and '"level":"debug"' not in p.stderr
