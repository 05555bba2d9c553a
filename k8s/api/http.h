/*
 * http.h - HTTPS requests to one Kubernetes API server on a libuv loop,
 * through libcurl's multi-socket interface.
 *
 * A struct k8s_client holds one curl multi handle driven by the loop:
 * CURLMOPT_SOCKETFUNCTION maps curl's sockets onto uv_poll_t handles,
 * CURLMOPT_TIMERFUNCTION onto one uv_timer_t, and both call
 * curl_multi_socket_action() (curl docs/examples/multi-uv.c). Nothing blocks;
 * there is no curl_easy_perform and no global state beyond
 * curl_global_init() (done once by the first k8s_client_new()).
 *
 * TLS: the cluster CA from the config (CURLOPT_CAINFO_BLOB; system roots when
 * absent), the client certificate and key (CURLOPT_SSLCERT_BLOB/SSLKEY_BLOB,
 * PEM), insecure-skip-tls-verify (no peer or host check). tls-server-name:
 * curl 7.88 has no option for the SNI/verification name alone, so the URL
 * names the tls-server-name host and CURLOPT_CONNECT_TO sends the connection
 * to the server's real host and port; the Host header keeps the real
 * host:port. (Limitation: the proxy, if any, sees the tls-server-name host.)
 * proxy-url is passed to CURLOPT_PROXY.
 *
 * Credentials come from a struct k8s_creds (creds.h) owned by the client: a
 * bearer token is added as "Authorization: Bearer", a plugin's certificate
 * replaces the config's. A 401 invalidates the credentials that got it and
 * the request is made once more with fresh ones (token file re-read, plugin
 * re-run); a second 401 is the answer.
 *
 * Each request has a timeout (the whole transfer, CURLOPT_TIMEOUT_MS) or,
 * for streams, an idle limit (no byte for idle_ms); a bounded body
 * (max_body, else CP_E_TOO_BIG); an optional start delay (retries' backoff,
 * served by one client timer). A streaming request (on_data) hands the body
 * of a 2xx answer to on_data as it arrives; the body of a non-2xx answer is
 * buffered as usual for the Status.
 *
 * Loop context: every function is called on the loop thread. Callbacks run
 * from the loop, never from inside k8s_http_request() or k8s_http_cancel().
 *
 * Callback rules: k8s_http_request() returning an error never calls @done;
 * returning 0, @done is called exactly once: with the answer (any HTTP
 * status: err->code == 0), or with an error (no answer: CP_E_TIMEOUT,
 * CP_E_IO, CP_E_TOO_BIG, CP_E_AUTH from a credential plugin, CP_E_CANCELLED
 * after k8s_http_cancel() or k8s_client_close()). on_data is never called
 * after @done. Cancelling from inside on_data or @done of another request is
 * allowed; the cancelled request's @done follows later on the loop.
 *
 * Ownership: k8s_client_new() copies what it needs from the config and
 * returns a new client released by k8s_client_close(), which cancels every
 * request and frees the client once its loop handles are closed (run the
 * loop). k8s_http_request() copies the options' strings and body; the
 * returned struct k8s_http_req * is *borrowed*, valid until @done returns
 * (use it only for k8s_http_cancel() before that). struct k8s_http_resp and
 * the buffers passed to callbacks are *borrowed* for the callback's duration.
 * Never free the client inside one of its callbacks other than with
 * k8s_client_close().
 */
#ifndef K8S_HTTP_H
#define K8S_HTTP_H

#include <stddef.h>

#include <uv.h>

#include "k8s/api/creds.h"
#include "base/err.h"
#include "k8s/api/kubeconfig.h"

#define K8S_HTTP_DEFAULT_MAX_BODY (16u * 1024u * 1024u)

struct k8s_client;
struct k8s_http_req;

struct k8s_http_resp {
	long status;        /* HTTP status */
	const char *body;   /* NUL-terminated (streamed 2xx: empty) */
	size_t len;
	long retry_after_s; /* Retry-After header in seconds, -1 if none */
};

/* @err is NULL when an answer arrived (see resp->status). */
typedef void (*k8s_http_done_fn)(void *arg, const struct k8s_http_resp *resp,
                                 const struct cp_err *err);
/* A chunk of a streamed 2xx body. Return 0, or a negative code (filled into
 * @err) to abort the transfer: @done then gets that error. */
typedef int (*k8s_http_data_fn)(void *arg, const char *buf, size_t len,
                                struct cp_err *err);

struct k8s_http_opts {
	const char *method;        /* "GET", "POST", "DELETE", "PATCH", ... */
	const char *path;          /* "/api/v1/..." with an encoded query */
	const char *content_type;  /* with a body; NULL: "application/json" */
	const char *body;          /* or NULL */
	size_t body_len;
	long timeout_ms;           /* whole transfer; 0: none (then set idle_ms) */
	long idle_ms;              /* abort when nothing arrives for this long; 0: none */
	long delay_ms;             /* start this much later (backoff) */
	size_t max_body;           /* 0: K8S_HTTP_DEFAULT_MAX_BODY */
	k8s_http_data_fn on_data;  /* stream the 2xx body, or NULL */
	k8s_http_done_fn done;
	void *arg;
};

/**
 * k8s_client_new() - a client of the API server of @cfg on @loop.
 * Returns a new client or NULL (CP_E_NOMEM, CP_E_INVALID_REQUEST for a
 * server URL that is not https://host[:port], errors of k8s_creds_new()).
 */
struct k8s_client *k8s_client_new(uv_loop_t *loop, const struct k8s_config *cfg,
                                  struct cp_err *err);

/* The client's loop, namespace of the config, and credential source
 * (borrowed, valid until k8s_client_close()). */
uv_loop_t *k8s_client_loop(const struct k8s_client *c);
const char *k8s_client_namespace(const struct k8s_client *c);
struct k8s_creds *k8s_client_creds(struct k8s_client *c);

/**
 * k8s_http_request() - start a request.
 * @req: receives the borrowed handle (may be NULL).
 * Returns 0 (done will be called), CP_E_STATE (client closing),
 * CP_E_INVALID_REQUEST (no method/path/done), CP_E_NOMEM.
 */
int k8s_http_request(struct k8s_client *c, const struct k8s_http_opts *o,
                     struct k8s_http_req **req, struct cp_err *err);

/* Cancel: done follows with CP_E_CANCELLED unless the answer is already
 * being delivered. @req must not be used after its done returned. */
void k8s_http_cancel(struct k8s_http_req *req);

/* Cancel all requests and free the client once its handles are closed.
 * @c may be NULL. */
void k8s_client_close(struct k8s_client *c);

/* Percent-encode @s for a query value into a new string (free()), or NULL. */
char *k8s_http_escape(const char *s);

#endif
