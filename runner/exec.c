/*
 * exec.c - one execution's lifecycle: submit, start the runner through the
 * backend, read its control channel, enforce the deadlines, end it once and
 * deliver the outcome once every process of it is killed (sandbox.h
 * killed()) or gone.
 */
#include <openssl/rand.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/continuation.h"
#include "runner/command.h"
#include "runner/digest.h"
#include "runner/fileop.h"
#include "runner/exec_int.h"
#include "runner/spent.h"
#include "base/assert.h"
#include "base/hex.h"
#include "base/jsondepth.h"
#include "base/jsonutil.h"
#include "base/log.h"
#include "base/state.h"
#include "runner/prestart.h"
#include "runner/etags.h"

/* How long a killed process tree may take to go before the outcome is
 * delivered anyway (something escaped and still holds the pipes). */
#define GRACE_MS 3000
/* Frame payloads other than results and tool inputs stay below this. */
#define FRAME_SLACK 65536
/* A file operation's frames: a chunk (256 KiB) or a listing's JSON. */
#define FILE_FRAME_MAX (8u << 20)
/* How often the process tree's CPU time is read while a program with a CPU
 * budget (maxCpuMs) runs: a busy program ends at most about this much
 * past its budget (plus the backend's time to answer). */
#define CPU_POLL_MS 50

static void on_out(void *ud, const char *buf, size_t len);

static const char *const exec_state_names[] = {
	[CODEPOD_ST_STARTING] = "starting", [CODEPOD_ST_RUNNING] = "running",
	[CODEPOD_ST_FINISHING] = "finishing", [CODEPOD_ST_DONE] = "done",
};

/* legal[from][to]: the transitions of exec_int.h. */
#define N_EXEC_STATES (CODEPOD_ST_DONE + 1)
static const unsigned char exec_legal[N_EXEC_STATES][N_EXEC_STATES] = {
	[CODEPOD_ST_STARTING] = { [CODEPOD_ST_RUNNING] = 1, [CODEPOD_ST_FINISHING] = 1 },
	[CODEPOD_ST_RUNNING] = { [CODEPOD_ST_FINISHING] = 1 },
	[CODEPOD_ST_FINISHING] = { [CODEPOD_ST_DONE] = 1 },
	[CODEPOD_ST_DONE] = { 0 },
};

/* A new execution is calloc'ed (codepod_submit): it starts STARTING. */
_Static_assert(CODEPOD_ST_STARTING == 0, "a new execution is CODEPOD_ST_STARTING");

static const struct cp_state_machine exec_machine = {
	"exec.state", "id", exec_state_names, &exec_legal[0][0], N_EXEC_STATES,
};

/* The one place e->state changes. */
static void exec_set_state(struct codepod_exec *e, enum codepod_exec_state to)
{
	cp_state_change(&exec_machine, e->id, -1, (unsigned)e->state, (unsigned)to);
	e->state = to;
}

/* Live output for a host that asked for it (codepod_host.output). */
static void output(struct codepod_exec *e, int is_stderr, const char *buf, size_t len)
{
	if (e->host->output && len && e->state != CODEPOD_ST_DONE)
		e->host->output(e->ud, e, is_stderr, buf, len);
}

static int says_oom(const char *buf, size_t len)
{
	static const char *const marks[] = { "heap out of memory", "Reached heap limit",
	                                     "Cannot allocate memory", "std::bad_alloc" };
	for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
		if (memmem(buf, len, marks[i], strlen(marks[i])))
			return 1;
	return 0;
}

/* stderr is log output; it is also scanned for the out-of-memory notes V8
 * and the C library print before the process dies, across chunk edges. */
static void on_err(void *ud, const char *buf, size_t len)
{
	struct codepod_exec *e = ud;
	codepod_logwin_append(&e->logs, buf, len);
	output(e, 1, buf, len);
	if (e->oom_seen)
		return;
	char scan[sizeof e->err_tail + 4096];
	size_t take = len < 4096 ? len : 4096;
	memcpy(scan, e->err_tail, e->err_tail_len);
	memcpy(scan + e->err_tail_len, buf, take);
	if (says_oom(scan, e->err_tail_len + take) || (len > take && says_oom(buf, len)))
		e->oom_seen = 1;
	size_t keep = sizeof e->err_tail;
	const char *end = buf + len;
	size_t n = len < keep ? len : keep;
	if (e->err_tail_len + n > keep) {
		size_t drop = e->err_tail_len + n - keep;
		memmove(e->err_tail, e->err_tail + drop, e->err_tail_len - drop);
		e->err_tail_len -= drop;
	}
	memcpy(e->err_tail + e->err_tail_len, end - n, n);
	e->err_tail_len += n;
}

static void on_exited(void *ud, const struct codepod_proc_exit *ex);
static void on_killed(void *ud, const struct codepod_usage *u);
static void on_usage(void *ud, const struct codepod_usage *u);
static void on_deadline(uv_timer_t *t);
static const struct codepod_proc_cbs proc_cbs = { on_out, on_err, on_exited, on_killed, on_usage };

uint64_t codepod_exec_now_ms(void)
{
	return uv_hrtime() / 1000000u;
}

