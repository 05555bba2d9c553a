/*
 * tool_answer.c - a webhook broker's reply or a tool command's output, read
 * into the call's output or its safe error message (tool_answer.h).
 */
#include <stdio.h>
#include <string.h>

#include "base/jsonutil.h"
#include "broker/tool_answer.h"

int broker_webhook_answer(long status, const char *body, size_t len, json_t **output,
                          char *msg, size_t cap, const char **reason)
{
	*output = NULL;
	*reason = NULL;
	if (status < 200 || status > 299) {
		snprintf(msg, cap, "the tool broker answered HTTP %ld", status);
		*reason = "http_status";
		return 2;
	}
	json_t *v = cp_json_load(body ? body : "", body ? len : 0, NULL);
	json_t *out = json_object_get(v, "output");
	const char *e = json_string_value(json_object_get(v, "error"));
	int rc = 2;
	if (json_is_object(v) && out) {
		*output = json_incref(out);
		rc = 0;
	} else if (json_is_object(v) && e) {
		snprintf(msg, cap, "%s", e);
		rc = 1;
	} else if (json_is_object(v) && json_is_true(json_object_get(v, "suspend"))) {
		snprintf(msg, cap, "the call waits for a person's approval");
		rc = 3;
	} else {
		snprintf(msg, cap, "the tool broker answered with something other than "
		                   "{\"output\": ...} or {\"error\": \"...\"}");
		*reason = "malformed";
	}
	json_decref(v);
	return rc;
}

/* The last non-empty line of @tail, cut to fit. */
static void last_line(const char *tail, size_t len, char *out, size_t cap)
{
	size_t end = tail ? len : 0;
	while (end > 0 && (tail[end - 1] == '\n' || tail[end - 1] == '\r'))
		end--;
	size_t start = end;
	while (start > 0 && tail[start - 1] != '\n')
		start--;
	size_t n = end - start < cap - 1 ? end - start : cap - 1;
	if (n)
		memcpy(out, tail + start, n);
	out[n] = '\0';
}

int broker_cmdtool_answer(int exit_status, int overflow, size_t max_output,
                          const char *out, size_t olen, const char *etail, size_t elen,
                          json_t **output, char *msg, size_t cap)
{
	*output = NULL;
	if (overflow) {
		snprintf(msg, cap, "The tool printed more than %zu bytes.", max_output);
		return 1;
	}
	if (exit_status != 0) {
		last_line(etail, elen, msg, cap);
		if (!msg[0])
			snprintf(msg, cap, "The tool failed (exit status %d).", exit_status);
		return 1;
	}
	if (!(*output = cp_json_load(out ? out : "", out ? olen : 0, NULL))) {
		snprintf(msg, cap, "The tool did not print JSON.");
		return 1;
	}
	return 0;
}
