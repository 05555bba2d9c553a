/*
 * fileop.c - the file kind of execution (fileop.h): its request, its
 * chunks both ways, its end and its outcome.
 */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <unistd.h>
#include <uv.h>
#include <stdlib.h>
#include <string.h>

#include "runner/fileop.h"
#include "runner/etags.h"
#include "base/hex.h"
#include "base/jsonutil.h"
#include "base/log.h"

#define MAX_LIST 10000
#define MAX_CURSOR 4096
#define MAX_ERR_MSG 200

/* A read by descriptor (below). */
struct codepod_fop_pump {
	uv_fs_t req;
	struct codepod_exec *e; /* NULL once the execution was freed */
	int fd;
	char *buf;              /* CODEPOD_FILE_CHUNK: the read in flight's */
	uint64_t pos, stop;
	int busy;               /* a read is out */
	int ended;              /* stop reached, the file ended early, or failed */
	int failed;
};

/* A write by descriptor (below). */
#define SINK_SLOTS 4
#define SINK_BUF (64 + CODEPOD_FILE_CHUNK + 3) /* a chunk's line's room, its bytes */

struct codepod_fop_sink {
	uv_work_t work;
	struct codepod_exec *e; /* NULL once the execution was freed */
	int fd;
	EVP_MD_CTX *ctx;
	char *buf[SINK_SLOTS];
	size_t at[SINK_SLOTS], len[SINK_SLOTS]; /* the bytes of each slot */
	uint64_t off[SINK_SLOTS];               /* where in the file */
	unsigned head, count;   /* queued; the head is written while busy */
	int busy;
	int werr;               /* errno of a write that failed, or -1: the hash */
	int aborted, ended;     /* the runner was told */
};

static const struct {
	const char *type, *op;
} ops[] = {
	{ "file_read", "read" }, { "file_write", "write" }, { "file_stat", "stat" },
	{ "file_list", "list" }, { "file_delete", "delete" },
	{ "archive_read", "archive_read" }, { "archive_write", "archive_write" },
};

static const char *op_of(const char *type)
{
	for (size_t i = 0; type && i < sizeof ops / sizeof ops[0]; i++)
		if (strcmp(type, ops[i].type) == 0)
			return ops[i].op;
	return NULL;
}

int codepod_fileop_type(const char *type)
{
	return op_of(type) != NULL;
}

int codepod_path_check(const char *key, const json_t *v, int root_ok, struct cp_err *err)
{
	if (!json_is_string(v))
		return cp_err_set(err, CP_E_INVALID_REQUEST, "%s must be a string", key);
	const char *p = json_string_value(v);
	if (strlen(p) != json_string_length(v))
		return cp_err_set(err, CP_E_INVALID_REQUEST, "%s must not contain NUL", key);
	if (p[0] == '/')
		return cp_err_set(err, CP_E_INVALID_REQUEST,
		                  "%s must be relative to the workspace, not absolute", key);
	int named = 0;
	for (const char *c = p; *c;) {
		size_t len = strcspn(c, "/");
		if (len == 2 && c[0] == '.' && c[1] == '.')
			return cp_err_set(err, CP_E_INVALID_REQUEST, "%s must not contain a .. component", key);
		if (len && !(len == 1 && c[0] == '.'))
			named = 1;
		c += len;
		while (*c == '/')
			c++;
	}
	if (!named && !root_ok)
		return cp_err_set(err, CP_E_INVALID_REQUEST,
		                  "%s names the workspace itself, not a file in it", key);
	return 0;
}

static int opt_uint(const json_t *request, const char *key, json_int_t max, json_t *fop,
                    struct cp_err *err)
{
	const json_t *v = json_object_get(request, key);
	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "%s must be an integer from 0 to %lld",
		                  key, (long long)max);
	json_object_set(fop, key, (json_t *)v);
	return 0;
}

