/*
 * http_server.c - the lws context and its vhosts, HTTP routing and
 * responses, the session hooks (caps, metrics, audit) and the graceful stop.
 * WebSocket sessions are in http_server_ws.c, POST /v1/executions in
 * http_server_exec.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/crypto.h>

#include "broker/features.h"
#include "broker/http_server_int.h"
#include "base/log.h"
#include "broker/webhook_sign.h"
#include "broker/ws_mask.h"

#define FINISH_GRACE_MS 3000
/* How long the rest of a refused body may take to arrive before the close. */
#define LINGER_S 5

static int http_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user,
                         void *in, size_t len);

static const struct lws_protocols protocols[] = {
	{ "http", http_callback, sizeof(struct broker_http_pss), 0, 0, NULL, 0 },
	{ BROKER_HTTP_SUBPROTOCOL, broker_http_ws_callback, sizeof(void *), 64 * 1024, 0, NULL, 0 },
	{ NULL, NULL, 0, 0, 0, NULL, 0 },
};

void broker_http_config_defaults(struct broker_http_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->max_sessions = 1000;
	cfg->max_executions = 256;
	cfg->max_message = (size_t)(16u << 20) + (1u << 20);
	cfg->max_body = (size_t)(16u << 20) + (1u << 20);
	cfg->max_queue = (size_t)64 << 20;
	cfg->header_timeout_s = 10;
	cfg->max_pending = 256;
	cfg->idle_timeout_s = 300;
	cfg->ws_ping_interval_s = 15;
	cfg->ws_idle_timeout_s = 45;
	cfg->webhook_timeout_ms = 0; /* the program's deadline bounds each call */
	broker_hub_config_defaults(&cfg->hub);
}

static uint64_t now_ms(struct broker_http *srv)
{
	return uv_now(srv->loop);
}

/* ---- session bookkeeping ---- */

static void list_remove(struct sess_base **head, struct sess_base *b)
{
	if (b->prev)
		b->prev->next = b->next;
	else
		*head = b->next;
	if (b->next)
		b->next->prev = b->prev;
	b->next = b->prev = NULL;
}

static void list_push(struct sess_base **head, struct sess_base *b)
{
	b->prev = NULL;
	b->next = *head;
	if (*head)
		(*head)->prev = b;
	*head = b;
}

void broker_http_sess_link(struct broker_http *srv, struct sess_base *b, int kind)
{
	b->srv = srv;
	b->kind = kind;
	list_push(&srv->sessions, b);
	srv->nsessions++;
}

void broker_http_sess_retire(struct sess_base *b)
{
	struct broker_http *srv = b->srv;
	list_remove(&srv->sessions, b);
	srv->nsessions--;
	list_push(&srv->reap, b);
	broker_http_reap_schedule(srv);
}

static void free_sess(struct sess_base *b)
{
	if (b->kind == BROKER_SESS_WS)
		broker_http_ws_free(b);
	else if (b->kind == BROKER_SESS_FILES)
		broker_http_files_free(b);
	else
		broker_http_exec_free(b);
}

static void on_reaper(uv_timer_t *t)
{
	struct broker_http *srv = t->data;
	for (struct sess_base *b = srv->sessions, *next = NULL; b; b = next) {
		next = b->next;
		if (b->close_pending) {
			b->close_pending = 0;
			broker_session_close(b->session, 0); /* may retire b */
		}
	}
	while (srv->reap) {
		struct sess_base *b = srv->reap;
		list_remove(&srv->reap, b);
		free_sess(b);
	}
	if (srv->draining)
		broker_http_check_drained(srv);
}

void broker_http_reap_schedule(struct broker_http *srv)
{
	if (srv->timers_open && !uv_is_active((uv_handle_t *)&srv->reaper))
		uv_timer_start(&srv->reaper, on_reaper, 0, 0);
}

/* ---- session hooks ---- */

static int hook_admit(void *ud, const json_t *execute, const char **code, char *msg)
{
	(void)execute;
	struct broker_http *srv = ud;
	if (srv->draining) {
		*code = "SHUTTING_DOWN";
		snprintf(msg, CP_ERR_MSG_MAX, "the server is shutting down; retry on another replica");
		broker_http_metrics_count(srv->metrics, "shutting_down");
		return -1;
	}
	if (codepod_running(srv->cfg.cp) >= srv->cfg.max_executions) {
		*code = "TOO_MANY_EXECUTIONS";
		snprintf(msg, CP_ERR_MSG_MAX, "%u executions are running, the most this server takes; "
		         "retry later", srv->cfg.max_executions);
		broker_http_metrics_count(srv->metrics, "too_many_executions");
		return -1;
	}
	return 0;
}

