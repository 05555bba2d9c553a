/*
 * status.h - parse a Kubernetes `Status` object (metav1.Status).
 *
 * Every non-2xx answer of the API server carries a Status body
 * ({"kind":"Status","status":"Failure","message":...,"reason":...,
 * "details":{...},"code":N}); the exec error channel (3) carries the same
 * object without kind/apiVersion. This module turns either into a
 * struct k8s_status plus a struct cp_err whose text names the HTTP code, the
 * reason and the message. A body that is not a Status (HTML from a proxy,
 * garbage, empty) still yields a clear error carrying the HTTP code.
 *
 * Pure: no I/O, no loop. May be called from any thread.
 *
 * Ownership: struct k8s_status is caller-allocated (usually on the stack)
 * and zero-initialised by the parse functions; its strings and causes are
 * new allocations owned by the struct, released with k8s_status_release()
 * (safe on a zeroed or already released struct). Input buffers and json_t
 * arguments are borrowed for the duration of the call only; nothing steals
 * a reference.
 */
#ifndef K8S_STATUS_H
#define K8S_STATUS_H

#include <stddef.h>

#include <jansson.h>

#include "base/err.h"

/* Bodies larger than this are not parsed (the error still names the code). */
#define K8S_STATUS_MAX_BODY (1024u * 1024u)

struct k8s_status_cause {
	char *reason;  /* "FieldValueRequired", "ExitCode", ... or NULL */
	char *message; /* or NULL */
	char *field;   /* or NULL */
};

struct k8s_status {
	int http_code;  /* the HTTP status of the answer (0 on the exec channel) */
	int code;       /* "code" of the body, else http_code */
	int is_status;  /* 1 when the body was a Status object */
	char *status;   /* "Success" / "Failure", or NULL */
	char *reason;   /* "NotFound", "AlreadyExists", ... or NULL */
	char *message;  /* or NULL */
	char *name;     /* details.name or NULL */
	char *kind;     /* details.kind or NULL */
	int retry_after_seconds; /* details.retryAfterSeconds, 0 if absent */
	struct k8s_status_cause *causes; /* details.causes */
	size_t n_causes;
};

/**
 * k8s_status_parse() - parse the body of a non-2xx answer.
 * @body: the body bytes (borrowed), need not be NUL-terminated; may be NULL
 *        when @len is 0.
 * @len: its length.
 * @http_code: the HTTP status of the answer.
 * @out: filled (zeroed first); release with k8s_status_release(). May be NULL.
 * @err: receives "HTTP 404 NotFound: pods \"x\" not found", or
 *       "HTTP 502: body is not a Kubernetes Status (...)". May be NULL.
 *
 * Always returns a negative code (the answer was an error), chosen from the
 * Status code (or @http_code when the body is not a Status):
 * 401 -> CP_E_AUTH, 403 -> CP_E_DENIED, 404 -> CP_E_NOT_FOUND,
 * 409 -> CP_E_CONFLICT, 429/500/502/503/504 -> CP_E_RETRY, other -> CP_E_HTTP;
 * CP_E_NOMEM when allocation fails.
 */
int k8s_status_parse(const void *body, size_t len, int http_code,
                     struct k8s_status *out, struct cp_err *err);

/**
 * k8s_status_from_json() - fill @out from a Status already parsed by jansson
 * (a watch ERROR event's object). @obj is borrowed.
 *
 * Returns 0, CP_E_PARSE when @obj is not a JSON object, or CP_E_NOMEM.
 */
int k8s_status_from_json(const json_t *obj, int http_code,
                         struct k8s_status *out, struct cp_err *err);

/**
 * k8s_status_exec() - interpret the exec error channel (3) message.
 * @buf, @len: the Status JSON (borrowed), channel byte already removed.
 * @exit_code: receives the command's exit status on success.
 * @out: optional; receives the parsed Status (release it even on error).
 *
 * "Success" -> 0 with *exit_code = 0. "Failure"/"NonZeroExitCode" -> 0 with
 * *exit_code from details.causes[reason=ExitCode].message (0..255).
 * Anything else -> CP_E_HTTP (InternalError and the like; the message is the
 * Status message), CP_E_PARSE when the JSON or the exit code is malformed,
 * CP_E_NOMEM.
 */
int k8s_status_exec(const void *buf, size_t len, int *exit_code,
                    struct k8s_status *out, struct cp_err *err);

/* Map a Status/HTTP code onto a cp_code as k8s_status_parse() does. */
int k8s_status_cp_code(int code);

/* Free what the struct owns and zero it. @st may be NULL. */
void k8s_status_release(struct k8s_status *st);

#endif
