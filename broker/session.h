/*
 * session.h - the session protocol v1.1 (broker/SESSION.md), independent of
 * its transport: JSON messages in (execute, tool_result, tool_error, stop,
 * attach, declarations, hello), JSON messages out (accepted, tool_call,
 * cancel_call, log, result, error, declarations, hello). Used by `codepod serve
 * --stdio` (JSON lines), the WebSocket session and POST /v1/executions.
 *
 * Many executions multiplex on one session; tool calls may be answered in
 * any order. A message that cannot be acted on gets an `error` message
 * (with inReplyTo and, where there is one, call) and nothing else changes:
 * other executions go on.
 *
 * Executions are registered in a hub (hub.h): sessions of one server share
 * it, so a session that drops leaves its executions for another to attach.
 * A session made without a hub gets a private one (no grace, no kept
 * outcomes): closing it abandons its executions, as stdio does on EOF.
 *
 * Loop context: the loop thread only.
 *
 * Ownership: messages given to io->send are borrowed for the call. The
 * engine, the id set and the hub are borrowed and must outlive the session
 * (the hub: until every execution registered in it ended). Lines fed in are
 * borrowed for the call.
 */
#ifndef BROKER_SESSION_H
#define BROKER_SESSION_H

#include <jansson.h>

#include "runner/codepod.h"
#include "broker/hub.h"
#include "base/idset.h"

struct broker_session;

struct broker_session_io {
	/* Send one message to the backend. After broker_session_close this is
	 * called no more. */
	void (*send)(void *ud, const json_t *msg);
	/* Called once when the session was closed and holds no execution any
	 * more: the transport may free the session now (not from inside this
	 * call's caller chain: it may come from the engine's done callback). */
	void (*drained)(void *ud);
	/* Optional (NULL: file_chunk messages): a file read's chunk as raw
	 * bytes (borrowed), for a transport inside codepod (the HTTP file
	 * routes); @info is the first chunk's {"size","etag"}, NULL after.
	 * The transport acks it with a file_ack message as usual. */
	void (*file_data)(void *ud, const char *id, const json_t *info, const char *buf, size_t len);
};

/* @hub: shared by the server's sessions, or NULL for a private one. */
struct broker_session *broker_session_new(struct codepod *cp, struct cp_idset *ids,
                                          struct broker_hub *hub,
                                          const struct broker_session_io *io, void *ud);

/* This session brokers through a webhook (POST /v1/executions): its
 * executions cannot be attached from another session while they run. */
void broker_session_set_webhook(struct broker_session *s);

/* For a webhook session: the broker that should answer tool call @call of
 * execution @id failed (codepod_tool_unreachable; @reason static). Nothing
 * happens when the call no longer waits. */
void broker_session_unreachable(struct broker_session *s, const char *id, const char *call,
                                const char *reason, long http_status);

/* One complete message (a line or a WebSocket text message). */
void broker_session_message(struct broker_session *s, const char *text, size_t len);

/* The same for a message already parsed (borrowed): a transport inside
 * codepod (the HTTP file routes) saves a 350 KB chunk's dump and parse. */
void broker_session_feed(struct broker_session *s, const json_t *msg);

/* A file write's next chunk as raw bytes (borrowed, at most 256 KiB): what
 * a file_chunk message says, without its base64. An error goes back as the
 * message's would; bytes for an operation that has ended are dropped (its
 * outcome answers the request). */
void broker_session_file_bytes(struct broker_session *s, const char *id, const void *buf,
                               size_t len, int last);

/* A message over the transport's size limit arrived and was discarded. */
void broker_session_oversize(struct broker_session *s, unsigned long long len,
                             unsigned long long limit);

/* A message that is not text (a binary WebSocket message) was discarded. */
void broker_session_not_text(struct broker_session *s);

/*
 * broker_session_close - the backend side is done.
 * @can_send: 1 if results may still be sent (stdin closed but stdout open),
 *            0 if the transport is gone (a closed WebSocket).
 * With @can_send 0 and a hub with a grace period, the session's executions
 * are detached: they go on, and another session may attach them. Otherwise
 * they are abandoned (OUTCOME_UNKNOWN when a tool call was in flight, else
 * CANCELLED). drained() follows once the session holds none, possibly
 * before this returns.
 */
void broker_session_close(struct broker_session *s, int can_send);

/* Executions this session holds. */
unsigned broker_session_running(const struct broker_session *s);

/*
 * Optional hooks for a server that shares one engine among many sessions
 * (http_server.c: admission caps, metrics, audit; stdio_serve.c: the cap).
 */
struct broker_session_hooks {
	/* Before an execute is submitted (id already checked against the id
	 * set). Return 0 to go on, or nonzero after setting *code (a static
	 * string such as "TOO_MANY_EXECUTIONS") and msg (NUL-terminated, at
	 * most CP_ERR_MSG_MAX bytes): the execute is answered with an `error`
	 * of that code and nothing runs. May be NULL. */
	int (*admit)(void *ud, const json_t *execute, const char **code, char *msg);
	/* Once per execution, right before its `result` is sent (or kept, when
	 * no session holds it), so a client that has the result finds what the
	 * hook recorded: the request's conversation key and the outcome,
	 * both borrowed for the call. Not called for refused executes. May be
	 * NULL. */
	void (*on_outcome)(void *ud, const char *id, const char *conversation,
	                   const json_t *outcome);
};

/* Set the hooks (borrowed) and their @ud; both must outlive every
 * execution the session starts (they go with a detached execution). */
void broker_session_set_hooks(struct broker_session *s, const struct broker_session_hooks *h,
                              void *ud);

/* Frees the session; only after drained(). A private hub is freed with it. */
void broker_session_free(struct broker_session *s);

#endif
