/*
 * otlp.c - the OTLP/HTTP JSON span exporter (broker/otlp.h).
 *
 * OTLP/JSON as its specification says: trace and span ids as lowercase hex
 * (not base64), 64-bit integers as decimal strings, enums as integers.
 * Each span is written as JSON text when it comes (no tree of values per
 * span: a traced tool call costs a few microseconds), and a request is the
 * queued texts between the resource's prefix and a suffix.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "base/buf.h"
#include "base/curl_uv.h"
#include "base/log.h"
#include "base/traceparent.h"
#include "broker/otlp.h"

/* A refused or failed batch is sent again after 250 ms, 500 ms, 1 s, 2 s. */
#define RETRIES 4
#define RETRY_FIRST_MS 250
/* A request the collector does not answer holds the spans behind it: cut it
 * soon, so that they still go out within 5 s of their end once it answers. */
#define REQUEST_TIMEOUT_MS 4000

enum { SPAN_KIND_INTERNAL = 1, SPAN_KIND_CLIENT = 3, STATUS_ERROR = 2 };

struct broker_otlp {
	struct broker_otlp_config cfg;
	char *url;
	struct cp_curl *curl;
	struct cp_buf queue;     /* the waiting spans' JSON texts, comma-separated */
	size_t nqueue;
	char *prefix;            /* a request's text up to its spans */
	/* the batch being sent (at most one at a time) */
	CURL *easy;
	struct cp_curl_xfer xfer;
	struct curl_slist *hdrs;
	struct curl_slist *extra; /* the deployment's own headers (cfg.headers) */
	char *body;
	size_t nbatch;
	unsigned attempt;
	int in_flight;           /* a transfer is added */
	uv_timer_t timer;        /* flush, retry and the shutdown's limit */
	int closing;
	uint64_t close_deadline_ms;
	unsigned long long dropped, exported;
};

static uint64_t now_ms(const struct broker_otlp *o)
{
	return uv_now(o->cfg.loop);
}

static void drop(struct broker_otlp *o, size_t n, const char *why)
{
	if (n == 0)
		return;
	o->dropped += n;
	cp_log(CP_LOG_WARN, "otlp.dropped", "spans", json_integer((json_int_t)n), "reason",
	       json_string(why), NULL);
}

/* A JSON string of @v's bytes (valid UTF-8: they come from jansson). */
static void put_str(struct cp_buf *b, const char *v, size_t n)
{
	cp_buf_add(b, "\"", 1, NULL);
	size_t run = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)v[i];
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		cp_buf_add(b, v + run, i - run, NULL);
		if (c == '"' || c == '\\')
			cp_buf_addf(b, NULL, "\\%c", c);
		else
			cp_buf_addf(b, NULL, "\\u%04x", c);
		run = i + 1;
	}
	cp_buf_add(b, v + run, n - run, NULL);
	cp_buf_add(b, "\"", 1, NULL);
}

static void put_attributes(struct cp_buf *b, const json_t *obj)
{
	const char *k;
	json_t *v;
	int first = 1;
	cp_buf_add(b, "[", 1, NULL);
	json_object_foreach((json_t *)obj, k, v) {
		if (!json_is_string(v) && !json_is_boolean(v) && !json_is_integer(v))
			continue;
		cp_buf_addf(b, NULL, "%s{\"key\":", first ? "" : ",");
		first = 0;
		put_str(b, k, strlen(k));
		if (json_is_string(v)) {
			cp_buf_addf(b, NULL, ",\"value\":{\"stringValue\":");
			put_str(b, json_string_value(v), json_string_length(v));
			cp_buf_add(b, "}}", 2, NULL);
		} else if (json_is_boolean(v)) {
			cp_buf_addf(b, NULL, ",\"value\":{\"boolValue\":%s}}", json_is_true(v) ? "true" : "false");
		} else {
			cp_buf_addf(b, NULL, ",\"value\":{\"intValue\":\"%lld\"}}",
			            (long long)json_integer_value(v));
		}
	}
	cp_buf_add(b, "]", 1, NULL);
}

static void on_timer(uv_timer_t *t);

