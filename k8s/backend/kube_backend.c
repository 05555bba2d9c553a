/*
 * kube_backend.c - process handles of the Kubernetes backend: wait for the
 * conversation's pod, run `node` in it over the exec WebSocket, and kill
 * what it started through a second exec when the execution ends.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runner/codepod.h"
#include "k8s/backend/kube_int.h"
#include "k8s/backend/kube_snap.h"
#include "base/assert.h"
#include "base/log.h"
#include "base/state.h"

/* How long the killer exec and then the stream may take before the stream
 * is dropped and the execution reported anyway. */
#define KILL_GRACE_MS 5000

/* The killer: a second exec, since closing the stream does not end the
 * process. It runs the supervisor's kill scan as a program of its own
 * (k8s/backend/killer.js around k8s/backend/kill_scan.js, which says what
 * it takes), started like a runner: boot.js on the command line, the
 * program on stdin. */

static void start_exec(struct codepod_proc *p);
static void kube_kill(struct codepod_proc *p);
static int start_killer(struct codepod_proc *p);

static const char *const proc_state_names[] = {
	[KUBE_PROC_WAIT_POD] = "wait_pod", [KUBE_PROC_WAIT_CREDS] = "wait_creds",
	[KUBE_PROC_WAIT_SUPER] = "wait_super", [KUBE_PROC_EXEC] = "exec",
	[KUBE_PROC_DONE] = "done",
};

/* legal[from][to]: the transitions of kube_int.h. */
#define N_PROC_STATES (KUBE_PROC_DONE + 1)
static const unsigned char proc_legal[N_PROC_STATES][N_PROC_STATES] = {
	[KUBE_PROC_WAIT_POD] = { [KUBE_PROC_WAIT_CREDS] = 1, [KUBE_PROC_DONE] = 1 },
	[KUBE_PROC_WAIT_CREDS] = { [KUBE_PROC_WAIT_POD] = 1, [KUBE_PROC_WAIT_SUPER] = 1,
	                           [KUBE_PROC_EXEC] = 1, [KUBE_PROC_DONE] = 1 },
	[KUBE_PROC_WAIT_SUPER] = { [KUBE_PROC_WAIT_POD] = 1, [KUBE_PROC_WAIT_CREDS] = 1,
	                           [KUBE_PROC_EXEC] = 1, [KUBE_PROC_DONE] = 1 },
	[KUBE_PROC_EXEC] = { [KUBE_PROC_WAIT_POD] = 1, [KUBE_PROC_WAIT_CREDS] = 1,
	                     [KUBE_PROC_DONE] = 1 },
	[KUBE_PROC_DONE] = { 0 },
};

/* A new handle is calloc'ed: it starts waiting for the pod. */
_Static_assert(KUBE_PROC_WAIT_POD == 0, "a new handle is KUBE_PROC_WAIT_POD");

static const struct cp_state_machine proc_machine = {
	"kube.proc_state", "id", proc_state_names, &proc_legal[0][0], N_PROC_STATES,
};

/* The one place p->state changes. */
/* Off its conversation's gated list (kube_gate_start). */
static void gate_drop(struct codepod_proc *p)
{
	if (!p->gated)
		return;
	p->gated = 0;
	p->gate_held = 0;
	for (struct codepod_proc **pp = &p->conv->gated; *pp; pp = &(*pp)->gate_next) {
		if (*pp == p) {
			*pp = p->gate_next;
			break;
		}
	}
	p->gate_next = NULL;
}

static void proc_set_state(struct codepod_proc *p, enum kube_proc_state to)
{
	cp_state_change(&proc_machine, p->exec_id, -1, (unsigned)p->state, (unsigned)to);
	p->state = to;
	/* Back to waiting for a pod (the next one restores anew), or ended. */
	if (to == KUBE_PROC_WAIT_POD || to == KUBE_PROC_DONE)
		gate_drop(p);
}

static void proc_free(struct codepod_proc *p)
{
	struct kube *k = p->k;
	for (size_t i = 0; p->argv && p->argv[i]; i++)
		free(p->argv[i]);
	free(p->argv);
	free(p->exec_id);
	cp_buf_free(&p->sent);
	free(p->oom_pod);
	free(p);
	k->procs--;
	kube_snap_poke(k); /* a drain of snapshots waits for the executions' ends */
	kube_maybe_free(k);
}

static void on_timer_closed(uv_handle_t *h)
{
	proc_free(h->data);
}

/* Freed once the exit went out and the killer is done. */
static void maybe_release(struct codepod_proc *p)
{
	if (p->state == KUBE_PROC_DONE && !p->killer && !p->ex && !p->sup &&
	    !uv_is_closing((uv_handle_t *)&p->timer))
		uv_close((uv_handle_t *)&p->timer, on_timer_closed);
}

void kube_proc_report(struct codepod_proc *p)
{
	if (p->state == KUBE_PROC_DONE)
		return;
	proc_set_state(p, KUBE_PROC_DONE);
	uv_timer_stop(&p->timer);
	if (p->gate_why[0]) { /* its pod's restore failed: never a lost or killed runner */
		memset(&p->exit, 0, sizeof p->exit);
		p->exit.unavailable = 1;
		p->exit.code = -1;
		snprintf(p->exit.detail, sizeof p->exit.detail, "%s", p->gate_why);
	}
	if (p->restored) { /* the first after a restore (kube_snap.h) */
		p->exit.usage.restored = 1;
		p->exit.usage.restore_ms = p->restore_ms;
	}
	p->cbs->exited(p->ud, &p->exit);
	maybe_release(p);
}

static void on_report_timer(uv_timer_t *t)
{
	kube_proc_report(t->data);
}

/* Reports from the loop, never from inside the engine's own call. */
static void report_soon(struct codepod_proc *p)
{
	uv_timer_stop(&p->timer);
	uv_timer_start(&p->timer, on_report_timer, 0, 0);
}