static void hook_outcome(void *ud, const char *id, const char *conversation,
                         const json_t *outcome)
{
	struct broker_http *srv = ud;
	broker_http_metrics_outcome(srv->metrics, outcome);
	broker_http_audit(srv, id, conversation, outcome);
	if (srv->draining)
		broker_http_reap_schedule(srv); /* counts settle after this callback */
}

const struct broker_session_hooks broker_http_session_hooks = { hook_admit, hook_outcome };

/* ---- responses ---- */

static void pss_reset(struct broker_http_pss *pss)
{
	free(pss->resp);
	cp_buf_free(&pss->body);
	if (pss->req)
		broker_http_exec_detach(pss->req);
	if (pss->freq)
		broker_http_files_detach(pss->freq);
	free(pss->post_uri);
	memset(pss, 0, sizeof *pss);
}

void broker_http_respond_take(struct lws *wsi, struct broker_http_pss *pss, unsigned status,
                       const char *ctype, unsigned char *body, size_t len)
{
	free(pss->resp);
	pss->resp = body;
	pss->resp_len = body ? len : 0;
	pss->resp_off = 0;
	pss->status = status;
	pss->ctype = ctype;
	pss->hdr_sent = 0;
	pss->responding = 1;
	lws_callback_on_writable(wsi);
}

static unsigned char *dump_pre(const json_t *v, size_t *len)
{
	size_t n = json_dumpb(v, NULL, 0, JSON_COMPACT);
	unsigned char *b = n ? malloc(LWS_PRE + n + 1) : NULL;
	if (!b)
		return NULL;
	json_dumpb(v, (char *)b + LWS_PRE, n, JSON_COMPACT);
	b[LWS_PRE + n] = '\n';
	*len = n + 1;
	return b;
}

void broker_http_respond_json(struct lws *wsi, struct broker_http_pss *pss, unsigned status, const json_t *body)
{
	size_t len = 0;
	unsigned char *b = dump_pre(body, &len);
	if (!b)
		status = 500;
	broker_http_respond_take(wsi, pss, status, "application/json", b, len);
}

static json_t *error_body(const char *code, const char *msg)
{
	return json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg);
}

void broker_http_respond_error(struct lws *wsi, struct broker_http_pss *pss, unsigned status,
                        const char *code, const char *msg)
{
	json_t *e = error_body(code, msg);
	broker_http_respond_json(wsi, pss, status, e);
	json_decref(e);
}

/* Headers, then the body in chunks, each from its own WRITEABLE. */
static int on_http_writeable(struct lws *wsi, struct broker_http_pss *pss)
{
	if (pss->freq && !pss->responding)
		return broker_http_files_writeable(wsi, pss);
	if (!pss->responding)
		return 0;
	if (!pss->hdr_sent) {
		unsigned char hb[LWS_PRE + 1024];
		unsigned char *start = hb + LWS_PRE, *p = start, *end = hb + sizeof hb - 1;
		if (lws_add_http_common_headers(wsi, pss->status, pss->ctype, pss->resp_len, &p, end) ||
		    lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_CACHE_CONTROL,
		                                 (const unsigned char *)"no-store", 8, &p, end) ||
		    lws_finalize_write_http_header(wsi, start, &p, end))
			return -1;
		pss->hdr_sent = 1;
		if (pss->resp_len) {
			lws_callback_on_writable(wsi);
			return 0;
		}
	} else {
		size_t left = pss->resp_len - pss->resp_off;
		size_t chunk = left > 65536 ? 65536 : left;
		int final = chunk == left;
		if (lws_write(wsi, pss->resp + LWS_PRE + pss->resp_off, chunk,
		              final ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP) < 0)
			return -1;
		pss->resp_off += chunk;
		if (!final) {
			lws_callback_on_writable(wsi);
			return 0;
		}
	}
	int close_after = pss->close_after;
	free(pss->resp);
	pss->resp = NULL;
	pss->responding = 0;
	if (close_after && pss->linger) {
		/* A close with the body still coming would reset the connection
		 * and the answer with it: the answer goes (and our end is shut),
		 * the body is read to its end (dropped), then the close. */
		shutdown(lws_get_socket_fd(wsi), SHUT_WR);
		lws_set_timeout(wsi, PENDING_TIMEOUT_CLOSE_SEND, LINGER_S);
		return 0;
	}
	if (close_after)
		return -1;
	if (lws_http_transaction_completed(wsi))
		return -1;
	/* kept alive: waiting for its next request head, as a new connection
	 * would, and for as long (not --idle-timeout, which is a session's) */
	struct lws_context *ctx = lws_get_context(wsi);
	struct broker_http *srv = ctx ? lws_context_user(ctx) : NULL;
	if (srv) {
		broker_http_pending_again(srv, lws_get_socket_fd(wsi));
		lws_set_timeout(wsi, PENDING_TIMEOUT_HTTP_KEEPALIVE_IDLE, (int)srv->cfg.header_timeout_s);
	}
	return 0;
}

