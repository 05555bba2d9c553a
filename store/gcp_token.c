/* gcp_token.c - an access token from the GCP metadata server, kept until
 * near its expiry (gcp_token.h). */
#include "store/gcp_token.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/jsondepth.h"

#define ANSWER_MAX (64 * 1024)
#define CONNECT_MS 3000L
#define TOTAL_MS 10000L
#define PATH "/computeMetadata/v1/instance/service-accounts/default/token"
#define ATTEMPTS 3

struct store_gcp_token {
	struct cp_curl *curl;
	uv_loop_t *loop;
	uv_timer_t *wait;          /* between attempts (its own memory: closed late) */
	int attempt;               /* of the fetch running, from 1 */
	store_gcp_ready_fn ready;
	void *ud;
	char url[400];
	char token[STORE_GCP_TOKEN_MAX];
	uint64_t fresh_until_ms;   /* monotonic; 0: none kept */
	unsigned long fetches, gen;
	/* the fetch in flight */
	struct cp_curl_xfer x;
	CURL *easy;
	struct curl_slist *hdrs;
	struct cp_buf body;
	char ebuf[CURL_ERROR_SIZE];
};

static void attempt_again(uv_timer_t *h);

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int host_ok(const char *h)
{
	size_t n = strlen(h);
	if (n == 0 || n > 255)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = h[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '-' || c == ':' || c == '[' || c == ']'))
			return 0;
	}
	return 1;
}

int store_gcp_token_new(struct cp_curl *curl, uv_loop_t *loop, store_gcp_ready_fn ready,
                        void *ud, struct store_gcp_token **out, struct cp_err *err)
{
	*out = NULL;
	const char *host = getenv("GCE_METADATA_HOST");
	if (!host || !*host)
		host = "metadata.google.internal";
	if (!host_ok(host))
		return cp_err_set(err, CP_E_INVALID_REQUEST,
		                  "GCE_METADATA_HOST must be a host name or address, with an "
		                  "optional :port");
	struct store_gcp_token *t = calloc(1, sizeof *t);
	if (!t)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	t->curl = curl;
	t->loop = loop;
	t->ready = ready;
	t->ud = ud;
	snprintf(t->url, sizeof t->url, "http://%s%s", host, PATH);
	cp_buf_init(&t->body, ANSWER_MAX);
	*out = t;
	return 0;
}

static void end_fetch(struct store_gcp_token *t)
{
	if (t->easy)
		curl_easy_cleanup(t->easy);
	t->easy = NULL;
	curl_slist_free_all(t->hdrs);
	t->hdrs = NULL;
	/* the answer held the token */
	if (cp_buf_len(&t->body))
		memset((char *)cp_buf_ptr(&t->body), 0, cp_buf_len(&t->body));
	cp_buf_free(&t->body);
	cp_buf_init(&t->body, ANSWER_MAX);
}

static void wait_closed(uv_handle_t *h)
{
	free(h);
}

static void stop_wait(struct store_gcp_token *t)
{
	if (!t->wait)
		return;
	uv_timer_stop(t->wait);
	uv_close((uv_handle_t *)t->wait, wait_closed);
	t->wait = NULL;
}

void store_gcp_token_free(struct store_gcp_token *t)
{
	if (!t)
		return;
	stop_wait(t);
	if (t->easy)
		cp_curl_cancel(t->curl, &t->x);
	end_fetch(t);
	cp_buf_free(&t->body);
	memset(t->token, 0, sizeof t->token);
	free(t);
}

const char *store_gcp_token_current(struct store_gcp_token *t)
{
	if (!t->token[0] || now_ms() >= t->fresh_until_ms)
		return NULL;
	return t->token;
}

unsigned long store_gcp_token_gen(const struct store_gcp_token *t)
{
	return t->gen;
}

void store_gcp_token_drop(struct store_gcp_token *t, unsigned long gen)
{
	if (gen == t->gen) {
		memset(t->token, 0, sizeof t->token);
		t->fresh_until_ms = 0;
	}
}

unsigned long store_gcp_token_fetches(const struct store_gcp_token *t)
{
	return t->fetches;
}

const char *store_gcp_token_url(const struct store_gcp_token *t)
{
	return t->url;
}

