/* curl_uv.c - libcurl multi-socket on the uv loop (after curl's multi-uv.c). */
#include "base/curl_uv.h"

#include <stdint.h>
#include <stdlib.h>

struct sock {
	uv_poll_t poll;
	curl_socket_t fd;
	struct cp_curl *m;
	struct sock *next, *prev;
};

struct cp_curl {
	uv_loop_t *loop;
	CURLM *multi;
	uv_timer_t timer;      /* curl's timeout */
	struct sock socks;     /* list head of polled sockets */
	int open_handles;      /* the timer and the polls, until closed */
	int closing;
	void (*closed)(void *ud);
	void *closed_ud;
};

static int curl_ready;

/* Each finished transfer leaves the multi, then its done runs. */
static void check_multi_info(struct cp_curl *m)
{
	CURLMsg *msg = NULL;
	int left = 0;
	while ((msg = curl_multi_info_read(m->multi, &left)) != NULL) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		struct cp_curl_xfer *x = NULL;
		CURLcode res = msg->data.result;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
		if (!x)
			continue;
		curl_multi_remove_handle(m->multi, x->easy);
		x->added = 0;
		x->done(x->ud, res);
	}
}

static void on_poll(uv_poll_t *h, int status, int events)
{
	struct sock *sk = h->data;
	struct cp_curl *m = sk->m;
	int flags = 0, running = 0;
	if (status < 0)
		flags = CURL_CSELECT_ERR;
	if (events & UV_READABLE)
		flags |= CURL_CSELECT_IN;
	if (events & UV_WRITABLE)
		flags |= CURL_CSELECT_OUT;
	curl_multi_socket_action(m->multi, sk->fd, flags, &running);
	check_multi_info(m);
}

static void unref(struct cp_curl *m)
{
	if (--m->open_handles > 0)
		return;
	void (*closed)(void *ud) = m->closed;
	void *ud = m->closed_ud;
	free(m);
	if (closed)
		closed(ud);
}

static void handle_closed(uv_handle_t *h)
{
	unref(h->data);
}

static void sock_closed(uv_handle_t *h)
{
	struct sock *sk = h->data;
	struct cp_curl *m = sk->m;
	free(sk);
	unref(m);
}

static void sock_close(struct sock *sk)
{
	uv_poll_stop(&sk->poll);
	sk->prev->next = sk->next;
	sk->next->prev = sk->prev;
	uv_close((uv_handle_t *)&sk->poll, sock_closed);
}

static struct sock *sock_new(struct cp_curl *m, curl_socket_t s)
{
	struct sock *sk = calloc(1, sizeof *sk);
	if (!sk)
		return NULL;
	sk->fd = s;
	sk->m = m;
	if (uv_poll_init_socket(m->loop, &sk->poll, s)) {
		free(sk);
		return NULL;
	}
	sk->poll.data = sk;
	sk->prev = m->socks.prev;
	sk->next = &m->socks;
	m->socks.prev->next = sk;
	m->socks.prev = sk;
	m->open_handles++;
	curl_multi_assign(m->multi, s, sk);
	return sk;
}

static int on_socket(CURL *e, curl_socket_t s, int action, void *userp, void *socketp)
{
	(void)e;
	struct cp_curl *m = userp;
	struct sock *sk = socketp;
	if (action == CURL_POLL_REMOVE) {
		if (sk) {
			curl_multi_assign(m->multi, s, NULL);
			sock_close(sk);
		}
		return 0;
	}
	if (!sk && !(sk = sock_new(m, s)))
		return -1;
	int ev = 0;
	if (action == CURL_POLL_IN || action == CURL_POLL_INOUT)
		ev |= UV_READABLE;
	if (action == CURL_POLL_OUT || action == CURL_POLL_INOUT)
		ev |= UV_WRITABLE;
	uv_poll_start(&sk->poll, ev, on_poll);
	return 0;
}

static void on_curl_timeout(uv_timer_t *t)
{
	struct cp_curl *m = t->data;
	int running = 0;
	curl_multi_socket_action(m->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	check_multi_info(m);
}

/* curl_multi_cleanup() may still ask for a timer: the handle is closing. */
static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp)
{
	(void)multi;
	struct cp_curl *m = userp;
	if (m->closing)
		return 0;
	if (timeout_ms < 0)
		uv_timer_stop(&m->timer);
	else
		uv_timer_start(&m->timer, on_curl_timeout, (uint64_t)timeout_ms, 0);
	return 0;
}

int cp_curl_new(uv_loop_t *loop, struct cp_curl **out, struct cp_err *err)
{
	*out = NULL;
	if (!curl_ready) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
			return cp_err_set(err, CP_E_INTERNAL, "curl_global_init failed");
		curl_ready = 1;
	}
	struct cp_curl *m = calloc(1, sizeof *m);
	if (!m || !(m->multi = curl_multi_init())) {
		free(m);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	m->loop = loop;
	m->socks.next = m->socks.prev = &m->socks;
	curl_multi_setopt(m->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
	curl_multi_setopt(m->multi, CURLMOPT_SOCKETDATA, m);
	curl_multi_setopt(m->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
	curl_multi_setopt(m->multi, CURLMOPT_TIMERDATA, m);
	uv_timer_init(loop, &m->timer);
	m->timer.data = m;
	m->open_handles = 1;
	*out = m;
	return 0;
}

int cp_curl_add(struct cp_curl *m, struct cp_curl_xfer *x, CURL *easy,
                cp_curl_done_fn done, void *ud, struct cp_err *err)
{
	CURLMcode mc;
	if (m->closing)
		return cp_err_set(err, CP_E_STATE, "curl multi is closing");
	x->easy = easy;
	x->done = done;
	x->ud = ud;
	x->added = 0;
	curl_easy_setopt(easy, CURLOPT_PRIVATE, x);
	mc = curl_multi_add_handle(m->multi, easy);
	if (mc != CURLM_OK)
		return cp_err_set(err, CP_E_INTERNAL, "curl_multi_add_handle failed: %s",
		                  curl_multi_strerror(mc));
	x->added = 1;
	return 0;
}

void cp_curl_cancel(struct cp_curl *m, struct cp_curl_xfer *x)
{
	if (!x->added)
		return;
	curl_multi_remove_handle(m->multi, x->easy);
	x->added = 0;
}

void cp_curl_close(struct cp_curl *m, void (*closed)(void *ud), void *ud)
{
	if (!m || m->closing)
		return;
	m->closing = 1;
	m->closed = closed;
	m->closed_ud = ud;
	curl_multi_cleanup(m->multi); /* closes cached connections (socket REMOVEs) */
	m->multi = NULL;
	while (m->socks.next != &m->socks) /* any curl did not report removed */
		sock_close(m->socks.next);
	uv_close((uv_handle_t *)&m->timer, handle_closed);
}
