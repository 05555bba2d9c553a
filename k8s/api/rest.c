/* rest.c - pod calls over http.c: paths, bodies, Status errors, retries. */
#include "k8s/api/rest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct k8s_rest_call {
	struct k8s_client *c;
	char *method, *path, *body, *ctype;
	size_t body_len;
	int retry_5xx;            /* safe to repeat after 5xx / no answer */
	int attempt;
	struct k8s_rest_opts o;
	struct k8s_rest_cb cb;
	struct k8s_http_req *req;
	int cancelled;
};

static unsigned rnd_state;

static unsigned rnd(void)
{
	if (!rnd_state)
		rnd_state = (unsigned)uv_hrtime() | 1u;
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 17;
	rnd_state ^= rnd_state << 5;
	return rnd_state;
}

static void defaults(struct k8s_rest_opts *d, const struct k8s_rest_opts *o)
{
	memset(d, 0, sizeof *d);
	if (o)
		*d = *o;
	if (d->timeout_ms <= 0)
		d->timeout_ms = K8S_REST_DEFAULT_TIMEOUT_MS;
	if (d->max_attempts <= 0)
		d->max_attempts = K8S_REST_DEFAULT_ATTEMPTS;
	if (d->backoff_ms <= 0)
		d->backoff_ms = K8S_REST_DEFAULT_BACKOFF_MS;
	if (d->max_backoff_ms <= 0)
		d->max_backoff_ms = K8S_REST_DEFAULT_MAX_BACKOFF_MS;
}

long k8s_rest_backoff(const struct k8s_rest_opts *o, int attempt, unsigned r)
{
	struct k8s_rest_opts d;
	defaults(&d, o);
	long ms = d.backoff_ms;
	for (int i = 2; i < attempt && ms < d.max_backoff_ms; i++)
		ms *= 2;
	if (ms > d.max_backoff_ms)
		ms = d.max_backoff_ms;
	long half = ms / 2;
	return half + (long)(r % (unsigned long)(ms - half + 1));
}

static void call_free(struct k8s_rest_call *k)
{
	free(k->method);
	free(k->path);
	free(k->body);
	free(k->ctype);
	free(k);
}

static void on_http(void *arg, const struct k8s_http_resp *resp, const struct cp_err *err);

static int send_attempt(struct k8s_rest_call *k, long delay_ms, struct cp_err *err)
{
	struct k8s_http_opts h;
	memset(&h, 0, sizeof h);
	h.method = k->method;
	h.path = k->path;
	h.body = k->body;
	h.body_len = k->body_len;
	h.content_type = k->ctype;
	h.timeout_ms = k->o.timeout_ms;
	h.delay_ms = delay_ms;
	h.max_body = k->o.max_body;
	h.done = on_http;
	h.arg = k;
	k->attempt++;
	return k8s_http_request(k->c, &h, &k->req, err);
}

static void deliver(struct k8s_rest_call *k, json_t *obj, const struct k8s_status *st,
                    const struct cp_err *err)
{
	k->cb.fn(k->cb.arg, obj, st, err);
	call_free(k);
}

/* Try again after @min_ms or the backoff, whichever is longer. Returns 1
 * when a new attempt is under way. */
static int retry(struct k8s_rest_call *k, long min_ms)
{
	if (k->cancelled || k->attempt >= k->o.max_attempts)
		return 0;
	long d = k8s_rest_backoff(&k->o, k->attempt + 1, rnd());
	if (min_ms > K8S_REST_MAX_RETRY_AFTER_MS)
		min_ms = K8S_REST_MAX_RETRY_AFTER_MS;
	if (min_ms > d)
		d = min_ms;
	return send_attempt(k, d, NULL) == 0;
}

static int retryable_code(const struct k8s_rest_call *k, long code)
{
	if (code == 429)
		return 1;
	return k->retry_5xx && (code == 500 || code == 502 || code == 503 || code == 504);
}

