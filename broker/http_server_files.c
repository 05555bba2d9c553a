/*
 * http_server_files.c - a conversation's workspace over HTTP:
 *   GET    /v1/conversations/{key}/files/{path}   the file (Range: 206)
 *   PUT    /v1/conversations/{key}/files/{path}   replace it (If-Match: 412)
 *   DELETE /v1/conversations/{key}/files/{path}
 *   GET    /v1/conversations/{key}/files/{dir}/   a listing (?limit=&cursor=)
 *   GET    /v1/conversations/{key}/archive        the workspace as a tar
 *   PUT    /v1/conversations/{key}/archive        extract a tar into it
 *   POST   /v1/conversations/{key}/commands       run a command, its result
 * Each request drives a one-operation broker_session of its own, speaking
 * the session's file and command messages (broker/SESSION.md), so the
 * limits, ids, hooks (audit, metrics, admission) and drain are the
 * session's. Bodies stream both ways a chunk (256 KiB) at a time: a GET
 * writes a chunk, then acks it, and the next comes; a PUT stops reading
 * its socket (rx flow control) while a chunk waits for the sandbox's ack.
 * Nothing holds a whole file. The chunks are raw bytes both ways
 * (broker_session_file_bytes, broker_session_io.file_data): the session
 * protocol's base64 is for clients outside codepod.
 */
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>

#include "broker/http_path.h"
#include "broker/http_server_int.h"
#include "base/hex.h"
#include "base/jsonutil.h"
#include "base/log.h"

#define CHUNK 262144
#define PIECE 65536 /* a GET's most written from one WRITEABLE */
#define UP_MAX (3 * CHUNK) /* a PUT's bytes not yet sent: a chunk and what lws had read (a read is 256 KiB) */
#define PREFIX "/v1/conversations/"

enum { OP_GET = 1, OP_PUT, OP_DELETE, OP_LIST, OP_COMMAND };

struct file_req {
	struct sess_base base; /* first: the hooks' ud */
	struct lws *wsi;       /* NULL once detached */
	struct broker_http_pss *pss;
	int op;
	int archive;           /* the whole workspace: no Content-Length, no ETag */
	char id[40];
	int answered;
	/* GET */
	int hdr_sent, ranged, final;
	unsigned long long size, start, clen, sent;
	char etag[65];
	unsigned char *chunk; /* LWS_PRE + bytes to write */
	size_t chunk_len, chunk_off; /* chunk_off of them written */
	unsigned char *spare; /* the chunk after it, its ack owed until it moves up */
	size_t spare_len;
	int have_spare;
	/* PUT */
	struct cp_buf up;
	int ready, body_done, paused, last_sent, pumping;
	/* POST commands */
	char *stdin_b64;
};

static unsigned status_for(const char *code)
{
	static const struct {
		const char *code;
		unsigned status;
	} map[] = {
		{ "INVALID_REQUEST", 400 }, { "NOT_FOUND", 404 }, { "PRECONDITION_FAILED", 412 },
		{ "TOO_LARGE", 413 }, { "TOO_MANY_EXECUTIONS", 429 }, { "SHUTTING_DOWN", 503 },
		{ "SANDBOX_UNAVAILABLE", 503 }, { "STARTUP_TIMEOUT", 503 }, { "TIMEOUT", 504 },
	};
	for (size_t i = 0; code && i < sizeof map / sizeof map[0]; i++)
		if (!strcmp(code, map[i].code))
			return map[i].status;
	return 500;
}

static void finished(struct file_req *r)
{
	r->answered = 1;
	if (r->pss)
		r->pss->freq = NULL;
	r->wsi = NULL;
	r->pss = NULL;
	r->base.gone = 1;
	r->base.close_pending = 1;
	broker_http_reap_schedule(r->base.srv);
}