int codepod_new(const struct codepod_config *cfg, struct codepod **out,
                struct cp_err *err)
{
	if (!cfg->loop || !cfg->backend)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "a loop and a backend are required");
	struct codepod *cp = calloc(1, sizeof *cp);
	if (!cp) {
		codepod_keyring_free(cfg->continuation_keys);
		codepod_spent_free(cfg->spent);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	cp->cfg = *cfg;
	cp->own_keys = cfg->continuation_keys;
	cp->own_spent = cfg->spent;
	int rc = 0;
	if (!cp->own_keys)
		rc = codepod_keyring_random(&cp->own_keys, err);
	if (rc == 0 && !cp->own_spent)
		rc = codepod_spent_open(cfg->loop, NULL, 0, &cp->own_spent, err);
	if (rc) {
		codepod_keyring_free(cp->own_keys);
		codepod_spent_free(cp->own_spent);
		free(cp);
		return rc;
	}
	codepod_runner_default(cfg->backend);
	rc = codepod_prestart_new(cfg->loop, cfg->backend, cfg->prestart_max,
	                         cfg->prestart_idle_s ? cfg->prestart_idle_s
	                                              : CODEPOD_PRESTART_DEFAULT_IDLE_S,
	                         &cp->prestart, err);
	if (rc) {
		codepod_keyring_free(cp->own_keys);
		codepod_spent_free(cp->own_spent);
		free(cp);
		return rc;
	}
	cp->etags = codepod_etags_new();
	*out = cp;
	return 0;
}

void codepod_quiesce(struct codepod *cp)
{
	codepod_prestart_stop(cp->prestart);
}

unsigned codepod_prestarted_waiting(const struct codepod *cp)
{
	return codepod_prestart_waiting(cp->prestart);
}

void codepod_free(struct codepod *cp)
{
	codepod_prestart_free(cp->prestart);
	codepod_etags_free(cp->etags);
	codepod_keyring_free(cp->own_keys);
	codepod_spent_free(cp->own_spent);
	free(cp);
}

const struct codepod_backend *codepod_backend_of(const struct codepod *cp)
{
	return cp->cfg.backend;
}

unsigned codepod_running(const struct codepod *cp)
{
	return cp->running;
}

const char *codepod_exec_id(const struct codepod_exec *e)
{
	return e->id;
}

int codepod_exec_ended(const struct codepod_exec *e)
{
	return e->state >= CODEPOD_ST_FINISHING || !e->proc;
}

int codepod_delete_conversation(struct codepod *cp, const char *conversation,
                                void (*done)(void *ud, int rc, const struct cp_err *err),
                                void *ud, struct cp_err *err)
{
	struct codepod_backend *b = cp->cfg.backend;
	if (!b->ops->delete_conversation)
		return cp_err_set(err, CP_E_UNSUPPORTED,
		                  "the %s backend cannot delete a conversation", b->name);
	/* Its waiting runner stands in a workspace about to go. */
	codepod_prestart_forget(cp->prestart, conversation);
	codepod_etags_forget(cp->etags, conversation);
	return b->ops->delete_conversation(b, conversation, done, ud, err);
}

static void exec_free(struct codepod_exec *e)
{
	codepod_calls_free(e);
	codepod_trace_free(e);
	if (e->frames)
		codepod_frame_parser_free(e->frames);
	codepod_logwin_free(&e->logs);
	codepod_logwin_free(&e->errlogs);
	json_decref(e->cmd);
	json_decref(e->fop);
	json_decref(e->fop_info);
	codepod_fileop_free(e);
	json_decref(e->tools);
	json_decref(e->tool_index);
	json_decref(e->result);
	json_decref(e->program_error);
	json_decref(e->replay);
	free(e->continuation);
	free(e->id);
	free(e->conversation);
	free(e->src);
	free(e);
}

static void on_timer_closed(uv_handle_t *h)
{
	struct codepod_exec *e = h->data;
	if (--e->handles_open == 0)
		exec_free(e);
}

/* The execution may be freed once done() went out and the process is gone. */
static void maybe_release(struct codepod_exec *e)
{
	if (e->state != CODEPOD_ST_DONE || e->proc || uv_is_closing((uv_handle_t *)&e->timer))
		return;
	if (e->prestart_noted) /* the runner is gone: the pool may start the next */
		codepod_prestart_exec_ended(e->cp->prestart, e->conversation);
	uv_close((uv_handle_t *)&e->timer, on_timer_closed);
	uv_close((uv_handle_t *)&e->cpu_timer, on_timer_closed);
	uv_close((uv_handle_t *)&e->quiet_timer, on_timer_closed);
	uv_close((uv_handle_t *)&e->hold_timer, on_timer_closed);
}

uint64_t codepod_exec_cpu_us(const struct codepod_exec *e)
{
	/* Before the program reached its runner it used nothing. */
	if (!e->usage.known || !e->t_ready_ms)
		return 0;
	return e->usage.cpu_us > e->hello_cpu_us ? e->usage.cpu_us - e->hello_cpu_us : 0;
}

/* A reading of the backend's: the figures only grow, so the largest of
 * each is kept (a later reading may miss a process an earlier one saw,
 * e.g. one reaped meanwhile by a process outside the tree). @enforce: a
 * live reading, held to the CPU budget. */
