"""RBAC for the fake API server: `serve --rbac RULES.yaml [--rbac-namespace NS]`.

RULES.yaml is a list of PolicyRules (charts/codepod/files/rbac-rules.yaml, the
chart's Role rules) granted in one namespace only, as a Role with its
RoleBinding grants them. Every request with credentials is turned into the
authorizer's attributes the way the real apiserver's RequestInfoFactory does
(k8s.io/apiserver/pkg/endpoints/request/requestinfo.go):

  GET    collection             list     (watch with ?watch=1|true, or /watch/ paths)
  GET    named object           get      (watch with ?watch=1|true)
  POST   collection / subres.   create   (so POST .../pods/NAME/exec: pods/exec create)
  GET    .../pods/NAME/exec     get      (the WebSocket upgrade: pods/exec get)
  PUT    update, PATCH patch, DELETE delete (deletecollection without a name)

From 1.35 (feature gate AuthorizePodWebsocketUpgradeCreatePermission, beta,
on by default) a WebSocket upgrade of pods/exec, pods/attach or
pods/portforward is authorized as "get" AND, in a second, synthetic check,
as "create" (as SPDY's POST always was): a Role needs both verbs. The fake
always applies it (its 403 then names the "create" verb).

A request the rules do not allow gets the real 403 Forbidden Status
(tests/fixtures/kubernetes/status-403-forbidden-*.json). Non-resource paths are
allowed only where the default discovery roles allow every authenticated user
(/api, /apis, /version, /openapi, /healthz, /livez, /readyz and below). The
fake's own control endpoints (/fakekube/) are never checked.

Every decision is counted; GET /fakekube/rbac lists the denied ones, so a
test can also assert that nothing was refused.
"""
import yaml
from aiohttp import web

from . import status as st
from .api import query_bool

USER = "system:serviceaccount:codepod:codepod"
READ_VERBS = {"GET": "get", "HEAD": "get"}
DISCOVERY_PREFIXES = ("/api", "/apis", "/version", "/openapi", "/healthz", "/livez", "/readyz")
NAMESPACE_SUBRESOURCES = {"status", "finalize"}
CONNECT_SUBRESOURCES = {"exec", "attach", "portforward"}


def load_rules(path):
    """The PolicyRules of a rules file: a list, or a Role/ClusterRole with `rules`."""
    with open(path) as f:
        doc = yaml.safe_load(f)
    if isinstance(doc, dict):
        doc = doc.get("rules")
    if not isinstance(doc, list) or not doc:
        raise ValueError(f"{path}: not a list of PolicyRules")
    for r in doc:
        if not isinstance(r, dict) or not r.get("verbs"):
            raise ValueError(f"{path}: a rule without verbs: {r!r}")
        if "nonResourceURLs" in r:
            raise ValueError(f"{path}: nonResourceURLs cannot be in a Role")
    return doc


def request_info(method, path, query):
    """Authorizer attributes of one request, as the apiserver derives them.

    A dict: resource (bool), verb, and for resource requests apiGroup,
    namespace, resource, subresource, name; for the others path.
    """
    parts = [p for p in path.strip("/").split("/") if p]
    info = {"resource": False, "verb": method.lower(), "path": path}
    if not parts or parts[0] not in ("api", "apis"):
        return info
    if parts[0] == "api":
        if len(parts) < 2:
            return info
        group, rest = "", parts[2:]
    else:
        if len(parts) < 3:
            return info
        group, rest = parts[1], parts[3:]
    if not rest:
        return info  # discovery of a group version
    info.update(resource=True, apiGroup=group, namespace="", resource_name="",
                subresource="", name="")
    watch_path = False
    if rest[0] == "watch":  # deprecated /watch/ paths
        watch_path = True
        rest = rest[1:]
    if rest and rest[0] == "namespaces" and len(rest) > 1:
        info["namespace"] = rest[1]
        if len(rest) > 2 and rest[2] not in NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    if not rest:
        return dict(info, resource=False)
    info["resource_name"] = rest[0]
    if len(rest) > 1:
        info["name"] = rest[1]
    if len(rest) > 2:
        info["subresource"] = rest[2]
    watching = watch_path or query_bool(query, "watch")
    m = method.upper()
    if m in READ_VERBS:
        if watching:
            verb = "watch"
        else:
            verb = "get" if info["name"] else "list"
    elif m == "POST":
        verb = "create"
    elif m == "PUT":
        verb = "update"
    elif m == "PATCH":
        verb = "patch"
    elif m == "DELETE":
        verb = "delete" if info["name"] else "deletecollection"
    else:
        verb = m.lower()
    info["verb"] = verb
    return info