/* The client's turn (@on: a GET's client has bytes to take): it may take
 * the header timeout at most to move some, counted afresh each time some
 * moved; lws then closes the connection. Codepod's turn (waiting for the
 * sandbox) is not timed here: the execution's own limits bound that. So a
 * slow transfer that keeps moving is never cut, and a stalled client is. */
static void client_turn(struct file_req *r, struct lws *wsi, int on)
{
	if (wsi)
		lws_set_timeout(wsi, on ? PENDING_TIMEOUT_HTTP_CONTENT : NO_PENDING_TIMEOUT,
		                on ? (int)r->base.srv->cfg.header_timeout_s : 0);
}

static void answer(struct file_req *r, unsigned status, const json_t *body)
{
	if (r->answered)
		return;
	if (r->wsi && r->op == OP_PUT && !r->body_done) {
		/* answered before its body was read: the rest is read and dropped */
		r->pss->close_after = r->pss->linger = 1;
		if (r->paused) {
			r->paused = 0;
			lws_rx_flow_control(r->wsi, 1);
		}
	}
	if (r->wsi) {
		if (status == 204)
			broker_http_respond_take(r->wsi, r->pss, 204, "application/json", NULL, 0);
		else
			broker_http_respond_json(r->wsi, r->pss, status, body);
	}
	finished(r);
}

static void answer_error(struct file_req *r, const json_t *error)
{
	if (r->hdr_sent) { /* a body was under way: only a cut connection tells */
		if (r->pss)
			r->pss->close_after = 1;
		r->final = 2;
		if (r->wsi)
			lws_callback_on_writable(r->wsi);
		return;
	}
	json_t *b = json_pack("{s:O}", "error", error);
	answer(r, status_for(json_string_value(json_object_get(error, "code"))), b);
	json_decref(b);
}

static void feed(struct file_req *r, json_t *msg /* steals */)
{
	if (msg)
		broker_session_feed(r->base.session, msg);
	json_decref(msg);
}

static char *b64(const void *buf, size_t len, size_t *out_len)
{
	char *s = malloc(4 * ((len + 2) / 3) + 1);
	if (!s)
		return NULL;
	int n = EVP_EncodeBlock((unsigned char *)s, buf, (int)len);
	*out_len = n > 0 ? (size_t)n : 0;
	return s;
}

/* ---- PUT: the body to the sandbox, a chunk per ack ---- */

static void put_pump(struct file_req *r)
{
	/* A chunk handed on may bring the next file_ack at once (io_send
	 * nests here): the loop sends it, after the bytes before it left. */
	if (r->pumping)
		return;
	r->pumping = 1;
	for (;;) {
		size_t have = cp_buf_len(&r->up);
		if (r->answered || !r->ready || r->last_sent || (have < CHUNK && !r->body_done))
			break;
		size_t n = have < CHUNK ? have : CHUNK;
		int last = r->body_done && n == have;
		r->ready = 0;
		r->last_sent = last;
		/* the bytes as they are: no base64 on the way in (the session's
		 * file_chunk would be that, and back) */
		broker_session_file_bytes(r->base.session, r->id, cp_buf_ptr(&r->up), n, last);
		cp_buf_tail(&r->up, have - n);
	}
	r->pumping = 0;
	if (r->paused && cp_buf_len(&r->up) < CHUNK && r->wsi) {
		r->paused = 0;
		lws_rx_flow_control(r->wsi, 1);
	}
}

int broker_http_files_body(struct broker_http_pss *pss, struct lws *wsi, const void *in, size_t len)
{
	struct file_req *r = pss->freq;
	if (!r || r->op != OP_PUT || r->answered)
		return 0;
	if (cp_buf_add(&r->up, in, len, NULL))
		return -1; /* more than flow control lets in: drop the connection */
	if (cp_buf_len(&r->up) >= CHUNK && !r->ready && !r->paused) {
		r->paused = 1;
		lws_rx_flow_control(wsi, 0);
	}
	put_pump(r);
	return 0;
}