static void on_answer(struct k8s_rest_call *k, const struct k8s_http_resp *resp)
{
	struct cp_err e;
	cp_err_clear(&e);
	if (resp->status >= 200 && resp->status < 300) {
		json_error_t je;
		json_t *obj = json_loadb(resp->body, resp->len, 0, &je);
		if (!obj) {
			cp_err_set(&e, CP_E_PARSE, "%s %s: HTTP %ld body is not JSON: %s", k->method,
			           k->path, resp->status, je.text);
			deliver(k, NULL, NULL, &e);
			return;
		}
		deliver(k, obj, NULL, NULL);
		json_decref(obj);
		return;
	}
	struct k8s_status st;
	k8s_status_parse(resp->body, resp->len, (int)resp->status, &st, &e);
	long ra = resp->retry_after_s > 0 ? resp->retry_after_s : st.retry_after_seconds;
	if (retryable_code(k, resp->status) && retry(k, ra > 0 ? ra * 1000 : 0)) {
		k8s_status_release(&st);
		return;
	}
	deliver(k, NULL, &st, &e);
	k8s_status_release(&st);
}

static void on_http(void *arg, const struct k8s_http_resp *resp, const struct cp_err *err)
{
	struct k8s_rest_call *k = arg;
	k->req = NULL;
	if (!err) {
		on_answer(k, resp);
		return;
	}
	if (err->code == CP_E_IO && k->retry_5xx && retry(k, 0))
		return;
	deliver(k, NULL, NULL, err);
}

static int start_call(struct k8s_client *c, const char *method, char *path, char *body,
                      const char *ctype, int retry_5xx, const struct k8s_rest_opts *o,
                      struct k8s_rest_cb cb, struct k8s_rest_call **out, struct cp_err *err)
{
	if (out)
		*out = NULL;
	struct k8s_rest_call *k = calloc(1, sizeof *k);
	if (!k || !path || !cb.fn) {
		free(k);
		free(path);
		free(body);
		return cb.fn ? cp_err_set(err, CP_E_NOMEM, "out of memory")
		             : cp_err_set(err, CP_E_INVALID_REQUEST, "no callback");
	}
	k->c = c;
	k->path = path;
	k->body = body;
	k->body_len = body ? strlen(body) : 0;
	k->method = strdup(method);
	k->ctype = ctype ? strdup(ctype) : NULL;
	k->retry_5xx = retry_5xx;
	k->cb = cb;
	defaults(&k->o, o);
	int rc = (!k->method || (ctype && !k->ctype)) ? cp_err_set(err, CP_E_NOMEM, "out of memory")
	                                              : send_attempt(k, k->o.start_delay_ms, err);
	if (rc) {
		call_free(k);
		return rc;
	}
	if (out)
		*out = k;
	return 0;
}

/* "/api/v1/namespaces/NS/pods[/NAME]" with the parts escaped; new or NULL. */
static char *pod_path(struct k8s_client *c, const char *ns, const char *name)
{
	char *ens = k8s_http_escape(ns ? ns : k8s_client_namespace(c));
	char *ename = name ? k8s_http_escape(name) : NULL;
	char *p = NULL;
	if (ens && (!name || ename) &&
	    asprintf(&p, "/api/v1/namespaces/%s/pods%s%s", ens, name ? "/" : "", name ? ename : "") < 0)
		p = NULL;
	free(ens);
	free(ename);
	return p;
}

static int need_name(const char *name, struct cp_err *err)
{
	if (!name || !*name)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "a pod name is required");
	return 0;
}

int k8s_pod_get(struct k8s_client *c, const char *ns, const char *name,
                const struct k8s_rest_opts *o, struct k8s_rest_cb cb,
                struct k8s_rest_call **call, struct cp_err *err)
{
	int rc = need_name(name, err);
	if (rc)
		return rc;
	return start_call(c, "GET", pod_path(c, ns, name), NULL, NULL, 1, o, cb, call, err);
}

static int add_query(char **path, const char *key, const char *val)
{
	if (!*path || !val || !*val)
		return 0;
	char *ev = k8s_http_escape(val), *np = NULL;
	if (!ev || asprintf(&np, "%s%c%s=%s", *path, strchr(*path, '?') ? '&' : '?', key, ev) < 0)
		np = NULL;
	free(ev);
	free(*path);
	*path = np;
	return np ? 0 : -1;
}

