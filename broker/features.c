/*
 * features.c - the features table: each feature a client can discover, and
 * the servers that have it.
 */
#include "broker/features.h"
#include "base/version.h"

#define BOTH (BROKER_SERVED_STDIO | BROKER_SERVED_LISTEN)

static const struct {
	const char *name;
	unsigned served; /* the broker_served values that have it */
} features[] = {
	/* execute, tool calls and their answers, stop */
	{ "executions", BOTH },
	/* execute's "stream": live log messages */
	{ "stream", BOTH },
	/* the declarations message (and POST /v1/declarations) */
	{ "declarations", BOTH },
	/* a dropped WebSocket session's executions wait to be attached; kept
	 * outcomes, GET /v1/executions/{id}: only sessions of one server can
	 * share executions, so not over stdio */
	{ "attach", BROKER_SERVED_LISTEN },
	/* POST /v1/executions, its tool calls sent to a broker URL */
	{ "webhook", BROKER_SERVED_LISTEN },
	/* the file_* and archive_* messages (and the files and archive routes
	 * of serve --listen) */
	{ "files", BOTH },
	/* the command messages (and POST .../commands) */
	{ "commands", BOTH },
	/* tools that need a person's approval: suspend, resume, hold */
	{ "approvals", BOTH },
	/* execute's traceparent and tracestate, carried by each tool_call */
	{ "traces", BOTH },
};

#define N_FEATURES (sizeof features / sizeof features[0])

const char *broker_feature_name(size_t i)
{
	return i < N_FEATURES ? features[i].name : NULL;
}

json_t *broker_info(enum broker_served served)
{
	json_t *names = json_array();
	for (size_t i = 0; names && i < N_FEATURES; i++)
		if ((features[i].served & (unsigned)served) &&
		    json_array_append_new(names, json_string(features[i].name))) {
			json_decref(names);
			names = NULL;
		}
	if (!names)
		return NULL;
	return json_pack("{s:s,s:s,s:o}", "protocol", BROKER_PROTOCOL_VERSION, "version", CP_VERSION,
	                 "features", names);
}
