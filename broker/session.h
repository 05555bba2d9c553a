/*
 * session.h - the session protocol v1 of DESIGN.md section 5, independent of
 * its transport: JSON messages in (execute, tool_result, tool_error, stop),
 * JSON messages out (tool_call, cancel_call, result, error). Used by
 * `codepod serve --stdio` (JSON lines) and the WebSocket session.
 *
 * Many executions multiplex on one session; tool calls may be answered in
 * any order. A message that cannot be acted on gets an `error` message and
 * nothing else changes: other executions go on.
 *
 * Loop context: the loop thread only.
 *
 * Ownership: messages given to io->send are borrowed for the call. The
 * engine and the id set are borrowed and must outlive the session. Lines fed
 * in are borrowed for the call.
 */
#ifndef BROKER_SESSION_H
#define BROKER_SESSION_H

#include <jansson.h>

#include "codepod.h"
#include "idset.h"

struct broker_session;

struct broker_session_io {
	/* Send one message to the backend. After broker_session_close this is
	 * called no more. */
	void (*send)(void *ud, const json_t *msg);
	/* Called once when the session was closed and its last execution ended:
	 * the transport may free the session now (not from inside this call's
	 * caller chain: it is called from the engine's done callback). */
	void (*drained)(void *ud);
};

struct broker_session *broker_session_new(struct codepod *cp, struct cp_idset *ids,
                                          const struct broker_session_io *io, void *ud);

/* One complete message (a line or a WebSocket text message). */
void broker_session_message(struct broker_session *s, const char *text, size_t len);

/* A message over the transport's size limit arrived and was discarded. */
void broker_session_oversize(struct broker_session *s, unsigned long long len,
                             unsigned long long limit);

/*
 * broker_session_close - the backend side is done.
 * @can_send: 1 if results may still be sent (stdin closed but stdout open),
 *            0 if the transport is gone (a closed WebSocket).
 * Running executions are abandoned (OUTCOME_UNKNOWN when a tool call was in
 * flight, else CANCELLED). drained() follows once none is left, possibly
 * before this returns when none was running.
 */
void broker_session_close(struct broker_session *s, int can_send);

unsigned broker_session_running(const struct broker_session *s);

/*
 * Optional hooks for a server that shares one engine among many sessions
 * (http_server.c: admission caps, metrics, audit). Both may be NULL.
 */
struct broker_session_hooks {
	/* Before an execute is submitted (id already checked against the id
	 * set). Return 0 to go on, or nonzero after setting *code (a static
	 * string such as "TOO_MANY_EXECUTIONS") and msg (NUL-terminated, at
	 * most CP_ERR_MSG_MAX bytes): the execute is answered with an `error`
	 * of that code and nothing runs. */
	int (*admit)(void *ud, const json_t *execute, const char **code, char *msg);
	/* Once per execution, right after its `result` was sent (or would have
	 * been, on a closed transport): the request's conversation key and the
	 * outcome, both borrowed for the call. Not called for refused executes. */
	void (*on_outcome)(void *ud, const char *id, const char *conversation,
	                   const json_t *outcome);
};

/* Set the hooks (borrowed; must outlive the session) and their @ud. */
void broker_session_set_hooks(struct broker_session *s, const struct broker_session_hooks *h,
                              void *ud);

/* Stop every running execution (each ends CANCELLED unless it has already
 * ended); the session stays open. For a server's drain deadline. */
void broker_session_stop_all(struct broker_session *s);

/* Frees the session; only after drained(). */
void broker_session_free(struct broker_session *s);

#endif
