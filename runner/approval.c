/*
 * approval.c - tool calls that wait for a person: an execution that ends
 * "suspended" with a signed continuation, and the resumed execution that
 * replays the calls of the runs before it (SESSION.md, "Approvals").
 *
 * When a call becomes pending (its tool is declared "approval":"required",
 * or the host answered "suspend"), the execution does not end at once: a
 * Promise.all may still be sending the calls beside it, and calls already
 * handed to the host must be answered so their results go into the log.
 * It ends once no call is queued or in flight and no new call came for
 * QUIET_MS; every call pending by then is in the outcome's "pending". A
 * program that returns with a call pending ends suspended at once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include "runner/continuation.h"
#include "runner/digest.h"
#include "runner/exec_int.h"
#include "runner/spent.h"

#define QUIET_MS 20
#define MAX_DENIAL 4096
#define MAX_HOLD_MS 86400000
#define DEFAULT_HOLD_MS 300000

#define REFUSE(...) cp_err_set(err, CP_E_INVALID_REQUEST, __VA_ARGS__)

int codepod_approval_tools(const json_t *tools, struct cp_err *err)
{
	size_t i;
	const json_t *t;
	json_array_foreach(tools, i, t) {
		const json_t *a = json_object_get(t, "approval");
		const char *s = json_string_value(a);
		const json_t *w = json_object_get(t, "approvalWaitMs");
		if (a && (!s || (strcmp(s, "required") && strcmp(s, "none") && strcmp(s, "hold"))))
			return REFUSE("tools[%zu].approval must be \"required\", \"hold\" or \"none\"", i);
		if (w && (!json_is_integer(w) || json_integer_value(w) < 1 ||
		          json_integer_value(w) > MAX_HOLD_MS))
			return REFUSE("tools[%zu].approvalWaitMs must be an integer from 1 to %d", i,
			              MAX_HOLD_MS);
	}
	return 0;
}

int codepod_approval_gated(const json_t *tool)
{
	const char *s = json_string_value(json_object_get(tool, "approval"));
	return s && strcmp(s, "required") == 0;
}

uint64_t codepod_approval_hold_ms(const json_t *tool)
{
	const char *s = json_string_value(json_object_get(tool, "approval"));
	if (!s || strcmp(s, "hold") != 0)
		return 0;
	json_int_t w = json_integer_value(json_object_get(tool, "approvalWaitMs"));
	return w > 0 ? (uint64_t)w : DEFAULT_HOLD_MS;
}

void codepod_approval_hash(const json_t *input, unsigned char out[32])
{
	memset(out, 0, 32);
	if (!input)
		return;
	char stack[4096];
	size_t n = json_dumpb(input, stack, sizeof stack, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	char *text = stack;
	if (n > sizeof stack) {
		text = malloc(n);
		if (!text)
			return; /* all zeros: a replay of it diverges, never matches wrongly */
		json_dumpb(input, text, n, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	}
	unsigned int len = 0;
	EVP_Digest(text, n, out, &len, EVP_sha256(), NULL);
	if (text != stack)
		free(text);
}

static void to_hex(const unsigned char *b, size_t n, char *out)
{
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hex[b[i] >> 4];
		out[2 * i + 1] = hex[b[i] & 15];
	}
	out[2 * n] = '\0';
}

static const struct codepod_keyring *keys_of(const struct codepod *cp)
{
	return cp->own_keys;
}

static struct codepod_spent *spent_of(const struct codepod *cp)
{
	return cp->own_spent;
}

static int policy_digest(const struct codepod_exec *e, char out[65], struct cp_err *err)
{
	json_t *pol = codepod_policy_to_json(&e->pol);
	int rc = codepod_digest(NULL, 0, NULL, pol, out, err);
	json_decref(pol);
	return rc;
}

/* ---- resume ---- */

