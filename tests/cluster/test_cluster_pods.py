"""codepod outside the cluster, with a kubeconfig, on real pods: a real
API server (admission with Pod Security `restricted`, RBAC, preconditions),
a real scheduler and kubelet, containerd and runc running the container, and
exec through the API server's WebSocket translator and the kubelet. Each
scenario asserts what a user of the Kubernetes backend relies on; the same
scenarios against the fake API server are in tests/kube."""
import json
import pathlib
import uuid

import yaml

import clusterhelp as ch
from harness import assert_ok

CHART_POD = pathlib.Path(__file__).resolve().parents[2] / "charts" / "codepod" / "files" / "sandbox-pod.yaml"
WHO = ("const fs = require('node:fs');\n"
       "return {host: require('node:os').hostname(), node: process.version, uid: process.getuid(),\n"
       "        cgroup: fs.readFileSync('/proc/self/cgroup', 'utf8')};")
# Pod start on two CPUs: scheduling, a sandbox, the container, the exec.
FIRST = 180


def new_conv(tag):
    return f"{tag}-{uuid.uuid4().hex[:10]}"


def result(s, eid, timeout=FIRST):
    try:
        return s.wait_result(eid, timeout)
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- codepod stderr ---\n" + "\n".join(s.stderr_lines[-60:])) from None


def run(s, js, conv, timeout=FIRST, **kw):
    return result(s, s.execute(js, conversation=conv, tools=kw.pop("tools", []), **kw), timeout)


def the_pod(conv):
    (pod,) = ch.conv_pods(conv)
    return pod


def template(tmp_path, memory=None):
    pod = yaml.safe_load(CHART_POD.read_text())
    img = ch.images()["CLUSTER_SANDBOX_IMAGE"]
    (c,) = [c for c in pod["spec"]["containers"] if c["name"] == "node"]
    c["image"], c["imagePullPolicy"] = img, "Never"
    if memory:
        # The API server refuses a request above the limit (422).
        c["resources"]["limits"]["memory"] = c["resources"]["requests"]["memory"] = memory
    f = tmp_path / f"pod-{uuid.uuid4().hex[:6]}.yaml"
    f.write_text(yaml.safe_dump(pod))
    return f


def test_first_program_creates_a_real_pod_and_later_ones_reuse_it(codepods):
    s = codepods()
    s.serve({"double": lambda inp: {"doubled": inp["n"] * 2}})
    conv = new_conv("first")
    key = s.conv_prefix + conv
    eid = s.execute("const r = await tools.double({n: 21});\n"
                    "console.log('from the pod');\n" + WHO.replace("return {", "return {r, "),
                    conversation=conv, tools=[{"name": "double", "description": "Doubles n.",
                                               "inputSchema": {"type": "object"}}])
    first = assert_ok(result(s, eid))
    out = first["result"]
    pod = the_pod(key)
    # The pod the API server admitted under `restricted`, the scheduler
    # placed and the kubelet runs: the program ran in it, as uid 1000.
    assert out["host"] == pod["metadata"]["name"] and out["uid"] == 1000, out
    assert out["node"].startswith("v22.") and out["r"] == {"doubled": 42}, out
    assert pod["spec"]["nodeName"] == "codepod-node" and ch.is_ready(pod), pod["status"]
    assert "kubepods" in out["cgroup"], out["cgroup"]
    assert "from the pod" in first["logs"] and len(first["calls"]) == 1, first
    uid = pod["metadata"]["uid"]
    for _ in range(3):
        later = assert_ok(run(s, WHO, conv, 60))
        assert later["result"]["host"] == out["host"], later
    assert the_pod(key)["metadata"]["uid"] == uid


def test_a_timeout_kills_the_program_inside_the_pod(codepods):
    s = codepods()
    conv = new_conv("timeout")
    assert_ok(run(s, "return 1", conv))
    res = run(s, "require('node:fs').writeFileSync('/tmp/spin.pid', String(process.pid));\n"
                 "for (;;) {}", conv, 90, policy={"timeoutMs": 3000})
    assert res["type"] == "error" or res.get("status") != "succeeded", res
    assert (res.get("error") or {}).get("code") == "TIMEOUT", res
    gone = run(s, "const fs = require('node:fs');\n"
                  "const pid = fs.readFileSync('/tmp/spin.pid', 'utf8');\n"
                  "return {pid, alive: fs.existsSync('/proc/' + pid)};", conv, 60)
    assert assert_ok(gone)["result"]["alive"] is False, gone


def test_a_child_that_outlives_its_program_is_ended(codepods):
    s = codepods()
    conv = new_conv("fork")
    res = assert_ok(run(s, "const cp = require('node:child_process');\n"
                           "const c = cp.spawn('sleep', ['300'], {detached: true, stdio: 'ignore'});\n"
                           "c.unref();\n"
                           "return c.pid;", conv))
    pid = res["result"]
    check = ("const fs = require('node:fs');\n"
             f"let s = null; try {{ s = fs.readFileSync('/proc/{pid}/cmdline', 'utf8'); }} catch {{}}\n"
             "return s;")
    # The supervisor ends the program's processes when it ends; wait for it.
    ch.wait_until(lambda: "sleep" not in (assert_ok(run(s, check, conv, 60))["result"] or ""),
                  30, f"the program's child {pid} ended")