int codepod_fileop_init(struct codepod_exec *e, const char *type, const json_t *request,
                        struct cp_err *err)
{
	const char *op = op_of(type);
	json_t *fop = json_pack("{s:s}", "op", op);
	if (!fop)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	e->fop = fop;
	const json_t *path = json_object_get(request, "path");
	int is_list = strcmp(op, "list") == 0;
	if (strncmp(op, "archive_", 8) == 0) { /* the whole workspace */
		char *t = json_dumps(fop, JSON_COMPACT);
		if (!t)
			return cp_err_set(err, CP_E_NOMEM, "out of memory");
		e->src = t;
		e->src_len = strlen(t);
		return 0;
	}
	if (!path && !is_list)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "missing field: path");
	if (path) {
		int rc = codepod_path_check("path", path, is_list || strcmp(op, "stat") == 0, err);
		if (rc)
			return rc;
		json_object_set(fop, "path", (json_t *)path);
	}
	int rc = 0;
	if (strcmp(op, "read") == 0) {
		rc = opt_uint(request, "offset", (json_int_t)1 << 53, fop, err);
		if (!rc)
			rc = opt_uint(request, "length", (json_int_t)1 << 53, fop, err);
	} else if (strcmp(op, "write") == 0) {
		const json_t *m = json_object_get(request, "ifMatch");
		if (m) {
			const char *s = json_string_value(m);
			if (!s || json_string_length(m) != 64 || strspn(s, "0123456789abcdef") != 64)
				return cp_err_set(err, CP_E_INVALID_REQUEST,
				                  "ifMatch must be an etag: 64 lowercase hex digits");
			json_object_set(fop, "ifMatch", (json_t *)m);
		}
		rc = opt_uint(request, "mode", 0777, fop, err);
	} else if (is_list) {
		const json_t *l = json_object_get(request, "limit");
		if (l && (!json_is_integer(l) || json_integer_value(l) < 1 || json_integer_value(l) > MAX_LIST))
			return cp_err_set(err, CP_E_INVALID_REQUEST, "limit must be an integer from 1 to %d",
			                  MAX_LIST);
		if (l)
			json_object_set(fop, "limit", (json_t *)l);
		const json_t *c = json_object_get(request, "cursor");
		if (c && (!json_is_string(c) || json_string_length(c) == 0 ||
		          json_string_length(c) > MAX_CURSOR ||
		          strspn(json_string_value(c), "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") !=
		                  json_string_length(c)))
			return cp_err_set(err, CP_E_INVALID_REQUEST, "cursor must be a next this listing gave");
		if (c)
			json_object_set(fop, "cursor", (json_t *)c);
	} else if (strcmp(op, "delete") == 0) {
		const json_t *r = json_object_get(request, "recursive");
		if (r && !json_is_boolean(r))
			return cp_err_set(err, CP_E_INVALID_REQUEST, "recursive must be a boolean");
		if (r)
			json_object_set(fop, "recursive", (json_t *)r);
	}
	if (rc)
		return rc;
	char *text = json_dumps(fop, JSON_COMPACT);
	if (!text)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	e->src = text;
	e->src_len = strlen(text);
	return 0;
}

static int is_op(const struct codepod_exec *e, const char *op)
{
	return strcmp(json_string_value(json_object_get(e->fop, "op")), op) == 0;
}

/* Its bytes go out (data frames, acked by the host) or come in (chunks). */
static int reads(const struct codepod_exec *e)
{
	return is_op(e, "read") || is_op(e, "archive_read");
}

static int writes(const struct codepod_exec *e)
{
	return is_op(e, "write") || is_op(e, "archive_write");
}

/* A read or write the runner is told it may hand over by descriptor
 * (hello's "byFd"): where the backend can open one, and for a write where
 * the kernel bounds the workspace (elsewhere the runner holds a write to
 * maxWorkspaceBytes itself). */
static int by_fd(const struct codepod_exec *e)
{
	const struct codepod_backend *b = e->cp->cfg.backend;
	return b->ops->open_fd != NULL && (is_op(e, "read") || (is_op(e, "write") && !b->ws_unbounded));
}

json_t *codepod_fileop_hello(const struct codepod_exec *e)
{
	const char *path = json_string_value(json_object_get(e->fop, "path"));
	int hashes = is_op(e, "read") || (is_op(e, "write") && json_object_get(e->fop, "ifMatch"));
	json_t *known = hashes && path ? codepod_etags_hint(e->cp->etags, e->conversation, path) : NULL;
	if (!known && !by_fd(e))
		return json_incref(e->fop);
	json_t *f = json_copy(e->fop);
	if (f && known)
		json_object_set(f, "known", known);
	if (f && by_fd(e))
		json_object_set_new(f, "byFd", json_true());
	json_decref(known);
	return f ? f : json_incref(e->fop);
}

static enum cp_code code_of(const char *name)
{
	static const struct {
		const char *name;
		enum cp_code code;
	} codes[] = {
		{ "NOT_FOUND", CP_E_FILE_NOT_FOUND }, { "PRECONDITION_FAILED", CP_E_PRECONDITION },
		{ "TOO_LARGE", CP_E_FILE_TOO_LARGE }, { "INVALID_REQUEST", CP_E_INVALID_REQUEST },
	};
	for (size_t i = 0; name && i < sizeof codes / sizeof codes[0]; i++)
		if (strcmp(name, codes[i].name) == 0)
			return codes[i].code;
	return CP_E_INTERNAL;
}

