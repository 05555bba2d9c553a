"""cp.sandbox(conversation) against a real `codepod serve`, on both
transports, every message checked against broker/schema: commands beside
programs and the workspace's files both ways. Each part runs once the
server's schemas have its messages."""

import hashlib
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from codepod import Codepod, CodepodError
from conftest import BIN, HAVE_ARCHIVES, HAVE_COMMANDS, HAVE_FILES, TRANSPORTS, Server, arun

needs_commands = pytest.mark.skipif(not HAVE_COMMANDS, reason="this server has no command message")
needs_files = pytest.mark.skipif(not HAVE_FILES, reason="this server has no file messages")


def conv(tag):
    return f"sdk-py-sb-{tag}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


@needs_commands
def test_run_exit_codes_streams_cwd_env_and_argv(fx):
    async def go():
        cp = await fx.open()
        sb = cp.sandbox(conv("run"))
        try:
            r = await sb.run("echo out; echo err >&2; exit 3")
            await sb.run("mkdir -p sub/dir")
            w = await sb.run('pwd; echo "$GREETING"', cwd="/workspace/sub/dir", env={"GREETING": "hi there"})
            a = await sb.run(["printf", "%s|", "a b", "$HOME"])
            fed = await sb.run("tr a-z A-Z", stdin="shout")
            return r, w, a, fed
        finally:
            await fx.aclose()
    r, w, a, fed = arun(go())
    assert (r["status"], r["exitCode"], r["stdout"], r["stderr"]) == ("ok", 3, "out\n", "err\n")
    assert r["stdoutTruncated"] is False
    pwd, greeting = w["stdout"].splitlines()
    assert pwd == "/workspace/sub/dir" and greeting == "hi there"  # the server isolates programs
    assert a["stdout"] == "a b|$HOME|"
    assert fed["stdout"] == "SHOUT"


@needs_commands
def test_a_program_and_a_command_share_the_workspace(fx):
    token = uuid.uuid4().hex
    c = conv("share")

    async def go():
        cp = await fx.open()
        sb = cp.sandbox(c)
        try:
            o = await cp.run(conversation=c, js=f"require('node:fs').writeFileSync('p.txt', '{token}'); return 1;")
            assert o["status"] == "succeeded", o.get("error")
            r = await sb.run("cat p.txt; printf back > c.txt")
            back = await cp.run(conversation=c, js="return require('node:fs').readFileSync('c.txt', 'utf8');")
            other = await cp.sandbox(conv("other")).run("cat p.txt")
            return r, back, other
        finally:
            await fx.aclose()
    r, back, other = arun(go())
    assert r["stdout"] == token
    assert back["result"] == "back"
    assert other["exitCode"] != 0


@needs_commands
def test_spawn_streams_output_as_it_comes_and_takes_stdin(fx):
    async def go():
        cp = await fx.open()
        sb = cp.sandbox(conv("spawn"))
        try:
            seen = []
            p = await sb.spawn('while read l; do echo "got $l"; done; echo bye >&2', stdin=True,
                               on_output=lambda s, d: seen.append((s, d)))
            await p.write("one\n")
            first = await p.stdout.__anext__()   # before stdin ends: streamed
            await p.write(b"two\n")
            await p.close_stdin()
            rest = await p.stdout.read()
            err = await p.stderr.read()
            return first, rest, err, await p.wait(), seen
        finally:
            await fx.aclose()
    first, rest, err, code, seen = arun(go())
    assert (first, rest, err, code) == (b"got one\n", b"got two\n", b"bye\n", 0)
    assert b"".join(d for s, d in seen if s == "stdout") == b"got one\ngot two\n"


@needs_commands
def test_output_nobody_reads_is_kept_up_to_a_bound(fx):
    bound = 64 * 1024

    async def go():
        cp = await fx.open()
        sb = cp.sandbox(conv("unread"))
        try:
            seen = []
            # 1 MiB over a second or two (codepod streams at most 64 KiB per
            # 100 ms); stdout is read only after the command ended.
            p = await sb.spawn("for i in $(seq 32); do head -c 32768 /dev/zero; sleep 0.05; done",
                               max_unread_bytes=bound, on_output=lambda s, d: seen.append((s, d)))
            code = await p.wait()
            kept = await p.stdout.read()
            return code, len(kept), p.stdout.dropped, p.stderr.dropped, sum(len(d) for s, d in seen if s == "stdout")
        finally:
            await fx.aclose()
    code, kept, dropped, dropped_err, seen = arun(go())
    assert code == 0 and seen > 2 * bound, seen
    assert kept <= bound and kept + dropped == seen and dropped_err == 0, (kept, dropped, seen)


