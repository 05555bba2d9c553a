"""codepod against an API server that offers only v4.channel.k8s.io on exec
(serve --exec-protocols v4.channel.k8s.io, checked with the python client in
tests/fakekube/test_exec_v4_only.py): the fallback codepod claims, exercised
from the server side. Programs, tool calls, exit codes and the kill exec all
go over v4, which cannot half-close stdin."""
from harness import assert_ok
from kubehelp import HOSTNAME_JS, describe, new_conv, result_of

FAKE_ARGS = ["--exec-protocols", "v4.channel.k8s.io"]


def test_program_and_tool_call_over_v4(fake, codepods):
    s = codepods()
    s.serve({"twice": lambda inp: {"v": inp["n"] * 2}})
    conv = new_conv("v4")
    res = assert_ok(result_of(s, s.execute(
        "const r = await tools.twice({ n: 21 }); console.log('over v4');\n"
        "return { v: r.v, host: require('node:os').hostname() };", conversation=conv), 90))
    (pod,) = fake.conv_pods(conv)
    assert res["result"] == {"v": 42, "host": pod["metadata"]["name"]}
    assert "over v4" in res["logs"] and [c["status"] for c in res["calls"]] == ["ok"]
    # a second execution in the same pod, and a program that throws
    res = result_of(s, s.execute("throw new Error('boom')", conversation=conv, tools=[]), 60)
    assert res["error"]["code"] == "SCRIPT_ERROR", describe(res, s)


def test_exit_and_timeout_over_v4(fake, codepods):
    s = codepods()
    conv = new_conv("v4x")
    res = result_of(s, s.execute("process.exit(9)", conversation=conv, tools=[]), 60)
    assert res["error"]["code"] == "PROCESS_EXITED" and "code 9" in res["error"]["message"], describe(res, s)
    res = result_of(s, s.execute("await new Promise(r => setTimeout(r, 60000))", conversation=conv, tools=[],
                                 policy={"timeoutMs": 1500}), 60)
    assert res["error"]["code"] == "TIMEOUT", describe(res, s)
    res = assert_ok(result_of(s, s.execute(HOSTNAME_JS, conversation=conv, tools=[]), 60))
    assert res["result"] == fake.conv_pods(conv)[0]["metadata"]["name"]