static void arm(struct broker_otlp *o, uint64_t ms)
{
	uv_timer_start(&o->timer, on_timer, ms, 0);
}

void broker_otlp_span(void *ud, const struct codepod_span *sp)
{
	struct broker_otlp *o = ud;
	if (o->closing || o->nqueue >= o->cfg.max_queue) {
		drop(o, 1, o->closing ? "shutting down" : "queue full");
		return;
	}
	char tid[33], sid[17], pid[17];
	cp_trace_hex(sp->trace_id, CP_TRACE_ID_LEN, tid);
	cp_trace_hex(sp->span_id, CP_SPAN_ID_LEN, sid);
	int client = strcmp(sp->name, "codepod.tool_call") == 0;
	struct cp_buf *b = &o->queue;
	size_t was = cp_buf_len(b);
	cp_buf_addf(b, NULL, "%s{\"traceId\":\"%s\",\"spanId\":\"%s\",", o->nqueue ? "," : "", tid, sid);
	if (sp->parent_id) {
		cp_trace_hex(sp->parent_id, CP_SPAN_ID_LEN, pid);
		cp_buf_addf(b, NULL, "\"parentSpanId\":\"%s\",", pid);
	}
	if (sp->tracestate) { /* the caller's, as W3C says a span of its trace carries it */
		cp_buf_addf(b, NULL, "\"traceState\":");
		put_str(b, sp->tracestate, strlen(sp->tracestate));
		cp_buf_add(b, ",", 1, NULL);
	}
	cp_buf_addf(b, NULL, "\"name\":");
	put_str(b, sp->name, strlen(sp->name));
	cp_buf_addf(b, NULL, ",\"kind\":%d,\"startTimeUnixNano\":\"%llu\",\"endTimeUnixNano\":\"%llu\","
	            "\"attributes\":", client ? SPAN_KIND_CLIENT : SPAN_KIND_INTERNAL,
	            sp->start_unix_ns, sp->end_unix_ns);
	put_attributes(b, sp->attributes);
	if (cp_buf_addf(b, NULL, ",\"status\":{\"code\":%d}}", sp->error ? STATUS_ERROR : 0)) {
		cp_buf_truncate(b, was); /* out of memory: none of it */
		drop(o, 1, "out of memory");
		return;
	}
	o->nqueue++;
	/* A full batch goes at once (on the next turn: never from inside the
	 * engine's callback); else within flush_ms. A batch in flight or
	 * waiting to be retried sends the queue on when it is through. */
	if (o->in_flight || o->body)
		return;
	if (o->nqueue >= o->cfg.batch)
		arm(o, 0);
	else if (!uv_is_active((uv_handle_t *)&o->timer))
		arm(o, o->cfg.flush_ms);
}

static void batch_free(struct broker_otlp *o)
{
	if (o->easy)
		curl_easy_cleanup(o->easy);
	o->easy = NULL;
	curl_slist_free_all(o->hdrs);
	o->hdrs = NULL;
	free(o->body);
	o->body = NULL;
	o->nbatch = 0;
	o->attempt = 0;
}


static size_t discard(char *p, size_t size, size_t n, void *ud)
{
	(void)p;
	(void)ud;
	return size * n;
}

static void on_done(void *ud, CURLcode res)
{
	struct broker_otlp *o = ud;
	o->in_flight = 0;
	long status = 0;
	curl_easy_getinfo(o->easy, CURLINFO_RESPONSE_CODE, &status);
	if (res == CURLE_OK && status >= 200 && status < 300) {
		o->exported += o->nbatch;
		batch_free(o);
	} else {
		/* Retried: no answer, 408, 429 and 5xx (the collector may recover);
		 * any other status will not change. */
		int again = res != CURLE_OK || status == 408 || status == 429 || status >= 500;
		if (!again || ++o->attempt > RETRIES || o->closing) {
			drop(o, o->nbatch, res != CURLE_OK ? "collector unreachable" : "collector refused");
			batch_free(o);
		} else {
			arm(o, (uint64_t)RETRY_FIRST_MS << (o->attempt - 1));
			return;
		}
	}
	if (o->closing) {
		arm(o, 0); /* the next batch, or the close: not from inside curl's callback */
		return;
	}
	if (o->nqueue > 0)
		arm(o, o->nqueue >= o->cfg.batch ? 0 : o->cfg.flush_ms);
}

