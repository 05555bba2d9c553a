/* watch.c - pod watch: stream, resume from the last resourceVersion,
 * relist on 410, backoff on failures. */
#include "k8s/api/watch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k8s/api/rest.h"

struct k8s_pod_watch {
	struct k8s_client *c;
	struct k8s_pod_watch_ops ops;
	char *ns, *label, *field;
	char *rv;
	long timeout_s, idle_ms, backoff_ms, max_backoff_ms, list_timeout_ms;
	int max_failures;
	size_t max_line;
	struct k8s_watch *parser;       /* of the current stream */
	struct k8s_http_req *req;       /* current watch, or */
	struct k8s_rest_call *list;     /* current list */
	int stopped, relist, stream_failed;
	unsigned stream_events;         /* events of the current stream */
	int failures;                   /* in a row */
	struct k8s_pod_watch_stats st;
	struct cp_err fail;             /* why the stream was aborted */
};

static void w_free(struct k8s_pod_watch *w)
{
	k8s_watch_free(w->parser);
	free(w->ns);
	free(w->label);
	free(w->field);
	free(w->rv);
	free(w);
}

static void end(struct k8s_pod_watch *w, const struct cp_err *err)
{
	w->ops.on_done(w->ops.arg, err);
	w_free(w);
}

static void end_code(struct k8s_pod_watch *w, enum cp_code code, const char *why)
{
	struct cp_err e;
	cp_err_set(&e, code, "watch pods in %s: %s", w->ns, why);
	end(w, &e);
}

static long backoff(struct k8s_pod_watch *w, long min_ms)
{
	struct k8s_rest_opts o;
	memset(&o, 0, sizeof o);
	o.backoff_ms = w->backoff_ms;
	o.max_backoff_ms = w->max_backoff_ms;
	long d = k8s_rest_backoff(&o, w->failures + 1, (unsigned)uv_hrtime());
	if (min_ms > K8S_REST_MAX_RETRY_AFTER_MS)
		min_ms = K8S_REST_MAX_RETRY_AFTER_MS;
	return d > min_ms ? d : min_ms;
}

static void do_watch(struct k8s_pod_watch *w, long delay_ms);
static void do_list(struct k8s_pod_watch *w, long delay_ms);

/* A failed list or watch: give up, or try again later. */
static void failed(struct k8s_pod_watch *w, const struct cp_err *err, long min_ms, int relist)
{
	w->st.failures++;
	w->failures++;
	if (w->max_failures > 0 && w->failures > w->max_failures) {
		end(w, err);
		return;
	}
	if (relist)
		do_list(w, backoff(w, min_ms));
	else
		do_watch(w, backoff(w, min_ms));
}

static int set_rv(struct k8s_pod_watch *w, const char *rv)
{
	char *n = strdup(rv);
	if (!n)
		return -1;
	free(w->rv);
	w->rv = n;
	return 0;
}

static int permanent(int code)
{
	return code >= 400 && code < 500 && code != 410 && code != 429;
}

/* ---- list --------------------------------------------------------------- */

static void on_list(void *arg, json_t *obj, const struct k8s_status *st, const struct cp_err *err)
{
	struct k8s_pod_watch *w = arg;
	w->list = NULL;
	if (w->stopped) {
		end_code(w, CP_E_CANCELLED, "stopped");
		return;
	}
	if (err) {
		if (err->code == CP_E_CANCELLED || (st && permanent(st->code)))
			end(w, err);
		else
			failed(w, err, st && st->retry_after_seconds > 0 ? st->retry_after_seconds * 1000L : 0, 1);
		return;
	}
	const char *rv = json_string_value(json_object_get(json_object_get(obj, "metadata"),
	                                                    "resourceVersion"));
	if (!rv || !*rv || set_rv(w, rv)) {
		struct cp_err e;
		cp_err_set(&e, CP_E_PARSE, "watch pods in %s: the list has no resourceVersion", w->ns);
		failed(w, &e, 0, 1);
		return;
	}
	w->failures = 0;
	w->ops.on_resync(w->ops.arg, obj);
	if (w->stopped) {
		end_code(w, CP_E_CANCELLED, "stopped");
		return;
	}
	do_watch(w, 0);
}

