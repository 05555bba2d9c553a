"""`make run`: the invoices example, checked against totals computed here from the data."""

import json
import subprocess
from collections import defaultdict

from harness import CODEPOD_BIN, REPO

EXAMPLE = REPO / "tests" / "example"


def expected_top_three(month="2026-08"):
    invoices = json.loads((EXAMPLE / "data" / "invoices.json").read_text())
    firms = {f["id"]: f["name"] for f in json.loads((EXAMPLE / "data" / "firms.json").read_text())}
    totals = defaultdict(int)
    for inv in invoices:
        if inv["month"] == month and inv["status"] == "paid":
            totals[inv["firmId"]] += inv["amountCents"]
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])[:3]
    return [{"firm": firms[fid], "cents": cents} for fid, cents in ranked]


def test_sample_data_is_meaningful():
    invoices = json.loads((EXAMPLE / "data" / "invoices.json").read_text())
    firms = json.loads((EXAMPLE / "data" / "firms.json").read_text())
    assert len(firms) == 8
    assert 35 <= len(invoices) <= 45
    assert len({i["month"] for i in invoices}) == 3
    assert {i["status"] for i in invoices} == {"paid", "void"}
    top = expected_top_three()
    assert len({t["cents"] for t in top}) == 3, "the top three must not tie"


def test_example_prints_the_top_three_firms():
    proc = subprocess.run(["bash", str(EXAMPLE / "run.sh"), CODEPOD_BIN], cwd=str(REPO),
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"run.sh exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    outcome = json.loads(proc.stdout)
    assert outcome["status"] == "succeeded", \
        f"{json.dumps(outcome.get('error'))}\nlogs: {outcome.get('logs')}\nstderr: {proc.stderr}"
    assert outcome["result"] == expected_top_three()
    assert outcome["logsTruncated"] is False
    assert sorted(c["tool"] for c in outcome["calls"]) == ["listFirms", "listInvoices"]
    assert all(c["status"] == "ok" for c in outcome["calls"])
    assert outcome["usage"]["bridgeRequests"] == 2
    assert outcome["usage"]["sandbox"] == "local"