/* Rejecting an upgrade: the response must be written from the callback. */
static int reject_now(struct lws *wsi, unsigned status, const char *code, const char *msg)
{
	unsigned char buf[LWS_PRE + 2048];
	unsigned char *start = buf + LWS_PRE, *p = start, *end = buf + sizeof buf - 1;
	char body[600];
	int n = snprintf(body, sizeof body, "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}\n",
	                 code, msg);
	if (n < 0 || (size_t)n >= sizeof body)
		return -1;
	if (lws_add_http_common_headers(wsi, status, "application/json", (lws_filepos_t)n, &p, end) ||
	    lws_finalize_http_header(wsi, &p, end) || end - p < n)
		return -1;
	memcpy(p, body, (size_t)n);
	p += n;
	if (lws_write(wsi, start, (size_t)(p - start), LWS_WRITE_HTTP_HEADERS) < 0)
		return -1;
	return 1;
}

/* ---- routing ---- */

static int authorized(struct broker_http *srv, struct lws *wsi)
{
	char h[1024];
	int n = lws_hdr_copy(wsi, h, sizeof h, WSI_TOKEN_HTTP_AUTHORIZATION);
	return broker_http_auth_check(srv->auth, n > 0 ? h : NULL);
}

static const char unauthorized_msg[] = "missing or wrong bearer token";

static int all_digits(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

/* A body length this server and a proxy in front of it could read
 * differently (request smuggling): refused, and the connection closed. */
static const char *framing_error(struct lws *wsi)
{
	int cl = lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH) > 0;
	if (cl && lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_TRANSFER_ENCODING) > 0)
		return "Content-Length with Transfer-Encoding is refused";
	/* lws keeps each repeat of a header as a fragment of its own: two are
	 * refused even when alike (RFC 9112 lets a server refuse them all) */
	char first[32];
	if (cl && lws_hdr_fragment_length(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH, 1) > 0)
		return "conflicting Content-Length values: give one";
	if (cl && (lws_hdr_copy_fragment(wsi, first, sizeof first, WSI_TOKEN_HTTP_CONTENT_LENGTH, 0) < 0 ||
	           !all_digits(first)))
		return "Content-Length must be one decimal number";
	return NULL;
}

static int on_confirm_upgrade(struct broker_http *srv, struct lws *wsi)
{
	char uri[256], proto[256];
	broker_http_pending_done(srv, lws_get_socket_fd(wsi));
	const char *bad = framing_error(wsi);
	if (bad)
		return reject_now(wsi, 400, "INVALID_REQUEST", bad);
	/* its frames are followed from the connection's first byte (ws_mask.h) */
	if (!broker_wsmask_upgradable(lws_get_socket_fd(wsi)))
		return reject_now(wsi, 400, "INVALID_REQUEST",
		                  "a WebSocket must be its connection's first request");
	if (lws_hdr_copy(wsi, uri, sizeof uri, WSI_TOKEN_GET_URI) <= 0 || strcmp(uri, "/v1/session"))
		return reject_now(wsi, 404, "NOT_FOUND", "no WebSocket endpoint here; use /v1/session");
	if (!authorized(srv, wsi)) {
		broker_http_metrics_count(srv->metrics, "unauthorized");
		return reject_now(wsi, 401, "UNAUTHORIZED", unauthorized_msg);
	}
	if (srv->draining) {
		broker_http_metrics_count(srv->metrics, "shutting_down");
		return reject_now(wsi, 503, "SHUTTING_DOWN", "the server is shutting down");
	}
	if (srv->nsessions >= srv->cfg.max_sessions) {
		broker_http_metrics_count(srv->metrics, "too_many_sessions");
		return reject_now(wsi, 429, "TOO_MANY_SESSIONS",
		                  "the server has as many sessions as it takes; retry later");
	}
	int n = lws_hdr_copy(wsi, proto, sizeof proto, WSI_TOKEN_PROTOCOL);
	if (n <= 0 || !strstr(proto, BROKER_HTTP_SUBPROTOCOL))
		return reject_now(wsi, 400, "INVALID_REQUEST",
		                  "the WebSocket subprotocol must be " BROKER_HTTP_SUBPROTOCOL);
	return 0;
}

static unsigned long long content_length(struct lws *wsi)
{
	char v[32];
	if (lws_hdr_copy(wsi, v, sizeof v, WSI_TOKEN_HTTP_CONTENT_LENGTH) <= 0)
		return 0;
	return strtoull(v, NULL, 10);
}

