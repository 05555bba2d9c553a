/*
 * session_int.h - what session.c (the protocol) and hub.c (executions
 * across sessions, kept outcomes) share, and what the unit tests read.
 *
 * An entry is one execution. It is registered in its hub from submit to
 * done; en->s is the session that holds it (its messages go there), NULL
 * while detached. Ownership: the hub's list links entries, session.c
 * allocates and frees them (in done).
 */
#ifndef BROKER_SESSION_INT_H
#define BROKER_SESSION_INT_H

#include "broker/hub.h"
#include "broker/logstream.h"
#include "broker/session.h"

/* A tool_call sent and not yet answered or cancelled: sent again on attach. */
struct pending_call {
	struct pending_call *next;
	json_t *msg; /* the tool_call message */
};

struct entry {
	struct entry *next;            /* the hub's list */
	struct broker_hub *hub;
	struct broker_session *s;      /* NULL while detached */
	struct codepod_exec *exec;
	char *id;
	char *conversation;            /* for the on_outcome hook */
	struct pending_call *calls;    /* oldest first */
	const struct broker_session_hooks *hooks;
	void *hooks_ud;
	int webhook;                   /* brokered by POST /v1/executions: not attachable */
	int command;                   /* a command: command_output, command_result */
	int file;                      /* a file operation: file_chunk, file_ack, file_result */
	int info_sent;                 /* a read's first file_chunk carried size and etag */
	int abandoned;                 /* the grace period passed */
	int forgotten;                 /* its conversation was deleted: its outcome is not kept */
	uint64_t detached_ms;
	struct broker_logstream *ls;   /* "stream": true */
	uv_timer_t *flush;             /* its flush timer (freed on close) */
};

struct broker_session {
	struct codepod *cp;
	struct cp_idset *ids;
	const struct broker_session_io *io;
	void *ud;
	const struct broker_session_hooks *hooks;
	void *hooks_ud;
	struct broker_hub *hub;
	int own_hub;                   /* a private hub (no grace, no retention) */
	int webhook;
	unsigned running;              /* entries with s == this */
	int closed, can_send, drained;
};

/* session.c: the i-th client->server message type of the dispatch table
 * (static), NULL past the last. */
const char *broker_session_type(size_t i);

/* hub.c */
void broker_hub_add(struct broker_hub *h, struct entry *en);
void broker_hub_remove(struct broker_hub *h, struct entry *en);
struct entry *broker_hub_find(struct broker_hub *h, const char *id);
struct entry *broker_hub_entries(struct broker_hub *h);
unsigned broker_hub_grace_s(const struct broker_hub *h);
uint64_t broker_hub_now_ms(const struct broker_hub *h);
/* Keep @outcome (borrowed) for the retention period; @delivered: a session got it. */
void broker_hub_retain(struct broker_hub *h, const char *id, const char *conversation,
                       const json_t *outcome, int delivered);
/* Its conversation deleted: the running executions of @conversation are
 * stopped (CANCELLED, their outcomes not kept) and its kept outcomes go. */
void broker_hub_forget_conversation(struct broker_hub *h, const char *conversation);
/* The kept outcome of @id (borrowed), marked delivered; NULL if none. */
const json_t *broker_hub_take_outcome(struct broker_hub *h, const char *id);

/* session_trace.c: a tool_call message @m gets its call's traceparent and
 * the execute's tracestate, when the execution is traced. */
void broker_session_trace_fields(json_t *m, const struct codepod_exec *e, const char *call);

#endif
