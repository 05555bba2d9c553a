/*
 * prestart.c - runners already started: starting a runner, and the pool of
 * waiting ones (see prestart.h for the rules).
 */
#include <jansson.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/codepod.h"
#include "base/assert.h"
#include "base/hex.h"
#include "base/log.h"
#include "base/state.h"
#include "runner/policy.h"
#include "runner/prestart.h"

/* A runner's spawn request: argv pointing into @heap and *@boot, which the
 * caller frees. 0 or CP_E_NOMEM. */
static int runner_req(const struct codepod_runner_spec *spec, char heap[48], char **boot,
                      const char *argv[6], struct codepod_spawn_req *req)
{
	snprintf(heap, 48, "--max-old-space-size=%lu", spec->memory_mb);
	*boot = strndup((const char *)codepod_boot_js, codepod_boot_js_len);
	if (!*boot)
		return CP_E_NOMEM;
	argv[0] = "node";
	argv[1] = "--disable-warning=ExperimentalWarning";
	argv[2] = heap;
	argv[3] = "-e";
	argv[4] = *boot;
	argv[5] = NULL;
	*req = (struct codepod_spawn_req){ .conversation = spec->conversation, .exec_id = spec->exec_id,
	                              .argv = argv, .input = (const char *)codepod_runner_input,
	                              .input_len = codepod_runner_input_len,
	                              .memory_mb = spec->memory_mb, .tag = spec->tag,
	                              .standby = spec->standby, .ws_bytes = spec->ws_bytes,
	                              .ws_files = spec->ws_files };
	return 0;
}

int codepod_runner_spawn(struct codepod_backend *b, const struct codepod_runner_spec *spec,
                    const struct codepod_proc_cbs *cbs, void *ud, struct codepod_proc **out,
                    struct cp_err *err)
{
	char heap[48], *boot = NULL;
	const char *argv[6];
	struct codepod_spawn_req req;
	if (runner_req(spec, heap, &boot, argv, &req))
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	int rc = b->ops->spawn(b, &req, cbs, ud, out, err);
	free(boot);
	return rc;
}

void codepod_runner_default(struct codepod_backend *b)
{
	if (!b->ops->default_runner)
		return;
	struct codepod_policy pol;
	codepod_policy_defaults(&pol);
	struct codepod_runner_spec spec = { NULL, NULL, (unsigned long)pol.max_memory_mb, NULL, 1,
	                                    pol.max_workspace_bytes, pol.max_workspace_files };
	char heap[48], *boot = NULL;
	const char *argv[6];
	struct codepod_spawn_req req;
	if (runner_req(&spec, heap, &boot, argv, &req))
		return; /* no runner ahead of time: each is started when needed */
	b->ops->default_runner(b, &req);
	free(boot);
}

/* ---- the pool ---- */

struct ps_runner;

/*
 * A runner of the pool. Changed only by ps_set_state, which logs the
 * change (debug, prestart.state) and asserts it is one of:
 *   STARTING -> WAITING   started: its conversation's waiting runner
 *   WAITING -> TAKEN      an execution took it
 *   WAITING -> DROPPED    killed while waiting (output, pool full, idle,
 *                         another policy, stopping)
 * A runner that exits is freed, in any of the last three; one that dies
 * while WAITING is said so in the log (prestart.died).
 */
enum ps_state {
	PS_STARTING, /* spawned by start_waiting, not yet its conversation's */
	PS_WAITING,  /* r->conv's waiting runner */
	PS_TAKEN,    /* serves an execution: callbacks go to r->cbs/r->ud */
	PS_DROPPED,  /* left its conversation and killed: its exited() frees it */
};

/* A conversation the pool knows: one with executions running or a runner
 * waiting; forgotten as soon as it has neither. */
