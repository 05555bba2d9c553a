"""meta.k8s.io/v1 Table for pods: what `kubectl get pods` asks for.

kubectl sends Accept: application/json;as=Table;v=v1;g=meta.k8s.io and prints
the server's columns and cells verbatim; it has no client-side pod printer,
so without this the output would be only NAME and AGE.
The cells follow kubernetes/pkg/printers/internalversion printPod.
"""
import datetime

COLUMNS = [
    ("Name", "name", 0, "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"),
    ("Ready", "", 0, "The aggregate readiness state of this pod for accepting traffic."),
    ("Status", "", 0, "The aggregate status of the containers in this pod."),
    ("Restarts", "", 0, "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
    ("Age", "", 0, "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"),
    ("IP", "", 1, "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated."),
    ("Node", "", 1, "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename"),
    ("Nominated Node", "", 1, "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled."),
    ("Readiness Gates", "", 1, "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates"),
]


def human_duration(secs):
    """apimachinery duration.HumanDuration, which the Age cell uses."""
    s = int(secs)
    if s < 0:
        return "<invalid>"
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    h = m // 60
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    d = h // 24
    if h < 24 * 8:
        return f"{d}d{h % 24}h" if h % 24 else f"{d}d"
    if d < 365 * 2:
        return f"{d}d"
    return f"{d // 365}y"


def _age(ts):
    try:
        t = datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
    except (TypeError, ValueError):
        return "<unknown>"
    return human_duration((datetime.datetime.now(datetime.timezone.utc) - t).total_seconds())


def _cells(pod):
    st = pod.get("status") or {}
    spec = pod.get("spec") or {}
    total = len(spec.get("containers") or [])
    ready = restarts = 0
    reason = st.get("reason") or st.get("phase") or ""
    for cs in st.get("containerStatuses") or []:
        restarts += cs.get("restartCount", 0)
        state = cs.get("state") or {}
        if state.get("waiting", {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif "terminated" in state:
            t = state["terminated"]
            reason = t.get("reason") or (f"Signal:{t['signal']}" if t.get("signal") else f"ExitCode:{t.get('exitCode', 0)}")
        elif cs.get("ready") and "running" in state:
            ready += 1
    if reason == "Running" and ready != total:
        # printPod reports NotReady for a running pod whose Ready condition is False
        conds = {c["type"]: c["status"] for c in st.get("conditions") or []}
        if conds.get("Ready") != "True":
            reason = "NotReady" if not any("running" in (cs.get("state") or {}) for cs in st.get("containerStatuses") or []) else "Running"
    if pod["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    gates = spec.get("readinessGates") or []
    return [pod["metadata"]["name"], f"{ready}/{total}", reason, str(restarts),
            _age(pod["metadata"].get("creationTimestamp")),
            st.get("podIP") or "<none>", spec.get("nodeName") or "<none>",
            st.get("nominatedNodeName") or "<none>",
            "<none>" if not gates else f"0/{len(gates)}"]


def _object(pod, include):
    if include == "None":
        return None
    if include == "Object":
        return pod
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": pod["metadata"]}


def table(pods, rv, include="Metadata", with_columns=True):
    rows = []
    for p in pods:
        row = {"cells": _cells(p)}
        obj = _object(p, include)
        if obj is not None:
            row["object"] = obj
        rows.append(row)
    t = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv}}
    # Watch events after the first carry no column definitions (the real
    # server omits them to save bytes; kubectl keeps the first set).
    t["columnDefinitions"] = ([{"name": n, "type": "string", "format": f, "description": d, "priority": pr}
                               for n, f, pr, d in COLUMNS] if with_columns else None)
    t["rows"] = rows
    return t


def wants_table(accept):
    """True when the Accept header's first usable entry is the meta.k8s.io Table."""
    for part in (accept or "").split(","):
        params = {k.strip(): v.strip() for k, _, v in (x.partition("=") for x in part.split(";")[1:])}
        mt = part.split(";")[0].strip()
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io" and mt in ("application/json", "*/*"):
            return True
        if mt in ("application/json", "*/*") and "as" not in params:
            return False
    return False