static int request_list(struct k8s_pod_watch *w, long delay_ms, struct cp_err *err)
{
	struct k8s_rest_opts o;
	memset(&o, 0, sizeof o);
	o.timeout_ms = w->list_timeout_ms;
	o.start_delay_ms = delay_ms;
	o.backoff_ms = w->backoff_ms;
	struct k8s_rest_cb cb = {on_list, w};
	w->relist = 0;
	w->st.relists++;
	return k8s_pod_list(w->c, w->ns, w->label, w->field, &o, cb, &w->list, err);
}

static void do_list(struct k8s_pod_watch *w, long delay_ms)
{
	struct cp_err e;
	if (request_list(w, delay_ms, &e))
		end(w, &e); /* only when the client is closing or out of memory */
}

/* ---- watch -------------------------------------------------------------- */

/* Hand complete events over; returns 0, or < 0 to drop the stream. */
static int drain(struct k8s_pod_watch *w, struct cp_err *err)
{
	for (;;) {
		if (w->stopped)
			return cp_err_set(err, CP_E_CANCELLED, "watch stopped");
		struct k8s_watch_event ev;
		int rc = k8s_watch_next(w->parser, &ev, err);
		if (rc <= 0)
			return rc;
		if (ev.type == K8S_WATCH_ERROR) {
			w->relist = ev.expired;
			rc = cp_err_set(err, ev.expired ? CP_E_RETRY : CP_E_HTTP,
			                "watch pods in %s: ERROR event %d %s: %s", w->ns, ev.status.code,
			                ev.status.reason ? ev.status.reason : "",
			                ev.status.message ? ev.status.message : "");
			k8s_watch_event_release(&ev);
			return rc;
		}
		if (ev.resource_version && set_rv(w, ev.resource_version)) {
			k8s_watch_event_release(&ev);
			return cp_err_set(err, CP_E_NOMEM, "out of memory");
		}
		w->stream_events++;
		w->st.events++;
		w->failures = 0;
		w->ops.on_event(w->ops.arg, &ev);
		k8s_watch_event_release(&ev);
	}
}

static int on_data(void *arg, const char *buf, size_t len, struct cp_err *err)
{
	struct k8s_pod_watch *w = arg;
	int rc = k8s_watch_feed(w->parser, buf, len, err);
	if (rc)
		return rc;
	return drain(w, err);
}

static void stream_ended(struct k8s_pod_watch *w)
{
	struct cp_err e;
	cp_err_clear(&e);
	int rc = k8s_watch_finish(w->parser, &e);
	if (!rc)
		rc = drain(w, &e);
	if (w->stopped) {
		end_code(w, CP_E_CANCELLED, "stopped");
	} else if (w->relist) {
		do_list(w, 0);
	} else if (rc < 0) {
		failed(w, &e, 0, 0);
	} else {
		do_watch(w, w->stream_events ? 0 : backoff(w, 0));
	}
}

static void on_watch_done(void *arg, const struct k8s_http_resp *resp, const struct cp_err *err)
{
	struct k8s_pod_watch *w = arg;
	w->req = NULL;
	if (w->stopped) {
		end_code(w, CP_E_CANCELLED, "stopped");
		return;
	}
	if (err) {
		if (w->relist) /* in-stream 410 aborted the transfer */
			do_list(w, 0);
		else if (err->code == CP_E_CANCELLED)
			end(w, err);
		else
			failed(w, err, 0, 0);
		return;
	}
	if (resp->status >= 200 && resp->status < 300) {
		stream_ended(w);
		return;
	}
	struct k8s_status st;
	struct cp_err e;
	k8s_status_parse(resp->body, resp->len, (int)resp->status, &st, &e);
	int code = st.code;
	long ra = resp->retry_after_s > 0 ? resp->retry_after_s : st.retry_after_seconds;
	k8s_status_release(&st);
	if (code == 410 || resp->status == 410)
		do_list(w, 0);
	else if (permanent((int)resp->status))
		end(w, &e);
	else
		failed(w, &e, ra > 0 ? ra * 1000 : 0, 0);
}

