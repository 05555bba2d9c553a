"""A conversation's workspace outliving its pod on the real cluster: the
idle reaper snapshots the pod's workspace to the test S3 store (a one-node
Ceph RADOS Gateway, tests/store/ceph.py) before it deletes the pod, and the
conversation's next program finds the same files in a new pod, restored
before it runs."""
import sys
import tempfile
from pathlib import Path

import pytest

import clusterhelp as ch
from test_cluster_pods import FIRST

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))
import ceph  # noqa: E402
import snaphelp  # noqa: E402

WRITE = r"""
const fs = require('fs');
fs.mkdirSync('out/deep', {recursive: true});
for (let i = 0; i < 50; i++) fs.writeFileSync(`out/deep/f${i}.txt`, `file ${i} `.repeat(i * 100));
fs.writeFileSync('big.bin', require('crypto').randomBytes(3 << 20));
fs.symlinkSync('big.bin', 'link');
return 1;
"""
TREE = r"""
const fs = require('fs'), crypto = require('crypto');
const out = {};
function walk(d) {
  for (const n of fs.readdirSync(d).sort()) {
    const p = d === '.' ? n : d + '/' + n;
    const st = fs.lstatSync(p);
    if (st.isSymbolicLink()) out[p] = ['link', fs.readlinkSync(p)];
    else if (st.isDirectory()) { out[p] = ['dir', st.mode & 0o7777]; walk(p); }
    else out[p] = ['file', st.mode & 0o7777, crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex')];
  }
}
walk('.');
return {tree: out, host: require('os').hostname()};
"""


@pytest.fixture(scope="module")
def store():
    with ceph.running(pytest.fail) as c:
        yield c


def test_a_reaped_pod_is_restored_into_a_new_one(cluster, store):
    prefix = snaphelp.new_prefix()
    s = snaphelp.session(store, tempfile.mkdtemp(prefix="csnap-"), prefix, extra=["--idle-ttl", "3"])
    s.conv_prefix = ""
    conv = "snap-" + prefix
    try:
        r = s.run(WRITE, conversation=conv, timeout=FIRST)
        assert r["status"] == "succeeded", r
        before = s.run(TREE, conversation=conv, timeout=60)["result"]
        (pod,) = ch.conv_pods(conv)
        assert before["host"] == pod["metadata"]["name"] and len(before["tree"]) > 50
        # The reaper: a snapshot first, then the pod goes.
        snaphelp.wait_event(s, "snapshot.before_reap", timeout=120)
        ch.wait_until(lambda: not ch.conv_pods(conv, live=False), 180, "the reaped pod gone")
        m = snaphelp.manifest(store, prefix, conv)
        assert m and m["bytes"] >= 3 << 20, m
        after = s.run(TREE, conversation=conv, timeout=FIRST)
        assert after["status"] == "succeeded", after
        assert after["usage"]["restoreMs"] >= 0, after["usage"]
        (new,) = ch.conv_pods(conv)
        assert new["metadata"]["uid"] != pod["metadata"]["uid"]
        assert after["result"]["host"] == new["metadata"]["name"]
        assert after["result"]["tree"] == before["tree"]
    finally:
        s.close(timeout=120)