void broker_http_files_body_done(struct broker_http_pss *pss)
{
	struct file_req *r = pss->freq;
	if (!r || r->op != OP_PUT)
		return;
	r->body_done = 1;
	put_pump(r);
}

/* ---- GET: the sandbox's chunks to the body ---- */

static int write_headers(struct file_req *r, struct lws *wsi)
{
	unsigned char hb[LWS_PRE + 1024];
	unsigned char *start = hb + LWS_PRE, *p = start, *end = hb + sizeof hb - 1;
	char etag[70], range[96];
	snprintf(etag, sizeof etag, "\"%s\"", r->etag);
	unsigned status = r->ranged ? 206 : 200;
	if (r->archive) { /* its length is known at its end: the close ends it */
		if (lws_add_http_common_headers(wsi, 200, "application/x-tar", LWS_ILLEGAL_HTTP_CONTENT_LEN,
		                                &p, end) ||
		    lws_add_http_header_by_token(wsi, WSI_TOKEN_CONNECTION, (const unsigned char *)"close",
		                                 5, &p, end) ||
		    lws_finalize_write_http_header(wsi, start, &p, end))
			return -1;
		r->hdr_sent = 1;
		return 0;
	}
	if (lws_add_http_common_headers(wsi, status, "application/octet-stream", r->clen, &p, end) ||
	    lws_add_http_header_by_name(wsi, (const unsigned char *)"etag:", (const unsigned char *)etag,
	                                (int)strlen(etag), &p, end) ||
	    lws_add_http_header_by_name(wsi, (const unsigned char *)"accept-ranges:",
	                                (const unsigned char *)"bytes", 5, &p, end) ||
	    lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_CACHE_CONTROL,
	                                 (const unsigned char *)"no-store", 8, &p, end))
		return -1;
	if (r->ranged) {
		int n = r->clen ? snprintf(range, sizeof range, "bytes %llu-%llu/%llu", r->start,
		                           r->start + r->clen - 1, r->size)
		                : snprintf(range, sizeof range, "bytes */%llu", r->size);
		if (lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_CONTENT_RANGE,
		                                 (const unsigned char *)range, n, &p, end))
			return -1;
	}
	if (lws_finalize_write_http_header(wsi, start, &p, end))
		return -1;
	r->hdr_sent = 1;
	return 0;
}

/* The client has bytes to take (client_turn), counted afresh after each
 * piece it took. */
static void want_write(struct file_req *r, struct lws *wsi)
{
	if (!wsi)
		return;
	client_turn(r, wsi, 1);
	lws_callback_on_writable(wsi);
}

int broker_http_files_writeable(struct lws *wsi, struct broker_http_pss *pss)
{
	struct file_req *r = pss->freq;
	if (!r || r->op != OP_GET)
		return 0;
	if (!r->hdr_sent) {
		if (!r->etag[0] && !r->archive) { /* nothing known yet: the sandbox is awaited */
			client_turn(r, wsi, 0);
			return 0;
		}
		if (write_headers(r, wsi))
			return -1;
		if (r->chunk_len || r->final)
			want_write(r, wsi);
		else
			client_turn(r, wsi, 0);
		return 0;
	}
	if (r->chunk_len) {
		/* A piece at a time while the socket takes them: what lws
		 * cannot write at once it holds and writes before the next
		 * WRITEABLE, so a piece is the most a slow client must take
		 * between two of them, and a fast one takes the chunk at once. */
		size_t n;
		do {
			n = r->chunk_len - r->chunk_off;
			if (n > PIECE)
				n = PIECE;
			if (r->sent + n > r->clen)
				n = (size_t)(r->clen - r->sent);
			if (n && lws_write(wsi, r->chunk + LWS_PRE + r->chunk_off, n, LWS_WRITE_HTTP) < 0)
				return -1;
			r->sent += n;
			r->chunk_off += n;
		} while (n && r->chunk_off < r->chunk_len && !lws_send_pipe_choked(wsi));
		if (n && r->chunk_off < r->chunk_len) {
			want_write(r, wsi);
			return 0;
		}
		r->chunk_len = r->chunk_off = 0;
		if (r->have_spare) { /* the next moves up, and the one after may come */
			unsigned char *t = r->chunk;
			r->chunk = r->spare;
			r->chunk_len = r->spare_len;
			r->spare = t;
			r->spare_len = 0;
			r->have_spare = 0;
			feed(r, json_pack("{s:s,s:s}", "type", "file_ack", "id", r->id));
		}
		if (r->chunk_len || r->final)
			want_write(r, wsi);
		else
			client_turn(r, wsi, 0);
		return 0;
	}
	if (!r->final)
		return 0;
	int whole = r->final == 1 && (r->archive || r->sent == r->clen);
	int archive = r->archive;
	finished(r);
	if (!whole)
		return -1; /* the file changed or the read failed midway: cut, so the client knows */
	unsigned char z[LWS_PRE + 1];
	if (lws_write(wsi, z + LWS_PRE, 0, LWS_WRITE_HTTP_FINAL) < 0 || archive)
		return -1;
	return lws_http_transaction_completed(wsi) ? -1 : 0;
}

