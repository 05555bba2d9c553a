"""What a program can reach: no network (the test's own listeners on
127.0.0.1 and an abstract unix socket it opens prove it), no unix socket of
the host, no other conversation's files, nothing of codepod's $HOME or the
host's /run, no host process, no way out of the workspace through symlinks
or hard links."""
import json
import os
import socket
import uuid
from pathlib import Path

import pytest

from hostile import BACKEND, IS_ROOT, Hostile, local_only
from harness import assert_ok

PRELUDE = """const cp = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const code = (f) => { try { f(); return 'ok'; } catch (e) { return e.code; } };
const connect = (opts) => new Promise((resolve) => {
  const s = net.connect(opts);
  s.setTimeout(5000, () => { s.destroy(); resolve('timeout'); });
  s.on('connect', () => { s.destroy(); resolve('connected'); });
  s.on('error', (e) => resolve(e.code));
});
"""


@pytest.fixture
def listeners():
    """A TCP and a UDP socket on 127.0.0.1 and an abstract unix socket, all the test's own."""
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    tcp.setblocking(False)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    name = f"codepod-hostile-{uuid.uuid4().hex}"
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind("\0" + name)
    abstract.listen(8)
    abstract.setblocking(False)
    yield {"tcp": tcp, "udp": udp, "abstract": abstract, "name": name,
           "tcp_port": tcp.getsockname()[1], "udp_port": udp.getsockname()[1]}
    for s in (tcp, udp, abstract):
        s.close()


def nothing_arrived(listeners):
    for key in ("tcp", "abstract"):
        try:
            conn, _ = listeners[key].accept()
            conn.close()
            return f"{key} accepted a connection"
        except BlockingIOError:
            pass
    try:
        data = listeners["udp"].recv(65536)
        return f"udp got {data[:40]!r}"
    except BlockingIOError:
        return None


def test_no_network_tcp_udp_dns_raw_or_abstract_sockets(hs, listeners):
    js = PRELUDE + f"""
const dgram = require('node:dgram');
const dns = require('node:dns');
const tcp = await connect({{ host: '127.0.0.1', port: {listeners['tcp_port']} }});
const abstract = await connect({{ path: '\\0{listeners['name']}' }});
const udp = await new Promise((resolve) => {{
  const s = dgram.createSocket('udp4');
  s.on('error', (e) => {{ s.close(); resolve(e.code); }});
  s.send('hello', {listeners['udp_port']}, '127.0.0.1', (e) => {{ s.close(); resolve(e ? e.code : 'sent'); }});
}});
const r = new dns.promises.Resolver({{ timeout: 2000, tries: 1 }});
r.setServers(['127.0.0.1:{listeners['udp_port']}']);
const query = await r.resolve4('codepod.invalid').then(() => 'resolved', (e) => e.code);
const lookup = await dns.promises.lookup('codepod.invalid').then(() => 'resolved', (e) => e.code);
const raw = (() => {{ try {{ return cp.execFileSync('python3', ['-c',
  'import socket\\ntry:\\n socket.socket(socket.AF_INET, socket.SOCK_RAW, 1); print("open")\\n'
  + 'except OSError as e:\\n print(e.errno)']).toString().trim(); }} catch (e) {{ return 'failed'; }} }})();
const ifs = Object.keys(require('node:os').networkInterfaces());
return {{ tcp, abstract, udp, query, lookup, raw, ifs }};"""
    res = assert_ok(hs.run(js))
    r = res["result"]
    assert r["tcp"] == "ECONNREFUSED", r  # the sandbox's own loopback: nothing listens there
    # no unix socket of its own at all (the filter, locally and in a pod
    # under the pod helper)
    assert r["abstract"] == "EPERM", r
    assert r["query"] in ("ECONNREFUSED", "ETIMEOUT"), r
    assert r["lookup"] in ("ENOTFOUND", "EAI_AGAIN"), r
    assert r["raw"] == "1", r  # EPERM: no CAP_NET_RAW
    assert [i for i in r["ifs"] if i != "lo"] == [], r
    assert r["udp"] == "sent", r  # into the sandbox's own loopback ...
    assert nothing_arrived(listeners) is None  # ... and none of it reached the host's
    hs.next_works()


