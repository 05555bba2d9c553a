/*
 * trace.c - an execution's trace context and its spans (exec_int.h).
 *
 * The caller's traceparent makes codepod.execution its child; each tool
 * call's span id is drawn when the call is recorded, so its traceparent
 * goes out with the call whether or not spans are exported. A tool call's
 * span is made as the tool's answer is given to the program, so a long
 * program's calls reach the collector while it runs; the others once, as
 * done() is delivered, from the times the engine kept.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "base/err.h"
#include "base/traceparent.h"
#include "runner/exec_int.h"

static uint64_t unix_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int codepod_trace_init(struct codepod_exec *e, const json_t *request, struct cp_err *err)
{
	struct codepod_trace *t = &e->trace;
	const json_t *tp = json_object_get(request, "traceparent");
	const json_t *ts = json_object_get(request, "tracestate");
	if (tp && !json_is_string(tp))
		return cp_err_set(err, CP_E_INVALID_REQUEST, "traceparent must be a string");
	if (ts && !json_is_string(ts))
		return cp_err_set(err, CP_E_INVALID_REQUEST, "tracestate must be a string");
	if (ts && !tp)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "tracestate needs a traceparent");
	if (tp) {
		struct cp_trace_ctx c;
		int rc = cp_traceparent_parse(json_string_value(tp), json_string_length(tp), &c, err);
		if (rc)
			return rc;
		memcpy(t->trace_id, c.trace_id, sizeof t->trace_id);
		memcpy(t->parent_id, c.span_id, sizeof t->parent_id);
		t->flags = c.flags & 1; /* only "sampled" is defined for version 00 */
		t->has_parent = 1;
	}
	if (ts) {
		int rc = cp_tracestate_check(json_string_value(ts), json_string_length(ts), err);
		if (rc)
			return rc;
		t->tracestate = strdup(json_string_value(ts));
		if (!t->tracestate)
			return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	if (!t->has_parent && !e->cp->cfg.span)
		return 0; /* not traced */
	if (!t->has_parent) {
		int rc = cp_trace_random(t->trace_id, sizeof t->trace_id, err);
		if (rc)
			return rc;
		t->flags = 1;
	}
	for (int i = 0; i < CODEPOD_SPANS; i++) {
		int rc = cp_trace_random(t->span[i], sizeof t->span[i], err);
		if (rc)
			return rc;
	}
	t->anchor_unix_ns = unix_now_ns();
	t->on = 1;
	return 0;
}

void codepod_trace_call(struct codepod_exec *e, struct codepod_call *c)
{
	struct cp_err err;
	if (!e->trace.on || cp_trace_random(c->span_id, sizeof c->span_id, &err))
		return; /* no randomness: the call goes out without a traceparent */
	struct cp_trace_ctx ctx;
	memcpy(ctx.trace_id, e->trace.trace_id, sizeof ctx.trace_id);
	memcpy(ctx.span_id, c->span_id, sizeof ctx.span_id);
	ctx.flags = e->trace.flags;
	cp_traceparent_format(&ctx, c->traceparent);
}

const char *codepod_call_traceparent(const struct codepod_exec *e, const char *call_id)
{
	char *end = NULL;
	unsigned long long n = call_id ? strtoull(call_id, &end, 10) : 0;
	if (!call_id || !*call_id || *end || n == 0 || n > e->ncalls)
		return NULL;
	const char *tp = e->calls[n - 1].traceparent;
	return *tp ? tp : NULL;
}

const char *codepod_exec_tracestate(const struct codepod_exec *e)
{
	return e->trace.tracestate;
}

void codepod_trace_free(struct codepod_exec *e)
{
	free(e->trace.tracestate);
	e->trace.tracestate = NULL;
}

/* ---- spans ---- */

static uint64_t at_ns(const struct codepod_exec *e, uint64_t mono_ms)
{
	if (mono_ms < e->t_submit_ms)
		mono_ms = e->t_submit_ms;
	return e->trace.anchor_unix_ns + (mono_ms - e->t_submit_ms) * 1000000u;
}

/* The conversation key is never sent in clear: its SHA-256 in hex, the
 * same as the audit line's conversationHash, so the two can be joined. */
