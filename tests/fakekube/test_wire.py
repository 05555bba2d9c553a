"""Wire details kubectl does not show: Status bodies, watch streams, v5 exec framing."""
import json
import os
import time

import pytest
import websocket

from conftest import fixture, pod_manifest, start, stop

PODS = "/api/v1/namespaces/default/pods"


def rename(body, old, new):
    return json.loads(json.dumps(body).replace(old, new))


def create(fake, name, **kw):
    s, _, p = fake.request("POST", PODS, pod_manifest(name, **kw))
    assert s == 201, p
    return p


def test_unauthenticated_is_401_status(fake):
    s, h, b = fake.request("GET", PODS, cert=False)
    assert s == 401 and b == fixture("status-401-unauthorized.json")
    s, _, b = fake.request("GET", PODS, cert=False, token="wrong")
    assert s == 401
    s, _, _ = fake.request("GET", PODS, cert=False, token=fake.token)
    assert s == 200


def test_status_bodies_match_fixtures(fake):
    fx = "convo-7f3a9c2e1b"
    s, _, b = fake.request("GET", PODS + "/nope")
    assert s == 404 and b == rename(fixture("status-404-notfound.json"), fx, "nope")
    p = create(fake, "dup")
    s, _, b = fake.request("POST", PODS, pod_manifest("dup"))
    assert s == 409 and b == rename(fixture("status-409-alreadyexists.json"), fx, "dup")
    # delete with a wrong uid precondition
    want = "11111111-2222-4333-8444-555555555555"
    s, _, b = fake.request("DELETE", PODS + "/dup", {"kind": "DeleteOptions", "apiVersion": "v1",
                                                      "preconditions": {"uid": want}})
    exp = fixture("status-409-precondition-uid.json")
    exp = rename(exp, "5d0c6b9e-2f4a-4c1e-9a7b-3e8f1d2c4b6a", p["metadata"]["uid"])
    exp = rename(exp, "convo-sandbox/" + fx, "default/dup")
    assert s == 409 and b == rename(exp, fx, "dup")
    # merge patch carrying a stale resourceVersion
    s, _, b = fake.request("PATCH", PODS + "/dup", {"metadata": {"resourceVersion": "1", "labels": {"a": "b"}}},
                           headers={"Content-Type": "application/merge-patch+json"})
    assert s == 409 and b == rename(fixture("status-409-conflict.json"), fx, "dup")
    # 422 for a missing image
    bad = pod_manifest("noimage")
    del bad["spec"]["containers"][0]["image"]
    s, _, b = fake.request("POST", PODS, bad)
    assert s == 422 and b == rename(fixture("status-422-invalid.json"), fx, "noimage")
    # 422 for an immutable spec change
    s, _, b = fake.request("PATCH", PODS + "/dup", {"spec": {"restartPolicy": "Never"}},
                           headers={"Content-Type": "application/merge-patch+json"})
    assert s == 422 and b == rename(fixture("status-422-invalid-immutable-update.json"), fx, "dup")
    # delete with the right uid works and returns the terminating pod
    fake.wait_phase("dup")
    s, _, b = fake.request("DELETE", PODS + "/dup", {"preconditions": {"uid": p["metadata"]["uid"]}})
    assert s == 200 and b["metadata"]["deletionTimestamp"] and b["metadata"]["deletionGracePeriodSeconds"] == 30


