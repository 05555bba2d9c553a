"""The command line: every option `codepod --help` lists is taken by the
commands its heading names, and every command refuses any other option with
exit 2 and a message naming it.

An option is "taken" when codepod gets past the whole command line and stops
at the first thing it does with it: the local backend's Node lookup (serve,
with a --node that does not exist) or the tools file (run, with one that does
not exist). Nothing starts."""

import re
import subprocess

import pytest

from harness import CODEPOD_BIN, REPO

NO_NODE = "/nonexistent/codepod-test/node"
NO_TOOLS = "/nonexistent/codepod-test/tools.json"

# The commands each heading of --help names (the groups' titles in cli/).
HEADINGS = {
    "serve --stdio": {"stdio"},
    "serve --stdio and serve --listen": {"stdio", "listen"},
    "serve --listen": {"listen"},
    "run": {"run"},
    "serve and run": {"stdio", "listen", "run"},
    "serve and run, --backend local": {"stdio", "listen", "run"},
    "serve and run, --backend kubernetes": {"stdio", "listen", "run"},
    "serve and run, snapshots": {"stdio", "listen", "run"},
    "serve and declarations": {"stdio", "listen", "declarations"},
    "every command": {"stdio", "listen", "run", "declarations"},
}
COMMANDS = ("stdio", "listen", "run", "declarations")


def codepod(*args, input=""):
    return subprocess.run([CODEPOD_BIN, *args], input=input, capture_output=True, text=True,
                          cwd=str(REPO), timeout=60)


def listed():
    """(heading, option, its argument's name or None) for each line of --help."""
    p = codepod("--help")
    assert p.returncode == 0 and p.stdout.startswith("usage:"), (p.returncode, p.stderr)
    heading, out = None, []
    for line in p.stdout.splitlines():
        m = re.match(r"^(\S.*):$", line)
        if m:
            heading = m.group(1)
            continue
        m = re.match(r"^  (?:-\w, )?--([a-z][a-z0-9-]*)(?: (\S+))?", line)
        if m and heading in HEADINGS:
            out.append((heading, m.group(1), m.group(2)))
        elif m:
            pytest.fail(f"--{m.group(1)} is under the heading {heading!r}, which this test "
                        "does not know: add it to HEADINGS")
    return out


def sample(arg, tmp_path):
    """A value that passes the command line for an argument named @arg."""
    if arg is None:
        return []
    if "|" in arg:
        return [arg.split("|")[0]]
    values = {"N": "1", "S": "1", "SECONDS": "1", "BYTES": "1G", "JSON": "{}", "DIR": str(tmp_path),
              "PATH": NO_NODE, "HOST:PORT": "127.0.0.1:0", "TOOLS.json": NO_TOOLS,
              "FIRST-LAST": "3000000000-3000000002", "FILES": str(tmp_path / "kubeconfig"),
              "URL": "http://127.0.0.1:9"}
    if arg == "FILE":
        f = tmp_path / "empty"
        f.write_text("")
        return [str(f)]
    return [values.get(arg, "x")]


def invocation(command, tmp_path):
    """The command, with what it needs and a stop before anything starts."""
    token = tmp_path / "token"
    token.write_text("0123456789abcdef0123456789abcdef\n")
    return {
        "stdio": ["serve", "--stdio", "--node", NO_NODE],
        "listen": ["serve", "--listen", "127.0.0.1:0", "--token-file", str(token),
                   "--node", NO_NODE],
        "run": ["run", str(tmp_path / "prog.js"), "--tools", NO_TOOLS],
        "declarations": ["declarations", NO_TOOLS],
    }[command]


def stopped_after_the_command_line(command, p):
    if command == "run":
        return p.returncode == 2 and NO_TOOLS in p.stderr
    if command == "declarations":  # options taken, then the missing file
        return p.returncode == 1 and f"unable to open {NO_TOOLS}" in p.stderr
    return p.returncode == 2 and f"{NO_NODE} (from --node) does not run as Node.js" in p.stderr