int k8s_pod_list(struct k8s_client *c, const char *ns, const char *label_selector,
                 const char *field_selector, const struct k8s_rest_opts *o,
                 struct k8s_rest_cb cb, struct k8s_rest_call **call, struct cp_err *err)
{
	char *path = pod_path(c, ns, NULL);
	add_query(&path, "labelSelector", label_selector);
	add_query(&path, "fieldSelector", field_selector);
	return start_call(c, "GET", path, NULL, NULL, 1, o, cb, call, err);
}

int k8s_pod_create(struct k8s_client *c, const char *ns, const json_t *pod,
                   const struct k8s_rest_opts *o, struct k8s_rest_cb cb,
                   struct k8s_rest_call **call, struct cp_err *err)
{
	if (!json_is_object(pod))
		return cp_err_set(err, CP_E_INVALID_REQUEST, "the pod must be a JSON object");
	char *body = json_dumps(pod, JSON_COMPACT);
	if (!body)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	/* Strict: a field the API does not know (a typo in a pod template) is
	 * refused with its name, not dropped silently as by default (Warn). */
	char *path = pod_path(c, ns, NULL);
	add_query(&path, "fieldValidation", "Strict");
	return start_call(c, "POST", path, body, "application/json", 0, o, cb, call, err);
}

static char *delete_body(const struct k8s_delete_opts *d)
{
	json_t *b = json_pack("{s:s, s:s}", "kind", "DeleteOptions", "apiVersion", "v1");
	if (!b)
		return NULL;
	int bad = 0;
	if (d && d->grace_period_s >= 0)
		bad |= json_object_set_new(b, "gracePeriodSeconds", json_integer(d->grace_period_s));
	if (d && (d->uid || d->resource_version)) {
		json_t *pre = json_object();
		bad |= !pre;
		if (pre && d->uid)
			bad |= json_object_set_new(pre, "uid", json_string(d->uid));
		if (pre && d->resource_version)
			bad |= json_object_set_new(pre, "resourceVersion", json_string(d->resource_version));
		bad |= json_object_set_new(b, "preconditions", pre);
	}
	char *s = bad ? NULL : json_dumps(b, JSON_COMPACT);
	json_decref(b);
	return s;
}

int k8s_pod_delete(struct k8s_client *c, const char *ns, const char *name,
                   const struct k8s_delete_opts *d, const struct k8s_rest_opts *o,
                   struct k8s_rest_cb cb, struct k8s_rest_call **call, struct cp_err *err)
{
	int rc = need_name(name, err);
	if (rc)
		return rc;
	char *body = delete_body(d);
	if (!body)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	int safe = d && d->uid && *d->uid;
	return start_call(c, "DELETE", pod_path(c, ns, name), body, "application/json", safe, o, cb,
	                  call, err);
}

int k8s_pod_patch(struct k8s_client *c, const char *ns, const char *name,
                  const json_t *patch, const char *resource_version,
                  const struct k8s_rest_opts *o, struct k8s_rest_cb cb,
                  struct k8s_rest_call **call, struct cp_err *err)
{
	int rc = need_name(name, err);
	if (rc)
		return rc;
	if (!json_is_object(patch))
		return cp_err_set(err, CP_E_INVALID_REQUEST, "a merge patch must be a JSON object");
	json_t *p = json_deep_copy(patch);
	int bad = !p;
	if (p && resource_version) {
		json_t *md = json_object_get(p, "metadata");
		if (!json_is_object(md)) {
			md = json_object();
			bad |= json_object_set_new(p, "metadata", md);
		}
		bad |= !md || json_object_set_new(md, "resourceVersion", json_string(resource_version));
	}
	char *body = bad ? NULL : json_dumps(p, JSON_COMPACT);
	json_decref(p);
	if (!body)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	return start_call(c, "PATCH", pod_path(c, ns, name), body, "application/merge-patch+json", 0,
	                  o, cb, call, err);
}

void k8s_rest_cancel(struct k8s_rest_call *k)
{
	if (!k || k->cancelled)
		return;
	k->cancelled = 1;
	k8s_http_cancel(k->req);
}
