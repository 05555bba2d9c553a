/*
 * kube_pool.c - the periodic tick of the Kubernetes backend: keep the warm
 * pool at its size, claim warm pods for new conversations, and reap pods
 * that are idle past the TTL or in a bad state. Claims and idle deletes carry
 * a resourceVersion precondition, so two replicas never both claim one pod,
 * and a replica never deletes a pod another one just used (its last-used
 * annotation moved the resourceVersion on).
 *
 * Replicas of other templates (an upgrade rolling out) share the namespace:
 * only warm pods of this replica's template are claimed and counted in its
 * pool; a conversation's pod of another template is reaped as any other
 * (idle past the TTL, or in a bad state), never for its template; a warm pod
 * of another template is left to the replicas that claim it, and drained
 * once it has gone unused as long as an idle conversation pod.
 */
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "k8s/api/execcred.h"
#include "k8s/backend/kube_int.h"
#include "k8s/backend/kube_snap.h"
#include "base/log.h"

/* ---- REST calls the backend counts until answered ---- */

struct call {
	struct kube *k;
	struct kube_conv *c;   /* for claims */
	json_t *items;     /* claim candidates left */
	size_t next;
	char *name;        /* reap: the pod */
	const char *why;   /* refill: "tick" or "claim" (a static string) */
	enum reap_kind { REAP_IDLE, REAP_BAD, REAP_DRIFT } kind; /* reap: counted as */
};

static struct call *call_new(struct kube *k)
{
	struct call *x = calloc(1, sizeof *x);
	if (x) {
		x->k = k;
		k->pending++;
	}
	return x;
}

/* Returns 1 if the backend is closing (and the call was freed). */
static int call_end(struct call *x)
{
	struct kube *k = x->k;
	json_decref(x->items);
	free(x->name);
	free(x);
	k->pending--;
	if (k->closing) {
		kube_maybe_free(k);
		return 1;
	}
	return 0;
}

/* A periodic list answered: its items (new reference), or NULL when it
 * failed or the backend is closing. The pass it belonged to is over. */
static json_t *listed(struct call *x, const json_t *obj, const struct cp_err *err, int *busy)
{
	json_t *items = err ? NULL : json_incref(json_object_get(obj, "items"));
	if (call_end(x)) {
		json_decref(items);
		return NULL;
	}
	*busy = 0;
	return items;
}

static const char *meta_str(const json_t *pod, const char *key)
{
	return json_string_value(json_object_get(json_object_get(pod, "metadata"), key));
}

static const char *label(const json_t *pod, const char *key)
{
	return json_string_value(json_object_get(json_object_get(json_object_get(pod, "metadata"), "labels"), key));
}

/* ---- warm pool: refill ---- */

static void on_warm_created(void *arg, json_t *obj, const struct k8s_status *st,
                            const struct cp_err *err)
{
	(void)st;
	struct call *x = arg;
	struct kube *k = x->k;
	if (call_end(x))
		return;
	if (err) {
		cp_log(CP_LOG_WARN, "kube.warm_create_failed", "reason", json_string(err->msg), NULL);
	} else {
		k->stats.warm_created++;
		const char *name = meta_str(obj, "name");
		if (name)
			kube_warm_created(k, name); /* its supervisor once it is Ready */
	}
}

static void create_warm(struct kube *k, const char *why)
{
	unsigned char r[6];
	char name[K8S_POD_NAME_MAX];
	if (RAND_bytes(r, sizeof r) != 1)
		return;
	snprintf(name, sizeof name, "codepod-warm-%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2],
	         r[3], r[4], r[5]);
	char now[32];
	kube_now_rfc3339(now);
	json_t *pod = k8s_pod_from_template(k->tmpl, name, k->ns, NULL, k->tmpl_hash, now);
	json_t *an = json_object_get(json_object_get(pod, "metadata"), "annotations");
	if (an)
		json_object_set_new(an, KUBE_ANNOT_REPLICA_START, json_string(k->started));
	struct call *x = call_new(k);
	struct k8s_rest_cb cb = { on_warm_created, x };
	cp_log(CP_LOG_INFO, "kube.warm_create", "pod", json_string(name), "why", json_string(why), NULL);
	if (!pod || !x || k8s_pod_create(k->api, k->ns, pod, NULL, cb, NULL, NULL)) {
		if (x)
			call_end(x);
	}
	json_decref(pod);
}