/* Takes what is queued into a request body. */
static int make_batch(struct broker_otlp *o)
{
	struct cp_buf body;
	cp_buf_init(&body, SIZE_MAX);
	size_t n = o->nqueue;
	int rc = cp_buf_add(&body, o->prefix, strlen(o->prefix), NULL);
	if (!rc)
		rc = cp_buf_add(&body, cp_buf_ptr(&o->queue), cp_buf_len(&o->queue), NULL);
	if (!rc)
		rc = cp_buf_add(&body, "]}]}]}", 6, NULL);
	cp_buf_reset(&o->queue);
	o->nqueue = 0;
	o->body = rc ? NULL : cp_buf_take(&body, NULL, NULL);
	cp_buf_free(&body);
	o->nbatch = n;
	o->attempt = 0;
	if (!o->body) {
		drop(o, n, "out of memory");
		o->nbatch = 0;
		return -1;
	}
	return 0;
}

static void send_batch(struct broker_otlp *o)
{
	if (o->easy)
		curl_easy_cleanup(o->easy);
	curl_slist_free_all(o->hdrs);
	o->easy = curl_easy_init();
	o->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
	struct curl_slist *h2 = o->hdrs ? curl_slist_append(o->hdrs, "Expect:") : NULL;
	for (const struct curl_slist *x = o->extra; h2 && x; x = x->next)
		h2 = curl_slist_append(h2, x->data);
	if (!o->easy || !h2) {
		drop(o, o->nbatch, "out of memory");
		batch_free(o);
		return;
	}
	o->hdrs = h2;
	long timeout = REQUEST_TIMEOUT_MS;
	if (o->closing) {
		uint64_t now = now_ms(o);
		timeout = o->close_deadline_ms > now ? (long)(o->close_deadline_ms - now) : 1;
	}
	CURL *e = o->easy;
	curl_easy_setopt(e, CURLOPT_URL, o->url);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_POST, 1L);
	curl_easy_setopt(e, CURLOPT_POSTFIELDS, o->body);
	curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(o->body));
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, o->hdrs);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
	if (cp_curl_add(o->curl, &o->xfer, e, on_done, o, NULL)) {
		drop(o, o->nbatch, "collector unreachable");
		batch_free(o);
		return;
	}
	o->in_flight = 1;
}

static void finish_close(struct broker_otlp *o);

static void on_timer(uv_timer_t *t)
{
	struct broker_otlp *o = t->data;
	if (o->closing && now_ms(o) >= o->close_deadline_ms) {
		finish_close(o);
		return;
	}
	if (o->in_flight)
		return;
	if (!o->body && o->nqueue > 0 && make_batch(o))
		return;
	if (o->body)
		send_batch(o);
	else if (o->closing)
		finish_close(o);
}

