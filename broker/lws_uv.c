/*
 * lws_uv.c - an lws server context on the foreign libuv loop.
 */
#include <stdlib.h>
#include <string.h>

#include "lws_uv.h"

struct broker_lws {
	uv_loop_t *loop;
	struct lws_context *ctx;    /* set NULL by lws when destroyed (pcontext) */
	uv_timer_t timer;           /* starts the destroy, then watches for its end */
	int destroying;
	void (*done)(void *ud);
	void *ud;
};

int broker_lws_new(uv_loop_t *loop, unsigned timeout_secs, void *user,
                   struct broker_lws **out, struct cp_err *err)
{
	struct lws_context_creation_info info;
	void *loops[1] = { loop };
	struct broker_lws *l = calloc(1, sizeof *l);
	if (!l)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	l->loop = loop;
	lws_set_log_level(getenv("CP_LWS_DEBUG") ? 0x7ff : LLL_ERR, NULL);
	memset(&info, 0, sizeof info);
	info.port = CONTEXT_PORT_NO_LISTEN;
	info.options = LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_EXPLICIT_VHOSTS |
	               LWS_SERVER_OPTION_UV_NO_SIGSEGV_SIGFPE_SPIN;
	info.foreign_loops = loops;
	info.user = user;
	info.pcontext = &l->ctx;
	info.timeout_secs = timeout_secs;
	info.timeout_secs_ah_idle = timeout_secs; /* a slow client holding its headers */
	info.pt_serv_buf_size = 64 * 1024;
	info.max_http_header_data = 8 * 1024;
	info.max_http_header_pool = 2048;
	info.fd_limit_per_thread = 4096;
	l->ctx = lws_create_context(&info);
	if (!l->ctx) {
		free(l);
		return cp_err_set(err, CP_E_UNSUPPORTED,
		                  "libwebsockets could not join the libuv loop "
		                  "(is libwebsockets-evlib-uv installed?)");
	}
	*out = l;
	return 0;
}

struct lws_context *broker_lws_context(const struct broker_lws *l)
{
	return l->ctx;
}

static void on_timer_closed(uv_handle_t *h)
{
	struct broker_lws *l = h->data;
	void (*done)(void *ud) = l->done;
	void *ud = l->ud;
	free(l);
	if (done)
		done(ud);
}

/* Polls (every 10 ms) for lws to report the context gone. */
static void on_timer(uv_timer_t *t)
{
	struct broker_lws *l = t->data;
	/* lws 4.1 destroys a foreign-loop context in stages: the first call
	 * closes connections and starts closing its uv handles; a later call,
	 * once those closes completed, finishes (and writes NULL to pcontext). */
	if (l->ctx) {
		l->destroying++;
		lws_context_destroy(l->ctx);
	}
	if (l->ctx)
		return;
	uv_timer_stop(t);
	uv_close((uv_handle_t *)t, on_timer_closed);
}

void broker_lws_destroy(struct broker_lws *l, void (*done)(void *ud), void *ud)
{
	if (!l)
		return;
	l->done = done;
	l->ud = ud;
	uv_timer_init(l->loop, &l->timer);
	l->timer.data = l;
	uv_timer_start(&l->timer, on_timer, 0, 10);
}