@needs_commands
def test_kill_deadline_and_signals(fx):
    async def go():
        cp = await fx.open()
        sb = cp.sandbox(conv("kill"), policy={"timeoutMs": 1000})
        try:
            p = await sb.spawn("echo started; sleep 600 & wait")
            first = await p.stdout.__anext__()
            await p.kill()
            await p.kill()
            code, res = await p.wait(), await p.result
            term = await sb.run("kill -TERM $$; sleep 5")
            try:
                await sb.run("sleep 600")
                timeout = None
            except CodepodError as e:
                timeout = e.code
            return first, code, res, term, timeout
        finally:
            await fx.aclose()
    first, code, res, term, timeout = arun(go())
    assert first == b"started\n"
    assert code == 137 and res["status"] == "error" and res["error"]["code"] == "CANCELLED"
    assert (term["exitCode"], term["signal"]) == (143, "SIGTERM")
    assert timeout == "TIMEOUT"


@needs_files
def test_files_both_ways_with_etags_ranges_lines_and_listing(fx):
    body = os.urandom(1024 * 1024 + 3)
    c = conv("files")

    async def go():
        cp = await fx.open()
        sb = cp.sandbox(c)
        try:
            meta = await sb.write_file("/workspace/data/blob.bin", body)
            back = await sb.read_file("data/blob.bin")
            ranged = await sb.read_file("data/blob.bin", offset=5, length=10)
            head = await sb.open_file("data/blob.bin", offset=0, length=1)
            early = (head.size, head.etag)   # before its bytes were read
            await head.read()

            async def gen():
                for i in range(3):
                    yield f"row {i}\n".encode()
            await sb.write_file("in/rows.txt", gen())
            o = await cp.run(conversation=c, js="const fs = require('node:fs');"
                             "fs.writeFileSync('out.txt', fs.readFileSync('in/rows.txt', 'utf8').toUpperCase());"
                             "return 1;")
            assert o["status"] == "succeeded", o.get("error")
            out = {
                "meta": meta, "back": back, "ranged": ranged, "early": early,
                "line2": await sb.read_text_file("in/rows.txt", start_line=2, end_line=2),
                "out": await sb.read_text_file("out.txt"),
                "stat": await sb.stat("data/blob.bin"),
                "root": await sb.list_directory("/workspace"),
                "deleted": [await sb.delete_file("out.txt"), await sb.delete_file("out.txt")],
                "gone": [await sb.read_file("out.txt"), await sb.stat("out.txt"), await sb.list_directory("nope")],
            }
            first = await sb.write_text_file("v.txt", "v1")
            await sb.write_file("v.txt", b"v2", if_match=first["etag"])
            try:
                await sb.write_file("v.txt", b"v3", if_match=first["etag"])
                out["stale"] = None
            except CodepodError as e:
                out["stale"] = e.code
            out["kept"] = await sb.read_text_file("v.txt")
            refused = []
            for p in ("../escape.txt", "a/../../escape.txt", "/etc/passwd"):
                try:
                    await sb.write_text_file(p, "x")
                except CodepodError as e:
                    refused.append(e.code)
            out["refused"] = refused
            return out
        finally:
            await fx.aclose()
    out = arun(go())
    assert out["meta"]["size"] == len(body) and out["meta"]["etag"] == hashlib.sha256(body).hexdigest()
    assert out["back"] == body and out["ranged"] == body[5:15]
    assert out["early"] == (len(body), out["meta"]["etag"])
    assert out["line2"] == "row 1\n"
    assert out["out"] == "ROW 0\nROW 1\nROW 2\n"
    assert out["stat"]["type"] == "file" and out["stat"]["size"] == len(body)
    assert [e["name"] for e in out["root"]] == ["data", "in", "out.txt"]
    assert out["deleted"] == [True, False] and out["gone"] == [None, None, None]
    assert out["stale"] == "PRECONDITION_FAILED" and out["kept"] == "v2"
    assert out["refused"] == ["INVALID_REQUEST"] * 3


