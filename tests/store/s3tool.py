"""Runs build/store/s3_tool (tests/store/s3_tool.c, the S3 client of
store/s3.h on its own) against a test store; returns its JSON lines."""
import json
import os
import subprocess

CP_E_NOT_FOUND = -25
CP_E_AUTH = -27
CP_E_HTTP = -28
CP_E_RETRY = -32


def tool_path():
    bin_ = os.environ.get("CODEPOD_BIN")
    build = os.path.dirname(bin_) if bin_ else os.path.join(
        os.path.dirname(__file__), "..", "..", "build")
    return os.path.join(build, "store", "s3_tool")


def run(store, *args, env=None, stdin=None, endpoint=None, timeout=300):
    e = dict(os.environ)
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
              "S3_CREDENTIALS_FILE"):
        e.pop(k, None)
    e.update(store.env())
    e.update({"S3_BUCKET": store.bucket, "S3_ENDPOINT": endpoint or store.endpoint,
              "S3_REGION": store.region})
    e.update(env or {})
    r = subprocess.run([tool_path(), *args], env=e, input=stdin, capture_output=True,
                       text=True, timeout=timeout)
    return [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
