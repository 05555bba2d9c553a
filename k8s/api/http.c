/* http.c - requests to the API server through libcurl on the uv loop
 * (base/curl_uv.c), with credentials, timeouts, bounded bodies and one
 * retry after a 401. */
#include "k8s/api/http.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "base/buf.h"
#include "base/curl_uv.h"

enum rstate { R_DELAYED, R_CREDS, R_RUNNING };

struct k8s_http_req {
	struct k8s_client *c;
	struct k8s_http_req *next, *prev;
	char *method, *url, *ctype, *body;
	size_t body_len;
	long timeout_ms, idle_ms;
	size_t max_body;
	uint64_t start_at;
	k8s_http_data_fn on_data;
	k8s_http_done_fn done;
	void *arg;
	enum rstate state;
	CURL *easy;
	struct cp_curl_xfer xfer;
	struct curl_slist *hdrs;
	struct cp_buf rbuf; /* the response body, max_body at most */
	uint64_t gen;
	int auth_retried, cancelled, too_big, data_failed;
	struct cp_err data_err;
	struct k8s_creds_wait wait;
	char ebuf[CURL_ERROR_SIZE];
};

struct k8s_client {
	uv_loop_t *loop;
	struct cp_curl *curl;     /* the multi on the loop */
	uv_timer_t work_timer;
	char *prefix;            /* scheme://authority[/path prefix] used in URLs */
	char *host_hdr;          /* "Host: ..." when tls-server-name is set */
	struct curl_slist *connect_to;
	char *ns;
	char *proxy;
	unsigned char *ca;
	size_t ca_len;
	int insecure;
	struct k8s_creds *creds;
	struct k8s_http_req reqs; /* list head */
	int closing, torn_down, open_handles;
};

static void req_free(struct k8s_http_req *r)
{
	if (r->easy)
		curl_easy_cleanup(r->easy);
	curl_slist_free_all(r->hdrs);
	free(r->method);
	free(r->url);
	free(r->ctype);
	free(r->body);
	cp_buf_free(&r->rbuf);
	free(r);
}

/* Unlink, call done, free. Only ever called outside curl callbacks. */
static void finish(struct k8s_http_req *r, const struct k8s_http_resp *resp,
                   const struct cp_err *err)
{
	r->prev->next = r->next;
	r->next->prev = r->prev;
	if (r->easy && r->state == R_RUNNING)
		cp_curl_cancel(r->c->curl, &r->xfer);
	r->done(r->arg, resp, err);
	req_free(r);
}

static void finish_err(struct k8s_http_req *r, enum cp_code code, const char *what)
{
	struct cp_err e;
	/* The reason first: a long URL must not push it out of the message. */
	cp_err_set(&e, code, "%s (%s %s)", what, r->method, r->url);
	finish(r, NULL, &e);
}

static void kick(struct k8s_client *c, uint64_t in_ms);

/* ---- one transfer ------------------------------------------------------- */

static size_t on_write(char *p, size_t sz, size_t n, void *ud)
{
	struct k8s_http_req *r = ud;
	size_t len = sz * n;
	if (r->cancelled)
		return 0;
	long code = 0;
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
	if (r->on_data && code >= 200 && code < 300) {
		if (r->on_data(r->arg, p, len, &r->data_err)) {
			r->data_failed = 1;
			return 0;
		}
		return len;
	}
	if (cp_buf_add(&r->rbuf, p, len, NULL)) {
		r->too_big = 1; /* out of memory too: the body cannot be held */
		return 0;
	}
	return len;
}

static int add_header(struct curl_slist **l, const char *h)
{
	struct curl_slist *n = curl_slist_append(*l, h);
	if (!n)
		return -1;
	*l = n;
	return 0;
}

