"""The S3 client in its GCS mode (store/s3.h gcp_metadata, store/gcp_token.h)
against a fake metadata server and a fake GCS XML API on loopback
(fakegcs.py): each request carries `Authorization: Bearer` with a token from
the metadata server and no AWS signature; the token is fetched once and
kept, fetched again before it expires and after a 401; a metadata server
that is down or refuses is told as such. A real GCS cannot be reached from
here; the signing path is tested against the real Ceph RGW
(test_s3_client.py)."""
import hashlib
import json
import os
import socket
import subprocess
import time

import pytest

import fakegcs
import s3tool



def tool_env(md, g, host=None):
    e = dict(os.environ)
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
              "S3_CREDENTIALS_FILE", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        e.pop(k, None)
    e.update({"S3_BUCKET": g.bucket, "S3_ENDPOINT": g.endpoint, "S3_REGION": "auto",
              "S3_AUTH": "gcp", "GCE_METADATA_HOST": host or md.host})
    return e


def tool(md, g, *args, host=None, stdin=None):
    r = subprocess.run([s3tool.tool_path(), *args], env=tool_env(md, g, host), input=stdin,
                       capture_output=True, text=True, timeout=120)
    lines = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
    return lines, r.stdout + r.stderr


def statuses(g, n):
    """The statuses of the store's first @n requests (its log is written
    just after each answer went out)."""
    end = time.monotonic() + 10
    while len(g.requests()) < n and time.monotonic() < end:
        time.sleep(0.02)
    return [x[4] for x in g.requests()]


