"""A descriptor that codepod's own parent left open without close-on-exec
never reaches a program: codepod marks every inherited descriptor above 2
close-on-exec before it starts anything (cli/main.c). Without that, whatever
a service manager, a shell or a test harness leaked into codepod would be
readable by every program it runs.

The leak is made the way a careless parent makes it: a shell opens a file on
descriptor 7 (inheritable) and execs codepod."""
import os

from harness import Session, assert_ok, close_and_check, local_backend_only

pytestmark = local_backend_only

PROBE = """
const fs = require('node:fs');
const links = {};
for (const fd of fs.readdirSync('/proc/self/fd')) {
  try { links[fd] = fs.readlinkSync('/proc/self/fd/' + fd); } catch (e) { links[fd] = e.code; }
}
return links;
"""


def test_a_descriptor_leaked_into_codepod_is_not_a_programs(tmp_path):
    leaked = tmp_path / "leaked.txt"
    leaked.write_text("inherited secret")
    os.chmod(leaked, 0o644)
    wrap = ("bash", "-c", 'exec 7<"$1"; shift; exec "$@"', "bash", str(leaked))
    s = Session(tmp_path / "state", wrap=wrap)
    try:
        res = s.run(PROBE)
        assert_ok(res)
        # the shell really handed descriptor 7 to codepod (which has run a
        # program by now, so the shell has long exec'd it): the test would
        # prove nothing otherwise
        assert os.readlink(f"/proc/{s.proc.pid}/fd/7") == str(leaked)
        links = res["result"]
        assert links, "the program saw no descriptor at all: the probe is broken"
        # the sandbox may show the file under its own path or as a bare name
        assert not any(leaked.name in str(target) for target in links.values()), links
    finally:
        close_and_check(s)