static int build_headers(struct k8s_http_req *r, const struct k8s_cred *cred)
{
	struct k8s_client *c = r->c;
	char ct[160];
	if (add_header(&r->hdrs, "Accept: application/json") || add_header(&r->hdrs, "Expect:"))
		return -1;
	if (r->body) {
		snprintf(ct, sizeof ct, "Content-Type: %s", r->ctype ? r->ctype : "application/json");
		if (add_header(&r->hdrs, ct))
			return -1;
	}
	if (c->host_hdr && add_header(&r->hdrs, c->host_hdr))
		return -1;
	if (cred && cred->token) {
		char *a = NULL;
		if (asprintf(&a, "Authorization: Bearer %s", cred->token) < 0)
			return -1;
		int rc = add_header(&r->hdrs, a);
		free(a);
		if (rc)
			return -1;
	}
	return 0;
}

static void set_tls(struct k8s_http_req *r, const struct k8s_cred *cred)
{
	struct k8s_client *c = r->c;
	CURL *e = r->easy;
	if (c->ca) {
		struct curl_blob b = {c->ca, c->ca_len, CURL_BLOB_COPY};
		curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &b);
	}
	if (c->insecure) {
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (cred && cred->cert_pem && cred->key_pem) {
		struct curl_blob cb = {(void *)cred->cert_pem, cred->cert_len, CURL_BLOB_COPY};
		struct curl_blob kb = {(void *)cred->key_pem, cred->key_len, CURL_BLOB_COPY};
		curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &cb);
		curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
		curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &kb);
		curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
	}
	if (c->connect_to)
		curl_easy_setopt(e, CURLOPT_CONNECT_TO, c->connect_to);
	if (c->proxy)
		curl_easy_setopt(e, CURLOPT_PROXY, c->proxy);
}

static void on_transfer_done(void *ud, CURLcode res);

static void launch(struct k8s_http_req *r, const struct k8s_cred *cred)
{
	r->gen = cred ? cred->generation : 0;
	r->easy = curl_easy_init();
	if (!r->easy || build_headers(r, cred)) {
		finish_err(r, CP_E_NOMEM, "out of memory");
		return;
	}
	CURL *e = r->easy;
	r->ebuf[0] = '\0';
	curl_easy_setopt(e, CURLOPT_URL, r->url);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->ebuf);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "codepod/0.1");
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 30000L);
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
	if (!strcmp(r->method, "HEAD"))
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	if (r->body) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body);
	}
	if (r->timeout_ms > 0)
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, r->timeout_ms);
	if (r->idle_ms > 0) {
		curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, r->idle_ms < 1000 ? 1L : r->idle_ms / 1000);
	}
	set_tls(r, cred);
	if (cp_curl_add(r->c->curl, &r->xfer, e, on_transfer_done, r, NULL)) {
		finish_err(r, CP_E_INTERNAL, "curl_multi_add_handle failed");
		return;
	}
	r->state = R_RUNNING;
}

static void on_creds(void *arg, const struct k8s_cred *cred, const struct cp_err *err)
{
	struct k8s_http_req *r = arg;
	if (err || r->cancelled) {
		struct cp_err e;
		cp_err_set(&e, err ? err->code : CP_E_CANCELLED, "%s (%s %s)",
		           err ? err->msg : "cancelled", r->method, r->url);
		finish(r, NULL, &e);
		return;
	}
	launch(r, cred);
}

static void start(struct k8s_http_req *r)
{
	struct k8s_cred now;
	struct cp_err e;
	cp_err_clear(&e);
	memset(&now, 0, sizeof now);
	r->state = R_CREDS;
	int rc = k8s_creds_get(r->c->creds, &r->wait, on_creds, r, &now, &e);
	if (rc == 1)
		launch(r, &now);
	else if (rc < 0)
		finish_err(r, (enum cp_code)rc, e.msg);
}

/* A 401 with credentials that can be refreshed: make the request once more. */
static int maybe_auth_retry(struct k8s_http_req *r, long code)
{
	if (code != 401 || r->auth_retried || !k8s_creds_invalidate(r->c->creds, r->gen))
		return 0;
	r->auth_retried = 1;
	cp_curl_cancel(r->c->curl, &r->xfer);
	curl_easy_cleanup(r->easy);
	r->easy = NULL;
	curl_slist_free_all(r->hdrs);
	r->hdrs = NULL;
	cp_buf_free(&r->rbuf);
	r->state = R_DELAYED;
	r->start_at = uv_now(r->c->loop);
	kick(r->c, 0);
	return 1;
}