struct ps_conv {
	struct ps_conv *next;
	char *key;
	unsigned long memory_mb;    /* what the next waiting runner is started with */
	uint64_t ws_bytes, ws_files;
	unsigned running;
	uint64_t active_ms;         /* last execution start or end */
	int want;                   /* start a waiting runner on the next turn */
	int ts;                     /* the last program needed the type stripper */
	int cmd;                    /* it has run a command */
	unsigned deleted_running;   /* executions running when it was deleted: their
	                               ends start no runner */
	struct ps_runner *waiting;
};

struct ps_runner {
	struct codepod_prestart *ps;
	enum ps_state state;        /* ps_set_state only */
	struct ps_conv *conv;       /* while waiting */
	struct codepod_proc *proc;
	unsigned long memory_mb;
	uint64_t ws_bytes, ws_files;
	char tag[33];
	const struct codepod_proc_cbs *cbs; /* the taker's, once taken */
	void *ud;
};

struct codepod_prestart {
	uv_loop_t *loop;
	struct codepod_backend *b;
	unsigned max_waiting;
	uint64_t idle_ms;
	struct ps_conv *convs;
	unsigned waiting;           /* runners waiting */
	unsigned alive;             /* runners started and not exited, taken ones too */
	int stopped, freed;
	uv_timer_t timer;           /* expiries, and starts off the caller's stack */
};

static const char *const ps_state_names[] = {
	[PS_STARTING] = "starting", [PS_WAITING] = "waiting", [PS_TAKEN] = "taken",
	[PS_DROPPED] = "dropped",
};

/* legal[from][to]: the transitions above. */
#define N_PS_STATES (PS_DROPPED + 1)
static const unsigned char ps_legal[N_PS_STATES][N_PS_STATES] = {
	[PS_STARTING] = { [PS_WAITING] = 1 },
	[PS_WAITING] = { [PS_TAKEN] = 1, [PS_DROPPED] = 1 },
};

/* start_waiting calloc's a runner: it starts STARTING. */
_Static_assert(PS_STARTING == 0, "a new runner is PS_STARTING");

static const struct cp_state_machine ps_machine = {
	"prestart.state", "id", ps_state_names, &ps_legal[0][0], N_PS_STATES,
};

/* The one place r->state changes. */
static void ps_set_state(struct ps_runner *r, enum ps_state to)
{
	cp_state_change(&ps_machine, NULL, -1, (unsigned)r->state, (unsigned)to);
	r->state = to;
}

static uint64_t now_ms(void)
{
	return uv_hrtime() / 1000000u;
}

static void on_timer_closed(uv_handle_t *h)
{
	free(h->data);
}

static void maybe_free(struct codepod_prestart *ps)
{
	if (!ps->freed || ps->alive || uv_is_closing((uv_handle_t *)&ps->timer))
		return;
	while (ps->convs) {
		struct ps_conv *c = ps->convs;
		ps->convs = c->next;
		free(c->key);
		free(c);
	}
	uv_close((uv_handle_t *)&ps->timer, on_timer_closed);
}

static struct ps_conv *conv_find(struct codepod_prestart *ps, const char *key)
{
	for (struct ps_conv *c = ps->convs; c; c = c->next)
		if (strcmp(c->key, key) == 0)
			return c;
	return NULL;
}