static int check_log(const json_t *log, struct cp_err *err)
{
	if (!json_is_array(log))
		return REFUSE("resume.continuation: malformed (no log)");
	size_t i;
	const json_t *en;
	json_array_foreach(log, i, en) {
		const char *s = json_string_value(json_object_get(en, "s"));
		const json_t *h = json_object_get(en, "h");
		if (!json_is_string(json_object_get(en, "t")) || !json_is_string(h) ||
		    json_string_length(h) != 64 || !s ||
		    (strcmp(s, "ok") == 0 && !json_object_get(en, "o")) ||
		    ((strcmp(s, "error") == 0 || strcmp(s, "denied") == 0) &&
		     !json_is_string(json_object_get(en, "m"))) ||
		    (strcmp(s, "ok") && strcmp(s, "error") && strcmp(s, "denied") &&
		     strcmp(s, "pending") && strcmp(s, "cancelled")))
			return REFUSE("resume.continuation: malformed (log entry %zu)", i + 1);
	}
	return 0;
}

/* Each decision onto its pending entry of @log: "dec" (approved) and "dm". */
static int apply_decisions(json_t *log, const json_t *decisions, struct cp_err *err)
{
	if (!json_is_array(decisions))
		return REFUSE("resume.decisions must be an array of {call, approved, message?}");
	size_t i;
	const json_t *d;
	json_array_foreach(decisions, i, d) {
		const char *call = json_string_value(json_object_get(d, "call"));
		const json_t *ok = json_object_get(d, "approved");
		const json_t *m = json_object_get(d, "message");
		char *end = NULL;
		unsigned long long n = call ? strtoull(call, &end, 10) : 0;
		if (!json_is_object(d) || !call || !json_is_boolean(ok) || (m && !json_is_string(m)))
			return REFUSE("resume.decisions[%zu] must be {call: string, approved: boolean, "
			              "message?: string}", i);
		json_t *en = (*call && !*end && n > 0) ? json_array_get(log, (size_t)(n - 1)) : NULL;
		const char *s = json_string_value(json_object_get(en, "s"));
		if (!s || strcmp(s, "pending") != 0)
			return REFUSE("resume.decisions[%zu]: call %.24s is not pending in the continuation",
			              i, call);
		if (json_object_get(en, "dec"))
			return REFUSE("resume.decisions[%zu]: call %.24s is decided twice", i, call);
		if (m && json_string_length(m) > MAX_DENIAL)
			return REFUSE("resume.decisions[%zu].message is over %d bytes", i, MAX_DENIAL);
		json_object_set(en, "dec", (json_t *)ok);
		if (m)
			json_object_set(en, "dm", (json_t *)m);
	}
	json_array_foreach(log, i, d) {
		const char *s = json_string_value(json_object_get(d, "s"));
		if (strcmp(s, "pending") == 0 && !json_object_get(d, "dec"))
			return REFUSE("resume.decisions: no decision for pending call %zu", i + 1);
	}
	return 0;
}

static uint64_t u_field(const json_t *u, const char *k)
{
	json_int_t v = json_integer_value(json_object_get(u, k));
	return v > 0 ? (uint64_t)v : 0;
}