static void on_done_frame(struct codepod_exec *e, const char *payload, size_t len)
{
	json_t *v = cp_json_load(payload, len, NULL);
	if (!json_is_object(v)) {
		json_decref(v);
		codepod_exec_finish(e, CP_E_INTERNAL, "control channel: malformed file-result frame");
		return;
	}
	const json_t *error = json_object_get(v, "error");
	if (error) {
		const char *msg = json_string_value(json_object_get(error, "message"));
		enum cp_code code = code_of(json_string_value(json_object_get(error, "code")));
		/* the runner's words are fixed texts; bounded all the same */
		codepod_exec_finish(e, code, "%.*s", MAX_ERR_MSG, msg ? msg : "the file operation failed");
		json_decref(v);
		return;
	}
	const char *op = json_string_value(json_object_get(v, "op"));
	if (!op || !is_op(e, op)) {
		json_decref(v);
		codepod_exec_finish(e, CP_E_INTERNAL, "control channel: a file result of another operation");
		return;
	}
	if (is_op(e, "write")) { /* the SHA-256 of the bytes codepod sent, which the runner wrote */
		unsigned char md[32];
		char hex[65];
		unsigned n = 0;
		EVP_MD_CTX *ctx = e->fop_sink ? e->fop_sink->ctx : e->fop_sha;
		if (!ctx || (e->fop_sink && e->fop_sink->werr) || !EVP_DigestFinal_ex(ctx, md, &n) ||
		    n != sizeof md) {
			json_decref(v);
			codepod_exec_finish(e, CP_E_INTERNAL, "hashing the written file failed");
			return;
		}
		cp_hex_encode(md, n, hex);
		json_object_set_new(v, "etag", json_string(hex));
	}
	/* What the runner saw of a file it hashed: for the next read, never
	 * part of the result. */
	const json_t *seen = json_object_get(v, "seen");
	if (seen && is_op(e, "read"))
		codepod_etags_note(e->cp->etags, e->conversation,
		                   json_string_value(json_object_get(e->fop, "path")), seen,
		                   json_string_value(json_object_get(v, "etag")));
	json_object_del(v, "seen");
	json_decref(e->result);
	e->result = v;
	codepod_exec_finish(e, CP_OK, "%s", "");
}

/* ---- the read window ----
 *
 * The runner sends up to CODEPOD_FILE_WINDOW chunks ahead of codepod's
 * acks; the host gets one chunk at a time and acks it. Each host ack frees
 * a slot of the window, and codepod acks the runner for it, so the sandbox
 * reads ahead while the client takes the chunks before: the per-chunk
 * round trip through the runner is off the transfer's path, and codepod
 * holds at most the window. */

static int runner_ack(struct codepod_exec *e)
{
	static const char line[] = "{\"k\":\"ack\"}\n";
	return codepod_exec_send_line(e, line, sizeof line - 1);
}

/* The head of the queue to the host, when it has none. */
static void offer(struct codepod_exec *e)
{
	if (e->fop_await_ack || !e->fop_q_count || e->state >= CODEPOD_ST_FINISHING)
		return;
	e->fop_await_ack = 1;
	e->host->file_data(e->ud, e, e->fop_q[e->fop_q_head], e->fop_q_len[e->fop_q_head]);
}

/* ---- a read by descriptor ----
 *
 * Where the backend can open the descriptor the runner has on the file
 * (open_fd: the local backend, through /proc), codepod reads the bytes
 * itself, on libuv's thread pool, one chunk at a time into the window's
 * slots: no hop through the runner's stdout (two copies of every byte, and
 * the runner's CPU). The runner has opened the file by the workspace's
 * rules and hashed it; its end (F) comes at once and is held until the
 * last byte read is delivered. An execution freed while a read is out
 * leaves the pump to free itself when the read comes back (p->e NULL). */

static void pump_free(struct codepod_fop_pump *p)
{
	close(p->fd);
	free(p->buf);
	free(p);
}

static void pump_drop(struct codepod_exec *e)
{
	struct codepod_fop_pump *p = e->fop_pump;
	e->fop_pump = NULL;
	if (p && p->busy)
		p->e = NULL;
	else if (p)
		pump_free(p);
}

/* The runner's end, once every byte read was delivered. */
static void pump_maybe_done(struct codepod_exec *e)
{
	struct codepod_fop_pump *p = e->fop_pump;
	if (!p || !p->ended || e->fop_q_count || !e->fop_done)
		return;
	char *d = e->fop_done;
	e->fop_done = NULL;
	if (p->failed)
		codepod_exec_finish(e, CP_E_INTERNAL, "reading the file failed");
	else
		on_done_frame(e, d, e->fop_done_len);
	free(d);
}

static void pump_next(struct codepod_exec *e);

static void pump_read_done(uv_fs_t *req)
{
	struct codepod_fop_pump *p = req->data;
	ssize_t n = req->result;
	uv_fs_req_cleanup(req);
	p->busy = 0;
	struct codepod_exec *e = p->e;
	if (!e) {
		pump_free(p);
		return;
	}
	if (n <= 0) { /* an error, or the file shrank: what came is what there is */
		p->ended = 1;
		p->failed = n < 0;
		pump_maybe_done(e);
		return;
	}
	/* the filled buffer becomes the slot's; the slot's old one reads next */
	unsigned slot = (e->fop_q_head + e->fop_q_count) % CODEPOD_FILE_WINDOW;
	char *old = e->fop_q[slot];
	int big = e->fop_q_cap[slot] >= CODEPOD_FILE_CHUNK;
	e->fop_q[slot] = p->buf;
	e->fop_q_cap[slot] = CODEPOD_FILE_CHUNK;
	e->fop_q_len[slot] = (size_t)n;
	p->buf = big ? old : NULL;
	if (!big)
		free(old);
	e->fop_q_count++;
	e->fop_bytes += (uint64_t)n;
	p->pos += (uint64_t)n;
	offer(e);
	pump_next(e);
}

