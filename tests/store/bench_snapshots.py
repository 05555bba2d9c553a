"""Snapshot and restore throughput against the test store (a one-node Ceph
RGW, ceph.py), next to curl's PUT and GET of the same archive to the same
store: the issue's goal is each at least half of curl's. Figures only,
nothing asserted. `make bench` runs it as section (l).

A workspace of MIB MiB in FILES files (random bytes: the archive is about
as large) is snapshotted ROUNDS times (one file touched between rounds, so
each round packs and uploads the whole workspace again), each round
followed by a curl PUT of the same archive; then restored ROUNDS times into
new state folders (another machine each time), each followed by a curl GET.
Snapshot time: from the snapshot's start to its manifest written (pack +
upload, streamed, + manifest); restore time: `usage.restoreMs` (manifest,
download + unpack streamed, verification), and the restoring execution's
wall time beside it (reported, what the user waits). The ratio is curl's
time over codepod's, per round; the median is reported.

    CODEPOD_BIN=build/codepod /usr/bin/python3 tests/store/bench_snapshots.py \
        [--quick] [--json] [MIB [FILES [ROUNDS]]]
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ceph  # noqa: E402
import snaphelp  # noqa: E402

WRITE = """const fs = require('fs'), crypto = require('crypto');
const each = Math.floor(MIB * 1048576 / FILES);
for (let i = 0; i < FILES; i++) {
  fs.mkdirSync('d' + (i % 20), {recursive: true});
  fs.writeFileSync('d' + (i % 20) + '/f' + i, crypto.randomBytes(each));
}
return 1"""


def curl(store, method, url, path):
    args = ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--aws-sigv4",
            "aws:amz:%s:s3" % store.region, "--user", "%s:%s" % (store.access_key,
                                                                 store.secret_key),
            "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"]
    if method == "PUT":
        args += ["-T", path]
    else:
        args = [a if a != "/dev/null" else path for a in args]
    t = time.monotonic()
    out = subprocess.run(args + [url], capture_output=True, text=True, check=True).stdout
    assert out.startswith("20"), out
    return time.monotonic() - t


def measure(mib, files, rounds):
    store = ceph.Ceph.start(memstore_bytes=(mib * (rounds + 6) + 512) << 20)
    d = tempfile.mkdtemp(prefix="bench-snap-")
    out = {"mib": mib, "files": files, "rounds": rounds, "snapshot": [], "restore": []}
    try:
        prefix = snaphelp.new_prefix()
        arch = os.path.join(d, "archive")
        s = snaphelp.session(store, d + "/a", prefix)
        try:
            js = WRITE.replace("MIB", str(mib)).replace("FILES", str(files))
            assert s.run(js, conversation="bench", timeout=600)["status"] == "succeeded"
            for i in range(rounds):
                if i:
                    assert s.run("require('fs').writeFileSync('touched', '%d'); return 1" % i,
                                 conversation="bench", timeout=600)["status"] == "succeeded"
                done = snaphelp.wait_event(s, "snapshot.done", timeout=600, after=i)
                m = snaphelp.manifest(store, prefix, "bench")
                url = "%s/%s/%s" % (store.endpoint, store.bucket, m["archive"])
                curl(store, "GET", url, arch)  # the archive, for curl's PUT
                put = curl(store, "PUT", url + "-curl", arch)
                store.request("DELETE", "/%s/%s-curl" % (store.bucket, m["archive"]))
                out["snapshot"].append({"s": done["ms"] / 1000, "curl_s": put,
                                        "bytes": m["size"]})
        finally:
            s.close(timeout=600)
        m = snaphelp.manifest(store, prefix, "bench")
        url = "%s/%s/%s" % (store.endpoint, store.bucket, m["archive"])
        for i in range(rounds):
            b = snaphelp.session(store, "%s/r%d" % (d, i), prefix)
            try:
                r = b.run("return 1", conversation="bench", timeout=600)
                assert r["status"] == "succeeded", r
            finally:
                b.close(timeout=600)
            get = curl(store, "GET", url, arch)
            out["restore"].append({"s": r["usage"]["restoreMs"] / 1000, "curl_s": get,
                                   "bytes": m["size"], "wall_s": r["usage"]["wallMs"] / 1000})
            shutil.rmtree("%s/r%d" % (d, i), ignore_errors=True)
    finally:
        store.stop()
        shutil.rmtree(d, ignore_errors=True)
    for k in ("snapshot", "restore"):
        rs = out[k]
        out[k + "_ratio"] = statistics.median(x["curl_s"] / x["s"] for x in rs)
        out[k + "_s"] = statistics.median(x["s"] for x in rs)
        out[k + "_curl_s"] = statistics.median(x["curl_s"] for x in rs)
    out["restore_wall_s"] = statistics.median(x["wall_s"] for x in out["restore"])
    out["archive_bytes"] = out["snapshot"][-1]["bytes"]
    return out


def main():
    argv = sys.argv[1:]
    quick = "--quick" in argv
    as_json = "--json" in argv
    nums = [int(a) for a in argv if not a.startswith("--")]
    mib = nums[0] if nums else 100
    files = nums[1] if len(nums) > 1 else 1000
    rounds = nums[2] if len(nums) > 2 else (2 if quick else 5)
    f = measure(mib, files, rounds)
    if as_json:
        print(json.dumps(f))
        return
    mb = f["archive_bytes"] / 1e6
    print("workspace: %d MiB in %d files; archive %.1f MB; %d rounds, medians" % (
        mib, files, mb, rounds))
    for k, what, verb in (("snapshot", "snapshot (pack + upload)", "PUT"),
                          ("restore", "restore (download + unpack + verify)", "GET")):
        print("%s: %.2f s, %.1f MB/s; curl %s %.2f s, %.1f MB/s; ratio %.2f (rounds: %s)" % (
            what, f[k + "_s"], mb / f[k + "_s"], verb, f[k + "_curl_s"], mb / f[k + "_curl_s"],
            f[k + "_ratio"], " ".join("%.2f" % (x["curl_s"] / x["s"]) for x in f[k])))
    print("first execution after a restore (what the user waits: restore, workspace, "
          "runner): %.2f s wall" % f["restore_wall_s"])


if __name__ == "__main__":
    main()