static void conversation_hash(const char *conv, char out[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	out[0] = '\0';
	if (EVP_Digest(conv, strlen(conv), md, &mdlen, EVP_sha256(), NULL) == 1 && mdlen == 32)
		cp_trace_hex(md, 32, out);
}

static void emit(const struct codepod_exec *e, const char *name, const unsigned char *span,
                 const unsigned char *parent, uint64_t start_ms, uint64_t end_ms, int error,
                 json_t *attrs /* steals */)
{
	if (end_ms < start_ms)
		end_ms = start_ms;
	struct codepod_span sp = {
		name, e->trace.trace_id, span, parent, at_ns(e, start_ms), at_ns(e, end_ms), error,
		attrs, e->trace.tracestate,
	};
	if (attrs)
		e->cp->cfg.span(e->cp->cfg.span_ud, &sp);
	json_decref(attrs);
}

/* One call's span, ended at @end when the call has no end yet. */
static void call_span(struct codepod_exec *e, size_t i, uint64_t end)
{
	struct codepod_call *c = &e->calls[i];
	if (!c->traceparent[0])
		return;
	c->span_sent = 1;
	/* The name only when the execution declared it: an undeclared name is
	 * the program's own text. */
	const char *tool = json_object_get(e->tool_index, c->tool) ? c->tool : "(undeclared)";
	json_t *a = json_pack("{s:I,s:s,s:s,s:I,s:I}", "codepod.call.id", (json_int_t)(i + 1),
	                      "codepod.tool.name", tool, "codepod.call.status",
	                      codepod_call_state_name(c->state), "codepod.call.input_bytes",
	                      (json_int_t)c->input_bytes, "codepod.call.output_bytes",
	                      (json_int_t)c->output_bytes);
	if (a && c->broker_reason)
		json_object_set_new(a, "codepod.call.broker_reason", json_string(c->broker_reason));
	if (a && c->http_status > 0)
		json_object_set_new(a, "http.response.status_code", json_integer(c->http_status));
	emit(e, "codepod.tool_call", c->span_id, e->trace.span[CODEPOD_SPAN_PROGRAM], c->t_start_ms,
	     c->t_end_ms ? c->t_end_ms : end, c->state != CODEPOD_CALL_OK, a);
}

void codepod_trace_emit(struct codepod_exec *e)
{
	const struct codepod_trace *t = &e->trace;
	if (!t->on || !e->cp->cfg.span)
		return;
	uint64_t end = e->t_end_ms ? e->t_end_ms : codepod_exec_now_ms();
	int failed = e->code != CP_OK;
	const char *status = failed ? cp_code_name(e->code) : "OK";
	char conv[65];
	conversation_hash(e->conversation, conv);
	emit(e, "codepod.execution", t->span[CODEPOD_SPAN_EXEC], t->has_parent ? t->parent_id : NULL,
	     e->t_submit_ms, end, failed,
	     json_pack("{s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:b}", "codepod.execution.id", e->id,
	               "codepod.conversation.hash", conv, "codepod.status", status,
	               "codepod.digest", e->digest, "codepod.source.bytes", (json_int_t)e->src_len,
	               "codepod.result.bytes", (json_int_t)e->result_bytes,
	               "codepod.tool_calls", (json_int_t)e->tool_calls,
	               "codepod.bridge_requests", (json_int_t)e->requests,
	               "codepod.cpu_ms", (json_int_t)(codepod_exec_cpu_us(e) / 1000),
	               "codepod.prestarted", e->prestarted));
	uint64_t acquired = t->t_acquired_ms ? t->t_acquired_ms : end;
	json_t *aq = json_pack("{s:s}", "codepod.acquire.kind", e->prestarted ? "warm" : "cold");
	if (aq && e->usage.restored) /* the workspace restored from a snapshot first */
		json_object_set_new(aq, "codepod.restore_ms", json_integer((json_int_t)e->usage.restore_ms));
	emit(e, "codepod.acquire", t->span[CODEPOD_SPAN_ACQUIRE], t->span[CODEPOD_SPAN_EXEC],
	     e->t_submit_ms, acquired, !t->t_acquired_ms && failed, aq);
	if (!t->t_acquired_ms)
		return; /* no runner: nothing started, nothing ran */
	uint64_t ready = e->t_ready_ms ? e->t_ready_ms : end;
	emit(e, "codepod.runner.start", t->span[CODEPOD_SPAN_START], t->span[CODEPOD_SPAN_EXEC],
	     acquired, ready, !e->t_ready_ms, json_pack("{s:b}", "codepod.prestarted", e->prestarted));
	if (!e->t_ready_ms)
		return;
	emit(e, "codepod.program", t->span[CODEPOD_SPAN_PROGRAM], t->span[CODEPOD_SPAN_EXEC],
	     e->t_ready_ms, end, failed,
	     json_pack("{s:s,s:I}", "codepod.status", status, "codepod.result.bytes",
	               (json_int_t)e->result_bytes));
	for (size_t i = 0; i < e->ncalls; i++)
		if (!e->calls[i].span_sent)
			call_span(e, i, end);
}

void codepod_trace_call_end(struct codepod_exec *e, size_t idx)
{
	if (e->trace.on && e->cp->cfg.span && !e->calls[idx].span_sent)
		call_span(e, idx, e->calls[idx].t_end_ms);
}
