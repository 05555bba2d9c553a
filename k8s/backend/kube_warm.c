/*
 * kube_warm.c - warm pods come with their supervisor up and one runner
 * already started. When a warm pod this replica created is Ready,
 * its supervisor is started and asked for one standby runner (Node booted,
 * runner.js loaded, waiting for its hello). A conversation that claims the
 * pod inherits both: its first execution takes the standby runner when it
 * asks for the same runner (the engine's default runner, told through
 * codepod_backend_ops.default_runner: the same memory_mb), so the first
 * execution pays neither an exec nor a Node start. Nothing has run in a warm
 * pod, so its standby runner is as fresh as one started on demand; one that
 * wrote anything, or is not the runner asked for, is killed and not used.
 *
 * Interface in kube_int.h (kube_warm_*).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k8s/backend/kube_int.h"
#include "base/log.h"

/* While a warm pod of ours is not Ready yet, look again this often. */
#define WARM_POLL_MS 250

/* The standby runner on a supervisor channel, until an execution takes it. */
struct kube_standby {
	struct kube_super *sup;
	uint32_t chan;
	int exited;
	unsigned long memory_mb;       /* of the runner it is */
	uint64_t ws_bytes, ws_files;   /* its workspace bounds */
	struct kube_warm_pod *w;       /* while the pod is warm */
	struct kube_conv *c;       /* once claimed */
};

struct kube_warm_pod {
	struct kube_warm_pod *next;
	struct kube *k;
	char *pod;
	struct kube_super *super;  /* NULL until the pod is Ready */
	struct kube_standby *sb;
};

static void sb_drop(struct kube_standby *sb)
{
	if (sb->w)
		sb->w->sb = NULL;
	if (sb->c && sb->c->standby == sb)
		sb->c->standby = NULL;
	sb->w = NULL;
	sb->c = NULL;
}

static void sb_out(void *ud, const char *buf, size_t len)
{
	(void)buf;
	(void)len;
	struct kube_standby *sb = ud;
	/* A waiting runner says nothing: this one is not pristine. */
	if (!sb->exited)
		kube_super_kill(sb->sup, sb->chan, NULL);
	sb_drop(sb);
}

static void sb_exited(void *ud, const struct codepod_proc_exit *ex)
{
	(void)ex;
	struct kube_standby *sb = ud;
	sb_drop(sb);
	free(sb);
}

static const struct codepod_proc_cbs sb_cbs = { sb_out, sb_out, sb_exited, NULL, NULL };

static void warm_free(struct kube_warm_pod *w)
{
	struct kube *k = w->k;
	for (struct kube_warm_pod **pp = &k->warm; *pp; pp = &(*pp)->next) {
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	}
	free(w->pod);
	free(w);
}

static void on_warm_super_ready(void *ud, struct kube_super *s)
{
	struct kube_warm_pod *w = ud;
	struct kube *k = w->k;
	if (!k->runner_argv)
		return; /* the engine told no runner: none ahead of time */
	struct kube_standby *sb = calloc(1, sizeof *sb);
	if (!sb)
		return;
	struct cp_err err;
	sb->sup = s;
	sb->w = w;
	sb->memory_mb = k->runner_mb;
	sb->ws_bytes = k->runner_ws_bytes;
	sb->ws_files = k->runner_ws_files;
	if (kube_super_open(s, (const char *const *)k->runner_argv, NULL, sb->ws_bytes, sb->ws_files,
	                    &sb_cbs, sb, &sb->chan, &err)) {
		free(sb);
	} else {
		w->sb = sb;
		if (k->runner_input_len &&
		    kube_super_write(s, sb->chan, k->runner_input, k->runner_input_len, &err))
			kube_super_kill(s, sb->chan, NULL);
		cp_log(CP_LOG_DEBUG, "kube.warm_standby", "pod", json_string(w->pod), NULL);
	}
}

static void on_warm_super_gone(void *ud, struct kube_super *s, const char *detail)
{
	(void)s;
	(void)detail;
	struct kube_warm_pod *w = ud;
	struct kube *k = w->k;
	k->pending--;
	warm_free(w);
	kube_maybe_free(k);
}

static const struct kube_super_cbs warm_super_cbs = { on_warm_super_ready, on_warm_super_gone };

void kube_warm_created(struct kube *k, const char *pod)
{
	if (!k->supervise)
		return;
	struct kube_warm_pod *w = calloc(1, sizeof *w);
	if (!w || !(w->pod = strdup(pod))) {
		free(w);
		return;
	}
	w->k = k;
	w->next = k->warm;
	k->warm = w;
	if (!uv_is_active((uv_handle_t *)&k->warm_timer))
		uv_timer_start(&k->warm_timer, kube_warm_poll, WARM_POLL_MS, 0);
}

