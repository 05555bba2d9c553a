/*
 * exec.h - run a command in a pod through the Kubernetes exec WebSocket
 * (GET .../pods/NAME/exec, subprotocols v5.channel.k8s.io then
 * v4.channel.k8s.io), with libwebsockets on the project's libuv loop.
 *
 * A struct k8s_exec_client is one lws context (k8s/api/lws_loop.h) for one API
 * server: TLS with the cluster CA, a client certificate or a bearer token
 * ("Authorization: Bearer", added to every upgrade request). Any number of
 * exec streams run on it at once. Each stream follows the process model of
 * runner/sandbox.h: stdout and stderr arrive through callbacks, stdin is
 * written with k8s_exec_write(), and one exit report ends the stream:
 *
 *   - the error channel (3) Status gives the exit code ("Success" -> 0,
 *     NonZeroExitCode -> details.causes[ExitCode]). Kubernetes reports a
 *     process killed by a signal as exit code 128+n (137 for SIGKILL), as a
 *     shell does; the report keeps that code (signal stays 0) because an
 *     exit(137) looks the same on the wire;
 *   - a Status of another kind (InternalError: container not running, ...)
 *     sets `unavailable` (nothing ran) or, once output has arrived, `lost`;
 *   - a refused upgrade (non-101: 401, 403, 404, 400) or a connection/TLS
 *     failure sets `unavailable`, with http_status when there was an answer;
 *   - a stream that ends without a Status (dropped connection, close frame,
 *     ping timeout, k8s_exec_abort()) sets `lost`: the command's fate is
 *     unknown, never success (docs/kubernetes.md §3.3).
 *
 * Wire rules implemented: every message is binary and starts with its
 * channel byte; the server's first message is a lone channel byte (no
 * data); lws may deliver a message in fragments and only the first carries
 * the channel (reassembled with struct k8s_exec_reasm); v5 CLOSE [0xFF, 0]
 * ends stdin ("Send [0xFF,0x00] after the last stdin byte so node sees
 * EOF"), and a server-sent [0xFF, ch] is accepted and ignored. v4 has NO way
 * to close stdin short of closing the socket, which loses the output
 * (docs/kubernetes.md §3.3): k8s_exec_close_stdin() refuses it, so with v4 pass
 * the input by argv or length-prefix it. Stdin is chunked into messages of
 * at most K8S_EXEC_STDIN_CHUNK bytes and written from
 * LWS_CALLBACK_CLIENT_WRITEABLE; a small write made while nothing waits
 * goes out at once, as one message. lws pings an idle stream every ping_secs
 * and hangs up after hangup_secs without a valid answer (lws_retry_bo_t).
 *
 * Backpressure: k8s_exec_write() copies into a per-stream queue and returns
 * 1 once the queue holds more than high_water bytes; the drain callback
 * then runs once it is back under high_water / 2. Beyond max_queue writes
 * are refused. k8s_exec_pause_output() stops reading the socket
 * (lws_rx_flow_control), so a slow consumer slows the server and the
 * process down instead of growing buffers.
 *
 * Loop context: everything runs on the loop thread. Functions may be called
 * from inside this module's callbacks (out, err, drain) for the same stream;
 * nothing is freed inside its own callback: a stream is freed after its
 * exited() callback returns, when lws destroys the connection.
 *
 * Callback rules: if k8s_exec_start() returns an error, no callback ever
 * runs for that call. Otherwise exited() runs exactly once (also when the
 * stream is aborted or the client freed), after the last out/err call, and
 * the handle is invalid once exited() returns. out/err/drain never run
 * after exited(). Do not call k8s_exec_client_free() from a callback.
 *
 * Ownership: k8s_exec_client_new() returns a new object released with
 * k8s_exec_client_free(); @cfg is borrowed for the call (copied). Strings
 * and argv passed to k8s_exec_start() are borrowed for the call; @cbs is
 * copied. The stream handle is owned by the client and freed by it after
 * exited() returns: the caller never frees it. Buffers passed to out/err
 * and the exit report are borrowed for the duration of the callback.
 * k8s_exec_write() copies what it is given.
 */
#ifndef K8S_EXEC_H
#define K8S_EXEC_H

#include <stddef.h>

#include <uv.h>

#include "base/err.h"
#include "k8s/api/exec_frame.h"
#include "k8s/api/kubeconfig.h"

/* A file chunk (256 KiB) and its head in one message: the stream's every
 * message costs a turn of the loop here and a frame to parse on the way. */
#define K8S_EXEC_STDIN_CHUNK (262u * 1024u)
#define K8S_EXEC_MAX_URL 8192u

struct k8s_exec_client;
struct k8s_exec;

/* Which subprotocols to offer (tests force v4 with K8S_EXEC_OFFER_V4). */
enum k8s_exec_offer {
	K8S_EXEC_OFFER_V5_V4 = 0, /* "v5.channel.k8s.io, v4.channel.k8s.io" */
	K8S_EXEC_OFFER_V4 = 1,
	K8S_EXEC_OFFER_V5 = 2
};

/* Options of a client; zero fields take the defaults in brackets. */
struct k8s_exec_opts {
	enum k8s_exec_offer offer;
	size_t high_water;     /* [1 MiB] write() returns 1 above it */
	size_t max_queue;      /* [64 MiB] write() refuses beyond it */
	size_t max_status;     /* [1 MiB] largest error-channel message */
	unsigned ping_secs;    /* [5] idle seconds before lws sends a PING */
	unsigned hangup_secs;  /* [60] seconds without a valid frame: lost */
};

/* How the remote command ended, as far as the stream could tell. */
struct k8s_exec_status {
	int code;        /* the command's exit status, or -1 when none came */
	int unavailable; /* the command never started: see detail */
	int lost;        /* the stream dropped after it started: fate unknown */
	char detail[CP_ERR_MSG_MAX]; /* why unavailable or lost */
};

