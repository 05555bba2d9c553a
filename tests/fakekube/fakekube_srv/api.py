"""HTTP layer: TLS, authentication, discovery, pod routes, watch streaming, control endpoints."""
import asyncio
import json
import os
import ssl
import time

import yaml
from aiohttp import web

from . import admission
from . import status as st
from . import table as tbl
from .execws import Exec
from .faults import Faults, HTTP_TYPES
from .memcg import MemCg
from .namespaces import Namespaces
from .store import ApiError, Store, now_ts

PID = os.getpid()
JSON = "application/json"
TABLE_CT = "application/json;as=Table;v=v1;g=meta.k8s.io"
ANONYMOUS = {"/version", "/healthz", "/livez", "/readyz"}  # public-info-viewer, as on real clusters

POD_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def query_bool(query, key):
    """A boolean query parameter as the apiserver converts it
    (runtime.Convert_Slice_string_To_bool): absent, "0" or any case of "false"
    is false, anything else true (python3-kubernetes sends "True")."""
    v = query.get(key)
    return v is not None and v != "0" and v.lower() != "false"


def jresp(obj, code=200, ctype=JSON, headers=None):
    return web.Response(status=code, body=st.dumps(obj).encode(), headers={"Content-Type": ctype, **(headers or {})})


def err_resp(e: ApiError):
    headers = {}
    ra = (e.body.get("details") or {}).get("retryAfterSeconds")
    if ra:
        headers["Retry-After"] = str(ra)
    return jresp(e.body, e.code, headers=headers)


# ---------------------------------------------------------------- discovery
def _resources():
    """Core v1 resources served here, for both discovery formats."""
    return [
        ("pods", "pod", "Pod", True, POD_VERBS, ["po"], ["all"]),
        ("pods/exec", "", "PodExecOptions", True, ["create", "get"], None, None),
        ("pods/status", "", "Pod", True, ["get", "patch", "update"], None, None),
        ("namespaces", "namespace", "Namespace", False, ["create", "delete", "get", "list", "patch", "update", "watch"], ["ns"], None),
    ]


def legacy_v1_resources():
    out = []
    for name, singular, kind, namespaced, verbs, short, cats in _resources():
        r = {"name": name, "singularName": singular, "namespaced": namespaced, "kind": kind, "verbs": verbs}
        if short:
            r["shortNames"] = short
        if cats:
            r["categories"] = cats
        if "/" not in name:
            r["storageVersionHash"] = {"pods": "xPOwRZ+Yhw8=", "namespaces": "Q3oi5N2YM8M="}[name]
        out.append(r)
    return {"kind": "APIResourceList", "groupVersion": "v1", "resources": out}


def aggregated_core():
    top = {}
    for name, singular, kind, namespaced, verbs, short, cats in _resources():
        if "/" in name:
            parent, sub = name.split("/")
            top[parent].setdefault("subresources", []).append(
                {"subresource": sub, "responseKind": {"group": "", "version": "v1", "kind": kind}, "verbs": verbs})
            continue
        r = {"resource": name, "responseKind": {"group": "", "version": "v1", "kind": kind},
             "scope": "Namespaced" if namespaced else "Cluster", "singularResource": singular, "verbs": verbs}
        if short:
            r["shortNames"] = short
        if cats:
            r["categories"] = cats
        top[name] = r
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {},
            "items": [{"metadata": {"creationTimestamp": None},
                       "versions": [{"version": "v1", "resources": list(top.values()), "freshness": "Current"}]}]}


def aggregated_version(request):
    """'v2' or 'v2beta1' when the client accepts aggregated discovery, else None.

    kubectl 1.32 offers v2, then v2beta1, then plain JSON; answering the plain
    APIVersions form would also work but costs it extra round trips per group.
    """
    offered = []
    for part in request.headers.get("Accept", "").split(","):
        params = dict(x.strip().partition("=")[::2] for x in part.split(";")[1:])
        if params.get("g") == "apidiscovery.k8s.io" and params.get("as") == "APIGroupDiscoveryList":
            offered.append(params.get("v"))
    for v in ("v2", "v2beta1"):
        if v in offered:
            return v
    return None