void kube_proc_unavailable(struct codepod_proc *p, const char *detail)
{
	p->exit.unavailable = 1;
	p->exit.code = -1;
	snprintf(p->exit.detail, sizeof p->exit.detail, "%s", detail);
	report_soon(p);
}

/* ---- the exec stream ---- */

static void on_out(void *ud, const char *buf, size_t len)
{
	struct codepod_proc *p = ud;
	p->got_output = 1;
	if (!p->gated) /* (a held input is still to go) */
		cp_buf_free(&p->sent);
	if (p->state != KUBE_PROC_DONE)
		p->cbs->out(p->ud, buf, len);
}

static void on_err(void *ud, const char *buf, size_t len)
{
	struct codepod_proc *p = ud;
	p->got_output = 1;
	if (p->state != KUBE_PROC_DONE)
		p->cbs->err(p->ud, buf, len);
}

/* The pod vanished under a cached conversation before anything ran: find or
 * make a pod again and replay what was written (once). */
static int again(struct codepod_proc *p)
{
	/* (a snapshot's own operation reads or writes this pod or none) */
	if (p->killed || p->got_output || p->retried || p->maint)
		return 0;
	p->retried = 1;
	kube_conv_stale(p->conv);
	proc_set_state(p, KUBE_PROC_WAIT_POD);
	p->next_wait = p->conv->waiters;
	p->conv->waiters = p;
	kube_conv_want(p->conv);
	return 1;
}

static int try_again(struct codepod_proc *p, const struct k8s_exec_exit *x)
{
	return x->ex.unavailable && again(p);
}

static void on_exited(void *ud, const struct k8s_exec_exit *x)
{
	struct codepod_proc *p = ud;
	p->ex = NULL;
	if (p->counted)
		kube_snap_changed(p->conv); /* the workspace may have changed */
	if (p->counted && p->conv->running > 0 && --p->conv->running == 0)
		kube_touch_done(p->conv);
	p->counted = 0;
	if (x->ex.unavailable || x->ex.lost)
		kube_conv_stale(p->conv); /* check the pod again next time */
	if (try_again(p, x))
		return;
	memset(&p->exit, 0, sizeof p->exit);
	p->exit.code = x->ex.code;
	p->exit.unavailable = x->ex.unavailable;
	p->exit.lost = x->ex.lost;
	snprintf(p->exit.detail, sizeof p->exit.detail, "%s", x->ex.detail);
	/* Kubernetes reports death by signal N as exit status 128 + N. */
	if (!p->exit.signal && p->exit.code > 128 && p->exit.code <= 128 + 64) {
		p->exit.signal = p->exit.code - 128;
		p->exit.code = -1;
	}
	if (p->killed && p->exit.lost)
		p->exit.lost = 0; /* we ended it: not an unknown fate */
	/* A SIGKILL we did not send is most often the cgroup's OOM killer:
	 * the pod's container status says so (kube_oom.c reports). */
	if (p->exit.signal == 9 && !p->killed && !p->exit.lost && kube_oom_check(p) == 0)
		return;
	kube_proc_report(p);
}

static const struct k8s_exec_cbs exec_cbs = { on_out, on_err, NULL, on_exited };

/* The pod is in use while an execution runs in it (standby runners aside). */
static void count_running(struct codepod_proc *p)
{
	if (p->maint)
		return; /* a snapshot's read or a restore's write: not a use */
	if (p->restored && p->cbs->usage) { /* said now: the outcome may come before the exit */
		struct codepod_usage u;
		memset(&u, 0, sizeof u);
		u.restored = 1;
		u.restore_ms = p->restore_ms;
		p->cbs->usage(p->ud, &u);
	}
	p->counted = 1;
	p->conv->running++;
	kube_touch(p->conv);
}

/* ---- through the pod's supervisor (kube_super.h) ---- */

static void chan_exited(void *ud, const struct codepod_proc_exit *ex);

/* The supervisor has sent SIGKILL to everything of the execution and
 * forwarded its stderr up to then (D): the engine may deliver. */
static void chan_killed(void *ud, const struct codepod_usage *u)
{
	struct codepod_proc *p = ud;
	if (p->killed && p->state != KUBE_PROC_DONE && p->cbs->killed)
		p->cbs->killed(p->ud, u);
}

/* The supervisor's reading of the runner's processes (kube_super_sample). */
static void chan_usage(void *ud, const struct codepod_usage *u)
{
	struct codepod_proc *p = ud;
	if (p->state != KUBE_PROC_DONE && !p->standby && p->cbs->usage)
		p->cbs->usage(p->ud, u);
}

static const struct codepod_proc_cbs chan_cbs = { on_out, on_err, chan_exited, chan_killed,
	                                          chan_usage };

static void start_direct(struct codepod_proc *p);

/* Wait for the supervisor to come up, in the order the executions came. */
static void wait_super(struct codepod_proc *p)
{
	proc_set_state(p, KUBE_PROC_WAIT_SUPER);
	p->next_wait = NULL;
	struct codepod_proc **pp = &p->conv->super_waiters;
	while (*pp)
		pp = &(*pp)->next_wait;
	*pp = p;
}

static struct codepod_proc *take_super_waiters(struct kube_conv *c)
{
	struct codepod_proc *w = c->super_waiters;
	c->super_waiters = NULL;
	return w;
}

/* The supervisor failed in this pod: one exec per script from now on, said
 * in the log and the metrics; the executions waiting for it go direct.
 * Under the pod helper a direct exec would run a runner without it (no
 * filter, no subreaper, no Landlock domain): the executions waiting fail
 * instead, and the next one starts another supervisor. */
