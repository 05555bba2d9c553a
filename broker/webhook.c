/*
 * webhook.c - broker POSTs through libcurl on the libuv loop
 * (base/curl_uv.c).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <curl/curl.h>

#include "base/buf.h"
#include "base/curl_uv.h"
#include "broker/webhook.h"

struct broker_webhook_call {
	struct broker_webhook_call *next, *prev;
	struct broker_webhook *w;
	CURL *easy;
	struct cp_curl_xfer xfer;
	struct curl_slist *hdrs;
	char *body;
	struct cp_buf resp; /* the answer, max_body at most */
	size_t max_body;
	int too_big, cancelled, finished;
	char host[260];           /* the URL's host, for the guard */
	struct cp_err refused;    /* the guard refused an address (code 0: not) */
	broker_webhook_done_fn done;
	void *ud;
};

struct broker_webhook {
	struct cp_curl *curl; /* the multi on the loop */
	uv_timer_t deliver;   /* cancelled calls' done, on a later turn */
	struct broker_webhook_call *calls;
	const struct broker_urlguard *guard; /* or NULL */
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
	cp_buf_free(&c->resp);
	free(c);
}

/* Ends a call: @done once, then free. */
static void finish(struct broker_webhook_call *c, long status, const struct cp_err *err)
{
	unlink_call(c);
	if (c->easy)
		cp_curl_cancel(c->w->curl, &c->xfer);
	c->done(c->ud, status, cp_buf_ptr(&c->resp), cp_buf_len(&c->resp), err);
	call_free(c);
}

/* The transfer ended (base/curl_uv.c took it out of the multi). */
static void on_transfer_done(void *ud, CURLcode res)
{
	struct broker_webhook_call *c = ud;
	long status = 0;
	struct cp_err err;
	const struct cp_err *e = NULL;
	if (c->refused.code) {
		err = c->refused;
		e = &err;
	} else if (c->too_big) {
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
		curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
	}
	finish(c, status, e);
}

static void on_handle_closed(struct broker_webhook *w)
{
	if (--w->handles_open == 0 && w->freeing)
		free(w);
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
	struct broker_webhook *w = calloc(1, sizeof *w);
	if (!w) {
		cp_err_set(err, CP_E_NOMEM, "out of memory");
		return NULL;
	}
	if (cp_curl_new(loop, &w->curl, err)) {
		free(w);
		return NULL;
	}
	uv_timer_init(loop, &w->deliver);
	w->deliver.data = w;
	w->handles_open = 2; /* the deliver timer and the curl multi */
	return w;
}

static void on_timer_closed(uv_handle_t *h)
{
	on_handle_closed(h->data);
}

static void on_curl_closed(void *ud)
{
	on_handle_closed(ud);
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
	w->freeing = 1;
	cp_curl_close(w->curl, on_curl_closed, w);
	w->curl = NULL;
	uv_close((uv_handle_t *)&w->deliver, on_timer_closed);
}

static size_t on_write(char *p, size_t size, size_t n, void *ud)
{
	struct broker_webhook_call *c = ud;
	size_t len = size * n;
	int rc = cp_buf_add(&c->resp, p, len, NULL);
	if (rc == CP_E_TOO_BIG)
		c->too_big = 1;
	return rc ? 0 : len; /* 0 aborts the transfer */
}

void broker_webhook_set_guard(struct broker_webhook *w, const struct broker_urlguard *g)
{
	w->guard = g;
}

/* libcurl is about to connect to @addr: the guard sees the address itself,
 * after any name resolution, so DNS cannot answer around the rules. */
static curl_socket_t on_open_socket(void *ud, curlsocktype purpose, struct curl_sockaddr *addr)
{
	struct broker_webhook_call *c = ud;
	if (purpose != CURLSOCKTYPE_IPCXN)
		return CURL_SOCKET_BAD;
	if (c->w->guard && !c->refused.code &&
	    broker_urlguard_addr(c->w->guard, c->host, &addr->addr, &c->refused))
		return CURL_SOCKET_BAD;
	if (c->refused.code)
		return CURL_SOCKET_BAD;
	return socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
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
	cp_buf_init(&c->resp, max_body);
	rc = w->guard ? broker_urlguard_url(w->guard, url, c->host, sizeof c->host, err) : 0;
	if (rc == 0)
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
	/* the guard checks the broker's own address: no proxy from the
	 * environment in between, which would resolve the name itself */
	if (w->guard)
		curl_easy_setopt(e, CURLOPT_PROXY, "");
	curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
	curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, c);
	if (cp_curl_add(w->curl, &c->xfer, e, on_transfer_done, c, NULL)) {
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
	cp_curl_cancel(c->w->curl, &c->xfer);
	curl_easy_cleanup(c->easy);
	c->easy = NULL;
	uv_timer_start(&c->w->deliver, on_deliver, 0, 0);
}