def agg(obj, version):
    obj = dict(obj, apiVersion="apidiscovery.k8s.io/" + version)
    return jresp(obj, ctype=f"application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList")


class Server:
    def __init__(self, state_dir, pki, schedule_ms, deletion_ms, use_bwrap, exec_path, bookmark_s):
        self.pki = pki
        self.store = Store(state_dir, schedule_ms=schedule_ms, deletion_ms=deletion_ms)
        self.faults = Faults(self.store)
        self.namespaces = Namespaces(self.store)
        # Pod Security admission of a create, after validation and before
        # the name is taken, as in the apiserver.
        self.store.admit = lambda ns, name, body: admission.enforce(
            self.namespaces.labels(ns), name, body.get("spec"))
        self.created = []  # the last pod bodies as clients sent them (GET /fakekube/created)
        self.store.memcg = MemCg()
        self.exec = Exec(self.store, self.faults, use_bwrap, exec_path)
        self.bookmark_s = bookmark_s
        self.port = None
        self.app = web.Application(middlewares=[self.mw_errors, self.mw_auth, self.mw_faults],
                                   client_max_size=64 << 20)
        self.app.on_response_prepare.append(self._stamp)
        self.app.on_startup.append(self._start_oom_watch)
        self.app.on_cleanup.append(self._stop_oom_watch)
        self._routes()

    # ------------------------------------------------------------ plumbing
    async def _start_oom_watch(self, app):
        async def watch():
            # An OOM kill of a process the exec'd one started is seen here
            # (the exec'd one's own death is checked as it ends, execws.py).
            n = 0
            while True:
                await asyncio.sleep(0.2)
                for (ns, name), cg in list(self.store.memcg.pods.items()):
                    self.store.check_oom(ns, name, cg["container"])
                n += 1
                if n % 3 == 0:  # the kubelet's eviction for local storage
                    for ns, name in list(self.store.pods):
                        self.store.check_eviction(ns, name)
        self._oom_task = asyncio.get_event_loop().create_task(watch())

    async def _stop_oom_watch(self, app):
        self._oom_task.cancel()
        self.store.memcg.close()

    async def _stamp(self, request, response):
        # Tests check this header to be sure they talk to the server they started.
        response.headers["X-Fakekube-Pid"] = str(PID)
        response.headers.setdefault("Audit-Id", os.urandom(16).hex())
        response.headers.setdefault("Cache-Control", "no-cache, private")

    def ssl_context(self):
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(self.pki["server.crt"], self.pki["server.key"])
        ctx.load_verify_locations(self.pki["ca.crt"])
        # Optional: a client may authenticate by certificate or by bearer token.
        ctx.verify_mode = ssl.CERT_OPTIONAL
        ctx.set_alpn_protocols(["http/1.1"])  # no h2 here; Go clients fall back to 1.1
        return ctx

    @web.middleware
    async def mw_errors(self, request, handler):
        try:
            return await handler(request)
        except ApiError as e:
            return err_resp(e)
        except web.HTTPException:
            raise
        except (ConnectionError, asyncio.CancelledError):
            raise
        except Exception as e:  # a bug here must look like a 500, not a dropped connection
            import traceback
            traceback.print_exc()
            return err_resp(ApiError(st.generic(500, f"Internal error occurred: {type(e).__name__}: {e}")))

    def _authenticated(self, request):
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        if peer:  # verified against our CA by the TLS layer (CERT_OPTIONAL)
            return True
        auth = request.headers.get("Authorization", "")
        return auth.startswith("Bearer ") and auth[7:].strip() == self.pki["token"]

    @web.middleware
    async def mw_auth(self, request, handler):
        if request.path not in ANONYMOUS and not self._authenticated(request):
            return jresp(st.unauthorized(), 401)
        return await handler(request)

    @web.middleware
    async def mw_faults(self, request, handler):
        if request.path.startswith("/fakekube/"):
            return await handler(request)
        rules = self.faults.take(HTTP_TYPES, request.method, request.path_qs)
        for r in rules:
            if r["type"] == "delay":
                await asyncio.sleep(r.get("ms", 1000) / 1000)
        for r in rules:
            if r["type"] == "hold":
                await self.faults.held(str(r.get("name", "")))
        for r in rules:
            t = r["type"]
            if t == "reset":
                request.transport.abort()
                await asyncio.sleep(3600)
            if t == "hang":
                await request.read()
                await asyncio.sleep(r["ms"] / 1000 if r.get("ms") is not None else 10 ** 7)
                request.transport.abort()
                await asyncio.sleep(3600)
            if t == "status":
                code = int(r.get("code", 500))
                headers = {}
                if code in (429, 503, 504) or r.get("retry_after") is not None:
                    headers["Retry-After"] = str(int(r.get("retry_after", 1)))
                return jresp(st.generic(code, r.get("message"), r.get("retry_after")), code, headers=headers)
            if t == "garbage":
                body = r.get("body", '{"kind":"Pod","apiVersion":"v1","metadata":{"name":<<garbage>>\x00\xff')
                return web.Response(status=int(r.get("code", 200)), body=body.encode("utf-8", "surrogateescape"),
                                    headers={"Content-Type": JSON})
        return await handler(request)

    def _routes(self):
        r = self.app.router
        r.add_get("/version", self.version)
        for p in ("/healthz", "/livez", "/readyz"):
            r.add_get(p, self.healthz)
        r.add_get("/api", self.api)
        r.add_get("/apis", self.apis)
        r.add_get("/api/v1", self.api_v1)
        r.add_get("/openapi/v3", self.openapi_v3_root)
        r.add_get("/openapi/v3/api/v1", self.openapi_v3_core)
        r.add_get("/api/v1/namespaces", self.ns_list)
        r.add_post("/api/v1/namespaces", self.ns_create)
        r.add_get("/api/v1/namespaces/{ns}", self.ns_get)
        r.add_patch("/api/v1/namespaces/{ns}", self.ns_patch)
        r.add_get("/api/v1/pods", self.pod_list)
        r.add_get("/api/v1/namespaces/{ns}/pods", self.pod_list)
        r.add_post("/api/v1/namespaces/{ns}/pods", self.pod_create)
        r.add_get("/api/v1/namespaces/{ns}/pods/{name}", self.pod_get)
        r.add_delete("/api/v1/namespaces/{ns}/pods/{name}", self.pod_delete)
        r.add_patch("/api/v1/namespaces/{ns}/pods/{name}", self.pod_patch)
        r.add_put("/api/v1/namespaces/{ns}/pods/{name}", self.pod_put)
        r.add_route("*", "/api/v1/namespaces/{ns}/pods/{name}/exec", self.exec.handle)
        r.add_route("*", "/fakekube/faults", self.ctl_faults)
        r.add_post("/fakekube/release", self.ctl_release)
        r.add_route("*", "/fakekube/schedule", self.ctl_schedule)
        r.add_post("/fakekube/compact", self.ctl_compact)
        r.add_get("/fakekube/created", self.ctl_created)
        r.add_get("/fakekube/memcg", self.ctl_memcg)
        r.add_get("/fakekube/exec-stats", self.ctl_exec_stats)
        r.add_post("/fakekube/pods/{ns}/{name}/state", self.ctl_state)
        r.add_route("*", "/{tail:.*}", self.not_found)

    # ------------------------------------------------------------ discovery
    async def version(self, request):
        return jresp({"major": "1", "minor": "32", "gitVersion": "v1.32.4-fakekube",
                      "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
                      "buildDate": "2025-04-22T16:00:00Z", "goVersion": "go1.23.8", "compiler": "gc",
                      "platform": "linux/amd64"})

    async def healthz(self, request):
        return web.Response(text="ok", content_type="text/plain")

    async def api(self, request):
        v = aggregated_version(request)
        if v:
            return agg(aggregated_core(), v)
        return jresp({"kind": "APIVersions", "versions": ["v1"],
                      "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                                      "serverAddress": f"127.0.0.1:{self.port}"}]})

    async def apis(self, request):
        v = aggregated_version(request)
        if v:
            return agg({"kind": "APIGroupDiscoveryList", "metadata": {}, "items": []}, v)
        return jresp({"kind": "APIGroupList", "apiVersion": "v1", "groups": []})

    async def api_v1(self, request):
        return jresp(legacy_v1_resources())

    # kubectl create/apply/label first ask /openapi/v3 whether the server does
    # field validation (client-go QueryParamVerifierV3: a PATCH operation tagged
    # x-kubernetes-group-version-kind Pod with a `fieldValidation` query
    # parameter). With that it sends ?fieldValidation=Strict and skips its own
    # schema validation; without any openapi it refuses unless --validate=false.
    # So this is a deliberately tiny OpenAPI v3 document: only what that check reads.
    async def openapi_v3_root(self, request):
        return jresp({"paths": {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=FAKEKUBE0001"}}})

    async def openapi_v3_core(self, request):
        params = [{"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
                  for n in ("dryRun", "fieldManager", "fieldValidation", "force")]
        name_param = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
        ns_param = {"name": "namespace", "in": "path", "required": True, "schema": {"type": "string"}}
        paths = {}
        for kind, coll, item_params in (
                ("Pod", "/api/v1/namespaces/{namespace}/pods", [name_param, ns_param]),
                ("Namespace", "/api/v1/namespaces", [name_param])):
            gvk = {"x-kubernetes-group-version-kind": {"group": "", "version": "v1", "kind": kind}}
            op = "Namespace" if kind == "Namespace" else "NamespacedPod"
            paths[coll + "/{name}"] = {
                "parameters": item_params,
                "get": {"operationId": f"readCoreV1{op}", **gvk, "responses": {}},
                "patch": {"operationId": f"patchCoreV1{op}", **gvk, "parameters": params, "responses": {}},
                "put": {"operationId": f"replaceCoreV1{op}", **gvk, "parameters": params, "responses": {}},
                "delete": {"operationId": f"deleteCoreV1{op}", **gvk, "responses": {}}}
            paths[coll] = {"parameters": item_params[1:],
                           "post": {"operationId": f"createCoreV1{op}", **gvk, "parameters": params,
                                    "responses": {}}}
        return jresp({"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.32.4"},
                      "paths": paths, "components": {"schemas": {}}})

    async def not_found(self, request):
        return jresp(st.status(404, "NotFound", "the server could not find the requested resource", {}), 404)

    # ------------------------------------------------------------ namespaces
    async def ns_list(self, request):
        return jresp(self.namespaces.list(request.query.get("labelSelector", "")))

    async def ns_get(self, request):
        return jresp(self.namespaces.get(request.match_info["ns"]))

    async def ns_create(self, request):
        return jresp(self.namespaces.create(await self._body(request)), 201)

    async def ns_patch(self, request):
        return jresp(self.namespaces.patch(request.match_info["ns"], request.headers.get("Content-Type"),
                                           await self._body(request)))

    # ------------------------------------------------------------ pods
    def _pod_out(self, request, pod):
        if tbl.wants_table(request.headers.get("Accept")):
            return jresp(tbl.table([pod], pod["metadata"]["resourceVersion"],
                                   request.query.get("includeObject", "Metadata")), ctype=TABLE_CT)
        return jresp(pod)

    async def _body(self, request):
        raw = await request.read()
        ctype = request.headers.get("Content-Type", JSON)
        try:
            if "yaml" in ctype:
                return yaml.safe_load(raw)
            return admission.parse_json(raw or b"null")  # keeps duplicate keys in sight
        except (ValueError, yaml.YAMLError) as e:
            raise ApiError(st.bad_request(f"the body of the request was in an unknown format: {e}"))

    async def pod_list(self, request):
        q = request.query
        ns = request.match_info.get("ns")
        if query_bool(q, "watch"):
            return await self.pod_watch(request, ns)
        items, rv = self.store.list(ns, q.get("labelSelector", ""), q.get("fieldSelector", ""))
        if tbl.wants_table(request.headers.get("Accept")):
            return jresp(tbl.table(items, rv, q.get("includeObject", "Metadata")), ctype=TABLE_CT)
        return jresp({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": rv}, "items": items})

    async def pod_get(self, request):
        return self._pod_out(request, self.store.get(request.match_info["ns"], request.match_info["name"]))

    @staticmethod
    def _warn(resp, warnings):
        for w in warnings:
            resp.headers.add("Warning", admission.warning_header(w))
        return resp

    async def pod_create(self, request):
        body = await self._body(request)
        self.created = (self.created + [json.loads(json.dumps(body))])[-50:]
        warnings = admission.validate_fields(body, request.query.get("fieldValidation"))
        pod = self.store.create(request.match_info["ns"], body)
        resp = self._pod_out(request, pod)
        resp.set_status(201)
        return self._warn(resp, warnings)

    async def pod_delete(self, request):
        raw = await request.read()
        opts = {}
        if raw.strip():
            try:
                opts = json.loads(raw)
            except ValueError as e:
                raise ApiError(st.bad_request(f"the body of the request was in an unknown format: {e}"))
        if request.query.get("gracePeriodSeconds") is not None:
            opts["gracePeriodSeconds"] = int(request.query["gracePeriodSeconds"])
        pod = self.store.delete(request.match_info["ns"], request.match_info["name"], opts)
        return self._pod_out(request, pod)

    async def pod_patch(self, request):
        body = await self._body(request)
        pod = self.store.patch(request.match_info["ns"], request.match_info["name"],
                               request.headers.get("Content-Type"), body)
        return self._pod_out(request, pod)

    async def pod_put(self, request):
        body = await self._body(request)
        warnings = admission.validate_fields(body, request.query.get("fieldValidation"))
        pod = self.store.replace(request.match_info["ns"], request.match_info["name"], body)
        return self._warn(self._pod_out(request, pod), warnings)

    # ------------------------------------------------------------ watch
    async def pod_watch(self, request, ns):
        q = request.query
        as_table = tbl.wants_table(request.headers.get("Accept"))
        include = q.get("includeObject", "Metadata")
        bookmarks = query_bool(q, "allowWatchBookmarks")
        timeout = float(q["timeoutSeconds"]) if q.get("timeoutSeconds") else None
        faults = {r["type"]: r for r in self.faults.take(("watch_drop", "watch_410"), request.method, request.path_qs)}
        if faults.get("watch_410", {}).get("http"):
            raise ApiError(st.expired(q.get("resourceVersion", "0"), self.store.rv))
        try:
            w, initial = self.store.open_watch(ns, q.get("labelSelector", ""), q.get("fieldSelector", ""),
                                               q.get("resourceVersion"))
            expired = None
        except ApiError as e:
            if e.code != 410:
                raise
            w, initial, expired = None, [], e.body
        if faults.get("watch_410"):
            expired = st.expired(q.get("resourceVersion", "0"), self.store.compacted_rv)
        if query_bool(q, "sendInitialEvents") and w is not None:
            bm = {"kind": "Pod", "apiVersion": "v1",
                  "metadata": {"resourceVersion": str(self.store.rv),
                               "annotations": {"k8s.io/initial-events-end": "true"}}}
            initial.append(("BOOKMARK", bm))

        resp = web.StreamResponse(status=200, headers={"Content-Type": TABLE_CT if as_table else JSON})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        first = [True]

        def encode(etype, obj):
            if as_table and etype in ("ADDED", "MODIFIED", "DELETED"):
                obj = tbl.table([obj], obj["metadata"]["resourceVersion"], include, with_columns=first[0])
                first[0] = False
            return st.dumps({"type": etype, "object": obj}).encode()

        drop = faults.get("watch_drop")
        sent = 0
        deadline = time.monotonic() + timeout if timeout else None
        drop_at = time.monotonic() + drop["after_ms"] / 1000 if drop and drop.get("after_ms") is not None else None
        last_rv = q.get("resourceVersion") or str(self.store.rv)
        try:
            if expired is not None:
                # Too old: a 200 stream whose only event is ERROR 410, as the watch cache does.
                await resp.write(st.dumps({"type": "ERROR", "object": expired}).encode())
                await resp.write_eof()
                return resp
            pending = list(initial)
            while True:
                if drop and drop.get("after_events") is not None and sent >= drop["after_events"]:
                    break
                if pending:
                    ev = pending.pop(0)
                else:
                    waits = [x - time.monotonic() for x in (deadline, drop_at) if x]
                    if bookmarks:
                        waits.append(self.bookmark_s)
                    wait = max(0.0, min(waits)) if waits else None
                    try:
                        ev = await asyncio.wait_for(w.queue.get(), wait)
                    except asyncio.TimeoutError:
                        ev = "tick"
                    if ev is None:  # the watcher overflowed: end, the client re-watches
                        break
                now = time.monotonic()
                if ev == "tick":
                    if (deadline and now >= deadline) or (drop_at and now >= drop_at):
                        break
                    if bookmarks:
                        ev = ("BOOKMARK", {"kind": "Pod", "apiVersion": "v1",
                                           "metadata": {"resourceVersion": str(self.store.rv)}})
                    else:
                        continue
                etype, obj = ev
                if etype == "BOOKMARK" and as_table:
                    obj = {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
                           "metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
                           "columnDefinitions": None, "rows": None}
                await resp.write(encode(etype, obj))
                sent += 1
                last_rv = obj["metadata"].get("resourceVersion", last_rv)
            if drop and drop.get("mode") == "reset":
                request.transport.abort()
                return resp
            await resp.write_eof()
        except ConnectionError:
            return resp  # the client went away: the watch simply ends
        finally:
            if w is not None:
                self.store.close_watch(w)
        return resp

    # ------------------------------------------------------------ control
    async def ctl_faults(self, request):
        if request.method == "GET":
            return jresp(self.faults.listing())
        if request.method == "DELETE":
            self.faults.clear()
            return jresp(self.faults.listing())
        if request.method != "POST":
            raise ApiError(st.status(405, "MethodNotAllowed", "use GET, POST or DELETE"))
        body = await self._body(request)
        try:
            added = [self.faults.add(r) for r in (body if isinstance(body, list) else [body])]
        except (ValueError, KeyError) as e:
            raise ApiError(st.bad_request(str(e)))
        return jresp({"added": added})

    async def ctl_release(self, request):
        body = await self._body(request)
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            raise ApiError(st.bad_request('release needs {"name": "..."}'))
        self.faults.release(body["name"])
        return jresp({"released": body["name"]})

    async def ctl_schedule(self, request):
        if request.method == "POST":
            body = await self._body(request)
            s = self.store.schedule_ms
            for i, k in enumerate(("scheduled_ms", "creating_ms", "running_ms")):
                if k in body:
                    s[i] = int(body[k])
            if "deletion_ms" in body:
                self.store.deletion_ms = int(body["deletion_ms"])
            if "bookmark_s" in body:
                self.bookmark_s = float(body["bookmark_s"])
        s = self.store.schedule_ms
        return jresp({"scheduled_ms": s[0], "creating_ms": s[1], "running_ms": s[2],
                      "deletion_ms": self.store.deletion_ms, "bookmark_s": self.bookmark_s})

    async def ctl_memcg(self, request):
        return jresp({"memcg": self.store.memcg.describe()})

    async def ctl_created(self, request):
        return jresp(self.created)

    async def ctl_compact(self, request):
        self.store.compact()
        return jresp({"compacted_rv": str(self.store.compacted_rv)})

    async def ctl_exec_stats(self, request):
        return jresp(self.exec.stats())

    async def ctl_state(self, request):
        body = await self._body(request)
        pod = self.store.set_state(request.match_info["ns"], request.match_info["name"], (body or {}).get("state"))
        return jresp(pod)
