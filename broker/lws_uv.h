/*
 * lws_uv.h - a libwebsockets server context on the project's libuv loop,
 * joined as a *foreign* loop.
 *
 * Debian's libwebsockets 4.1.6 is built with LWS_WITH_EVLIB_PLUGINS:
 * LWS_SERVER_OPTION_LIBUV loads the uv event-lib plugin
 * (libwebsockets-evlib_uv.so, package libwebsockets-evlib-uv) at context
 * creation; without it the context cannot be made and broker_lws_new() says
 * so. lws adds its own uv handles (poll watchers, a timer, an idle) to the
 * loop and never runs, stops or closes the loop.
 *
 * Destruction with a foreign uv loop is asynchronous (libuv closes handles
 * on later turns): broker_lws_destroy() starts it from a zero timer, so never
 * from inside an lws callback, and calls @done once lws reports the context
 * wholly gone (info.pcontext written with NULL), which needs the loop to go
 * on running, and lws 4.1.6 double-closes its event pipe fd on the way (held
 * by a placeholder here). Both found by the exec client's k8s/lws_loop.c,
 * whose helper is client- and TLS-specific; this is its server twin.
 *
 * Loop context: the loop thread only.
 *
 * Ownership: broker_lws_new() returns a new object, released by
 * broker_lws_destroy() (which frees it after @done). @protocols and @user
 * are borrowed until then. The lws context is borrowed from the object.
 */
#ifndef BROKER_LWS_UV_H
#define BROKER_LWS_UV_H

#include <libwebsockets.h>
#include <uv.h>

#include "err.h"

struct broker_lws;

/**
 * broker_lws_new() - an lws context with no vhost (vhosts are added with
 * lws_create_vhost) on @loop.
 * @timeout_secs: lws's timeout for a connection's handshake and headers.
 * @user: returned by lws_context_user().
 * Returns 0, CP_E_UNSUPPORTED (the uv plugin is missing), CP_E_NOMEM.
 */
int broker_lws_new(uv_loop_t *loop, unsigned timeout_secs, void *user,
                   struct broker_lws **out, struct cp_err *err);

struct lws_context *broker_lws_context(const struct broker_lws *l);

/**
 * broker_lws_destroy() - close every connection (their CLOSED callbacks
 * run) and destroy the context on a later loop turn; @done(@ud) is called
 * once it is gone and the object freed. May be called from an lws callback.
 */
void broker_lws_destroy(struct broker_lws *l, void (*done)(void *ud), void *ud);

#endif
