/*
 * webhook.h - POST a JSON body to a URL and get the answer, with libcurl's
 * multi-socket interface on the project's libuv loop (base/curl_uv.h).
 * Used by POST /v1/executions to hand tool calls to the backend's broker
 * URL. Nothing blocks.
 *
 * Limits: a whole-transfer timeout per request, an answer body of at most
 * max_body bytes (else CP_E_TOO_BIG), http and https only, no redirects.
 *
 * Callback rules: broker_webhook_post() returning an error never calls
 * @done; returning 0, @done comes exactly once, never from inside
 * broker_webhook_post() or broker_webhook_cancel(): with the answer (err
 * NULL, any HTTP status) or an error (CP_E_TIMEOUT, CP_E_IO, CP_E_TOO_BIG,
 * CP_E_CANCELLED after broker_webhook_cancel()).
 *
 * Loop context: the loop thread only.
 *
 * Ownership: post copies the URL, headers and body. The call handle is
 * borrowed, valid until @done returns. The answer body passed to @done is
 * borrowed for the call. broker_webhook_free() cancels what is left (their
 * @done run first, with CP_E_CANCELLED) and frees the object once its
 * handles are closed (the loop's owner runs the loop after).
 */
#ifndef BROKER_WEBHOOK_H
#define BROKER_WEBHOOK_H

#include <stddef.h>

#include <jansson.h>
#include <uv.h>

#include "base/err.h"
#include "broker/url_guard.h"

struct broker_webhook;
struct broker_webhook_call;

typedef void (*broker_webhook_done_fn)(void *ud, long status, const char *body, size_t len,
                                       const struct cp_err *err);

struct broker_webhook *broker_webhook_new(uv_loop_t *loop, struct cp_err *err);
void broker_webhook_free(struct broker_webhook *w);

/* Every later post is checked by @g (borrowed, outliving @w): its URL at
 * post, and each address libcurl is about to connect to, so a name that
 * resolves to a refused address fails with CP_E_INVALID_REQUEST naming the
 * rule and no connection is made. */
void broker_webhook_set_guard(struct broker_webhook *w, const struct broker_urlguard *g);

/**
 * broker_webhook_post() - POST @body (JSON) to @url, with exactly the
 * headers given (and Content-Type): nothing of any other request's.
 * @headers: a JSON object of extra header names to string values, or NULL.
 * Returns 0 (done follows), CP_E_INVALID_REQUEST (bad headers, or a URL the
 * guard refuses), CP_E_NOMEM.
 */
int broker_webhook_post(struct broker_webhook *w, const char *url, const json_t *headers,
                        const char *body, size_t len, long timeout_ms, size_t max_body,
                        broker_webhook_done_fn done, void *ud,
                        struct broker_webhook_call **out, struct cp_err *err);

/* Abort the request; done follows with CP_E_CANCELLED on a later turn. */
void broker_webhook_cancel(struct broker_webhook_call *c);

#endif