/* A read's chunk, raw (broker_session_io.file_data). */
static void io_file_data(void *ud, const char *id, const json_t *info, const char *data, size_t len)
{
	(void)id;
	struct file_req *r = ud;
	if (r->answered || r->op != OP_GET)
		return;
	const char *etag = json_string_value(json_object_get(info, "etag"));
	if (!r->etag[0] && etag) {
		snprintf(r->etag, sizeof r->etag, "%s", etag);
		r->size = (unsigned long long)json_integer_value(json_object_get(info, "size"));
		unsigned long long want = r->clen; /* the Range's length, or ~0 */
		r->clen = r->start >= r->size ? 0 : r->size - r->start;
		if (want < r->clen)
			r->clen = want;
	}
	/* Two chunks at most: the one the socket takes next and the one after,
	 * so the sandbox reads ahead while the socket writes (its ack waits
	 * until the first is written). */
	int second = r->chunk_len > 0;
	unsigned char **slot = second ? &r->spare : &r->chunk;
	if (!*slot)
		*slot = malloc(LWS_PRE + CHUNK);
	if (!*slot || len > CHUNK) {
		r->final = 2;
	} else {
		memcpy(*slot + LWS_PRE, data, len);
		if (second) {
			r->spare_len = len;
			r->have_spare = 1;
		} else {
			r->chunk_len = len;
			feed(r, json_pack("{s:s,s:s}", "type", "file_ack", "id", r->id));
		}
	}
	want_write(r, r->wsi);
}

/* ---- the session's messages ---- */

static void io_send(void *ud, const json_t *msg)
{
	struct file_req *r = ud;
	const char *type = json_string_value(json_object_get(msg, "type"));
	if (!type || r->answered)
		return;
	if (!strcmp(type, "error")) {
		answer_error(r, json_object_get(msg, "error"));
	} else if (!strcmp(type, "file_ack") && r->op == OP_PUT) {
		r->ready = 1;
		put_pump(r);
	} else if (!strcmp(type, "accepted") && r->op == OP_COMMAND && r->stdin_b64) {
		feed(r, json_pack("{s:s,s:s,s:s,s:b}", "type", "command_stdin", "id", r->id, "data",
		                  r->stdin_b64, "eof", 1));
	} else if (!strcmp(type, "command_result")) {
		json_t *o = json_deep_copy(msg);
		json_object_del(o, "type");
		json_object_del(o, "id");
		json_object_del(o, "executionId");
		answer(r, 200, o);
		json_decref(o);
	} else if (!strcmp(type, "file_result")) {
		if (r->op == OP_GET && r->archive) {
			r->final = 1;
			if (r->wsi)
				lws_callback_on_writable(r->wsi);
		} else if (r->op == OP_PUT && r->archive) {
			json_t *b = json_pack("{s:O}", "files", json_object_get(msg, "files"));
			answer(r, 200, b);
			json_decref(b);
		} else if (r->op == OP_GET) {
			if (!r->etag[0]) { /* an empty range: no chunk came */
				snprintf(r->etag, sizeof r->etag, "%s",
				         json_string_value(json_object_get(msg, "etag")) ?: "");
				r->size = (unsigned long long)json_integer_value(json_object_get(msg, "size"));
				r->clen = 0;
			}
			r->final = 1;
			if (r->wsi)
				lws_callback_on_writable(r->wsi);
		} else if (r->op == OP_DELETE) {
			answer(r, 204, NULL);
		} else if (r->op == OP_LIST) {
			json_t *b = json_pack("{s:O}", "entries", json_object_get(msg, "entries"));
			if (b && json_object_get(msg, "next"))
				json_object_set(b, "next", json_object_get(msg, "next"));
			answer(r, 200, b);
			json_decref(b);
		} else {
			json_t *b = json_pack("{s:O,s:O}", "size", json_object_get(msg, "size"), "etag",
			                      json_object_get(msg, "etag"));
			answer(r, json_is_true(json_object_get(msg, "created")) ? 201 : 200, b);
			json_decref(b);
		}
	}
}

