"""Pods, resourceVersions, selectors, patches, the pod lifecycle and watch fan-out.

One global resourceVersion counter, as etcd has: every write bumps it and is
recorded as an event in a bounded history, which is what a watch from a given
resourceVersion replays. A test can "compact" the history (control endpoint)
so that an older resourceVersion gets 410 Expired, like etcd compaction.
"""
import asyncio
import copy
import datetime
import os
import re
import shutil
import time
import uuid

from . import status as st
from .memcg import quantity_bytes

ANN = "fakekube.codepod.dev/"          # per-pod knobs: schedule, fate
FATES = ("ImagePullBackOff", "CrashLoopBackOff", "Unschedulable")
ALLOWED_FIELDS = {"metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy",
                  "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork",
                  "status.phase", "status.podIP", "status.nominatedNodeName"}


def now_ts():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")




def _quantity(q):
    """A resource quantity as a number (millis for cpu), or None."""
    if isinstance(q, str) and q.endswith("m") and q[:-1].replace(".", "", 1).isdigit():
        return float(q[:-1]) / 1000
    b = quantity_bytes(q)
    return float(b) if b is not None else None

class ApiError(Exception):
    """Raised with a ready Status body; the HTTP layer writes it with its code."""

    def __init__(self, body):
        super().__init__(body.get("message"))
        self.body = body
        self.code = body.get("code", 500)


# ---------------------------------------------------------------- selectors
_LABEL_REQ = re.compile(r"^\s*(!?)\s*([A-Za-z0-9./_-]+)\s*(?:(==|=|!=|\s+in\s+|\s+notin\s+)\s*(.*?))?\s*$")


def _split_top(s):
    """Split a selector on commas that are not inside parentheses."""
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return out


def parse_label_selector(sel):
    reqs = []
    for part in _split_top(sel or ""):
        m = _LABEL_REQ.match(part)
        if not m:
            raise ApiError(st.bad_request(f"unable to parse requirement: {part!r}"))
        neg, key, op, val = m.groups()
        op = (op or "").strip()
        if neg:
            reqs.append(("!", key, None))
        elif not op:
            reqs.append(("exists", key, None))
        elif op in ("in", "notin"):
            vals = [v.strip() for v in val.strip().strip("()").split(",") if v.strip()]
            reqs.append((op, key, vals))
        else:
            reqs.append(("!=" if op == "!=" else "=", key, val))
    return reqs


def label_match(reqs, labels):
    labels = labels or {}
    for op, key, val in reqs:
        have = labels.get(key)
        if op == "!" and key in labels:
            return False
        if op == "exists" and key not in labels:
            return False
        if op == "=" and have != val:
            return False
        if op == "!=" and have == val:
            return False
        if op == "in" and have not in val:
            return False
        if op == "notin" and have in val:
            return False
    return True


def parse_field_selector(sel):
    reqs = []
    for part in [p for p in (sel or "").split(",") if p.strip()]:
        m = re.match(r"^\s*([A-Za-z.]+)\s*(==|!=|=)\s*(.*?)\s*$", part)
        if not m:
            raise ApiError(st.bad_request(f"invalid selector: '{sel}'; can't understand '{part}'"))
        field, op, val = m.groups()
        if field not in ALLOWED_FIELDS:
            raise ApiError(st.bad_request(f'field label not supported: {field}'))
        reqs.append((field, op != "!=", val))
    return reqs


def _field(pod, path):
    cur = pod
    for p in path.split("."):
        cur = cur.get(p) if isinstance(cur, dict) else None
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return "" if cur is None else str(cur)


def field_match(reqs, pod):
    return all((_field(pod, f) == v) == eq for f, eq, v in reqs)


# ---------------------------------------------------------------- patches
def merge_patch(target, patch):
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


# Strategic merge patch: lists of these keys merge by the named field, as the
# Go struct tags (patchMergeKey) say for Pod. Everything else is merge patch.
_SMP_KEYS = {"containers": "name", "initContainers": "name", "ephemeralContainers": "name",
             "volumes": "name", "env": "name", "ports": "containerPort", "volumeMounts": "mountPath",
             "tolerations": None, "conditions": "type", "containerStatuses": "name",
             "ownerReferences": "uid", "imagePullSecrets": "name"}