class PutEach:
    """s3_tool put-each: one PUT per line written, in one process (so one
    client and its kept token)."""

    def __init__(self, md, g, key, src):
        self.p = subprocess.Popen([s3tool.tool_path(), "put-each", key, str(src)],
                                  env=tool_env(md, g), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def put(self):
        self.p.stdin.write("go\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)
        out, err = self.p.stdout.read(), self.p.stderr.read()
        return [json.loads(l) for l in out.splitlines() if l.strip()], out + err


def test_every_call_with_a_bearer_token_and_no_signature(gcs, tmp_path):
    md, g = gcs
    src = tmp_path / "src"
    src.write_bytes(os.urandom(70_000))
    lines, _ = tool(md, g, "put", "t/one/a.bin", str(src))
    assert lines[0]["rc"] == 0 and lines[0]["status"] == 200, lines
    assert g.objects["t/one/a.bin"][0] == src.read_bytes()
    dst = tmp_path / "dst"
    lines, _ = tool(md, g, "get", "t/one/a.bin", str(dst))
    assert lines[0]["rc"] == 0 and dst.read_bytes() == src.read_bytes()
    lines, _ = tool(md, g, "head", "t/one/a.bin")
    assert lines[0]["rc"] == 0 and lines[0]["size"] == 70_000 and lines[0]["mtime"] > 0
    lines, _ = tool(md, g, "list", "t/one/")
    assert [l["key"] for l in lines if "key" in l] == ["t/one/a.bin"]
    lines, _ = tool(md, g, "delete", "t/one/a.bin")
    assert lines[0]["rc"] == 0 and "t/one/a.bin" not in g.objects
    lines, _ = tool(md, g, "get", "t/one/a.bin", str(dst))
    assert lines[0]["rc"] == s3tool.CP_E_NOT_FOUND
    reqs = g.requests()
    assert reqs and all(r[3] == "Bearer" and r[5] == [] for r in reqs), reqs
    # The metadata server was asked as GKE's wants to be asked.
    path, headers = md.requests[0]
    assert path == fakegcs.TOKEN_PATH and headers["Metadata-Flavor"] == "Google"


def test_multipart_upload_with_gcs_query_names(gcs, tmp_path):
    md, g = gcs
    src = tmp_path / "big"
    data = os.urandom(12 * 1024 * 1024 + 777)
    src.write_bytes(data)
    lines, _ = tool(md, g, "put", "t/mp/obj", str(src), str(5 * 1024 * 1024))
    assert lines[0]["rc"] == 0, lines
    assert hashlib.sha256(g.objects["t/mp/obj"][0]).digest() == hashlib.sha256(data).digest()
    q = [(r[0], r[2]) for r in g.requests()]
    # Initiate as GCS documents it (a bare `uploads`), three parts, one complete.
    assert ("POST", "uploads") in q
    assert len([1 for m, qs in q if m == "PUT" and qs.startswith("partNumber=")]) == 3
    assert g.uploads == {}


def test_the_token_is_kept_and_fetched_again_before_it_expires(tmp_path):
    md = fakegcs.MetadataServer(expires_in=4)  # kept for half its life: 2 s
    g = fakegcs.FakeGCS(md)
    src = tmp_path / "s"
    src.write_bytes(b"abc")
    try:
        p = PutEach(md, g, "t/keep", src)
        assert [p.put()["rc"] for _ in range(3)] == [0, 0, 0]
        assert md.fetches() == 1
        time.sleep(2.3)
        assert p.put()["rc"] == 0
        assert md.fetches() == 2
        lines, _ = p.close()
        assert lines[-1] == {"op": "token", "fetches": 2}
        # Every request used a token that was valid when it was sent.
        assert all(r[4] == 200 for r in g.requests())
    finally:
        g.stop()
        md.stop()


def test_a_401_drops_the_token_and_the_request_goes_again(gcs, tmp_path):
    md, g = gcs
    src = tmp_path / "s"
    src.write_bytes(b"abc")
    p = PutEach(md, g, "t/revoked", src)
    assert p.put()["rc"] == 0
    md.revoke_all()  # as when a token is revoked before its expiry
    r = p.put()
    assert r["rc"] == 0 and r["status"] == 200, r
    lines, _ = p.close()
    assert lines[-1]["fetches"] == 2
    assert statuses(g, 3) == [200, 401, 200]


def test_a_token_refused_twice_is_a_refusal(gcs, tmp_path):
    md, g = gcs
    src = tmp_path / "s"
    src.write_bytes(b"abc")
    g.md = type("Never", (), {"valid": staticmethod(lambda tok: False)})()
    lines, out = tool(md, g, "put", "t/never", str(src))
    assert lines[0]["rc"] == s3tool.CP_E_AUTH and lines[0]["status"] == 401, lines
    assert "AuthenticationRequired" in lines[0]["msg"]
    assert statuses(g, 2) == [401, 401]  # sent once more, not forever
    for tok in md.issued():
        assert tok not in out


def test_the_metadata_server_down_or_refusing(gcs, tmp_path):
    md, g = gcs
    src = tmp_path / "s"
    src.write_bytes(b"abc")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = "127.0.0.1:%d" % s.getsockname()[1]
    lines, _ = tool(md, g, "put", "t/x", str(src), host=dead)
    assert lines[0]["rc"] == s3tool.CP_E_RETRY, lines
    assert "metadata server" in lines[0]["msg"] and dead in lines[0]["msg"]
    assert g.requests() == []  # nothing went to the store without a token
    md.status = 404  # no service account bound to this pod
    lines, _ = tool(md, g, "head", "t/x")
    assert lines[0]["rc"] == s3tool.CP_E_AUTH, lines
    assert "404" in lines[0]["msg"] and "Workload Identity" in lines[0]["msg"]
    md.status = 200
    lines, _ = tool(md, g, "put", "t/x", str(src))
    assert lines[0]["rc"] == 0


def test_a_metadata_server_not_ready_yet_is_asked_again(gcs, tmp_path):
    md, g = gcs
    src = tmp_path / "s"
    src.write_bytes(b"abc")
    md.fail_next = 2  # as GKE's may answer a new pod's first requests
    t = time.monotonic()
    lines, _ = tool(md, g, "put", "t/later", str(src))
    assert lines[0]["rc"] == 0, lines
    assert lines[-1] == {"op": "token", "fetches": 3}
    assert time.monotonic() - t >= 1.4  # after 0.5 s, then 1 s
    md.fail_next = 3  # three attempts, then the failure is told
    lines, _ = tool(md, g, "head", "t/later")
    assert lines[0]["rc"] == s3tool.CP_E_HTTP and "503" in lines[0]["msg"], lines