static void note_usage(struct codepod_exec *e, const struct codepod_usage *u, int enforce)
{
	if (u && u->restored && e->state != CODEPOD_ST_DONE) {
		e->usage.restored = 1;
		e->usage.restore_ms = u->restore_ms;
	}
	if (!u || !u->known || e->state == CODEPOD_ST_DONE)
		return;
	e->usage.known = 1;
	if (u->cpu_us > e->usage.cpu_us)
		e->usage.cpu_us = u->cpu_us;
	if (u->max_rss_bytes > e->usage.max_rss_bytes)
		e->usage.max_rss_bytes = u->max_rss_bytes;
	uint64_t used_ms = codepod_exec_cpu_us(e) / 1000u;
	if (enforce && e->state == CODEPOD_ST_RUNNING && e->pol.max_cpu_ms != CODEPOD_POLICY_NONE &&
	    used_ms > e->pol.max_cpu_ms)
		codepod_exec_finish(e, CP_E_CPU_LIMIT,
		               "The program used %llu ms of CPU time, over its limit of %llu ms "
		               "(maxCpuMs); time spent waiting on tools does not count.",
		               (unsigned long long)used_ms, (unsigned long long)e->pol.max_cpu_ms);
}

static void on_usage(void *ud, const struct codepod_usage *u)
{
	note_usage(ud, u, 1);
}

static void on_cpu_poll(uv_timer_t *t)
{
	struct codepod_exec *e = t->data;
	const struct codepod_backend_ops *ops = e->cp->cfg.backend->ops;
	if (e->state == CODEPOD_ST_RUNNING && e->proc && ops->sample)
		ops->sample(e->proc); /* on_usage() holds it to the budget */
}

static void deliver(struct codepod_exec *e)
{
	if (e->state == CODEPOD_ST_DONE)
		return;
	exec_set_state(e, CODEPOD_ST_DONE);
	uv_timer_stop(&e->timer);
	json_t *outcome = codepod_outcome_build(e);
	cp_log(CP_LOG_INFO, "exec.done", "id", json_string(e->id),
	       "code", json_string(e->suspended ? "SUSPENDED" : e->code == CP_OK ? "OK" : cp_code_name(e->code)),
	       "calls", json_integer((json_int_t)e->requests),
	       "runMs", json_integer((json_int_t)(e->t_ready_ms ? e->t_end_ms - e->t_ready_ms : 0)),
	       "prestarted", json_boolean(e->prestarted), NULL);
	e->cp->running--;
	codepod_trace_emit(e);
	if (outcome) {
		e->host->done(e->ud, e, outcome);
		json_decref(outcome);
	} else {
		json_t *fallback = json_pack("{s:s,s:s,s:{s:s,s:s}}", "executionId", e->id,
		                             "status", "failed", "error", "code", "INTERNAL",
		                             "message", "out of memory building the outcome");
		e->host->done(e->ud, e, fallback);
		json_decref(fallback);
	}
	maybe_release(e);
}

static void on_deliver_timer(uv_timer_t *t)
{
	deliver(t->data);
}

void codepod_exec_finish(struct codepod_exec *e, enum cp_code code, const char *fmt, ...)
{
	if (e->state >= CODEPOD_ST_FINISHING)
		return;
	exec_set_state(e, CODEPOD_ST_FINISHING);
	e->t_end_ms = codepod_exec_now_ms();
	e->code = code;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof e->message, fmt, ap);
	va_end(ap);
	if (code != CP_OK) {
		json_decref(e->result);
		e->result = NULL;
	}
	codepod_calls_cancel_all(e);
	uv_timer_stop(&e->timer);
	uv_timer_stop(&e->cpu_timer);
	uv_timer_stop(&e->quiet_timer);
	uv_timer_stop(&e->hold_timer);
	if (e->proc) {
		/* before the kill: a killed() from inside it brings this forward */
		uv_timer_start(&e->timer, on_deliver_timer, GRACE_MS, 0);
		e->cp->cfg.backend->ops->kill(e->proc);
	} else {
		/* Never deliver from inside the caller's stack. */
		uv_timer_start(&e->timer, on_deliver_timer, 0, 0);
	}
}

int codepod_exec_send_line(struct codepod_exec *e, const char *text, size_t len)
{
	if (!e->proc)
		return CP_E_STATE;
	struct cp_err err;
	int rc = e->cp->cfg.backend->ops->write(e->proc, text, len, &err);
	if (rc)
		codepod_exec_finish(e, CP_E_INTERNAL, "writing to the runner failed: %s", err.msg);
	return rc;
}