def strategic_merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: v for k, v in copy.deepcopy(patch).items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if k.startswith("$"):
            continue  # $setElementOrder/..., $retainKeys: ordering hints, ignored
        if v is None:
            out.pop(k, None)
        elif isinstance(v, list) and _SMP_KEYS.get(k) and isinstance(out.get(k), list):
            key = _SMP_KEYS[k]
            merged = copy.deepcopy(out[k])
            for item in v:
                if not isinstance(item, dict) or key not in item:
                    merged.append(copy.deepcopy(item))
                    continue
                idx = next((i for i, e in enumerate(merged) if isinstance(e, dict) and e.get(key) == item[key]), None)
                if item.get("$patch") == "delete":
                    if idx is not None:
                        merged.pop(idx)
                elif idx is None:
                    merged.append({a: b for a, b in item.items() if not a.startswith("$")})
                else:
                    merged[idx] = strategic_merge_patch(merged[idx], item)
            out[k] = merged
        elif isinstance(v, dict):
            r = strategic_merge_patch(out.get(k), v)
            if r is None:
                out.pop(k, None)
            else:
                out[k] = r
        else:
            out[k] = copy.deepcopy(v)
    return out


def _ptr(path):
    return [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]


def json_patch(target, ops):
    """RFC 6902 JSON patch (add, remove, replace, test, move, copy)."""
    doc = copy.deepcopy(target)

    def walk(parts):
        cur = doc
        for p in parts[:-1]:
            cur = cur[int(p)] if isinstance(cur, list) else cur[p]
        return cur, parts[-1]

    def get(path):
        cur = doc
        for p in _ptr(path):
            cur = cur[int(p)] if isinstance(cur, list) else cur[p]
        return cur

    try:
        for op in ops:
            o, path = op["op"], op.get("path", "")
            if o == "test":
                if get(path) != op.get("value"):
                    raise ApiError(st.status(422, "Invalid", "the server rejected our request due to an error in our request"))
                continue
            if o in ("move", "copy"):
                val = copy.deepcopy(get(op["from"]))
                if o == "move":
                    par, k = walk(_ptr(op["from"]))
                    par.pop(int(k) if isinstance(par, list) else k)
                o, value = "add", val
            else:
                value = copy.deepcopy(op.get("value"))
            par, k = walk(_ptr(path))
            if o == "add":
                if isinstance(par, list):
                    par.insert(len(par) if k == "-" else int(k), value)
                else:
                    par[k] = value
            elif o == "remove":
                par.pop(int(k) if isinstance(par, list) else k)
            elif o == "replace":
                if isinstance(par, list):
                    par[int(k)] = value
                else:
                    if k not in par:
                        raise KeyError(k)
                    par[k] = value
    except ApiError:
        raise
    except (KeyError, IndexError, ValueError, TypeError) as e:
        raise ApiError(st.status(422, "Invalid", f"the server rejected our request due to an error in our request: {e}"))
    return doc


# ---------------------------------------------------------------- the store
class Watcher:
    """One open watch: a bounded queue the HTTP layer drains.

    Bounded so a stalled client cannot make us buffer without limit; when it
    overflows we end the watch (the real cacher does the same to slow watchers),
    and the client must re-watch from its last resourceVersion.
    """

    def __init__(self, ns, label_reqs, field_reqs):
        self.ns, self.label_reqs, self.field_reqs = ns, label_reqs, field_reqs
        self.queue = asyncio.Queue(maxsize=4096)
        self.overflowed = False

    def matches(self, pod):
        if pod is None:
            return False
        if self.ns and pod["metadata"].get("namespace") != self.ns:
            return False
        return label_match(self.label_reqs, pod["metadata"].get("labels")) and field_match(self.field_reqs, pod)

    def translate(self, etype, old, new):
        """Selector-aware event type: an object leaving the selection is DELETED for this watcher."""
        if etype == "ADDED":
            return ("ADDED", new) if self.matches(new) else None
        if etype == "DELETED":
            return ("DELETED", new) if self.matches(new) else None
        was, now = self.matches(old), self.matches(new)
        if was and now:
            return ("MODIFIED", new)
        if now:
            return ("ADDED", new)
        if was:
            return ("DELETED", new)
        return None

    def push(self, ev):
        if self.overflowed:
            return
        try:
            self.queue.put_nowait(ev)
        except asyncio.QueueFull:
            self.overflowed = True
            self.queue = asyncio.Queue(maxsize=1)
            self.queue.put_nowait(None)  # wake the reader; it will end the stream


