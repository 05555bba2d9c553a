"""A few lines of AWS Signature V4 over http.client: the tests' own way to
make the bucket and to look at what codepod stored, independent of codepod's
signing (which is libcurl's)."""
import datetime
import hashlib
import hmac
import http.client
import urllib.parse


def _h(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def request(endpoint, region, access, secret, method, path, body=b"", query="",
            headers=None, timeout=30):
    """One request; returns (status, body bytes). @query is the already
    sorted, encoded query string."""
    u = urllib.parse.urlsplit(endpoint)
    now = datetime.datetime.now(datetime.timezone.utc)
    amzdate = now.strftime("%Y%m%dT%H%M%SZ")
    day = now.strftime("%Y%m%d")
    payload = hashlib.sha256(body).hexdigest()
    hdrs = {"host": u.netloc, "x-amz-date": amzdate, "x-amz-content-sha256": payload}
    for k, v in (headers or {}).items():
        hdrs[k.lower()] = v
    names = sorted(hdrs)
    canon = "\n".join([method, urllib.parse.quote(path), query,
                       "".join("%s:%s\n" % (k, hdrs[k].strip()) for k in names),
                       ";".join(names), payload])
    scope = "%s/%s/s3/aws4_request" % (day, region)
    sts = "\n".join(["AWS4-HMAC-SHA256", amzdate, scope,
                     hashlib.sha256(canon.encode()).hexdigest()])
    k = _h(_h(_h(_h(("AWS4" + secret).encode(), day), region), "s3"), "aws4_request")
    sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    hdrs["authorization"] = "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s" % (
        access, scope, ";".join(names), sig)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        conn.request(method, urllib.parse.quote(path) + ("?" + query if query else ""),
                     body=body, headers=hdrs)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()
