""""Always allow this": approvals remembered for an exact program, tool and
input, so a backend need not ask a person again. codepod knows nothing of
it: each run of a program still suspends, and the backend answers from
here. The program is named by its digest (``outcome["usage"]["digest"]``:
source, tools and policy), the input by the SHA-256 of its JSON with sorted
keys."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping


def _key(digest: str, pending: Mapping[str, Any]) -> str:
    text = json.dumps(pending.get("input"), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return f"{digest}\n{pending.get('tool')}\n{hashlib.sha256(text.encode()).hexdigest()}"


class ApprovalMemory:
    def __init__(self):
        self._allowed: set[str] = set()

    def allow(self, outcome: Mapping[str, Any], call: str) -> None:
        """Remember a person's yes to this pending call of this outcome's program."""
        digest = (outcome.get("usage") or {}).get("digest")
        p = next((x for x in outcome.get("pending") or [] if x.get("call") == call), None)
        if p is None or not digest:
            raise ValueError(f"call {call} is not pending in this outcome")
        self._allowed.add(_key(digest, p))

    def decide(self, outcome: Mapping[str, Any]) -> tuple[list[dict], list[dict]]:
        """(the decisions already made, the pending calls still to ask about)."""
        digest = (outcome.get("usage") or {}).get("digest") or ""
        decisions, ask = [], []
        for p in outcome.get("pending") or []:
            if digest and _key(digest, p) in self._allowed:
                decisions.append({"call": p["call"], "approved": True})
            else:
                ask.append(p)
        return decisions, ask