static void super_fallback(struct kube_conv *c, const char *why, int never_up)
{
	if (c->k->pod_helper) {
		cp_log(CP_LOG_WARN, "kube.supervisor_lost", "pod", json_string(c->pod),
		       "detail", json_string(why), "message",
		       json_string("no runner starts without the pod helper: the next execution "
		                   "starts another supervisor"), NULL);
		char detail[CP_ERR_MSG_MAX];
		snprintf(detail, sizeof detail, "the pod's supervisor failed: %s", why);
		/* One that died at work: the pod may be gone, look again, once per
		 * execution. One that never came up (its exec refused, as an
		 * execution's own would be): the executions waiting end with why.
		 * The waiters are taken first: making the conversation stale would
		 * send them all back to wait for a pod, past the once per
		 * execution, and a supervisor that fails at once (an API server
		 * answering with a framing codepod does not speak) would be started
		 * again and again until the startup allowance ran out. */
		struct codepod_proc *waiting = take_super_waiters(c);
		if (!never_up)
			kube_conv_stale(c);
		for (struct codepod_proc *w = waiting, *next; w; w = next) {
			next = w->next_wait;
			if (never_up || !again(w))
				kube_proc_unavailable(w, detail);
		}
		return;
	}
	if (!c->super_off) {
		c->super_off = 1;
		c->k->stats.supervisor_fallbacks++;
		cp_log(CP_LOG_WARN, "kube.supervisor_fallback", "pod", json_string(c->pod),
		       "detail", json_string(why), "message",
		       json_string("one exec per script in this pod from now on"), NULL);
	}
	for (struct codepod_proc *w = take_super_waiters(c), *next; w; w = next) {
		next = w->next_wait;
		start_exec(w);
	}
}

/* How much of what was written goes to a stream opening now: all of it,
 * or while gated the runner's own source only (the rest held). */
static size_t gate_cut(struct codepod_proc *p)
{
	size_t n = cp_buf_len(&p->sent);
	if (p->gated) {
		if (n > p->input_len)
			n = p->input_len;
		p->gate_held = n; /* written: kube_gate_open sends from there */
	}
	return n;
}

static void super_open(struct codepod_proc *p)
{
	struct kube_conv *c = p->conv;
	struct cp_err err;
	/* (an inherited standby runner has had its input: not while gated) */
	int took = p->gated ? 0 : kube_warm_take(p);
	if (took) {
		proc_set_state(p, KUBE_PROC_EXEC);
		if (!p->standby)
			count_running(p);
		if (took < 0)
			kube_kill(p);
		return;
	}
	if (kube_super_open(c->super, (const char *const *)p->argv, p->tag, p->ws_bytes,
	                    p->ws_files, &chan_cbs, p, &p->chan, &err)) {
		super_fallback(c, err.msg, 0);
		if (p->k->pod_helper) {
			if (!again(p))
				kube_proc_unavailable(p, err.msg);
		}
		else
			start_direct(p);
		return;
	}
	p->sup = c->super;
	proc_set_state(p, KUBE_PROC_EXEC);
	if (!p->standby && !p->gated)
		count_running(p);
	size_t n = gate_cut(p);
	if (n) {
		if (!p->gated) /* (the runner's own source runs no program) */
			p->fed = 1;
		if (kube_super_write(p->sup, p->chan, cp_buf_ptr(&p->sent), n, &err))
			kube_kill(p);
	}
	cp_log(CP_LOG_DEBUG, "kube.exec", "id", json_string(p->exec_id), "pod", json_string(c->pod),
	       "channel", json_integer(p->chan), NULL);
}

static void on_super_ready(void *ud, struct kube_super *s)
{
	struct kube_conv *c = ud;
	if (c->super != s)
		return;
	for (struct codepod_proc *w = take_super_waiters(c), *next; w; w = next) {
		next = w->next_wait;
		super_open(w);
	}
}

static void on_super_gone(void *ud, struct kube_super *s, const char *detail)
{
	struct kube_conv *c = ud;
	struct kube *k = c->k;
	k->pending--;
	if (c->super == s) { /* not dropped by us: it died, or never came up */
		c->super = NULL;
		if (kube_super_was_ready(s) && !c->super_lost_work) {
			/* An idle stream that went (an idle timeout on the way): the
			 * next execution starts another supervisor. */
			cp_log(CP_LOG_INFO, "kube.supervisor_idle_loss", "pod", json_string(c->pod),
			       "detail", json_string(detail), NULL);
			for (struct codepod_proc *w = take_super_waiters(c), *next; w; w = next) {
				next = w->next_wait;
				start_exec(w);
			}
		} else {
			/* Refused (403: RBAC) before it ever came up: so would the
			 * executions' own execs be. Anything else (a 404: the pod
			 * went) sends them to look for the pod again. */
			super_fallback(c, detail, !kube_super_was_ready(s) && detail &&
			                                  strstr(detail, "HTTP 403") != NULL);
		}
	}
	c->super_lost_work = 0;
	kube_maybe_free(k);
}

static const struct kube_super_cbs super_cbs = { on_super_ready, on_super_gone };

const struct kube_super_cbs *kube_supervisor_cbs(void)
{
	return &super_cbs;
}

const struct codepod_proc_cbs *kube_chan_cbs(void)
{
	return &chan_cbs;
}

void kube_supervisor_drop(struct kube_conv *c)
{
	struct kube_super *s = c->super;
	c->super = NULL;
	c->super_off = 0; /* a new pod gets a new chance */
	if (s)
		kube_super_close(s);
	/* Those waiting for it wait for the conversation's next pod instead. */
	struct codepod_proc *w = take_super_waiters(c);
	for (struct codepod_proc *next; w; w = next) {
		next = w->next_wait;
		if (w->maint) { /* never an acquisition of its own */
			proc_set_state(w, KUBE_PROC_WAIT_POD);
			kube_proc_unavailable(w, "the pod went");
			continue;
		}
		proc_set_state(w, KUBE_PROC_WAIT_POD);
		w->next_wait = c->waiters;
		c->waiters = w;
	}
	if (c->waiters && !c->k->closing)
		kube_conv_want(c);
}

