/*
 * webhook.c - curl multi on the libuv loop, for broker POSTs.
 */
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "webhook.h"

struct sock_ctx {
	uv_poll_t poll;
	curl_socket_t fd;
	struct broker_webhook *w;
};

struct broker_webhook_call {
	struct broker_webhook_call *next, *prev;
	struct broker_webhook *w;
	CURL *easy;
	struct curl_slist *hdrs;
	char *body;
	char *resp;
	size_t resp_len, max_body;
	int too_big, cancelled, finished;
	broker_webhook_done_fn done;
	void *ud;
};

struct broker_webhook {
	uv_loop_t *loop;
	CURLM *multi;
	uv_timer_t timer;   /* curl's timeout */
	uv_timer_t deliver; /* cancelled calls' done, on a later turn */
	struct broker_webhook_call *calls;
	int handles_open, freeing;
};

static void unlink_call(struct broker_webhook_call *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		c->w->calls = c->next;
	if (c->next)
		c->next->prev = c->prev;
}

static void call_free(struct broker_webhook_call *c)
{
	if (c->easy)
		curl_easy_cleanup(c->easy);
	curl_slist_free_all(c->hdrs);
	free(c->body);
	free(c->resp);
	free(c);
}

/* Ends a call: @done once, then free. */
static void finish(struct broker_webhook_call *c, long status, const struct cp_err *err)
{
	unlink_call(c);
	if (c->easy) {
		curl_multi_remove_handle(c->w->multi, c->easy);
	}
	c->done(c->ud, status, c->resp ? c->resp : "", c->resp_len, err);
	call_free(c);
}

static void check_info(struct broker_webhook *w)
{
	CURLMsg *msg;
	int left;
	while ((msg = curl_multi_info_read(w->multi, &left))) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		struct broker_webhook_call *c = NULL;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&c);
		CURLcode res = msg->data.result;
		long status = 0;
		struct cp_err err;
		const struct cp_err *e = NULL;
		if (c->too_big) {
			cp_err_set(&err, CP_E_TOO_BIG, "the broker's answer is over %zu bytes", c->max_body);
			e = &err;
		} else if (res == CURLE_OPERATION_TIMEDOUT) {
			cp_err_set(&err, CP_E_TIMEOUT, "the broker did not answer in time");
			e = &err;
		} else if (res != CURLE_OK) {
			cp_err_set(&err, CP_E_IO, "the broker could not be reached: %s",
			           curl_easy_strerror(res));
			e = &err;
		} else {
			curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &status);
		}
		finish(c, status, e);
	}
}

static void on_poll(uv_poll_t *h, int status, int events)
{
	struct sock_ctx *s = h->data;
	int flags = 0, running = 0;
	if (status < 0)
		flags = CURL_CSELECT_ERR;
	if (events & UV_READABLE)
		flags |= CURL_CSELECT_IN;
	if (events & UV_WRITABLE)
		flags |= CURL_CSELECT_OUT;
	struct broker_webhook *w = s->w;
	curl_multi_socket_action(w->multi, s->fd, flags, &running);
	check_info(w);
}

static void on_sock_closed(uv_handle_t *h)
{
	struct sock_ctx *s = h->data;
	struct broker_webhook *w = s->w;
	free(s);
	if (--w->handles_open == 0 && w->freeing)
		free(w);
}

static int on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
	(void)easy;
	struct broker_webhook *w = userp;
	struct sock_ctx *s = socketp;
	if (what == CURL_POLL_REMOVE) {
		if (s) {
			uv_poll_stop(&s->poll);
			uv_close((uv_handle_t *)&s->poll, on_sock_closed);
			curl_multi_assign(w->multi, fd, NULL);
		}
		return 0;
	}
	if (!s) {
		s = calloc(1, sizeof *s);
		if (!s || uv_poll_init_socket(w->loop, &s->poll, fd)) {
			free(s);
			return -1;
		}
		s->fd = fd;
		s->w = w;
		s->poll.data = s;
		w->handles_open++;
		curl_multi_assign(w->multi, fd, s);
	}
	int ev = (what & CURL_POLL_IN ? UV_READABLE : 0) | (what & CURL_POLL_OUT ? UV_WRITABLE : 0);
	uv_poll_start(&s->poll, ev, on_poll);
	return 0;
}