int broker_otlp_new(const struct broker_otlp_config *cfg, struct broker_otlp **out,
                    struct cp_err *err)
{
	const char *ep = cfg->endpoint;
	if (!ep || (strncmp(ep, "http://", 7) && strncmp(ep, "https://", 8)))
		return cp_err_set(err, CP_E_INVALID_REQUEST,
		                  "the endpoint must be an http:// or https:// URL");
	struct broker_otlp *o = calloc(1, sizeof *o);
	if (!o)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	o->cfg = *cfg;
	if (!o->cfg.max_queue)
		o->cfg.max_queue = 2048;
	if (!o->cfg.batch)
		o->cfg.batch = 512;
	if (!o->cfg.flush_ms)
		o->cfg.flush_ms = 1000;
	if (!o->cfg.shutdown_ms)
		o->cfg.shutdown_ms = 1800; /* under 2 s with the exit around it */
	if (!o->cfg.service_version)
		o->cfg.service_version = "";
	size_t n = strlen(ep);
	const char *path = cfg->endpoint_is_traces_url ? "" : "/v1/traces";
	while (!cfg->endpoint_is_traces_url && n > 0 && ep[n - 1] == '/')
		n--;
	o->url = malloc(n + strlen(path) + 1);
	if (o->url) {
		memcpy(o->url, ep, n);
		memcpy(o->url + n, path, strlen(path) + 1);
	}
	int copied = 1;
	for (const struct curl_slist *x = cfg->headers; copied && x; x = x->next) {
		struct curl_slist *l = curl_slist_append(o->extra, x->data);
		copied = l != NULL;
		if (l)
			o->extra = l;
	}
	o->cfg.headers = NULL; /* ours is o->extra */
	cp_buf_init(&o->queue, SIZE_MAX);
	json_t *head = json_pack("{s:{s:[{s:s,s:{s:s}},{s:s,s:{s:s}}]},s:{s:s,s:s}}", "resource",
	                         "attributes", "key", "service.name", "value", "stringValue",
	                         "codepod", "key", "service.version", "value", "stringValue",
	                         o->cfg.service_version, "scope", "name", "codepod", "version",
	                         o->cfg.service_version);
	char *h = head ? json_dumps(head, JSON_COMPACT) : NULL;
	json_decref(head);
	if (h) { /* {"resource":...,"scope":...} -> the text before the first span */
		size_t hl = strlen(h);
		const char *mid = strstr(h, ",\"scope\":");
		o->prefix = mid ? malloc(hl + 64) : NULL;
		if (o->prefix)
			snprintf(o->prefix, hl + 64, "{\"resourceSpans\":[%.*s,\"scopeSpans\":[{%.*s,\"spans\":[",
			         (int)(mid - h), h, (int)(hl - (size_t)(mid - h) - 2), mid + 1);
		free(h);
	}
	int rc = o->url && o->prefix && copied ? cp_curl_new(cfg->loop, &o->curl, err)
	                                       : cp_err_set(err, CP_E_NOMEM, "out of memory");
	if (rc) {
		curl_slist_free_all(o->extra);
		free(o->prefix);
		free(o->url);
		free(o);
		return rc;
	}
	uv_timer_init(cfg->loop, &o->timer);
	o->timer.data = o;
	*out = o;
	return 0;
}

unsigned long long broker_otlp_dropped(const struct broker_otlp *o)
{
	return o ? o->dropped : 0;
}

unsigned long long broker_otlp_exported(const struct broker_otlp *o)
{
	return o ? o->exported : 0;
}

static void on_timer_closed(uv_handle_t *h)
{
	struct broker_otlp *o = h->data;
	cp_buf_free(&o->queue);
	curl_slist_free_all(o->extra);
	free(o->prefix);
	free(o->url);
	free(o);
}

static void finish_close(struct broker_otlp *o)
{
	if (uv_is_closing((uv_handle_t *)&o->timer))
		return;
	if (o->in_flight) {
		cp_curl_cancel(o->curl, &o->xfer);
		o->in_flight = 0;
	}
	drop(o, o->nbatch + o->nqueue, "shutdown limit");
	batch_free(o);
	cp_buf_reset(&o->queue);
	o->nqueue = 0;
	cp_log(CP_LOG_INFO, "otlp.closed", "exported", json_integer((json_int_t)o->exported),
	       "dropped", json_integer((json_int_t)o->dropped), NULL);
	cp_curl_close(o->curl, NULL, NULL);
	o->curl = NULL;
	uv_timer_stop(&o->timer);
	uv_close((uv_handle_t *)&o->timer, on_timer_closed);
}

void broker_otlp_close(struct broker_otlp *o)
{
	if (!o || o->closing)
		return;
	o->closing = 1;
	uv_update_time(o->cfg.loop);
	o->close_deadline_ms = now_ms(o) + o->cfg.shutdown_ms;
	if (!o->in_flight && !o->body && o->nqueue == 0) {
		finish_close(o);
		return;
	}
	/* The limit: whatever is unsent by then is dropped. */
	if (!o->in_flight)
		arm(o, 0);
	else
		uv_timer_start(&o->timer, on_timer, o->cfg.shutdown_ms, 0);
}