/* The next read, while a slot is free. */
static void pump_next(struct codepod_exec *e)
{
	struct codepod_fop_pump *p = e->fop_pump;
	if (!p || p->busy || p->ended || e->fop_q_count == CODEPOD_FILE_WINDOW ||
	    e->state >= CODEPOD_ST_FINISHING)
		return;
	if (p->pos >= p->stop) {
		p->ended = 1;
		pump_maybe_done(e);
		return;
	}
	if (!p->buf && !(p->buf = malloc(CODEPOD_FILE_CHUNK))) {
		p->ended = p->failed = 1;
		pump_maybe_done(e);
		return;
	}
	uint64_t left = p->stop - p->pos;
	uv_buf_t b = uv_buf_init(p->buf, (unsigned)(left < CODEPOD_FILE_CHUNK ? left : CODEPOD_FILE_CHUNK));
	p->req.data = p;
	if (uv_fs_read(e->cp->cfg.loop, &p->req, p->fd, &b, 1, (int64_t)p->pos, pump_read_done)) {
		p->ended = p->failed = 1;
		pump_maybe_done(e);
		return;
	}
	p->busy = 1;
}

/* The read's size and etag came with the runner's descriptor @fd: codepod
 * takes the file over when the backend opens it (0), else the runner sends
 * the bytes (its answer says which). */
static int pump_start(struct codepod_exec *e, const json_t *info, json_int_t fd)
{
	struct cp_err err = { .code = CP_E_STATE, .msg = "no descriptor to open" };
	const struct codepod_backend_ops *bops = e->cp->cfg.backend->ops;
	int own = fd >= 0 && fd <= 65535 && e->runner_pid > 0 && bops->open_fd && e->proc
	                  ? bops->open_fd(e->proc, e->runner_pid, (int)fd, 0, &err)
	                  : -1;
	struct codepod_fop_pump *p = own >= 0 ? calloc(1, sizeof *p) : NULL;
	if (!p) {
		if (own >= 0)
			close(own);
		else if (bops->open_fd)
			cp_log(CP_LOG_DEBUG, "file.read_by_runner", "id", json_string(e->id), "detail",
			       json_string(err.msg), NULL);
		static const char line[] = "{\"k\":\"ack\"}\n";
		return codepod_exec_send_line(e, line, sizeof line - 1);
	}
	uint64_t size = (uint64_t)json_integer_value(json_object_get(info, "size"));
	const json_t *off = json_object_get(e->fop, "offset"), *len = json_object_get(e->fop, "length");
	p->e = e;
	p->fd = own;
	p->pos = off ? (uint64_t)json_integer_value(off) : 0;
	p->stop = size;
	if (len && p->pos + (uint64_t)json_integer_value(len) < size)
		p->stop = p->pos + (uint64_t)json_integer_value(len);
	e->fop_pump = p;
	static const char taken[] = "{\"k\":\"ack\",\"taken\":true}\n";
	int rc = codepod_exec_send_line(e, taken, sizeof taken - 1);
	if (!rc)
		pump_next(e);
	return rc;
}

/* ---- a write by descriptor ----
 *
 * The same for a write: the runner opens the new file by the workspace's
 * rules and hands its descriptor over; codepod writes each chunk, and
 * hashes it for the etag, on libuv's thread pool (one work item at a time,
 * in order, while the loop takes the next chunk), then tells the runner to
 * put the file in place ({"k":"ack","end":true}) or to drop it
 * ({"k":"ack","abort":{code,message}}: over maxFileBytes, the workspace
 * full, a write that failed). The runner's F ends it as ever. */

static void sink_free(struct codepod_fop_sink *k)
{
	close(k->fd);
	for (unsigned i = 0; i < SINK_SLOTS; i++)
		free(k->buf[i]);
	EVP_MD_CTX_free(k->ctx);
	free(k);
}

static void sink_drop(struct codepod_exec *e)
{
	struct codepod_fop_sink *k = e->fop_sink;
	e->fop_sink = NULL;
	if (k && k->busy)
		k->e = NULL;
	else if (k)
		sink_free(k);
}

