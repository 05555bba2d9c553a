"""Two codepod replicas (two `serve --stdio` processes) against one API server
racing for the same new conversation: one pod, both executions succeed."""
import threading

from harness import assert_ok
from kubehelp import HOSTNAME_JS, describe, new_conv, pod_name, result_of


def test_two_replicas_racing_for_a_new_conversation_share_one_pod(fake, codepods):
    a, b = codepods(name="replica-a"), codepods(name="replica-b")
    for round_ in range(3):
        conv = new_conv(f"race{round_}")
        go = threading.Barrier(2)
        ids = {}

        def send(s, tag):
            go.wait()
            ids[tag] = s.execute(HOSTNAME_JS, conversation=conv, tools=[])
        ts = [threading.Thread(target=send, args=(s, t)) for s, t in ((a, "a"), (b, "b"))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        ra = result_of(a, ids["a"], 60)
        rb = result_of(b, ids["b"], 60)
        assert_ok(ra), describe(ra, a)
        assert_ok(rb), describe(rb, b)
        pods = fake.conv_pods(conv)
        assert len(pods) == 1, f"round {round_}: {len(pods)} pods for one conversation: " \
            f"{[p['metadata']['name'] for p in pods]}"
        # both ran in that one pod
        assert ra["result"] == rb["result"] == pods[0]["metadata"]["name"] == pod_name(conv), (ra, rb)
        # a later execution from either replica uses it too
        again = assert_ok(result_of(b, b.execute(HOSTNAME_JS, conversation=conv, tools=[]), 60))
        assert again["result"] == pod_name(conv)
        assert [p["metadata"]["uid"] for p in fake.conv_pods(conv)] == [pods[0]["metadata"]["uid"]]
