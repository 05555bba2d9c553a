/*
 * kube_acquire.c - a conversation's pod: find it by label, else claim a warm
 * one, else create it from the template; then wait until it is ready through
 * a watch (docs/kubernetes.md §2.2-2.4). A racing replica's 409 means "use theirs".
 * A pod is judged by its state alone: one made from another template (a
 * replica of an older or newer release) is used as it is, since deleting it
 * would kill what other replicas run in it and lose the conversation's
 * files; the conversation's next pod is made from this replica's template.
 *
 * Every asynchronous step carries the conversation's generation; a step that
 * answers after the conversation moved on (stale, released) is dropped.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "k8s/backend/kube_int.h"
#include "k8s/backend/kube_snap.h"
#include "base/assert.h"
#include "base/hex.h"
#include "base/log.h"
#include "base/state.h"

#define MAX_ATTEMPTS 4

struct step {
	struct kube_conv *c;
	unsigned gen;
};

static void acquire(struct kube_conv *c);
static void stop_steps(struct kube_conv *c);
static void patch_annotations(struct kube_conv *c, json_t *patch /* steals */);
static void watch_pod(struct kube_conv *c, const char *name, const char *rv);
static void own_restore(struct kube_conv *c, const json_t *pod);

static const char *const conv_state_names[] = {
	[KUBE_CONV_IDLE] = "idle", [KUBE_CONV_ACQUIRING] = "acquiring", [KUBE_CONV_READY] = "ready",
};

/* legal[from][to]: the transitions of kube_int.h. */
#define N_CONV_STATES (KUBE_CONV_READY + 1)
static const unsigned char conv_legal[N_CONV_STATES][N_CONV_STATES] = {
	[KUBE_CONV_IDLE] = { [KUBE_CONV_ACQUIRING] = 1 },
	[KUBE_CONV_ACQUIRING] = { [KUBE_CONV_IDLE] = 1, [KUBE_CONV_READY] = 1 },
	[KUBE_CONV_READY] = { [KUBE_CONV_IDLE] = 1 },
};

/* A new conversation is calloc'ed (kube_conv_get): it starts idle. */
_Static_assert(KUBE_CONV_IDLE == 0, "a new conversation is KUBE_CONV_IDLE");

static const struct cp_state_machine conv_machine = {
	"kube.conv_state", "pod", conv_state_names, &conv_legal[0][0], N_CONV_STATES,
};

/* The one place c->state changes. */
static void conv_set_state(struct kube_conv *c, enum kube_conv_state to)
{
	cp_state_change(&conv_machine, c->name, -1, (unsigned)c->state, (unsigned)to);
	c->state = to;
}

/* A step: one REST call of an acquisition. The backend counts them so it is
 * freed only after the last answer (answers come even after cancel). */
static struct step *step_new(struct kube_conv *c)
{
	struct step *s = malloc(sizeof *s);
	if (s) {
		s->c = c;
		s->gen = c->gen;
		c->k->pending++;
	}
	return s;
}

/* An answer arrived: drop the step; the conversation if it is still current. */
static struct kube_conv *step_take(struct step *s)
{
	struct kube_conv *c = s->c;
	struct kube *k = c->k;
	int current = s->gen == c->gen && !k->closing;
	free(s);
	k->pending--;
	if (k->closing) {
		kube_maybe_free(k);
		return NULL;
	}
	return current ? c : NULL;
}

/* The answer to the conversation's call in progress: the call is over. */
static struct kube_conv *step_answered(struct step *s)
{
	struct kube_conv *c = step_take(s);
	if (c)
		c->call = NULL;
	return c;
}

/* A step that failed to start: undo its count. */
static void step_drop(struct step *s)
{
	if (s) {
		s->c->k->pending--;
		free(s);
	}
}

