/* s3_stream.c - an object uploaded part by part as its bytes are made:
 * one PUT when the first part is the last, else a multipart upload with
 * a few parts in flight (s3.h). */
#include "store/s3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/log.h"
#include "store/s3_int.h"
#include "store/s3_xml.h"

struct spart {
	struct spart *next;
	void *buf;
	size_t len, num; /* num: S3's part number, from 1 */
	char sha256[65]; /* "" for UNSIGNED-PAYLOAD */
};

struct store_s3_stream {
	struct store_s3 *s;
	char *key;
	store_sent_fn sent;
	store_done_fn done;
	void *ud;
	struct spart *queue, *qtail; /* handed in, not sent yet */
	size_t nparts, nsent, inflight;
	int last_in, single, initiating, initiated, ending;
	char upload_id[512];
	char **etags;                /* by part number - 1 */
	size_t etags_cap;
	int failed;
	struct cp_err err;           /* the first failure */
};

/* One request of the stream, for its ETag and part number. */
struct sreq {
	struct store_s3_stream *st;
	struct store_req *r;
	size_t num;
};

static void st_free(struct store_s3_stream *st)
{
	while (st->queue) {
		struct spart *p = st->queue;
		st->queue = p->next;
		free(p->buf);
		free(p);
	}
	for (size_t i = 0; i < st->nparts && st->etags && i < st->etags_cap; i++)
		free(st->etags[i]);
	free(st->etags);
	free(st->key);
	free(st);
}

static void st_end(struct store_s3_stream *st, const struct store_result *r)
{
	store_done_fn done = st->done;
	void *ud = st->ud;
	st_free(st);
	done(ud, r);
}

static void st_end_err(struct store_s3_stream *st)
{
	struct cp_err e = st->err;
	struct store_result r = { .rc = e.code ? e.code : CP_E_INTERNAL, .mtime = -1, .err = &e };
	st_end(st, &r);
}

static int upload_query(struct store_s3_stream *st, struct cp_buf *q, size_t num,
                        struct cp_err *err)
{
	int rc = num ? cp_buf_addf(q, err, "partNumber=%zu&uploadId=", num)
	             : cp_buf_addf(q, err, "uploadId=");
	return rc ? rc : store_query_escape(q, st->upload_id, err);
}

static void aborted(void *ud, const struct store_result *res)
{
	struct store_s3_stream *st = ud;
	if (res->rc)
		cp_log(CP_LOG_WARN, "store.abort_failed", "reason", json_string(res->err->msg), NULL);
	st_end_err(st);
}

/* A failed stream ends once nothing of it is in flight: the upload is
 * aborted first when it was begun. */
static void maybe_end(struct store_s3_stream *st)
{
	if (!st->failed || st->inflight || st->initiating || st->ending)
		return;
	st->ending = 1;
	if (st->initiated) {
		struct cp_buf q;
		cp_buf_init(&q, 1024);
		struct cp_err e = { 0 };
		struct store_req *r = upload_query(st, &q, 0, &e) ? NULL
		                      : store_req_new(st->s, "DELETE", st->key, cp_buf_ptr(&q),
		                                      STORE_BODY_MAX, &e);
		cp_buf_free(&q);
		if (r && store_req_start(r, aborted, st, &e) == 0)
			return;
		store_req_free(r);
	}
	st_end_err(st);
}

static void st_fail(struct store_s3_stream *st, const struct cp_err *why)
{
	if (!st->failed) {
		st->failed = 1;
		st->err = *why;
		if (!st->err.code)
			st->err.code = CP_E_INTERNAL;
	}
	while (st->queue) {
		struct spart *p = st->queue;
		st->queue = p->next;
		free(p->buf);
		free(p);
	}
	st->qtail = NULL;
	maybe_end(st);
}

void store_s3_stream_fail(struct store_s3_stream *st, const struct cp_err *why)
{
	st_fail(st, why);
}

static void completed(void *ud, const struct store_result *res)
{
	struct store_s3_stream *st = ud;
	st->ending = 0;
	st->inflight--;
	/* A complete can answer 200 and still fail: the error is in the body. */
	char code[128];
	struct cp_err e = { 0 };
	if (!res->rc && store_xml_first(res->body, res->body_len, "Code", code, sizeof code)) {
		cp_err_set(&e, CP_E_HTTP, "store: multipart complete failed: %s", code);
		st_fail(st, &e);
		return;
	}
	if (res->rc) {
		st_fail(st, res->err);
		return;
	}
	st_end(st, res);
}

