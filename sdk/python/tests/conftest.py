"""Harness for the codepod package's tests: a real `codepod serve` built from
this tree ($CODEPOD_BIN, default build/codepod) on both transports, every
protocol message checked against broker/schema/*.schema.json when the tree
has them, and a TCP proxy whose connections a test can cut.

Tests are plain functions that call ``arun(coro)`` (no pytest-asyncio on
Debian): each runs in its own event loop with a deadline that only catches a
hang."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the package from this tree, installed or not

from codepod import Codepod  # noqa: E402

REPO = Path(os.environ.get("CODEPOD_REPO", HERE.parents[2]))
BIN = os.environ.get("CODEPOD_BIN", str(REPO / "build" / "codepod"))
EXAMPLE = REPO / "tests" / "example"
SCHEMA_DIR = Path(os.environ.get("CODEPOD_SCHEMA_DIR", REPO / "broker" / "schema"))
HAVE_SCHEMAS = (SCHEMA_DIR / "index.json").exists()
HAVE_LOG = (SCHEMA_DIR / "log.schema.json").exists()
HAVE_ATTACH = (SCHEMA_DIR / "attach.schema.json").exists()
# The sandbox's commands and files (they land with their schemas).
HAVE_COMMANDS = (SCHEMA_DIR / "command.schema.json").exists()
HAVE_FILES = (SCHEMA_DIR / "file_read.schema.json").exists()
HAVE_ARCHIVES = HAVE_FILES and "archive_read" in json.loads((SCHEMA_DIR / "index.json").read_text())["toServer"]
TRANSPORTS = ["stdio", "ws"]


def arun(coro, timeout=120):
    return asyncio.run(asyncio.wait_for(coro, timeout))


# ---- schema checks -------------------------------------------------------------

def _validators():
    """Per direction, one validator per message type, as broker/schema/index.json
    names them; $refs between the files resolve by $id or file name
    (RefResolver: Debian's jsonschema 4.10 has no `referencing`)."""
    if not HAVE_SCHEMAS:
        return {"in": {}, "out": {}}
    from jsonschema import RefResolver, validators
    schemas = {f.name: json.loads(f.read_text()) for f in sorted(SCHEMA_DIR.glob("*.schema.json"))}
    store = {}
    for name, sch in schemas.items():
        store[(SCHEMA_DIR / name).as_uri()] = sch
        if isinstance(sch.get("$id"), str):
            store[sch["$id"]] = sch

    def make(name):
        sch = schemas[name]
        cls = validators.validator_for(sch, default=validators.Draft202012Validator)
        base = sch.get("$id", (SCHEMA_DIR / name).as_uri())
        return cls(sch, resolver=RefResolver(base_uri=base, referrer=sch, store=store))

    index = json.loads((SCHEMA_DIR / "index.json").read_text())
    return {"out": {t: make(f) for t, f in index["toServer"].items()},
            "in": {t: make(f) for t, f in index["fromServer"].items()}}


VALIDATORS = _validators()


class SchemaLog:
    def __init__(self):
        self.seen = []
        self.bad = []

    def __call__(self, direction, text):
        msg = json.loads(text)
        self.seen.append((direction, msg))
        if not HAVE_SCHEMAS:
            return
        v = VALIDATORS[direction].get(str(msg.get("type")))
        if v is None:
            self.bad.append(f"{direction} {msg.get('type')}: no schema for this message type")
            return
        errs = list(v.iter_errors(msg))
        if errs:
            self.bad.append(f"{direction} {msg.get('type')}: {errs[0].message} in {text[:300]}")


# ---- servers ---------------------------------------------------------------------

class Server:
    """`codepod serve --listen 127.0.0.1:0 --token-file F`; the port from its serve.listen log line."""

    def __init__(self, tmp: Path, args=()):
        self.token = "sdk-py-token-" + os.urandom(8).hex()
        tf = tmp / "token"
        tf.write_text(self.token + "\n")
        self.proc = subprocess.Popen(
            [BIN, "serve", "--listen", "127.0.0.1:0", "--token-file", str(tf), "--state-dir", str(tmp / "state"),
             *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.port = None
        self.lines = []
        got = threading.Event()

        def read():
            for raw in self.proc.stderr:
                self.lines.append(raw)
                try:
                    m = json.loads(raw)
                except ValueError:
                    continue
                if m.get("event") == "serve.listen" and self.port is None:
                    self.port = m["port"]
                    got.set()
            got.set()

        self._t = threading.Thread(target=read, daemon=True)
        self._t.start()
        if not got.wait(30) or self.port is None:
            self.proc.kill()
            raise AssertionError("codepod serve did not start: " + b"".join(self.lines[-20:]).decode(errors="replace"))
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


class Proxy:
    """A TCP proxy on 127.0.0.1 whose connections drop() cuts, reset() cuts
    with an RST, and freeze() silences (they stop forwarding and stay open, a
    path that died; new connections work)."""

    def __init__(self, target_port):
        self.target = target_port
        self.accepted = 0
        self.writers = set()
        self.frozen = []   # one Event per connection: set, it forwards nothing more
        self.server = None

    async def start(self):
        self.server = await asyncio.start_server(self._conn, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def _conn(self, r, w):
        self.accepted += 1
        ur, uw = await asyncio.open_connection("127.0.0.1", self.target)
        self.writers |= {w, uw}
        frozen = asyncio.Event()
        self.frozen.append(frozen)

        async def pipe(a, b):
            try:
                while data := await a.read(65536):
                    if frozen.is_set():
                        await asyncio.Event().wait()  # held: never forwarded, never closed
                    b.write(data)
                    await b.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                b.close()

        await asyncio.gather(pipe(r, uw), pipe(ur, w))

    def drop(self):
        for w in list(self.writers):
            w.transport.abort()
        self.writers.clear()

    def reset(self):
        import socket
        import struct
        for w in list(self.writers):
            sock = w.transport.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            w.transport.abort()
        self.writers.clear()

    def freeze(self):
        for f in self.frozen:
            f.set()
        self.frozen = []

    def close(self):
        """Stops accepting new connections too (codepod looks gone)."""
        self.server.close()
        self.drop()


class Fixture:
    def __init__(self, transport, tmp):
        self.transport = transport
        self.tmp = tmp
        self.log = SchemaLog()
        self.server = None
        self.proxy = None
        self.cp = None
        self.status = None

    async def open(self, proxy=False, reconnect_s=25.0, **live):
        if self.transport == "stdio":
            # Through sh, which writes codepod's exit status to a file: under
            # ASan a report makes it nonzero, and the test must fail.
            self.status = self.tmp / "status"
            self.cp = await Codepod.spawn(
                ["/bin/sh", "-c", '"$0" "$@"; echo $? > "$CODEPOD_TEST_STATUS"',
                 BIN, "serve", "--stdio", "--state-dir", str(self.tmp / "state")],
                env={**os.environ, "CODEPOD_TEST_STATUS": str(self.status)},
                stderr=subprocess.DEVNULL, trace=self.log)
            return self.cp
        if self.server is None:
            self.server = Server(self.tmp)
        url = self.server.url
        if proxy:
            self.proxy = await Proxy(self.server.port).start()
            url = f"http://127.0.0.1:{self.proxy.port}"
        self.cp = await Codepod.connect(url, self.server.token, trace=self.log, reconnect_s=reconnect_s, **live)
        return self.cp

    async def aclose(self):
        if self.cp:
            await self.cp.close()
        if self.proxy:
            self.proxy.close()


@pytest.fixture(params=TRANSPORTS)
def fx(request, tmp_path):
    f = Fixture(request.param, tmp_path)
    yield f
    if f.server:
        rc = f.server.stop()
        assert rc == 0, b"".join(f.server.lines[-20:]).decode(errors="replace")
    if f.status is not None:
        rc = f.status.read_text().strip() if f.status.exists() else "missing"
        assert rc == "0", f"codepod serve --stdio exited {rc}"
    if HAVE_SCHEMAS:
        assert f.log.bad == [], "every message matches its JSON Schema"


@pytest.fixture
def ws_fx(tmp_path):
    f = Fixture("ws", tmp_path)
    yield f
    if f.server:
        rc = f.server.stop()
        assert rc == 0, b"".join(f.server.lines[-20:]).decode(errors="replace")
    if HAVE_SCHEMAS:
        assert f.log.bad == [], "every message matches its JSON Schema"


# ---- the invoices example's tools (tests/example) ----------------------------------

INVOICES = json.loads((EXAMPLE / "data" / "invoices.json").read_text())
FIRMS = json.loads((EXAMPLE / "data" / "firms.json").read_text())
INVOICES_JS = (EXAMPLE / "invoices.js").read_text()
SPECS = {t["name"]: t for t in json.loads((EXAMPLE / "tools.json").read_text())["tools"]}


def invoices_for(month):
    return [{"firmId": i["firmId"], "amountCents": i["amountCents"], "status": i["status"]}
            for i in INVOICES if i["month"] == month]


def expected_top3():
    totals = {}
    for i in invoices_for("2026-08"):
        if i["status"] == "paid":
            totals[i["firmId"]] = totals.get(i["firmId"], 0) + i["amountCents"]
    names = {f["id"]: f["name"] for f in FIRMS}
    rows = sorted(({"firm": names[k], "cents": v} for k, v in totals.items()), key=lambda r: -r["cents"])
    return rows[:3]