static void io_drained(void *ud)
{
	struct file_req *r = ud;
	r->base.drained = 1;
	if (r->base.gone)
		broker_http_sess_retire(&r->base);
}

static const struct broker_session_io files_io = { io_send, io_drained, io_file_data };

void broker_http_files_free(struct sess_base *b)
{
	struct file_req *r = (struct file_req *)b;
	broker_session_free(b->session);
	cp_buf_free(&r->up);
	free(r->chunk);
	free(r->spare);
	free(r->stdin_b64);
	free(r);
}

void broker_http_files_detach(struct file_req *r)
{
	r->wsi = NULL;
	r->pss = NULL;
	if (!r->answered) {
		r->answered = 1;
		r->base.gone = 1;
		r->base.close_pending = 1; /* the session's close stops the operation */
		broker_http_reap_schedule(r->base.srv);
	}
}

/* ---- routing ---- */

static int parse_range(struct lws *wsi, struct file_req *r, const char **why)
{
	char h[128];
	r->clen = ~0ull;
	if (lws_hdr_copy(wsi, h, sizeof h, WSI_TOKEN_HTTP_RANGE) <= 0)
		return 0;
	if (broker_http_parse_range(h, &r->start, &r->clen)) {
		*why = "Range: only one bytes=FIRST-LAST or bytes=FIRST- range";
		return -1;
	}
	r->ranged = 1;
	return 0;
}

static json_t *request_for(struct broker_http *srv, struct lws *wsi, struct file_req *r,
                           const char *conv, const char *path, const char **why)
{
	(void)srv;
	char q[4200];
	if (r->archive)
		return json_pack("{s:s,s:s,s:s}", "type", r->op == OP_GET ? "archive_read" : "archive_write",
		                 "id", r->id, "conversation", conv);
	switch (r->op) {
	case OP_GET: {
		if (parse_range(wsi, r, why))
			return NULL;
		json_t *m = json_pack("{s:s,s:s,s:s,s:s,s:I}", "type", "file_read", "id", r->id,
		                      "conversation", conv, "path", path, "offset", (json_int_t)r->start);
		if (m && r->clen != ~0ull)
			json_object_set_new(m, "length", json_integer((json_int_t)r->clen));
		return m;
	}
	case OP_PUT: {
		json_t *m = json_pack("{s:s,s:s,s:s,s:s}", "type", "file_write", "id", r->id,
		                      "conversation", conv, "path", path);
		if (m && lws_hdr_copy(wsi, q, sizeof q, WSI_TOKEN_HTTP_IF_MATCH) > 0) {
			size_t n = strlen(q);
			if (n >= 2 && q[0] == '"' && q[n - 1] == '"') {
				q[n - 1] = 0;
				json_object_set_new(m, "ifMatch", json_string(q + 1));
			} else {
				json_object_set_new(m, "ifMatch", json_string(q));
			}
		}
		return m;
	}
	case OP_DELETE:
		return json_pack("{s:s,s:s,s:s,s:s}", "type", "file_delete", "id", r->id,
		                 "conversation", conv, "path", path);
	case OP_LIST: {
		json_t *m = json_pack("{s:s,s:s,s:s,s:s}", "type", "file_list", "id", r->id,
		                      "conversation", conv, "path", path);
		const char *v = m ? lws_get_urlarg_by_name(wsi, "limit=", q, (int)sizeof q) : NULL;
		if (v) {
			char *e = NULL;
			long long n = strtoll(v, &e, 10);
			json_object_set_new(m, "limit", *v && !*e ? json_integer(n) : json_string(v));
		}
		v = m ? lws_get_urlarg_by_name(wsi, "cursor=", q, (int)sizeof q) : NULL;
		if (v)
			json_object_set_new(m, "cursor", json_string(v));
		return m;
	}
	default:
		return NULL;
	}
}