static void complete(struct store_s3_stream *st)
{
	struct cp_err e = { 0 };
	struct cp_buf q, x;
	cp_buf_init(&q, 1024);
	cp_buf_init(&x, 200 * st->nparts + 256);
	int rc = upload_query(st, &q, 0, &e);
	if (!rc)
		rc = cp_buf_addf(&x, &e, "<CompleteMultipartUpload>");
	for (size_t i = 0; !rc && i < st->nparts; i++)
		rc = cp_buf_addf(&x, &e, "<Part><PartNumber>%zu</PartNumber><ETag>%s</ETag></Part>",
		                 i + 1, st->etags[i]);
	if (!rc)
		rc = cp_buf_addf(&x, &e, "</CompleteMultipartUpload>");
	struct store_req *r = rc ? NULL : store_req_new(st->s, "POST", st->key, cp_buf_ptr(&q),
	                                                STORE_BODY_MAX, &e);
	cp_buf_free(&q);
	size_t n = 0;
	if (r && !(r->mem = cp_buf_take(&x, &n, &e)))
		rc = e.code ? e.code : CP_E_NOMEM;
	cp_buf_free(&x);
	if (r && !rc) {
		r->mem_len = n;
		r->content_type = "application/xml";
		rc = store_sha256_hex(r->mem, n, r->sha256, &e);
	}
	if (r && !rc)
		rc = store_req_start(r, completed, st, &e);
	if (!r || rc) {
		store_req_free(r);
		if (!e.code)
			cp_err_set(&e, CP_E_INTERNAL, "store: multipart complete could not be sent");
		st_fail(st, &e);
		return;
	}
	st->ending = 1; /* not to be ended by a failure meanwhile: the answer will */
	st->inflight++;
}

static void part_done(void *ud, const struct store_result *res);

/* Sends what it may: parts while fewer than the bound are in flight, then
 * the complete once every part is in. */
static void pump(struct store_s3_stream *st)
{
	while (!st->failed && st->initiated && st->queue && st->inflight < STORE_STREAM_INFLIGHT) {
		struct spart *p = st->queue;
		st->queue = p->next;
		if (!st->queue)
			st->qtail = NULL;
		struct cp_err e = { 0 };
		struct cp_buf q;
		cp_buf_init(&q, 1024);
		struct sreq *sr = malloc(sizeof *sr);
		int rc = sr ? upload_query(st, &q, p->num, &e)
		            : cp_err_set(&e, CP_E_NOMEM, "out of memory");
		struct store_req *r = rc ? NULL : store_req_new(st->s, "PUT", st->key, cp_buf_ptr(&q),
		                                                STORE_BODY_MAX, &e);
		cp_buf_free(&q);
		if (r) {
			r->mem = p->buf; /* the request frees it */
			r->mem_len = p->len;
			p->buf = NULL;
			memcpy(r->sha256, p->sha256, sizeof r->sha256);
			sr->st = st;
			sr->r = r;
			sr->num = p->num;
			rc = store_req_start(r, part_done, sr, &e);
			if (rc)
				store_req_free(r);
		}
		free(p->buf);
		free(p);
		if (!r || rc) {
			free(sr);
			if (!e.code)
				cp_err_set(&e, CP_E_INTERNAL, "store: a part could not be sent");
			st_fail(st, &e);
			return;
		}
		st->inflight++;
	}
	if (!st->failed && st->initiated && st->last_in && !st->queue && !st->inflight &&
	    st->nsent == st->nparts && !st->ending)
		complete(st);
}

static void part_done(void *ud, const struct store_result *res)
{
	struct sreq *sr = ud;
	struct store_s3_stream *st = sr->st;
	struct store_req *r = sr->r; /* freed by the client after this returns */
	size_t num = sr->num;
	free(sr);
	st->inflight--;
	if (res->rc) {
		st_fail(st, res->err);
		return;
	}
	struct cp_err e = { 0 };
	if (!r->etag[0]) {
		cp_err_set(&e, CP_E_HTTP, "store: part %zu answered without an ETag", num);
		st_fail(st, &e);
		return;
	}
	if (!(st->etags[num - 1] = strdup(r->etag))) {
		cp_err_set(&e, CP_E_NOMEM, "out of memory");
		st_fail(st, &e);
		return;
	}
	st->nsent++;
	if (st->failed) {
		maybe_end(st);
		return;
	}
	if (st->sent)
		st->sent(st->ud);
	pump(st);
}