/* The transfer ended (base/curl_uv.c took it out of the multi). */
static void on_transfer_done(void *ud, CURLcode res)
{
	struct k8s_http_req *r = ud;
	long code = 0;
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
	if (r->cancelled) {
		finish_err(r, CP_E_CANCELLED, "cancelled");
	} else if (r->data_failed) {
		finish(r, NULL, &r->data_err);
	} else if (r->too_big) {
		char m[64];
		snprintf(m, sizeof m, "response body larger than %zu bytes", r->max_body);
		finish_err(r, CP_E_TOO_BIG, m);
	} else if (res == CURLE_OPERATION_TIMEDOUT) {
		char m[CURL_ERROR_SIZE + 32];
		snprintf(m, sizeof m, "timed out (%s)", r->ebuf[0] ? r->ebuf : curl_easy_strerror(res));
		finish_err(r, CP_E_TIMEOUT, m);
	} else if (res != CURLE_OK) {
		finish_err(r, CP_E_IO, r->ebuf[0] ? r->ebuf : curl_easy_strerror(res));
	} else if (!maybe_auth_retry(r, code)) {
		curl_off_t ra = -1;
		if (curl_easy_getinfo(r->easy, CURLINFO_RETRY_AFTER, &ra) != CURLE_OK || ra <= 0)
			ra = -1;
		struct k8s_http_resp resp = {code, cp_buf_ptr(&r->rbuf), cp_buf_len(&r->rbuf), (long)ra};
		finish(r, &resp, NULL);
	}
}

/* ---- the work timer: delayed starts, cancellations, teardown ----------- */

static void client_release(struct k8s_client *c)
{
	free(c->prefix);
	free(c->host_hdr);
	curl_slist_free_all(c->connect_to);
	free(c->ns);
	free(c->proxy);
	free(c->ca);
	free(c);
}

static void unref(struct k8s_client *c)
{
	if (--c->open_handles == 0)
		client_release(c);
}

static void handle_closed(uv_handle_t *h)
{
	unref(h->data);
}

static void curl_closed(void *ud)
{
	unref(ud);
}

static void teardown(struct k8s_client *c)
{
	c->torn_down = 1;
	cp_curl_close(c->curl, curl_closed, c);
	c->curl = NULL;
	k8s_creds_close(c->creds);
	c->creds = NULL;
	uv_close((uv_handle_t *)&c->work_timer, handle_closed);
}

static void cancel_one(struct k8s_http_req *r)
{
	if (r->state == R_CREDS)
		k8s_creds_cancel(&r->wait); /* calls on_creds -> finish */
	else
		finish_err(r, CP_E_CANCELLED, "cancelled");
}

static void on_work(uv_timer_t *t)
{
	struct k8s_client *c = t->data;
	uint64_t now = uv_now(c->loop), next = UINT64_MAX;
	/* Restart the scan after each finish: callbacks may change the list. */
	for (int again = 1; again;) {
		again = 0;
		for (struct k8s_http_req *r = c->reqs.next; r != &c->reqs; r = r->next) {
			if (r->cancelled || c->closing) {
				cancel_one(r);
				again = 1;
				break;
			}
			if (r->state != R_DELAYED)
				continue;
			if (r->start_at > now) {
				next = r->start_at < next ? r->start_at : next;
				continue;
			}
			start(r);
			again = 1;
			break;
		}
	}
	if (c->closing)
		teardown(c);
	else if (next != UINT64_MAX)
		uv_timer_start(&c->work_timer, on_work, next - now, 0);
}

