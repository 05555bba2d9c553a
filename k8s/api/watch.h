/*
 * watch.h - a long-lived, self-healing watch of pods on a struct k8s_client.
 *
 * GET /api/v1/namespaces/NS/pods?watch=1&allowWatchBookmarks=true&
 * resourceVersion=RV&timeoutSeconds=T[&labelSelector=..][&fieldSelector=..]
 * streamed through http.c on the client's multi handle; the bytes go to the
 * k8s_watch_* splitter (watch_stream.h), which reassembles lines cut across
 * chunks, and each ADDED/MODIFIED/DELETED/BOOKMARK event goes to on_event.
 * The resourceVersion of every event (bookmarks included) is remembered.
 *
 * Recovery:
 *   - no resourceVersion to start from, or a 410 (HTTP status of the watch,
 *     or an in-stream ERROR with code 410, reason Expired or Gone): relist
 *     (list with the same selectors), hand the PodList to on_resync (it
 *     replaces everything known before), then watch from the list's
 *     resourceVersion;
 *   - the stream ends normally (server timeoutSeconds, or a clean close):
 *     watch again from the last resourceVersion at once (after the reconnect
 *     backoff when that stream delivered no event, so a server that closes
 *     at once is not hammered);
 *   - no answer, a dropped connection, nothing received for idle_ms, a line
 *     that does not parse, 429/5xx, a non-410 ERROR event: watch again from
 *     the last resourceVersion after a backoff (doubling from backoff_ms to
 *     max_backoff_ms, with jitter; Retry-After honoured); it resets after an
 *     event arrives;
 *   - 401 (after the credential refresh of http.c), 403, 404 and other 4xx,
 *     or more than max_failures failures in a row: the watch ends with that
 *     error in on_done.
 *
 * Loop context: the client's loop thread only.
 *
 * Callback rules: k8s_pod_watch_start() returning an error calls nothing.
 * Otherwise on_event/on_resync run any number of times, then on_done runs
 * exactly once (CP_E_CANCELLED after k8s_pod_watch_stop() or
 * k8s_client_close(), else the error that ended the watch); nothing runs
 * after on_done. k8s_pod_watch_stop() may be called from inside on_event or
 * on_resync; no further event is delivered after it returns.
 *
 * Ownership: k8s_pod_watch_start() copies its options. The struct
 * k8s_pod_watch * is *borrowed* by the caller and freed by this module after
 * on_done returns; never use it after that. Events, lists and errors given
 * to callbacks are *borrowed* for the callback's duration (json_incref to
 * keep an object).
 */
#ifndef K8S_WATCH_H
#define K8S_WATCH_H

#include <jansson.h>

#include "base/err.h"
#include "k8s/api/http.h"
#include "k8s/api/watch_stream.h"

#define K8S_POD_WATCH_TIMEOUT_S 300L
#define K8S_POD_WATCH_MAX_LINE (4u * 1024u * 1024u)

struct k8s_pod_watch_ops {
	void (*on_event)(void *arg, const struct k8s_watch_event *ev);
	void (*on_resync)(void *arg, json_t *podlist);
	void (*on_done)(void *arg, const struct cp_err *err);
	void *arg;
};

/* Zeroed members take the defaults. */
struct k8s_pod_watch_opts {
	const char *ns;               /* NULL: the client's namespace */
	const char *label_selector;   /* or NULL */
	const char *field_selector;   /* or NULL */
	const char *resource_version; /* NULL or "": start with a list */
	long timeout_s;               /* server timeoutSeconds; default 300 */
	long idle_ms;                 /* default (timeout_s + 30) s */
	long backoff_ms;              /* default 200 */
	long max_backoff_ms;          /* default 30000 */
	int max_failures;             /* in a row; 0: never give up */
	size_t max_line;              /* default K8S_POD_WATCH_MAX_LINE */
	long list_timeout_ms;         /* each relist attempt; default 30000 */
};

struct k8s_pod_watch_stats {
	unsigned watches;   /* watch requests made */
	unsigned relists;   /* lists made (the first one included) */
	unsigned events;    /* events delivered */
	unsigned failures;  /* failed watches and lists */
};

struct k8s_pod_watch;

/**
 * k8s_pod_watch_start() - start watching.
 * Returns 0 (on_done will be called), CP_E_INVALID_REQUEST (no on_event,
 * on_resync or on_done), CP_E_STATE (client closing), CP_E_NOMEM.
 */
int k8s_pod_watch_start(struct k8s_client *c, const struct k8s_pod_watch_opts *o,
                        const struct k8s_pod_watch_ops *ops, struct k8s_pod_watch **out,
                        struct cp_err *err);

/* Stop: on_done(CP_E_CANCELLED) follows from the loop. Idempotent. */
void k8s_pod_watch_stop(struct k8s_pod_watch *w);

/* The last resourceVersion seen ("" before any); borrowed until the next
 * event or on_done. */
const char *k8s_pod_watch_rv(const struct k8s_pod_watch *w);

void k8s_pod_watch_get_stats(const struct k8s_pod_watch *w, struct k8s_pod_watch_stats *out);

#endif
