/*
 * kube_delete.c - delete_conversation on the Kubernetes backend (sandbox.h):
 * every pod of the conversation deleted and waited out (listed again until
 * none is left), its snapshots deleted from the store (kube_snap.h), then
 * the answer. The host has stopped the conversation's executions first;
 * executions that come meanwhile wait and get a fresh pod afterwards.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k8s/backend/kube_int.h"
#include "k8s/backend/kube_snap.h"
#include "base/log.h"

#define POLL_MS 250
#define GONE_WITHIN_MS 120000

struct kdel {
	struct kube *k;
	struct kube_conv *c;
	void (*done)(void *ud, int rc, const struct cp_err *err);
	void *ud;
	uv_timer_t timer;
	uint64_t t0;
	int pods_done, snaps_gone, answered, listing;
	int rc;
	struct cp_err err;
};

static void list_pods(struct kdel *d);

static void on_timer_closed(uv_handle_t *h)
{
	struct kdel *d = h->data;
	struct kube *k = d->k;
	free(d);
	k->pending--;
	kube_maybe_free(k);
}

static void fail_with(struct kdel *d, int rc, const char *what, const char *why)
{
	if (d->rc)
		return;
	d->rc = rc ? rc : CP_E_SANDBOX_UNAVAILABLE;
	cp_err_set(&d->err, d->rc, "%s: %s", what, why && *why ? why : "failed");
}

static void maybe_answer(struct kdel *d)
{
	if (d->answered || d->listing || !d->pods_done || !d->snaps_gone)
		return;
	d->answered = 1;
	struct kube_conv *c = d->c;
	c->deleting--;
	json_int_t ms = (json_int_t)(uv_now(d->k->loop) - d->t0);
	if (d->rc)
		cp_log(CP_LOG_WARN, "kube.conversation_deleted", "pod", json_string(c->name), "ms",
		       json_integer(ms), "reason", json_string(d->err.msg), NULL);
	else
		cp_log(CP_LOG_INFO, "kube.conversation_deleted", "pod", json_string(c->name), "ms",
		       json_integer(ms), NULL);
	d->done(d->ud, d->rc, &d->err);
	/* Executions that came meanwhile: a fresh pod (and no snapshot). */
	if (!c->deleting && c->waiters && !d->k->closing)
		kube_conv_want(c);
	uv_timer_stop(&d->timer);
	uv_close((uv_handle_t *)&d->timer, on_timer_closed);
}

static void on_pod_deleted(void *arg, json_t *obj, const struct k8s_status *st,
                           const struct cp_err *err)
{
	(void)obj;
	(void)st;
	struct kube *k = arg;
	k->pending--;
	if (err && err->code != CP_E_NOT_FOUND && err->code != CP_E_CANCELLED)
		cp_log(CP_LOG_WARN, "kube.delete_failed", "reason", json_string(err->msg), NULL);
	kube_maybe_free(k);
}

static void on_poll(uv_timer_t *t)
{
	list_pods(t->data);
}

static void on_listed(void *arg, json_t *obj, const struct k8s_status *st,
                      const struct cp_err *err)
{
	(void)st;
	struct kdel *d = arg;
	struct kube *k = d->k;
	k->pending--;
	d->listing = 0;
	if (k->closing) {
		fail_with(d, CP_E_CANCELLED, "deleting the conversation's pod", "codepod is stopping");
		d->pods_done = 1;
		maybe_answer(d);
		return;
	}
	if (err) {
		fail_with(d, CP_E_SANDBOX_UNAVAILABLE, "deleting the conversation's pod", err->msg);
		d->pods_done = 1;
		maybe_answer(d);
		return;
	}
	json_t *items = json_object_get(obj, "items");
	if (json_array_size(items) == 0) {
		d->pods_done = 1;
		maybe_answer(d);
		return;
	}
	if (uv_now(k->loop) - d->t0 > GONE_WITHIN_MS) {
		fail_with(d, CP_E_SANDBOX_UNAVAILABLE, "deleting the conversation's pod",
		          "it is still there after 120 s");
		d->pods_done = 1;
		maybe_answer(d);
		return;
	}
	size_t i;
	json_t *pod;
	json_array_foreach(items, i, pod) {
		const json_t *meta = json_object_get(pod, "metadata");
		if (json_object_get(meta, "deletionTimestamp"))
			continue; /* on its way */
		const char *name = json_string_value(json_object_get(meta, "name"));
		struct k8s_delete_opts o = { NULL, NULL, 0 };
		struct k8s_rest_cb cb = { on_pod_deleted, k };
		if (name && k8s_pod_delete(k->api, k->ns, name, &o, NULL, cb, NULL, NULL) == 0)
			k->pending++;
	}
	uv_timer_start(&d->timer, on_poll, POLL_MS, 0);
}

static void list_pods(struct kdel *d)
{
	struct kube *k = d->k;
	char sel[160];
	snprintf(sel, sizeof sel, "%s=codepod,%s=%s", K8S_LABEL_MANAGED_BY, K8S_LABEL_CONVERSATION,
	         d->c->label);
	struct k8s_rest_cb cb = { on_listed, d };
	struct cp_err err;
	if (k8s_pod_list(k->api, k->ns, sel, NULL, NULL, cb, NULL, &err)) {
		fail_with(d, CP_E_SANDBOX_UNAVAILABLE, "deleting the conversation's pod", err.msg);
		d->pods_done = 1;
		maybe_answer(d);
		return;
	}
	d->listing = 1;
	k->pending++;
}

static void snaps_deleted(void *ud, int rc, const struct cp_err *err)
{
	struct kdel *d = ud;
	if (rc)
		fail_with(d, rc, "deleting the snapshots", err ? err->msg : "failed");
	d->snaps_gone = 1;
	maybe_answer(d);
}

/* The answer comes from the loop, never inside delete_conversation. */
static void on_first(uv_timer_t *t)
{
	list_pods(t->data);
}

int kube_delete_conversation(struct codepod_backend *b, const char *conversation,
                             void (*done)(void *ud, int rc, const struct cp_err *err), void *ud,
                             struct cp_err *err)
{
	struct kube *k = (struct kube *)b;
	if (k->closing)
		return cp_err_set(err, CP_E_STATE, "codepod is stopping");
	if (kube_snap_is_alias(k, conversation))
		return cp_err_set(err, CP_E_INVALID_REQUEST, "no such conversation");
	struct kube_conv *c = kube_conv_get(k, conversation, err);
	if (!c)
		return err ? err->code : CP_E_INTERNAL;
	struct kdel *d = calloc(1, sizeof *d);
	if (!d)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	d->k = k;
	d->c = c;
	d->done = done;
	d->ud = ud;
	d->t0 = uv_now(k->loop);
	uv_timer_init(k->loop, &d->timer);
	d->timer.data = d;
	k->pending++; /* until the timer is closed */
	c->deleting++;
	/* Its pod is forgotten here: nothing starts in it again. */
	kube_conv_release(c);
	if (c->state == KUBE_CONV_READY)
		kube_conv_stale(c);
	struct cp_err serr = { 0 };
	if (!k->snaps) {
		d->snaps_gone = 1;
	} else if (kube_snap_forget(c, snaps_deleted, d, &serr)) {
		d->snaps_gone = 1;
		fail_with(d, serr.code, "deleting the snapshots", serr.msg);
	}
	uv_timer_start(&d->timer, on_first, 0, 0);
	return 0;
}
