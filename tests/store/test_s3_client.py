"""The S3 client (store/s3.h) against a real store that checks signatures:
what it writes other clients read back byte for byte, a wrong secret is
refused, multipart uploads assemble in order, a missing object is told
apart from a refusal and from a store that is down, and a credentials file
is read again when it changes."""
import hashlib
import os
import socket

import boto3
import botocore.config

import s3tool


def boto(store):
    return boto3.client("s3", endpoint_url=store.endpoint, region_name=store.region,
                        aws_access_key_id=store.access_key,
                        aws_secret_access_key=store.secret_key,
                        config=botocore.config.Config(s3={"addressing_style": "path"}))


def test_put_get_head_list_delete(store, tmp_path):
    src = tmp_path / "src"
    src.write_bytes(os.urandom(100_000))
    [r] = s3tool.run(store, "put", "t/one/a.bin", str(src))
    assert r["rc"] == 0 and r["status"] == 200
    # Another client reads what this one wrote.
    got = boto(store).get_object(Bucket=store.bucket, Key="t/one/a.bin")["Body"].read()
    assert got == src.read_bytes()
    dst = tmp_path / "dst"
    [r] = s3tool.run(store, "get", "t/one/a.bin", str(dst))
    assert r["rc"] == 0 and dst.read_bytes() == src.read_bytes()
    [r] = s3tool.run(store, "head", "t/one/a.bin")
    assert r["rc"] == 0 and r["size"] == 100_000 and r["mtime"] > 0
    lines = s3tool.run(store, "list", "t/one/")
    assert [l["key"] for l in lines if "key" in l] == ["t/one/a.bin"]
    assert lines[-1]["rc"] == 0
    [r] = s3tool.run(store, "delete", "t/one/a.bin")
    assert r["rc"] == 0
    [r] = s3tool.run(store, "get", "t/one/a.bin", str(dst))
    assert r["rc"] == s3tool.CP_E_NOT_FOUND and r["status"] == 404
    # Deleting what is gone is what was asked.
    [r] = s3tool.run(store, "delete", "t/one/a.bin")
    assert r["rc"] == 0


def test_a_wrong_secret_is_refused(store, tmp_path):
    src = tmp_path / "src"
    src.write_bytes(b"x" * 10)
    # Another last character (a secret ending in "0" made "0" the same one:
    # one run in sixteen passed a right secret as the wrong one).
    wrong = store.secret_key[:-1] + ("1" if store.secret_key.endswith("0") else "0")
    assert wrong != store.secret_key
    [r] = s3tool.run(store, "put", "t/wrong", str(src),
                     env={"AWS_SECRET_ACCESS_KEY": wrong})
    assert r["rc"] == s3tool.CP_E_AUTH and r["status"] == 403, r
    assert "SignatureDoesNotMatch" in r["msg"], r
    assert store.secret_key not in r["msg"]
    [r] = s3tool.run(store, "head", "t/wrong", env={"AWS_ACCESS_KEY_ID": "NOSUCHKEY"})
    assert r["rc"] == s3tool.CP_E_AUTH and r["status"] == 403, r
    # Nothing was written by the refused request.
    st, body = store.request("HEAD", "/%s/t/wrong" % store.bucket)
    assert st == 404, (st, body)


def test_multipart_upload_signed_and_unsigned(store, tmp_path):
    src = tmp_path / "big"
    data = os.urandom(12 * 1024 * 1024 + 12345)
    src.write_bytes(data)
    for key, extra in (("t/mp/signed", []), ("t/mp/unsigned", ["unsigned"])):
        [r] = s3tool.run(store, "put", key, str(src), str(5 * 1024 * 1024), *extra)
        assert r["rc"] == 0, r
        obj = boto(store).get_object(Bucket=store.bucket, Key=key)
        body = obj["Body"].read()
        assert hashlib.sha256(body).digest() == hashlib.sha256(data).digest()
        # Three parts: the ETag of a multipart object says how many.
        assert obj["ETag"].strip('"').endswith("-3")
    # No upload left open behind them.
    ups = boto(store).list_multipart_uploads(Bucket=store.bucket).get("Uploads", [])
    assert [u for u in ups if u["Key"].startswith("t/mp/")] == []


def test_listing_pages(store, tmp_path):
    src = tmp_path / "s"
    src.write_bytes(b"")
    c = boto(store)
    for i in range(1005):  # one more page than a listing holds
        c.put_object(Bucket=store.bucket, Key="t/many/%04d" % i, Body=b"")
    lines = s3tool.run(store, "list", "t/many/")
    keys = [l["key"] for l in lines if "key" in l]
    assert keys == ["t/many/%04d" % i for i in range(1005)]
    assert lines[-1]["rc"] == 0


def test_unreachable_store_is_told_apart(store, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    [r] = s3tool.run(store, "head", "t/x", endpoint="http://127.0.0.1:%d" % port)
    assert r["rc"] == s3tool.CP_E_RETRY and r["status"] == 0
    assert "unreachable" in r["msg"]


def test_credentials_file_is_read_again_when_it_changes(store, tmp_path):
    creds = tmp_path / "credentials"
    good = "[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n" % (
        store.access_key, store.secret_key)
    bad = good.replace(store.secret_key, "0" * len(store.secret_key))
    creds.write_text(good)
    src = tmp_path / "src"
    src.write_bytes(b"abc")
    # The tool puts once per line it reads; the file changes between lines.
    import subprocess
    import json
    e = dict(os.environ)
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        e.pop(k, None)
    e.update({"S3_BUCKET": store.bucket, "S3_ENDPOINT": store.endpoint,
              "S3_REGION": store.region, "S3_CREDENTIALS_FILE": str(creds)})
    p = subprocess.Popen([s3tool.tool_path(), "put-each", "t/creds", str(src)], env=e,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        results = []
        for text in (None, bad, good):
            if text is not None:
                tmp = tmp_path / "credentials.new"
                tmp.write_text(text)
                os.rename(tmp, creds)  # as a mounted Secret changes: a new file
            p.stdin.write("go\n")
            p.stdin.flush()
            results.append(json.loads(p.stdout.readline()))
        p.stdin.close()
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert [r["rc"] for r in results] == [0, s3tool.CP_E_AUTH, 0]