class Store:
    def __init__(self, state_dir, schedule_ms=(50, 50, 200), deletion_ms=100, history=10000):
        self.state_dir = state_dir
        self.rv = 1000
        self.pods = {}                   # (ns, name) -> pod dict
        self.history = []                # (rv, type, old, new)
        self.history_max = history
        self.compacted_rv = self.rv      # watches from below this get 410
        self.watchers = set()
        self.schedule_ms = list(schedule_ms)
        self.deletion_ms = deletion_ms
        self.namespaces = set()          # names; their objects are namespaces.py's
        self.tasks = {}                  # (ns, name) -> lifecycle task
        self.exec_procs = {}             # (ns, name) -> set of running exec processes
        self.pod_sandboxes = {}          # (ns, name) -> {"proc", "init"}: the pod's namespaces
        self.pending_fates = []          # [{"fate":..., "name": regex, "count": n}]
        self.admit = None                # fn(ns, name, body): validating admission of a create
        self.memcg = None                # memcg.MemCg: container memory limits (exec'd processes)

    # -- helpers
    def pod_dir(self, ns, name):
        return os.path.join(self.state_dir, "pods", ns, name)

    def _bump(self, etype, old, new):
        self.rv += 1
        new["metadata"]["resourceVersion"] = str(self.rv)
        self.history.append((self.rv, etype, copy.deepcopy(old), copy.deepcopy(new)))
        if len(self.history) > self.history_max:
            drop = len(self.history) - self.history_max
            self.compacted_rv = self.history[drop - 1][0]
            del self.history[:drop]
        for w in list(self.watchers):
            ev = w.translate(etype, old, new)
            if ev:
                w.push(ev)

    def compact(self):
        """Forget all history: every watch from an older resourceVersion now gets 410."""
        self.history.clear()
        self.compacted_rv = self.rv

    def get(self, ns, name):
        pod = self.pods.get((ns, name))
        if pod is None:
            raise ApiError(st.not_found(name))
        return pod

    def list(self, ns, label_selector="", field_selector=""):
        lr = parse_label_selector(label_selector)
        fr = parse_field_selector(field_selector)
        items = [p for (pns, _), p in sorted(self.pods.items())
                 if (not ns or pns == ns) and label_match(lr, p["metadata"].get("labels")) and field_match(fr, p)]
        return items, str(self.rv)

    # -- create
    def create(self, ns, body):
        if not isinstance(body, dict):
            raise ApiError(st.bad_request("the body of the request was in an unknown format"))
        md = body.setdefault("metadata", {})
        if md.get("namespace") and md["namespace"] != ns:
            raise ApiError(st.bad_request("the namespace of the provided object does not match the namespace sent on the request"))
        if ns not in self.namespaces:
            raise ApiError(st.not_found(ns, "namespaces"))
        if not md.get("name") and md.get("generateName"):
            md["name"] = md["generateName"] + uuid.uuid4().hex[:5]
        name = md.get("name", "")
        causes = []
        if not name:
            causes.append(("FieldValueRequired", "Required value: name or generateName is required", "metadata.name"))
        elif not re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$", name) or len(name) > 253:
            causes.append(("FieldValueInvalid",
                           f"Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case "
                           "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
                           "metadata.name"))
        spec = body.get("spec") or {}
        containers = spec.get("containers") or []
        if not containers:
            causes.append(("FieldValueRequired", "Required value", "spec.containers"))
        for i, c in enumerate(containers):
            if not c.get("name"):
                causes.append(("FieldValueRequired", "Required value", f"spec.containers[{i}].name"))
            if not c.get("image"):
                causes.append(("FieldValueRequired", "Required value", f"spec.containers[{i}].image"))
            # As the real API server validates (seen on the test cluster):
            # no request above its limit.
            res = c.get("resources") or {}
            for rname, req in sorted((res.get("requests") or {}).items()):
                lim = (res.get("limits") or {}).get(rname)
                rb, lb = _quantity(req), _quantity(lim) if lim is not None else None
                if lb is not None and rb is not None and rb > lb:
                    causes.append(("FieldValueInvalid",
                                   f"Invalid value: \"{req}\": must be less than or equal to {rname} limit of {lim}",
                                   f"spec.containers[{i}].resources.requests"))
        if causes:
            raise ApiError(st.invalid(name, causes))
        if self.admit:
            self.admit(ns, name, body)
        if (ns, name) in self.pods:
            raise ApiError(st.already_exists(name))

        pod = {"kind": "Pod", "apiVersion": "v1", "metadata": {}, "spec": {}, "status": {}}
        meta = {"name": name, "namespace": ns, "uid": str(uuid.uuid4()), "resourceVersion": "",
                "creationTimestamp": now_ts()}
        for k in ("generateName", "labels", "annotations", "ownerReferences", "finalizers"):
            if md.get(k):
                meta[k] = md[k]
        if md.get("generateName"):
            meta = {"name": name, "generateName": md["generateName"], **meta}
        pod["metadata"] = meta
        pod["spec"] = self._default_spec(copy.deepcopy(spec))
        pod["status"] = {"phase": "Pending", "qosClass": _qos(pod["spec"])}
        self.pods[(ns, name)] = pod
        os.makedirs(self.pod_dir(ns, name), exist_ok=True)
        self._bump("ADDED", None, pod)
        self.tasks[(ns, name)] = asyncio.get_event_loop().create_task(self._lifecycle(ns, name, pod["metadata"]["uid"]))
        return pod

    @staticmethod
    def _default_spec(spec):
        # The defaults the apiserver fills in, so `get -o json` looks real.
        for c in spec.get("containers", []):
            img = c.get("image", "")
            tag = img.rsplit("/", 1)[-1]
            c.setdefault("resources", {})
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            c.setdefault("imagePullPolicy", "Always" if (":" not in tag or tag.endswith(":latest")) and "@" not in tag else "IfNotPresent")
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("serviceAccountName", "default")
        spec.setdefault("serviceAccount", spec["serviceAccountName"])
        spec.setdefault("securityContext", {})
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("tolerations", [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}])
        spec.setdefault("priority", 0)
        spec.setdefault("enableServiceLinks", True)
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
        return spec

    # -- lifecycle
    def _fate(self, pod):
        ann = pod["metadata"].get("annotations") or {}
        if ann.get(ANN + "fate"):
            return ann[ANN + "fate"]
        for f in self.pending_fates:
            if f["count"] != 0 and re.search(f.get("name") or "", pod["metadata"]["name"]):
                f["count"] -= 1
                fate = f["fate"]
                self.pending_fates = [x for x in self.pending_fates if x["count"] != 0]
                return fate
        return None

    def _schedule(self, pod):
        ann = pod["metadata"].get("annotations") or {}
        if ann.get(ANN + "schedule"):
            try:
                return [int(x) for x in ann[ANN + "schedule"].split(",")][:3]
            except ValueError:
                pass
        return list(self.schedule_ms)

    def _update_status(self, ns, name, uid, fn):
        pod = self.pods.get((ns, name))
        if pod is None or pod["metadata"]["uid"] != uid:
            return None
        old = copy.deepcopy(pod)
        fn(pod)
        self._bump("MODIFIED", old, pod)
        return pod

    async def _lifecycle(self, ns, name, uid):
        """Pending -> scheduled -> ContainerCreating -> Running & Ready (or a fate)."""
        pod = self.pods[(ns, name)]
        fate = self._fate(pod)
        sched, creating, running = (self._schedule(pod) + [200, 200, 200])[:3]
        await asyncio.sleep(sched / 1000)
        if fate == "Unschedulable":
            self._update_status(ns, name, uid, lambda p: p["status"].update(
                conditions=[_cond("PodScheduled", "False", "Unschedulable",
                                  "0/2 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint "
                                  "{node-role.kubernetes.io/control-plane: }. preemption: 0/2 nodes are available: "
                                  "1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling.")]))
            return
        if self._update_status(ns, name, uid, _scheduled) is None:
            return
        await asyncio.sleep(creating / 1000)
        if self._update_status(ns, name, uid, _container_creating) is None:
            return
        await asyncio.sleep(running / 1000)
        if fate == "ImagePullBackOff":
            self._update_status(ns, name, uid, lambda p: _waiting(p, "ErrImagePull", _pull_msg(p, "ErrImagePull")))
            await asyncio.sleep(running / 1000)
            self._update_status(ns, name, uid, lambda p: _waiting(p, "ImagePullBackOff", _pull_msg(p, "ImagePullBackOff")))
            return
        if self._update_status(ns, name, uid, _running) is None:
            return
        if fate == "CrashLoopBackOff":
            for restart in range(1, 3):
                await asyncio.sleep(running / 1000)
                if self._update_status(ns, name, uid, lambda p: _crashed(p, restart)) is None:
                    return
        elif fate:
            return

    def set_state(self, ns, name, state):
        """Force an existing pod into a state now (control endpoint)."""
        pod = self.get(ns, name)
        uid = pod["metadata"]["uid"]
        t = self.tasks.pop((ns, name), None)
        if t:
            t.cancel()
        fns = {
            "Pending": lambda p: p.update(status={"phase": "Pending", "qosClass": p["status"].get("qosClass", "BestEffort")}),
            "Unschedulable": lambda p: p["status"].update(conditions=[_cond("PodScheduled", "False", "Unschedulable",
                                                                            "0/1 nodes are available: 1 Insufficient cpu.")]),
            "ContainerCreating": lambda p: (_scheduled(p), _container_creating(p)),
            "Running": lambda p: (_scheduled(p), _container_creating(p), _running(p)),
            "ImagePullBackOff": lambda p: (_scheduled(p), _container_creating(p),
                                           _waiting(p, "ImagePullBackOff", _pull_msg(p, "ImagePullBackOff"))),
            "CrashLoopBackOff": lambda p: (_scheduled(p), _container_creating(p), _running(p), _crashed(p, 1)),
            "Succeeded": lambda p: _terminated(p, 0),
            "Failed": lambda p: _terminated(p, 1),
        }
        if state not in fns:
            raise ApiError(st.bad_request(f"unknown state {state}; one of {sorted(fns)}"))
        return self._update_status(ns, name, uid, fns[state])

    # -- delete
    def delete(self, ns, name, opts):
        pod = self.get(ns, name)
        pre = (opts or {}).get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != pod["metadata"]["uid"]:
            raise ApiError(st.precondition_failed(ns, name, "UID", pre["uid"], pod["metadata"]["uid"]))
        if pre.get("resourceVersion") and pre["resourceVersion"] != pod["metadata"]["resourceVersion"]:
            raise ApiError(st.precondition_failed(ns, name, "ResourceVersion", pre["resourceVersion"],
                                                  pod["metadata"]["resourceVersion"]))
        grace = (opts or {}).get("gracePeriodSeconds")
        if grace is None:
            grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
        grace = int(grace)
        if pod["metadata"].get("deletionTimestamp"):
            return pod  # already terminating: the real server answers with the object again
        # Unscheduled pods (no node) and grace 0 go at once, as the real registry does.
        if grace == 0 or not pod["spec"].get("nodeName"):
            return self._remove(ns, name)
        old = copy.deepcopy(pod)
        pod["metadata"]["deletionTimestamp"] = (datetime.datetime.now(datetime.timezone.utc) +
                                                datetime.timedelta(seconds=grace)).strftime("%Y-%m-%dT%H:%M:%SZ")
        pod["metadata"]["deletionGracePeriodSeconds"] = grace
        self._bump("MODIFIED", old, pod)
        out = copy.deepcopy(pod)
        uid = pod["metadata"]["uid"]
        delay = min(grace * 1000, self.deletion_ms) / 1000

        async def finish():
            self._kill_execs(ns, name)
            await asyncio.sleep(delay)
            # As the kubelet does: containers end (SIGKILL after grace -> 137,
            # like fixture watch-stream-pod.jsonl's DELETED object), then the pod goes.
            self._update_status(ns, name, uid, lambda p: _terminated(p, 137))
            p = self.pods.get((ns, name))
            if p is not None and p["metadata"]["uid"] == uid:
                self._remove(ns, name)
        asyncio.get_event_loop().create_task(finish())
        return out

    def _kill_execs(self, ns, name):
        for proc in list(self.exec_procs.get((ns, name), ())):
            try:
                proc.kill()
            except ProcessLookupError:
                pass
        box = self.pod_sandboxes.pop((ns, name), None)
        if box is not None:
            # its PID 1 dies, and the kernel kills the whole PID namespace
            box["proc"].kill()
            box["proc"].wait()
        # Execs share the host's PID namespace (see execws.py), so what they
        # started outlives them: find every process of the pod by the
        # environment each exec starts with, as a container's end would.
        want = {f"FAKEKUBE_NAMESPACE={ns}".encode(), f"FAKEKUBE_POD={name}".encode()}
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = set(f.read().split(b"\0"))
            except OSError:
                continue
            if want <= env:
                try:
                    os.kill(int(pid), 9)
                except OSError:
                    pass

    def check_oom(self, ns, name, container):
        """An OOM kill in the pod's memory cgroup ends the container as the
        kubelet reports it: terminated, reason OOMKilled, exit code 137."""
        pod = self.pods.get((ns, name))
        if pod is None or self.memcg is None or not self.memcg.new_oom_kill(ns, name):
            return False
        self._kill_execs(ns, name)
        self._update_status(ns, name, pod["metadata"]["uid"], lambda p: _oom_killed(p, container))
        return True

    def check_eviction(self, ns, name):
        """The kubelet's local-storage eviction: a pod whose workspace (the
        pod's folder, standing for its emptyDir volume named "workspace")
        holds more than that volume's sizeLimit, or than the exec container's
        ephemeral-storage limit, has its containers killed and is Failed,
        reason Evicted (the real kubelet looks about every 10 s; the fake
        looks every half second, so it is the stricter)."""
        pod = self.pods.get((ns, name))
        if pod is None or pod["status"].get("phase") != "Running" or pod["metadata"].get("deletionTimestamp"):
            return False
        limit, what = _storage_limit(pod)
        if not limit:
            return False
        used = _du(self.pod_dir(ns, name))
        if used <= limit:
            return False
        self._kill_execs(ns, name)
        self._update_status(ns, name, pod["metadata"]["uid"], lambda p: _evicted(p, what))
        return True

    def _remove(self, ns, name):
        pod = self.pods.pop((ns, name))
        t = self.tasks.pop((ns, name), None)
        if t:
            t.cancel()
        self._kill_execs(ns, name)
        if self.memcg:
            self.memcg.release(ns, name)
        self._bump("DELETED", pod, pod)
        # The pod's "filesystem" goes with it, like a real container's.
        shutil.rmtree(self.pod_dir(ns, name), ignore_errors=True)
        return pod

    # -- patch / replace
    def _check_update(self, old, new):
        name = old["metadata"]["name"]
        if new.get("metadata", {}).get("name", name) != name:
            raise ApiError(st.bad_request("the name of the object (%s) does not match the name on the URL (%s)"
                                          % (new["metadata"]["name"], name)))
        a, b = copy.deepcopy(old["spec"]), copy.deepcopy(new.get("spec") or {})
        for s in (a, b):
            for c in s.get("containers", []) + s.get("initContainers", []):
                c.pop("image", None)
            for k in ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds"):
                s.pop(k, None)
        if a != b:
            msg = ("Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
                   "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions "
                   "to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
                   "previously negative)")
            body = st.invalid(name, [("FieldValueForbidden", msg, "spec")])
            body["message"] = f'Pod "{name}" is invalid: spec: {msg}'
            raise ApiError(body)

    def _apply(self, ns, name, new):
        pod = self.get(ns, name)
        old = copy.deepcopy(pod)
        self._check_update(old, new)
        # Server-owned fields can't be changed by a client write.
        keep = {k: old["metadata"].get(k) for k in ("uid", "creationTimestamp", "namespace", "name",
                                                    "deletionTimestamp", "deletionGracePeriodSeconds")}
        new["metadata"] = {**new.get("metadata", {}), **{k: v for k, v in keep.items() if v is not None}}
        new["status"] = old["status"]  # status only changes through the status subresource
        new["kind"], new["apiVersion"] = "Pod", "v1"
        if new == old:
            return pod  # a no-op write does not bump the resourceVersion, as in etcd3 storage
        self.pods[(ns, name)] = new
        self._bump("MODIFIED", old, new)
        return new

    def patch(self, ns, name, ctype, body):
        pod = self.get(ns, name)
        ctype = (ctype or "").split(";")[0].strip()
        if ctype == "application/json-patch+json":
            if not isinstance(body, list):
                raise ApiError(st.bad_request("json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp"))
            new = json_patch(pod, body)
        elif ctype in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            if not isinstance(body, dict):
                raise ApiError(st.bad_request("json: cannot unmarshal into Go value of type map[string]interface {}"))
            # metadata.resourceVersion in a patch is an optimistic-concurrency precondition.
            want = (body.get("metadata") or {}).get("resourceVersion")
            if want is not None and want != pod["metadata"]["resourceVersion"]:
                raise ApiError(st.conflict(name))
            fn = merge_patch if ctype == "application/merge-patch+json" else strategic_merge_patch
            new = fn(pod, body)
        else:
            raise ApiError(st.status(415, "UnsupportedMediaType",
                                     f"the body of the request was in an unknown format - accepted media types include: "
                                     "application/json-patch+json, application/merge-patch+json, "
                                     "application/apply-patch+yaml, application/strategic-merge-patch+json"))
        new.setdefault("metadata", {})["resourceVersion"] = pod["metadata"]["resourceVersion"]
        return self._apply(ns, name, new)

    def replace(self, ns, name, body):
        pod = self.get(ns, name)
        want = (body.get("metadata") or {}).get("resourceVersion")
        if not want:
            raise ApiError(st.invalid(name, [("FieldValueRequired", "Invalid value: 0x0: must be specified for an update",
                                              "metadata.resourceVersion")]))
        if want != pod["metadata"]["resourceVersion"]:
            raise ApiError(st.conflict(name))
        return self._apply(ns, name, copy.deepcopy(body))

    # -- watch
    def open_watch(self, ns, label_selector, field_selector, rv):
        """Returns (watcher, initial events) or raises ApiError(410) for a too-old rv."""
        w = Watcher(ns, parse_label_selector(label_selector), parse_field_selector(field_selector))
        initial = []
        if rv in (None, "", "0"):
            # "Get state and start at most recent": synthetic ADDED for what exists now.
            initial = [("ADDED", copy.deepcopy(p)) for p in self.pods.values() if w.matches(p)]
        else:
            try:
                n = int(rv)
            except ValueError:
                raise ApiError(st.bad_request(f'invalid resource version: "{rv}"'))
            if n < self.compacted_rv:
                raise ApiError(st.expired(rv, self.compacted_rv))
            for erv, etype, old, new in self.history:
                if erv > n:
                    ev = w.translate(etype, old, new)
                    if ev:
                        initial.append(ev)
        self.watchers.add(w)
        return w, initial

    def close_watch(self, w):
        self.watchers.discard(w)