@needs_files
def test_a_read_closed_after_its_first_chunk_stops_at_codepod(fx):
    chunk = 256 * 1024
    body = os.urandom(64 * chunk)
    c = conv("cancel-read")

    async def go():
        cp = await fx.open()
        sb = cp.sandbox(c)
        try:
            await sb.write_file("big.bin", body)
            s = await sb.open_file("big.bin")
            first = await s.__anext__()
            await s.aclose()
            # codepod answers the stop: the read ends CANCELLED, not with the rest.
            with pytest.raises(CodepodError) as ended:
                async for _ in s:
                    pass
            await sb.write_text_file("log.txt", "head\n" + "y\n" * (4 * 1024 * 1024))
            line = await sb.read_text_file("log.txt", start_line=1, end_line=1)
            text_id = next(m["id"] for d, m in fx.log.seen
                           if d == "out" and m["type"] == "file_read" and m.get("path") == "log.txt")
            await until(lambda: any(d == "in" and m.get("id") == text_id and m["type"] in ("error", "file_result")
                                    for d, m in fx.log.seen))
            again = await sb.read_file("big.bin")
            return first, s, ended.value.code, line, text_id, again
        finally:
            await fx.aclose()
    first, s, code, line, text_id, again = arun(go())
    assert first == body[:len(first)] and code == "CANCELLED" and s.result is None
    mine = [(d, m) for d, m in fx.log.seen if m.get("id") == s.id]
    assert any(d == "out" and m["type"] == "stop" for d, m in mine), "a stop was sent"
    chunks = sum(1 for d, m in mine if d == "in" and m["type"] == "file_chunk")
    assert chunks < 64 // 2, f"{chunks} of 64 chunks came after the reader closed at the first"
    assert line == "head\n"
    ends = [(m["type"], m.get("error", {}).get("code")) for d, m in fx.log.seen
            if d == "in" and m.get("id") == text_id and m["type"] in ("error", "file_result")]
    assert ends == [("error", "CANCELLED")], ends
    assert again == body


def test_code_tool_names_the_workspace_files(fx):
    c = conv("wsfiles")

    async def go():
        cp = await fx.open()
        try:
            listed = await cp.code_tool(conversation=c, tools={}, workspace_files=["in/sales.csv", "notes.md"])
            many = await cp.code_tool(conversation=c, tools={}, workspace_files=[f"f{i}.txt" for i in range(60)])
            none = await cp.code_tool(conversation=c, tools={})
            found = None
            if HAVE_FILES:
                sb = cp.sandbox(c)
                await sb.write_text_file("in/sales.csv", "a\n")
                await sb.write_text_file("top.txt", "b\n")
                found = await cp.code_tool(conversation=c, tools={}, workspace_files=True)
            return listed.description, many.description, none.description, found and found.description
        finally:
            await fx.aclose()
    listed, many, none, found = arun(go())
    assert ("\n- The workspace already holds these files (paths relative to it): `in/sales.csv`, `notes.md`.\n"
            in listed)
    assert "`f49.txt`, and 10 more.\n" in many and "f50.txt" not in many
    assert "already holds" not in none
    if found is not None:
        assert "holds these files (paths relative to it): `top.txt`, `in/sales.csv`.\n" in found


@needs_commands
def test_a_command_is_reattached_after_the_websocket_drops(ws_fx):
    async def go():
        cp = await ws_fx.open(proxy=True)
        sb = cp.sandbox(conv("reattach"))
        try:
            p = await sb.spawn('read l; echo "got $l"', stdin=True)
            before = ws_fx.proxy.accepted
            ws_fx.proxy.drop()
            await until(lambda: ws_fx.proxy.accepted > before)
            # once the attach is answered, stdin reaches the same process again
            await until(lambda: sum(1 for d, m in ws_fx.log.seen if d == "in" and m["type"] == "accepted") >= 2)
            await p.write("after\n")
            await p.close_stdin()
            code = await p.wait()
            # a file operation after the drop reconnects by itself
            await sb.write_text_file("after.txt", "x") if HAVE_FILES else None
            return code, (await p.result)["stdout"]
        finally:
            await ws_fx.aclose()
    assert arun(go()) == (0, "got after\n")


