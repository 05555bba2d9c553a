"""A fake GCP metadata server and a fake Google Cloud Storage XML API on
loopback, for Workload Identity (gs:// snapshots): a real GCS cannot be
reached from these machines. The S3 signing path is tested against the real
Ceph RGW (ceph.py); this checks the other auth path.

MetadataServer answers GET /computeMetadata/v1/instance/service-accounts/
default/token as GKE's does ({"access_token","expires_in","token_type"}),
only with `Metadata-Flavor: Google` (403 without, as the real one), issuing
a new token each time; `status` makes it answer an error instead.

FakeGCS keeps objects in memory and speaks the part of the XML API codepod
uses: PUT/GET/HEAD/DELETE of objects, ListObjectsV2 (list-type=2,
continuation-token), multipart (POST ?uploads, PUT ?partNumber&uploadId,
POST ?uploadId complete, DELETE ?uploadId abort). Every request must carry
`Authorization: Bearer TOKEN` with a token the metadata server issued, not
revoked and not expired (else 401 AuthenticationRequired), and no x-amz-*
header (a bearer request in GCS's own mode; else 400).

    md = MetadataServer(expires_in=3600); gcs = FakeGCS(md)
    env GCE_METADATA_HOST=md.host; --s3-endpoint gcs.endpoint
"""
import http.server
import json
import re
import socketserver
import threading
import time
import urllib.parse
import uuid
from email.utils import formatdate

TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Base(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, status, body=b"", headers=None, head=False):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and not head:
            self.wfile.write(body)


class MetadataServer:
    def __init__(self, expires_in=3599):
        self.expires_in = expires_in
        self.status = 200          # another value: that answer, no token
        self.fail_next = 0         # answer the next N requests 503 first
        self.tokens = {}           # token -> monotonic expiry
        self.revoked = set()
        self.requests = []         # (path, headers) of each request
        self.lock = threading.Lock()
        outer = self

        class H(_Base):
            def do_GET(self):
                with outer.lock:
                    outer.requests.append((self.path, dict(self.headers)))
                if self.headers.get("Metadata-Flavor") != "Google":
                    return self.reply(403, b"Missing Metadata-Flavor:Google header.")
                if self.path != TOKEN_PATH:
                    return self.reply(404, b"not found")
                with outer.lock:
                    busy = outer.fail_next > 0
                    if busy:
                        outer.fail_next -= 1
                if busy:
                    return self.reply(503, b"not ready yet")
                if outer.status != 200:
                    return self.reply(outer.status, b"no service account")
                tok = "ya29.fake-%s" % uuid.uuid4().hex
                with outer.lock:
                    outer.tokens[tok] = time.monotonic() + outer.expires_in
                body = json.dumps({"access_token": tok, "expires_in": outer.expires_in,
                                   "token_type": "Bearer"}).encode()
                self.reply(200, body, {"Content-Type": "application/json",
                                       "Metadata-Flavor": "Google"})

        self.srv = _Server(("127.0.0.1", 0), H)
        self.host = "127.0.0.1:%d" % self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def fetches(self):
        with self.lock:
            return len([p for p, _ in self.requests if p == TOKEN_PATH])

    def issued(self):
        with self.lock:
            return list(self.tokens)

    def valid(self, tok):
        with self.lock:
            exp = self.tokens.get(tok)
            return exp is not None and tok not in self.revoked and time.monotonic() < exp

    def revoke_all(self):
        with self.lock:
            self.revoked.update(self.tokens)

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()