# ---------------------------------------------------------------- status builders
def _cond(ctype, status, reason=None, message=None):
    c = {"type": ctype, "status": status, "lastProbeTime": None, "lastTransitionTime": now_ts()}
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    return c


def _qos(spec):
    res = [c.get("resources") or {} for c in spec.get("containers", [])]
    if not any(r.get("limits") or r.get("requests") for r in res):
        return "BestEffort"
    if all((r.get("limits") or {}).get("cpu") and (r.get("limits") or {}).get("memory") and
           all((r.get("requests") or {}).get(k, (r.get("limits") or {})[k]) == r["limits"][k] for k in ("cpu", "memory"))
           for r in res):
        return "Guaranteed"
    return "Burstable"


def _names(p):
    return [c["name"] for c in p["spec"].get("containers", [])]


def _scheduled(p):
    p["spec"]["nodeName"] = "fakekube-node"
    p["status"]["conditions"] = [_cond("PodScheduled", "True")]


def _container_creating(p):
    unready = "containers with unready status: [" + " ".join(_names(p)) + "]"
    p["status"]["conditions"] = [
        _cond("PodReadyToStartContainers", "False"), _cond("Initialized", "True"),
        _cond("Ready", "False", "ContainersNotReady", unready),
        _cond("ContainersReady", "False", "ContainersNotReady", unready),
        _cond("PodScheduled", "True")]
    p["status"]["hostIP"] = "127.0.0.1"
    p["status"]["hostIPs"] = [{"ip": "127.0.0.1"}]
    p["status"]["startTime"] = now_ts()
    p["status"]["containerStatuses"] = [
        {"name": c["name"], "state": {"waiting": {"reason": "ContainerCreating"}}, "lastState": {},
         "ready": False, "restartCount": 0, "image": c.get("image", ""), "imageID": "", "started": False}
        for c in p["spec"].get("containers", [])]
    # keep qosClass last, as the real serializer orders PodStatus fields
    p["status"]["qosClass"] = p["status"].pop("qosClass", "BestEffort")