/* Thread pool: touches only the head slot, the descriptor and the hash. */
static void sink_work(uv_work_t *w)
{
	struct codepod_fop_sink *k = w->data;
	const char *p = k->buf[k->head] + k->at[k->head];
	size_t n = k->len[k->head];
	uint64_t off = k->off[k->head];
	while (n > 0 && !k->werr) {
		ssize_t put = pwrite(k->fd, p, n, (off_t)off);
		if (put < 0 && errno == EINTR)
			continue;
		if (put <= 0) {
			k->werr = put < 0 ? errno : EIO;
			break;
		}
		p += put;
		n -= (size_t)put;
		off += (uint64_t)put;
	}
	if (!k->werr && !EVP_DigestUpdate(k->ctx, k->buf[k->head] + k->at[k->head], k->len[k->head]))
		k->werr = -1;
}

/* Tells the runner to drop the file (once); its F with the error ends it. */
static void sink_abort(struct codepod_exec *e, const char *code, const char *message)
{
	struct codepod_fop_sink *k = e->fop_sink;
	if (k->aborted || k->ended)
		return;
	k->aborted = 1;
	e->fop_w_last = 1; /* no more chunks asked for */
	json_t *m = json_pack("{s:s,s:{s:s,s:s}}", "k", "ack", "abort", "code", code, "message", message);
	codepod_exec_send(e, m);
}

static void sink_kick(struct codepod_fop_sink *k, uv_loop_t *loop);

static void sink_after(uv_work_t *w, int status)
{
	struct codepod_fop_sink *k = w->data;
	k->busy = 0;
	if (status && !k->werr)
		k->werr = EIO;
	struct codepod_exec *e = k->e;
	if (!e) {
		sink_free(k);
		return;
	}
	k->head = (k->head + 1) % SINK_SLOTS;
	k->count--;
	if (k->werr) {
		int full = k->werr == ENOSPC || k->werr == EDQUOT || k->werr == EFBIG;
		sink_abort(e, full ? "TOO_LARGE" : "INTERNAL",
		           full ? "the workspace is full (its size ceiling); nothing was replaced"
		                : "writing the file failed; nothing was replaced");
		return;
	}
	sink_kick(k, e->cp->cfg.loop);
	if (k->count == 0 && e->fop_w_last && !k->aborted && !k->ended) {
		static const char end[] = "{\"k\":\"ack\",\"end\":true}\n";
		k->ended = 1;
		codepod_exec_send_line(e, end, sizeof end - 1);
		return;
	}
	if (!e->fop_await_chunk && !e->fop_w_last && e->state < CODEPOD_ST_FINISHING) {
		e->fop_await_chunk = 1;
		e->host->file_ready(e->ud, e);
	}
}

static void sink_kick(struct codepod_fop_sink *k, uv_loop_t *loop)
{
	if (k->busy || !k->count || k->werr)
		return;
	k->work.data = k;
	if (uv_queue_work(loop, &k->work, sink_work, sink_after) == 0)
		k->busy = 1;
	else
		k->werr = EIO;
}

/* The runner's descriptor @fd of the new file came with its first A: codepod
 * takes the write over when the backend opens it, else the runner takes
 * the chunks (its next A says it is ready for them). */
static int sink_start(struct codepod_exec *e, json_int_t fd)
{
	struct cp_err err = { .code = CP_E_STATE, .msg = "no descriptor to open" };
	const struct codepod_backend_ops *bops = e->cp->cfg.backend->ops;
	int own = fd >= 0 && fd <= 65535 && e->runner_pid > 0 && e->proc
	                  ? bops->open_fd(e->proc, e->runner_pid, (int)fd, 1, &err)
	                  : -1;
	struct codepod_fop_sink *k = own >= 0 ? calloc(1, sizeof *k) : NULL;
	if (k && (!(k->ctx = EVP_MD_CTX_new()) || !EVP_DigestInit_ex(k->ctx, EVP_sha256(), NULL))) {
		EVP_MD_CTX_free(k->ctx);
		free(k);
		k = NULL;
	}
	if (!k) {
		if (own >= 0)
			close(own);
		else
			cp_log(CP_LOG_DEBUG, "file.write_by_runner", "id", json_string(e->id), "detail",
			       json_string(err.msg), NULL);
		e->fop_w_offered = 1;
		static const char line[] = "{\"k\":\"ack\"}\n";
		return codepod_exec_send_line(e, line, sizeof line - 1);
	}
	k->e = e;
	k->fd = own;
	e->fop_sink = k;
	static const char taken[] = "{\"k\":\"ack\",\"taken\":true}\n";
	int rc = codepod_exec_send_line(e, taken, sizeof taken - 1);
	if (rc)
		return rc;
	e->fop_w_opened = 1;
	e->fop_await_chunk = 1;
	e->host->file_ready(e->ud, e);
	return 0;
}