def test_help_lists_options_under_known_headings():
    names = [name for _, name, _ in listed()]
    assert len(names) == len(set(names)), "an option is listed twice"
    for name in ("stdio", "listen", "token-file", "tools", "backend", "kubeconfig", "help"):
        assert name in names


def test_every_listed_option_is_taken_by_its_commands(tmp_path):
    for heading, name, arg in listed():
        for command in sorted(HEADINGS[heading]):
            if name == "help":
                p = codepod(*invocation(command, tmp_path), "--help")
                assert p.returncode == 0 and p.stdout.startswith("usage:"), (command, p.stderr)
                continue
            p = codepod(*invocation(command, tmp_path), f"--{name}", *sample(arg, tmp_path))
            assert stopped_after_the_command_line(command, p), \
                f"{command} --{name}: exit {p.returncode}, {p.stderr[-2000:]}"
            if arg:  # the --name=VALUE spelling too
                p = codepod(*invocation(command, tmp_path),
                            f"--{name}={sample(arg, tmp_path)[0]}")
                assert stopped_after_the_command_line(command, p), (command, name, p.stderr)


def test_every_command_refuses_the_options_of_others(tmp_path):
    for heading, name, arg in listed():
        for command in sorted(set(COMMANDS) - HEADINGS[heading]):
            p = codepod(*invocation(command, tmp_path), f"--{name}", *sample(arg, tmp_path))
            assert p.returncode == 2, f"{command} took --{name}: {p.stderr[-2000:]}"
            assert f"--{name}" in p.stderr, f"{command} --{name}: {p.stderr[-2000:]}"
            assert p.stdout == ""


@pytest.mark.parametrize("command", COMMANDS)
def test_unknown_option_is_refused_with_exit_2(tmp_path, command):
    p = codepod(*invocation(command, tmp_path), "--no-such-option")
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "'--no-such-option'" in p.stderr.splitlines()[0], p.stderr
    assert p.stdout == ""
    p = codepod(*invocation(command, tmp_path), "-q")
    assert p.returncode == 2 and "-- 'q'" in p.stderr.splitlines()[0], p.stderr


@pytest.mark.parametrize("command,opt", [("stdio", "--node"), ("listen", "--audit-file"),
                                         ("run", "--policy")])
def test_missing_argument_is_refused_with_exit_2(tmp_path, command, opt):
    p = codepod(*invocation(command, tmp_path), opt)
    assert p.returncode == 2 and f"'{opt}' requires an argument" in p.stderr, p.stderr


def test_a_number_out_of_range_is_refused_with_its_range(tmp_path):
    for command, opt, bad, msg in [
            ("stdio", "--max-executions", "0", "from 1 to 100000"),
            ("listen", "--max-sessions", "0", "from 1 to 1000000"),
            ("listen", "--drain-seconds", "86401", "from 0 to 86400"),
            ("run", "--prestart-idle", "x", "from 1 to 100000")]:
        p = codepod(*invocation(command, tmp_path), opt, bad)
        assert p.returncode == 2 and f"codepod: {opt} must be a number {msg}" in p.stderr, \
            (command, opt, p.stderr)


def test_positional_arguments(tmp_path):
    p = codepod("serve", "--stdio", "extra")
    assert p.returncode == 2 and "unexpected argument: extra" in p.stderr, p.stderr
    p = codepod("run", "a.js", "b.js", "--tools", NO_TOOLS)
    assert p.returncode == 2 and "unexpected argument: b.js" in p.stderr, p.stderr
    for args in ([], ["a.json", "b.json"]):
        p = codepod("declarations", *args)
        assert p.returncode == 2 and "usage: codepod declarations" in p.stderr, p.stderr
    p = codepod("declarations", "-", input='{"tools":[{"name":"t"}]}')
    assert p.returncode == 0 and "t: (input: unknown) => Promise<unknown>;" in p.stdout, p.stderr


def test_serve_needs_one_form():
    for args in ([], ["--stdio", "--listen", "127.0.0.1:0"]):
        p = codepod("serve", *args)
        assert p.returncode == 2 and "needs either --stdio or --listen" in p.stderr, p.stderr