def _cid(p, c, n=0):
    return "containerd://" + uuid.uuid5(uuid.NAMESPACE_OID, f'{p["metadata"]["uid"]}/{c}/{n}').hex * 2


def _running(p):
    t = now_ts()
    conds = {c["type"]: c for c in p["status"].get("conditions", [])}
    for k in ("PodReadyToStartContainers", "Ready", "ContainersReady"):
        conds[k] = _cond(k, "True")
    p["status"]["phase"] = "Running"
    p["status"]["conditions"] = [conds[k] for k in ("PodReadyToStartContainers", "Initialized", "Ready",
                                                    "ContainersReady", "PodScheduled") if k in conds]
    p["status"]["podIP"] = "10.244.0." + str(2 + int(uuid.UUID(p["metadata"]["uid"]).int % 250))
    p["status"]["podIPs"] = [{"ip": p["status"]["podIP"]}]
    p["status"]["containerStatuses"] = [
        {"name": c["name"], "state": {"running": {"startedAt": t}}, "lastState": {}, "ready": True,
         "restartCount": 0, "image": c.get("image", ""),
         "imageID": c.get("image", "").split(":")[0] + "@sha256:" + "0" * 64,
         "containerID": _cid(p, c["name"]), "started": True}
        for c in p["spec"].get("containers", [])]
    p["status"]["qosClass"] = p["status"].pop("qosClass", "BestEffort")