static void start(struct broker_http *srv, struct lws *wsi, struct broker_http_pss *pss,
                  struct file_req *r, json_t *msg /* steals */)
{
	if (!(r->base.session = broker_session_new(srv->cfg.cp, srv->cfg.ids, srv->hub, &files_io, r))) {
		json_decref(msg);
		broker_http_files_free(&r->base);
		broker_http_respond_error(wsi, pss, 500, "INTERNAL", "out of memory");
		return;
	}
	broker_session_set_hooks(r->base.session, &broker_http_session_hooks, srv);
	broker_session_set_webhook(r->base.session); /* a dropped request stops its operation */
	broker_http_sess_link(srv, &r->base, BROKER_SESS_FILES);
	r->wsi = wsi;
	r->pss = pss;
	pss->freq = r;
	feed(r, msg);
	if (!r->answered && broker_session_running(r->base.session) == 0) {
		json_t *e = json_pack("{s:s,s:s}", "code", "INTERNAL", "message",
		                      "the operation could not be started");
		answer_error(r, e);
		json_decref(e);
	}
}

static struct file_req *new_req(int op)
{
	struct file_req *r = calloc(1, sizeof *r);
	unsigned char raw[12];
	if (!r || RAND_bytes(raw, sizeof raw) != 1) {
		free(r);
		return NULL;
	}
	r->op = op;
	memcpy(r->id, "http-", 5);
	cp_hex_encode(raw, sizeof raw, r->id + 5);
	cp_buf_init(&r->up, UP_MAX);
	return r;
}

