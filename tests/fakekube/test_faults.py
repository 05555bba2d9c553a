"""Each scripted fault turned on once, checked at the wire (and through kubectl where telling)."""
import http.client
import json
import socket
import ssl
import time

import pytest
import websocket

from conftest import fixture, pod_manifest
from test_wire import collect, exec_ws

PODS = "/api/v1/namespaces/default/pods"


def create(fake, name, **kw):
    s, _, p = fake.request("POST", PODS, pod_manifest(name, **kw))
    assert s == 201, p
    return p


def test_429_with_retry_after_then_ok(fake):
    fake.ctl("faults", {"type": "status", "code": 429, "retry_after": 1, "method": "GET", "path": "/pods", "count": 2})
    s, h, b = fake.request("GET", PODS)
    assert s == 429 and h["Retry-After"] == "1"
    assert b["reason"] == "TooManyRequests" and b["details"]["retryAfterSeconds"] == 1 and b["kind"] == "Status"
    # client-go honours Retry-After and retries: kubectl still succeeds
    t = time.time()
    fake.kubectl("get", "pods")
    assert time.time() - t >= 0.9
    s, _, _ = fake.request("GET", PODS)
    assert s == 200


def test_500_counts_down(fake):
    fake.ctl("faults", {"type": "status", "code": 500, "path": "/pods/x500$", "count": 2})
    for _ in range(2):
        s, _, b = fake.request("GET", PODS + "/x500")
        assert s == 500 and b["reason"] == "InternalError" and b["code"] == 500
    s, _, b = fake.request("GET", PODS + "/x500")
    assert s == 404
    assert fake.ctl("faults", method="GET")["rules"] == []


def test_delay_and_hang_and_reset(fake):
    fake.ctl("faults", {"type": "delay", "ms": 400, "path": "/pods$"})
    t = time.time()
    assert fake.request("GET", PODS)[0] == 200
    assert time.time() - t >= 0.4
    fake.ctl("faults", {"type": "hang", "path": "/pods$"})
    with pytest.raises((socket.timeout, TimeoutError)):
        fake.request("GET", PODS, timeout=0.5)
    fake.ctl("faults", {"type": "reset", "path": "/pods$"})
    with pytest.raises((ConnectionError, http.client.RemoteDisconnected, ssl.SSLError, OSError)):
        fake.request("GET", PODS)
    assert fake.request("GET", PODS)[0] == 200


def test_hold_keeps_a_request_until_released(fake):
    import threading

    def get_in_thread():
        got = {}
        t = threading.Thread(target=lambda: got.update(r=fake.request("GET", PODS, timeout=60)))
        t.start()
        return t, got

    def wait_held(name):
        deadline = time.monotonic() + 30  # only catches a hang
        while fake.ctl("faults", method="GET")["held"].get(name) != 1:
            assert time.monotonic() < deadline, f"no request reached the hold {name}"
            time.sleep(0.02)

    fake.ctl("faults", {"type": "hold", "name": "h1", "method": "GET", "path": "/pods$"})
    t, got = get_in_thread()
    wait_held("h1")
    assert "r" not in got  # held: not answered
    fake.ctl("release", {"name": "h1"})
    t.join(30)
    assert got["r"][0] == 200 and isinstance(got["r"][2]["items"], list)
    assert fake.ctl("faults", method="GET") == {"rules": [], "pod_fates": [], "held": {}}
    # once released, a hold of that name lets its request through at once
    fake.ctl("faults", {"type": "hold", "name": "h1", "path": "/pods$"})
    assert fake.request("GET", PODS)[0] == 200
    # clearing the faults lets every held request go
    fake.ctl("faults", {"type": "hold", "name": "h2", "path": "/pods$"})
    t, got = get_in_thread()
    wait_held("h2")
    fake.ctl("faults", method="DELETE")
    t.join(30)
    assert got["r"][0] == 200


def test_garbage_body(fake):
    fake.ctl("faults", {"type": "garbage", "path": "/pods$"})
    s, h, b = fake.request("GET", PODS)
    assert s == 200 and h["Content-Type"] == "application/json" and isinstance(b, bytes)
    fake.ctl("faults", {"type": "garbage", "path": r"/pods(\?|$)"})
    r = fake.kubectl("get", "pods", "-o", "json", check=False)
    assert r.returncode != 0 and r.stderr, r