static void on_reaped(void *arg, json_t *obj, const struct k8s_status *st,
                      const struct cp_err *err);

static void delete_with(struct kube *k, const json_t *pod, int by_rv, const char *why,
                        enum reap_kind kind)
{
	struct call *x = call_new(k);
	if (!x)
		return;
	x->kind = kind;
	x->name = strdup(meta_str(pod, "name"));
	struct k8s_delete_opts d = { by_rv ? NULL : meta_str(pod, "uid"),
	                             by_rv ? meta_str(pod, "resourceVersion") : NULL, 5 };
	struct k8s_rest_cb cb = { on_reaped, x };
	cp_log(CP_LOG_INFO, "kube.reap", "pod", json_string(x->name), "why", json_string(why),
	       "pass", json_integer((json_int_t)k->passes), NULL);
	if (k8s_pod_delete(k->api, k->ns, x->name, &d, NULL, cb, NULL, NULL))
		call_end(x);
}

static void on_warm_listed(void *arg, json_t *obj, const struct k8s_status *st,
                           const struct cp_err *err)
{
	(void)st;
	struct call *x = arg;
	struct kube *k = x->k;
	const char *why = x->why;
	json_t *items = listed(x, obj, err, &k->pool_busy);
	if (!items)
		return;
	kube_warm_listed(k, items);
	unsigned usable = 0;
	size_t i;
	json_t *pod;
	json_array_foreach(items, i, pod) {
		struct k8s_pod_state s;
		k8s_pod_classify(pod, &s);
		if (s.verdict == K8S_POD_READY || s.verdict == K8S_POD_WAITING)
			usable++;
		else if (strcmp(s.reason, "Terminating") != 0)
			delete_with(k, pod, 0, s.reason, REAP_BAD);
	}
	json_decref(items);
	for (; usable < k->warm_pool; usable++)
		create_warm(k, why);
}

/* Warm pods of this replica's template only: one of another template is
 * never handed to a conversation here (nor counted in this pool). */
static void warm_selector(const struct kube *k, char *out, size_t cap)
{
	snprintf(out, cap, "%s=codepod,%s=true,%s=%s", K8S_LABEL_MANAGED_BY, K8S_LABEL_WARM,
	         K8S_LABEL_TEMPLATE, k->tmpl_hash);
}

static void refill(struct kube *k, const char *why)
{
	if (k->warm_pool == 0 || k->pool_busy || k->closing)
		return;
	char sel[200];
	warm_selector(k, sel, sizeof sel);
	struct call *x = call_new(k);
	struct k8s_rest_cb cb = { on_warm_listed, x };
	if (!x)
		return;
	x->why = why;
	k->pool_busy = 1;
	if (k8s_pod_list(k->api, k->ns, sel, NULL, NULL, cb, NULL, NULL)) {
		k->pool_busy = 0;
		call_end(x);
	}
}

/* ---- warm pool: claim ---- */

static void try_claim(struct call *x);

static void on_claim_patched(void *arg, json_t *obj, const struct k8s_status *st,
                             const struct cp_err *err)
{
	(void)st;
	struct call *x = arg;
	if (x->k->closing) {
		call_end(x);
		return;
	}
	if (!err) {
		struct kube_conv *c = x->c;
		json_incref(obj);
		call_end(x);
		const char *name = meta_str(obj, "name");
		if (name && c->state == KUBE_CONV_ACQUIRING)
			kube_warm_claimed(c, name); /* its supervisor and standby runner too */
		kube_acquire_claimed(c, obj);
		json_decref(obj);
		kube_pool_refill_soon(c->k);
		return;
	}
	/* 409: another replica took it first; 404: it went away. Next one. */
	if (err->code == CP_E_CONFLICT)
		cp_log(CP_LOG_INFO, "kube.claim_conflict", "pod",
		       json_string(meta_str(json_array_get(x->items, x->next - 1), "name")), NULL);
	try_claim(x);
}

