"""The fake judged by an independent client, the Debian python3-kubernetes:
the watch behaviours codepod's pod wait, warm pool and reaper rest on (resume
from a resourceVersion, 410 and relist, bookmarks) and the optimistic
concurrency of delete and patch (uid and resourceVersion preconditions, 409
with the real Status body)."""
import json

import pytest

from conftest import fixture, pod_manifest

NS = "default"
FX = "convo-7f3a9c2e1b"


@pytest.fixture(scope="module")
def api(fake):
    from kubernetes import client, config
    return client.CoreV1Api(config.new_client_from_config(config_file=fake.kubeconfig))


def rename(body, old, new):
    return json.loads(json.dumps(body).replace(old, new))


def create(api, name, **kw):
    return api.create_namespaced_pod(NS, pod_manifest(name, **kw))


def events(api, **kw):
    """Every event of one watch (it ends on its own by timeout_seconds)."""
    from kubernetes import watch
    return list(watch.Watch().stream(api.list_namespaced_pod, NS, **kw))


def is_running(ev):
    return ev["type"] == "MODIFIED" and ev["object"].status.phase == "Running"


def test_watch_resumes_from_a_resource_version(api, fake):
    rv0 = api.list_namespaced_pod(NS).metadata.resource_version
    create(api, "resume", labels={"app": "resume"})
    fake.wait_phase("resume")
    sel = "app=resume"
    first = events(api, label_selector=sel, resource_version=rv0, timeout_seconds=1)
    assert [e["type"] for e in first][0] == "ADDED" and any(map(is_running, first)), first
    rvs = [int(e["object"].metadata.resource_version) for e in first]
    assert rvs == sorted(rvs) and rvs[0] > int(rv0)
    # From the ADDED event's resourceVersion: everything after it, nothing before.
    again = events(api, label_selector=sel, resource_version=str(rvs[0]), timeout_seconds=1)
    assert [int(e["object"].metadata.resource_version) for e in again] == rvs[1:]
    assert all(e["type"] == "MODIFIED" for e in again)
    # From the newest one: nothing until something changes.
    assert events(api, label_selector=sel, resource_version=str(rvs[-1]), timeout_seconds=1) == []


def test_too_old_resource_version_is_410_then_relist_works(api, fake):
    from kubernetes.client.rest import ApiException
    old = api.list_namespaced_pod(NS).metadata.resource_version
    create(api, "gone", labels={"app": "gone"})
    fake.wait_phase("gone")
    compacted = fake.ctl("compact")["compacted_rv"]
    # In-stream 410 (a 200 whose only event is ERROR), as the watch cache sends it:
    # the client surfaces it as an ApiException 410 with the Status' reason and message.
    with pytest.raises(ApiException) as e:
        events(api, label_selector="app=gone", resource_version=old, timeout_seconds=2)
    assert e.value.status == 410
    assert e.value.reason == f"Expired: too old resource version: {old} ({compacted})"
    # HTTP 410 (the fault), as etcd-backed watches answer: the Status body as the fixture.
    fake.ctl("faults", {"type": "watch_410", "http": True, "path": "/api/v1/namespaces/default/pods"})
    with pytest.raises(ApiException) as e:
        api.list_namespaced_pod(NS, watch=True, resource_version=old, timeout_seconds=2,
                                _preload_content=False)
    assert e.value.status == 410
    body = json.loads(e.value.body)
    assert set(body) == set(fixture("status-410-expired.json")) and body["reason"] == "Expired"
    # Relist, and watch from the list's resourceVersion: no 410, and a change arrives.
    fresh = api.list_namespaced_pod(NS, label_selector="app=gone")
    assert [p.metadata.name for p in fresh.items] == ["gone"]
    api.patch_namespaced_pod("gone", NS, {"metadata": {"labels": {"seen": "yes"}}})
    got = events(api, label_selector="app=gone", resource_version=fresh.metadata.resource_version,
                 timeout_seconds=1)
    assert [(e["type"], e["object"].metadata.labels.get("seen")) for e in got] == [("MODIFIED", "yes")]


def test_bookmarks_only_when_allowed(api, fake):
    old = fake.ctl("schedule", method="GET")["bookmark_s"]
    fake.ctl("schedule", {"bookmark_s": 0.3})
    try:
        rv = api.list_namespaced_pod(NS).metadata.resource_version
        got = events(api, label_selector="app=nothing-here", resource_version=rv,
                     allow_watch_bookmarks=True, timeout_seconds=2)
        assert got and all(e["type"] == "BOOKMARK" for e in got), got
        for e in got:
            obj = e["raw_object"]
            assert obj["kind"] == "Pod" and obj["apiVersion"] == "v1"
            assert int(obj["metadata"]["resourceVersion"]) >= int(rv)
        assert events(api, label_selector="app=nothing-here", resource_version=rv,
                      timeout_seconds=1) == []
    finally:
        fake.ctl("schedule", {"bookmark_s": old})


def test_delete_with_a_uid_precondition(api, fake):
    from kubernetes import client
    from kubernetes.client.rest import ApiException
    pod = create(api, "byuid")
    fake.wait_phase("byuid")
    wrong = "11111111-2222-4333-8444-555555555555"
    with pytest.raises(ApiException) as e:
        api.delete_namespaced_pod("byuid", NS, body=client.V1DeleteOptions(
            preconditions=client.V1Preconditions(uid=wrong)))
    assert e.value.status == 409
    want = rename(fixture("status-409-precondition-uid.json"),
                  "5d0c6b9e-2f4a-4c1e-9a7b-3e8f1d2c4b6a", pod.metadata.uid)
    want = rename(rename(want, "convo-sandbox/" + FX, "default/byuid"), FX, "byuid")
    assert json.loads(e.value.body) == want
    assert api.read_namespaced_pod("byuid", NS).metadata.deletion_timestamp is None
    out = api.delete_namespaced_pod("byuid", NS, body=client.V1DeleteOptions(
        preconditions=client.V1Preconditions(uid=pod.metadata.uid), grace_period_seconds=0))
    assert out.metadata.uid == pod.metadata.uid
    with pytest.raises(ApiException) as e:
        api.read_namespaced_pod("byuid", NS)
    assert e.value.status == 404


def test_patch_with_a_resource_version_precondition(api, fake):
    from kubernetes.client.rest import ApiException
    pod = create(api, "byrv")
    fake.wait_phase("byrv")
    now = api.read_namespaced_pod("byrv", NS)
    stale = pod.metadata.resource_version
    assert stale != now.metadata.resource_version
    with pytest.raises(ApiException) as e:
        api.patch_namespaced_pod("byrv", NS, {"metadata": {"resourceVersion": stale,
                                                           "labels": {"claimed": "me"}}})
    assert e.value.status == 409
    assert json.loads(e.value.body) == rename(fixture("status-409-conflict.json"), FX, "byrv")
    assert "claimed" not in (api.read_namespaced_pod("byrv", NS).metadata.labels or {})
    done = api.patch_namespaced_pod("byrv", NS, {"metadata": {
        "resourceVersion": now.metadata.resource_version, "labels": {"claimed": "me"}}})
    assert done.metadata.labels["claimed"] == "me"
    assert int(done.metadata.resource_version) > int(now.metadata.resource_version)
    # the same claim again, with the rv it was made against: the second claimer loses
    with pytest.raises(ApiException) as e:
        api.patch_namespaced_pod("byrv", NS, {"metadata": {
            "resourceVersion": now.metadata.resource_version, "labels": {"claimed": "other"}}})
    assert e.value.status == 409
