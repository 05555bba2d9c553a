/*
 * http_server_trace.c - the W3C trace context headers of
 * POST /v1/executions: `traceparent` and `tracestate` stand for the execute
 * message's fields of the same names (broker/SESSION.md).
 */
#include <string.h>

#include "broker/http_server_int.h"

static int copy_header(struct lws *wsi, const char *name, char *out, size_t cap)
{
	int n = lws_hdr_custom_length(wsi, name, (int)strlen(name));
	if (n <= 0)
		return 0;
	if ((size_t)n >= cap)
		return -1;
	return lws_hdr_custom_copy(wsi, out, (int)cap, name, (int)strlen(name)) == n ? n : -1;
}

void broker_http_trace_read(struct lws *wsi, struct broker_http_pss *pss)
{
	pss->trace.tp_len = copy_header(wsi, "traceparent:", pss->trace.tp, sizeof pss->trace.tp);
	pss->trace.ts_len = copy_header(wsi, "tracestate:", pss->trace.ts, sizeof pss->trace.ts);
}

int broker_http_trace_apply(const struct broker_http_pss *pss, json_t *req, const char **why)
{
	const struct broker_http_trace_hdrs *t = &pss->trace;
	if (t->tp_len < 0 || t->ts_len < 0) {
		*why = t->tp_len < 0 ? "the traceparent header is too long"
		                     : "the tracestate header is over 512 bytes";
		return -1;
	}
	/* The body's fields win over the headers: both name the same thing. */
	if (t->tp_len > 0 && !json_object_get(req, "traceparent")) {
		/* Not UTF-8 is not a traceparent either: a value the engine refuses. */
		json_t *tp = json_stringn(t->tp, (size_t)t->tp_len);
		json_object_set_new(req, "traceparent", tp ? tp : json_string(""));
		if (t->ts_len > 0 && !json_object_get(req, "tracestate")) {
			json_t *ts = json_stringn(t->ts, (size_t)t->ts_len);
			json_object_set_new(req, "tracestate", ts ? ts : json_string("\x01"));
		}
	}
	return 0;
}