int codepod_exec_send(struct codepod_exec *e, json_t *msg)
{
	if (!msg)
		return CP_E_NOMEM;
	size_t n = json_dumpb(msg, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
	char *text = n ? malloc(n + 1) : NULL;
	if (text)
		json_dumpb(msg, text, n, JSON_COMPACT | JSON_ENCODE_ANY);
	json_decref(msg);
	if (!text)
		return CP_E_NOMEM;
	text[n] = '\n';
	int rc = codepod_exec_send_line(e, text, n + 1);
	free(text);
	return rc;
}

/* ---- frames from the runner ---- */

/* The Node.js the runner reports ("v22.12.0"): 1 when codepod can use it
 * (22.13 or later: type stripping), 0 when too old, -1 when unreadable. */
static int node_version_ok(const char *v)
{
	unsigned major = 0, minor = 0;
	if (!v || sscanf(v, "v%3u.%3u", &major, &minor) != 2)
		return -1;
	return major > 22 || (major == 22 && minor >= 13);
}

static void on_ready(struct codepod_exec *e, const char *payload, size_t len)
{
	if (e->state != CODEPOD_ST_STARTING) {
		codepod_exec_finish(e, CP_E_INTERNAL, "control channel: a second ready frame");
		return;
	}
	exec_set_state(e, CODEPOD_ST_RUNNING);
	e->t_ready_ms = codepod_exec_now_ms();
	const struct codepod_backend_ops *ops = e->cp->cfg.backend->ops;
	json_t *v = json_loadb(payload, len, 0, NULL);
	json_int_t pid = json_integer_value(json_object_get(v, "pid"));
	json_int_t start = json_integer_value(json_object_get(v, "start"));
	json_int_t cpu = json_integer_value(json_object_get(v, "cpu"));
	e->hello_cpu_us = cpu > 0 ? (uint64_t)cpu : 0;
	/* A sandbox image's Node older than 22.13 runs plain JavaScript but not
	 * TypeScript: refuse it for every program, naming both versions. */
	const char *node = json_string_value(json_object_get(v, "node"));
	int node_ok = node ? node_version_ok(node) : 1;
	char found[16];
	snprintf(found, sizeof found, "%s", node_ok == 0 ? node : "");
	/* What the program or command needed, the conversation's next waiting
	 * runner loads while it waits (prestart.h). */
	if (e->prestart_noted)
		codepod_prestart_note(e->cp->prestart, e->conversation, e->cmd != NULL,
		                      json_is_true(json_object_get(v, "ts")));
	json_decref(v);
	if (node_ok == 0) {
		codepod_exec_finish(e, CP_E_SANDBOX_UNAVAILABLE,
		               "The sandbox's Node.js is %s; codepod needs 22.13 or later.", found);
		return;
	}
	if (node_ok < 0) {
		codepod_exec_finish(e, CP_E_SANDBOX_UNAVAILABLE,
		               "The sandbox's Node.js reports no readable version; codepod needs "
		               "22.13 or later.");
		return;
	}
	if (pid > 0)
		e->runner_pid = (long)pid;
	if (pid > 1 && ops->note_pid && e->proc)
		ops->note_pid(e->proc, (long)pid, start > 0 ? (unsigned long long)start : 0);
	uv_timer_stop(&e->timer);
	e->deadline_ms = e->t_ready_ms + e->pol.timeout_ms;
	uv_timer_start(&e->timer, on_deadline, e->pol.timeout_ms, 0);
	if (e->pol.max_cpu_ms != CODEPOD_POLICY_NONE && ops->sample)
		uv_timer_start(&e->cpu_timer, on_cpu_poll, CPU_POLL_MS, CPU_POLL_MS);
}

static void on_return(struct codepod_exec *e, const char *payload, size_t len)
{
	if (e->npending) { /* it did not wait for a call that needs approval */
		codepod_approval_suspend(e);
		return;
	}
	if (e->replay && json_array_size(e->replay) > e->ncalls) {
		codepod_exec_finish(e, CP_E_REPLAY_DIVERGED,
		                    "On resume the program returned before its tool call %zu, which the "
		                    "suspended run made; a program is run again from the start after an "
		                    "approval and must make the same calls before a gated call.",
		                    e->ncalls + 1);
		return;
	}
	e->result_bytes = len;
	if (len > e->pol.max_result_bytes) {
		codepod_exec_finish(e, CP_E_RESULT_TOO_LARGE,
		               "The result is %zu bytes, over the limit of %llu bytes "
		               "(maxResultBytes). Return a summary, or save the full "
		               "output to a workspace file and return its path.",
		               len, (unsigned long long)e->pol.max_result_bytes);
		return;
	}
	if (len == 0) {
		codepod_exec_finish(e, CP_OK, "%s", "");
		return;
	}
	if (cp_json_text_depth(payload, len, CODEPOD_MAX_JSON_DEPTH) > CODEPOD_MAX_JSON_DEPTH) {
		codepod_exec_finish(e, CP_E_SCRIPT_ERROR,
		               "The result nests deeper than %d levels of JSON; flatten it.",
		               CODEPOD_MAX_JSON_DEPTH);
		return;
	}
	/* jansson's error text quotes the payload: never put it in a message */
	json_t *v = cp_json_load(payload, len, NULL);
	if (!v) {
		codepod_exec_finish(e, CP_E_INTERNAL, "control channel: the result frame is not valid JSON");
		return;
	}
	e->result = v;
	codepod_exec_finish(e, CP_OK, "%s", "");
	if (e->code != CP_OK) { /* finished earlier: keep no result */
		json_decref(e->result);
		e->result = NULL;
	}
}

static void on_too_large(struct codepod_exec *e, const char *payload, size_t len)
{
	json_t *v = json_loadb(payload, len, 0, NULL);
	json_t *jsize = json_object_get(v, "size");
	json_int_t size = json_is_integer(jsize) ? json_integer_value(jsize) : -1;
	json_decref(v);
	/* The runner sends Z only for a result over the limit: anything else
	 * is not a Z frame the runner wrote. */
	if (size < 0 || (unsigned long long)size <= e->pol.max_result_bytes) {
		codepod_exec_finish(e, CP_E_INTERNAL, "control channel: malformed result-size frame");
		return;
	}
	e->result_bytes = (uint64_t)size;
	codepod_exec_finish(e, CP_E_RESULT_TOO_LARGE,
	               "The result is %lld bytes, over the limit of %llu bytes "
	               "(maxResultBytes). Return a summary, or save the full output "
	               "to a workspace file and return its path.",
	               (long long)size, (unsigned long long)e->pol.max_result_bytes);
}

static json_t *bounded_string(const json_t *v, size_t max)
{
	const char *s = json_string_value(v);
	if (!s)
		return json_string("");
	size_t n = json_string_length(v);
	if (n > max) {
		n = max;
		while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
			n--; /* never cut a UTF-8 character */
	}
	return json_stringn(s, n);
}

static void on_throw(struct codepod_exec *e, const char *payload, size_t len)
{
	json_t *v = json_loadb(payload, len, JSON_ALLOW_NUL, NULL);
	if (!json_is_object(v)) {
		json_decref(v);
		codepod_exec_finish(e, CP_E_INTERNAL, "control channel: malformed error frame");
		return;
	}
	json_decref(e->program_error);
	e->program_error = json_object();
	json_object_set_new(e->program_error, "name", bounded_string(json_object_get(v, "name"), 256));
	json_object_set_new(e->program_error, "message", bounded_string(json_object_get(v, "message"), 8192));
	json_object_set_new(e->program_error, "stack", bounded_string(json_object_get(v, "stack"), 16384));
	json_decref(v);
	codepod_exec_finish(e, CP_E_SCRIPT_ERROR, "The program threw an uncaught error (see programError).");
}

/* The program called process.exit(code): remembered to tell that exit
 * status from a death by signal (the sandbox's init reports a signal S as
 * status 128 + S). Only believed when the process's real end matches. */
static void on_exit_said(struct codepod_exec *e, const char *payload, size_t len)
{
	json_t *v = json_loadb(payload, len, 0, NULL);
	json_t *code = json_object_get(v, "code");
	if (json_is_integer(code) && json_integer_value(code) >= 0 && json_integer_value(code) <= 255)
		e->exit_said = (int)json_integer_value(code);
	json_decref(v);
}

static void sink_raw(void *ud, const char *buf, size_t len)
{
	struct codepod_exec *e = ud;
	codepod_logwin_append(&e->logs, buf, len);
	output(e, 0, buf, len);
}

static void sink_frame(void *ud, char kind, const char *payload, size_t len)
{
	struct codepod_exec *e = ud;
	if (kind == CODEPOD_FRAME_OUT || kind == CODEPOD_FRAME_ERR) {
		codepod_logwin_append(e->cmd && kind == CODEPOD_FRAME_ERR ? &e->errlogs : &e->logs,
		                      payload, len);
		output(e, kind == CODEPOD_FRAME_ERR, payload, len);
		return;
	}
	if (e->state >= CODEPOD_ST_FINISHING)
		return; /* nothing else counts after the end */
	switch (kind) {
	case CODEPOD_FRAME_READY: on_ready(e, payload, len); break;
	case CODEPOD_FRAME_CALL:
		if (e->state != CODEPOD_ST_RUNNING)
			codepod_exec_finish(e, CP_E_INTERNAL, "control channel: tool call before ready");
		else
			codepod_calls_on_frame(e, payload, len);
		break;
	case CODEPOD_FRAME_RESULT: on_return(e, payload, len); break;
	case CODEPOD_FRAME_TOO_BIG: on_too_large(e, payload, len); break;
	case CODEPOD_FRAME_THREW: on_throw(e, payload, len); break;
	case CODEPOD_FRAME_EXIT: on_exit_said(e, payload, len); break;
	case CODEPOD_FRAME_FILE_DATA:
	case CODEPOD_FRAME_FILE_ACK:
	case CODEPOD_FRAME_FILE_DONE:
		if (e->fop)
			codepod_fileop_frame(e, kind, payload, len);
		else
			codepod_exec_finish(e, CP_E_INTERNAL, "control channel: a file frame from a program");
		break;
	case CODEPOD_FRAME_PROCESS_ENDED:
		if (e->cmd)
			codepod_command_ended(e, payload, len);
		else
			codepod_exec_finish(e, CP_E_INTERNAL, "control channel: a process-end frame from a program");
		break;
	case CODEPOD_FRAME_NEVER_SETTLES:
		codepod_exec_finish(e, CP_E_NEVER_SETTLES,
		               "The program awaits something that can never settle "
		               "(no pending tool call, timer or I/O).");
		break;
	default:
		codepod_exec_finish(e, CP_E_INTERNAL, "control channel: unknown frame kind");
	}
}

static const struct codepod_frame_sink frame_sink = { sink_raw, sink_frame };

static void on_out(void *ud, const char *buf, size_t len)
{
	struct codepod_exec *e = ud;
	struct cp_err err;
	if (codepod_frame_feed(e->frames, buf, len, &frame_sink, e, &err) < 0)
		codepod_exec_finish(e, CP_E_INTERNAL, "control channel: %s", err.msg);
}

static void on_exited(void *ud, const struct codepod_proc_exit *ex)
{
	struct codepod_exec *e = ud;
	e->proc = NULL;
	note_usage(e, &ex->usage, 0);
	int cut = codepod_frame_finish(e->frames, &frame_sink, e);
	if (!cut && e->state < CODEPOD_ST_FINISHING && codepod_fileop_pending(e))
		return; /* a read's end is held until its last chunks are taken */
	/* A stream that was lost explains a cut frame: the loss decides the
	 * outcome (a tool call in flight makes it unknown). */
	if (cut && !ex->lost && !ex->unavailable && e->state < CODEPOD_ST_FINISHING)
		codepod_exec_finish(e, CP_E_PROCESS_EXITED, "The runner process ended in the middle of a control frame.");
	if (e->state < CODEPOD_ST_FINISHING) {
		int oom = ex->oom || e->oom_seen;
		if (ex->unavailable)
			codepod_exec_finish(e, CP_E_SANDBOX_UNAVAILABLE, "The sandbox is unavailable: %s", ex->detail);
		else if (ex->oom && ex->detail[0]) /* also when the stream went with the container */
			codepod_exec_finish(e, CP_E_PROCESS_EXITED,
			               "The runner process ran out of memory and was killed: %s.", ex->detail);
		else if (ex->disk_full && e->fop)
			codepod_exec_finish(e, CP_E_FILE_TOO_LARGE,
			               "The workspace is full (its size ceiling): %s; nothing was replaced.",
			               ex->detail);
		else if (ex->disk_full)
			codepod_exec_finish(e, CP_E_PROCESS_EXITED,
			               "The execution was stopped: %s. A file past the bound would get the "
			               "pod evicted, and its workspace with it.", ex->detail);
		else if (ex->lost)
			codepod_exec_finish(e, codepod_calls_any_in_flight(e) ? CP_E_OUTCOME_UNKNOWN : CP_E_PROCESS_EXITED,
			               "The connection to the runner process was lost: %s", ex->detail);
		else if (oom)
			codepod_exec_finish(e, CP_E_PROCESS_EXITED,
			               "The runner process ran out of memory (limit %llu MiB) and was killed.",
			               (unsigned long long)e->pol.max_memory_mb);
		else if (ex->signal && e->exit_said != 128 + ex->signal)
			codepod_exec_finish(e, CP_E_PROCESS_EXITED,
			               "The runner process was killed by signal %d (%s) before the program returned.",
			               ex->signal, strsignal(ex->signal));
		else
			codepod_exec_finish(e, CP_E_PROCESS_EXITED,
			               "The runner process exited with code %d before the program returned.",
			               ex->signal ? 128 + ex->signal : ex->code);
	}
	if (e->state == CODEPOD_ST_DONE)
		maybe_release(e);
	else
		deliver(e);
}

/* The killed tree runs nothing more and its output up to the kill is in:
 * the outcome goes out now, not once the processes have been reaped (the
 * execution is released, and the conversation's next runner started, only
 * after exited()). */
static void on_killed(void *ud, const struct codepod_usage *u)
{
	struct codepod_exec *e = ud;
	note_usage(e, u, 0);
	if (e->state == CODEPOD_ST_FINISHING)
		uv_timer_start(&e->timer, on_deliver_timer, 0, 0);
}

/* ---- timers ---- */

static void on_startup_timeout(uv_timer_t *t)
{
	struct codepod_exec *e = t->data;
	codepod_exec_finish(e, CP_E_STARTUP_TIMEOUT,
	               "The sandbox and runner did not start within startupTimeoutMs (%llu ms).",
	               (unsigned long long)e->pol.startup_timeout_ms);
}

void codepod_exec_rearm(struct codepod_exec *e)
{
	if (e->state == CODEPOD_ST_RUNNING) {
		uv_timer_stop(&e->timer);
		uv_timer_start(&e->timer, on_deadline, e->pol.timeout_ms, 0);
	}
}

static void on_deadline(uv_timer_t *t)
{
	struct codepod_exec *e = t->data;
	if (e->fop) {
		codepod_exec_finish(e, CP_E_TIMEOUT,
		                    "The file operation made no progress within timeoutMs (%llu ms).",
		                    (unsigned long long)e->pol.timeout_ms);
		return;
	}
	if (e->cmd) {
		codepod_exec_finish(e, CP_E_TIMEOUT,
		                    "The command did not finish within timeoutMs (%llu ms); it was killed.",
		                    (unsigned long long)e->pol.timeout_ms);
		return;
	}
	codepod_exec_finish(e, CP_E_TIMEOUT,
	               "The program did not finish within timeoutMs (%llu ms), "
	               "time spent waiting on tools included.",
	               (unsigned long long)e->pol.timeout_ms);
}

void codepod_exec_pause_deadline(struct codepod_exec *e)
{
	if (e->state != CODEPOD_ST_RUNNING)
		return;
	uint64_t now = codepod_exec_now_ms();
	e->deadline_left_ms = e->deadline_ms > now ? e->deadline_ms - now : 0;
	uv_timer_stop(&e->timer);
}

void codepod_exec_resume_deadline(struct codepod_exec *e)
{
	if (e->state != CODEPOD_ST_RUNNING)
		return;
	e->deadline_ms = codepod_exec_now_ms() + e->deadline_left_ms;
	uv_timer_start(&e->timer, on_deadline, e->deadline_left_ms, 0);
}

/* ---- submit ---- */

static int parse_tools(const json_t *tools, json_t **out, struct cp_err *err)
{
	if (!tools || json_is_null(tools)) {
		*out = json_array();
		return 0;
	}
	if (!json_is_array(tools))
		return cp_err_set(err, CP_E_INVALID_REQUEST, "tools must be an array");
	if (json_array_size(tools) > 1000)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "at most 1000 tools");
	size_t i;
	const json_t *t;
	json_array_foreach(tools, i, t) {
		const json_t *name = json_object_get(t, "name");
		const json_t *en = json_object_get(t, "enabled");
		if (!json_is_object(t) || !json_is_string(name) || json_string_length(name) == 0 ||
		    json_string_length(name) > 128 || strlen(json_string_value(name)) != json_string_length(name))
			return cp_err_set(err, CP_E_INVALID_REQUEST,
			                  "tools[%zu].name must be a string of 1 to 128 characters", i);
		if (en && !json_is_boolean(en))
			return cp_err_set(err, CP_E_INVALID_REQUEST, "tools[%zu].enabled must be a boolean", i);
		for (size_t j = 0; j < i; j++) /* at most 1000 tools: quadratic is fine */
			if (strcmp(json_string_value(json_object_get(json_array_get(tools, j), "name")),
			           json_string_value(name)) == 0)
				return cp_err_set(err, CP_E_INVALID_REQUEST,
				                  "tools[%zu].name: duplicate tool name %s (also tools[%zu])",
				                  i, json_string_value(name), j);
	}
	int rc = codepod_approval_tools(tools, err);
	if (rc)
		return rc;
	*out = json_deep_copy(tools);
	return *out ? 0 : cp_err_set(err, CP_E_NOMEM, "out of memory");
}

