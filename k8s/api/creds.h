/*
 * creds.h - where the bearer token (and a plugin's client certificate) of a
 * Kubernetes client comes from, kept fresh on the loop.
 *
 * One source per client, chosen from the struct k8s_config it is made from:
 *   - a static token (kubeconfig `token`): never changes; a 401 is final;
 *   - a token file (kubeconfig `tokenFile`, the in-cluster service-account
 *     token): re-read when older than K8S_CREDS_FILE_PERIOD_MS and after a
 *     401 (client-go NewCachedFileTokenSource); the read is a small blocking
 *     read of a local file, as at start-up;
 *   - an exec credential plugin (client.authentication.k8s.io v1/v1beta1):
 *     run asynchronously with uv_spawn, KUBERNETES_EXEC_INFO in its
 *     environment (the controller's own environment is never changed), stdout
 *     parsed with k8s_execcred_parse(), stdin not connected, stderr kept
 *     (bounded) for the error text. Its answer is cached until its
 *     expirationTimestamp (forever without one) or a 401; one run at a time,
 *     later callers wait for the running one. A client certificate it returns
 *     replaces the kubeconfig's. A failing plugin fails every waiter with an
 *     error naming the command: `exec plugin "/x/p": exited with status 3:
 *     <first stderr line>`;
 *   - nothing (client certificate only, or anonymous).
 * Every answer carries a generation number; k8s_creds_invalidate() with the
 * generation that got a 401 forces a refresh, so concurrent 401s refresh
 * once (as client-go does).
 *
 * Loop context: everything runs on the thread of the uv loop given to
 * k8s_creds_new(); nothing blocks except the token-file read.
 *
 * Callbacks: k8s_creds_get() either answers at once (returns 1, no callback),
 * fails (returns < 0, the callback is never called), or returns 0 and calls
 * the callback exactly once later: with the credentials, with the plugin's
 * error, or with CP_E_CANCELLED from k8s_creds_cancel()/k8s_creds_close().
 * Never free the source from inside one of its callbacks: call
 * k8s_creds_close(), which frees it once its handles are closed.
 *
 * Ownership: k8s_creds_new() copies what it needs from the config (the
 * config may be released afterwards) and returns a new object released with
 * k8s_creds_close(). struct k8s_cred handed out (by return or callback) is
 * *borrowed*: valid until the callback returns, or for a synchronous answer
 * until control returns to the loop. struct k8s_creds_wait is caller-owned
 * storage the source links into its wait list until the callback runs.
 */
#ifndef K8S_CREDS_H
#define K8S_CREDS_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "base/err.h"
#include "k8s/api/kubeconfig.h"

#define K8S_CREDS_FILE_PERIOD_MS (60u * 1000u)
#define K8S_CREDS_PLUGIN_TIMEOUT_MS (60u * 1000u)
#define K8S_CREDS_PLUGIN_MAX_STDERR 4096u

struct k8s_cred {
	const char *token;        /* bearer token, or NULL */
	const char *cert_pem;     /* client certificate PEM, or NULL */
	size_t cert_len;
	const char *key_pem;      /* its key, or NULL */
	size_t key_len;
	uint64_t generation;      /* pass to k8s_creds_invalidate() on a 401 */
};

struct k8s_creds;

typedef void (*k8s_creds_fn)(void *arg, const struct k8s_cred *cred,
                             const struct cp_err *err);

/* Caller-owned wait-list entry; its contents are private. */
struct k8s_creds_wait {
	struct k8s_creds_wait *next, *prev;
	struct k8s_creds *src;
	k8s_creds_fn cb;
	void *arg;
};

/**
 * k8s_creds_new() - a source for @cfg on @loop.
 * Returns a new source, or NULL with CP_E_NOMEM / CP_E_INVALID_REQUEST in
 * @err (an exec plugin that cannot run without a terminal, ...).
 */
struct k8s_creds *k8s_creds_new(uv_loop_t *loop, const struct k8s_config *cfg,
                                struct cp_err *err);

/**
 * k8s_creds_get() - the current credentials.
 * @w: caller storage, linked until the callback runs (unused on 1 or < 0).
 * @now: filled when 1 is returned.
 * Returns 1 (answered now in @now, no callback), 0 (@cb will be called
 * exactly once), or a negative code (token file unreadable or empty,
 * plugin cannot be started: the callback is never called).
 */
int k8s_creds_get(struct k8s_creds *src, struct k8s_creds_wait *w,
                  k8s_creds_fn cb, void *arg, struct k8s_cred *now,
                  struct cp_err *err);

/* Unlink a waiting @w and call its callback now with CP_E_CANCELLED.
 * No-op for a @w that is not waiting. */
void k8s_creds_cancel(struct k8s_creds_wait *w);

/**
 * k8s_creds_invalidate() - a request made with @generation got a 401.
 * Returns 1 when a refresh will happen on the next get (a token file or a
 * plugin, and @generation is still the current one, or a refresh is already
 * due), 0 when retrying cannot help (static token, no token at all).
 */
int k8s_creds_invalidate(struct k8s_creds *src, uint64_t generation);

/* Times an exec plugin was started (tests and logs). */
unsigned k8s_creds_plugin_runs(const struct k8s_creds *src);

/* Cancel every waiter (CP_E_CANCELLED), kill a running plugin, and free the
 * source once its loop handles are closed. @src may be NULL. */
void k8s_creds_close(struct k8s_creds *src);

#endif