def _waiting(p, reason, msg):
    for cs in p["status"].get("containerStatuses", []):
        cs["state"] = {"waiting": {"reason": reason, "message": msg}}


def _pull_msg(p, reason):
    img = p["spec"]["containers"][0].get("image", "")
    err = (f'failed to pull and unpack image "{img}": failed to resolve reference "{img}": '
           f'not found')
    if reason == "ErrImagePull":
        return err
    return f'Back-off pulling image "{img}": ErrImagePull: {err}'


def _crashed(p, restarts):
    t = now_ts()
    unready = "containers with unready status: [" + " ".join(_names(p)) + "]"
    for c in p["status"]["conditions"]:
        if c["type"] in ("Ready", "ContainersReady"):
            c.update(status="False", reason="ContainersNotReady", message=unready, lastTransitionTime=t)
    for cs in p["status"].get("containerStatuses", []):
        cs["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": t, "finishedAt": t,
                                          "containerID": _cid(p, cs["name"], restarts)}}
        backoff = 10 * 2 ** (restarts - 1)
        cs["state"] = {"waiting": {"reason": "CrashLoopBackOff",
                                   "message": f'back-off {backoff}s restarting failed container={cs["name"]} '
                                              f'pod={p["metadata"]["name"]}_{p["metadata"]["namespace"]}({p["metadata"]["uid"]})'}}
        cs["ready"], cs["started"], cs["restartCount"] = False, False, restarts
        cs["containerID"] = _cid(p, cs["name"], restarts)