static void kick(struct k8s_client *c, uint64_t in_ms)
{
	if (c->torn_down)
		return;
	uint64_t due = uv_now(c->loop) + in_ms;
	if (uv_is_active((uv_handle_t *)&c->work_timer)) {
		uint64_t cur = uv_timer_get_due_in(&c->work_timer) + uv_now(c->loop);
		if (cur <= due)
			return;
	}
	uv_timer_start(&c->work_timer, on_work, in_ms, 0);
}

/* ---- public ------------------------------------------------------------- */

/* Split "https://host[:port][/prefix]" into its parts; the host keeps its
 * brackets. Returns 0 or -1. */
static int split_server(const char *s, char **scheme, char **host, char **port, char **rest)
{
	const char *p = strstr(s, "://");
	if (!p)
		return -1;
	const char *h = p + 3, *e = h;
	if (*e == '[') {
		e = strchr(e, ']');
		if (!e)
			return -1;
		e++;
	} else {
		while (*e && *e != ':' && *e != '/')
			e++;
	}
	if (e == h)
		return -1;
	const char *pe = e;
	if (*pe == ':') {
		pe++;
		while (*pe >= '0' && *pe <= '9')
			pe++;
	}
	*scheme = strndup(s, (size_t)(p - s));
	*host = strndup(h, (size_t)(e - h));
	*port = *e == ':' ? strndup(e + 1, (size_t)(pe - e - 1)) : strdup(!strncmp(s, "http://", 7) ? "80" : "443");
	size_t rl = strlen(pe);
	while (rl && pe[rl - 1] == '/')
		rl--;
	*rest = strndup(pe, rl);
	return (*pe && *pe != '/') ? -1 : 0;
}

