"""Snapshots on the Kubernetes backend (--backend kubernetes --snapshot-url):
the fake API server (tests/fakekube) and the real Ceph store of this folder.
A workspace written in a pod, the pod deleted by the idle reaper, and a new
pod restores it byte for byte; the warm pool's claimed pods too; the store
down during a restore is SANDBOX_UNAVAILABLE naming why, down during a
snapshot it holds up nothing and the failure is counted; a corrupted archive
refused (the pod it could not fill deleted); DELETE racing an execution; two
replicas on one conversation, every snapshot one whole workspace; the drain
takes the snapshot due. And --template-drift-idle: a pod of an
older replica's template, idle, snapshotted and replaced by one of the newer
template with the files (never the other way round); without a store, kept.
The big file is 200 MiB (CODEPOD_KUBE_SNAP_BIG_MIB picks another size)."""
import importlib.util
import json
import os
import sys
import tempfile
import time
import uuid

import pytest

import snaphelp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "kube"))
import kubehelp  # noqa: E402


def _fakekube_helpers():
    path = os.path.join(HERE, "..", "fakekube", "conftest.py")
    spec = importlib.util.spec_from_file_location("fakekube_helpers_store", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


FK = _fakekube_helpers()


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    f = FK.start(tmp_path_factory, "--exec-path", str(kubehelp.NODE_DIR))
    yield kubehelp.FakeApi(f)
    FK.stop(f)


def kube_session(store, fake, state_dir, prefix, *extra, secret=None, endpoint=None):
    s = snaphelp.session(store, state_dir, prefix,
                         extra=["--backend", "kubernetes", "--kubeconfig", fake.kubeconfig,
                                *extra], secret=secret, endpoint=endpoint)
    s.conv_prefix = ""
    return s


# The workspace every scenario compares: kind, mode, size, content hash and
# mtime (seconds: the tar's resolution) of every entry but the root.
TREE_JS = r"""
const fs = require('fs'), crypto = require('crypto');
const out = {};
function walk(d) {
  for (const n of fs.readdirSync(d).sort()) {
    const p = d === '.' ? n : d + '/' + n;
    const st = fs.lstatSync(p);
    const t = Math.floor(st.mtimeMs / 1000);
    if (st.isSymbolicLink()) out[p] = ['link', fs.readlinkSync(p), t];
    else if (st.isDirectory()) { out[p] = ['dir', st.mode & 0o7777, t]; walk(p); }
    else {
      const h = crypto.createHash('sha256');
      const fd = fs.openSync(p, 'r'), b = Buffer.alloc(1 << 20);
      for (let k; (k = fs.readSync(fd, b, 0, b.length, null)) > 0;) h.update(b.subarray(0, k));
      fs.closeSync(fd);
      out[p] = ['file', st.mode & 0o7777, st.size, h.digest('hex'), t];
    }
  }
}
walk('.');
return out;
"""

WRITE_MANY = r"""
const fs = require('fs');
const crypto = require('crypto');
fs.mkdirSync('deep/a/b/c', {recursive: true});
fs.mkdirSync('empty/inner', {recursive: true});
for (let i = 0; i < 300; i++) {
  const d = 'many/' + (i % 10);
  fs.mkdirSync(d, {recursive: true});
  fs.writeFileSync(d + '/f' + i + '.txt', 'file ' + i + '\n'.repeat(i));
}
fs.writeFileSync('empty.txt', '');
fs.writeFileSync('run.sh', '#!/bin/sh\necho hi\n'); fs.chmodSync('run.sh', 0o750);
fs.writeFileSync('secret', 'x'); fs.chmodSync('secret', 0o600);
fs.mkdirSync('ro'); fs.writeFileSync('ro/kept', 'k'); fs.chmodSync('ro', 0o555);
fs.mkdirSync('private'); fs.chmodSync('private', 0o700);
fs.symlinkSync('deep/a/b', 'to-b');
fs.symlinkSync('../../run.sh', 'deep/a/up-link');
fs.symlinkSync('missing-target', 'dangling');
fs.writeFileSync('n' + 'x'.repeat(150), 'a long name');
fs.utimesSync('secret', new Date(1000000000000), new Date(1000000000000));
const big = fs.openSync('big.bin', 'w');
for (let i = 0; i < BIG_MIB; i++) fs.writeSync(big, crypto.randomBytes(1 << 20));
fs.closeSync(big);
return fs.readdirSync('.').length;
"""

# The big file: 200 MiB as the issue asks (CODEPOD_KUBE_SNAP_BIG_MIB picks
# another size on a machine too slow for it).
BIG_MIB = int(os.environ.get("CODEPOD_KUBE_SNAP_BIG_MIB", "200"))


def tree(s, conv, timeout=300):
    r = s.run(TREE_JS, conversation=conv, timeout=timeout,
              policy={"timeoutMs": 240000, "maxResultBytes": 4 << 20})
    assert r["status"] == "succeeded", kubehelp.describe(r, s)
    return r["result"], r


def wait_no_pod(fake, conv, timeout=60, s=None):
    names = [p["metadata"]["name"] for p in fake.conv_pods(conv, live=False)]
    kubehelp.wait_until(lambda: not fake.conv_pods(conv, live=False), timeout,
                        "the conversation's pod gone")
    if s is not None:
        # codepod heard of it too: a runner it started ahead in that pod (for
        # the conversation's next execution) has ended, so the next
        # execution does not take it (the engine's race, not the snapshots')
        try:
            kubehelp.wait_until(lambda: [m for m in s.log_events("kube.supervisor_gone")
                                         if m.get("pod") in names], 3, "supervisor gone")
        except AssertionError:
            pass
        time.sleep(0.3)


def count(s, event, pred=lambda m: True):
    return len([m for m in s.log_events(event) if pred(m)])


def test_reaped_pod_restored_byte_for_byte(store, fake):
    d = tempfile.mkdtemp(prefix="ksnap-")
    prefix = snaphelp.new_prefix()
    conv = kubehelp.new_conv("reap")
    s = kube_session(store, fake, d, prefix, "--idle-ttl", "3")
    try:
        r = s.run(WRITE_MANY.replace("BIG_MIB", str(BIG_MIB)), conversation=conv, timeout=600,
                  policy={"timeoutMs": 600000})
        assert r["status"] == "succeeded", kubehelp.describe(r, s)
        assert "restoreMs" not in r["usage"]  # a new pod, nothing to restore
        before, _ = tree(s, conv)
        assert len(before) > 300
        first_pod = fake.conv_pods(conv)[0]["metadata"]["uid"]
        # The reaper: a snapshot first, then the pod goes.
        snaphelp.wait_event(s, "snapshot.before_reap", timeout=120)
        wait_no_pod(fake, conv, timeout=300, s=s)
        reap_i = [m["event"] for m in s.log_events()
                  if m["event"] in ("snapshot.before_reap", "kube.reap", "snapshot.done",
                                    "snapshot.unchanged")]
        assert reap_i.index("snapshot.before_reap") < reap_i.index("kube.reap"), reap_i
        m = snaphelp.manifest(store, prefix, conv)
        assert m and m["bytes"] >= BIG_MIB << 20, m
        # Never the raw conversation key in the store.
        st, body = store.request("GET", "/" + store.bucket, query="list-type=2&prefix=" + prefix)
        assert conv.encode() not in body
        # A new pod, restored before the first execution runs in it.
        after, r = tree(s, conv, timeout=600)
        assert r["usage"]["restoreMs"] >= 0, r["usage"]
        assert fake.conv_pods(conv)[0]["metadata"]["uid"] != first_pod
        assert after == before
        # Its runner started beside the restore (a channel of the pod's
        # supervisor, opened before the restore ended); its program, which
        # saw the whole workspace, only after it.
        order = [m["event"] for m in s.log_events()
                 if m["event"] == "snapshot.pod_restored"
                 or (m["event"] == "kube.exec" and m.get("id") == r["id"])]
        assert order == ["kube.exec", "snapshot.pod_restored"], order
        # The restore's write never waited for the new pod's supervisor: asked
        # for before it was up (the snapshot fetched by the time the pod was
        # ready), it had an exec of its own, opened before the supervisor
        # was up (it runs no program: no pod helper needed), so it overlaps
        # the start of the execution's runner; asked for later, on it.
        pod = fake.conv_pods(conv)[0]["metadata"]["name"]  # (the first pod's name too)
        evs = s.log_events()
        ready = max(i for i, m in enumerate(evs) if m["event"] == "kube.ready" and m.get("pod") == pod)

        def at(pred):
            return next(i for i in range(ready, len(evs)) if pred(evs[i]))
        asked = at(lambda m: m["event"] == "exec.start" and ":archive_write-" in m.get("id", ""))
        wid = evs[asked]["id"]
        opened = at(lambda m: m["event"] == "kube.exec" and m.get("id") == wid)
        up = at(lambda m: m["event"] == "kube.supervisor_ready" and m.get("pod") == pod)
        if up > asked:
            assert opened < up and "channel" not in evs[opened], (evs[asked], evs[opened], evs[up])
        else:
            assert "channel" in evs[opened], (evs[up], evs[asked], evs[opened])
        # Restored and read back unchanged: no upload for it.
        r2 = s.run("return 2", conversation=conv)
        assert "restoreMs" not in r2["usage"]
    finally:
        assert s.close(timeout=600) == 0


def write_small(s, conv, n=20, tag="x"):
    r = s.run("const fs = require('fs'); fs.mkdirSync('d', {recursive: true});"
              "for (let i = 0; i < %d; i++) fs.writeFileSync('d/f' + i, '%s' + i);"
              "return 1" % (n, tag), conversation=conv, timeout=120)
    assert r["status"] == "succeeded", kubehelp.describe(r, s)


READ_SMALL = "return require('fs').readdirSync('d').length + ':' + require('fs').readFileSync('d/f3', 'utf8')"


def test_warm_pool_pods_are_restored_too(store, fake):
    d = tempfile.mkdtemp(prefix="ksnap-")
    prefix = snaphelp.new_prefix()
    conv = kubehelp.new_conv("warm")
    s = kube_session(store, fake, d, prefix, "--warm-pool", "1")
    try:
        kubehelp.wait_until(lambda: fake.warm_pods(), 60, "a warm pod")
        write_small(s, conv, tag="w")
        assert count(s, "kube.claimed") == 1
        snaphelp.wait_event(s, "snapshot.done", timeout=120)
        pod = fake.conv_pods(conv)[0]["metadata"]["name"]
        assert pod.startswith("codepod-warm-")
        fake.delete_pod(pod, grace=0)  # its node went away
        wait_no_pod(fake, conv, s=s)
        kubehelp.wait_until(lambda: fake.warm_pods(), 60, "the pool refilled")
        r = s.run(READ_SMALL, conversation=conv, timeout=120)
        assert r["status"] == "succeeded", kubehelp.describe(r, s)
        assert r["result"] == "20:w3"
        assert r["usage"]["restoreMs"] >= 0
        assert count(s, "kube.claimed") == 2
        new = fake.conv_pods(conv)[0]
        assert new["metadata"]["name"].startswith("codepod-warm-") and new["metadata"]["name"] != pod
        # Restored: the annotation that held others back is gone.
        assert "codepod.dev/restore-pending" not in new["metadata"].get("annotations", {})
        assert new["metadata"]["annotations"]["codepod.dev/snapshot"] == snaphelp.conv_hash(conv)
    finally:
        assert s.close(timeout=120) == 0


def test_the_store_down_during_a_restore(store, fake):
    d = tempfile.mkdtemp(prefix="ksnap-")
    prefix = snaphelp.new_prefix()
    conv = kubehelp.new_conv("down")
    s = kube_session(store, fake, d, prefix)
    try:
        write_small(s, conv, tag="k")
        snaphelp.wait_event(s, "snapshot.done", timeout=120)
        store.stop_gateway()
        try:
            fake.delete_pod(fake.conv_pods(conv)[0]["metadata"]["name"], grace=0)
            wait_no_pod(fake, conv, s=s)
            r = s.run(READ_SMALL, conversation=conv, timeout=180)
            err = kubehelp.harness.assert_failed(r, "SANDBOX_UNAVAILABLE")
            assert "unreachable" in err["message"], err
            # Never an empty workspace: the pod it could not fill is gone.
            kubehelp.wait_until(lambda: not fake.conv_pods(conv), 60, "the unfilled pod deleted")
        finally:
            store.start_gateway()
        r = s.run(READ_SMALL, conversation=conv, timeout=180)
        assert r["status"] == "succeeded", kubehelp.describe(r, s)
        assert r["result"] == "20:k3"
        assert r["usage"]["restoreMs"] >= 0
    finally:
        assert s.close(timeout=120) == 0


def test_a_refused_restore_names_the_store(store, fake):
    d = tempfile.mkdtemp(prefix="ksnap-")
    prefix = snaphelp.new_prefix()
    conv = kubehelp.new_conv("refuse")
    s = kube_session(store, fake, d, prefix)
    try:
        write_small(s, conv, tag="r")
        snaphelp.wait_event(s, "snapshot.done", timeout=120)
    finally:
        assert s.close(timeout=120) == 0
    fake.delete_pod(fake.conv_pods(conv)[0]["metadata"]["name"], grace=0)
    wait_no_pod(fake, conv)
    # Another replica whose secret is wrong: 403, not an empty workspace.
    s = kube_session(store, fake, d + "/b", prefix, secret="wrong-secret")
    try:
        r = s.run(READ_SMALL, conversation=conv, timeout=180)
        err = kubehelp.harness.assert_failed(r, "SANDBOX_UNAVAILABLE")
        assert "refused" in err["message"], err
    finally:
        assert s.close(timeout=120) == 0


def test_a_corrupted_archive_is_refused_and_the_pod_goes(store, fake):
    d = tempfile.mkdtemp(prefix="ksnap-")
    prefix = snaphelp.new_prefix()
    conv = kubehelp.new_conv("bad")
    s = kube_session(store, fake, d, prefix)
    try:
        write_small(s, conv, tag="c")
        snaphelp.wait_event(s, "snapshot.done", timeout=120)
        m = snaphelp.manifest(store, prefix, conv)
        path = "/%s/%s" % (store.bucket, m["archive"])
        st, body = store.request("GET", path)
        flipped = bytearray(body)
        flipped[len(flipped) // 2] ^= 0xFF
        assert store.request("PUT", path, body=bytes(flipped))[0] == 200
        fake.delete_pod(fake.conv_pods(conv)[0]["metadata"]["name"], grace=0)
        wait_no_pod(fake, conv, s=s)
        r = s.run(READ_SMALL, conversation=conv, timeout=180)
        err = kubehelp.harness.assert_failed(r, "SANDBOX_UNAVAILABLE")
        assert "SHA-256" in err["message"], err
        kubehelp.wait_until(lambda: not fake.conv_pods(conv), 60, "the unfilled pod deleted")
        # Put right, the next execution restores it.
        assert store.request("PUT", path, body=body)[0] == 200
        r = s.run(READ_SMALL, conversation=conv, timeout=180)
        assert r["status"] == "succeeded" and r["result"] == "20:c3", kubehelp.describe(r, s)
    finally:
        assert s.close(timeout=120) == 0


def test_the_store_down_during_a_snapshot(store, fake, tmp_path):
    sys.path.insert(0, os.path.join(HERE, "..", "serve"))
    from util import Pump
    from wsclient import http_request
    from wssession import Server
    prefix = snaphelp.new_prefix()
    env = dict(os.environ)
    env.update(store.env())
    srv = Server(tmp_path / "srv", env=env, args=[
        "--backend", "kubernetes", "--kubeconfig", fake.kubeconfig, "--log-level", "debug",
        "--snapshot-url", "s3://%s/%s" % (store.bucket, prefix), "--s3-endpoint", store.endpoint,
        "--s3-region", store.region])
    conv = kubehelp.new_conv("sdown")

    def failures():
        st, _, body = http_request(srv.host, srv.port, "GET", "/metrics")
        assert st == 200
        for line in body.decode().splitlines():
            if line.startswith("codepod_snapshot_failures_total"):
                return int(float(line.split()[-1]))
        raise AssertionError("no codepod_snapshot_failures_total in /metrics")
    try:
        p = Pump(srv.connect())
        p.execute("e0", "return 0", conversation=conv)
        assert p.result("e0", 120)["status"] == "succeeded"
        assert failures() == 0
        store.stop_gateway()
        try:
            t0 = time.monotonic()
            p.execute("e1", "require('fs').writeFileSync('f', 'data'); return 7", conversation=conv)
            r = p.result("e1", 60)
            assert r["status"] == "succeeded" and r["result"] == 7, r
            assert time.monotonic() - t0 < 30  # the outcome never waits for the store
            failed = srv.wait_logs("snapshot.failed", lambda ls: ls, timeout=120)[0]
            assert failed["level"] == "warn"
            assert failed["conversation"] == snaphelp.conv_hash(conv)
            assert "unreachable" in failed["reason"], failed
            assert failures() >= 1
            p.execute("e2", "return 8", conversation=conv)
            assert p.result("e2", 60)["result"] == 8
        finally:
            store.start_gateway()
        # The next change is snapshotted.
        p.execute("e3", "require('fs').writeFileSync('g', 'more'); return 9", conversation=conv)
        assert p.result("e3", 60)["result"] == 9
        srv.wait_logs("snapshot.pod_done", lambda ls: ls, timeout=120)
        assert snaphelp.manifest(store, prefix, conv) is not None
    finally:
        rc = srv.stop()
        assert rc == 0, srv.stderr_text()


def test_delete_racing_an_execution(store, fake):
    d = tempfile.mkdtemp(prefix="ksnap-")
    prefix = snaphelp.new_prefix()
    conv = kubehelp.new_conv("del")
    s = kube_session(store, fake, d, prefix)
    try:
        write_small(s, conv, tag="z")
        snaphelp.wait_event(s, "snapshot.done", timeout=120)
        assert snaphelp.manifest(store, prefix, conv)
        eid = s.execute("require('fs').writeFileSync('late', 'x');"
                        "await new Promise(r => setTimeout(r, 3000)); return 1", conversation=conv)
        time.sleep(0.5)
        s.send({"type": "delete_conversation", "id": "del1", "conversation": conv})
        gone = s.wait_for(lambda m: m.get("id") == "del1", 180, "conversation_deleted")
        assert gone["type"] == "conversation_deleted", gone
        r = s.wait_result(eid, 60)
        assert r["status"] != "succeeded", r
        # Answered only once all is gone: the pod, every snapshot.
        assert not fake.conv_pods(conv, live=False)
        st, body = store.request("GET", "/" + store.bucket, query="list-type=2&prefix=%s/%s" % (
            prefix, snaphelp.conv_hash(conv)))
        assert b"<Key>" not in body, body
        # And nothing comes back afterwards: no late snapshot, a fresh workspace.
        time.sleep(4)
        assert snaphelp.manifest(store, prefix, conv) is None
        r = s.run("return require('fs').readdirSync('.').length", conversation=conv, timeout=120)
        assert r["status"] == "succeeded" and r["result"] == 0, r
        assert "restoreMs" not in r["usage"]
    finally:
        assert s.close(timeout=120) == 0


# Each round writes one generation into every file: an archive mixed from
# two workspaces (or two moments) would hold two generations.
WRITE_GEN = r"""
const fs = require('fs');
fs.mkdirSync('g', {recursive: true});
const body = 'GEN'.repeat(20000);
for (let i = 0; i < 40; i++) fs.writeFileSync('g/f' + i, body);
return 'GEN';
"""

CHECK_GEN = r"""
const fs = require('fs');
const seen = new Set(fs.readdirSync('g').map(n => fs.readFileSync('g/' + n, 'utf8').slice(0, 6)));
return [...seen];
"""


def test_two_replicas_never_make_a_mixed_archive(store, fake):
    d = tempfile.mkdtemp(prefix="ksnap-")
    prefix = snaphelp.new_prefix()
    conv = kubehelp.new_conv("two")
    a = kube_session(store, fake, d + "/a", prefix)
    b = kube_session(store, fake, d + "/b", prefix)
    try:
        for gen in range(1, 5):
            tag = "g%05d" % gen
            ra = a.run(WRITE_GEN.replace("GEN", tag), conversation=conv, timeout=120)
            assert ra["status"] == "succeeded", kubehelp.describe(ra, a)
            # The other replica's execution: both now snapshot the pod at once.
            rb = b.run(CHECK_GEN, conversation=conv, timeout=120)
            assert rb["result"] == [tag], rb
            snaphelp.wait_event(a, "snapshot.pod_done", after=gen - 1, timeout=120)
            snaphelp.wait_event(b, "snapshot.pod_done", after=gen - 1, timeout=120)
        assert len(fake.conv_pods(conv)) == 1
    finally:
        assert a.close(timeout=120) == 0
        assert b.close(timeout=120) == 0
    # The last manifest names one whole workspace: restored into a new pod.
    fake.delete_pod(fake.conv_pods(conv)[0]["metadata"]["name"], grace=0)
    wait_no_pod(fake, conv)
    c = kube_session(store, fake, d + "/c", prefix)
    try:
        r = c.run(CHECK_GEN, conversation=conv, timeout=180)
        assert r["status"] == "succeeded", kubehelp.describe(r, c)
        assert r["result"] == ["g00004"], r
        assert r["usage"]["restoreMs"] >= 0
    finally:
        assert c.close(timeout=120) == 0


def test_drain_takes_the_snapshot_due(store, fake):
    d = tempfile.mkdtemp(prefix="ksnap-")
    prefix = snaphelp.new_prefix()
    conv = kubehelp.new_conv("drain")
    # A debounce far longer than the test: only the drain can take it.
    s = kube_session(store, fake, d, prefix)
    try:
        write_small(s, conv, tag="d")
    finally:
        assert s.close(timeout=120) == 0  # EOF right away: the drain snapshots
    assert count(s, "snapshot.pod_done") == 1, kubehelp.log(s)
    m = snaphelp.manifest(store, prefix, conv)
    assert m and m["files"] == 21, m


# ---- a pod of an older replica's template, idle past
# --template-drift-idle, replaced by one of the newer template ----

def template_of(pod):
    return pod["metadata"]["labels"]["codepod.dev/template"]


def test_template_drift_with_a_store_carries_the_files_over(store, fake):
    d = tempfile.mkdtemp(prefix="ksnap-")
    prefix = snaphelp.new_prefix()
    conv = kubehelp.new_conv("drift")
    # A: the built-in template, started first (the older release). Both ask
    # for drift replacement: only the newer replica's template wins.
    a = kube_session(store, fake, d + "/a", prefix, "--template-drift-idle", "3")
    try:
        write_small(a, conv, tag="t")
        old = fake.conv_pods(conv)[0]
        snaphelp.wait_event(a, "snapshot.done", timeout=120)
        time.sleep(1.1)  # replica start times are in seconds
        b = kube_session(store, fake, d + "/b", prefix, "--pod-template", kubehelp.CHART_TEMPLATE,
                         "--template-drift-idle", "3")
        try:
            # B serves A's pod as it is while it is in use.
            r = b.run(READ_SMALL, conversation=conv, timeout=120)
            assert r["result"] == "20:t3", kubehelp.describe(r, b)
            assert fake.conv_pods(conv)[0]["metadata"]["uid"] == old["metadata"]["uid"]
            # Idle past 3 s: B snapshots it, deletes it.
            ev = snaphelp.wait_event(b, "snapshot.before_reap", timeout=120)
            assert ev["why"] == "drift", ev
            kubehelp.wait_until(lambda: not [p for p in fake.conv_pods(conv, live=False)
                                             if p["metadata"]["uid"] == old["metadata"]["uid"]],
                                60, "the drifted pod gone")
            assert [m for m in b.log_events("kube.reap") if m["why"] == "drift"]
            # The next execution: a pod of B's template, with the files.
            r = b.run(READ_SMALL, conversation=conv, timeout=120)
            assert r["status"] == "succeeded" and r["result"] == "20:t3", kubehelp.describe(r, b)
            assert r["usage"]["restoreMs"] >= 0
            new = fake.conv_pods(conv)[0]
            assert template_of(new) != template_of(old)
            # A (older) never replaces B's pod for its template, however idle.
            time.sleep(6)
            assert fake.conv_pods(conv)[0]["metadata"]["uid"] == new["metadata"]["uid"]
            assert not [m for m in a.log_events("kube.reap") if m["why"] == "drift"]
            r = a.run(READ_SMALL, conversation=conv, timeout=120)
            assert r["result"] == "20:t3"
            assert fake.conv_pods(conv)[0]["metadata"]["uid"] == new["metadata"]["uid"]
        finally:
            assert b.close(timeout=120) == 0
    finally:
        assert a.close(timeout=120) == 0


def test_template_drift_without_a_store_keeps_the_pod(fake, tmp_path):
    conv = kubehelp.new_conv("keep")
    a = kubehelp.start_session(fake, tmp_path / "a")
    try:
        r = a.run("require('fs').writeFileSync('kept', 'yes'); return 1", conversation=conv,
                  timeout=120)
        assert r["status"] == "succeeded", kubehelp.describe(r, a)
        old = fake.conv_pods(conv)[0]
        time.sleep(1.1)
        b = kubehelp.start_session(fake, tmp_path / "b", ["--pod-template", kubehelp.CHART_TEMPLATE,
                                                         "--template-drift-idle", "2"])
        try:
            ev = snaphelp.wait_event(b, "kube.template_drift_kept", timeout=60)
            assert ev["pod"] == old["metadata"]["name"] and "no snapshot store" in ev["why"]
            time.sleep(3)
            assert len([m for m in b.log_events("kube.template_drift_kept")
                        if m["pod"] == old["metadata"]["name"]]) == 1  # said once
            r = b.run("return require('fs').readFileSync('kept', 'utf8')", conversation=conv,
                      timeout=120)
            assert r["result"] == "yes", kubehelp.describe(r, b)
            assert fake.conv_pods(conv)[0]["metadata"]["uid"] == old["metadata"]["uid"]
        finally:
            assert b.close(timeout=120) == 0
    finally:
        assert a.close(timeout=120) == 0
