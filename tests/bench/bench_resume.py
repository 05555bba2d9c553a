#!/usr/bin/env python3
"""bench_resume.py - resume of a program that made N tool calls before its
gated one, against the same program run fresh with every tool answered at
once (the Python client answers each call the moment it reads it).

Both are timed from the `execute` written to its `result` read, over
`codepod serve --stdio` (local backend), alternating, median of RUNS each.
The resume answers the N calls from the continuation's log and sends one
call (the approved one) to the client; the fresh run sends all N + 1.
Then the RSS of codepod before and after many suspended executions (a
suspended one leaves nothing but the continuation it handed out). Prints
one JSON line; figures only, nothing asserted (exit 1 when an
execution failed).

usage: bench_resume.py [--quick] [--calls N]
env:   CODEPOD_BIN (the built codepod)
"""
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))

from harness import Session, tool_decl  # noqa: E402

KEY = "k1:" + "5a" * 32
GOAL_RATIO = 1.5


def main():
    quick = "--quick" in sys.argv
    n = 100
    if "--calls" in sys.argv:
        n = int(sys.argv[sys.argv.index("--calls") + 1])
    runs = 5 if quick else 11
    js = (f"let s = 0; for (let i = 0; i < {n}; i++) s += (await tools.read({{ i }})).v;\n"
          "const p = await tools.pay({ s });\nreturn [s, p.ok];")
    fresh_tools = [tool_decl("read"), tool_decl("pay")]
    gated_tools = [tool_decl("read"), dict(tool_decl("pay"), approval="required")]
    d = tempfile.mkdtemp(prefix="codepod-bench-resume-")
    keys = os.path.join(d, "keys")
    with open(keys, "w") as f:
        f.write(KEY + "\n")
    s = Session(os.path.join(d, "state"), args=["--continuation-key-file", keys],
                env=dict(os.environ, CODEPOD_PRESTART=os.environ.get("CODEPOD_PRESTART", "1")))
    s.serve({"read": lambda i: {"v": i["i"]}, "pay": lambda i: {"ok": True}})
    fresh, resumed, failed = [], [], []
    try:
        s.run("return 1;", tools=[])  # a first runner start, not timed
        for r in range(runs):
            conv = f"bench-{r}"
            t0 = time.monotonic()
            res = s.run(js, tools=fresh_tools, conversation=conv, timeout=120)
            fresh.append((time.monotonic() - t0) * 1000)
            if res["status"] != "succeeded":
                failed.append("fresh: " + json.dumps(res.get("error"))[:200])
            sus = s.run(js, tools=gated_tools, conversation=conv, timeout=120)
            if sus["status"] != "suspended":
                failed.append("suspend: " + json.dumps(sus.get("error"))[:200])
                continue
            t0 = time.monotonic()
            eid = s.execute(js, tools=gated_tools, conversation=conv,
                            resume={"continuation": sus["continuation"],
                                    "decisions": [{"call": str(n + 1), "approved": True}]})
            res = s.wait_result(eid, 120)
            resumed.append((time.monotonic() - t0) * 1000)
            if res["status"] != "succeeded" or len(s.of(eid, "tool_call")) != 1:
                failed.append("resume: " + json.dumps(res.get("error"))[:200])
            size = len(sus["continuation"])
        # What a suspended execution leaves in codepod: its RSS over many
        # suspensions (nothing is kept for one; the figure bounds it).
        def rss_kib():
            with open(f"/proc/{s.proc.pid}/status") as f:
                return next(int(x.split()[1]) for x in f if x.startswith("VmRSS:"))
        many = 100 if quick else 400
        small = "await tools.pay({ n: 1 });"
        # first as many again, unmeasured: the allocator's heap grows to its
        # working size over the first few hundred, then stays
        for i in range(many):
            s.run(small, tools=gated_tools, conversation="bench-mem", timeout=120)
        before = rss_kib()
        for i in range(many):
            if s.run(small, tools=gated_tools, conversation="bench-mem", timeout=120)["status"] != "suspended":
                failed.append("suspend (memory)")
        after = rss_kib()
        # the same number of executions that end without suspending: what any
        # execution leaves (its id, kept so it is not reused; the allocator)
        for i in range(many):
            s.run("return 1;", tools=gated_tools, conversation="bench-mem", timeout=120)
        plain_after = rss_kib()
    finally:
        s.close()
    fm, rm = statistics.median(fresh), statistics.median(resumed or [0])
    out = {"calls": n, "runs": runs, "fresh_median_ms": round(fm, 1),
           "resume_median_ms": round(rm, 1), "ratio_resume_vs_fresh": round(rm / fm, 3),
           "goal_ratio": GOAL_RATIO, "continuation_bytes": size if resumed else 0,
           "suspended_n": many, "rss_before_kib": before, "rss_after_kib": after,
           "kib_per_suspended": round((after - before) / many, 2),
           "kib_per_plain": round((plain_after - after) / many, 2),
           "failed": failed}
    print(json.dumps(out))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
