/*
 * lws_uv.h - one libwebsockets context joined to the project's libuv loop
 * as a *foreign* loop, and its destruction, with the work-arounds that
 * libwebsockets 4.1.6 needs there. Used by the exec WebSocket client
 * (k8s/api/pod_exec.c, through k8s/api/lws_loop.c which adds the API server's URL and
 * TLS) and by the HTTP/WebSocket server (broker/http_server*.c).
 *
 * libwebsockets 4.1 (Debian: libwebsockets17 + libwebsockets-evlib-uv) is
 * built with LWS_WITH_EVLIB_PLUGINS: LWS_SERVER_OPTION_LIBUV makes it load
 * the uv event-lib plugin (libwebsockets-evlib_uv.so) from its install
 * libdir at context creation; when the plugin is missing the context cannot
 * be created and cp_lws_new() says so (install libwebsockets-evlib-uv).
 * lws then adds its own uv handles (poll watchers, a timer, an idle) to the
 * caller's loop and never runs, stops or closes the loop itself.
 *
 * The caller describes the context (protocols or explicit vhosts, TLS,
 * buffer sizes, timeouts) in a struct lws_context_creation_info; this module
 * adds what joining the loop takes and works around lws 4.1.6 on a foreign
 * uv loop (details in lws_uv.c):
 *  - the destroy needs a second lws_context_destroy() once lws's own uv
 *    handles have closed, and made too early it frees handles libuv holds;
 *  - the context's event pipe fd is closed twice (at the first destroy and
 *    again from a uv close callback a loop turn later), so its number is
 *    held by a placeholder until the context is gone;
 *  - lws runs its timeouts (lws_set_timeout, LWS_TO_KILL_ASYNC, handshake,
 *    keep-alive) only after lws I/O, so a timer wakes the service once a
 *    second;
 *  - lws's libuv SIGSEGV/SIGFPE handler, which spins forever waiting for
 *    a debugger, is not installed.
 *
 * Loop context: called on the loop thread only. cp_lws_new() is not called
 * from inside an lws callback; cp_lws_destroy() may be (the destroy starts
 * on a later loop turn).
 *
 * Ownership: cp_lws_new() returns a *new* object released with
 * cp_lws_destroy(), which frees it on a later loop turn: the loop's owner
 * keeps running the loop (uv_run) until @done has run, and before
 * uv_loop_close(). @info is *borrowed* for the call; what it points to
 * that lws keeps (protocols, the user pointer, a provided SSL_CTX) is
 * borrowed until @done. The lws context returned by cp_lws_context() is
 * *borrowed* from the object.
 *
 * Callback rules: @done(@ud) of cp_lws_destroy() runs exactly once, on a
 * later loop turn, after lws has freed the context and this object is
 * gone; lws's own callbacks (WSI_DESTROY, CLOSED) for the connections the
 * destroy closes run before it.
 */
#ifndef CP_LWS_UV_H
#define CP_LWS_UV_H

#include <libwebsockets.h>
#include <uv.h>

#include "base/err.h"

struct cp_lws;

/**
 * cp_lws_new() - create an lws context on @loop.
 * @loop: the project's libuv loop (borrowed; must outlive the object).
 * @info: the context wanted (borrowed for the call). Its foreign_loops and
 *        pcontext are set here, and LWS_SERVER_OPTION_LIBUV |
 *        LWS_SERVER_OPTION_UV_NO_SIGSEGV_SIGFPE_SPIN are added to options.
 * @log_level: lws's log mask (LLL_*); lws logs are process-wide, and
 *             CP_LWS_DEBUG in the environment turns every level on.
 * @out: receives the new object.
 * @err: filled on error (may be NULL).
 *
 * Returns 0, CP_E_UNSUPPORTED (lws could not be joined to the loop: the uv
 * event plugin is missing, or lws refused @info), CP_E_NOMEM.
 */
int cp_lws_new(uv_loop_t *loop, const struct lws_context_creation_info *info,
               int log_level, struct cp_lws **out, struct cp_err *err);

/* The lws context (borrowed from @l, valid until cp_lws_destroy()). */
struct lws_context *cp_lws_context(const struct cp_lws *l);

/**
 * cp_lws_destroy() - close every connection and destroy the context, then
 * free the object; NULL is ignored.
 * @l: the object (stolen: not used by the caller after this call).
 * @done: called once on a later loop turn when the context and the object
 *        are gone, or NULL.
 * @ud: passed to @done.
 *
 * Asynchronous, as lws 4.1 needs with a foreign loop: the connections close
 * from the next loop turn on (their WSI_DESTROY/CLOSED callbacks run then,
 * so the protocols' user data stays valid until @done).
 */
void cp_lws_destroy(struct cp_lws *l, void (*done)(void *ud), void *ud);

#endif