def _oom_killed(p, container):
    """The container was OOM-killed: with restartPolicy Never the pod fails;
    otherwise the kubelet restarts it and lastState keeps the termination."""
    t = now_ts()
    never = p["spec"].get("restartPolicy", "Always") == "Never"
    for cs in p["status"].get("containerStatuses", []):
        if cs["name"] != container:
            continue
        started = (cs.get("state", {}).get("running") or {}).get("startedAt", t)
        term = {"exitCode": 137, "reason": "OOMKilled", "startedAt": started, "finishedAt": t,
                "containerID": cs.get("containerID", "")}
        if never:
            cs["state"] = {"terminated": term}
            cs["ready"], cs["started"] = False, False
        else:
            cs["lastState"] = {"terminated": term}
            cs["restartCount"] = cs.get("restartCount", 0) + 1
            cs["containerID"] = _cid(p, container, cs["restartCount"])
            cs["state"] = {"running": {"startedAt": t}}
    if never:
        p["status"]["phase"] = "Failed"
        for c in p["status"].get("conditions", []):
            if c["type"] in ("Ready", "ContainersReady"):
                c.update(status="False", reason="PodFailed", lastTransitionTime=t)
                c.pop("message", None)


def _storage_limit(pod):
    """(bytes, message) of what evicts the pod for its local storage, or (0, None)."""
    from .memcg import quantity_bytes
    spec = pod.get("spec", {})
    best, what = 0, None
    for v in spec.get("volumes", []):
        q = quantity_bytes((v.get("emptyDir") or {}).get("sizeLimit", "")) if v.get("name") == "workspace" else None
        if q:
            best, what = q, 'Usage of EmptyDir volume "workspace" exceeds the limit "%s". ' % v["emptyDir"]["sizeLimit"]
    for c in spec.get("containers", [])[:1]:
        lim = ((c.get("resources") or {}).get("limits") or {}).get("ephemeral-storage")
        q = quantity_bytes(lim) if lim else None
        if q and (not best or q < best):
            best, what = q, "Pod ephemeral local storage usage exceeds the total limit of containers %s. " % lim
    return best, what


