#!/usr/bin/env python3
"""bench_kube_snap.py - `make bench` section (k): snapshots on the Kubernetes
backend. Against the fake API server (tests/fakekube, its default schedule)
and the test store (tests/store/ceph.py, a one-node Ceph with radosgw), one
`codepod serve --stdio --backend kubernetes --snapshot-url ...`:

  empty    `return 1` in a new conversation: the pod is created, the store
           says it has no snapshot (404), the execution runs
  restore  `return 1` in a conversation whose 10 MiB workspace (64 files) is
           in the store and whose pod was deleted: the pod is created, the
           snapshot fetched (overlapping the pod's start), written into the
           pod through archive_write, then the execution runs

alternating, execute written -> result read. Goal: restore / empty <= 1.3x
(medians). usage.restoreMs (pod ready -> workspace written) is given too.

Prints one JSON line on stdout. Exit 1 when an execution failed, 2 when the
bench could not run.

usage: bench_kube_snap.py [--quick]
env:   CODEPOD_BIN (the built codepod)
"""
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "store"))
sys.path.insert(0, os.path.join(ROOT, "tests", "kube"))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

WRITE_10MIB = r"""
const fs = require('fs'), crypto = require('crypto');
fs.mkdirSync('data', {recursive: true});
for (let i = 0; i < 64; i++) fs.writeFileSync('data/f' + i, crypto.randomBytes(160 * 1024));
return 1;
"""


class Dirs:
    def mktemp(self, name):
        return Path(tempfile.mkdtemp(prefix="bench-" + name))


def main():
    quick = "--quick" in sys.argv[1:]
    runs = 3 if quick else 7
    try:
        import ceph
        import kubehelp
        import snaphelp
        spec = importlib.util.spec_from_file_location(
            "fakekube_helpers_bench", os.path.join(ROOT, "tests", "fakekube", "conftest.py"))
        fk = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(fk)
        store = ceph.Ceph.start()
    except Exception as e:  # noqa: BLE001 - the bench reports what it could not do
        print("bench_kube_snap: cannot start: %s" % e, file=sys.stderr)
        return 2
    fake = None
    s = None
    failed = []
    try:
        raw = fk.start(Dirs(), "--exec-path", str(kubehelp.NODE_DIR))
        fake = kubehelp.FakeApi(raw)
        d = tempfile.mkdtemp(prefix="bench-ksnap-")
        prefix = snaphelp.new_prefix()
        s = snaphelp.session(store, d, prefix, extra=["--backend", "kubernetes", "--kubeconfig",
                                                      fake.kubeconfig])
        s.conv_prefix = ""
        conv = "bench-restore-" + uuid.uuid4().hex[:8]
        r = s.run(WRITE_10MIB, conversation=conv, timeout=300)
        if r["status"] != "succeeded":
            raise RuntimeError("writing the workspace failed: %s" % json.dumps(r)[:500])
        snaphelp.wait_event(s, "snapshot.done", timeout=120)
        m = snaphelp.manifest(store, prefix, conv)
        empty_ms, restore_ms, restore_usage = [], [], []

        def drop_pod():
            for p in fake.conv_pods(conv):
                fake.delete_pod(p["metadata"]["name"], grace=0)
            kubehelp.wait_until(lambda: not fake.conv_pods(conv, live=False), 60, "pod gone")
            # codepod hears of it (its runner started ahead in that pod ends)
            time.sleep(1.0)

        drop_pod()
        for i in range(runs):
            t0 = time.monotonic()
            r = s.run("return 1;", conversation="bench-empty-" + uuid.uuid4().hex[:8], timeout=120)
            if r["status"] != "succeeded":
                failed.append("empty: %s" % json.dumps(r)[:300])
            empty_ms.append((time.monotonic() - t0) * 1000)
            t0 = time.monotonic()
            r = s.run("return 1;", conversation=conv, timeout=120)
            if r["status"] != "succeeded" or "restoreMs" not in r.get("usage", {}):
                failed.append("restore: %s" % json.dumps(r)[:300])
            restore_ms.append((time.monotonic() - t0) * 1000)
            restore_usage.append(r.get("usage", {}).get("restoreMs", -1))
            drop_pod()
        e, rs = statistics.median(empty_ms), statistics.median(restore_ms)
        out = {"runs": runs, "workspace_bytes": m["bytes"] if m else None,
               "archive_bytes": m["size"] if m else None,
               "empty": {"median_ms": e, "runs_ms": empty_ms},
               "restore": {"median_ms": rs, "runs_ms": restore_ms,
                           "restoreMs_median": statistics.median(restore_usage)},
               "ratio": rs / e if e else None, "failed": failed}
        print(json.dumps(out))
    except Exception as e:  # noqa: BLE001
        print("bench_kube_snap: %s" % e, file=sys.stderr)
        return 2
    finally:
        if s is not None:
            try:
                s.close(timeout=120)
            except Exception:  # noqa: BLE001
                pass
        if fake is not None:
            fk.stop(fake.raw)
        store.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