static void try_claim(struct call *x)
{
	struct kube_conv *c = x->c;
	while (x->next < json_array_size(x->items)) {
		json_t *pod = json_array_get(x->items, x->next++);
		struct k8s_pod_state s;
		k8s_pod_classify(pod, &s);
		const char *tmpl = k8s_pod_template(pod);
		if (s.verdict != K8S_POD_READY || !tmpl || strcmp(tmpl, c->k->tmpl_hash) != 0)
			continue;
		char now[32];
		kube_now_rfc3339(now);
		json_t *patch = json_pack("{s:{s:{s:n,s:s},s:{s:s}}}", "metadata", "labels",
		                          K8S_LABEL_WARM, K8S_LABEL_CONVERSATION, c->label,
		                          "annotations", K8S_ANNOT_LAST_USED, now);
		/* With snapshots: whose it is, and restored here before use. */
		json_t *an = json_object_get(json_object_get(patch, "metadata"), "annotations");
		if (an)
			json_object_set_new(an, KUBE_ANNOT_REPLICA_START, json_string(c->k->started));
		if (an && c->k->snaps && c->snap_hash[0]) {
			json_object_set_new(an, KUBE_ANNOT_SNAPSHOT, json_string(c->snap_hash));
			json_object_set_new(an, KUBE_ANNOT_RESTORE, json_string(now));
		}
		struct k8s_rest_cb cb = { on_claim_patched, x };
		int rc = k8s_pod_patch(c->k->api, c->k->ns, meta_str(pod, "name"), patch,
		                       meta_str(pod, "resourceVersion"), NULL, cb, NULL, NULL);
		json_decref(patch);
		if (rc == 0)
			return;
	}
	call_end(x);
	kube_acquire_claimed(c, NULL);
}

static void on_claim_listed(void *arg, json_t *obj, const struct k8s_status *st,
                            const struct cp_err *err)
{
	(void)st;
	struct call *x = arg;
	if (x->k->closing) {
		call_end(x);
		return;
	}
	/* Pods whose supervisor and standby runner are up first. */
	const json_t *items = err ? NULL : json_object_get(obj, "items");
	x->items = json_array();
	for (int pass = 0; x->items && pass < 2; pass++) {
		size_t i;
		json_t *pod;
		json_array_foreach(items, i, pod) {
			const char *name = meta_str(pod, "name");
			if ((name && kube_warm_is_up(x->k, name)) == (pass == 0))
				json_array_append(x->items, pod);
		}
	}
	try_claim(x);
}

void kube_pool_claim(struct kube_conv *c)
{
	struct kube *k = c->k;
	char sel[200];
	warm_selector(k, sel, sizeof sel);
	struct call *x = call_new(k);
	if (!x) {
		kube_acquire_claimed(c, NULL);
		return;
	}
	x->c = c;
	struct k8s_rest_cb cb = { on_claim_listed, x };
	if (k8s_pod_list(k->api, k->ns, sel, NULL, NULL, cb, NULL, NULL)) {
		call_end(x);
		kube_acquire_claimed(c, NULL);
	}
}

/* ---- reaper ---- */

static void on_reaped(void *arg, json_t *obj, const struct k8s_status *st,
                      const struct cp_err *err)
{
	(void)obj;
	(void)st;
	struct call *x = arg;
	struct kube *k = x->k;
	char *name = x->name;
	enum reap_kind kind = x->kind;
	x->name = NULL;
	if (call_end(x)) {
		free(name);
		return;
	}
	if (!err || err->code == CP_E_NOT_FOUND) {
		k->stats.reaped++;
		if (kind == REAP_BAD)
			k->stats.reaped_bad++;
		else if (kind == REAP_DRIFT)
			k->stats.drained++;
		for (struct kube_conv *c = k->convs; c; c = c->next)
			if (c->pod && name && strcmp(c->pod, name) == 0 && c->running == 0)
				kube_conv_stale(c);
	} else if (err->code == CP_E_CONFLICT) {
		cp_log(CP_LOG_INFO, "kube.reap_skipped", "pod", json_string(name),
		       "why", json_string("used meanwhile"), NULL);
	}
	free(name);
}