static void conv_forget_if_unused(struct codepod_prestart *ps, struct ps_conv *c)
{
	if (c->running || c->waiting)
		return;
	for (struct ps_conv **pp = &ps->convs; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	free(c->key);
	free(c);
}

/* The waiting runner leaves its conversation and is killed; its exited()
 * frees it. */
static void drop_waiting(struct ps_runner *r, const char *why)
{
	struct codepod_prestart *ps = r->ps;
	struct ps_conv *c = r->conv;
	c->waiting = NULL;
	r->conv = NULL;
	ps_set_state(r, PS_DROPPED);
	ps->waiting--;
	cp_log(CP_LOG_DEBUG, "prestart.dropped", "reason", json_string(why),
	       "waiting", json_integer(ps->waiting), NULL);
	ps->b->ops->kill(r->proc);
}

static void on_out(void *ud, const char *buf, size_t len)
{
	struct ps_runner *r = ud;
	if (r->state == PS_TAKEN) {
		r->cbs->out(r->ud, buf, len);
		return;
	}
	if (r->state == PS_WAITING) /* a waiting runner says nothing: this one is not pristine */
		drop_waiting(r, "output while waiting");
}

static void on_err(void *ud, const char *buf, size_t len)
{
	struct ps_runner *r = ud;
	if (r->state == PS_TAKEN) {
		r->cbs->err(r->ud, buf, len);
		return;
	}
	if (r->state == PS_WAITING)
		drop_waiting(r, "output while waiting");
}

static void rearm(struct codepod_prestart *ps);

static void on_exited(void *ud, const struct codepod_proc_exit *ex)
{
	struct ps_runner *r = ud;
	struct codepod_prestart *ps = r->ps;
	if (r->state == PS_TAKEN) {
		r->cbs->exited(r->ud, ex);
	} else if (r->state == PS_WAITING) {
		/* It died while waiting (killed from outside, the sandbox went):
		 * the next execution starts afresh and brings another (not at once:
		 * a runner that cannot start must not be restarted in a loop). */
		struct ps_conv *c = r->conv;
		c->waiting = NULL;
		ps->waiting--;
		cp_log(CP_LOG_INFO, "prestart.died", "code", json_integer(ex->code),
		       "signal", json_integer(ex->signal), "detail", json_string(ex->detail), NULL);
		conv_forget_if_unused(ps, c);
		rearm(ps);
	}
	free(r);
	ps->alive--;
	maybe_free(ps);
}

static void on_killed(void *ud, const struct codepod_usage *u)
{
	struct ps_runner *r = ud;
	if (r->state == PS_TAKEN && r->cbs->killed)
		r->cbs->killed(r->ud, u);
}

static void on_usage(void *ud, const struct codepod_usage *u)
{
	struct ps_runner *r = ud;
	if (r->state == PS_TAKEN && r->cbs->usage)
		r->cbs->usage(r->ud, u);
}

static const struct codepod_proc_cbs runner_cbs = { on_out, on_err, on_exited, on_killed, on_usage };

static int make_tag(char out[33])
{
	unsigned char raw[16];
	if (RAND_bytes(raw, sizeof raw) != 1)
		return -1;
	cp_hex_encode(raw, sizeof raw, out);
	return 0;
}

/* Room for one more waiting runner: when the pool is full, kill the one of
 * the conversation active longest ago, if that was over EVICT_AFTER_MS
 * before @for_conv's (a burst of new conversations must not start runners
 * only to kill them again). */
#define EVICT_AFTER_MS 1000
static int make_room(struct codepod_prestart *ps, const struct ps_conv *for_conv)
{
	while (ps->waiting >= ps->max_waiting) {
		struct ps_conv *oldest = NULL;
		for (struct ps_conv *c = ps->convs; c; c = c->next)
			if (c->waiting && c != for_conv && (!oldest || c->active_ms < oldest->active_ms))
				oldest = c;
		if (!oldest || oldest->active_ms + EVICT_AFTER_MS > for_conv->active_ms)
			return 0;
		drop_waiting(oldest->waiting, "pool full");
		conv_forget_if_unused(ps, oldest);
	}
	return 1;
}

static void start_waiting(struct codepod_prestart *ps, struct ps_conv *c)
{
	c->want = 0;
	if (ps->stopped || c->waiting || (ps->b->shared_sandbox && c->running) || !make_room(ps, c))
		return;
	struct ps_runner *r = calloc(1, sizeof *r);
	if (!r || make_tag(r->tag)) {
		free(r);
		return;
	}
	r->ps = ps;
	r->memory_mb = c->memory_mb;
	r->ws_bytes = c->ws_bytes;
	r->ws_files = c->ws_files;
	struct codepod_runner_spec spec = { c->key, "prestart", c->memory_mb, r->tag, 1,
	                                    c->ws_bytes, c->ws_files };
	struct cp_err err;
	if (codepod_runner_spawn(ps->b, &spec, &runner_cbs, r, &r->proc, &err)) {
		cp_log(CP_LOG_DEBUG, "prestart.not_started", "detail", json_string(err.msg), NULL);
		free(r);
		return;
	}
	char warm[48];
	int n = snprintf(warm, sizeof warm, "{\"k\":\"warm\"%s%s}\n", c->ts ? ",\"ts\":true" : "",
	                 c->cmd ? ",\"cmd\":true" : "");
	if ((c->ts || c->cmd) && ps->b->ops->write(r->proc, warm, (size_t)n, &err))
		ps->b->ops->kill(r->proc); /* exited() follows and tells the story */
	r->conv = c;
	c->waiting = r;
	ps_set_state(r, PS_WAITING);
	ps->waiting++;
	ps->alive++;
	cp_log(CP_LOG_DEBUG, "prestart.started", "waiting", json_integer(ps->waiting), NULL);
}

static void on_timer(uv_timer_t *t)
{
	struct codepod_prestart *ps = t->data;
	uint64_t now = now_ms();
	struct ps_conv *next;
	for (struct ps_conv *c = ps->convs; c; c = next) {
		next = c->next;
		if (c->waiting && c->active_ms + ps->idle_ms <= now) {
			drop_waiting(c->waiting, "idle");
			cp_log(CP_LOG_INFO, "prestart.expired", "waiting", json_integer(ps->waiting), NULL);
			conv_forget_if_unused(ps, c);
		}
	}
	/* One at a time, from the head again: starting one may evict (and free)
	 * another conversation's entry. */
	for (;;) {
		struct ps_conv *c = ps->convs;
		while (c && !c->want)
			c = c->next;
		if (!c)
			break;
		start_waiting(ps, c);
		conv_forget_if_unused(ps, c);
	}
	rearm(ps);
}

/* The timer: now when a start is wanted, else at the earliest expiry. */
static void rearm(struct codepod_prestart *ps)
{
	uint64_t due = UINT64_MAX, now = now_ms();
	for (struct ps_conv *c = ps->convs; c; c = c->next) {
		if (c->want && !ps->stopped)
			due = now;
		else if (c->waiting && c->active_ms + ps->idle_ms < due)
			due = c->active_ms + ps->idle_ms;
	}
	uv_timer_stop(&ps->timer);
	if (due != UINT64_MAX)
		uv_timer_start(&ps->timer, on_timer, due > now ? due - now : 0, 0);
}

int codepod_prestart_new(uv_loop_t *loop, struct codepod_backend *b, unsigned max_waiting,
                    unsigned idle_s, struct codepod_prestart **out, struct cp_err *err)
{
	*out = NULL;
	if (max_waiting == 0)
		return 0;
	struct codepod_prestart *ps = calloc(1, sizeof *ps);
	if (!ps)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	ps->loop = loop;
	ps->b = b;
	ps->max_waiting = max_waiting;
	ps->idle_ms = (uint64_t)idle_s * 1000u;
	uv_timer_init(loop, &ps->timer);
	ps->timer.data = ps;
	*out = ps;
	return 0;
}

/* The runner was started for what @spec asks. */
static int fits(const struct ps_runner *r, const struct codepod_runner_spec *spec)
{
	return r->memory_mb == spec->memory_mb && r->ws_bytes == spec->ws_bytes &&
	       r->ws_files == spec->ws_files;
}

int codepod_prestart_take(struct codepod_prestart *ps, const struct codepod_runner_spec *want,
                     const char *exec_id,
                     const struct codepod_proc_cbs *cbs, void *ud,
                     struct codepod_proc **proc, char tag[33])
{
	if (!ps || ps->stopped)
		return 0;
	struct ps_conv *c = conv_find(ps, want->conversation);
	struct ps_runner *r = c ? c->waiting : NULL;
	if (!r || !fits(r, want))
		return 0;
	c->waiting = NULL;
	r->conv = NULL;
	ps->waiting--;
	r->cbs = cbs;
	r->ud = ud;
	ps_set_state(r, PS_TAKEN);
	*proc = r->proc;
	memcpy(tag, r->tag, 33);
	if (ps->b->ops->adopt)
		ps->b->ops->adopt(r->proc, exec_id);
	return 1;
}

void codepod_prestart_exec_started(struct codepod_prestart *ps, const struct codepod_runner_spec *spec)
{
	if (!ps || ps->stopped)
		return;
	const char *conversation = spec->conversation;
	struct ps_conv *c = conv_find(ps, conversation);
	if (!c) {
		c = calloc(1, sizeof *c);
		if (!c || !(c->key = strdup(conversation))) {
			free(c);
			return;
		}
		c->next = ps->convs;
		ps->convs = c;
	}
	c->running++;
	c->active_ms = now_ms();
	c->memory_mb = spec->memory_mb;
	c->ws_bytes = spec->ws_bytes;
	c->ws_files = spec->ws_files;
	if (c->waiting && (!fits(c->waiting, spec) || ps->b->shared_sandbox))
		drop_waiting(c->waiting, ps->b->shared_sandbox ? "sandbox in use" : "other policy");
	rearm(ps);
}


void codepod_prestart_no_program(struct codepod_prestart *ps, const char *conversation)
{
	struct ps_conv *c = ps && !ps->stopped ? conv_find(ps, conversation) : NULL;
	if (!c || ps->b->shared_sandbox || c->waiting || c->deleted_running)
		return;
	c->want = 1;
	rearm(ps);
}

void codepod_prestart_exec_ended(struct codepod_prestart *ps, const char *conversation)
{
	if (!ps || ps->stopped)
		return;
	struct ps_conv *c = conv_find(ps, conversation);
	if (!c || !c->running)
		return;
	c->running--;
	c->active_ms = now_ms();
	if (c->deleted_running) { /* stopped by the delete: its workspace is gone */
		c->deleted_running--;
		return;
	}
	if (!c->running || !ps->b->shared_sandbox)
		c->want = 1;
	rearm(ps);
}

void codepod_prestart_note(struct codepod_prestart *ps, const char *conversation, int cmd, int ts)
{
	struct ps_conv *c = ps && !ps->stopped ? conv_find(ps, conversation) : NULL;
	if (!c)
		return;
	if (cmd)
		c->cmd = 1;
	else
		c->ts = ts;
}

unsigned codepod_prestart_waiting(const struct codepod_prestart *ps)
{
	return ps ? ps->waiting : 0;
}

void codepod_prestart_forget(struct codepod_prestart *ps, const char *conversation)
{
	if (!ps)
		return;
	for (struct ps_conv *c = ps->convs; c; c = c->next) {
		if (strcmp(c->key, conversation) != 0)
			continue;
		c->want = 0;
		c->deleted_running = c->running;
		if (c->waiting)
			drop_waiting(c->waiting, "conversation deleted");
		return;
	}
}

void codepod_prestart_stop(struct codepod_prestart *ps)
{
	if (!ps || ps->stopped)
		return;
	ps->stopped = 1;
	uv_timer_stop(&ps->timer);
	struct ps_conv *next;
	for (struct ps_conv *c = ps->convs; c; c = next) {
		next = c->next;
		c->want = 0;
		if (c->waiting)
			drop_waiting(c->waiting, "stopping");
	}
}

void codepod_prestart_free(struct codepod_prestart *ps)
{
	if (!ps)
		return;
	codepod_prestart_stop(ps);
	ps->freed = 1;
	maybe_free(ps);
}