def test_patch_types_and_rv_precondition(fake):
    p = create(fake, "pt")
    rv = p["metadata"]["resourceVersion"]
    s, _, b = fake.request("PATCH", PODS + "/pt", {"metadata": {"resourceVersion": rv, "labels": {"k": "v"}}},
                           headers={"Content-Type": "application/merge-patch+json"})
    assert s == 200 and b["metadata"]["labels"]["k"] == "v" and b["metadata"]["resourceVersion"] != rv
    s, _, b = fake.request("PATCH", PODS + "/pt", [{"op": "add", "path": "/metadata/annotations", "value": {"x": "1"}}],
                           headers={"Content-Type": "application/json-patch+json"})
    assert s == 200 and b["metadata"]["annotations"] == {"x": "1"}
    s, _, b = fake.request("PATCH", PODS + "/pt", {"metadata": {"labels": {"k": None}}},
                           headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert s == 200 and "k" not in b["metadata"]["labels"]
    s, _, b = fake.request("PATCH", PODS + "/pt", {}, headers={"Content-Type": "text/plain"})
    assert s == 415 and b["reason"] == "UnsupportedMediaType"


def read_until(resp, pred, timeout=30):
    """Events until one satisfies pred (included) or the stream ends; the
    deadline only catches a hang (bookmarks keep lines coming)."""
    out = []
    end = time.time() + timeout
    while time.time() < end:
        line = resp.readline()
        if not line:
            break
        out.append(json.loads(line))
        if pred(out[-1]):
            break
    return out


def test_watch_stream_lifecycle_and_bookmarks(fake):
    s, _, lst = fake.request("GET", PODS + "?labelSelector=app%3Dwl")
    rv = lst["metadata"]["resourceVersion"]
    fake.ctl("schedule", {"bookmark_s": 0.3})
    try:
        c = fake.conn()
        c.request("GET", PODS + f"?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&labelSelector=app%3Dwl&timeoutSeconds=60")
        r = c.getresponse()
        assert r.status == 200 and r.headers["Transfer-Encoding"] == "chunked"
        create(fake, "wl")
        # The pod's four lifecycle events and a bookmark, in whatever order
        # the schedule and the bookmark period interleave them.
        seen = {"pod": 0, "bookmark": 0}

        def enough(e):
            seen["bookmark" if e["type"] == "BOOKMARK" else "pod"] += 1
            return seen["pod"] >= 4 and seen["bookmark"] >= 1
        evs = read_until(r, enough)
        pod = [e for e in evs if e["type"] != "BOOKMARK"]
        types = [e["type"] for e in pod]
        assert types == ["ADDED", "MODIFIED", "MODIFIED", "MODIFIED"], [e["type"] for e in evs]
        assert pod[3]["object"]["status"]["phase"] == "Running"
        rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in pod]
        assert rvs == sorted(rvs) and len(set(rvs)) == 4
        bm = next((e for e in evs if e["type"] == "BOOKMARK"), None)
        assert bm, [e["type"] for e in evs]
        assert set(bm["object"]["metadata"]) == {"resourceVersion"}
        fake.request("DELETE", PODS + "/wl")
        evs = [e for e in read_until(r, lambda e: e["type"] == "DELETED") if e["type"] != "BOOKMARK"]
        assert [e["type"] for e in evs] == ["MODIFIED", "MODIFIED", "DELETED"]
        assert evs[0]["object"]["metadata"]["deletionTimestamp"]
        assert evs[-1]["object"]["status"]["phase"] == "Failed"
        c.close()
    finally:
        fake.ctl("schedule", {"bookmark_s": 5})


def test_watch_from_compacted_rv_is_in_stream_410(fake):
    create(fake, "old")
    fake.ctl("compact")
    c = fake.conn()
    c.request("GET", PODS + "?watch=1&resourceVersion=1001")
    r = c.getresponse()
    assert r.status == 200
    ev = json.loads(r.readline())
    assert ev["type"] == "ERROR" and ev["object"]["code"] == 410 and ev["object"]["reason"] == "Expired"
    assert set(ev["object"]) == set(fixture("status-410-expired.json"))
    assert r.readline() == b""


def exec_ws(fake, pod, argv, protocols=("v5.channel.k8s.io", "v4.channel.k8s.io"), stdin=True):
    from urllib.parse import quote
    q = "&".join("command=" + quote(a, safe="") for a in argv)
    url = (f"wss://127.0.0.1:{fake.port}{PODS}/{pod}/exec?{q}&stdin={'true' if stdin else 'false'}"
           "&stdout=true&stderr=true&tty=false")
    pki = os.path.join(fake.state_dir, "pki")
    return websocket.create_connection(url, subprotocols=list(protocols), timeout=10,
                                       sslopt={"ca_certs": fake.ca, "certfile": os.path.join(pki, "client.crt"),
                                               "keyfile": os.path.join(pki, "client.key")})


def collect(ws):
    chans = {1: b"", 2: b"", 3: b""}
    first = None
    while True:
        op, data = ws.recv_data(control_frame=False)
        if op == websocket.ABNF.OPCODE_CLOSE:
            return first, chans, int.from_bytes(data[:2], "big") if len(data) >= 2 else None
        assert op == websocket.ABNF.OPCODE_BINARY
        if first is None:
            first = data
            continue
        chans[data[0]] += data[1:]


