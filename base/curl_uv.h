/*
 * curl_uv.h - one libcurl multi handle driven by the project's libuv loop
 * through curl's multi-socket interface (after curl docs/examples/
 * multi-uv.c): CURLMOPT_SOCKETFUNCTION maps curl's sockets onto uv_poll_t
 * handles, CURLMOPT_TIMERFUNCTION onto one uv_timer_t, both call
 * curl_multi_socket_action(), and each finished transfer is handed to the
 * completion callback given with its easy handle. Nothing blocks: no
 * curl_easy_perform, no curl_multi_perform loop. Used by the Kubernetes
 * REST client (k8s/api/http.c) and the broker webhook (broker/webhook.c); what
 * a transfer is (URL, headers, TLS, body limits, retries) stays theirs.
 *
 * curl_global_init() is made once, by the first cp_curl_new().
 *
 * Loop context: every function is called on the loop thread, and never
 * from inside a libcurl callback (CURLOPT_WRITEFUNCTION and the like),
 * where curl forbids adding and removing handles.
 *
 * Callback rules: cp_curl_add() returning an error never calls @done;
 * returning 0, @done is called exactly once from the loop (never from
 * inside cp_curl_add()), unless cp_curl_cancel() or cp_curl_close() comes
 * first, after which it is never called. When @done runs the easy handle
 * is already out of the multi: @done may read CURLINFO, clean the handle
 * up, add new transfers and cancel others. @closed of cp_curl_close() runs
 * once, on a later loop turn.
 *
 * Ownership: cp_curl_new() returns a *new* object released with
 * cp_curl_close(), which frees it once its uv handles are closed (the
 * loop's owner keeps running the loop until @closed). The easy handle and
 * the struct cp_curl_xfer given to cp_curl_add() stay the caller's; both
 * are *borrowed* by this module until @done is called or cp_curl_cancel()
 * returns. This module owns the handle's CURLOPT_PRIVATE meanwhile.
 */
#ifndef CP_CURL_UV_H
#define CP_CURL_UV_H

#include <curl/curl.h>
#include <uv.h>

#include "base/err.h"

struct cp_curl;

/* The finished transfer's result (CURLE_OK: an answer came, any status). */
typedef void (*cp_curl_done_fn)(void *ud, CURLcode res);

/* One transfer, embedded in the caller's request object. */
struct cp_curl_xfer {
	CURL *easy;           /* set by cp_curl_add() */
	cp_curl_done_fn done;
	void *ud;
	int added;            /* in the multi (private) */
};

/**
 * cp_curl_new() - a multi handle on @loop.
 * @loop: the project's libuv loop (borrowed; must outlive the object).
 * @out: receives the new object.
 * @err: filled on error (may be NULL).
 * Returns 0, CP_E_INTERNAL (curl_global_init failed), CP_E_NOMEM.
 */
int cp_curl_new(uv_loop_t *loop, struct cp_curl **out, struct cp_err *err);

/**
 * cp_curl_add() - start the transfer of @easy (its options set).
 * @x: the caller's transfer record (borrowed until @done or cancel).
 * @easy: the easy handle (borrowed likewise).
 * @done: called with @ud when the transfer ends (see the callback rules).
 * Returns 0, CP_E_STATE (the object is closing), CP_E_INTERNAL
 * (curl_multi_add_handle failed).
 */
int cp_curl_add(struct cp_curl *m, struct cp_curl_xfer *x, CURL *easy,
                cp_curl_done_fn done, void *ud, struct cp_err *err);

/**
 * cp_curl_cancel() - take the transfer out of the multi; its @done is not
 * called. Nothing happens when @x is not added (finished or never started).
 */
void cp_curl_cancel(struct cp_curl *m, struct cp_curl_xfer *x);

/**
 * cp_curl_close() - close the multi and free the object; NULL is ignored.
 * @m: the object (stolen).
 * @closed: called with @ud on a later loop turn once every uv handle is
 *          closed and the object freed, or NULL.
 * Transfers still added are dropped without their @done: the caller ends
 * its requests first.
 */
void cp_curl_close(struct cp_curl *m, void (*closed)(void *ud), void *ud);

#endif