def _xml_escape(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class FakeGCS:
    def __init__(self, metadata, bucket="codepod-gcs"):
        self.md = metadata
        self.bucket = bucket
        self.objects = {}          # key -> (bytes, mtime seconds)
        self.uploads = {}          # upload id -> {part number: bytes}
        self.log = []              # (method, path, query, auth scheme, status)
        self.lock = threading.Lock()
        self.fail_puts = 0         # answer the next N object PUTs 503
        self.fail_parts = 0        # answer the next N part PUTs 503
        self.part_delay = 0.0      # seconds each part PUT waits before its answer
        outer = self

        class H(_Base):
            def _body(self):
                n = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(n) if n else b""

            def _err(self, status, code, head=False):
                body = ("<?xml version='1.0' encoding='UTF-8'?><Error><Code>%s</Code>"
                        "<Message>%s</Message></Error>" % (code, code)).encode()
                self.reply(status, body, {"Content-Type": "application/xml"}, head=head)
                return status

            def _handle(self, method):
                u = urllib.parse.urlsplit(self.path)
                q = urllib.parse.parse_qs(u.query, keep_blank_values=True)
                body = self._body() if method in ("PUT", "POST") else b""
                auth = self.headers.get("Authorization", "")
                status = self._serve(method, u.path, q, body, auth)
                with outer.lock:
                    outer.log.append((method, u.path, u.query, auth.split(" ")[0], status,
                                      [k for k in self.headers if k.lower().startswith("x-amz-")]))

            def _serve(self, method, path, q, body, auth):
                head = method == "HEAD"
                if any(k.lower().startswith("x-amz-") for k in self.headers):
                    return self._err(400, "InvalidArgument", head)
                m = re.fullmatch(r"Bearer (\S+)", auth)
                if not m or not outer.md.valid(m.group(1)):
                    return self._err(401, "AuthenticationRequired", head)
                parts = path.lstrip("/").split("/", 1)
                if parts[0] != outer.bucket:
                    return self._err(404, "NoSuchBucket", head)
                key = urllib.parse.unquote(parts[1]) if len(parts) > 1 else ""
                if not key:
                    if method == "GET" and q.get("list-type") == ["2"]:
                        return self._list(q)
                    return self._err(400, "InvalidArgument")
                if method == "POST" and "uploads" in q:
                    uid = uuid.uuid4().hex
                    with outer.lock:
                        outer.uploads[uid] = {}
                    x = ("<?xml version='1.0' encoding='UTF-8'?><InitiateMultipartUploadResult>"
                         "<Bucket>%s</Bucket><Key>%s</Key><UploadId>%s</UploadId>"
                         "</InitiateMultipartUploadResult>" % (outer.bucket, key, uid))
                    self.reply(200, x.encode(), {"Content-Type": "application/xml"})
                    return 200
                if "uploadId" in q:
                    return self._multipart(method, key, q, body)
                if method == "PUT":
                    with outer.lock:
                        if outer.fail_puts:
                            outer.fail_puts -= 1
                            fail = True
                        else:
                            fail = False
                            outer.objects[key] = (body, time.time())
                    if fail:
                        return self._err(503, "ServiceUnavailable")
                    self.reply(200, b"", {"ETag": '"%s"' % uuid.uuid4().hex})
                    return 200
                if method in ("GET", "HEAD"):
                    with outer.lock:
                        o = outer.objects.get(key)
                    if o is None:
                        return self._err(404, "NoSuchKey", head)
                    hdr = {"Last-Modified": formatdate(o[1], usegmt=True),
                           "Content-Type": "application/octet-stream"}
                    if head:
                        self.send_response(200)
                        for k, v in hdr.items():
                            self.send_header(k, v)
                        self.send_header("Content-Length", str(len(o[0])))
                        self.end_headers()
                    else:
                        self.reply(200, o[0], hdr)
                    return 200
                if method == "DELETE":
                    with outer.lock:
                        had = outer.objects.pop(key, None)
                    if had is None:
                        return self._err(404, "NoSuchKey")
                    self.reply(204)
                    return 204
                return self._err(405, "MethodNotAllowed")

            def _multipart(self, method, key, q, body):
                uid = q["uploadId"][0]
                with outer.lock:
                    up = outer.uploads.get(uid)
                if up is None:
                    return self._err(404, "NoSuchUpload")
                if method == "PUT":
                    n = int(q["partNumber"][0])
                    with outer.lock:
                        fail = outer.fail_parts > 0
                        if fail:
                            outer.fail_parts -= 1
                    if outer.part_delay:
                        time.sleep(outer.part_delay)
                    if fail:
                        return self._err(503, "ServiceUnavailable")
                    up[n] = body
                    self.reply(200, b"", {"ETag": '"p%d-%s"' % (n, uuid.uuid4().hex[:8])})
                    return 200
                if method == "DELETE":
                    with outer.lock:
                        outer.uploads.pop(uid, None)
                    self.reply(204)
                    return 204
                if method == "POST":
                    nums = [int(x) for x in re.findall(rb"<PartNumber>(\d+)</PartNumber>", body)]
                    if not nums or nums != sorted(nums) or any(n not in up for n in nums):
                        return self._err(400, "InvalidPart")
                    data = b"".join(up[n] for n in nums)
                    with outer.lock:
                        outer.objects[key] = (data, time.time())
                        outer.uploads.pop(uid, None)
                    x = ("<?xml version='1.0' encoding='UTF-8'?><CompleteMultipartUploadResult>"
                         "<Bucket>%s</Bucket><Key>%s</Key><ETag>\"x-%d\"</ETag>"
                         "</CompleteMultipartUploadResult>" % (outer.bucket, key, len(nums)))
                    self.reply(200, x.encode(), {"Content-Type": "application/xml"})
                    return 200
                return self._err(405, "MethodNotAllowed")

            def _list(self, q):
                prefix = q.get("prefix", [""])[0]
                after = q.get("continuation-token", [""])[0]
                with outer.lock:
                    keys = sorted(k for k in outer.objects if k.startswith(prefix) and k > after)
                    page = [(k, outer.objects[k]) for k in keys[:1000]]
                more = len(keys) > 1000
                items = "".join(
                    "<Contents><Key>%s</Key><LastModified>%s</LastModified><Size>%d</Size>"
                    "</Contents>" % (_xml_escape(k), time.strftime(
                        "%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(o[1])), len(o[0]))
                    for k, o in page)
                x = ("<?xml version='1.0' encoding='UTF-8'?><ListBucketResult>"
                     "<Name>%s</Name><Prefix>%s</Prefix><KeyCount>%d</KeyCount>"
                     "<IsTruncated>%s</IsTruncated>%s%s</ListBucketResult>" % (
                         outer.bucket, _xml_escape(prefix), len(page),
                         "true" if more else "false",
                         "<NextContinuationToken>%s</NextContinuationToken>" % _xml_escape(
                             page[-1][0]) if more else "", items))
                self.reply(200, x.encode(), {"Content-Type": "application/xml"})
                return 200

            def do_GET(self):
                self._handle("GET")

            def do_HEAD(self):
                self._handle("HEAD")

            def do_PUT(self):
                self._handle("PUT")

            def do_POST(self):
                self._handle("POST")

            def do_DELETE(self):
                self._handle("DELETE")

        self.srv = _Server(("127.0.0.1", 0), H)
        self.endpoint = "http://127.0.0.1:%d" % self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def requests(self):
        with self.lock:
            return list(self.log)

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()
