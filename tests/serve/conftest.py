"""Fixtures for the `codepod serve --listen` tests: a server factory that
stops every server at teardown (SIGTERM) and checks it exited 0."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from util import Pump  # noqa: E402
from wssession import Server  # noqa: E402


@pytest.fixture
def serve(tmp_path):
    started = []
    Pump.made.clear()

    def start(*args, **kw):
        s = Server(tmp_path / f"state{len(started)}", args=args, **kw)
        started.append(s)
        return s

    yield start
    for s in started:
        rc = s.stop()
        assert rc == 0, f"codepod serve exited {rc}: {s.stderr_text()}"
        assert not s.logs("ws.crash")
    bad = [e for p in Pump.made for e in p.schema_errors]
    Pump.made.clear()
    assert not bad, f"messages that break broker/schema: {bad[:3]}"