static void serve_probe(struct broker_http *srv, struct lws *wsi, struct broker_http_pss *pss,
                        const char *uri)
{
	if (strcmp(uri, "/metrics") == 0) {
		size_t len = 0;
		char *text = broker_http_metrics_render(srv->metrics, codepod_backend_of(srv->cfg.cp),
		                                 codepod_running(srv->cfg.cp),
		                                 srv->nsessions, srv->hub, &len);
		unsigned char *b = text ? malloc(LWS_PRE + len) : NULL;
		if (b)
			memcpy(b + LWS_PRE, text, len);
		free(text);
		broker_http_respond_take(wsi, pss, b ? 200 : 500, "text/plain; version=0.0.4; charset=utf-8",
		                  b, len);
		return;
	}
	int ready = strcmp(uri, "/healthz") == 0 || !srv->draining;
	json_t *body = json_pack("{s:s}", "status", ready ? "ok" : "draining");
	broker_http_respond_json(wsi, pss, ready ? 200 : 503, body);
	json_decref(body);
}

#define EXECUTIONS_PREFIX "/v1/executions/"
#define CONVERSATIONS_PREFIX "/v1/conversations/"

/* GET /v1/executions/{id}: 200 with the kept outcome, 202 while it runs,
 * 404 when this replica does not know it (never ran here, or expired). */
static void serve_execution(struct broker_http *srv, struct lws *wsi, struct broker_http_pss *pss,
                            const char *id)
{
	const json_t *outcome = NULL;
	switch (*id ? broker_hub_lookup(srv->hub, id, &outcome) : BROKER_HUB_UNKNOWN) {
	case BROKER_HUB_FINISHED:
		broker_http_respond_json(wsi, pss, 200, outcome);
		return;
	case BROKER_HUB_RUNNING: {
		json_t *b = json_pack("{s:s,s:s}", "executionId", id, "status", "running");
		broker_http_respond_json(wsi, pss, 202, b);
		json_decref(b);
		return;
	}
	default:
		broker_http_respond_error(wsi, pss, 404, "UNKNOWN_EXECUTION",
		                   "no running or kept execution with this id here: unknown, "
		                   "expired, or run by another replica");
	}
}

/* GET /v1/info: what this server speaks and has (broker/features.h); also
 * while draining, so that a client can still tell what it talks to. */
static void serve_info(struct lws *wsi, struct broker_http_pss *pss, int get)
{
	if (!get) {
		broker_http_respond_error(wsi, pss, 405, "INVALID_REQUEST", "use GET");
		return;
	}
	json_t *info = broker_info(BROKER_SERVED_LISTEN);
	if (info)
		broker_http_respond_json(wsi, pss, 200, info);
	else
		broker_http_respond_error(wsi, pss, 500, "INTERNAL", "out of memory");
	json_decref(info);
}