/* A channel's process exited, or the stream under it went. */
static void chan_exited(void *ud, const struct codepod_proc_exit *ex)
{
	struct codepod_proc *p = ud;
	/* still the conversation's pod (not one that replaced it meanwhile) */
	int same_pod = p->sup && p->conv->pod && strcmp(p->conv->pod, kube_super_pod(p->sup)) == 0;
	p->sup = NULL;
	if (p->counted)
		kube_snap_changed(p->conv); /* the workspace may have changed */
	if (p->counted && p->conv->running > 0 && --p->conv->running == 0)
		kube_touch_done(p->conv);
	p->counted = 0;
	if (ex->lost && !p->killed && !p->standby)
		p->conv->super_lost_work = 1;
	if (ex->lost && !p->killed && !p->fed && !p->retried && !p->standby && !p->maint) {
		/* The supervisor went before the runner was given anything: nothing
		 * of the program ran; start it over: on a direct exec (the
		 * supervisor failed here), or in the conversation's next pod. Once
		 * its program went in, it may have run (and killed the supervisor)
		 * before a byte of its output came back: never run it twice. */
		p->retried = 1;
		if (same_pod) {
			start_exec(p);
		} else {
			proc_set_state(p, KUBE_PROC_WAIT_POD);
			p->next_wait = p->conv->waiters;
			p->conv->waiters = p;
			kube_conv_want(p->conv);
		}
		return;
	}
	p->exit = *ex;
	if (p->killed && p->exit.lost)
		p->exit.lost = 0; /* we ended it: not an unknown fate */
	if (p->killed)
		p->exit.oom = 0; /* we ended it, whatever else the pod saw */
	/* The supervisor is gone and cannot kill what the program left behind:
	 * a killer exec does, as without a supervisor. */
	if (ex->lost && same_pod && !p->killer)
		start_killer(p);
	/* A SIGKILL we did not send, or the whole container gone under the
	 * supervisor, is most often the cgroup's OOM killer: the pod's
	 * container status says so (kube_oom.c reports). */
	if (same_pod && !p->killed && !p->exit.disk_full && (p->exit.signal == 9 || p->exit.lost) &&
	    kube_oom_check(p) == 0)
		return;
	kube_proc_report(p);
}

/* An execution runs through the pod's supervisor, started by the first that
 * needs it. The snapshot coordinator's own file operations do not wait for
 * it to come up: a restore's archive_write would otherwise start only once
 * the supervisor and then its runner are up, and the pod's first execution
 * would wait for the whole write after that. On a direct exec it starts with
 * the supervisor, and the write overlaps the first execution's runner
 * starting. Such a runner has no pod helper, which is for programs: it runs
 * none, only the runner's own code on a tar codepod packed from a checked
 * folder (a restore), or reading the workspace (a snapshot). */
static void start_exec_now(struct codepod_proc *p)
{
	struct kube_conv *c = p->conv;
	if (p->k->supervise && !c->super_off) {
		if (!c->super) {
			struct cp_err err;
			if (kube_super_new(p->k->execs, p->k->ns, c->pod, K8S_CONTAINER, p->k->pod_helper, &super_cbs, c,
			               &c->super, &err)) {
				c->super = NULL;
				super_fallback(c, err.msg, 1);
				if (p->k->pod_helper && !p->maint) { /* never a program without it */
					kube_proc_unavailable(p, err.msg);
					return;
				}
			} else {
				p->k->pending++;
				p->k->stats.supervisors_started++;
			}
		}
		if (c->super) {
			if (kube_super_is_ready(c->super))
				super_open(p);
			else if (p->maint)
				start_direct(p);
			else
				wait_super(p);
			return;
		}
	}
	start_direct(p);
}

/* One exec for this runner. */
static void start_direct(struct codepod_proc *p)
{
	struct kube_conv *c = p->conv;
	struct cp_err err;
	if (k8s_exec_start(p->k->execs, p->k->ns, c->pod, K8S_CONTAINER,
	                   (const char *const *)p->argv, &exec_cbs, p, &p->ex, &err)) {
		kube_proc_unavailable(p, err.msg);
		return;
	}
	proc_set_state(p, KUBE_PROC_EXEC);
	p->exec_wall = time(NULL);
	if (!p->standby && !p->gated)
		count_running(p);
	size_t n = gate_cut(p);
	if (n && k8s_exec_write(p->ex, cp_buf_ptr(&p->sent), n, &err) < 0) {
		k8s_exec_abort(p->ex);
		return;
	}
	cp_log(CP_LOG_DEBUG, "kube.exec", "id", json_string(p->exec_id), "pod", json_string(c->pod), NULL);
}

static void on_creds(void *arg, const struct k8s_cred *cred, const struct cp_err *err)
{
	struct codepod_proc *p = arg;
	if (err) {
		if (p->killed)
			report_soon(p);
		else
			kube_proc_unavailable(p, err->msg);
		return;
	}
	if (p->killed) {
		report_soon(p);
		return;
	}
	if (cred->token)
		k8s_exec_client_set_token(p->k->execs, cred->token, NULL);
	start_exec_now(p);
}

/* Exec needs the current token (rotated files, exec plugins). */
static void start_exec(struct codepod_proc *p)
{
	struct k8s_cred now;
	struct cp_err err;
	proc_set_state(p, KUBE_PROC_WAIT_CREDS);
	int rc = k8s_creds_get(k8s_client_creds(p->k->api), &p->cw, on_creds, p, &now, &err);
	if (rc < 0)
		kube_proc_unavailable(p, err.msg);
	else if (rc == 1)
		on_creds(p, &now, NULL);
}