async def until(cond, timeout=60):
    import asyncio
    import time
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.025)


@pytest.mark.skipif(not HAVE_ARCHIVES, reason="this server has no archive messages")
def test_the_workspace_as_a_tar_down_and_up(fx):
    import io
    import tarfile

    def tar_of(entries):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as t:
            for name, data in entries:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
        return buf.getvalue()

    async def go():
        cp = await fx.open()
        sb = cp.sandbox(conv("tar"))
        try:
            await sb.write_text_file("a.txt", "alpha\n")
            await sb.write_text_file("dir/b.txt", "beta\n")
            down = await sb.read_archive()
            tar = await down.read()
            size = down.result["size"]
            up = await sb.write_archive(tar_of([("a.txt", b"replaced\n"), ("new/c.txt", b"gamma\n")]))
            texts = [await sb.read_text_file(p) for p in ("a.txt", "new/c.txt", "dir/b.txt")]
            try:
                await sb.write_archive(tar_of([("../x.txt", b"x")]))
                evil = None
            except CodepodError as e:
                evil = e.code
            return tar, size, up, texts, evil, await sb.stat("x.txt")
        finally:
            await fx.aclose()
    tar, size, up, texts, evil, leaked = arun(go())
    assert size == len(tar)
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        assert sorted(m.name.rstrip("/") for m in t.getmembers()) == ["a.txt", "dir", "dir/b.txt"]
        assert t.extractfile("dir/b.txt").read() == b"beta\n"
    assert up["files"] >= 2
    assert texts == ["replaced\n", "gamma\n", "beta\n"]
    assert evil == "INVALID_REQUEST" and leaked is None


ROUNDTRIP = Path(__file__).resolve().parents[1] / "examples" / "sandbox_roundtrip.py"


@pytest.mark.skipif(not (HAVE_COMMANDS and HAVE_FILES), reason="this server has no command or file messages")
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_roundtrip_example(transport, tmp_path):
    env = {"CODEPOD_CONVERSATION": conv("roundtrip")}
    srv = None
    if transport == "stdio":
        env.update(CODEPOD_BIN=BIN, CODEPOD_URL="", CODEPOD_STATE_DIR=str(tmp_path))
    else:
        srv = Server(tmp_path)
        env.update(CODEPOD_URL=srv.url, CODEPOD_TOKEN=srv.token)
    try:
        r = subprocess.run([sys.executable, str(ROUNDTRIP)], env={**os.environ, **env}, capture_output=True,
                           text=True, timeout=120)
    finally:
        if srv:
            assert srv.stop() == 0
    assert r.returncode == 0, r.stderr
    assert r.stdout == ('3 sales rows in 2 regions; the report is out/report.json.\n'
                        '{"north": 150, "south": 80}\n')


@needs_commands
def test_without_isolation_workspace_paths_map_onto_the_host_folder(tmp_path):
    """--no-isolation mounts nothing: the workspace keeps its host path, and
    the sandbox's /workspace paths (files and a command's cwd) still name
    files in it."""
    srv = Server(tmp_path, args=["--no-isolation"])
    c = conv("noiso")

    async def go():
        cp = await Codepod.connect(srv.url, srv.token)
        sb = cp.sandbox(c)
        try:
            await sb.write_text_file("/workspace/sub/in.txt", "from the api")
            w = await sb.run("pwd; cat in.txt", cwd="/workspace/sub")
            o = await cp.run(conversation=c, js="return [process.cwd(), require('node:fs').readFileSync('sub/in.txt', 'utf8')];")
            return w, o
        finally:
            await cp.close()
    try:
        w, o = arun(go())
    finally:
        assert srv.stop() == 0
    where, text = o["result"]
    assert where != "/workspace" and where.startswith(str(tmp_path / "state")), where
    assert text == "from the api"
    assert w["exitCode"] == 0 and w["stdout"] == f"{where}/sub\nfrom the api", w