static int on_http(struct broker_http *srv, struct lws *wsi, struct broker_http_pss *pss,
                   const char *uri)
{
	pss_reset(pss);
	broker_http_pending_done(srv, lws_get_socket_fd(wsi));
	broker_wsmask_untrack(lws_get_socket_fd(wsi)); /* no WebSocket on this connection now */
	const char *bad = framing_error(wsi);
	if (bad) {
		pss->close_after = 1;
		broker_http_metrics_count(srv->metrics, "bad_framing");
		broker_http_respond_error(wsi, pss, 400, "INVALID_REQUEST", bad);
		return 0;
	}
	int get = lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) > 0;
	int post = lws_hdr_total_length(wsi, WSI_TOKEN_POST_URI) > 0;
	int del = lws_hdr_total_length(wsi, WSI_TOKEN_DELETE_URI) > 0;
	if (get && (!strcmp(uri, "/healthz") || !strcmp(uri, "/readyz") || !strcmp(uri, "/metrics"))) {
		serve_probe(srv, wsi, pss, uri);
		return 0;
	}
	pss->close_after = post; /* an unread body cannot be skipped on a kept-alive connection */
	if (!authorized(srv, wsi)) {
		broker_http_metrics_count(srv->metrics, "unauthorized");
		broker_http_respond_error(wsi, pss, 401, "UNAUTHORIZED", unauthorized_msg);
	} else if (get && !strncmp(uri, EXECUTIONS_PREFIX, sizeof EXECUTIONS_PREFIX - 1)) {
		serve_execution(srv, wsi, pss, uri + sizeof EXECUTIONS_PREFIX - 1);
	} else if (!strcmp(uri, "/v1/info")) {
		serve_info(wsi, pss, get);
	} else if (srv->draining) {
		broker_http_respond_error(wsi, pss, 503, "SHUTTING_DOWN", "the server is shutting down");
	} else if (del && !strncmp(uri, CONVERSATIONS_PREFIX, sizeof CONVERSATIONS_PREFIX - 1) &&
	           !strchr(uri + sizeof CONVERSATIONS_PREFIX - 1, '/')) {
		/* the conversation itself: one segment; its files and archive below */
		broker_http_delete_start(srv, wsi, pss, uri + sizeof CONVERSATIONS_PREFIX - 1);
	} else if (!strcmp(uri, "/v1/session")) {
		broker_http_respond_error(wsi, pss, 426, "INVALID_REQUEST",
		                   "GET /v1/session needs a WebSocket upgrade (subprotocol "
		                   BROKER_HTTP_SUBPROTOCOL ")");
	} else if ((!strcmp(uri, "/v1/executions") || !strcmp(uri, "/v1/declarations")) && post) {
		if (content_length(wsi) > srv->cfg.max_body) {
			broker_http_metrics_count(srv->metrics, "body_too_large");
			broker_http_respond_error(wsi, pss, 413, "INVALID_REQUEST", "request body over the limit");
			return 0;
		}
		pss->post = !strcmp(uri, "/v1/executions") ? BROKER_HTTP_POST_EXECUTION : BROKER_HTTP_POST_DECLARATIONS;
		broker_http_trace_read(wsi, pss);
		cp_buf_init(&pss->body, srv->cfg.max_body);
		pss->close_after = 0;
		lws_set_timeout(wsi, PENDING_TIMEOUT_HTTP_CONTENT, (int)srv->cfg.header_timeout_s);
	} else if (!strcmp(uri, "/v1/executions") || !strcmp(uri, "/v1/declarations")) {
		broker_http_respond_error(wsi, pss, 405, "INVALID_REQUEST", "use POST");
	} else if (!strncmp(uri, "/v1/conversations/", 18) && srv->nsessions >= srv->cfg.max_sessions) {
		broker_http_metrics_count(srv->metrics, "too_many_sessions");
		broker_http_respond_error(wsi, pss, 429, "TOO_MANY_SESSIONS", "the server is full; retry later");
	} else if (!strncmp(uri, "/v1/conversations/", 18)) {
		if (broker_http_files_route(srv, wsi, pss, uri) == 2) {
			if (content_length(wsi) > srv->cfg.max_body) {
				broker_http_respond_error(wsi, pss, 413, "INVALID_REQUEST", "request body over the limit");
				return 0;
			}
			pss->post = BROKER_HTTP_POST_COMMAND;
			pss->post_uri = strdup(uri);
			cp_buf_init(&pss->body, srv->cfg.max_body);
			pss->close_after = 0;
			lws_set_timeout(wsi, PENDING_TIMEOUT_HTTP_CONTENT, (int)srv->cfg.header_timeout_s);
		}
	} else {
		broker_http_respond_error(wsi, pss, 404, "NOT_FOUND", "no such endpoint");
	}
	return 0;
}

static int on_body(struct broker_http *srv, struct lws *wsi, struct broker_http_pss *pss,
                   const void *in, size_t len)
{
	if (pss->freq)
		return broker_http_files_body(pss, wsi, in, len);
	if (!pss->post || pss->body_over)
		return 0;
	int rc = cp_buf_add(&pss->body, in, len, NULL);
	if (rc == CP_E_TOO_BIG) {
		pss->body_over = 1;
		cp_buf_free(&pss->body);
		pss->close_after = 1;
		broker_http_metrics_count(srv->metrics, "body_too_large");
		broker_http_respond_error(wsi, pss, 413, "INVALID_REQUEST", "request body over the limit");
		return 0;
	}
	return rc ? -1 : 0; /* out of memory: the connection is dropped */
}

static int http_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user,
                         void *in, size_t len)
{
	struct broker_http_pss *pss = user;
	struct lws_context *ctx = lws_get_context(wsi);
	struct broker_http *srv = ctx ? lws_context_user(ctx) : NULL;
	switch (reason) {
	case LWS_CALLBACK_FILTER_NETWORK_CONNECTION:
		if (srv && broker_http_pending_open(srv, (int)(intptr_t)in))
			return -1;
		broker_wsmask_track((int)(intptr_t)in); /* from its first byte */
		return 0;
	case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
		return on_confirm_upgrade(srv, wsi);
	case LWS_CALLBACK_HTTP:
		return on_http(srv, wsi, pss, in ? (const char *)in : "");
	case LWS_CALLBACK_HTTP_BODY:
		return on_body(srv, wsi, pss, in, len);
	case LWS_CALLBACK_HTTP_BODY_COMPLETION:
		if (pss->linger && !pss->responding)
			return -1; /* answered, and the rest of the body is read: close */
		lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0);
		if (pss->freq)
			broker_http_files_body_done(pss);
		if (pss->post && !pss->body_over) {
			int kind = pss->post;
			pss->post = 0;
			if (kind == BROKER_HTTP_POST_DECLARATIONS)
				broker_http_decl_respond(wsi, pss);
			else if (kind == BROKER_HTTP_POST_COMMAND && pss->post_uri)
				broker_http_command_start(srv, wsi, pss, pss->post_uri);
			else
				broker_http_exec_start(srv, wsi, pss);
		}
		return 0;
	case LWS_CALLBACK_HTTP_WRITEABLE:
		return on_http_writeable(wsi, pss);
	case LWS_CALLBACK_CLOSED_HTTP:
		broker_wsmask_untrack(lws_get_socket_fd(wsi));
		if (srv)
			broker_http_pending_done(srv, lws_get_socket_fd(wsi));
		if (pss)
			pss_reset(pss);
		return 0;
	case LWS_CALLBACK_HTTP_DROP_PROTOCOL:
		if (pss)
			pss_reset(pss);
		return 0;
	default:
		return lws_callback_http_dummy(wsi, reason, user, in, len);
	}
}