static void free_queue(struct codepod_exec *e)
{
	pump_drop(e);
	sink_drop(e);
	for (unsigned i = 0; i < CODEPOD_FILE_WINDOW; i++) {
		free(e->fop_q[i]);
		e->fop_q[i] = NULL;
		e->fop_q_cap[i] = 0;
	}
	e->fop_q_count = 0;
	free(e->fop_done);
	e->fop_done = NULL;
	free(e->fop_wbuf);
	e->fop_wbuf = NULL;
	EVP_MD_CTX_free(e->fop_sha);
	e->fop_sha = NULL;
}

int codepod_fileop_pending(const struct codepod_exec *e)
{
	return e->fop && e->fop_done != NULL;
}

void codepod_fileop_free(struct codepod_exec *e)
{
	free_queue(e);
}

void codepod_fileop_frame(struct codepod_exec *e, char kind, const char *payload, size_t len)
{
	if (e->state != CODEPOD_ST_RUNNING) {
		codepod_exec_finish(e, CP_E_INTERNAL, "control channel: a file frame before ready");
		return;
	}
	switch (kind) {
	case CODEPOD_FRAME_FILE_DATA:
		if (!reads(e) || e->fop_pump || e->fop_q_count == CODEPOD_FILE_WINDOW ||
		    len > CODEPOD_FILE_CHUNK || !e->host->file_data || e->fop_done) {
			codepod_exec_finish(e, CP_E_INTERNAL, "control channel: a data frame out of turn");
			return;
		}
		{
			/* A slot keeps its buffer from chunk to chunk: a fresh
			 * 256 KiB each time was a page fault every 4 KiB of it. */
			unsigned slot = (e->fop_q_head + e->fop_q_count) % CODEPOD_FILE_WINDOW;
			if (e->fop_q_cap[slot] < len || !e->fop_q[slot]) {
				size_t cap = len > CODEPOD_FILE_CHUNK / 4 ? CODEPOD_FILE_CHUNK : CODEPOD_FILE_CHUNK / 4;
				free(e->fop_q[slot]);
				e->fop_q_cap[slot] = 0;
				if (!(e->fop_q[slot] = malloc(cap))) {
					codepod_exec_finish(e, CP_E_INTERNAL, "out of memory holding a file chunk");
					return;
				}
				e->fop_q_cap[slot] = cap;
			}
			memcpy(e->fop_q[slot], payload, len);
			e->fop_q_len[slot] = len;
			e->fop_q_count++;
		}
		e->fop_bytes += len;
		offer(e);
		break;
	case CODEPOD_FRAME_FILE_ACK:
		if (is_op(e, "read") && !e->fop_info) { /* the size and etag, before the data */
			json_t *v = cp_json_load(payload, len, NULL);
			const json_t *size = json_object_get(v, "size");
			const char *etag = json_string_value(json_object_get(v, "etag"));
			if (!json_is_integer(size) || json_integer_value(size) < 0 || !etag ||
			    strlen(etag) != 64 || strspn(etag, "0123456789abcdef") != 64) {
				json_decref(v);
				codepod_exec_finish(e, CP_E_INTERNAL, "control channel: a malformed file-info frame");
				return;
			}
			e->fop_info = v;
			const json_t *fd = json_object_get(v, "fd");
			if (fd && (!json_is_integer(fd) || !by_fd(e))) {
				codepod_exec_finish(e, CP_E_INTERNAL, "control channel: a descriptor not asked for");
				return;
			}
			if (fd)
				pump_start(e, v, json_integer_value(fd));
			return;
		}
		/* The first says the file is open; each other one that a chunk
		 * was taken. The host may have up to CODEPOD_FILE_WINDOW - 1
		 * chunks on their way to the runner (codepod_file_chunk). */
		if (writes(e) && len && !e->fop_w_opened && !e->fop_w_offered && !e->fop_sink &&
		    by_fd(e) && e->host->file_ready) { /* the new file's descriptor */
			json_t *v = cp_json_load(payload, len, NULL);
			const json_t *fd = json_object_get(v, "fd");
			json_int_t n = json_is_integer(fd) ? json_integer_value(fd) : -1;
			json_decref(v);
			if (n < 0) {
				codepod_exec_finish(e, CP_E_INTERNAL, "control channel: a malformed descriptor frame");
				return;
			}
			sink_start(e, n);
			return;
		}
		if (!writes(e) || len || !e->host->file_ready || e->fop_sink ||
		    (e->fop_w_opened && e->fop_w_inflight == 0)) {
			codepod_exec_finish(e, CP_E_INTERNAL, "control channel: a ready frame out of turn");
			return;
		}
		if (e->fop_w_opened)
			e->fop_w_inflight--;
		e->fop_w_opened = 1;
		if (!e->fop_await_chunk && !e->fop_w_last) {
			e->fop_await_chunk = 1;
			e->host->file_ready(e->ud, e);
		}
		break;
	default:
		if (e->fop_q_count || (e->fop_pump && !e->fop_pump->ended)) { /* after the chunks still held or read */
			e->fop_done = malloc(len ? len : 1);
			if (!e->fop_done) {
				codepod_exec_finish(e, CP_E_INTERNAL, "out of memory holding a file result");
				return;
			}
			memcpy(e->fop_done, payload, len);
			e->fop_done_len = len;
			return;
		}
		on_done_frame(e, payload, len);
	}
}

