"""serve --exec-protocols v4.channel.k8s.io: a server that offers only v4 on
exec (an apiserver without the v5 translator), judged by the python client,
which offers v4 alone, and by kubectl, whose WebSocket executor speaks only v5
and so falls back to SPDY (which the fake does not serve). v4 carries the exit
code on channel 3 but cannot close stdin."""
import json

import pytest

from conftest import pod_manifest, start, stop
from test_wire import collect, exec_ws

P = "/api/v1/namespaces/default/pods"


@pytest.fixture(scope="module")
def v4fake(tmp_path_factory):
    f = start(tmp_path_factory, "--exec-protocols", "v4.channel.k8s.io")
    assert f.request("POST", P, pod_manifest("v4only"))[0] == 201
    f.wait_phase("v4only")
    yield f
    stop(f)


def test_v4_is_chosen_when_the_client_prefers_v5(v4fake):
    ws = exec_ws(v4fake, "v4only", ["sh", "-c", "echo out; echo err >&2; exit 6"], stdin=False)
    assert ws.getsubprotocol() == "v4.channel.k8s.io"
    first, ch, _ = collect(ws)
    assert first == b"\x01" and ch[1] == b"out\n" and ch[2] == b"err\n"
    st = json.loads(ch[3])
    assert st["reason"] == "NonZeroExitCode" and st["details"]["causes"] == [{"reason": "ExitCode", "message": "6"}]


def test_a_client_offering_only_v5_is_refused(v4fake):
    import websocket
    with pytest.raises(websocket.WebSocketBadStatusException) as e:
        exec_ws(v4fake, "v4only", ["true"], protocols=("v5.channel.k8s.io",), stdin=False)
    assert e.value.status_code == 400


def test_kubectl_offers_no_v4_and_falls_back_to_spdy(v4fake):
    r = v4fake.kubectl("exec", "v4only", "--", "true", check=False)
    assert r.returncode == 1 and r.stderr == b"Error from server (BadRequest): Upgrade request required\n", r


def test_python_client_execs_over_v4(v4fake):
    from kubernetes import client, config
    from kubernetes.stream import stream
    api = client.CoreV1Api(config.new_client_from_config(config_file=v4fake.kubeconfig))
    ws = stream(api.connect_get_namespaced_pod_exec, "v4only", "default", command=["sh", "-c", "echo hi; exit 2"],
                stderr=True, stdin=False, stdout=True, tty=False, _preload_content=False)
    ws.run_forever(timeout=10)
    assert ws.returncode == 2 and ws.read_stdout() == "hi\n"