static int setup_urls(struct k8s_client *c, const struct k8s_config *cfg, struct cp_err *err)
{
	char *scheme = NULL, *host = NULL, *port = NULL, *rest = NULL;
	int rc = 0;
	int bad = !cfg->server || split_server(cfg->server, &scheme, &host, &port, &rest);
	if (!bad && (!scheme || !host || !port || !rest)) {
		rc = cp_err_set(err, CP_E_NOMEM, "out of memory");
		goto done;
	}
	if (bad || (strcmp(scheme, "https") && strcmp(scheme, "http"))) {
		rc = cp_err_set(err, CP_E_INVALID_REQUEST, "server URL \"%s\" is not https://host[:port]",
		                cfg->server ? cfg->server : "");
		goto done;
	}
	const char *tls = cfg->tls_server_name && *cfg->tls_server_name ? cfg->tls_server_name : NULL;
	char *ct = NULL;
	if (asprintf(&c->prefix, "%s://%s:%s%s", scheme, tls ? tls : host, port, rest) < 0) {
		c->prefix = NULL;
		rc = cp_err_set(err, CP_E_NOMEM, "out of memory");
	} else if (tls && (asprintf(&c->host_hdr, "Host: %s:%s", host, port) < 0 ||
	                   asprintf(&ct, "%s:%s:%s:%s", tls, port, host, port) < 0 ||
	                   !(c->connect_to = curl_slist_append(NULL, ct)))) {
		rc = cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	free(ct);
done:
	free(scheme);
	free(host);
	free(port);
	free(rest);
	return rc;
}

static void client_free_early(struct k8s_client *c)
{
	k8s_creds_close(c->creds);
	client_release(c);
}

struct k8s_client *k8s_client_new(uv_loop_t *loop, const struct k8s_config *cfg,
                                  struct cp_err *err)
{
	struct k8s_client *c = calloc(1, sizeof *c);
	if (!c) {
		cp_err_set(err, CP_E_NOMEM, "out of memory");
		return NULL;
	}
	c->loop = loop;
	c->reqs.next = c->reqs.prev = &c->reqs;
	if (setup_urls(c, cfg, err)) {
		client_free_early(c);
		return NULL;
	}
	c->insecure = cfg->insecure;
	c->ns = strdup(cfg->ns ? cfg->ns : "default");
	c->proxy = cfg->proxy_url && *cfg->proxy_url ? strdup(cfg->proxy_url) : NULL;
	if (cfg->ca_pem && (c->ca = malloc(cfg->ca_pem_len)) != NULL) {
		memcpy(c->ca, cfg->ca_pem, cfg->ca_pem_len);
		c->ca_len = cfg->ca_pem_len;
	}
	if (!c->ns || (cfg->proxy_url && *cfg->proxy_url && !c->proxy) || (cfg->ca_pem && !c->ca)) {
		cp_err_set(err, CP_E_NOMEM, "out of memory");
		client_free_early(c);
		return NULL;
	}
	c->creds = k8s_creds_new(loop, cfg, err);
	if (!c->creds || cp_curl_new(loop, &c->curl, err)) {
		client_free_early(c);
		return NULL;
	}
	uv_timer_init(loop, &c->work_timer);
	c->work_timer.data = c;
	c->open_handles = 2; /* the work timer and the curl multi */
	return c;
}

uv_loop_t *k8s_client_loop(const struct k8s_client *c) { return c->loop; }
const char *k8s_client_namespace(const struct k8s_client *c) { return c->ns; }
struct k8s_creds *k8s_client_creds(struct k8s_client *c) { return c->creds; }

static char *dupn(const char *s, size_t n)
{
	char *d = malloc(n + 1);
	if (d) {
		memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

int k8s_http_request(struct k8s_client *c, const struct k8s_http_opts *o,
                     struct k8s_http_req **out, struct cp_err *err)
{
	if (out)
		*out = NULL;
	if (c->closing)
		return cp_err_set(err, CP_E_STATE, "client is closing");
	if (!o->method || !o->path || !o->done || o->path[0] != '/')
		return cp_err_set(err, CP_E_INVALID_REQUEST, "request needs a method, a /path and done");
	struct k8s_http_req *r = calloc(1, sizeof *r);
	if (!r)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	r->c = c;
	r->method = strdup(o->method);
	if (asprintf(&r->url, "%s%s", c->prefix, o->path) < 0)
		r->url = NULL;
	r->ctype = o->content_type ? strdup(o->content_type) : NULL;
	r->body = o->body ? dupn(o->body, o->body_len) : NULL;
	r->body_len = o->body_len;
	if (!r->method || !r->url || (o->content_type && !r->ctype) || (o->body && !r->body)) {
		req_free(r);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	r->timeout_ms = o->timeout_ms;
	r->idle_ms = o->idle_ms;
	r->max_body = o->max_body ? o->max_body : K8S_HTTP_DEFAULT_MAX_BODY;
	cp_buf_init(&r->rbuf, r->max_body);
	r->on_data = o->on_data;
	r->done = o->done;
	r->arg = o->arg;
	r->state = R_DELAYED;
	r->start_at = uv_now(c->loop) + (uint64_t)(o->delay_ms > 0 ? o->delay_ms : 0);
	r->prev = c->reqs.prev;
	r->next = &c->reqs;
	c->reqs.prev->next = r;
	c->reqs.prev = r;
	kick(c, (uint64_t)(o->delay_ms > 0 ? o->delay_ms : 0));
	if (out)
		*out = r;
	return 0;
}

void k8s_http_cancel(struct k8s_http_req *r)
{
	if (!r || r->cancelled)
		return;
	r->cancelled = 1;
	kick(r->c, 0);
}

void k8s_client_close(struct k8s_client *c)
{
	if (!c || c->closing)
		return;
	c->closing = 1;
	kick(c, 0);
}

char *k8s_http_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *o = malloc(3 * n + 1), *p = o;
	if (!o)
		return NULL;
	for (const unsigned char *q = (const unsigned char *)s; *q; q++) {
		if ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') ||
		    *q == '-' || *q == '_' || *q == '.' || *q == '~') {
			*p++ = (char)*q;
		} else {
			*p++ = '%';
			*p++ = hex[*q >> 4];
			*p++ = hex[*q & 15];
		}
	}
	*p = '\0';
	return o;
}