/* ---- start ---- */

static int parse_listen(const char *s, char *host, size_t cap, int *port, struct cp_err *err)
{
	const char *colon = strrchr(s, ':');
	const char *h = s, *hend = colon;
	if (!colon)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "--listen %s: expected HOST:PORT", s);
	if (*s == '[') {
		h = s + 1;
		if (colon == s || colon[-1] != ']')
			return cp_err_set(err, CP_E_INVALID_REQUEST, "--listen %s: unclosed '['", s);
		hend = colon - 1;
	}
	if ((size_t)(hend - h) >= cap)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "--listen %s: host too long", s);
	memcpy(host, h, (size_t)(hend - h));
	host[hend - h] = '\0';
	char *e = NULL;
	errno = 0;
	long p = strtol(colon + 1, &e, 10);
	if (errno || e == colon + 1 || *e || p < 0 || p > 65535)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "--listen %s: bad port", s);
	*port = (int)p;
	return 0;
}

/* A listener of ours is never a broker: the guard learns its address (a
 * name or the wildcard: every address of this host) and port. */
static int self_listener(struct broker_http *srv, const char *host, int port, struct cp_err *err)
{
	struct sockaddr_in6 in6 = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port) };
	struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (inet_pton(AF_INET, host, &in.sin_addr) == 1)
		return broker_urlguard_add_self(srv->guard, (struct sockaddr *)&in, err);
	if (inet_pton(AF_INET6, host, &in6.sin6_addr) != 1)
		in6.sin6_addr = in6addr_any;
	return broker_urlguard_add_self(srv->guard, (struct sockaddr *)&in6, err);
}

static int add_vhost(struct broker_http *srv, size_t i, struct cp_err *err)
{
	char host[256], name[32];
	int port = 0;
	int rc = parse_listen(srv->listen[i], host, sizeof host, &port, err);
	if (rc)
		return rc;
	struct lws_context_creation_info vi;
	memset(&vi, 0, sizeof vi);
	snprintf(name, sizeof name, "listen%zu", i);
	vi.vhost_name = name;
	vi.port = port;
	int any = !*host || !strcmp(host, "*") || !strcmp(host, "0.0.0.0") || !strcmp(host, "::");
	vi.iface = any ? NULL : host;
	if (!strchr(host, ':') && *host && strcmp(host, "*"))
		vi.options |= LWS_SERVER_OPTION_DISABLE_IPV6;
	vi.protocols = protocols;
	vi.keepalive_timeout = (int)srv->cfg.idle_timeout_s;
	vi.timeout_secs = srv->cfg.header_timeout_s;
	vi.timeout_secs_ah_idle = srv->cfg.header_timeout_s;
	struct lws_vhost *vh = lws_create_vhost(cp_lws_context(srv->lws), &vi);
	if (!vh)
		return cp_err_set(err, CP_E_IO, "--listen %s: cannot listen (address in use or "
		                  "not local?)", srv->listen[i]);
	rc = self_listener(srv, any ? "" : host, lws_get_vhost_listen_port(vh), err);
	if (rc)
		return rc;
	cp_log(CP_LOG_INFO, "serve.listen", "address", json_string(srv->listen[i]),
	       "host", json_string(host), "port", json_integer(lws_get_vhost_listen_port(vh)), NULL);
	return 0;
}

static int copy_config(struct broker_http *srv, const struct broker_http_config *cfg)
{
	srv->cfg = *cfg;
	srv->loop = cfg->loop;
	srv->listen = calloc(cfg->nlisten + 1, sizeof *srv->listen);
	if (!srv->listen)
		return -1;
	for (size_t i = 0; i < cfg->nlisten; i++)
		if (!(srv->listen[i] = strdup(cfg->listen[i])))
			return -1;
	srv->token_file = strdup(cfg->token_file ? cfg->token_file : "");
	srv->audit_file = cfg->audit_file ? strdup(cfg->audit_file) : NULL;
	srv->cfg.listen = NULL;
	srv->cfg.token_file = srv->token_file;
	srv->cfg.audit_file = srv->audit_file;
	return srv->token_file && (!cfg->audit_file || srv->audit_file) ? 0 : -1;
}