def test_exec_v5_framing_and_stdin_close(fake):
    create(fake, "v5")
    fake.wait_phase("v5")
    ws = exec_ws(fake, "v5", ["sh", "-c", "cat; echo done >&2; exit 4"])
    assert ws.getsubprotocol() == "v5.channel.k8s.io"
    payload = os.urandom(300_000)
    for i in range(0, len(payload), 65536):
        ws.send_binary(b"\x00" + payload[i:i + 65536])
    ws.send_binary(b"\xff\x00")  # v5 CLOSE of stdin
    first, ch, close_code = collect(ws)
    assert first == b"\x01"
    assert ch[1] == payload and ch[2] == b"done\n"
    assert json.loads(ch[3]) == json.loads(json.dumps(fixture("exec-status-nonzero-exit.json")).replace('code 3', 'code 4').replace('"3"', '"4"'))
    assert close_code == 1000
    ws = exec_ws(fake, "v5", ["true"], stdin=False)
    first, ch, _ = collect(ws)
    assert json.loads(ch[3]) == fixture("exec-status-success.json")


def test_exec_v4_when_v5_not_offered(fake):
    create(fake, "v4")
    fake.wait_phase("v4")
    ws = exec_ws(fake, "v4", ["sh", "-c", "echo hi"], protocols=("v4.channel.k8s.io",), stdin=False)
    assert ws.getsubprotocol() == "v4.channel.k8s.io"
    first, ch, _ = collect(ws)
    assert ch[1] == b"hi\n" and json.loads(ch[3]) == {"metadata": {}, "status": "Success"}


def test_exec_signal_death_reports_128_plus_n(fake):
    create(fake, "sig")
    fake.wait_phase("sig")
    ws = exec_ws(fake, "sig", ["sh", "-c", "kill -9 $$"], stdin=False)
    _, ch, _ = collect(ws)
    st = json.loads(ch[3])
    assert st["reason"] == "NonZeroExitCode" and st["details"]["causes"][0]["message"] == "137"


def test_exec_into_container_not_running_v5_gets_internal_error(fake):
    create(fake, "crash", annotations={"fakekube.codepod.dev/fate": "ImagePullBackOff"})
    fake.wait_waiting("crash", ("ErrImagePull", "ImagePullBackOff"))  # its container never starts
    ws = exec_ws(fake, "crash", ["true"], stdin=False)
    _, ch, _ = collect(ws)
    st = json.loads(ch[3])
    assert st["reason"] == "InternalError" and st["code"] == 500
    assert set(st) == set(fixture("exec-status-internal-error.json"))


def test_discovery_forms(fake):
    acc = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
    s, h, b = fake.request("GET", "/api", headers={"Accept": acc})
    assert s == 200 and "v=v2beta1" in h["Content-Type"] and b["apiVersion"] == "apidiscovery.k8s.io/v2beta1"
    pods = b["items"][0]["versions"][0]["resources"][0]
    assert pods["resource"] == "pods" and {"subresource": "exec"}.items() <= pods["subresources"][0].items()
    s, h, b = fake.request("GET", "/api")
    assert b["kind"] == "APIVersions" and b["versions"] == ["v1"]
    s, h, b = fake.request("GET", "/api/v1")
    assert [r["name"] for r in b["resources"]][:2] == ["pods", "pods/exec"]
    s, _, b = fake.request("GET", "/apis/apps/v1")
    assert s == 404 and b["message"] == "the server could not find the requested resource"


def test_exec_stats_count_every_exec_request(fake):
    create(fake, "counted")
    fake.wait_phase("counted")
    before = fake.ctl("exec-stats", method="GET")
    for _ in range(3):
        ws = exec_ws(fake, "counted", ["true"], stdin=False)
        collect(ws)
    after = fake.ctl("exec-stats", method="GET")
    assert after["requests"] - before["requests"] == 3
    pods = {(p["namespace"], p["name"]): p["requests"] for p in after["pods"]}
    assert pods[("default", "counted")] == 3
    assert after["latencyMs"] == 0


@pytest.fixture(scope="module")
def slow_fake(tmp_path_factory):
    f = start(tmp_path_factory, "--exec-latency-ms", "400")
    yield f
    stop(f)


def test_exec_latency_delays_the_upgrade(slow_fake):
    create(slow_fake, "slow")
    slow_fake.wait_phase("slow")
    assert slow_fake.ctl("exec-stats", method="GET")["latencyMs"] == 400
    t0 = time.monotonic()
    ws = exec_ws(slow_fake, "slow", ["sh", "-c", "echo hi"], stdin=False)
    _, ch, _ = collect(ws)
    # A lower bound only (the fake sleeps at least that long before the
    # upgrade): it cannot fail on a slow machine.
    assert time.monotonic() - t0 >= 0.4
    assert ch[1] == b"hi\n"
    assert slow_fake.ctl("exec-stats", method="GET")["requests"] == 1