void kube_proc_pod_ready(struct codepod_proc *p)
{
	if (p->killed) {
		report_soon(p);
		return;
	}
	start_exec(p);
}

/* ---- runners started during their pod's restore ---- */

void kube_gate_start(struct kube_conv *c)
{
	struct codepod_proc *w = c->waiters;
	c->waiters = NULL;
	if (!w)
		return;
	/* The list keeps its order (the first execution last), before any
	 * already gated. */
	struct codepod_proc *last = w;
	for (struct codepod_proc *p = w; p; p = p->next_wait) {
		p->gated = 1;
		p->gate_next = p->next_wait;
		last = p;
	}
	last->gate_next = c->gated;
	c->gated = w;
	for (struct codepod_proc *p = w, *next; p; p = next) {
		next = p->next_wait;
		p->next_wait = NULL;
		/* (one that went back to waiting for a pod meanwhile is the
		 * next acquisition's) */
		if (p->gated && p->state == KUBE_PROC_WAIT_POD)
			kube_proc_pod_ready(p);
	}
}

void kube_gate_open(struct kube_conv *c, int64_t ms)
{
	struct codepod_proc *g = c->gated;
	c->gated = NULL;
	if (g && ms >= 0) {
		struct codepod_proc *first = g;
		while (first->gate_next)
			first = first->gate_next;
		first->restored = 1;
		first->restore_ms = (uint64_t)ms;
		c->restore_ms = -1;
	}
	for (struct codepod_proc *p = g, *next; p; p = next) {
		next = p->gate_next;
		p->gate_next = NULL;
		p->gated = 0;
		if (p->state != KUBE_PROC_EXEC || (!p->sup && !p->ex))
			continue; /* it writes its input once it starts, as ever */
		if (!p->standby && !p->counted)
			count_running(p);
		struct cp_err err;
		size_t from = p->gate_held;
		p->gate_held = 0;
		if (cp_buf_len(&p->sent) <= from)
			continue;
		const char *rest = cp_buf_ptr(&p->sent) + from;
		size_t n = cp_buf_len(&p->sent) - from;
		if (p->sup) {
			p->fed = 1;
			if (kube_super_write(p->sup, p->chan, rest, n, &err))
				kube_kill(p);
		} else if (k8s_exec_write(p->ex, rest, n, &err) < 0) {
			k8s_exec_abort(p->ex);
		}
		if (p->got_output)
			cp_buf_free(&p->sent);
	}
}

void kube_gate_fail(struct kube_conv *c, const char *why)
{
	struct codepod_proc *g = c->gated;
	c->gated = NULL;
	for (struct codepod_proc *p = g, *next; p; p = next) {
		next = p->gate_next;
		p->gate_next = NULL;
		p->gated = 0;
		snprintf(p->gate_why, sizeof p->gate_why, "%s", why && why[0] ? why : "restoring the workspace failed");
		p->retried = 1; /* never started over in another pod */
		if (p->state == KUBE_PROC_EXEC && p->ex)
			k8s_exec_abort(p->ex); /* its exit reports */
		else if (p->state != KUBE_PROC_EXEC)
			kube_kill(p);
		/* else on the supervisor, which kube_conv_stale ends (its exit reports) */
	}
}

/* ---- kill ---- */

static void on_killer_out(void *ud, const char *buf, size_t len)
{
	(void)ud;
	(void)buf;
	(void)len;
}

static void on_kill_grace(uv_timer_t *t)
{
	struct codepod_proc *p = t->data;
	if (p->ex)
		k8s_exec_abort(p->ex);
	if (p->sup) {
		/* The supervisor never said the channel ended: give up on it. */
		kube_super_detach(p->sup, p->chan);
		struct codepod_proc_exit ex;
		memset(&ex, 0, sizeof ex);
		ex.code = -1;
		ex.signal = 9;
		chan_exited(p, &ex);
	}
}

static void on_killer_exited(void *ud, const struct k8s_exec_exit *x)
{
	struct codepod_proc *p = ud;
	p->killer = NULL;
	if (x->ex.code != 0)
		cp_log(CP_LOG_WARN, "kube.kill_failed", "id", json_string(p->exec_id),
		       "detail", json_string(x->ex.detail), NULL);
	/* The runner is dead; give the stream a moment to carry its Status. */
	if (p->ex && p->state != KUBE_PROC_DONE) {
		uv_timer_stop(&p->timer);
		uv_timer_start(&p->timer, on_kill_grace, 1000, 0);
	}
	maybe_release(p);
}

static const struct k8s_exec_cbs killer_cbs = { on_killer_out, on_killer_out, NULL, on_killer_exited };

/* The killer exec for @p's processes; 0 when it started. */
static int start_killer(struct codepod_proc *p)
{
	char pid[24], start[24];
	snprintf(pid, sizeof pid, "%ld", p->pid);
	snprintf(start, sizeof start, "%llu", p->start);
	const char *argv[] = { "node", "-e", (const char *)codepod_boot_js, pid, p->tag, start, NULL };
	struct cp_err err;
	if (k8s_exec_start(p->k->execs, p->k->ns, p->conv->pod, K8S_CONTAINER, argv,
	                   &killer_cbs, p, &p->killer, &err)) {
		cp_log(CP_LOG_WARN, "kube.kill_failed", "id", json_string(p->exec_id),
		       "detail", json_string(err.msg), NULL);
		return -1;
	}
	char len[32];
	int n = snprintf(len, sizeof len, "%lu\n", kube_killer_js_len);
	if (k8s_exec_write(p->killer, len, (size_t)n, &err) < 0 ||
	    k8s_exec_write(p->killer, kube_killer_js, kube_killer_js_len, &err) < 0)
		k8s_exec_abort(p->killer); /* on_killer_exited() tells */
	return 0;
}

