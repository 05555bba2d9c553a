/*
 * session_trace.c - the trace context a tool_call message carries
 * (broker/SESSION.md, "Trace context").
 */
#include "broker/session_int.h"

void broker_session_trace_fields(json_t *m, const struct codepod_exec *e, const char *call)
{
	const char *tp = codepod_call_traceparent(e, call);
	if (!tp)
		return;
	json_object_set_new(m, "traceparent", json_string(tp));
	const char *ts = codepod_exec_tracestate(e);
	if (ts)
		json_object_set_new(m, "tracestate", json_string(ts));
}
