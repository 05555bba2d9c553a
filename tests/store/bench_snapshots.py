"""Snapshot and restore throughput against the test store, next to curl's
PUT and GET of the same archive to the same store (the issue's goal: each
at least half of curl's). Prints the figures; asserts nothing.

    CODEPOD_BIN=build/codepod /usr/bin/python3 tests/store/bench_snapshots.py [MIB] [FILES]
"""
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ceph  # noqa: E402
import snaphelp  # noqa: E402


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


def main():
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    files = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    store = ceph.Ceph.start(memstore_bytes=(mib * 6 + 512) << 20)
    try:
        prefix = snaphelp.new_prefix()
        d = tempfile.mkdtemp(prefix="bench-")
        s = snaphelp.session(store, d + "/a", prefix)
        js = """const fs = require('fs'), crypto = require('crypto');
        const each = Math.floor(MIB * 1048576 / FILES);
        for (let i = 0; i < FILES; i++) {
          fs.mkdirSync('d' + (i % 20), {recursive: true});
          fs.writeFileSync('d' + (i % 20) + '/f' + i, crypto.randomBytes(each));
        }
        return 1""".replace("MIB", str(mib)).replace("FILES", str(files))
        assert s.run(js, conversation="bench", timeout=600)["status"] == "succeeded"
        done = snaphelp.wait_event(s, "snapshot.done", timeout=600)
        up = snaphelp.wait_event(s, "snapshot.upload", timeout=600)
        s.close(timeout=600)
        m = snaphelp.manifest(store, prefix, "bench")
        b = snaphelp.session(store, d + "/b", prefix)
        r = b.run("return 1", conversation="bench", timeout=600)
        b.close(timeout=600)
        restore_ms = r["usage"]["restoreMs"]
        dl = snaphelp.wait_event(b, "snapshot.downloaded")
        arch = os.path.join(d, "archive")
        url = "%s/%s/%s" % (store.endpoint, store.bucket, m["archive"])
        curl_get = min(curl(store, "GET", url, arch) for _ in range(2))
        url2 = "%s/%s/%s-curl" % (store.endpoint, store.bucket, m["archive"])
        curl_put = min(curl(store, "PUT", url2, arch) for _ in range(2))
        mb = m["size"] / 1e6
        snap_s, rest_s = done["ms"] / 1000, restore_ms / 1000
        print("workspace: %d MiB in %d files; archive %.1f MB" % (mib, files, mb))
        print("snapshot (pack + upload): %.2f s, %.1f MB/s; curl PUT %.2f s, %.1f MB/s; "
              "ratio %.2f" % (snap_s, mb / snap_s, curl_put, mb / curl_put, curl_put / snap_s))
        print("  of which fingerprint + pack + hash: %.2f s" % (up["packMs"] / 1000))
        print("restore (download + verify + unpack): %.2f s, %.1f MB/s; curl GET %.2f s, "
              "%.1f MB/s; ratio %.2f" % (rest_s, mb / rest_s, curl_get, mb / curl_get,
                                         curl_get / rest_s))
        print("  of which manifest + download: %.2f s" % (dl["ms"] / 1000))
    finally:
        store.stop()


if __name__ == "__main__":
    main()
