/*
 * calls.c - tool calls of one execution: validation against the allowlist
 * and the limits of DESIGN.md section 3, the in-flight cap with a FIFO queue,
 * answers from the host, cancellation at the end.
 *
 * Every check here is authoritative: the runner checks sizes too, but only to
 * save work; a program can bypass it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec_int.h"
#include "jsondepth.h"

#define MAX_TOOL_NAME 128

const char *cp_call_state_name(enum cp_call_state s)
{
	switch (s) {
	case CP_CALL_OK: return "ok";
	case CP_CALL_ERROR: return "error";
	case CP_CALL_DENIED: return "denied";
	default: return "cancelled";
	}
}

static void send_answer(struct codepod_exec *e, size_t idx, const char *kind,
                        const char *key, json_t *value /* steals */)
{
	json_t *m = json_pack("{s:s,s:I,s:o}", "k", kind, "c", (json_int_t)(idx + 1), key, value);
	cp_exec_send(e, m);
}

static void deny(struct codepod_exec *e, size_t idx, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void deny(struct codepod_exec *e, size_t idx, const char *fmt, ...)
{
	char msg[CP_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	struct cp_call *c = &e->calls[idx];
	c->state = CP_CALL_DENIED;
	c->t_end_ms = cp_exec_now_ms();
	json_decref(c->input);
	c->input = NULL;
	send_answer(e, idx, "err", "m", json_string(msg));
}

static int queue_push(struct codepod_exec *e, size_t idx)
{
	if (e->q_len == e->q_cap) {
		size_t cap = e->q_cap ? e->q_cap * 2 : 16;
		size_t *q = malloc(cap * sizeof *q);
		if (!q)
			return CP_E_NOMEM;
		for (size_t i = 0; i < e->q_len; i++)
			q[i] = e->queue[(e->q_head + i) % e->q_cap];
		free(e->queue);
		e->queue = q;
		e->q_cap = cap;
		e->q_head = 0;
	}
	e->queue[(e->q_head + e->q_len) % e->q_cap] = idx;
	e->q_len++;
	return 0;
}

static size_t queue_pop(struct codepod_exec *e)
{
	size_t idx = e->queue[e->q_head];
	e->q_head = (e->q_head + 1) % e->q_cap;
	e->q_len--;
	return idx;
}

/* Hands queued calls to the host while slots are free. The host may answer
 * (or stop the execution) from inside tool_call, which re-enters here: the
 * flag turns that into another turn of this loop instead of recursion. */
static void pump(struct codepod_exec *e)
{
	if (e->pumping) {
		e->pump_again = 1;
		return;
	}
	e->pumping = 1;
	do {
		e->pump_again = 0;
		while (e->state == CP_ST_RUNNING && e->q_len > 0 &&
		       e->in_flight < e->pol.max_in_flight) {
			size_t idx = queue_pop(e);
			struct cp_call *c = &e->calls[idx];
			json_t *input = c->input;
			c->input = NULL;
			c->state = CP_CALL_IN_FLIGHT;
			e->in_flight++;
			char id[24];
			snprintf(id, sizeof id, "%zu", idx + 1);
			e->host->tool_call(e->ud, e, id, c->tool, input);
			json_decref(input);
		}
	} while (e->pump_again);
	e->pumping = 0;
}

static const json_t *find_tool(const struct codepod_exec *e, const char *name)
{
	size_t i;
	const json_t *t;
	json_array_foreach(e->tools, i, t) {
		if (strcmp(json_string_value(json_object_get(t, "name")), name) == 0)
			return t;
	}
	return NULL;
}

/* The runner writes {"c":N,"t":NAME,"i":INPUT} in that order. For an input
 * too deep to parse safely, read only the envelope before "i". */
static json_t *parse_envelope(const char *payload, size_t len, int *too_deep)
{
	*too_deep = cp_json_text_depth(payload, len, CP_MAX_JSON_DEPTH + 1) > CP_MAX_JSON_DEPTH + 1;
	if (!*too_deep)
		return json_loadb(payload, len, JSON_ALLOW_NUL, NULL);
	const char *i = memmem(payload, len, ",\"i\":", 5);
	if (!i)
		return NULL;
	size_t head = (size_t)(i - payload);
	char *copy = malloc(head + 2);
	if (!copy)
		return NULL;
	memcpy(copy, payload, head);
	copy[head] = '}';
	copy[head + 1] = '\0';
	json_t *v = json_loadb(copy, head + 1, 0, NULL);
	free(copy);
	return v;
}

static int add_call(struct codepod_exec *e, const char *tool)
{
	if (e->ncalls == e->calls_cap) {
		size_t cap = e->calls_cap ? e->calls_cap * 2 : 16;
		struct cp_call *c = realloc(e->calls, cap * sizeof *c);
		if (!c)
			return CP_E_NOMEM;
		e->calls = c;
		e->calls_cap = cap;
	}
	struct cp_call *c = &e->calls[e->ncalls];
	memset(c, 0, sizeof *c);
	c->tool = strndup(tool, MAX_TOOL_NAME);
	if (!c->tool)
		return CP_E_NOMEM;
	c->t_start_ms = cp_exec_now_ms();
	e->ncalls++;
	e->requests++;
	return 0;
}

/* Decides one call: denied with a safe message, or queued for the host. */
static void admit(struct codepod_exec *e, size_t idx, const json_t *env, int too_deep)
{
	struct cp_call *c = &e->calls[idx];
	const json_t *tool = find_tool(e, c->tool);
	const json_t *input = json_object_get(env, "i");
	const json_t *big = json_object_get(env, "big");
	if (!tool)
		return deny(e, idx, "Unknown tool: %s", c->tool);
	const json_t *en = json_object_get(tool, "enabled");
	if (en && json_is_false(en))
		return deny(e, idx, "Tool is disabled: %s", c->tool);
	if (too_deep)
		return deny(e, idx, "Tool input for %s nests deeper than %d levels of JSON.",
		            c->tool, CP_MAX_JSON_DEPTH);
	size_t size = big ? (size_t)json_integer_value(big)
	                  : (input ? json_dumpb(input, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY) : 0);
	if (big || size > e->pol.max_tool_input_bytes)
		return deny(e, idx, "Tool input for %s is %zu bytes, over the limit of %llu "
		            "bytes (maxToolInputBytes).", c->tool, size,
		            (unsigned long long)e->pol.max_tool_input_bytes);
	if (!input)
		return deny(e, idx, "Tool input for %s is missing.", c->tool);
	if (cp_json_value_depth(input, CP_MAX_JSON_DEPTH) > CP_MAX_JSON_DEPTH)
		return deny(e, idx, "Tool input for %s nests deeper than %d levels of JSON.",
		            c->tool, CP_MAX_JSON_DEPTH);
	c->input = json_incref((json_t *)input);
	c->state = CP_CALL_QUEUED;
	if (queue_push(e, idx)) {
		cp_exec_finish(e, CP_E_INTERNAL, "out of memory queueing a tool call");
		return;
	}
	pump(e);
}

void cp_calls_on_frame(struct codepod_exec *e, const char *payload, size_t len)
{
	int too_deep = 0;
	json_t *env = parse_envelope(payload, len, &too_deep);
	const json_t *n = json_object_get(env, "c");
	const char *tool = json_string_value(json_object_get(env, "t"));
	if (!json_is_object(env) || !json_is_integer(n) || !tool) {
		json_decref(env);
		cp_exec_finish(e, CP_E_INTERNAL, "control channel: malformed tool call frame");
		return;
	}
	if ((uint64_t)json_integer_value(n) != e->requests + 1) {
		json_decref(env);
		cp_exec_finish(e, CP_E_INTERNAL, "control channel: tool call numbered out of order");
		return;
	}
	if (e->requests >= e->pol.max_bridge_requests) {
		/* Over the request limit: denied and counted, not listed, so the
		 * outcome stays within maxBridgeRequests entries (callsOmitted). */
		json_decref(env);
		e->requests++;
		e->calls_omitted++;
		char msg[CP_ERR_MSG_MAX];
		snprintf(msg, sizeof msg, "Tool request limit reached: at most %llu tool requests "
		         "per execution (maxBridgeRequests).",
		         (unsigned long long)e->pol.max_bridge_requests);
		send_answer(e, (size_t)(e->requests - 1), "err", "m", json_string(msg));
		return;
	}
	if (add_call(e, tool)) {
		json_decref(env);
		cp_exec_finish(e, CP_E_INTERNAL, "out of memory recording a tool call");
		return;
	}
	admit(e, e->ncalls - 1, env, too_deep);
	json_decref(env);
}

/* The call a host answer names, if it is waiting for one. */
static struct cp_call *waiting_call(struct codepod_exec *e, const char *call_id,
                                    size_t *idx, struct cp_err *err)
{
	char *end = NULL;
	unsigned long long n = call_id ? strtoull(call_id, &end, 10) : 0;
	if (!call_id || !*call_id || *end || n == 0 || n > e->ncalls ||
	    e->calls[n - 1].state != CP_CALL_IN_FLIGHT || e->state >= CP_ST_FINISHING) {
		cp_err_set(err, CP_E_NOT_FOUND, "no tool call %.64s is waiting for an answer",
		           call_id ? call_id : "(null)");
		return NULL;
	}
	*idx = (size_t)(n - 1);
	return &e->calls[n - 1];
}

static void answered(struct codepod_exec *e, struct cp_call *c, enum cp_call_state st)
{
	c->state = st;
	c->t_end_ms = cp_exec_now_ms();
	e->in_flight--;
	pump(e);
}

int codepod_tool_result(struct codepod_exec *e, const char *call_id,
                        const json_t *output, struct cp_err *err)
{
	size_t idx;
	struct cp_call *c = waiting_call(e, call_id, &idx, err);
	if (!c)
		return CP_E_NOT_FOUND;
	if (!output)
		output = json_null();
	char msg[CP_ERR_MSG_MAX];
	size_t size = json_dumpb(output, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
	if (cp_json_value_depth(output, CP_MAX_JSON_DEPTH) > CP_MAX_JSON_DEPTH) {
		snprintf(msg, sizeof msg, "Tool output of %s nests deeper than %d levels of JSON.",
		         c->tool, CP_MAX_JSON_DEPTH);
	} else if (size > e->pol.max_tool_output_bytes) {
		snprintf(msg, sizeof msg, "Tool output of %s is %zu bytes, over the limit of "
		         "%llu bytes (maxToolOutputBytes).", c->tool, size,
		         (unsigned long long)e->pol.max_tool_output_bytes);
	} else {
		send_answer(e, idx, "res", "o", json_incref((json_t *)output));
		answered(e, c, CP_CALL_OK);
		return 0;
	}
	send_answer(e, idx, "err", "m", json_string(msg));
	answered(e, c, CP_CALL_DENIED);
	return 0;
}

int codepod_tool_error(struct codepod_exec *e, const char *call_id,
                       const char *message, struct cp_err *err)
{
	size_t idx;
	struct cp_call *c = waiting_call(e, call_id, &idx, err);
	if (!c)
		return CP_E_NOT_FOUND;
	const char *m = message ? message : "The tool failed.";
	size_t n = strnlen(m, 4096);
	json_t *text = json_stringn(m, n);
	send_answer(e, idx, "err", "m", text ? text : json_string("The tool failed."));
	answered(e, c, CP_CALL_ERROR);
	return 0;
}

int codepod_tool_unreachable(struct codepod_exec *e, const char *call_id, const char *reason,
                             long http_status, struct cp_err *err)
{
	size_t idx;
	struct cp_call *c = waiting_call(e, call_id, &idx, err);
	if (!c)
		return CP_E_NOT_FOUND;
	char msg[CP_ERR_MSG_MAX];
	snprintf(msg, sizeof msg, "The tool %s could not be reached.", c->tool);
	c->broker_reason = reason ? reason : "unreachable";
	c->http_status = http_status;
	send_answer(e, idx, "err", "m", json_string(msg));
	answered(e, c, CP_CALL_ERROR);
	return 0;
}

int cp_calls_any_in_flight(const struct codepod_exec *e)
{
	return e->in_flight > 0;
}

void cp_calls_cancel_all(struct codepod_exec *e)
{
	uint64_t now = cp_exec_now_ms();
	for (size_t i = 0; i < e->ncalls; i++) {
		struct cp_call *c = &e->calls[i];
		if (c->state != CP_CALL_QUEUED && c->state != CP_CALL_IN_FLIGHT)
			continue;
		int was_in_flight = c->state == CP_CALL_IN_FLIGHT;
		c->state = CP_CALL_CANCELLED;
		c->t_end_ms = now;
		json_decref(c->input);
		c->input = NULL;
		if (was_in_flight) {
			char id[24];
			snprintf(id, sizeof id, "%zu", i + 1);
			e->host->cancel_call(e->ud, e, id);
		}
	}
	e->q_len = 0;
	e->in_flight = 0;
}

void cp_calls_free(struct codepod_exec *e)
{
	for (size_t i = 0; i < e->ncalls; i++) {
		free(e->calls[i].tool);
		json_decref(e->calls[i].input);
	}
	free(e->calls);
	free(e->queue);
}