def _matches(values, want):
    return "*" in values or want in values


def rule_allows(rule, info):
    if not _matches(rule.get("apiGroups") or [], info["apiGroup"]):
        return False
    if not _matches(rule.get("verbs") or [], info["verb"]):
        return False
    res = info["resource_name"]
    combined = f"{res}/{info['subresource']}" if info["subresource"] else res
    resources = rule.get("resources") or []
    ok = "*" in resources or combined in resources or (
        info["subresource"] and f"*/{info['subresource']}" in resources)
    if not ok:
        return False
    names = rule.get("resourceNames") or []
    return not names or (info["name"] and info["name"] in names)


def allowed(rules, namespace, info):
    if not info["resource"]:
        p = info["path"].rstrip("/") or "/"
        return info["verb"] == "get" and any(p == d or p.startswith(d + "/") for d in DISCOVERY_PREFIXES)
    if info["namespace"] != namespace:
        return False  # a Role grants nothing outside its namespace or cluster-wide
    return any(rule_allows(r, info) for r in rules)


def websocket_create(info, headers):
    """The synthetic "create" check 1.35 adds to a WebSocket upgrade of a
    connect subresource, or None for any other request."""
    if (info["resource"] and info["verb"] == "get" and info["resource_name"] == "pods"
            and info["subresource"] in CONNECT_SUBRESOURCES
            and headers.get("Upgrade", "").lower() == "websocket"):
        return dict(info, verb="create")
    return None


def forbidden(info, user=USER):
    """The 403 Status the apiserver writes (responsewriters.forbiddenMessage)."""
    if not info["resource"]:
        reason = f'User "{user}" cannot {info["verb"]} path "{info["path"]}"'
        return st.status(403, "Forbidden", f"forbidden: {reason}", {})
    res = info["resource_name"]
    shown = f"{res}/{info['subresource']}" if info["subresource"] else res
    where = (f'in the namespace "{info["namespace"]}"' if info["namespace"]
             else "at the cluster scope")
    reason = (f'User "{user}" cannot {info["verb"]} resource "{shown}" in API group '
              f'"{info["apiGroup"]}" {where}')
    qualified = f"{res}.{info['apiGroup']}" if info["apiGroup"] else res
    details = {}
    if info["name"]:
        details["name"] = info["name"]
        message = f'{qualified} "{info["name"]}" is forbidden: {reason}'
    else:
        message = f"{qualified} is forbidden: {reason}"
    if info["apiGroup"]:
        details["group"] = info["apiGroup"]
    details["kind"] = res
    return st.status(403, "Forbidden", message, details)


class Rbac:
    def __init__(self, rules, namespace):
        self.rules = rules
        self.namespace = namespace
        self.denied = []
        self.allowed = 0

    @web.middleware
    async def middleware(self, request, handler):
        if request.path.startswith("/fakekube/"):
            if request.path == "/fakekube/rbac":
                return web.json_response({"namespace": self.namespace, "allowed": self.allowed,
                                          "denied": self.denied})
            return await handler(request)
        info = request_info(request.method, request.path, request.query)
        if allowed(self.rules, self.namespace, info):
            also = websocket_create(info, request.headers)
            if also is None or allowed(self.rules, self.namespace, also):
                self.allowed += 1
                return await handler(request)
            info = also
        body = forbidden(info)
        self.denied.append({"method": request.method, "path": request.path_qs,
                            "message": body["message"]})
        print(f"fakekube: rbac: {request.method} {request.path_qs}: {body['message']}",
              flush=True)
        return web.json_response(body, status=403)


def install(app, rules_path, namespace):
    """Adds the RBAC check to an aiohttp app that has not started yet; it
    runs after authentication (a request without credentials stays a 401)."""
    rbac = Rbac(load_rules(rules_path), namespace)
    app.middlewares.append(rbac.middleware)
    return rbac
