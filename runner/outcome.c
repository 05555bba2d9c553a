/*
 * outcome.c - the outcome of docs/contract.md §4, built once when an
 * execution is delivered.
 */
#include <stdlib.h>

#include "runner/command.h"
#include "runner/fileop.h"

static json_t *calls_json(const struct codepod_exec *e)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < e->ncalls; i++) {
		const struct codepod_call *c = &e->calls[i];
		uint64_t end = c->t_end_ms ? c->t_end_ms : e->t_end_ms;
		char id[24];
		snprintf(id, sizeof id, "%zu", i + 1);
		json_t *o = json_pack("{s:s,s:s,s:s,s:I}", "id", id, "tool", c->tool,
		                      "status", codepod_call_state_name(c->state),
		                      "ms", (json_int_t)(end >= c->t_start_ms ? end - c->t_start_ms : 0));
		if (o && c->broker_reason) {
			json_object_set_new(o, "broker", json_true());
			json_object_set_new(o, "reason", json_string(c->broker_reason));
			if (c->http_status > 0)
				json_object_set_new(o, "httpStatus", json_integer(c->http_status));
		}
		json_array_append_new(a, o);
	}
	return a;
}

static json_t *usage_json(const struct codepod_exec *e, const char *sandbox)
{
	uint64_t startup = (e->t_ready_ms ? e->t_ready_ms : e->t_end_ms) - e->t_submit_ms;
	uint64_t run = e->t_ready_ms ? e->t_end_ms - e->t_ready_ms : 0;
	json_t *u = json_pack("{s:I,s:I,s:I,s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:I}",
	                      "bridgeRequests", (json_int_t)e->requests,
	                      "startupMs", (json_int_t)startup, "runMs", (json_int_t)(e->prior.run_ms + run),
	                      "sandbox", sandbox, "digest", e->digest,
	                      "wallMs", (json_int_t)(e->t_end_ms - e->t_submit_ms),
	                      "toolCalls", (json_int_t)(e->prior.tool_calls + e->tool_calls),
	                      "toolInputBytes", (json_int_t)(e->prior.in_bytes + e->tool_input_bytes),
	                      "toolOutputBytes", (json_int_t)(e->prior.out_bytes + e->tool_output_bytes),
	                      "logBytes", (json_int_t)e->logs.total,
	                      "resultBytes", (json_int_t)e->result_bytes);
	/* Only what the backend measured: a pod without a supervisor reads
	 * nothing, and "0" would be a figure it never had. */
	/* A resumed execution's figures are those of all its runs together. */
	if (u && e->replay)
		json_object_set_new(u, "runs", json_integer((json_int_t)(e->prior.runs + 1)));
	if (u && e->usage.known) {
		json_object_set_new(u, "cpuMs", json_integer((json_int_t)(e->prior.cpu_ms +
		                                                          codepod_exec_cpu_us(e) / 1000u)));
		json_object_set_new(u, "maxRssBytes", json_integer((json_int_t)e->usage.max_rss_bytes));
	}
	/* The first execution after its workspace came back from a snapshot. */
	if (u && e->usage.restored)
		json_object_set_new(u, "restoreMs", json_integer((json_int_t)e->usage.restore_ms));
	return u;
}

json_t *codepod_outcome_build(const struct codepod_exec *e)
{
	if (e->fop)
		return codepod_fileop_outcome(e, usage_json(e, e->cp->cfg.backend->name));
	if (e->cmd)
		return codepod_command_outcome(e, usage_json(e, e->cp->cfg.backend->name));
	size_t logs_len = 0;
	char *logs = codepod_logwin_take(&e->logs, &logs_len);
	if (!logs)
		return NULL;
	json_t *o = json_pack("{s:s,s:s,s:s%,s:b,s:o,s:o}", "executionId", e->id,
	                      "status", e->code == CP_OK ? "succeeded" : "failed",
	                      "logs", logs, logs_len, "logsTruncated", e->logs.truncated,
	                      "calls", calls_json(e),
	                      "usage", usage_json(e, e->cp->cfg.backend->name));
	free(logs);
	if (!o)
		return NULL;
	/* Calls over the request limit are only counted, by status (all are
	 * denied), so a program firing 100,000 calls cannot inflate the outcome. */
	if (e->calls_omitted)
		json_object_set_new(o, "callsOmitted",
		                    json_pack("{s:I}", "denied", (json_int_t)e->calls_omitted));
	if (e->code == CP_OK && e->result)
		json_object_set(o, "result", e->result);
	codepod_approval_outcome(e, o);
	if (e->code != CP_OK) {
		json_t *err = json_pack("{s:s,s:s}", "code", cp_code_name(e->code), "message", e->message);
		if (err && e->program_error)
			json_object_set(err, "programError", e->program_error);
		json_object_set_new(o, "error", err);
	}
	return o;
}