int codepod_approval_resume(struct codepod_exec *e, const json_t *resume, struct cp_err *err)
{
	const json_t *ct = json_object_get(resume, "continuation");
	if (!json_is_object(resume) || !json_is_string(ct))
		return REFUSE("resume must be {continuation: string, decisions: [...]}");
	uint64_t now = (uint64_t)time(NULL);
	json_t *body = NULL;
	int rc = codepod_continuation_open(keys_of(e->cp), json_string_value(ct),
	                                   json_string_length(ct), e->conversation, now, &body, err);
	if (rc)
		return rc;
	char pol[65];
	const char *was_pol = json_string_value(json_object_get(body, "pol"));
	const char *dig = json_string_value(json_object_get(body, "dig"));
	const char *jti = json_string_value(json_object_get(body, "jti"));
	json_t *log = json_object_get(body, "log");
	if (!dig || strcmp(dig, e->digest) != 0)
		rc = REFUSE("resume: the js, tools or policy are not those of the suspended "
		            "execution (its digest differs); send them as they were");
	else if ((rc = policy_digest(e, pol, err)) == 0 &&
	         (!was_pol || strcmp(pol, was_pol) != 0))
		rc = REFUSE("resume: the policy is not that of the suspended execution");
	else if (rc == 0 && codepod_spent_has(spent_of(e->cp), jti, now))
		rc = REFUSE("resume.continuation was already resumed here; each continuation "
		            "resumes once");
	if (rc == 0)
		rc = check_log(log, err);
	if (rc == 0)
		rc = apply_decisions(log, json_object_get(resume, "decisions"), err);
	if (rc == 0) {
		e->replay = json_incref(log);
		snprintf(e->resume_jti, sizeof e->resume_jti, "%s", jti);
		const json_t *u = json_object_get(body, "u");
		e->prior.tool_calls = u_field(u, "toolCalls");
		e->prior.in_bytes = u_field(u, "toolInputBytes");
		e->prior.out_bytes = u_field(u, "toolOutputBytes");
		e->prior.run_ms = u_field(u, "runMs");
		e->prior.cpu_ms = u_field(u, "cpuMs");
		e->prior.runs = u_field(u, "runs");
		e->prior.exp_s = (uint64_t)json_integer_value(json_object_get(body, "exp"));
	}
	json_decref(body);
	return rc;
}

int codepod_approval_commit(struct codepod_exec *e, struct cp_err *err)
{
	if (!e->replay)
		return 0;
	return codepod_spent_add(spent_of(e->cp), e->resume_jti, e->prior.exp_s, err);
}

/* ---- suspend ---- */

static json_t *log_entry(const struct codepod_exec *e, const struct codepod_call *c)
{
	char h[65];
	to_hex(c->hash, sizeof c->hash, h);
	uint64_t end = c->t_end_ms ? c->t_end_ms : codepod_exec_now_ms();
	json_t *en = json_pack("{s:s,s:s,s:I}", "t", c->tool, "h", h, "ms",
	                       (json_int_t)(end >= c->t_start_ms ? end - c->t_start_ms : 0));
	if (!en)
		return NULL;
	(void)e;
	const char *s = "cancelled";
	switch (c->state) {
	case CODEPOD_CALL_OK: s = "ok"; break;
	case CODEPOD_CALL_ERROR: s = "error"; break;
	case CODEPOD_CALL_DENIED: s = "denied"; break;
	case CODEPOD_CALL_PENDING: s = "pending"; break;
	default: break;
	}
	json_object_set_new(en, "s", json_string(s));
	if (c->state == CODEPOD_CALL_OK)
		json_object_set(en, "o", c->output ? c->output : json_null());
	if (c->state == CODEPOD_CALL_ERROR || c->state == CODEPOD_CALL_DENIED)
		json_object_set_new(en, "m", json_string(c->message ? c->message : "The tool failed."));
	return en;
}

