"""Scripted faults.

A test adds rules with POST /fakekube/faults (a JSON object or a list of them)
or with --faults FILE at start; DELETE /fakekube/faults clears them; GET lists
them with their remaining counts. Each rule:

  {"type": T, "method": "GET", "path": "regex on path?query", "count": N, ...}

`count` (default 1; -1 = forever) is the number of matching requests the
rule applies to, so "500 for the next 3 GETs of pod x" is
  {"type":"status","code":500,"method":"GET","path":"/pods/x$","count":3}.
Types:
  delay       {"ms": N}                 answer N ms late (stacks with others)
  status      {"code": C, "retry_after": S, "message": M}
                                        a Status with code C (429/503/504 get Retry-After)
  garbage     {"body": "...", "code": 200}  a non-JSON body with a JSON content type
  hang        {"ms": N}                 read the request, answer nothing for N ms (default forever)
  hold        {"name": H}               keep the request until POST /fakekube/release {"name": H}
                                        (at once once H was released), then serve it as usual:
                                        a test decides by an event when a request goes through
  reset       {}                        drop the TCP connection without an answer
  watch_drop  {"after_ms": N, "after_events": K, "mode": "end"|"reset"}
                                        end a matching watch cleanly (chunked end) or abort it
  watch_410   {"http": false}           the matching watch gets an in-stream ERROR 410
                                        (or an HTTP 410 when "http": true)
  exec_drop   {"after_ms": N, "after_bytes": B}
                                        abort a matching exec's connection mid-run, no status
  pod_fate    {"fate": "ImagePullBackOff"|"CrashLoopBackOff"|"Unschedulable", "name": regex}
                                        the next `count` pods created with a matching name take that path
Control endpoints (/fakekube/...) are never subject to faults. GET
/fakekube/faults also lists under "held" how many requests each hold keeps
right now; DELETE releases every hold, so no request outlives its test.
"""
import asyncio
import re

HTTP_TYPES = ("delay", "status", "garbage", "hang", "reset", "hold")
TYPES = HTTP_TYPES + ("watch_drop", "watch_410", "exec_drop", "pod_fate")


class Faults:
    def __init__(self, store):
        self.rules = []
        self.store = store
        self.next_id = 1
        self.holds = {}    # hold name -> asyncio.Event, set once released
        self.waiting = {}  # hold name -> requests it keeps now

    def add(self, rule):
        if not isinstance(rule, dict) or rule.get("type") not in TYPES:
            raise ValueError(f"fault needs a type, one of {TYPES}")
        r = dict(rule)
        r.setdefault("count", 1)
        r["id"] = self.next_id
        self.next_id += 1
        if r["type"] == "pod_fate":
            # Pod fates live with the store: they are consumed at creation time.
            self.store.pending_fates.append({"fate": r["fate"], "name": r.get("name", ""), "count": r["count"], "id": r["id"]})
        else:
            re.compile(r.get("path") or "")
            self.rules.append(r)
        return r

    def clear(self):
        self.rules.clear()
        self.store.pending_fates.clear()
        for ev in self.holds.values():
            ev.set()
        self.holds.clear()

    def listing(self):
        return {"rules": self.rules, "pod_fates": self.store.pending_fates,
                "held": {k: n for k, n in self.waiting.items() if n}}

    def _hold(self, name):
        if name not in self.holds:
            self.holds[name] = asyncio.Event()
        return self.holds[name]

    def release(self, name):
        self._hold(name).set()

    async def held(self, name):
        """Returns once the hold `name` is released."""
        self.waiting[name] = self.waiting.get(name, 0) + 1
        try:
            await self._hold(name).wait()
        finally:
            self.waiting[name] -= 1

    @staticmethod
    def _matches(rule, method, target, watch=None):
        if rule.get("method") and rule["method"].upper() != method:
            return False
        if rule.get("path") and not re.search(rule["path"], target):
            return False
        return True

    def take(self, types, method, target):
        """Consume and return the matching rules of the given types (first of each type)."""
        out = []
        seen = set()
        for r in self.rules:
            if r["type"] in types and r["type"] not in seen and r["count"] != 0 and self._matches(r, method, target):
                seen.add(r["type"])
                if r["count"] > 0:
                    r["count"] -= 1
                out.append(dict(r))
        self.rules = [r for r in self.rules if r["count"] != 0]
        return out