static void kube_kill(struct codepod_proc *p)
{
	/* (while kube_oom.c reads the pod, the runner is already dead) */
	if (p->killed || p->state == KUBE_PROC_DONE || p->oom_pod)
		return;
	p->killed = 1;
	switch (p->state) {
	case KUBE_PROC_WAIT_POD:
		for (struct codepod_proc **pp = &p->conv->waiters; *pp; pp = &(*pp)->next_wait) {
			if (*pp == p) {
				*pp = p->next_wait;
				break;
			}
		}
		/* Nobody waits any more: drop the acquisition (its call may hang),
		 * so the next execution starts a fresh one. */
		if (!p->conv->waiters && p->conv->state == KUBE_CONV_ACQUIRING)
			kube_conv_release(p->conv);
		p->exit.code = -1;
		p->exit.signal = 9;
		report_soon(p);
		return;
	case KUBE_PROC_WAIT_CREDS:
		k8s_creds_cancel(&p->cw); /* on_creds reports */
		return;
	case KUBE_PROC_WAIT_SUPER:
		for (struct codepod_proc **pp = &p->conv->super_waiters; *pp; pp = &(*pp)->next_wait) {
			if (*pp == p) {
				*pp = p->next_wait;
				break;
			}
		}
		p->exit.code = -1;
		p->exit.signal = 9;
		report_soon(p);
		return;
	case KUBE_PROC_EXEC:
		if (p->sup) { /* the supervisor kills it: no second exec */
			kube_super_kill(p->sup, p->chan, p->tag);
			uv_timer_stop(&p->timer);
			uv_timer_start(&p->timer, on_kill_grace, KILL_GRACE_MS, 0);
			return;
		}
		break;
	case KUBE_PROC_DONE:
		return;
	}
	if (start_killer(p)) {
		k8s_exec_abort(p->ex);
		return;
	}
	uv_timer_stop(&p->timer);
	uv_timer_start(&p->timer, on_kill_grace, KILL_GRACE_MS, 0);
}

static void kube_adopt(struct codepod_proc *p, const char *exec_id)
{
	if (!p->standby)
		return;
	p->standby = 0;
	char *id = strdup(exec_id ? exec_id : "");
	if (id) {
		free(p->exec_id);
		p->exec_id = id;
	}
	if (p->state == KUBE_PROC_EXEC && (p->ex || p->sup) && !p->counted)
		count_running(p);
}

/* Only through a supervisor: a direct exec has nobody in the pod to read
 * /proc for it (such an execution's outcome carries no cpuMs). */
static void kube_sample(struct codepod_proc *p)
{
	if (p->state == KUBE_PROC_EXEC && p->sup && !p->killed)
		kube_super_sample(p->sup, p->chan);
}

static void kube_note_pid(struct codepod_proc *p, long pid, unsigned long long start)
{
	p->pid = pid;
	p->start = start;
}

static int kube_write(struct codepod_proc *p, const char *buf, size_t len, struct cp_err *err)
{
	if (p->state == KUBE_PROC_DONE || p->killed)
		return 0;
	if ((!p->got_output || p->gated) && cp_buf_add(&p->sent, buf, len, NULL))
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	if (p->gated)
		return 0; /* kube_gate_open sends it */
	if (p->sup) {
		p->fed = 1;
		return kube_super_write(p->sup, p->chan, buf, len, err);
	}
	if (!p->ex)
		return 0;
	int rc = k8s_exec_write(p->ex, buf, len, err);
	return rc < 0 ? rc : 0;
}

static char **copy_argv(const char *const *argv)
{
	size_t n = 0;
	while (argv[n])
		n++;
	char **out = calloc(n + 1, sizeof *out);
	for (size_t i = 0; out && i < n; i++) {
		out[i] = strdup(argv[i]);
		if (!out[i]) {
			while (i > 0)
				free(out[--i]);
			free(out);
			return NULL;
		}
	}
	return out;
}

/* What a runner's supervisor holds the workspace to: the policy's bound,
 * but never past what the pod lets it hold before the kubelet evicts it
 * (less a margin for what is written between two of its readings). */
static uint64_t ws_bound(const struct kube *k, uint64_t bytes)
{
	if (!bytes)
		bytes = 1ull << 30;
	return k->ws_cap && bytes > k->ws_cap ? k->ws_cap : bytes;
}