def test_watch_drop_and_watch_410(fake):
    fake.ctl("faults", {"type": "watch_drop", "after_events": 1, "path": "watch"})
    create(fake, "wd")
    c = fake.conn()
    c.request("GET", PODS + "?watch=1")
    r = c.getresponse()
    assert json.loads(r.readline())["type"] == "ADDED"
    assert r.readline() == b""  # clean end of the chunked stream
    fake.ctl("faults", {"type": "watch_410", "path": "watch"})
    c = fake.conn()
    c.request("GET", PODS + "?watch=1&resourceVersion=" + str(10 ** 6))
    r = c.getresponse()
    ev = json.loads(r.readline())
    assert ev["type"] == "ERROR" and ev["object"]["code"] == 410
    assert list(ev["object"]) == list(fixture("status-410-expired.json"))
    fake.ctl("faults", {"type": "watch_410", "http": True, "path": "watch"})
    s, _, b = fake.request("GET", PODS + "?watch=1&resourceVersion=5")
    assert s == 410 and b["reason"] == "Expired"
    fake.ctl("faults", {"type": "watch_drop", "after_ms": 200, "mode": "reset", "path": "watch"})
    c = fake.conn()
    c.request("GET", PODS + "?watch=1&resourceVersion=" + str(10 ** 6))
    r = c.getresponse()
    with pytest.raises((http.client.IncompleteRead, ConnectionError, ssl.SSLError, OSError)):
        r.read()


def test_exec_dropped_mid_run(fake):
    create(fake, "exd")
    fake.wait_phase("exd")
    fake.ctl("faults", {"type": "exec_drop", "after_bytes": 1000})
    ws = exec_ws(fake, "exd", ["sh", "-c", "yes | head -c 1000000; exit 0"], stdin=False)
    got, saw_status = 0, False
    # The connection is cut: no close frame, no status, the stream just ends.
    with pytest.raises((websocket.WebSocketConnectionClosedException, ConnectionError, ssl.SSLError)):
        while True:
            op, data = ws.recv_data()
            if data[:1] == b"\x03":
                saw_status = True
            got += len(data)
            if op == 8:
                break
    assert not saw_status and got < 1000000


@pytest.mark.parametrize("fate", ["ImagePullBackOff", "CrashLoopBackOff", "Unschedulable"])
def test_pod_fates_have_fixture_shapes(fake, fate):
    name = "fate-" + fate.lower()
    fake.ctl("faults", {"type": "pod_fate", "fate": fate, "name": "^" + name + "$"})
    create(fake, name)
    want = fixture({"ImagePullBackOff": "pod-pending-imagepullbackoff.json",
                    "CrashLoopBackOff": "pod-running-crashloopbackoff.json",
                    "Unschedulable": "pod-pending-unschedulable.json"}[fate])["status"]
    deadline = time.monotonic() + 60  # only catches a hang
    while True:
        p = fake.request("GET", PODS + "/" + name)[2]
        cs = p["status"].get("containerStatuses") or [{}]
        reason = (cs[0].get("state", {}).get("waiting") or {}).get("reason")
        conds = {c["type"]: c for c in p["status"].get("conditions", [])}
        if reason == fate or conds.get("PodScheduled", {}).get("reason") == fate:
            break
        assert time.monotonic() < deadline, f"{name} never reached {fate}: {p['status']}"
        time.sleep(0.05)
    st = p["status"]
    assert st["phase"] == want["phase"]
    assert [c["type"] for c in st.get("conditions", [])] == [c["type"] for c in want["conditions"]]
    assert ("containerStatuses" in st) == ("containerStatuses" in want)
    if fate == "CrashLoopBackOff":
        cs = st["containerStatuses"][0]
        assert cs["restartCount"] > 0 and cs["lastState"]["terminated"]["reason"] == "Error"
        assert set(cs) == set(want["containerStatuses"][0])
    if fate == "Unschedulable":
        assert "nodeName" not in p["spec"]
    out = fake.kubectl("get", "pod", name).stdout.decode()
    assert (fate if fate != "Unschedulable" else "Pending") in out


def test_control_state_endpoint(fake):
    create(fake, "forced")
    fake.wait_phase("forced")
    p = fake.ctl("pods/default/forced/state", {"state": "Failed"})
    assert p["status"]["phase"] == "Failed"
    r = fake.kubectl("get", "pod", "forced")
    assert b"Error" in r.stdout