int codepod_file_ack(struct codepod_exec *e, struct cp_err *err)
{
	if (!e->fop || !reads(e))
		return cp_err_set(err, CP_E_STATE, "it is not a file or archive read");
	/* the runner may be gone once it sent everything (fop_done held) */
	if (e->state >= CODEPOD_ST_FINISHING || (!e->proc && !e->fop_done))
		return cp_err_set(err, CP_E_STATE, "it has ended");
	if (!e->fop_await_ack)
		return cp_err_set(err, CP_E_STATE, "no file_chunk awaits an ack");
	e->fop_await_ack = 0;
	e->fop_q_head = (e->fop_q_head + 1) % CODEPOD_FILE_WINDOW;
	e->fop_q_count--;
	codepod_exec_rearm(e);
	if (e->fop_pump) { /* a slot is free: codepod reads one more */
		if (e->fop_q_count)
			offer(e);
		pump_next(e);
		pump_maybe_done(e);
		return 0;
	}
	/* a slot is free: the runner may send one more (none once it ended) */
	int rc = e->proc && !e->fop_done ? runner_ack(e) : 0;
	if (rc)
		return cp_err_set(err, (enum cp_code)rc, "writing to the runner failed");
	if (e->fop_q_count) {
		offer(e);
	} else if (e->fop_done) {
		char *d = e->fop_done;
		e->fop_done = NULL;
		on_done_frame(e, d, e->fop_done_len);
		free(d);
	}
	return 0;
}

/* A chunk's line is at most this long; its bytes follow it in fop_wbuf
 * (and base64 decodes up to 2 bytes past a chunk's end). */
#define CHUNK_HEAD_MAX 64

static char *wbuf(struct codepod_exec *e)
{
	struct codepod_fop_sink *k = e->fop_sink;
	if (k) { /* the next free slot (want_next: there is one) */
		unsigned i = (k->head + k->count) % SINK_SLOTS;
		if (k->count == SINK_SLOTS)
			return NULL;
		if (!k->buf[i])
			k->buf[i] = malloc(SINK_BUF);
		return k->buf[i];
	}
	if (!e->fop_wbuf)
		e->fop_wbuf = malloc(CHUNK_HEAD_MAX + CODEPOD_FILE_CHUNK + 3);
	return e->fop_wbuf;
}

/* A chunk for codepod's own write: into the next slot (wbuf's), where
 * @data may already be (decoded from base64 there). */
static int sink_chunk(struct codepod_exec *e, const char *data, size_t len, int last,
                      struct cp_err *err)
{
	struct codepod_fop_sink *k = e->fop_sink;
	e->fop_await_chunk = 0;
	e->fop_w_last = last;
	codepod_exec_rearm(e);
	if (k->aborted)
		return 0; /* after the runner was told to drop it: the F that follows tells */
	char *buf = wbuf(e);
	if (!buf)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	unsigned i = (k->head + k->count) % SINK_SLOTS;
	size_t hn = data >= buf && data < buf + SINK_BUF ? (size_t)(data - buf) : 0;
	if (!hn)
		memcpy(buf, data, len);
	uint64_t off = e->fop_bytes;
	e->fop_bytes += len;
	if (e->fop_bytes > e->pol.max_file_bytes) {
		char msg[96];
		snprintf(msg, sizeof msg, "the file is over maxFileBytes (%llu bytes); nothing was replaced",
		         (unsigned long long)e->pol.max_file_bytes);
		sink_abort(e, "TOO_LARGE", msg);
		return 0;
	}
	k->at[i] = hn;
	k->len[i] = len;
	k->off[i] = off;
	k->count++;
	sink_kick(k, e->cp->cfg.loop);
	if (!k->busy) { /* the thread pool refused the work */
		sink_abort(e, "INTERNAL", "writing the file failed; nothing was replaced");
		return 0;
	}
	if (!last && k->count < SINK_SLOTS && e->state < CODEPOD_ST_FINISHING) {
		e->fop_await_chunk = 1;
		e->host->file_ready(e->ud, e);
	}
	return 0;
}

/* The write's next chunk to the runner: a line that says how many bytes
 * follow, then the bytes as they are (runner/PROTOCOL.md). */