def test_usage_figures_come_from_the_pod(codepods):
    s = codepods()
    conv = new_conv("usage")
    res = assert_ok(run(s, "const t = Date.now(); while (Date.now() - t < 300) {}\n"
                           "const keep = Buffer.alloc(64 << 20, 1); return keep.length;", conv))
    u = res["usage"]
    assert u["cpuMs"] >= 150, u
    assert u["maxRssBytes"] >= 64 << 20, u
    assert u["sandbox"], u


def test_a_real_oom_kill_is_said_plainly(codepods, tmp_path):
    s = codepods("--pod-template", str(template(tmp_path, memory="200Mi")))
    conv = new_conv("oom")
    key = s.conv_prefix + conv
    assert_ok(run(s, "return 1", conv))
    name = the_pod(key)["metadata"]["name"]
    res = run(s, "const keep = []; for (;;) keep.push(Buffer.alloc(8 << 20, 1));", conv, 120,
              policy={"timeoutMs": 60000})
    err = res.get("error") or {}
    assert err.get("code") == "PROCESS_EXITED", res
    # The kernel killed the runner, the largest process; the container lives
    # on (the kubelet says OOMKilled only when its first process dies).
    assert err["message"] == ("The runner process ran out of memory and was killed: the container "
                              f'"node" of pod {name} reached its memory limit of 200Mi.'), err
    # The next program gets a working pod again.
    assert_ok(run(s, "return 2", conv))


def test_a_pod_deleted_out_of_band_is_replaced(codepods):
    s = codepods()
    conv = new_conv("deleted")
    key = s.conv_prefix + conv
    assert_ok(run(s, "return 1", conv))
    pod = the_pod(key)
    ch.kubectl("-n", ch.EXT_NS, "delete", "pod", pod["metadata"]["name"], "--wait=true",
               "--timeout=120s")
    res = assert_ok(run(s, WHO, conv))
    assert the_pod(key)["metadata"]["uid"] != pod["metadata"]["uid"]
    assert res["result"]["host"] == the_pod(key)["metadata"]["name"]


def test_a_restarted_codepod_adopts_its_pods(codepods):
    s1 = codepods(name="a")
    conv = new_conv("adopt")
    key = s1.conv_prefix + conv
    assert_ok(run(s1, "require('node:fs').writeFileSync('kept.txt', 'yes'); return 1", conv))
    uid = the_pod(key)["metadata"]["uid"]
    s1.close(timeout=120)
    s2 = codepods(name="a")
    res = assert_ok(run(s2, "return require('node:fs').readFileSync('kept.txt', 'utf8')", conv))
    assert res["result"] == "yes"
    assert the_pod(key)["metadata"]["uid"] == uid


def test_delete_conversation_deletes_its_pod(codepods):
    s = codepods()
    conv = new_conv("delete")
    key = s.conv_prefix + conv
    assert_ok(run(s, "return 1", conv))
    assert ch.conv_pods(key, live=False)
    s.send({"type": "delete_conversation", "id": "del-1", "conversation": conv})
    m = s.wait_for(lambda m: m["type"] == "conversation_deleted" or
                   (m["type"] == "error" and m.get("inReplyTo") == "delete_conversation"),
                   120, "the deletion's answer")
    assert m["type"] == "conversation_deleted" and m["conversation"] == key, m
    # codepod waits the pod out until the API server no longer lists it.
    assert not ch.conv_pods(key, live=False)


def test_the_warm_pool_is_claimed_and_the_idle_reaper_deletes(codepods):
    s = codepods("--warm-pool", "1", "--idle-ttl", "5")
    warm = ch.wait_until(lambda: [p for p in ch.pods(ch.EXT_NS, f"{ch.WARM_LABEL}=true")
                                  if ch.is_ready(p)], FIRST, "a Ready warm pod")
    warm_uids = {p["metadata"]["uid"] for p in warm}
    conv = new_conv("warm")
    key = s.conv_prefix + conv
    assert_ok(run(s, "return 1", conv))
    pod = the_pod(key)
    assert pod["metadata"]["uid"] in warm_uids, "the first program did not take the warm pod"
    ch.wait_until(lambda: not ch.conv_pods(key), 120, "the idle conversation pod deleted")


def test_kubectl_and_the_python_client_see_the_same_cluster(cluster):
    from kubernetes import client, config
    api = client.CoreV1Api(config.new_client_from_config(ch.ADMIN_KUBECONFIG))
    py = {n.metadata.name: n.metadata.uid for n in api.list_node().items}
    kc = {n["metadata"]["name"]: n["metadata"]["uid"] for n in ch.kjson("get", "nodes")["items"]}
    assert py == kc and "codepod-node" in kc, (py, kc)
    ver = json.loads(ch.kubectl("version", "-o", "json").stdout)["serverVersion"]["gitVersion"]
    assert ver == "v" + ch.kube_version(), ver