static struct kube_warm_pod *find(struct kube *k, const char *pod)
{
	for (struct kube_warm_pod *w = k->warm; w; w = w->next)
		if (strcmp(w->pod, pod) == 0)
			return w;
	return NULL;
}

void kube_warm_listed(struct kube *k, const json_t *items)
{
	int waiting = 0;
	size_t i;
	json_t *pod;
	json_array_foreach(items, i, pod) {
		const char *name = json_string_value(json_object_get(json_object_get(pod, "metadata"), "name"));
		struct kube_warm_pod *w = name ? find(k, name) : NULL;
		if (!w || w->super)
			continue;
		struct k8s_pod_state s;
		k8s_pod_classify(pod, &s);
		if (s.verdict == K8S_POD_WAITING) {
			waiting = 1;
		} else if (s.verdict == K8S_POD_READY) {
			struct cp_err err;
			if (kube_super_new(k->execs, k->ns, name, K8S_CONTAINER, k->pod_helper, &warm_super_cbs, w, &w->super,
			               &err) == 0) {
				k->pending++;
				k->stats.supervisors_started++;
			} else {
				w->super = NULL;
			}
		}
	}
	/* Ours that went away before they were Ready are forgotten. */
	for (struct kube_warm_pod *w = k->warm, *next; w; w = next) {
		next = w->next;
		int seen = 0;
		json_array_foreach(items, i, pod) {
			const char *name = json_string_value(json_object_get(json_object_get(pod, "metadata"), "name"));
			if (name && strcmp(name, w->pod) == 0)
				seen = 1;
		}
		if (seen)
			continue;
		if (!w->super)
			warm_free(w);
		else
			kube_super_close(w->super); /* claimed by another replica, or deleted */
	}
	if (waiting && !k->closing)
		uv_timer_start(&k->warm_timer, kube_warm_poll, WARM_POLL_MS, 0);
}

int kube_warm_is_up(struct kube *k, const char *pod)
{
	struct kube_warm_pod *w = find(k, pod);
	return w && w->super && kube_super_is_ready(w->super) && w->sb;
}

void kube_warm_claimed(struct kube_conv *c, const char *pod)
{
	struct kube_warm_pod *w = find(c->k, pod);
	if (!w || !w->super)
		return;
	if (c->super) { /* cannot happen for a fresh conversation; keep ours */
		kube_super_close(w->super);
		return;
	}
	c->super = w->super;
	kube_super_set_owner(w->super, kube_supervisor_cbs(), c);
	if (w->sb) {
		c->standby = w->sb;
		w->sb->c = c;
		w->sb->w = NULL;
	}
	/* The stream's accounting moves with it (pending stays counted once). */
	warm_free(w);
	cp_log(CP_LOG_DEBUG, "kube.warm_inherited", "pod", json_string(pod),
	       "standby", json_boolean(c->standby != NULL), NULL);
}

int kube_warm_take(struct codepod_proc *p)
{
	struct kube_conv *c = p->conv;
	struct kube_standby *sb = c->standby;
	if (!sb || sb->exited || sb->sup != c->super || p->standby)
		return 0;
	c->standby = NULL;
	sb->c = NULL;
	/* The same runner (sandbox.h: the same memory_mb and workspace bounds,
	 * which the supervisor holds it to); the standby has had
	 * its input already, what was written after that goes on to it. */
	size_t pre = p->input_len;
	int same = p->memory_mb == sb->memory_mb && p->ws_bytes == sb->ws_bytes &&
	           p->ws_files == sb->ws_files && cp_buf_len(&p->sent) >= pre;
	if (!same) {
		kube_super_kill(sb->sup, sb->chan, NULL);
		return 0;
	}
	uint32_t chan = sb->chan;
	kube_super_rebind(c->super, chan, kube_chan_cbs(), p);
	free(sb); /* its callbacks are p's now */
	p->sup = c->super;
	p->chan = chan;
	struct cp_err err;
	const char *sent = cp_buf_ptr(&p->sent);
	size_t sent_len = cp_buf_len(&p->sent);
	if (sent_len > pre && kube_super_write(p->sup, chan, sent + pre, sent_len - pre, &err))
		return -1;
	cp_log(CP_LOG_DEBUG, "kube.standby_taken", "id", json_string(p->exec_id), NULL);
	return 1;
}

void kube_warm_stop(struct kube *k)
{
	uv_timer_stop(&k->warm_timer);
	for (struct kube_warm_pod *w = k->warm, *next; w; w = next) {
		next = w->next;
		if (w->super)
			kube_super_close(w->super); /* gone() frees it */
		else
			warm_free(w);
	}
}
