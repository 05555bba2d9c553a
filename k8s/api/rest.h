/*
 * rest.h - the pod calls of the Kubernetes REST API, asynchronous, on a
 * struct k8s_client (http.h): get, list (label and field selectors), create,
 * delete (with uid/resourceVersion preconditions), and merge patch (with a
 * metadata.resourceVersion precondition).
 *
 * Answers: a 2xx body is parsed as JSON and handed to the callback; a body
 * that is not JSON is CP_E_PARSE. Every non-2xx answer is parsed with
 * k8s_status_parse() into the callback's struct k8s_status and cp_err
 * (401 CP_E_AUTH, 403 CP_E_DENIED, 404 CP_E_NOT_FOUND, 409 CP_E_CONFLICT,
 * 429/5xx CP_E_RETRY, others CP_E_HTTP; the text names code, reason and
 * message).
 *
 * Retries (bounded by max_attempts, each attempt with its own timeout,
 * exponential backoff with "equal jitter", Retry-After (header, else
 * the Status' retryAfterSeconds) honoured when longer, up to
 * K8S_REST_MAX_RETRY_AFTER_MS):
 *   - 429 on every call: the API server's priority-and-fairness rejects
 *     before the handler runs, so nothing happened (client-go retries it
 *     for every verb too);
 *   - 500/502/503/504 and connection failures (no answer) only on calls
 *     that are safe to repeat: get, list, and delete with a uid
 *     precondition (a repeat can only delete that very pod, or say 404).
 *     Create, patch and an unconditional delete are not repeated: the first
 *     attempt may have taken effect.
 *   - A timeout is not retried: it is the call's answer (CP_E_TIMEOUT), so
 *     a hanging server costs at most timeout_ms per call.
 * A 401 is retried once with refreshed credentials by http.c.
 *
 * Loop context: the client's loop thread only; callbacks run from the loop.
 *
 * Callback rules: a call that returns an error never calls its callback;
 * one that returns 0 calls it exactly once, also after k8s_rest_cancel()
 * (CP_E_CANCELLED) and k8s_client_close(). Do not close the client expecting
 * the callback to be skipped.
 *
 * Ownership: the calls copy their arguments (strings, json_t bodies are
 * serialised at the call). In the callback, @obj, @st and @err are *borrowed*
 * for the callback's duration (json_incref(obj) to keep it). The returned
 * struct k8s_rest_call * is *borrowed*, valid until the callback returns;
 * it is freed by this module.
 */
#ifndef K8S_REST_H
#define K8S_REST_H

#include <jansson.h>

#include "base/err.h"
#include "k8s/api/http.h"
#include "k8s/api/status.h"

#define K8S_REST_DEFAULT_TIMEOUT_MS 30000L
#define K8S_REST_DEFAULT_ATTEMPTS 5
#define K8S_REST_DEFAULT_BACKOFF_MS 200L
#define K8S_REST_DEFAULT_MAX_BACKOFF_MS 10000L
#define K8S_REST_MAX_RETRY_AFTER_MS 60000L /* a longer Retry-After is cut to this */

/* Per-call policy; a zeroed struct (or NULL) means the defaults above. */
struct k8s_rest_opts {
	long timeout_ms;     /* each attempt */
	int max_attempts;    /* 1: no retry */
	long backoff_ms;     /* before the second attempt, doubled each time */
	long max_backoff_ms; /* cap of the backoff (Retry-After may exceed it) */
	size_t max_body;     /* 0: K8S_HTTP_DEFAULT_MAX_BODY */
	long start_delay_ms; /* make the first attempt this much later */
};

struct k8s_rest_call;

/**
 * k8s_rest_fn - the answer of a call.
 * @obj: the parsed 2xx body (Pod, PodList), or NULL on error.
 * @st: the Status of a non-2xx answer, or NULL (success, or no answer).
 * @err: NULL on success.
 */
typedef void (*k8s_rest_fn)(void *arg, json_t *obj, const struct k8s_status *st,
                            const struct cp_err *err);

struct k8s_rest_cb {
	k8s_rest_fn fn;
	void *arg;
};

/* Delete preconditions; NULL members are not sent. */
struct k8s_delete_opts {
	const char *uid;
	const char *resource_version;
	long grace_period_s;    /* < 0: server default */
};

/* @ns NULL: the client's namespace. @call may be NULL. All return 0, or
 * CP_E_INVALID_REQUEST (missing name, bad JSON argument), CP_E_STATE
 * (client closing), CP_E_NOMEM. */
int k8s_pod_get(struct k8s_client *c, const char *ns, const char *name,
                const struct k8s_rest_opts *o, struct k8s_rest_cb cb,
                struct k8s_rest_call **call, struct cp_err *err);

/* Selectors may be NULL; they are percent-encoded here. */
int k8s_pod_list(struct k8s_client *c, const char *ns, const char *label_selector,
                 const char *field_selector, const struct k8s_rest_opts *o,
                 struct k8s_rest_cb cb, struct k8s_rest_call **call, struct cp_err *err);

/* POST the Pod @pod (borrowed, serialised now). Success is 201 with the Pod. */
int k8s_pod_create(struct k8s_client *c, const char *ns, const json_t *pod,
                   const struct k8s_rest_opts *o, struct k8s_rest_cb cb,
                   struct k8s_rest_call **call, struct cp_err *err);

/* DELETE with a DeleteOptions body carrying @d's preconditions (@d may be
 * NULL). A failed precondition is 409 (CP_E_CONFLICT). */
int k8s_pod_delete(struct k8s_client *c, const char *ns, const char *name,
                   const struct k8s_delete_opts *d, const struct k8s_rest_opts *o,
                   struct k8s_rest_cb cb, struct k8s_rest_call **call, struct cp_err *err);

/* PATCH with application/merge-patch+json. @resource_version non-NULL sets
 * metadata.resourceVersion in (a copy of) @patch: the server then refuses a
 * stale object with 409 Conflict. */
int k8s_pod_patch(struct k8s_client *c, const char *ns, const char *name,
                  const json_t *patch, const char *resource_version,
                  const struct k8s_rest_opts *o, struct k8s_rest_cb cb,
                  struct k8s_rest_call **call, struct cp_err *err);

/* The callback follows with CP_E_CANCELLED (unless already delivering). */
void k8s_rest_cancel(struct k8s_rest_call *call);

/* Backoff before attempt @attempt (2, 3, ...): base * 2^(attempt-2), capped,
 * then a uniform pick in [d/2, d]. @rnd: any random value. */
long k8s_rest_backoff(const struct k8s_rest_opts *o, int attempt, unsigned rnd);

#endif