static void initiated(void *ud, const struct store_result *res)
{
	struct store_s3_stream *st = ud;
	st->initiating = 0;
	struct cp_err e = { 0 };
	if (res->rc) {
		st_fail(st, res->err);
		return;
	}
	if (!store_xml_first(res->body, res->body_len, "UploadId", st->upload_id,
	                     sizeof st->upload_id)) {
		cp_err_set(&e, CP_E_HTTP, "store: multipart initiate answered without an UploadId");
		st_fail(st, &e);
		return;
	}
	st->initiated = 1;
	if (st->failed) {
		maybe_end(st); /* aborts it */
		return;
	}
	pump(st);
}

static void single_done(void *ud, const struct store_result *res)
{
	struct store_s3_stream *st = ud;
	st->inflight--;
	if (res->rc) {
		st_fail(st, res->err);
		return;
	}
	if (st->sent)
		st->sent(st->ud);
	st_end(st, res);
}

int store_s3_stream_new(struct store_s3 *s, const char *key, store_sent_fn sent,
                        store_done_fn done, void *ud, struct store_s3_stream **out,
                        struct cp_err *err)
{
	*out = NULL;
	if (!store_key_ok(key))
		return cp_err_set(err, CP_E_INVALID_REQUEST, "invalid object key");
	struct store_s3_stream *st = calloc(1, sizeof *st);
	if (!st || !(st->key = strdup(key))) {
		free(st);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	st->s = s;
	st->sent = sent;
	st->done = done;
	st->ud = ud;
	*out = st;
	return 0;
}

int store_s3_stream_part(struct store_s3_stream *st, void *buf, size_t len, const char *sha256,
                         int last, struct cp_err *err)
{
	struct cp_err e = { 0 };
	if (st->failed) {
		free(buf);
		return cp_err_set(err, st->err.code ? st->err.code : CP_E_INTERNAL, "%s", st->err.msg);
	}
	if (st->last_in || (!last && len < STORE_PART_MIN) || st->nparts >= 10000) {
		free(buf);
		cp_err_set(&e, st->nparts >= 10000 ? CP_E_TOO_BIG : CP_E_STATE,
		           st->nparts >= 10000 ? "archive needs more than 10000 parts"
		                               : "store: a part out of order or too small");
		st_fail(st, &e);
		if (err)
			*err = e;
		return e.code;
	}
	void *g = cp_array_grow(st->etags, &st->etags_cap, st->nparts + 1, sizeof *st->etags, NULL);
	struct spart *p = g ? calloc(1, sizeof *p) : NULL;
	if (!p) {
		free(buf);
		cp_err_set(&e, CP_E_NOMEM, "out of memory");
		st_fail(st, &e);
		if (err)
			*err = e;
		return e.code;
	}
	st->etags = g;
	st->etags[st->nparts] = NULL;
	p->buf = buf;
	p->len = len;
	p->num = ++st->nparts;
	if (sha256)
		snprintf(p->sha256, sizeof p->sha256, "%s", sha256);
	st->last_in = last;
	if (p->num == 1 && last) { /* the whole object in one part: one PUT */
		st->single = 1;
		struct store_req *r = store_req_new(st->s, "PUT", st->key, NULL, STORE_BODY_MAX, &e);
		int rc = r ? 0 : e.code;
		if (r) {
			r->mem = buf;
			r->mem_len = len;
			p->buf = NULL;
			memcpy(r->sha256, p->sha256, sizeof r->sha256);
			rc = store_req_start(r, single_done, st, &e);
			if (rc)
				store_req_free(r);
		}
		free(p->buf);
		free(p);
		if (rc) {
			st_fail(st, &e);
			if (err)
				*err = e;
			return rc;
		}
		st->inflight++;
		return 0;
	}
	if (st->qtail)
		st->qtail->next = p;
	else
		st->queue = p;
	st->qtail = p;
	if (!st->initiated && !st->initiating) {
		/* `?uploads=`: libcurl 7.88's signing needs the '='; GCS (bearer)
		 * is asked as it documents it. */
		struct store_req *r = store_req_new(st->s, "POST", st->key,
		                                    store_s3_bearer(st->s) ? "uploads" : "uploads=",
		                                    STORE_BODY_MAX, &e);
		int rc = r ? store_req_start(r, initiated, st, &e) : e.code;
		if (rc) {
			store_req_free(r);
			st_fail(st, &e);
			if (err)
				*err = e;
			return rc;
		}
		st->initiating = 1;
		return 0;
	}
	pump(st);
	return 0;
}
