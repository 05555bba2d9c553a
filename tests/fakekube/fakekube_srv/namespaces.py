"""Namespaces: the four a cluster starts with, and others a client creates,
each with its labels (Pod Security admission reads them, admission.py).

Served: create (POST /api/v1/namespaces, 201; 409 AlreadyExists), get, list
(label selectors), and merge / strategic-merge patches of metadata labels
and annotations (`kubectl label ns`, `kubectl annotate ns`). Not served:
delete, watch, tables (kubectl get ns prints from the plain objects).
`serve --ns-label NS:KEY=VALUE` sets a label at start (creating NS).
"""
import copy
import re
import uuid

from . import status as st
from .store import ApiError, label_match, merge_patch, now_ts, parse_label_selector

NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
BUILTIN = ("default", "kube-system", "kube-public", "kube-node-lease")


class Namespaces:
    def __init__(self, store):
        self.store = store
        self.objs = {}
        for n in BUILTIN:
            self._add(n, {}, {})

    def _add(self, name, labels, annotations):
        md = {"name": name, "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, name + ".fakekube")),
              "resourceVersion": str(self.store.rv), "creationTimestamp": now_ts(),
              "labels": {**labels, "kubernetes.io/metadata.name": name}}
        if annotations:
            md["annotations"] = dict(annotations)
        obj = {"kind": "Namespace", "apiVersion": "v1", "metadata": md,
               "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}
        self.objs[name] = obj
        self.store.namespaces.add(name)
        return obj

    def _bump(self, obj):
        # Namespaces share the store's resourceVersion counter (one etcd).
        self.store.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.store.rv)

    def labels(self, name):
        obj = self.objs.get(name)
        return obj["metadata"].get("labels", {}) if obj else {}

    def set_label(self, name, key, value):
        obj = self.objs.get(name) or self._add(name, {}, {})
        obj["metadata"]["labels"][key] = value
        self._bump(obj)

    def get(self, name):
        obj = self.objs.get(name)
        if obj is None:
            raise ApiError(st.not_found(name, "namespaces"))
        return obj

    def list(self, selector=""):
        reqs = parse_label_selector(selector)
        items = [o for n, o in sorted(self.objs.items()) if label_match(reqs, o["metadata"].get("labels"))]
        return {"kind": "NamespaceList", "apiVersion": "v1",
                "metadata": {"resourceVersion": str(self.store.rv)}, "items": items}

    def create(self, body):
        if not isinstance(body, dict):
            raise ApiError(st.bad_request("the body of the request was in an unknown format"))
        md = body.get("metadata") or {}
        name = md.get("name") or ""
        if not NAME.match(name) or len(name) > 63:
            msg = (f'Invalid value: "{name}": a lowercase RFC 1123 label must consist of lower case alphanumeric '
                   "characters or '-', and must start and end with an alphanumeric character")
            body = st.invalid(name, [("FieldValueInvalid", msg, "metadata.name")])
            body["message"] = body["message"].replace("Pod ", "Namespace ", 1)
            body["details"]["kind"] = "Namespace"
            raise ApiError(body)
        if name in self.objs:
            raise ApiError(st.status(409, "AlreadyExists", f'namespaces "{name}" already exists',
                                     {"name": name, "kind": "namespaces"}))
        obj = self._add(name, md.get("labels") or {}, md.get("annotations") or {})
        self._bump(obj)
        return obj

    def patch(self, name, ctype, body):
        obj = self.get(name)
        ctype = (ctype or "").split(";")[0].strip()
        if ctype not in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            raise ApiError(st.status(415, "UnsupportedMediaType",
                                     "the body of the request was in an unknown format - accepted media types "
                                     "include: application/merge-patch+json, application/strategic-merge-patch+json"))
        if not isinstance(body, dict):
            raise ApiError(st.bad_request("json: cannot unmarshal into Go value of type map[string]interface {}"))
        want = (body.get("metadata") or {}).get("resourceVersion")
        if want is not None and want != obj["metadata"]["resourceVersion"]:
            raise ApiError(st.status(409, "Conflict",
                                     f'Operation cannot be fulfilled on namespaces "{name}": the object has been '
                                     "modified; please apply your changes to the latest version and try again",
                                     {"name": name, "kind": "namespaces"}))
        md = body.get("metadata") or {}
        new = copy.deepcopy(obj)
        for k in ("labels", "annotations"):
            if k in md:
                new["metadata"][k] = merge_patch(new["metadata"].get(k) or {}, md[k] or {})
                if not new["metadata"][k]:
                    new["metadata"].pop(k)
        new["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = name
        if new != obj:
            self._bump(new)
            self.objs[name] = new
        return self.objs[name]


def parse_ns_label(spec):
    """NS:KEY=VALUE (serve --ns-label) -> (ns, key, value)."""
    ns, sep, kv = spec.partition(":")
    key, eq, value = kv.partition("=")
    if not (sep and eq and ns and key):
        raise ValueError(f"--ns-label {spec!r}: want NAMESPACE:KEY=VALUE")
    return ns, key, value