static const char *req_string(const json_t *req, const char *key, size_t max,
                              struct cp_err *err)
{
	const json_t *v = json_object_get(req, key);
	if (!v) {
		cp_err_set(err, CP_E_INVALID_REQUEST, "missing field: %s", key);
		return NULL;
	}
	if (!json_is_string(v)) {
		cp_err_set(err, CP_E_INVALID_REQUEST, "%s must be a string", key);
		return NULL;
	}
	if (json_string_length(v) == 0 || json_string_length(v) > max || strlen(json_string_value(v)) != json_string_length(v)) {
		cp_err_set(err, CP_E_INVALID_REQUEST, "%s must be 1 to %zu bytes", key, max);
		return NULL;
	}
	return json_string_value(v);
}

static json_t *hello_tools(const json_t *tools)
{
	json_t *a = json_array();
	size_t i;
	const json_t *t;
	json_array_foreach(tools, i, t) {
		const json_t *en = json_object_get(t, "enabled");
		json_array_append_new(a, json_pack("{s:O,s:b}", "n", json_object_get(t, "name"),
		                                   "on", en ? json_is_true(en) : 1));
	}
	return a;
}

static int start_runner(struct codepod_exec *e, struct cp_err *err)
{
	struct codepod_backend *b = e->cp->cfg.backend;
	unsigned long mb = (unsigned long)e->pol.max_memory_mb;
	struct codepod_runner_spec spec = { e->conversation, e->id, mb, e->tag, 0,
	                                    e->pol.max_workspace_bytes, e->pol.max_workspace_files };
	/* A runner already waiting serves this execution (and only this one);
	 * its tag is the one the hello must carry. */
	if (!codepod_prestart_take(e->cp->prestart, &spec, e->id, &proc_cbs, e, &e->proc, e->tag)) {
		int rc = codepod_runner_spawn(b, &spec, &proc_cbs, e, &e->proc, err);
		if (rc)
			return rc;
	} else {
		e->prestarted = 1;
	}
	e->prestart_noted = 1;
	e->trace.t_acquired_ms = codepod_exec_now_ms();
	codepod_prestart_exec_started(e->cp->prestart, &spec);
	if (e->fop)
		codepod_prestart_no_program(e->cp->prestart, e->conversation);
	json_t *hello = json_pack("{s:s,s:s,s:s,s:s%,s:s,s:o,s:{s:I,s:I,s:i}}",
	                          "k", "hello", "nonce", e->nonce, "tag", e->tag,
	                          "src", e->src, e->src_len,
	                          "file", "script.ts", "tools", hello_tools(e->tools), "lim",
	                          "maxToolInputBytes", (json_int_t)e->pol.max_tool_input_bytes,
	                          "maxResultBytes", (json_int_t)e->pol.max_result_bytes,
	                          "maxDepth", CODEPOD_MAX_JSON_DEPTH);
	if (hello && e->cmd)
		json_object_set(hello, "cmd", e->cmd);
	if (hello && e->fop) {
		json_t *lim = json_object_get(hello, "lim");
		json_object_set_new(hello, "fop", codepod_fileop_hello(e));
		json_object_set_new(lim, "maxFileBytes", json_integer((json_int_t)e->pol.max_file_bytes));
		/* no kernel says ENOSPC there: the runner holds a write to the bound */
		if (b->ws_unbounded)
			json_object_set_new(lim, "maxWorkspaceBytes",
			                    json_integer((json_int_t)e->pol.max_workspace_bytes));
	}
	codepod_exec_send(e, hello);
	return 0;
}