/* The exit report: the command's status plus what Kubernetes said. */
struct k8s_exec_exit {
	struct k8s_exec_status ex;
	enum cp_code error;     /* 0 with an exit code; else why not (see detail):
	                           CP_E_AUTH, CP_E_DENIED, CP_E_NOT_FOUND, CP_E_HTTP,
	                           CP_E_IO, CP_E_OUTCOME_UNKNOWN, CP_E_CANCELLED */
	int http_status;        /* the non-101 answer to the upgrade, else 0 */
	int proto;              /* 5 or 4 once established, else 0 */
};

struct k8s_exec_cbs {
	void (*out)(void *ud, const char *buf, size_t len);  /* stdout bytes */
	void (*err)(void *ud, const char *buf, size_t len);  /* stderr bytes */
	void (*drain)(void *ud);  /* optional: the stdin queue fell under
	                             high_water / 2 after write() returned 1 */
	void (*exited)(void *ud, const struct k8s_exec_exit *ex); /* once */
};

/**
 * k8s_exec_client_new() - an exec client for the API server of @cfg.
 * @loop: the project's loop (borrowed; outlives the client).
 * @cfg: server, CA, client certificate/key or token (copied as needed).
 * @opts: NULL for the defaults.
 * Returns 0, CP_E_INVALID_REQUEST (bad URL or PEM), CP_E_UNSUPPORTED (no
 * libuv event plugin for libwebsockets), CP_E_NOMEM.
 */
int k8s_exec_client_new(uv_loop_t *loop, const struct k8s_config *cfg,
                        const struct k8s_exec_opts *opts,
                        struct k8s_exec_client **out, struct cp_err *err);

/**
 * k8s_exec_client_set_token() - the bearer token for later streams (a
 * rotated service-account token, a fresh exec-plugin token); NULL removes
 * it. Returns 0, CP_E_INVALID_REQUEST (CR/LF in the token), CP_E_NOMEM.
 */
int k8s_exec_client_set_token(struct k8s_exec_client *c, const char *token,
                              struct cp_err *err);

/**
 * k8s_exec_client_free() - abort every live stream and release the client;
 * NULL is ignored. Asynchronous (lws 4.1 destroys a context on a foreign
 * loop over several loop turns): each live stream gets its exited() report
 * (`lost`, error CP_E_CANCELLED) on a later turn, then the memory goes. The
 * loop's owner keeps running the loop until it has no more handles
 * (uv_run returns 0) before uv_loop_close(). No k8s_exec_start() on the
 * client after this call; not from inside a callback of this module.
 */
void k8s_exec_client_free(struct k8s_exec_client *c);

/**
 * k8s_exec_start() - open an exec stream running @argv in a container.
 * @ns, @pod: namespace and pod name.
 * @container: container name, or NULL when the pod has only one.
 * @argv: NULL-terminated, at least one element; no shell is involved.
 * @cbs: callbacks (out, err and exited are required).
 * @ud: passed to every callback.
 * @out: receives the handle (valid until exited() returns).
 * Returns 0 (the connection is under way), CP_E_INVALID_REQUEST (missing
 * argument), CP_E_TOO_BIG (URL over K8S_EXEC_MAX_URL), CP_E_IO (lws could
 * not start the connection), CP_E_NOMEM. No callback after an error.
 */
int k8s_exec_start(struct k8s_exec_client *c, const char *ns, const char *pod,
                   const char *container, const char *const *argv,
                   const struct k8s_exec_cbs *cbs, void *ud,
                   struct k8s_exec **out, struct cp_err *err);

/**
 * k8s_exec_write() - queue bytes for the command's stdin (copied). May be
 * called before the stream is established. Returns 0, 1 when the queue is
 * now over high_water (wait for drain()), CP_E_STATE after
 * k8s_exec_close_stdin() or once the stream is ending, CP_E_TOO_BIG over
 * max_queue (nothing queued), CP_E_NOMEM.
 */
int k8s_exec_write(struct k8s_exec *e, const void *buf, size_t len, struct cp_err *err);

/* k8s_exec_write() of @a then @b as one write (a frame's header and body:
 * a small pair leaves as one message). @b may be NULL when @blen is 0. */
int k8s_exec_write2(struct k8s_exec *e, const void *a, size_t alen, const void *b, size_t blen,
                    struct cp_err *err);

/**
 * k8s_exec_close_stdin() - after the queued bytes, send the v5 CLOSE
 * message [0xFF, 0] so the command reads EOF. Returns 0, CP_E_UNSUPPORTED
 * when v4 was negotiated (or only v4 is offered); a close queued before the
 * answer is dropped if the server then chooses v4 (the command never sees
 * EOF). CP_E_STATE when already closed or ending.
 */
int k8s_exec_close_stdin(struct k8s_exec *e, struct cp_err *err);

/* Stop (1) or resume (0) reading stdout/stderr from the socket. */
void k8s_exec_pause_output(struct k8s_exec *e, int paused);

/**
 * k8s_exec_abort() - drop the stream now. exited() follows (from the loop,
 * or later in this call's caller's callback's return path) with `lost` and
 * error CP_E_CANCELLED unless a Status had already arrived. The process in
 * the pod is NOT killed by this (docs/kubernetes.md §3.5): kill it by a second exec.
 * Safe to call twice and from this stream's callbacks.
 */
void k8s_exec_abort(struct k8s_exec *e);

/* The negotiated protocol: 5, 4, or 0 before the upgrade completed. */
int k8s_exec_proto(const struct k8s_exec *e);

/* Bytes of stdin queued and not yet handed to the socket. */
size_t k8s_exec_queued(const struct k8s_exec *e);

#endif