static int kube_spawn(struct codepod_backend *b, const struct codepod_spawn_req *req,
                      const struct codepod_proc_cbs *cbs, void *ud, struct codepod_proc **out,
                      struct cp_err *err)
{
	struct kube *k = (struct kube *)b;
	struct kube_conv *c = kube_conv_get(k, req->conversation, err);
	if (!c)
		return err ? err->code : CP_E_INTERNAL;
	/* A runner started ahead needs the pod already there: it must neither
	 * start an acquisition nor keep a failing one alive (nor start in a
	 * pod being restored, nor for a snapshot's own operation). */
	if (req->standby && (c->state != KUBE_CONV_READY || c->restoring || c->deleting ||
	                     kube_snap_is_alias(k, req->conversation)))
		return cp_err_set(err, CP_E_STATE, "the conversation has no pod now");
	struct codepod_proc *p = calloc(1, sizeof *p);
	if (!p)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	p->k = k;
	p->conv = c;
	p->cbs = cbs;
	p->ud = ud;
	cp_buf_init(&p->sent, SIZE_MAX); /* no limit of its own: held until the first output */
	p->argv = copy_argv(req->argv);
	p->exec_id = strdup(req->exec_id ? req->exec_id : "");
	snprintf(p->tag, sizeof p->tag, "%s", req->tag ? req->tag : "");
	p->standby = req->standby;
	p->maint = kube_snap_is_own_exec(k, req->exec_id);
	p->memory_mb = req->memory_mb;
	if (!p->maint && !p->standby && c->restore_ms >= 0) {
		p->restored = 1; /* the first after a restore no waiter took */
		p->restore_ms = (uint64_t)c->restore_ms;
		c->restore_ms = -1;
	}
	p->ws_bytes = ws_bound(k, req->ws_bytes);
	p->ws_files = req->ws_files;
	p->input_len = req->input_len;
	/* The input goes out as the first bytes written (kept with them for a
	 * replay on a fresh pod). */
	if (!p->argv || !p->exec_id ||
	    (req->input_len && kube_write(p, req->input, req->input_len, err))) {
		for (size_t i = 0; p->argv && p->argv[i]; i++)
			free(p->argv[i]);
		free(p->argv);
		free(p->exec_id);
		cp_buf_free(&p->sent);
		free(p);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	uv_timer_init(k->loop, &p->timer);
	p->timer.data = p;
	k->procs++;
	*out = p;
	if (p->maint && (c->state != KUBE_CONV_READY || !c->pod)) {
		/* The snapshot's read or the restore's write: this pod or none. */
		kube_proc_unavailable(p, "the conversation has no pod here");
	} else if (c->state == KUBE_CONV_READY && (p->maint || (!c->restoring && !c->deleting))) {
		start_exec(p);
	} else if (c->state == KUBE_CONV_READY && c->restoring && !c->deleting) {
		/* its runner starts beside the restore, its input held */
		p->gated = 1;
		p->gate_next = c->gated;
		c->gated = p;
		start_exec(p);
	} else if (c->state == KUBE_CONV_READY) { /* its delete first */
		p->next_wait = c->waiters;
		c->waiters = p;
	} else { /* a new handle is KUBE_PROC_WAIT_POD */
		p->next_wait = c->waiters;
		c->waiters = p;
		kube_conv_want(c);
	}
	return 0;
}

static void free_argv(char **argv)
{
	for (size_t i = 0; argv && argv[i]; i++)
		free(argv[i]);
	free(argv);
}

/* What a warm pod's standby runner is started with (kube_warm.c). */
static void kube_default_runner(struct codepod_backend *b, const struct codepod_spawn_req *req)
{
	struct kube *k = (struct kube *)b;
	char **argv = copy_argv(req->argv);
	char *input = req->input_len ? malloc(req->input_len) : NULL;
	if (!argv || (req->input_len && !input)) {
		free_argv(argv);
		free(input);
		return; /* no standby runners: each execution starts its own */
	}
	if (req->input_len)
		memcpy(input, req->input, req->input_len);
	free_argv(k->runner_argv);
	free(k->runner_input);
	k->runner_argv = argv;
	k->runner_input = input;
	k->runner_input_len = req->input_len;
	k->runner_mb = req->memory_mb;
	k->runner_ws_bytes = ws_bound(k, req->ws_bytes);
	k->runner_ws_files = req->ws_files;
}

/* ---- the backend ---- */

static void on_tick_closed(uv_handle_t *h)
{
	struct kube *k = h->data;
	if (--k->handles_open == 0)
		free(k);
}

void kube_maybe_free(struct kube *k)
{
	if (!k->closing || k->pending || k->procs || k->warm || uv_is_closing((uv_handle_t *)&k->tick))
		return;
	while (k->convs) {
		struct kube_conv *c = k->convs;
		k->convs = c->next;
		free(c->pod);
		free(c);
	}
	k8s_exec_client_free(k->execs);
	k8s_client_close(k->api);
	json_decref(k->tmpl);
	free(k->ns);
	free_argv(k->runner_argv);
	free(k->runner_input);
	k->tick.data = k;
	k->warm_timer.data = k;
	k->clear_timer.data = k;
	uv_close((uv_handle_t *)&k->tick, on_tick_closed);
	uv_close((uv_handle_t *)&k->warm_timer, on_tick_closed);
	uv_close((uv_handle_t *)&k->clear_timer, on_tick_closed);
}

static void kube_destroy(struct codepod_backend *b)
{
	struct kube *k = (struct kube *)b;
	k->closing = 1;
	kube_pool_stop(k);
	kube_warm_stop(k);
	for (struct kube_conv *c = k->convs; c; c = c->next) {
		kube_touch_flush(c, 1); /* marks left standing would keep pods from the reapers */
		kube_conv_release(c);
		kube_supervisor_drop(c);
	}
	uv_timer_stop(&k->clear_timer);
	kube_maybe_free(k);
}

static size_t kube_stats(const struct codepod_backend *b, struct codepod_backend_stat *out, size_t max)
{
	static const char pods[] = "codepod_pods_total";
	static const char pods_help[] = "Sandbox pods, by how they were acquired or ended.";
	static const char served[] = "codepod_pods_served_total";
	static const char served_help[] = "Conversation pods made ready for use, by whether this "
	                                  "replica's pod template made them (own) or another "
	                                  "replica's (other: an upgrade rolling out).";
	static const char repl[] = "codepod_pod_replacements_total";
	static const char repl_help[] = "Pods deleted to make way for another, by reason: "
	                                "bad_state (failed, terminated or never able to start), "
	                                "drift (a warm pod of another template, unused; with "
	                                "--template-drift-idle a conversation's pod of an older "
	                                "replica's template, idle, snapshotted first).";
	static const char sup[] = "codepod_supervisors_total";
	static const char sup_help[] = "Pod supervisors started, and those that failed "
	                               "(their pod falls back to one exec per script).";
	const struct kube_backend_stats *st = &((const struct kube *)(const void *)b)->stats;
	const struct codepod_backend_stat all[] = {
		{ pods, pods_help, "how=\"found\"", st->found },
		{ pods, pods_help, "how=\"claimed\"", st->claimed },
		{ pods, pods_help, "how=\"created\"", st->created },
		{ pods, pods_help, "how=\"warm_created\"", st->warm_created },
		{ pods, pods_help, "how=\"replaced\"", st->replaced },
		{ pods, pods_help, "how=\"reaped\"", st->reaped },
		{ served, served_help, "template=\"own\"", st->served_own },
		{ served, served_help, "template=\"other\"", st->served_other },
		{ repl, repl_help, "reason=\"bad_state\"", st->replaced + st->reaped_bad },
		{ repl, repl_help, "reason=\"drift\"", st->drained },
		{ sup, sup_help, "outcome=\"started\"", st->supervisors_started },
		{ sup, sup_help, "outcome=\"fallback\"", st->supervisor_fallbacks },
	};
	size_t n = sizeof all / sizeof all[0] < max ? sizeof all / sizeof all[0] : max;
	memcpy(out, all, n * sizeof all[0]);
	const struct kube *k = (const struct kube *)(const void *)b;
	if (!k->snaps)
		return n;
	struct store_snaps_stats ss;
	kube_snap_stats(k, &ss);
	static const char snaps_help[] = "Workspace snapshots written to the store, and the "
	                                 "ones skipped because nothing had changed.";
	static const char fail_help[] = "Snapshots that failed (logged as snapshot.failed with "
	                                "the store's or the pod's answer); they are tried again.";
	static const char rest_help[] = "Workspaces restored from a snapshot, and restores that "
	                                "failed (the acquisition ended SANDBOX_UNAVAILABLE).";
	const struct codepod_backend_stat more[] = {
		{ "codepod_snapshots_total", snaps_help, "result=\"written\"", ss.snapshots },
		{ "codepod_snapshots_total", snaps_help, "result=\"unchanged\"", ss.skipped },
		{ "codepod_snapshot_failures_total", fail_help, "store=\"s3\"", ss.failures },
		{ "codepod_snapshot_restores_total", rest_help, "result=\"restored\"", ss.restores },
		{ "codepod_snapshot_restores_total", rest_help, "result=\"failed\"",
		  ss.restore_failures },
	};
	for (size_t i = 0; i < sizeof more / sizeof more[0] && n < max; i++)
		out[n++] = more[i];
	return n;
}

static const struct codepod_backend_ops kube_ops = {
	.spawn = kube_spawn, .write = kube_write, .kill = kube_kill,
	.note_pid = kube_note_pid, .adopt = kube_adopt, .sample = kube_sample, .stats = kube_stats,
	.default_runner = kube_default_runner, .delete_conversation = kube_delete_conversation,
	.destroy = kube_destroy,
};

int kube_backend_new(const struct kube_backend_config *cfg, struct codepod_backend **out,
                    struct cp_err *err)
{
	struct kube *k = calloc(1, sizeof *k);
	if (!k)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	k->base.ops = &kube_ops;
	k->base.name = "kubernetes";
	k->base.shared_sandbox = 1;
	k->base.ws_unbounded = 1;
	k->supervise = !cfg->no_supervisor;
	k->pod_helper = !cfg->no_pod_helper;
	k->loop = cfg->loop;
	k->warm_pool = cfg->warm_pool;
	k->idle_ttl_s = cfg->idle_ttl_s;
	k->drift_idle_s = cfg->drift_idle_s;
	snprintf(k->started, sizeof k->started, "%lld", (long long)time(NULL));
	k->tick_s = cfg->tick_s ? cfg->tick_s : 15;
	/* Pods in use are touched every tick; the tick must come well inside the
	 * idle TTL, or another replica could take a busy pod for an idle one. */
	if (k->idle_ttl_s && k->tick_s > k->idle_ttl_s / 4)
		k->tick_s = k->idle_ttl_s / 4 ? k->idle_ttl_s / 4 : 1;
	if (k->drift_idle_s && k->tick_s > k->drift_idle_s / 4)
		k->tick_s = k->drift_idle_s / 4 ? k->drift_idle_s / 4 : 1;
	k->ns = strdup(cfg->ns ? cfg->ns : (cfg->cfg->ns ? cfg->cfg->ns : "default"));
	k->tmpl = cfg->tmpl ? json_deep_copy(cfg->tmpl) : k8s_template_default();
	int rc = 0;
	if (!k->ns || !k->tmpl)
		rc = cp_err_set(err, CP_E_NOMEM, "out of memory");
	if (!rc)
		rc = k8s_template_check(k->tmpl, "the pod template", err);
	if (!rc)
		rc = k8s_template_hash(k->tmpl, k->tmpl_hash, err);
	if (!rc) {
		/* what a writer at page-cache speed (2 GB/s) puts down between two
		 * of the supervisor's readings and its kill, or a quarter of the
		 * limit, whichever is more */
		uint64_t limit = k8s_template_workspace_limit(k->tmpl);
		uint64_t margin = limit / 4 > (512ull << 20) ? limit / 4 : 512ull << 20;
		k->ws_cap = limit > margin ? limit - margin : limit / 2;
		cp_log(CP_LOG_INFO, "kube.workspace_bound", "podLimitBytes", json_integer((json_int_t)limit),
		       "capBytes", json_integer((json_int_t)k->ws_cap), NULL);
	}
	if (!rc && !(k->api = k8s_client_new(k->loop, cfg->cfg, err)))
		rc = err ? err->code : CP_E_INTERNAL;
	if (!rc)
		rc = k8s_exec_client_new(k->loop, cfg->cfg, NULL, &k->execs, err);
	if (rc) {
		if (k->api)
			k8s_client_close(k->api);
		json_decref(k->tmpl);
		free(k->ns);
		free(k);
		return rc;
	}
	uv_timer_init(k->loop, &k->tick);
	k->tick.data = k;
	uv_timer_init(k->loop, &k->warm_timer);
	k->warm_timer.data = k;
	uv_timer_init(k->loop, &k->clear_timer);
	k->clear_timer.data = k;
	k->handles_open = 3;
	kube_pool_start(k);
	*out = &k->base;
	return 0;
}