static void on_timeout(uv_timer_t *t)
{
	struct broker_webhook *w = t->data;
	int running = 0;
	curl_multi_socket_action(w->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	check_info(w);
}

static int on_timer(CURLM *multi, long timeout_ms, void *userp)
{
	(void)multi;
	struct broker_webhook *w = userp;
	if (timeout_ms < 0)
		uv_timer_stop(&w->timer);
	else
		uv_timer_start(&w->timer, on_timeout, (uint64_t)timeout_ms, 0);
	return 0;
}

static void on_deliver(uv_timer_t *t)
{
	struct broker_webhook *w = t->data;
	for (struct broker_webhook_call *c = w->calls, *next = NULL; c; c = next) {
		next = c->next;
		if (c->cancelled) {
			struct cp_err err;
			cp_err_set(&err, CP_E_CANCELLED, "cancelled");
			finish(c, 0, &err);
			next = w->calls; /* done may have cancelled others */
		}
	}
}

struct broker_webhook *broker_webhook_new(uv_loop_t *loop, struct cp_err *err)
{
	static int global_done;
	if (!global_done) {
		curl_global_init(CURL_GLOBAL_DEFAULT);
		global_done = 1;
	}
	struct broker_webhook *w = calloc(1, sizeof *w);
	if (!w || !(w->multi = curl_multi_init())) {
		free(w);
		cp_err_set(err, CP_E_NOMEM, "out of memory");
		return NULL;
	}
	w->loop = loop;
	curl_multi_setopt(w->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
	curl_multi_setopt(w->multi, CURLMOPT_SOCKETDATA, w);
	curl_multi_setopt(w->multi, CURLMOPT_TIMERFUNCTION, on_timer);
	curl_multi_setopt(w->multi, CURLMOPT_TIMERDATA, w);
	uv_timer_init(loop, &w->timer);
	uv_timer_init(loop, &w->deliver);
	w->timer.data = w->deliver.data = w;
	w->handles_open = 2;
	return w;
}

static void on_timer_closed(uv_handle_t *h)
{
	struct broker_webhook *w = h->data;
	if (--w->handles_open == 0 && w->freeing)
		free(w);
}

void broker_webhook_free(struct broker_webhook *w)
{
	if (!w)
		return;
	while (w->calls) {
		struct cp_err err;
		cp_err_set(&err, CP_E_CANCELLED, "shutting down");
		finish(w->calls, 0, &err);
	}
	curl_multi_cleanup(w->multi);
	w->multi = NULL;
	w->freeing = 1;
	uv_close((uv_handle_t *)&w->timer, on_timer_closed);
	uv_close((uv_handle_t *)&w->deliver, on_timer_closed);
}

static size_t on_write(char *p, size_t size, size_t n, void *ud)
{
	struct broker_webhook_call *c = ud;
	size_t len = size * n;
	if (c->resp_len + len > c->max_body) {
		c->too_big = 1;
		return 0; /* aborts the transfer */
	}
	char *nb = realloc(c->resp, c->resp_len + len + 1);
	if (!nb)
		return 0;
	c->resp = nb;
	memcpy(c->resp + c->resp_len, p, len);
	c->resp_len += len;
	c->resp[c->resp_len] = '\0';
	return len;
}

static int add_headers(struct broker_webhook_call *c, const json_t *headers, struct cp_err *err)
{
	const char *k;
	const json_t *v;
	struct curl_slist *l = curl_slist_append(NULL, "Content-Type: application/json");
	l = l ? curl_slist_append(l, "Expect:") : NULL;
	c->hdrs = l;
	if (!l)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	json_object_foreach((json_t *)headers, k, v) {
		const char *s = json_string_value(v);
		char line[4096];
		if (!s || !*k || strpbrk(k, ":\r\n ") || strpbrk(s, "\r\n"))
			return cp_err_set(err, CP_E_INVALID_REQUEST,
			                  "broker.headers: each must be a name and a one-line string");
		int n = snprintf(line, sizeof line, "%s: %s", k, s);
		if (n < 0 || (size_t)n >= sizeof line)
			return cp_err_set(err, CP_E_INVALID_REQUEST, "broker.headers: a header is too long");
		l = curl_slist_append(c->hdrs, line);
		if (!l)
			return cp_err_set(err, CP_E_NOMEM, "out of memory");
		c->hdrs = l;
	}
	return 0;
}

int broker_webhook_post(struct broker_webhook *w, const char *url, const json_t *headers,
                        const char *body, size_t len, long timeout_ms, size_t max_body,
                        broker_webhook_done_fn done, void *ud,
                        struct broker_webhook_call **out, struct cp_err *err)
{
	int rc;
	struct broker_webhook_call *c = calloc(1, sizeof *c);
	if (!c || !(c->easy = curl_easy_init()) || !(c->body = malloc(len + 1))) {
		if (c)
			call_free(c);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	memcpy(c->body, body, len);
	c->w = w;
	c->done = done;
	c->ud = ud;
	c->max_body = max_body;
	rc = add_headers(c, headers, err);
	if (rc) {
		call_free(c);
		return rc;
	}
	CURL *e = c->easy;
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_POST, 1L);
	curl_easy_setopt(e, CURLOPT_POSTFIELDS, c->body);
	curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->hdrs);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 1L);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(e, CURLOPT_PRIVATE, c);
	if (curl_multi_add_handle(w->multi, e) != CURLM_OK) {
		call_free(c);
		return cp_err_set(err, CP_E_INVALID_REQUEST, "broker.url cannot be used");
	}
	c->next = w->calls;
	if (w->calls)
		w->calls->prev = c;
	w->calls = c;
	if (out)
		*out = c;
	return 0;
}

void broker_webhook_cancel(struct broker_webhook_call *c)
{
	if (c->cancelled)
		return;
	c->cancelled = 1;
	curl_multi_remove_handle(c->w->multi, c->easy);
	curl_easy_cleanup(c->easy);
	c->easy = NULL;
	uv_timer_start(&c->w->deliver, on_deliver, 0, 0);
}
