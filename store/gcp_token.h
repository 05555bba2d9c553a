/*
 * gcp_token.h - an OAuth2 access token from the GCP metadata server, for
 * Google Cloud Storage without static keys: on GKE with Workload Identity
 * (the pod's Kubernetes service account bound to a Google service account
 * by its `iam.gke.io/gcp-service-account` annotation) or on a VM with a
 * service account.
 *
 * The token comes from
 *   GET http://HOST/computeMetadata/v1/instance/service-accounts/default/token
 * with `Metadata-Flavor: Google`, HOST being metadata.google.internal or
 * $GCE_METADATA_HOST (host[:port]; the variable Google's own client
 * libraries read); the answer is {"access_token","expires_in","token_type"}.
 * It is kept and used until it has less than STORE_GCP_REFRESH_S seconds
 * left (half its life for a token shorter-lived than twice that), then
 * fetched again; the owner drops it when the store answers 401 with it.
 * A fetch that gets no answer or a 5xx is tried twice more, after 0.5 s
 * and 1 s (with a loop: GKE's metadata server may not answer a pod's first
 * requests yet), each attempt bounded by 3 s to connect and 10 s in all.
 * No proxy is used for the metadata server (it is link-local).
 *
 * The token is a credential: it is never logged nor put into an error
 * message (the metadata server's answers are reported by status only).
 *
 * Ownership: store_gcp_token_new() returns a new object freed with
 * store_gcp_token_free(), which drops a fetch in flight without @ready.
 * The curl multi is borrowed and must outlive it.
 *
 * Context: the loop thread. @ready is called from the loop, never from
 * inside the call that started the fetch; it may free the object.
 */
#ifndef STORE_GCP_TOKEN_H
#define STORE_GCP_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "base/curl_uv.h"
#include "base/err.h"

#define STORE_GCP_TOKEN_MAX 4096 /* bytes of an access token */
#define STORE_GCP_REFRESH_S 300  /* fetched again with this much left */

struct store_gcp_token;

/* A fetch ended: rc 0 (store_gcp_token_current() has the new token), else
 * CP_E_RETRY (the metadata server did not answer), CP_E_AUTH (it refused:
 * no service account for this pod), CP_E_HTTP or CP_E_PARSE, with @err. */
typedef void (*store_gcp_ready_fn)(void *ud, int rc, const struct cp_err *err);

/**
 * store_gcp_token_new() - a token source; nothing is fetched yet.
 * @loop: for the waits between attempts, or NULL (one attempt a fetch).
 * Returns 0, CP_E_INVALID_REQUEST ($GCE_METADATA_HOST is not host[:port]),
 * CP_E_NOMEM.
 */
int store_gcp_token_new(struct cp_curl *curl, uv_loop_t *loop, store_gcp_ready_fn ready,
                        void *ud, struct store_gcp_token **out, struct cp_err *err);

/** store_gcp_token_free() - drop a fetch in flight (no @ready) and free; NULL ok. */
void store_gcp_token_free(struct store_gcp_token *t);

/**
 * store_gcp_token_current() - the token while it is fresh (borrowed until
 * the next call of this module), else NULL: then store_gcp_token_fetch().
 */
const char *store_gcp_token_current(struct store_gcp_token *t);

/**
 * store_gcp_token_fetch() - ask the metadata server, unless a fetch is
 * running already; @ready follows. Returns 0, or an error without @ready.
 */
int store_gcp_token_fetch(struct store_gcp_token *t, struct cp_err *err);

/** The generation of the token kept: one more for each token fetched. */
unsigned long store_gcp_token_gen(const struct store_gcp_token *t);

/**
 * store_gcp_token_drop() - the store refused the token of generation @gen
 * (401): forget it when it is still the one kept, so the next use fetches
 * a new one.
 */
void store_gcp_token_drop(struct store_gcp_token *t, unsigned long gen);

/** Fetches made so far (for tests and metrics). */
unsigned long store_gcp_token_fetches(const struct store_gcp_token *t);

/** The metadata server's URL in use (no secret in it). */
const char *store_gcp_token_url(const struct store_gcp_token *t);

/**
 * store_gcp_token_parse() - the metadata server's answer (@len bytes of
 * JSON): the access token into @tok (@cap bytes, NUL-terminated) and its
 * lifetime in seconds. The token must be 1 to STORE_GCP_TOKEN_MAX-1
 * printable ASCII characters without spaces (it goes into a header),
 * expires_in a positive integer, token_type "Bearer" when given.
 * Returns 0 or CP_E_PARSE (the message never holds the token); @tok is
 * written only on 0.
 */
int store_gcp_token_parse(const char *body, size_t len, char *tok, size_t cap,
                          uint64_t *expires_in, struct cp_err *err);

#endif
