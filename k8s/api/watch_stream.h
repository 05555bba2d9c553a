/*
 * watch_stream.h - split a Kubernetes watch response into events.
 *
 * A watch answer is a stream of JSON objects, one per line
 * ({"type":"ADDED","object":{...}}\n), cut by the transport at arbitrary
 * places. k8s_watch_feed() takes bytes in any chunking; k8s_watch_next()
 * pulls one complete event at a time. The longest accepted line is fixed at
 * creation: a longer line fails the feed with CP_E_TOO_BIG as soon as it
 * passes the limit (without buffering it whole) and the stream is then dead.
 * An ERROR event carries its Status; a 410 (Expired or Gone) is flagged as
 * `expired` so the caller relists. Blank lines and a trailing CR are ignored.
 *
 * Pure: no I/O, no loop. One object is used by one thread at a time.
 *
 * Ownership: k8s_watch_new() returns a new object freed with
 * k8s_watch_free(). Fed bytes are copied (borrowed for the call only).
 * struct k8s_watch_event is caller-allocated; k8s_watch_next() fills it with
 * a *new* reference `object` and new strings, all released by
 * k8s_watch_event_release(). To keep the object past the release, take your
 * own reference (json_incref) first.
 */
#ifndef K8S_WATCH_STREAM_H
#define K8S_WATCH_STREAM_H

#include <stddef.h>

#include <jansson.h>

#include "base/err.h"
#include "k8s/api/status.h"

enum k8s_watch_type {
	K8S_WATCH_ADDED = 1,
	K8S_WATCH_MODIFIED,
	K8S_WATCH_DELETED,
	K8S_WATCH_BOOKMARK,
	K8S_WATCH_ERROR
};

struct k8s_watch_event {
	enum k8s_watch_type type;
	json_t *object;           /* new reference: the event's object */
	char *resource_version;   /* object.metadata.resourceVersion (new) or NULL */
	struct k8s_status status; /* ERROR events only: the Status (zeroed otherwise) */
	int expired;              /* ERROR with code 410: relist, then rewatch */
};

struct k8s_watch;

/**
 * k8s_watch_new() - create a splitter.
 * @max_line: longest accepted event line in bytes (without the newline), > 0.
 * Returns a new object, or NULL when out of memory or @max_line is 0.
 */
struct k8s_watch *k8s_watch_new(size_t max_line);

/**
 * k8s_watch_feed() - append received bytes.
 * Returns 0, CP_E_TOO_BIG when a line passes max_line (sticky: every later
 * call fails the same way), CP_E_STATE after k8s_watch_finish() or a sticky
 * error, CP_E_NOMEM.
 */
int k8s_watch_feed(struct k8s_watch *w, const void *buf, size_t len,
                   struct cp_err *err);

/**
 * k8s_watch_next() - pull the next complete event.
 * @ev: zeroed, then filled when 1 is returned; release with
 *      k8s_watch_event_release().
 * Returns 1 with an event, 0 when more bytes are needed (or the stream is
 * over), CP_E_PARSE when the next line is not a valid event (the line is
 * consumed; the caller usually drops the watch), a sticky error, CP_E_NOMEM.
 */
int k8s_watch_next(struct k8s_watch *w, struct k8s_watch_event *ev,
                   struct cp_err *err);

/**
 * k8s_watch_finish() - the response ended. A final line without a newline is
 * still delivered by k8s_watch_next() if it is a complete JSON event;
 * otherwise k8s_watch_next() reports CP_E_PARSE ("truncated").
 * Returns 0 or the sticky error.
 */
int k8s_watch_finish(struct k8s_watch *w, struct cp_err *err);

/* Bytes buffered and not yet returned as events. */
size_t k8s_watch_pending(const struct k8s_watch *w);

void k8s_watch_event_release(struct k8s_watch_event *ev);
void k8s_watch_free(struct k8s_watch *w);

/* "ADDED", ... for a type; "?" for anything else. Static string. */
const char *k8s_watch_type_name(enum k8s_watch_type t);

#endif