def test_host_unix_sockets_are_out_of_reach(hs, tmp_path):
    # One under the host's /tmp (the sandbox's /tmp is its own) and one in a
    # folder the sandbox sees, world-writable: a socket file answers connect()
    # across network namespaces and read-only mounts, so the local sandbox
    # refuses the program unix sockets of its own (socketpair still works).
    paths = []
    socks = []
    # (The fake API server's pods see the host's files, which a real pod
    # never does: on Kubernetes only the /tmp case means anything.)
    for d in (tmp_path, hs.dir) if BACKEND == "local" else (tmp_path,):
        p = os.path.join(str(d), f"h-{uuid.uuid4().hex[:8]}.sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(p)
        os.chmod(p, 0o777)
        s.listen(8)
        s.setblocking(False)
        paths.append(p)
        socks.append(s)
    os.chmod(hs.dir, 0o755)
    try:
        res = assert_ok(hs.run(PRELUDE + f"""
const viaTmp = await connect({{ path: {json.dumps(paths[0])} }});
const visible = {json.dumps(paths[1:])}.length ? await connect({{ path: {json.dumps(paths[-1])} }}) : 'EPERM';
const pair = await new Promise((resolve) => {{
  const c = cp.spawn('sh', ['-c', 'echo piped'], {{ stdio: ['ignore', 'pipe', 'inherit'] }});
  let out = ''; c.stdout.on('data', (d) => out += d); c.on('close', () => resolve(out.trim()));
}});
return {{ viaTmp, visible, pair }};"""))
        r = res["result"]
        # (the filter answers before the path is looked up, in a pod too)
        assert r["viaTmp"] == "EPERM", r
        assert r["visible"] == "EPERM", r
        assert r["pair"] == "piped", r
        for s in socks:
            try:
                s.accept()
                raise AssertionError("a host unix socket accepted the program")
            except BlockingIOError:
                pass
    finally:
        for s in socks:
            s.close()
    hs.next_works()


@local_only
def test_other_conversations_workspaces_are_out_of_sight(hs):
    """The state folder is covered by a tmpfs, so another conversation's
    workspace is not there at all (as root it is another user's too;
    unprivileged it is the program's own user's), and the program's own is
    not there either: it is /workspace, the working folder, holding only its
    own files. The state folder is under /var/tmp: under /tmp (a checkout
    there) the private /tmp would hide it anyway."""
    state = hs.host / "state"
    h = Hostile(hs.mode, state=state)
    try:
        assert_ok(h.run("require('node:fs').writeFileSync('theirs.txt', 'A'); return 1;",
                        conversation="ws-a"))
        res = assert_ok(h.run(PRELUDE + f"""
fs.writeFileSync('mine.txt', 'B');
const list = (d) => {{ try {{ return fs.readdirSync(d); }} catch (e) {{ return e.code; }} }};
return {{ state: list({json.dumps(str(state))}), workspaces: list({json.dumps(str(state / "workspaces"))}),
         cwd: process.cwd(), mine: list('/workspace') }};""", conversation="ws-b"))
        # on the host, each conversation's file is in its own folder (as
        # root its own filesystem, mounted there while codepod runs)
        held = sorted(sorted(os.listdir(d)) for d in (state / "workspaces").iterdir()
                      if d.is_dir() and os.listdir(d))
    finally:
        assert h.close() == 0
    r = res["result"]
    assert r["state"] == [] and r["workspaces"] == "ENOENT", r
    assert r["cwd"] == "/workspace" and r["mine"] == ["mine.txt"], r
    assert held == [["mine.txt"], ["theirs.txt"]], held
    hs.next_works()


def test_symlinks_and_hard_links_lead_nowhere(hs):
    secret = hs.secret("not for the sandbox " + uuid.uuid4().hex)
    other = f"other-{uuid.uuid4().hex[:8]}"
    assert_ok(hs.run("require('node:fs').writeFileSync('theirs.txt', 'conversation A'); return 1;",
                     conversation=other))
    res = assert_ok(hs.run(PRELUDE + f"""
fs.symlinkSync({json.dumps(str(secret))}, 'to-secret');
fs.symlinkSync('/etc/shadow', 'to-shadow');
fs.symlinkSync('/', 'to-root');
const found = [];
const walk = (d, depth) => {{ if (depth > 7) return; let es; try {{ es = fs.readdirSync(d, {{ withFileTypes: true }}); }} catch {{ return; }}
  for (const e of es) {{ const p = d + '/' + e.name; if (e.name === 'theirs.txt') found.push(p); else if (e.isDirectory()) walk(p, depth + 1); }} }};
walk({json.dumps(str(hs.session.state_dir))}, 0);
return {{
  secret: code(() => fs.readFileSync('to-secret', 'utf8')),
  shadow: code(() => fs.readFileSync('to-shadow', 'utf8')),
  hardSecret: code(() => fs.linkSync({json.dumps(str(secret))}, 'hard-secret')),
  hardPasswd: code(() => fs.linkSync('/etc/passwd', 'hard-passwd')),
  writeThroughRoot: code(() => fs.writeFileSync('to-root/{secret.name}-x', 'x')),
  otherConversation: found,
}};"""))
    r = res["result"]
    mine = hs.mode == "unprivileged" and not IS_ROOT
    assert r["secret"] == ("ok" if mine else "EACCES"), r
    assert r["shadow"] == "EACCES", r
    assert r["hardSecret"] in ("EXDEV", "EPERM") and r["hardPasswd"] in ("EXDEV", "EPERM"), r
    assert r["writeThroughRoot"] in ("EROFS", "EACCES"), r
    assert not Path("/", f"{secret.name}-x").exists()
    if BACKEND == "local":
        assert r["otherConversation"] == [], r
    hs.next_works()


def test_host_processes_are_invisible(hs):
    me = hs.session.proc.pid
    res = assert_ok(hs.run(PRELUDE + """
const pids = fs.readdirSync('/proc').filter((d) => /^\\d+$/.test(d));
const cmds = pids.map((p) => { try { return fs.readFileSync('/proc/' + p + '/cmdline', 'utf8').split('\\0').join(' '); } catch { return ''; } });
return { n: pids.length, serve: cmds.filter((c) => c.includes('serve --stdio')).length,
         pytest: cmds.filter((c) => c.includes('pytest')).length };"""))
    r = res["result"]
    assert r["serve"] == 0 and r["pytest"] == 0, r
    assert r["n"] < 30, r
    assert os.path.exists(f"/proc/{me}")
    hs.next_works()


@local_only
def test_codepods_home_and_the_hosts_run_are_hidden(hs):
    """SECURITY.md, hidden: codepod's $HOME and /run are each covered by an
    empty tmpfs, so a file there that the program's user could read is out
    of sight. codepod's HOME here is a folder under /var/tmp (the private
    /tmp would hide one under /tmp anyway), with a world-readable file."""
    home = hs.host / "home"
    home.mkdir()
    (home / "dotfile").write_text("codepod's own\n")
    os.chmod(home / "dotfile", 0o644)
    if hs.mode == "unprivileged":
        os.chown(home, hs.uid, hs.uid)
    marker = Path("/run") / f"codepod-hostile-{uuid.uuid4().hex[:8]}"
    made = os.access("/run", os.W_OK)
    if made:
        marker.write_text("the host's\n")
        os.chmod(marker, 0o644)
    h = Hostile(hs.mode, home=home)
    try:
        res = assert_ok(h.run(PRELUDE + f"""
const list = (d) => {{ try {{ return fs.readdirSync(d); }} catch (e) {{ return e.code; }} }};
return {{ home: list({json.dumps(str(home))}), run: list('/run'),
         dotfile: code(() => fs.readFileSync({json.dumps(str(home / "dotfile"))})),
         marker: code(() => fs.readFileSync({json.dumps(str(marker))})) }};"""))
    finally:
        assert h.close() == 0
        if made:
            marker.unlink()
    r = res["result"]
    assert r["home"] == [] and r["dotfile"] == "ENOENT", r
    assert r["run"] == [] and r["marker"] == "ENOENT", r
    hs.next_works()