static int in_use_here(const struct kube *k, const char *name)
{
	for (const struct kube_conv *c = k->convs; c; c = c->next)
		if (c->pod && strcmp(c->pod, name) == 0 && (c->running > 0 || c->waiters))
			return 1;
	return 0;
}

/* Unused for longer than the idle TTL: no replica's in-use mark stands and
 * its last use (or its making, for a warm pod) is older. */
static int idle_past_ttl(const struct kube *k, const json_t *pod, time_t now)
{
	if (k->idle_ttl_s == 0)
		return 0;
	const json_t *annots = json_object_get(json_object_get(pod, "metadata"), "annotations");
	const char *busy = json_string_value(json_object_get(annots, K8S_ANNOT_IN_USE_UNTIL));
	time_t until = 0;
	if (busy && k8s_rfc3339_parse(busy, &until) == 0 && until > now)
		return 0; /* a replica runs executions in it */
	const char *used = json_string_value(json_object_get(annots, K8S_ANNOT_LAST_USED));
	time_t t = 0;
	if (!used || k8s_rfc3339_parse(used, &t) != 0)
		return 0;
	return now - t > (time_t)k->idle_ttl_s;
}

/* --template-drift-idle: a conversation's pod of another template, made by
 * a replica that started before this one (an older release's), unused for
 * that long by every replica. */
static int drifted(const struct kube *k, const json_t *pod, time_t now)
{
	if (!k->drift_idle_s)
		return 0;
	const char *tmpl = k8s_pod_template(pod);
	if (tmpl && strcmp(tmpl, k->tmpl_hash) == 0)
		return 0;
	const char *by = kube_pod_annotation(pod, KUBE_ANNOT_REPLICA_START);
	if (by && strtoll(by, NULL, 10) >= strtoll(k->started, NULL, 10))
		return 0; /* a newer (or this) replica's: its template is the one to keep */
	const json_t *annots = json_object_get(json_object_get(pod, "metadata"), "annotations");
	const char *busy = json_string_value(json_object_get(annots, K8S_ANNOT_IN_USE_UNTIL));
	time_t until = 0;
	if (busy && k8s_rfc3339_parse(busy, &until) == 0 && until > now)
		return 0;
	const char *used = json_string_value(json_object_get(annots, K8S_ANNOT_LAST_USED));
	time_t t = 0;
	if (!used || k8s_rfc3339_parse(used, &t) != 0)
		return 0;
	return now - t > (time_t)k->drift_idle_s;
}

/* Its files carry over (a snapshot, then the delete, kube_snap.h), or it is
 * kept and said once (info): a template change never loses a workspace. */
static void replace_drifted(struct kube *k, const json_t *pod)
{
	if (kube_snap_before_reap(k, pod, 1))
		return;
	const char *uid = meta_str(pod, "uid");
	for (unsigned i = 0; uid && i < sizeof k->drift_kept / sizeof k->drift_kept[0]; i++)
		if (strcmp(k->drift_kept[i], uid) == 0)
			return;
	if (uid) {
		snprintf(k->drift_kept[k->drift_kept_next], sizeof k->drift_kept[0], "%s", uid);
		k->drift_kept_next = (k->drift_kept_next + 1) % (sizeof k->drift_kept / sizeof k->drift_kept[0]);
	}
	cp_log(CP_LOG_INFO, "kube.template_drift_kept", "pod", json_string(meta_str(pod, "name")),
	       "template", k8s_pod_template(pod) ? json_string(k8s_pod_template(pod)) : json_null(),
	       "own", json_string(k->tmpl_hash), "why",
	       json_string(k->snaps ? "the pod was made without a snapshot store: its files would "
	                              "not carry over"
	                            : "no snapshot store (--snapshot-url): its files would not "
	                              "carry over"), NULL);
}

/* One listed pod: left, replaced or deleted. 1 when it was being deleted
 * already. */