int broker_http_files_route(struct broker_http *srv, struct lws *wsi, struct broker_http_pss *pss,
                            const char *uri)
{
	if (strncmp(uri, PREFIX, sizeof PREFIX - 1))
		return 0;
	const char *key = uri + sizeof PREFIX - 1;
	const char *slash = strchr(key, '/');
	int get = lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) > 0;
	int put = lws_hdr_total_length(wsi, WSI_TOKEN_PUT_URI) > 0;
	int del = lws_hdr_total_length(wsi, WSI_TOKEN_DELETE_URI) > 0;
	int post = lws_hdr_total_length(wsi, WSI_TOKEN_POST_URI) > 0;
	const char *rest = slash ? slash + 1 : "";
	int files = !strncmp(rest, "files/", 6) || !strcmp(rest, "files");
	int commands = !strcmp(rest, "commands");
	int archive = !strcmp(rest, "archive");
	if (!slash || slash == key || (!files && !commands && !archive)) {
		broker_http_respond_error(wsi, pss, 404, "NOT_FOUND", "no such endpoint");
		return 1;
	}
	int op = archive ? (get ? OP_GET : put ? OP_PUT : 0)
	       : commands ? (post ? OP_COMMAND : 0)
	       : rest[strlen(rest) - 1] == '/' || !strcmp(rest, "files") ? (get ? OP_LIST : 0)
	       : get ? OP_GET : put ? OP_PUT : del ? OP_DELETE : 0;
	if (!op) {
		broker_http_respond_error(wsi, pss, 405, "INVALID_REQUEST",
		                          commands ? "use POST" : archive ? "use GET or PUT"
		                                   : "use GET, PUT or DELETE (GET for a folder/)");
		return 1;
	}
	char *conv = broker_http_pct_decode(key, (size_t)(slash - key));
	const char *p = files && rest[5] == '/' ? rest + 6 : "";
	char *path = broker_http_pct_decode(p, strlen(p));
	struct file_req *r = conv && path ? new_req(op) : NULL;
	if (!r) {
		free(conv);
		free(path);
		broker_http_respond_error(wsi, pss, 400, "INVALID_REQUEST",
		                          "the conversation key or the path is not well percent-encoded");
		return 1;
	}
	r->base.srv = srv;
	r->archive = archive;
	if (archive)
		r->clen = ~0ull; /* unknown: as much as comes */
	if (op == OP_COMMAND) {
		/* the body comes first: POST's own body path (http_server.c) */
		free(conv);
		free(path);
		free(r);
		return 2;
	}
	const char *why = NULL;
	json_t *msg = request_for(srv, wsi, r, conv, path, &why);
	free(conv);
	free(path);
	if (!msg) {
		broker_http_files_free(&r->base);
		broker_http_respond_error(wsi, pss, 400, "INVALID_REQUEST", why ? why : "out of memory");
		return 1;
	}
	if (op == OP_PUT) {
		pss->close_after = 0; /* the body is read, not skipped */
		char v[32];
		/* no body: lws says nothing more, so the one chunk is empty and last */
		if (lws_hdr_copy(wsi, v, sizeof v, WSI_TOKEN_HTTP_CONTENT_LENGTH) > 0 && !strcmp(v, "0"))
			r->body_done = 1;
	}
	start(srv, wsi, pss, r, msg);
	/* the wait for the sandbox is the execution's to bound (want_write):
	 * the timeout lws arms around this call is taken off in the first
	 * WRITEABLE, after lws is done with the request */
	if (op == OP_GET && pss->freq) /* (r is freed when it could not start) */
		lws_callback_on_writable(wsi);
	return 1;
}

/* POST /v1/conversations/{key}/commands, its body read. */
void broker_http_command_start(struct broker_http *srv, struct lws *wsi, struct broker_http_pss *pss,
                               const char *uri)
{
	json_t *req = cp_json_load(cp_buf_ptr(&pss->body), cp_buf_len(&pss->body), NULL);
	cp_buf_free(&pss->body);
	const char *key = uri + sizeof PREFIX - 1;
	const char *slash = strchr(key, '/');
	char *conv = slash ? broker_http_pct_decode(key, (size_t)(slash - key)) : NULL;
	struct file_req *r = json_is_object(req) && conv ? new_req(OP_COMMAND) : NULL;
	const json_t *in = json_object_get(req, "stdin");
	if (!r || (in && !json_is_string(in))) {
		json_decref(req);
		free(conv);
		free(r);
		broker_http_respond_error(wsi, pss, 400, "INVALID_REQUEST",
		                          in && !json_is_string(in) ? "stdin must be a string"
		                                                    : "the body must be a JSON object");
		return;
	}
	r->base.srv = srv;
	if (in) {
		size_t n = 0;
		r->stdin_b64 = b64(json_string_value(in), json_string_length(in), &n);
		json_object_set_new(req, "stdin", json_true());
	}
	json_object_set_new(req, "type", json_string("command"));
	json_object_set_new(req, "id", json_string(r->id));
	json_object_set_new(req, "conversation", json_string(conv));
	json_object_del(req, "stream");
	free(conv);
	start(srv, wsi, pss, r, req);
}