static void rfc3339_at(time_t t, char out[32])
{
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void kube_now_rfc3339(char out[32])
{
	rfc3339_at(time(NULL), out);
}

/* The conversation's snapshot folder: the local backend's name for its
 * workspace (32 hex of SHA-256 of the key), so a conversation keeps its
 * files across backends too. */
static void snap_hash_of(const char *key, char out[33])
{
	unsigned char md[32];
	unsigned int n = 0;
	out[0] = '\0';
	if (!EVP_Digest(key, strlen(key), md, &n, EVP_sha256(), NULL))
		return;
	cp_hex_encode(md, 16, out);
}

/* The key names its conversation here from now on (a conversation first
 * seen by the reaper through an alias has the claimed pod's name). */
static int keyed(struct kube_conv *c, const char *key, struct cp_err *err)
{
	if (c->keyed)
		return 0;
	if (k8s_pod_name(c->k->ns, key, c->name, err))
		return -1;
	snap_hash_of(key, c->snap_hash);
	c->keyed = 1;
	return 0;
}

struct kube_conv *kube_conv_get(struct kube *k, const char *key, struct cp_err *err)
{
	char label[41], alias_pod[K8S_POD_NAME_MAX];
	int alias = kube_snap_alias_parse(k, key, label, alias_pod, sizeof alias_pod) == 0;
	if (!alias && k8s_conversation_label(k->ns, key, label, err))
		return NULL;
	for (struct kube_conv *c = k->convs; c; c = c->next)
		if (strcmp(c->label, label) == 0)
			return alias || keyed(c, key, err) == 0 ? c : NULL;
	struct kube_conv *c = calloc(1, sizeof *c);
	if (!c) {
		cp_err_set(err, CP_E_NOMEM, "out of memory");
		return NULL;
	}
	c->k = k;
	c->restore_ms = -1;
	memcpy(c->label, label, sizeof label);
	if (alias) {
		snprintf(c->name, sizeof c->name, "%s", alias_pod);
	} else if (keyed(c, key, err)) {
		free(c);
		return NULL;
	}
	c->next = k->convs;
	k->convs = c;
	return c;
}

const char *kube_pod_annotation(const json_t *pod, const char *key)
{
	return json_string_value(json_object_get(
		json_object_get(json_object_get(pod, "metadata"), "annotations"), key));
}

/* Ends every waiter with the sandbox's reason. */
static void fail(struct kube_conv *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct kube_conv *c, const char *fmt, ...)
{
	char detail[CP_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof detail, fmt, ap);
	va_end(ap);
	cp_log(CP_LOG_WARN, "kube.unavailable", "pod", json_string(c->name),
	       "reason", json_string(detail), NULL);
	kube_conv_release(c);
	struct codepod_proc *w = c->waiters;
	c->waiters = NULL;
	while (w) {
		struct codepod_proc *next = w->next_wait;
		w->next_wait = NULL;
		kube_proc_unavailable(w, detail);
		w = next;
	}
}

static const char *pod_uid(const json_t *pod);

/* Which template made the pod this replica now serves: counted, and a pod
 * of another template said once at info (an upgrade is rolling out, or a
 * replica runs with another --pod-template). */
static void note_template(struct kube_conv *c, const json_t *pod, const char *name)
{
	struct kube *k = c->k;
	const char *tmpl = k8s_pod_template(pod);
	if (tmpl && strcmp(tmpl, k->tmpl_hash) == 0) {
		k->stats.served_own++;
		return;
	}
	k->stats.served_other++;
	const char *uid = pod_uid(pod);
	if (uid && strcmp(uid, c->drift_uid) == 0)
		return;
	snprintf(c->drift_uid, sizeof c->drift_uid, "%s", uid ? uid : "");
	cp_log(CP_LOG_INFO, "kube.template_drift", "pod", json_string(name),
	       "template", tmpl ? json_string(tmpl) : json_null(), "own", json_string(k->tmpl_hash),
	       NULL);
}

static void ready(struct kube_conv *c, const json_t *pod)
{
	const char *name = json_string_value(json_object_get(json_object_get(pod, "metadata"), "name"));
	note_template(c, pod, name ? name : c->name);
	stop_steps(c); /* not kube_conv_release: ACQUIRING goes straight to READY */
	if (!c->pod || !name || strcmp(c->pod, name) != 0)
		c->busy_marked = 0; /* another pod (or not known to be the same): mark it anew */
	free(c->pod);
	c->pod = strdup(name ? name : c->name);
	conv_set_state(c, KUBE_CONV_READY);
	c->attempts = 0;
	cp_log(CP_LOG_DEBUG, "kube.ready", "pod", json_string(c->pod), NULL);
	const char *uid = pod_uid(pod);
	if (c->k->snaps && uid && c->restore_uid[0] && strcmp(uid, c->restore_uid) == 0 &&
	    kube_pod_annotation(pod, KUBE_ANNOT_RESTORE)) {
		/* Ours, new: its workspace first; the waiters' runners start
		 * beside it, their programs held until it ends (kube_restored). */
		c->restoring = 1;
		kube_snap_restore(c);
		if (c->restoring && c->state == KUBE_CONV_READY)
			kube_gate_start(c);
		return;
	}
	c->restore_uid[0] = '\0';
	kube_snap_not_ours(c);
	struct codepod_proc *w = c->waiters;
	c->waiters = NULL;
	while (w) {
		struct codepod_proc *next = w->next_wait;
		w->next_wait = NULL;
		kube_proc_pod_ready(w);
		w = next;
	}
}

static void retry(struct kube_conv *c, const char *why)
{
	kube_conv_release(c);
	if (++c->attempts > MAX_ATTEMPTS) {
		fail(c, "the pod kept going away (%s)", why);
		return;
	}
	acquire(c);
}

static const char *pod_rv(const json_t *pod)
{
	return json_string_value(json_object_get(json_object_get(pod, "metadata"), "resourceVersion"));
}

static const char *pod_uid(const json_t *pod)
{
	return json_string_value(json_object_get(json_object_get(pod, "metadata"), "uid"));
}

static const char *pod_name(const json_t *pod)
{
	return json_string_value(json_object_get(json_object_get(pod, "metadata"), "name"));
}

static void on_deleted(void *arg, json_t *obj, const struct k8s_status *st,
                       const struct cp_err *err)
{
	(void)obj;
	(void)st;
	struct kube *k = arg;
	if (err && err->code != CP_E_NOT_FOUND && err->code != CP_E_CONFLICT &&
	    err->code != CP_E_CANCELLED)
		cp_log(CP_LOG_WARN, "kube.delete_failed", "reason", json_string(err->msg), NULL);
	k->pending--;
	kube_maybe_free(k);
}

/* Delete exactly this pod (uid precondition): never one a racing replica
 * made in its place. Only a pod in a bad state comes here; @again: the
 * delete of one already counted, asked again. */
static void delete_pod(struct kube *k, const json_t *pod, int again)
{
	struct k8s_delete_opts d = { pod_uid(pod), NULL, 5 };
	struct k8s_rest_cb cb = { on_deleted, k };
	if (k8s_pod_delete(k->api, k->ns, pod_name(pod), &d, NULL, cb, NULL, NULL) == 0) {
		k->pending++;
		if (!again)
			k->stats.replaced++;
	}
}

/* The pod's workspace is being restored by the replica that made or
 * claimed it (KUBE_ANNOT_RESTORE): nothing may run in it before that. */
static int restore_elsewhere(const struct kube_conv *c, const json_t *pod)
{
	const char *uid = pod_uid(pod);
	return kube_pod_annotation(pod, KUBE_ANNOT_RESTORE) &&
	       !(uid && c->restore_uid[0] && strcmp(uid, c->restore_uid) == 0);
}

/* Wait for that restore to end (the annotation goes: a watch event); one
 * older than KUBE_RESTORE_STALE_S lost its replica: the pod is deleted
 * and the conversation gets a new one, restored by this replica. */
static int waited_restore(struct kube_conv *c, const json_t *pod)
{
	time_t since = 0, now = time(NULL);
	const char *t = kube_pod_annotation(pod, KUBE_ANNOT_RESTORE);
	if (t && k8s_rfc3339_parse(t, &since) == 0 && now - since > KUBE_RESTORE_STALE_S) {
		cp_log(CP_LOG_WARN, "kube.restore_abandoned", "pod", json_string(pod_name(pod)),
		       "since", json_string(t), NULL);
		delete_pod(c->k, pod, 0);
		return 0;
	}
	cp_log(CP_LOG_DEBUG, "kube.restore_wait", "pod", json_string(pod_name(pod)), NULL);
	if (!c->watch)
		watch_pod(c, pod_name(pod), pod_rv(pod));
	return 1;
}

/* Acts on one pod's verdict; returns 1 when the conversation moved on. */
static int judge(struct kube_conv *c, const json_t *pod)
{
	const char *uid = pod_uid(pod);
	if (uid && c->dead_uid[0] && strcmp(uid, c->dead_uid) == 0) {
		/* The pod an earlier execution was refused over, its delete still
		 * on the way (the next execution can come faster): wait for it to
		 * go rather than refuse again, and ask again in case the first
		 * delete failed. */
		delete_pod(c->k, pod, 1);
		return 0;
	}
	struct k8s_pod_state st;
	k8s_pod_classify(pod, &st);
	switch (st.verdict) {
	case K8S_POD_READY:
		if (restore_elsewhere(c, pod))
			return waited_restore(c, pod);
		c->dead_uid[0] = '\0';
		ready(c, pod);
		return 1;
	case K8S_POD_UNAVAILABLE:
		fail(c, "%s%s%s", st.reason, st.message ? ": " : "", st.message ? st.message : "");
		/* the next execution starts over with a fresh pod */
		snprintf(c->dead_uid, sizeof c->dead_uid, "%s", uid ? uid : "");
		delete_pod(c->k, pod, 0);
		return 1;
	case K8S_POD_WAITING:
		watch_pod(c, pod_name(pod), pod_rv(pod));
		return 1;
	case K8S_POD_REPLACE: /* Succeeded, Failed (its own state, never its template) */
		if (strcmp(st.reason, "Terminating") != 0)
			delete_pod(c->k, pod, 0);
		return 0;
	}
	return 0;
}

/* ---- waiting through a watch ---- */

static void on_watch_event(void *arg, const struct k8s_watch_event *ev)
{
	struct kube_conv *c = arg;
	if (c->state != KUBE_CONV_ACQUIRING)
		return;
	if (ev->type == K8S_WATCH_DELETED) {
		retry(c, "deleted while starting");
		return;
	}
	if (ev->type != K8S_WATCH_ADDED && ev->type != K8S_WATCH_MODIFIED)
		return;
	struct k8s_pod_state st;
	k8s_pod_classify(ev->object, &st);
	if (st.verdict == K8S_POD_WAITING)
		return;
	if (st.verdict == K8S_POD_REPLACE) {
		if (strcmp(st.reason, "Terminating") != 0)
			delete_pod(c->k, ev->object, 0);
		return; /* DELETED follows */
	}
	judge(c, ev->object);
}

static void on_watch_resync(void *arg, json_t *list)
{
	struct kube_conv *c = arg;
	if (c->state != KUBE_CONV_ACQUIRING)
		return;
	json_t *items = json_object_get(list, "items");
	if (json_array_size(items) == 0) {
		retry(c, "gone while starting");
		return;
	}
	on_watch_event(c, &(struct k8s_watch_event){ .type = K8S_WATCH_MODIFIED,
	                                              .object = json_array_get(items, 0) });
}

static void on_watch_done(void *arg, const struct cp_err *err)
{
	struct kube_conv *c = arg;
	struct kube *k = c->k;
	k->pending--;
	if (k->closing) {
		kube_maybe_free(k);
		return;
	}
	if (err->code == CP_E_CANCELLED || c->state != KUBE_CONV_ACQUIRING)
		return;
	c->watch = NULL;
	fail(c, "watching the pod failed: %s", err->msg);
}

static const struct k8s_pod_watch_ops watch_ops = {
	.on_event = on_watch_event, .on_resync = on_watch_resync, .on_done = on_watch_done,
};

static void watch_pod(struct kube_conv *c, const char *name, const char *rv)
{
	char field[120];
	snprintf(field, sizeof field, "metadata.name=%s", name ? name : c->name);
	struct k8s_pod_watch_opts o = { .ns = c->k->ns, .field_selector = field,
	                                .resource_version = rv, .timeout_s = 60,
	                                .max_failures = 8 };
	struct k8s_pod_watch_ops ops = watch_ops;
	ops.arg = c;
	struct cp_err err;
	if (k8s_pod_watch_start(c->k->api, &o, &ops, &c->watch, &err))
		fail(c, "cannot watch the pod: %s", err.msg);
	else
		c->k->pending++;
}

/* ---- create ---- */

static void on_got_existing(void *arg, json_t *obj, const struct k8s_status *st,
                            const struct cp_err *err)
{
	(void)st;
	struct kube_conv *c = step_answered(arg);
	if (!c)
		return;
	if (err && err->code == CP_E_NOT_FOUND) {
		retry(c, "deleted after a conflict");
		return;
	}
	if (err) {
		fail(c, "Kubernetes API: %s", err->msg);
		return;
	}
	c->k->stats.found++;
	if (!judge(c, obj))
		watch_pod(c, c->name, pod_rv(obj)); /* terminating: DELETED follows */
}

static void on_created(void *arg, json_t *obj, const struct k8s_status *st,
                       const struct cp_err *err)
{
	(void)st;
	struct kube_conv *c = step_answered(arg);
	if (!c)
		return;
	if (err && err->code == CP_E_CONFLICT) {
		/* a racing replica created it first: use theirs */
		cp_log(CP_LOG_INFO, "kube.create_conflict", "pod", json_string(c->name), NULL);
		struct step *s = step_new(c);
		struct k8s_rest_cb cb = { on_got_existing, s };
		struct cp_err gerr;
		if (!s || k8s_pod_get(c->k->api, c->k->ns, c->name, NULL, cb, &c->call, &gerr)) {
			step_drop(s);
			fail(c, "Kubernetes API: cannot read pod %s", c->name);
		}
		return;
	}
	if (err && (err->code == CP_E_RETRY || err->code == CP_E_IO) && c->attempts < MAX_ATTEMPTS) {
		/* A 5xx or a dropped connection: the create may or may not have
		 * happened, so it is not repeated blindly; the acquisition starts
		 * over and lists first. */
		retry(c, err->msg);
		return;
	}
	if (err) {
		fail(c, "creating the pod failed: %s", err->msg);
		return;
	}
	c->k->stats.created++;
	cp_log(CP_LOG_INFO, "kube.created", "pod", json_string(c->name), NULL);
	own_restore(c, obj);
	judge(c, obj);
}

/* A pod this replica made or claimed carries KUBE_ANNOT_RESTORE: its
 * workspace is restored here before anything else runs in it. */
static void own_restore(struct kube_conv *c, const json_t *pod)
{
	const char *uid = pod_uid(pod);
	if (c->k->snaps && uid && kube_pod_annotation(pod, KUBE_ANNOT_RESTORE))
		snprintf(c->restore_uid, sizeof c->restore_uid, "%s", uid);
}

static void create(struct kube_conv *c)
{
	char now[32];
	kube_now_rfc3339(now);
	json_t *pod = k8s_pod_from_template(c->k->tmpl, c->name, c->k->ns, c->label,
	                                    c->k->tmpl_hash, now);
	if (pod && c->k->snaps && c->snap_hash[0]) {
		json_t *meta = json_object_get(pod, "metadata");
		json_t *an = json_object_get(meta, "annotations");
		if (!an)
			json_object_set_new(meta, "annotations", an = json_object());
		json_object_set_new(an, KUBE_ANNOT_SNAPSHOT, json_string(c->snap_hash));
		json_object_set_new(an, KUBE_ANNOT_RESTORE, json_string(now));
	}
	if (pod) {
		json_t *meta = json_object_get(pod, "metadata");
		json_t *an = json_object_get(meta, "annotations");
		if (!an)
			json_object_set_new(meta, "annotations", an = json_object());
		json_object_set_new(an, KUBE_ANNOT_REPLICA_START, json_string(c->k->started));
	}
	struct step *s = step_new(c);
	struct k8s_rest_cb cb = { on_created, s };
	struct cp_err err;
	if (!pod || !s || k8s_pod_create(c->k->api, c->k->ns, pod, NULL, cb, &c->call, &err)) {
		step_drop(s);
		fail(c, "cannot create the pod");
	}
	json_decref(pod);
}

void kube_acquire_claimed(struct kube_conv *c, const json_t *pod)
{
	if (c->state != KUBE_CONV_ACQUIRING)
		return;
	if (!pod) {
		create(c);
		return;
	}
	c->k->stats.claimed++;
	cp_log(CP_LOG_INFO, "kube.claimed", "pod", json_string(pod_name(pod)), NULL);
	own_restore(c, pod);
	judge(c, pod);
}

/* ---- find by label ---- */

static void on_listed(void *arg, json_t *obj, const struct k8s_status *st,
                      const struct cp_err *err)
{
	(void)st;
	struct kube_conv *c = step_answered(arg);
	if (!c)
		return;
	if (err) {
		fail(c, "Kubernetes API: %s", err->msg);
		return;
	}
	/* The pod with the conversation's own name first, then claimed ones. */
	json_t *items = json_object_get(obj, "items");
	size_t i;
	json_t *pod;
	json_array_foreach(items, i, pod) {
		const char *name = pod_name(pod);
		if (name && strcmp(name, c->name) == 0 && judge(c, pod)) {
			c->k->stats.found++;
			return;
		}
	}
	json_array_foreach(items, i, pod) {
		const char *name = pod_name(pod);
		if (name && strcmp(name, c->name) != 0 && judge(c, pod)) {
			c->k->stats.found++;
			return;
		}
	}
	kube_snap_prefetch(c); /* a new pod: its workspace's download overlaps its start */
	if (c->k->warm_pool > 0)
		kube_pool_claim(c);
	else
		create(c);
}

static void acquire(struct kube_conv *c)
{
	conv_set_state(c, KUBE_CONV_ACQUIRING);
	char sel[160];
	snprintf(sel, sizeof sel, "%s=codepod,%s=%s", K8S_LABEL_MANAGED_BY,
	         K8S_LABEL_CONVERSATION, c->label);
	struct step *s = step_new(c);
	struct k8s_rest_cb cb = { on_listed, s };
	struct cp_err err;
	/* Starting over after a failure waits a little longer each time. */
	struct k8s_rest_opts o = { .start_delay_ms = 250L * c->attempts };
	if (!s || k8s_pod_list(c->k->api, c->k->ns, sel, NULL, &o, cb, &c->call, &err)) {
		step_drop(s);
		fail(c, "Kubernetes API: cannot list pods");
	}
}

void kube_conv_want(struct kube_conv *c)
{
	if (c->state == KUBE_CONV_IDLE && !c->deleting) {
		c->attempts = 0;
		acquire(c);
	}
}

/* Stops the call or watch in progress; their late answers are dropped
 * (cancels answer on a later loop turn, never from inside this call). */
static void stop_steps(struct kube_conv *c)
{
	c->gen++;
	if (c->call) {
		struct k8s_rest_call *call = c->call;
		c->call = NULL;
		k8s_rest_cancel(call);
	}
	if (c->watch) {
		struct k8s_pod_watch *w = c->watch;
		c->watch = NULL;
		k8s_pod_watch_stop(w);
	}
}

void kube_conv_release(struct kube_conv *c)
{
	stop_steps(c);
	if (c->state == KUBE_CONV_ACQUIRING)
		conv_set_state(c, KUBE_CONV_IDLE);
}

void kube_conv_stale(struct kube_conv *c)
{
	kube_touch_flush(c, 1); /* the mark belongs to this pod */
	kube_conv_release(c);
	free(c->pod);
	c->pod = NULL;
	c->restoring = 0; /* its restore ends as nothing (kube_restored) */
	if (c->state != KUBE_CONV_IDLE)
		conv_set_state(c, KUBE_CONV_IDLE);
	/* Last: executions waiting for the pod's supervisor now wait for the
	 * conversation's next pod, and may start acquiring it at once. */
	kube_supervisor_drop(c);
}

static void on_touched(void *arg, json_t *obj, const struct k8s_status *st,
                       const struct cp_err *err)
{
	(void)obj;
	(void)st;
	struct kube *k = arg;
	if (err && err->code != CP_E_CANCELLED)
		cp_log(CP_LOG_DEBUG, "kube.touch_failed", "reason", json_string(err->msg), NULL);
	k->pending--;
	kube_maybe_free(k);
}

/* How often the annotations are written: 30 s, a quarter of the idle TTL
 * when that is shorter. */
static uint64_t touch_every_ms(const struct kube *k)
{
	uint64_t every = 30000;
	if (k->idle_ttl_s && (uint64_t)k->idle_ttl_s * 250 < every)
		every = (uint64_t)k->idle_ttl_s * 250; /* a quarter of the TTL */
	return every;
}

/* The last-used annotation the reaper reads; written at most every
 * touch_every_ms, with the in-use-until mark while executions run. */
void kube_touch(struct kube_conv *c)
{
	uint64_t now = uv_now(c->k->loop);
	uint64_t every = touch_every_ms(c->k);
	if (c->running > 0)
		c->clear_due_ms = 0; /* in use again: the standing mark covers it */
	int becomes_busy = c->running > 0 && !c->busy_marked;
	if (!c->pod || (!becomes_busy && c->touched_ms && now - c->touched_ms < every))
		return;
	c->touched_ms = now;
	char ts[32], until[32];
	time_t t = time(NULL);
	rfc3339_at(t, ts);
	/* Past the next two touches: a busy pod never looks idle to anyone. */
	rfc3339_at(t + (time_t)(2 * every / 1000 + 2 * c->k->tick_s + 5), until);
	json_t *patch = c->running > 0
		? json_pack("{s:{s:{s:s,s:s}}}", "metadata", "annotations", K8S_ANNOT_LAST_USED, ts,
		            K8S_ANNOT_IN_USE_UNTIL, until)
		: json_pack("{s:{s:{s:s}}}", "metadata", "annotations", K8S_ANNOT_LAST_USED, ts);
	if (c->running > 0)
		c->busy_marked = 1;
	patch_annotations(c, patch);
}

/* How long after a pod's last execution its in-use mark is cleared: an
 * agent's next program of the conversation often comes sooner (a burst of
 * small programs), finds the mark standing and needs no PATCH on its way in
 * (on the fake, that request and its watch event ran beside every program's
 * start). Another replica's reaper sees the pod idle this much later. */
#define CLEAR_AFTER_MS 5000

static void on_clear_timer(uv_timer_t *t)
{
	struct kube *k = t->data;
	uint64_t now = uv_now(k->loop), next = UINT64_MAX;
	for (struct kube_conv *c = k->convs; c; c = c->next) {
		kube_touch_flush(c, 0);
		if (c->clear_due_ms && c->clear_due_ms < next)
			next = c->clear_due_ms;
	}
	if (next != UINT64_MAX)
		uv_timer_start(t, on_clear_timer, next > now ? next - now : 0, 0);
}

/* The last execution in the pod ended: it is idle from now on (the mark is
 * cleared CLEAR_AFTER_MS later, or a touch interval if that is shorter;
 * last-used then says when it ended). */
void kube_touch_done(struct kube_conv *c)
{
	if (!c->pod || !c->busy_marked)
		return;
	uint64_t after = touch_every_ms(c->k) < CLEAR_AFTER_MS ? touch_every_ms(c->k) : CLEAR_AFTER_MS;
	c->clear_due_ms = uv_now(c->k->loop) + after;
	c->ended_at = time(NULL);
	if (c->k->closing)
		kube_touch_flush(c, 1); /* no timer will come */
	else if (!uv_is_active((uv_handle_t *)&c->k->clear_timer))
		uv_timer_start(&c->k->clear_timer, on_clear_timer, after, 0);
}

void kube_touch_flush(struct kube_conv *c, int now)
{
	if (!c->clear_due_ms || c->running || (!now && uv_now(c->k->loop) < c->clear_due_ms))
		return;
	c->clear_due_ms = 0;
	if (!c->pod || !c->busy_marked)
		return;
	c->busy_marked = 0;
	c->touched_ms = uv_now(c->k->loop);
	char ts[32];
	rfc3339_at(c->ended_at, ts);
	json_t *patch = json_pack("{s:{s:{s:s,s:n}}}", "metadata", "annotations",
	                          K8S_ANNOT_LAST_USED, ts, K8S_ANNOT_IN_USE_UNTIL);
	patch_annotations(c, patch);
}

static void patch_annotations(struct kube_conv *c, json_t *patch)
{
	struct k8s_rest_cb cb = { on_touched, c->k };
	if (patch && k8s_pod_patch(c->k->api, c->k->ns, c->pod, patch, NULL, NULL, cb, NULL, NULL) == 0)
		c->k->pending++;
	json_decref(patch);
}

/* ---- snapshots (kube_snap.h) ---- */

int kube_conv_adopt(struct kube_conv *c, const char *pod)
{
	char *p = strdup(pod);
	if (c->state != KUBE_CONV_IDLE || !p) {
		free(p);
		return -1;
	}
	conv_set_state(c, KUBE_CONV_ACQUIRING);
	free(c->pod);
	c->pod = p;
	c->busy_marked = 0;
	conv_set_state(c, KUBE_CONV_READY);
	return 0;
}

void kube_restored(struct kube_conv *c, const char *uid, int rc, const char *detail, int64_t ms)
{
	if (!c->restoring || strcmp(uid, c->restore_uid) != 0)
		return; /* the pod went meanwhile: its waiters moved on */
	c->restoring = 0;
	c->restore_uid[0] = '\0';
	if (rc) {
		/* Never an empty workspace: the waiters end naming why, and the
		 * pod (perhaps half written) goes; the next acquisition restores
		 * into a new one. */
		json_t *pod = json_pack("{s:{s:s,s:s}}", "metadata", "name", c->pod ? c->pod : c->name,
		                        "uid", uid);
		if (pod)
			delete_pod(c->k, pod, 0);
		json_decref(pod);
		struct codepod_proc *w = c->waiters;
		c->waiters = NULL;
		kube_gate_fail(c, detail ? detail : "restoring the workspace failed");
		kube_conv_stale(c);
		while (w) {
			struct codepod_proc *next = w->next_wait;
			w->next_wait = NULL;
			kube_proc_unavailable(w, detail ? detail : "restoring the workspace failed");
			w = next;
		}
		return;
	}
	c->restore_ms = ms;
	json_t *patch = json_pack("{s:{s:{s:n}}}", "metadata", "annotations", KUBE_ANNOT_RESTORE);
	patch_annotations(c, patch);
	/* The first execution (the list's last) says how long it took: one
	 * whose runner started beside the restore, else one still waiting. */
	struct codepod_proc *first = c->gated ? NULL : c->waiters;
	kube_gate_open(c, ms);
	while (first && first->next_wait)
		first = first->next_wait;
	if (first && ms >= 0) {
		first->restored = 1;
		first->restore_ms = (uint64_t)ms;
		c->restore_ms = -1;
	}
	struct codepod_proc *w = c->waiters;
	c->waiters = NULL;
	while (w) {
		struct codepod_proc *next = w->next_wait;
		w->next_wait = NULL;
		kube_proc_pod_ready(w);
		w = next;
	}
}