static int make_nonce(char out[33], struct cp_err *err)
{
	unsigned char raw[16];
	if (RAND_bytes(raw, sizeof raw) != 1)
		return cp_err_set(err, CP_E_INTERNAL, "no randomness for the channel key");
	cp_hex_encode(raw, sizeof raw, out);
	return 0;
}

static int exec_init(struct codepod_exec *e, const json_t *request, struct cp_err *err)
{
	const char *id = req_string(request, "id", 256, err);
	if (!id)
		return CP_E_INVALID_REQUEST;
	e->id = strdup(id);
	const char *conv = req_string(request, "conversation", 1024, err);
	if (!conv)
		return CP_E_INVALID_REQUEST;
	e->conversation = strdup(conv);
	if (!e->id || !e->conversation)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	int trc = codepod_trace_init(e, request, err);
	if (trc)
		return trc;
	const char *type = json_string_value(json_object_get(request, "type"));
	if (type && strcmp(type, "command") == 0) {
		int crc = codepod_command_init(e, request, err); /* sets e->src */
		if (crc)
			return crc;
	} else if (codepod_fileop_type(type)) {
		int crc = codepod_fileop_init(e, type, request, err); /* sets e->src */
		if (crc)
			return crc;
	} else {
		const json_t *js = json_object_get(request, "js");
		if (!js)
			return cp_err_set(err, CP_E_INVALID_REQUEST, "missing field: js");
		if (!json_is_string(js))
			return cp_err_set(err, CP_E_INVALID_REQUEST, "js must be a string");
		e->src_len = json_string_length(js);
		e->src = malloc(e->src_len + 1);
		if (!e->src)
			return cp_err_set(err, CP_E_NOMEM, "out of memory");
		memcpy(e->src, json_string_value(js), e->src_len + 1);
	}
	e->pol = e->cp->cfg.defaults;
	int rc = codepod_policy_apply(&e->pol, json_object_get(request, "policy"), &e->cp->cfg.ceiling, err);
	if (rc)
		return rc;
	rc = parse_tools(json_object_get(request, "tools"), &e->tools, err);
	if (rc)
		return rc;
	e->tool_index = json_object();
	size_t i;
	json_t *t;
	json_array_foreach(e->tools, i, t) {
		if (!e->tool_index ||
		    json_object_set_nocheck(e->tool_index, json_string_value(json_object_get(t, "name")), t))
			return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	json_t *pol = codepod_policy_to_json(&e->pol);
	rc = codepod_digest(e->src, e->src_len, e->tools, pol, e->digest, err);
	json_decref(pol);
	if (rc)
		return rc;
	const json_t *resume = json_object_get(request, "resume");
	if (resume && !json_is_null(resume)) {
		rc = codepod_approval_resume(e, resume, err);
		if (rc)
			return rc;
	}
	rc = make_nonce(e->nonce, err);
	if (rc == 0)
		rc = make_nonce(e->tag, err);
	if (rc)
		return rc;
	size_t max_frame = e->pol.max_result_bytes > e->pol.max_tool_input_bytes
	                           ? e->pol.max_result_bytes : e->pol.max_tool_input_bytes;
	if (e->fop) /* a listing of 10,000 names, or a chunk */
		max_frame = FILE_FRAME_MAX;
	e->frames = codepod_frame_parser_new(e->nonce, max_frame + FRAME_SLACK);
	if (!e->frames)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	if (e->cmd) {
		rc = codepod_logwin_init(&e->errlogs, e->pol.max_result_bytes, err);
		if (rc)
			return rc;
	}
	rc = codepod_logwin_init(&e->logs, e->pol.max_result_bytes, err);
	/* Last: from here the resume cannot be refused, so its continuation is spent. */
	return rc ? rc : codepod_approval_commit(e, err);
}

int codepod_submit(struct codepod *cp, const json_t *request,
                   const struct codepod_host *host, void *ud,
                   struct codepod_exec **out, struct cp_err *err)
{
	if (!json_is_object(request))
		return cp_err_set(err, CP_E_INVALID_REQUEST, "the request must be a JSON object");
	struct codepod_exec *e = calloc(1, sizeof *e);
	if (!e)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	e->cp = cp;
	e->host = host;
	e->ud = ud;
	e->exit_said = -1;
	e->t_submit_ms = codepod_exec_now_ms();
	int rc = exec_init(e, request, err);
	if (rc) {
		exec_free(e);
		return rc;
	}
	uv_timer_init(cp->cfg.loop, &e->timer);
	uv_timer_init(cp->cfg.loop, &e->cpu_timer);
	uv_timer_init(cp->cfg.loop, &e->quiet_timer);
	uv_timer_init(cp->cfg.loop, &e->hold_timer);
	e->timer.data = e->cpu_timer.data = e->quiet_timer.data = e->hold_timer.data = e;
	e->handles_open = 4;
	cp->running++;
	*out = e;
	cp_log(CP_LOG_INFO, "exec.start", "id", json_string(e->id),
	       "sourceBytes", json_integer((json_int_t)e->src_len), "digest", json_string(e->digest), NULL);
	if (e->src_len > e->pol.max_source_bytes) {
		codepod_exec_finish(e, CP_E_SOURCE_TOO_LARGE,
		               "The program is %zu bytes, over the limit of %llu bytes (maxSourceBytes).",
		               e->src_len, (unsigned long long)e->pol.max_source_bytes);
		return 0;
	}
	uv_timer_start(&e->timer, on_startup_timeout, e->pol.startup_timeout_ms, 0);
	struct cp_err serr;
	if (start_runner(e, &serr)) {
		codepod_exec_finish(e, CP_E_SANDBOX_UNAVAILABLE,
		               "The sandbox could not start the runner: %s", serr.msg);
	}
	return 0;
}

void codepod_stop(struct codepod_exec *e)
{
	codepod_exec_finish(e, CP_E_CANCELLED, "The execution was stopped by the backend.");
}

void codepod_cancel(struct codepod_exec *e, const char *message)
{
	codepod_exec_finish(e, CP_E_CANCELLED, "%s", message);
}

uv_loop_t *codepod_loop(const struct codepod *cp)
{
	return cp->cfg.loop;
}

void codepod_abandon(struct codepod_exec *e)
{
	if (codepod_calls_any_in_flight(e))
		codepod_exec_finish(e, CP_E_OUTCOME_UNKNOWN,
		               "The backend went away while a tool call was in flight; "
		               "its outcome is unknown, so the program's result is not trusted.");
	else
		codepod_exec_finish(e, CP_E_CANCELLED, "The backend went away; the execution was stopped.");
}