static char *watch_path(struct k8s_pod_watch *w)
{
	char *ns = k8s_http_escape(w->ns), *rv = k8s_http_escape(w->rv ? w->rv : "");
	char *ls = w->label ? k8s_http_escape(w->label) : NULL;
	char *fs = w->field ? k8s_http_escape(w->field) : NULL;
	char *p = NULL;
	if (ns && rv && (!w->label || ls) && (!w->field || fs) &&
	    asprintf(&p,
	             "/api/v1/namespaces/%s/pods?watch=1&allowWatchBookmarks=true"
	             "&resourceVersion=%s&timeoutSeconds=%ld%s%s%s%s",
	             ns, rv, w->timeout_s, ls ? "&labelSelector=" : "", ls ? ls : "",
	             fs ? "&fieldSelector=" : "", fs ? fs : "") < 0)
		p = NULL;
	free(ns);
	free(rv);
	free(ls);
	free(fs);
	return p;
}

static int request_watch(struct k8s_pod_watch *w, long delay_ms, struct cp_err *err)
{
	k8s_watch_free(w->parser);
	w->parser = k8s_watch_new(w->max_line);
	char *path = watch_path(w);
	if (!w->parser || !path) {
		free(path);
		return cp_err_set(err, CP_E_NOMEM, "watch pods in %s: out of memory", w->ns);
	}
	struct k8s_http_opts h;
	memset(&h, 0, sizeof h);
	h.method = "GET";
	h.path = path;
	h.idle_ms = w->idle_ms;
	h.delay_ms = delay_ms;
	h.on_data = on_data;
	h.done = on_watch_done;
	h.arg = w;
	w->relist = 0;
	w->stream_events = 0;
	w->st.watches++;
	int rc = k8s_http_request(w->c, &h, &w->req, err);
	free(path);
	return rc;
}

static void do_watch(struct k8s_pod_watch *w, long delay_ms)
{
	struct cp_err e;
	if (request_watch(w, delay_ms, &e))
		end(w, &e);
}

/* ---- public ------------------------------------------------------------- */

static char *sdup_or_null(const char *s, int *oom)
{
	if (!s || !*s)
		return NULL;
	char *d = strdup(s);
	*oom |= !d;
	return d;
}

int k8s_pod_watch_start(struct k8s_client *c, const struct k8s_pod_watch_opts *o,
                        const struct k8s_pod_watch_ops *ops, struct k8s_pod_watch **out,
                        struct cp_err *err)
{
	if (out)
		*out = NULL;
	if (!ops || !ops->on_event || !ops->on_resync || !ops->on_done)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "watch needs on_event, on_resync, on_done");
	struct k8s_pod_watch_opts d;
	memset(&d, 0, sizeof d);
	if (o)
		d = *o;
	struct k8s_pod_watch *w = calloc(1, sizeof *w);
	if (!w)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	int oom = 0;
	w->c = c;
	w->ops = *ops;
	w->ns = sdup_or_null(d.ns ? d.ns : k8s_client_namespace(c), &oom);
	w->label = sdup_or_null(d.label_selector, &oom);
	w->field = sdup_or_null(d.field_selector, &oom);
	w->rv = sdup_or_null(d.resource_version, &oom);
	w->timeout_s = d.timeout_s > 0 ? d.timeout_s : K8S_POD_WATCH_TIMEOUT_S;
	w->idle_ms = d.idle_ms > 0 ? d.idle_ms : (w->timeout_s + 30) * 1000;
	w->backoff_ms = d.backoff_ms > 0 ? d.backoff_ms : 200;
	w->max_backoff_ms = d.max_backoff_ms > 0 ? d.max_backoff_ms : 30000;
	w->list_timeout_ms = d.list_timeout_ms > 0 ? d.list_timeout_ms : 30000;
	w->max_failures = d.max_failures;
	w->max_line = d.max_line ? d.max_line : K8S_POD_WATCH_MAX_LINE;
	if (oom || !w->ns) {
		w_free(w);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	/* Without a resourceVersion, start with a list (and a resync). */
	int rc = w->rv ? request_watch(w, 0, err) : request_list(w, 0, err);
	if (rc) {
		w_free(w);
		return rc;
	}
	if (out)
		*out = w;
	return 0;
}

void k8s_pod_watch_stop(struct k8s_pod_watch *w)
{
	if (!w || w->stopped)
		return;
	w->stopped = 1;
	if (w->req)
		k8s_http_cancel(w->req);
	if (w->list)
		k8s_rest_cancel(w->list);
}

const char *k8s_pod_watch_rv(const struct k8s_pod_watch *w)
{
	return w->rv ? w->rv : "";
}

void k8s_pod_watch_get_stats(const struct k8s_pod_watch *w, struct k8s_pod_watch_stats *out)
{
	*out = w->st;
}