static json_t *body_of(const struct codepod_exec *e, struct cp_err *err)
{
	unsigned char raw[16];
	char jti[33], pol[65];
	if (RAND_bytes(raw, sizeof raw) != 1) {
		cp_err_set(err, CP_E_INTERNAL, "no randomness for a continuation id");
		return NULL;
	}
	to_hex(raw, sizeof raw, jti);
	if (policy_digest(e, pol, err))
		return NULL;
	uint64_t now = (uint64_t)time(NULL);
	unsigned ttl = e->cp->cfg.continuation_ttl_s ? e->cp->cfg.continuation_ttl_s
	                                             : CODEPOD_CONTINUATION_DEFAULT_TTL_S;
	uint64_t run = e->t_ready_ms ? codepod_exec_now_ms() - e->t_ready_ms : 0;
	json_t *log = json_array();
	for (size_t i = 0; log && i < e->ncalls; i++)
		if (json_array_append_new(log, log_entry(e, &e->calls[i]))) {
			json_decref(log);
			log = NULL;
		}
	json_t *b = json_pack("{s:s,s:I,s:I,s:s,s:s,s:s,s:o,s:{s:I,s:I,s:I,s:I,s:I,s:I}}",
	                      "conv", e->conversation, "iat", (json_int_t)now,
	                      "exp", (json_int_t)(now + ttl), "jti", jti, "dig", e->digest,
	                      "pol", pol, "log", log, "u",
	                      "toolCalls", (json_int_t)(e->prior.tool_calls + e->tool_calls),
	                      "toolInputBytes", (json_int_t)(e->prior.in_bytes + e->tool_input_bytes),
	                      "toolOutputBytes", (json_int_t)(e->prior.out_bytes + e->tool_output_bytes),
	                      "runMs", (json_int_t)(e->prior.run_ms + run),
	                      "cpuMs", (json_int_t)(e->prior.cpu_ms + codepod_exec_cpu_us(e) / 1000u),
	                      "runs", (json_int_t)(e->prior.runs + 1));
	if (!b)
		cp_err_set(err, CP_E_NOMEM, "out of memory building the continuation");
	return b;
}

void codepod_approval_suspend(struct codepod_exec *e)
{
	if (e->state != CODEPOD_ST_RUNNING)
		return;
	if (e->log_over) {
		codepod_exec_finish(e, CP_E_RESULT_TOO_LARGE,
		                    "The tool outputs before the call that needs approval are over "
		                    "%u bytes, too many to keep in a continuation; the execution "
		                    "cannot be suspended. Make fewer or smaller calls before it.",
		                    CODEPOD_CONTINUATION_MAX_BYTES);
		return;
	}
	struct cp_err err;
	json_t *body = body_of(e, &err);
	char *text = NULL;
	int rc = body ? codepod_continuation_seal(keys_of(e->cp), body, &text, &err) : err.code;
	json_decref(body);
	if (rc == CP_E_TOO_BIG) {
		codepod_exec_finish(e, CP_E_RESULT_TOO_LARGE,
		                    "The execution cannot be suspended: %s. Make fewer or smaller "
		                    "calls before the call that needs approval.", err.msg);
		return;
	}
	if (rc) {
		codepod_exec_finish(e, CP_E_INTERNAL, "The execution cannot be suspended: %s", err.msg);
		return;
	}
	json_decref(e->result);
	e->result = NULL;
	e->continuation = text;
	e->suspended = 1;
	codepod_exec_finish(e, CP_OK, "%s", "");
}

static void on_quiet(uv_timer_t *t)
{
	struct codepod_exec *e = t->data;
	if (e->npending && e->in_flight == 0 && e->q_len == 0 && e->nholding == 0)
		codepod_approval_suspend(e);
}

void codepod_approval_poke(struct codepod_exec *e)
{
	if (e->state != CODEPOD_ST_RUNNING || !e->npending)
		return;
	if (e->in_flight == 0 && e->q_len == 0 && e->nholding == 0)
		uv_timer_start(&e->quiet_timer, on_quiet, QUIET_MS, 0);
	else
		uv_timer_stop(&e->quiet_timer);
}

void codepod_approval_outcome(const struct codepod_exec *e, json_t *o)
{
	if (!e->suspended)
		return;
	json_t *pending = json_array();
	for (size_t i = 0; pending && i < e->ncalls; i++) {
		const struct codepod_call *c = &e->calls[i];
		if (c->state != CODEPOD_CALL_PENDING)
			continue;
		char id[24];
		snprintf(id, sizeof id, "%zu", i + 1);
		json_array_append_new(pending, json_pack("{s:s,s:s,s:O}", "call", id, "tool", c->tool,
		                                         "input", c->input ? c->input : json_null()));
	}
	json_object_set_new(o, "status", json_string("suspended"));
	json_object_set_new(o, "pending", pending);
	json_object_set_new(o, "continuation", json_string(e->continuation));
}
