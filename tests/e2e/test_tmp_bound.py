"""The sandbox's private /tmp holds at most `maxMemoryMb` (README "The local
backend", SECURITY.md "Disk"): a program that writes more gets ENOSPC, so
/tmp, which lives in memory, cannot take the machine's memory past the
program's own bound."""
import pytest

from harness import assert_ok, local_backend_only

pytestmark = local_backend_only

MIB = 1 << 20

# Writes /tmp full in 1 MiB pieces, stopping at `stop` MiB whatever
# happens (a broken bound must not fill the machine's memory).
FILL = """
const fs = require('node:fs');
const chunk = Buffer.alloc(1 << 20, 120);
const fd = fs.openSync('/tmp/fill', 'w');
let written = 0, code = null;
try {
  while (written < STOP * (1 << 20)) written += fs.writeSync(fd, chunk, 0, chunk.length);
} catch (e) { code = e.code; }
fs.closeSync(fd);
const st = fs.statfsSync('/tmp');
fs.unlinkSync('/tmp/fill');
return { code, written, size: st.blocks * st.bsize };
"""


@pytest.mark.parametrize("mb", [64, 96])
def test_writing_more_than_max_memory_to_tmp_gets_enospc(session, mb):
    res = assert_ok(session.run(FILL.replace("STOP", str(mb + 32)), tools=[],
                                policy={"maxMemoryMb": mb}, timeout=120))
    r = res["result"]
    assert r["code"] == "ENOSPC", f"{r['written'] / MIB:.0f} MiB written to /tmp: {r}"
    # up to the bound (less what the filesystem keeps for itself), not beyond
    assert (mb - 2) * MIB <= r["written"] <= mb * MIB, r
    assert r["size"] == mb * MIB, r


def test_the_default_bound_is_the_default_heap(session):
    # 512 MiB (docs/contract.md §3, maxMemoryMb): read from the filesystem
    # rather than written full, which would take half a GiB of memory.
    res = assert_ok(session.run("const st = require('node:fs').statfsSync('/tmp');\n"
                                "return st.blocks * st.bsize;", tools=[], timeout=120))
    assert res["result"] == 512 * MIB, res