def _du(path):
    """The blocks under `path`, links not followed (the kubelet's du)."""
    total = 0
    for root, dirs, files in os.walk(path):
        for n in dirs + files:
            try:
                total += os.lstat(os.path.join(root, n)).st_blocks * 512
            except OSError:
                pass
    return total


def _evicted(p, message):
    t = now_ts()
    p["status"].update(phase="Failed", reason="Evicted", message="The node was low on resource: ephemeral-storage. " + message)
    for c in p["status"].get("conditions", []):
        if c["type"] in ("Ready", "ContainersReady"):
            c.update(status="False", reason="PodFailed", lastTransitionTime=t)
            c.pop("message", None)
    for cs in p["status"].get("containerStatuses", []):
        cs["state"] = {"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown",
                                      "message": "The container could not be located when the pod was terminated",
                                      "startedAt": t, "finishedAt": t, "containerID": cs.get("containerID", "")}}
        cs["ready"], cs["started"] = False, False


def _terminated(p, code):
    t = now_ts()
    p["status"]["phase"] = "Succeeded" if code == 0 else "Failed"
    for c in p["status"].get("conditions", []):
        if c["type"] in ("Ready", "ContainersReady"):
            c.update(status="False", reason="PodCompleted", lastTransitionTime=t)
            c.pop("message", None)
    for cs in p["status"].get("containerStatuses", []):
        cs["state"] = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                      "startedAt": t, "finishedAt": t, "containerID": cs.get("containerID", "")}}
        cs["ready"], cs["started"] = False, False