static int reap_one(struct kube *k, const json_t *pod, time_t now)
{
	const char *name = meta_str(pod, "name");
	if (!name || in_use_here(k, name))
		return 0;
	struct k8s_pod_state s;
	k8s_pod_classify(pod, &s);
	/* Being deleted already (a pass before this one, or another
	 * replica's): listed until its containers stop, it is nobody's to
	 * snapshot or delete again. */
	if (s.verdict == K8S_POD_REPLACE && strcmp(s.reason, "Terminating") == 0)
		return 1;
	if (s.verdict == K8S_POD_REPLACE) {
		delete_with(k, pod, 0, s.reason, REAP_BAD);
		return 0;
	}
	if (s.verdict == K8S_POD_UNAVAILABLE) {
		delete_with(k, pod, 0, s.reason, REAP_BAD);
		return 0;
	}
	if (!label(pod, K8S_LABEL_CONVERSATION)) {
		/* A warm pod. Those of this template are the pool's. One of another
		 * template serves the replicas of its own while they last (an
		 * upgrade rolling out); left unclaimed as long as an idle
		 * conversation pod, it is drained. The resourceVersion
		 * precondition lets a claim that got there first win. */
		const char *tmpl = k8s_pod_template(pod);
		if ((!tmpl || strcmp(tmpl, k->tmpl_hash) != 0) && idle_past_ttl(k, pod, now))
			delete_with(k, pod, 1, "drift", REAP_DRIFT);
		return 0;
	}
	/* A conversation's pod, of whichever template: only disuse ends it;
	 * with snapshots, its workspace is kept first (kube_snap.h). */
	if (idle_past_ttl(k, pod, now)) {
		if (!kube_snap_before_reap(k, pod, 0))
			delete_with(k, pod, 1, "idle", REAP_IDLE);
		return 0;
	}
	if (drifted(k, pod, now))
		replace_drifted(k, pod);
	return 0;
}

void kube_pool_reap_idle(struct kube *k, const json_t *pod, int drift)
{
	delete_with(k, pod, 1, drift ? "drift" : "idle", drift ? REAP_DRIFT : REAP_IDLE);
}

static void on_reap_listed(void *arg, json_t *obj, const struct k8s_status *st,
                           const struct cp_err *err)
{
	(void)st;
	struct call *x = arg;
	struct kube *k = x->k;
	json_t *items = listed(x, obj, err, &k->reap_busy);
	if (!items)
		return;
	time_t now = time(NULL);
	size_t i, terminating = 0;
	json_t *pod;
	json_array_foreach(items, i, pod)
		terminating += (size_t)reap_one(k, pod, now);
	cp_log(CP_LOG_DEBUG, "kube.reap_listed", "pass", json_integer((json_int_t)k->passes),
	       "pods", json_integer((json_int_t)json_array_size(items)), "terminating",
	       json_integer((json_int_t)terminating), NULL);
	json_decref(items);
}

static void reap(struct kube *k)
{
	if (k->reap_busy || k->closing)
		return;
	char sel[80];
	snprintf(sel, sizeof sel, "%s=codepod", K8S_LABEL_MANAGED_BY);
	struct call *x = call_new(k);
	if (!x)
		return;
	struct k8s_rest_cb cb = { on_reap_listed, x };
	k->reap_busy = 1;
	if (k8s_pod_list(k->api, k->ns, sel, NULL, NULL, cb, NULL, NULL)) {
		k->reap_busy = 0;
		call_end(x);
	}
}

/* ---- the tick ---- */

static void on_tick(uv_timer_t *t)
{
	struct kube *k = t->data;
	/* Pods running executions stay "used" for every replica's reaper. */
	for (struct kube_conv *c = k->convs; c; c = c->next)
		if (c->running > 0)
			kube_touch(c);
	k->passes++;
	refill(k, "tick");
	reap(k);
}

void kube_pool_start(struct kube *k)
{
	uint64_t period = (uint64_t)k->tick_s * 1000u;
	uv_timer_start(&k->tick, on_tick, 0, period);
}

void kube_pool_stop(struct kube *k)
{
	uv_timer_stop(&k->tick);
}

void kube_pool_refill_soon(struct kube *k)
{
	if (!k->closing)
		refill(k, "claim");
}

void kube_warm_poll(uv_timer_t *t)
{
	kube_pool_refill_soon(t->data);
}