static void on_sweep(uv_timer_t *t);

/* The lws context with no vhost (add_vhost makes one per --listen). */
static int new_context(struct broker_http *srv, struct cp_err *err)
{
	struct lws_context_creation_info info;
	unsigned timeout_secs = srv->cfg.header_timeout_s;
	memset(&info, 0, sizeof info);
	info.port = CONTEXT_PORT_NO_LISTEN;
	info.options = LWS_SERVER_OPTION_EXPLICIT_VHOSTS;
	info.user = srv;
	info.timeout_secs = timeout_secs;
	info.timeout_secs_ah_idle = timeout_secs; /* a slow client holding its headers */
	/* what one read of a socket takes: a file upload's body comes a
	 * whole chunk (broker/http_server_files.c) at a time */
	info.pt_serv_buf_size = 256 * 1024;
	info.max_http_header_data = 8 * 1024;
	info.max_http_header_pool = 2048;
	info.fd_limit_per_thread = 4096;
	return cp_lws_new(srv->loop, &info, LLL_ERR, &srv->lws, err);
}

int broker_http_start(const struct broker_http_config *cfg, struct broker_http **out,
                      struct cp_err *err)
{
	int rc = 0;
	struct broker_http *srv = calloc(1, sizeof *srv);
	*out = NULL;
	if (!srv || copy_config(srv, cfg)) {
		broker_http_free(srv);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	if (!cfg->nlisten) {
		broker_http_free(srv);
		return cp_err_set(err, CP_E_INVALID_REQUEST, "serve needs --listen HOST:PORT");
	}
	if (cfg->ws_idle_timeout_s <= cfg->ws_ping_interval_s) {
		broker_http_free(srv);
		return cp_err_set(err, CP_E_INVALID_REQUEST, "--ws-idle-timeout (%u) must be longer "
		                  "than --ws-ping-interval (%u): a peer must get a ping before it "
		                  "can be dropped", cfg->ws_idle_timeout_s, cfg->ws_ping_interval_s);
	}
	srv->auth = broker_http_auth_new(srv->token_file, err);
	srv->metrics = broker_http_metrics_new();
	broker_http_metrics_set_otlp(srv->metrics, cfg->otlp);
	if (!srv->auth || !srv->metrics) {
		rc = srv->auth ? cp_err_set(err, CP_E_NOMEM, "out of memory") : err ? err->code : CP_E_IO;
		goto fail;
	}
	if (srv->audit_file && !(srv->audit = fopen(srv->audit_file, "ae"))) {
		rc = cp_err_errno(err, CP_E_IO, errno, "--audit-file %s", srv->audit_file);
		goto fail;
	}
	if (cfg->webhook_secret_file &&
	    !(srv->webhook_key = broker_webhook_secret_load(cfg->webhook_secret_file,
	                                                    &srv->webhook_key_len, err))) {
		rc = err ? err->code : CP_E_IO;
		goto fail;
	}
	struct broker_hub_config hc = cfg->hub;
	hc.loop = srv->loop;
	srv->hub = broker_hub_new(&hc);
	if (!srv->hub) {
		rc = cp_err_set(err, CP_E_NOMEM, "out of memory");
		goto fail;
	}
	srv->waiting = calloc(cfg->max_pending ? cfg->max_pending : 1, sizeof *srv->waiting);
	if (!srv->waiting) {
		rc = cp_err_set(err, CP_E_NOMEM, "out of memory");
		goto fail;
	}
	srv->webhook = broker_webhook_new(srv->loop, err);
	if (!srv->webhook) {
		rc = CP_E_NOMEM;
		goto fail;
	}
	rc = broker_urlguard_new(cfg->broker_allow, &srv->guard, err);
	if (rc)
		goto fail;
	broker_webhook_set_guard(srv->webhook, srv->guard);
	rc = new_context(srv, err);
	for (size_t i = 0; rc == 0 && i < cfg->nlisten; i++)
		rc = add_vhost(srv, i, err);
	if (rc)
		goto fail;
	uv_timer_init(srv->loop, &srv->reaper);
	uv_timer_init(srv->loop, &srv->sweep);
	uv_timer_init(srv->loop, &srv->drain);
	srv->reaper.data = srv->sweep.data = srv->drain.data = srv;
	srv->timers_open = 1;
	uv_timer_start(&srv->sweep, on_sweep, 1000, 1000);
	*out = srv;
	return 0;
fail:
	if (srv->lws) {
		/* Nothing ran on it yet: lws still closes its uv handles on later turns. */
		cp_lws_destroy(srv->lws, NULL, NULL);
		srv->lws = NULL;
	}
	broker_http_free(srv);
	return rc;
}

/* ---- stop ---- */

static void on_timer_closed(uv_handle_t *h)
{
	struct broker_http *srv = h->data;
	if (--srv->timers_open == 0 && srv->stopped)
		srv->stopped(srv->stopped_ud);
}

static void on_lws_gone(void *ud)
{
	struct broker_http *srv = ud;
	srv->lws = NULL;
	srv->destroyed = 1;
	on_reaper(&srv->reaper);
	cp_log(CP_LOG_INFO, "serve.stopped", NULL);
	/* timers_open counts the three timers, closed now */
	srv->timers_open = 3;
	uv_close((uv_handle_t *)&srv->reaper, on_timer_closed);
	uv_close((uv_handle_t *)&srv->sweep, on_timer_closed);
	uv_close((uv_handle_t *)&srv->drain, on_timer_closed);
}

static void destroy_lws(struct broker_http *srv)
{
	if (srv->lws && !srv->freed_pending) {
		srv->freed_pending = 1;
		cp_lws_destroy(srv->lws, on_lws_gone, srv);
	}
}

/* Every execution has ended: deliver what is queued, then close. */
void broker_http_check_drained(struct broker_http *srv)
{
	if (!srv->draining || srv->finishing || codepod_running(srv->cfg.cp) > 0)
		return;
	srv->finishing = 1;
	srv->finish_started_ms = now_ms(srv);
	uv_timer_stop(&srv->drain);
	cp_log(CP_LOG_INFO, "serve.drained", "clean", json_boolean(!srv->stopped_rest), NULL);
	for (struct sess_base *b = srv->sessions; b; b = b->next)
		if (b->kind == BROKER_SESS_WS)
			broker_http_ws_finish(b);
	if (srv->nsessions == 0)
		destroy_lws(srv);
}

static void stop_rest(struct broker_http *srv)
{
	if (srv->stopped_rest)
		return;
	srv->stopped_rest = 1;
	cp_log(CP_LOG_INFO, "serve.drain_deadline", "running",
	       json_integer(codepod_running(srv->cfg.cp)), NULL);
	broker_hub_stop_all(srv->hub, "The execution was stopped by the server: it is shutting "
	                    "down and its drain period (--drain-seconds) ended.");
}

static void on_drain_deadline(uv_timer_t *t)
{
	stop_rest(t->data);
}

static void on_sweep(uv_timer_t *t)
{
	struct broker_http *srv = t->data;
	uint64_t now = now_ms(srv);
	broker_hub_sweep(srv->hub);
	broker_http_pending_sweep(srv);
	for (struct sess_base *b = srv->sessions, *next = NULL; b; b = next) {
		next = b->next;
		if (b->kind == BROKER_SESS_WS)
			broker_http_ws_sweep(b, now);
	}
	if (srv->draining)
		broker_http_check_drained(srv);
	if (srv->finishing && (srv->nsessions == 0 || now - srv->finish_started_ms > FINISH_GRACE_MS))
		destroy_lws(srv);
}

void broker_http_shutdown(struct broker_http *srv, unsigned drain_ms,
                          void (*stopped)(void *ud), void *ud)
{
	if (srv->draining) {
		stop_rest(srv);
		return;
	}
	srv->draining = 1;
	srv->stopped = stopped;
	srv->stopped_ud = ud;
	cp_log(CP_LOG_INFO, "serve.draining", "running", json_integer(codepod_running(srv->cfg.cp)),
	       "drainMs", json_integer(drain_ms), NULL);
	uv_timer_start(&srv->drain, on_drain_deadline, drain_ms, 0);
	broker_http_check_drained(srv);
}

int broker_http_clean_drain(const struct broker_http *srv)
{
	return !srv->stopped_rest;
}

void broker_http_free(struct broker_http *srv)
{
	if (!srv)
		return;
	while (srv->reap) {
		struct sess_base *b = srv->reap;
		list_remove(&srv->reap, b);
		free_sess(b);
	}
	broker_webhook_free(srv->webhook);
	broker_urlguard_free(srv->guard); /* no call is left to check */
	free(srv->waiting);
	broker_hub_free(srv->hub);
	if (srv->webhook_key)
		OPENSSL_cleanse(srv->webhook_key, srv->webhook_key_len);
	free(srv->webhook_key);
	broker_http_auth_free(srv->auth);
	broker_http_metrics_free(srv->metrics);
	if (srv->audit)
		fclose(srv->audit);
	for (size_t i = 0; srv->listen && srv->listen[i]; i++)
		free(srv->listen[i]);
	free(srv->listen);
	free(srv->token_file);
	free(srv->audit_file);
	free(srv);
}