int store_gcp_token_parse(const char *body, size_t len, char *tok, size_t cap,
                          uint64_t *expires_in, struct cp_err *err)
{
	if (cp_json_text_depth(body, len, 4) > 4)
		return cp_err_set(err, CP_E_PARSE, "metadata server token answer nested too deep");
	json_error_t je;
	json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
	int rc = 0;
	if (!json_is_object(o)) {
		rc = cp_err_set(err, CP_E_PARSE, "metadata server token answer is not a JSON object");
		goto out;
	}
	json_t *at = json_object_get(o, "access_token");
	json_t *ei = json_object_get(o, "expires_in");
	json_t *tt = json_object_get(o, "token_type");
	const char *v = json_string_value(at);
	size_t vl = json_is_string(at) ? json_string_length(at) : 0;
	if (!v || vl == 0 || vl >= cap || vl >= STORE_GCP_TOKEN_MAX) {
		rc = cp_err_set(err, CP_E_PARSE, "metadata server answer has no usable access_token");
		goto out;
	}
	for (size_t i = 0; i < vl; i++)
		if ((unsigned char)v[i] <= 0x20 || (unsigned char)v[i] >= 0x7f) {
			rc = cp_err_set(err, CP_E_PARSE,
			                "metadata server access_token has a character a header cannot carry");
			goto out;
		}
	if (!json_is_integer(ei) || json_integer_value(ei) <= 0) {
		rc = cp_err_set(err, CP_E_PARSE,
		                "metadata server answer has no positive integer expires_in");
		goto out;
	}
	if (tt && (!json_is_string(tt) || strcasecmp(json_string_value(tt), "Bearer") != 0)) {
		rc = cp_err_set(err, CP_E_PARSE, "metadata server token_type is not Bearer");
		goto out;
	}
	memcpy(tok, v, vl);
	tok[vl] = '\0';
	*expires_in = (uint64_t)json_integer_value(ei);
out:
	json_decref(o);
	return rc;
}

static size_t on_write(char *buf, size_t size, size_t n, void *ud)
{
	struct store_gcp_token *t = ud;
	return cp_buf_add(&t->body, buf, size * n, NULL) ? 0 : size * n;
}

static void fetched(void *ud, CURLcode res)
{
	struct store_gcp_token *t = ud;
	long st = 0;
	curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &st);
	struct cp_err e = { 0 };
	int rc = 0;
	if (res != CURLE_OK) {
		rc = cp_err_set(&e, CP_E_RETRY, "no access token: the GCP metadata server at %s "
		                "did not answer: %s", t->url,
		                t->ebuf[0] ? t->ebuf : curl_easy_strerror(res));
	} else if (st == 401 || st == 403 || st == 404) {
		rc = cp_err_set(&e, CP_E_AUTH, "no access token: the GCP metadata server at %s "
		                "answered %ld (is Workload Identity set up for this pod's service "
		                "account?)", t->url, st);
	} else if (st != 200) {
		rc = cp_err_set(&e, CP_E_HTTP, "no access token: the GCP metadata server at %s "
		                "answered %ld", t->url, st);
	} else {
		char tok[STORE_GCP_TOKEN_MAX];
		uint64_t life = 0;
		rc = store_gcp_token_parse(cp_buf_ptr(&t->body), cp_buf_len(&t->body), tok,
		                           sizeof tok, &life, &e);
		if (!rc && life > 86400)
			life = 86400; /* no token is good for longer; no overflow below */
		if (!rc) {
			uint64_t margin = life >= 2 * STORE_GCP_REFRESH_S ? STORE_GCP_REFRESH_S : life / 2;
			memcpy(t->token, tok, sizeof tok);
			t->gen++;
			t->fresh_until_ms = now_ms() + (life - margin) * 1000u;
			memset(tok, 0, sizeof tok);
		}
	}
	end_fetch(t);
	int again = (rc == CP_E_RETRY || (rc == CP_E_HTTP && st >= 500)) && t->loop &&
	            t->attempt < ATTEMPTS;
	if (again && !t->wait && (t->wait = malloc(sizeof *t->wait)) &&
	    uv_timer_init(t->loop, t->wait) != 0) {
		free(t->wait);
		t->wait = NULL;
	}
	if (again && t->wait) { /* the fetch goes on, after a pause */
		t->wait->data = t;
		uv_timer_start(t->wait, attempt_again, 500u << (t->attempt - 1), 0);
		return;
	}
	t->attempt = 0;
	/* Last: @ready may free the object. */
	t->ready(t->ud, rc, &e);
}

static int start_attempt(struct store_gcp_token *t, struct cp_err *err);

static void attempt_again(uv_timer_t *h)
{
	struct store_gcp_token *t = h->data;
	struct cp_err e = { 0 };
	int rc = start_attempt(t, &e);
	if (rc) {
		t->attempt = 0;
		t->ready(t->ud, rc, &e);
	}
}

int store_gcp_token_fetch(struct store_gcp_token *t, struct cp_err *err)
{
	if (t->attempt) /* one is running, or waiting to try again */
		return 0;
	return start_attempt(t, err);
}

static int start_attempt(struct store_gcp_token *t, struct cp_err *err)
{
	CURL *e = curl_easy_init();
	struct curl_slist *h = curl_slist_append(NULL, "Metadata-Flavor: Google");
	if (!e || !h) {
		if (e)
			curl_easy_cleanup(e);
		curl_slist_free_all(h);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	t->easy = e;
	t->hdrs = h;
	t->ebuf[0] = '\0';
	curl_easy_setopt(e, CURLOPT_URL, t->url);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http");
	curl_easy_setopt(e, CURLOPT_PROXY, "");
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->ebuf);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->hdrs);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "codepod/0.1");
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_MS);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, TOTAL_MS);
	int rc = cp_curl_add(t->curl, &t->x, e, fetched, t, err);
	if (rc) {
		end_fetch(t);
		return rc;
	}
	t->attempt++;
	t->fetches++;
	return 0;
}