static int send_chunk(struct codepod_exec *e, const char *data, size_t len, int last,
                      struct cp_err *err)
{
	if (e->fop_sink)
		return sink_chunk(e, data, len, last, err);
	e->fop_await_chunk = 0;
	e->fop_bytes += len;
	e->fop_w_last = last;
	codepod_exec_rearm(e);
	if (!wbuf(e))
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	/* (not formatted in place: its NUL would land on the data) */
	char head[CHUNK_HEAD_MAX];
	int hn = snprintf(head, sizeof head, "{\"k\":\"chunk\",\"n\":%zu,\"last\":%s}\n", len,
	                  last ? "true" : "false");
	memcpy(e->fop_wbuf, head, (size_t)hn);
	/* One write: the line and its bytes reach the runner in order, and a
	 * chunk that fits the pipe costs one system call. */
	if (data != e->fop_wbuf + hn)
		memcpy(e->fop_wbuf + hn, data, len);
	/* The etag is hashed here, as the bytes go: beside the runner, which
	 * then only writes them (a third of its CPU time per upload). */
	if (is_op(e, "write") && (!e->fop_sha && (!(e->fop_sha = EVP_MD_CTX_new()) ||
	                                          !EVP_DigestInit_ex(e->fop_sha, EVP_sha256(), NULL))))
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	if (is_op(e, "write") && !EVP_DigestUpdate(e->fop_sha, data, len))
		return cp_err_set(err, CP_E_INTERNAL, "hashing the file failed");
	int rc = codepod_exec_send_line(e, e->fop_wbuf, (size_t)hn + len);
	if (rc)
		return cp_err_set(err, (enum cp_code)rc, "writing to the runner failed");
	/* The next may come at once while fewer than the window are on
	 * their way: the runner's round trip is off the upload's path, and
	 * codepod holds at most that many chunks for it. The host may send it
	 * from inside file_ready (this call then nests once per chunk). */
	if (!last && ++e->fop_w_inflight < CODEPOD_FILE_WINDOW - 1 && e->state < CODEPOD_ST_FINISHING) {
		e->fop_await_chunk = 1;
		e->host->file_ready(e->ud, e);
	}
	return 0;
}

static int chunk_check(struct codepod_exec *e, size_t raw, struct cp_err *err)
{
	if (!e->fop || !writes(e))
		return cp_err_set(err, CP_E_STATE, "it is not a file or archive write");
	if (e->state >= CODEPOD_ST_FINISHING || !e->proc)
		return cp_err_set(err, CP_E_STATE, "it has ended");
	if (!e->fop_await_chunk)
		return cp_err_set(err, CP_E_STATE, "send each file_chunk after the file_ack of the one before");
	if (raw > CODEPOD_FILE_CHUNK)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "a chunk is at most %d bytes (before base64)",
		                  CODEPOD_FILE_CHUNK);
	return 0;
}

int codepod_file_chunk(struct codepod_exec *e, const char *b64, size_t len, int last,
                       struct cp_err *err)
{
	if (len % 4 != 0 || strspn(b64, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") != len)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "data must be base64");
	size_t pad = (len && b64[len - 1] == '=') + (len > 1 && b64[len - 2] == '=');
	size_t raw = len / 4 * 3 - pad;
	int rc = chunk_check(e, raw, err);
	if (rc)
		return rc;
	/* decoded into the write buffer, after the room its line takes */
	if (!wbuf(e))
		return cp_err_set(err, e->fop_sink ? CP_E_STATE : CP_E_NOMEM,
		                  e->fop_sink ? "send each file_chunk after the file_ack of the one before"
		                              : "out of memory");
	char head[CHUNK_HEAD_MAX];
	int hn = snprintf(head, sizeof head, "{\"k\":\"chunk\",\"n\":%zu,\"last\":%s}\n", raw,
	                  last ? "true" : "false");
	char *buf = wbuf(e);
	if (len && EVP_DecodeBlock((unsigned char *)buf + hn, (const unsigned char *)b64, (int)len) < 0)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "data must be base64");
	return send_chunk(e, buf + hn, raw, last, err);
}

int codepod_file_bytes(struct codepod_exec *e, const void *data, size_t len, int last,
                       struct cp_err *err)
{
	int rc = chunk_check(e, len, err);
	return rc ? rc : send_chunk(e, data, len, last, err);
}

const json_t *codepod_file_info(const struct codepod_exec *e)
{
	return e->fop_info;
}

json_t *codepod_fileop_outcome(const struct codepod_exec *e, json_t *usage)
{
	int ok = e->code == CP_OK && e->result;
	json_t *o = ok ? json_deep_copy(e->result)
	               : json_pack("{s:O}", "op", json_object_get(e->fop, "op"));
	if (!o) {
		json_decref(usage);
		return NULL;
	}
	json_object_set_new(o, "executionId", json_string(e->id));
	json_object_set_new(o, "status", json_string(ok ? "ok" : "error"));
	if (usage)
		json_object_set_new(usage, "fileBytes", json_integer((json_int_t)e->fop_bytes));
	json_object_set_new(o, "usage", usage);
	if (!ok)
		json_object_set_new(o, "error", json_pack("{s:s,s:s}", "code",
		                                          cp_code_name(e->code == CP_OK ? CP_E_INTERNAL : e->code),
		                                          "message", e->message));
	return o;
}
