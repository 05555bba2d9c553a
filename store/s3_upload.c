/* s3_upload.c - one PUT, or a multipart upload for a large file (s3.h).
 * Parts go one after another: on a loopback or data-centre link one
 * stream is near the store's rate, and one part in flight bounds what a
 * failed upload leaves to abort. */
#include "store/s3.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/log.h"
#include "store/s3_int.h"
#include "store/s3_xml.h"

struct upload {
	struct store_s3 *s;
	char *key;
	int fd;
	uint64_t len, part_size;
	size_t nparts, next;
	char (*sha)[65];          /* per part, or NULL */
	char upload_id[512];
	struct cp_buf done_xml;   /* <Part> list of the complete */
	store_done_fn done;
	void *ud;
	struct cp_err failed;     /* the first failure, kept through the abort */
};

static void up_free(struct upload *u)
{
	free(u->key);
	free(u->sha);
	cp_buf_free(&u->done_xml);
	free(u);
}

static void up_end(struct upload *u, const struct store_result *r)
{
	u->done(u->ud, r);
	up_free(u);
}

static void up_end_err(struct upload *u, const struct cp_err *e)
{
	struct store_result r = { .rc = e->code ? e->code : CP_E_INTERNAL, .mtime = -1, .err = e };
	up_end(u, &r);
}

static void aborted(void *ud, const struct store_result *res)
{
	struct upload *u = ud;
	if (res->rc)
		cp_log(CP_LOG_WARN, "store.abort_failed", "reason", json_string(res->err->msg), NULL);
	up_end_err(u, &u->failed);
}

/* Ends the upload with @e after asking the store to drop its parts. */
static void up_fail(struct upload *u, const struct cp_err *e)
{
	u->failed = *e;
	struct cp_buf q;
	cp_buf_init(&q, 1024);
	struct cp_err e2 = { 0 };
	int rc = cp_buf_addf(&q, &e2, "uploadId=");
	if (!rc)
		rc = store_query_escape(&q, u->upload_id, &e2);
	struct store_req *r = rc ? NULL : store_req_new(u->s, "DELETE", u->key, cp_buf_ptr(&q),
	                                                STORE_BODY_MAX, &e2);
	cp_buf_free(&q);
	if (r && store_req_start(r, aborted, u, &e2) == 0)
		return;
	store_req_free(r);
	up_end_err(u, &u->failed);
}

static void completed(void *ud, const struct store_result *res)
{
	struct upload *u = ud;
	/* A complete can answer 200 and still fail: the error is in the body. */
	char code[128];
	if (!res->rc && store_xml_first(res->body, res->body_len, "Code", code, sizeof code)) {
		struct cp_err e = { 0 };
		cp_err_set(&e, CP_E_HTTP, "store: multipart complete failed: %s", code);
		up_fail(u, &e);
		return;
	}
	if (res->rc) {
		up_fail(u, res->err);
		return;
	}
	struct store_result r = *res;
	r.size = u->len;
	up_end(u, &r);
}

static int complete(struct upload *u, struct cp_err *err)
{
	struct cp_buf q;
	cp_buf_init(&q, 1024);
	int rc = cp_buf_addf(&q, err, "uploadId=");
	if (!rc)
		rc = store_query_escape(&q, u->upload_id, err);
	struct store_req *r = rc ? NULL : store_req_new(u->s, "POST", u->key, cp_buf_ptr(&q),
	                                                STORE_BODY_MAX, err);
	cp_buf_free(&q);
	if (!r)
		return rc ? rc : err->code;
	rc = cp_buf_addf(&u->done_xml, err, "</CompleteMultipartUpload>");
	size_t n = 0;
	if (!rc && !(r->mem = cp_buf_take(&u->done_xml, &n, err)))
		rc = err->code;
	r->mem_len = n;
	r->content_type = "application/xml";
	if (!rc)
		rc = store_sha256_hex(r->mem, n, r->sha256, err);
	if (!rc)
		rc = store_req_start(r, completed, u, err);
	if (rc)
		store_req_free(r);
	return rc;
}

/* The ETag comes as a header: part requests keep it in their own record,
 * handed here by part_finished(). */
struct part {
	struct upload *u;
	struct store_req *r;
};

static void part_finished(void *ud, const struct store_result *res);

static int put_part(struct upload *u, struct cp_err *err)
{
	size_t i = u->next; /* 0-based; S3 numbers parts from 1 */
	uint64_t off = (uint64_t)i * u->part_size;
	uint64_t n = u->len - off < u->part_size ? u->len - off : u->part_size;
	char q[700];
	struct cp_buf id;
	cp_buf_init(&id, 600);
	int rc = store_query_escape(&id, u->upload_id, err);
	if (!rc)
		snprintf(q, sizeof q, "partNumber=%zu&uploadId=%s", i + 1, cp_buf_ptr(&id));
	cp_buf_free(&id);
	if (rc)
		return rc;
	struct store_req *r = store_req_new(u->s, "PUT", u->key, q, STORE_BODY_MAX, err);
	if (!r)
		return err->code;
	r->in_fd = u->fd;
	r->in_off = off;
	r->in_len = n;
	if (u->sha)
		memcpy(r->sha256, u->sha[i], 65);
	struct part *p = malloc(sizeof *p);
	if (!p) {
		store_req_free(r);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	p->u = u;
	p->r = r;
	rc = store_req_start(r, part_finished, p, err);
	if (rc) {
		free(p);
		store_req_free(r);
	}
	return rc;
}

static void part_finished(void *ud, const struct store_result *res)
{
	struct part *p = ud;
	struct upload *u = p->u;
	struct store_req *r = p->r; /* freed by the client after this returns */
	free(p);
	if (res->rc) {
		up_fail(u, res->err);
		return;
	}
	struct cp_err e = { 0 };
	if (!r->etag[0]) {
		cp_err_set(&e, CP_E_HTTP, "store: part %zu answered without an ETag", u->next + 1);
		up_fail(u, &e);
		return;
	}
	int rc = 0;
	if (u->next == 0)
		rc = cp_buf_addf(&u->done_xml, &e, "<CompleteMultipartUpload>");
	if (!rc)
		rc = cp_buf_addf(&u->done_xml, &e, "<Part><PartNumber>%zu</PartNumber>"
		                 "<ETag>%s</ETag></Part>", u->next + 1, r->etag);
	if (!rc) {
		u->next++;
		rc = u->next < u->nparts ? put_part(u, &e) : complete(u, &e);
	}
	if (rc)
		up_fail(u, &e);
}

static void initiated(void *ud, const struct store_result *res)
{
	struct upload *u = ud;
	if (res->rc) {
		up_end_err(u, res->err);
		return;
	}
	struct cp_err e = { 0 };
	if (!store_xml_first(res->body, res->body_len, "UploadId", u->upload_id,
	                     sizeof u->upload_id)) {
		cp_err_set(&e, CP_E_HTTP, "store: multipart initiate answered without an UploadId");
		up_end_err(u, &e);
		return;
	}
	if (put_part(u, &e))
		up_fail(u, &e);
}

int store_s3_put_file(struct store_s3 *s, const char *key, int fd, uint64_t len,
                      uint64_t part_size, const char (*sha256)[65], store_done_fn done,
                      void *ud, struct cp_err *err)
{
	if (part_size < STORE_PART_MIN)
		part_size = STORE_PART_MIN;
	if (len <= part_size)
		return store_s3_put_fd(s, key, fd, 0, len, sha256 ? sha256[0] : NULL, done, ud, err);
	size_t nparts = (size_t)((len + part_size - 1) / part_size);
	if (nparts > 10000)
		return cp_err_set(err, CP_E_TOO_BIG, "archive needs more than 10000 parts");
	struct upload *u = calloc(1, sizeof *u);
	if (!u || !(u->key = strdup(key))) {
		free(u);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	u->s = s;
	u->fd = fd;
	u->len = len;
	u->part_size = part_size;
	u->nparts = nparts;
	u->done = done;
	u->ud = ud;
	cp_buf_init(&u->done_xml, 200 * nparts + 256);
	if (sha256) {
		u->sha = malloc(nparts * sizeof *u->sha);
		if (!u->sha) {
			up_free(u);
			return cp_err_set(err, CP_E_NOMEM, "out of memory");
		}
		memcpy(u->sha, sha256, nparts * sizeof *u->sha);
	}
	/* `?uploads=`, not a bare `?uploads`: libcurl 7.88's signing needs the
	 * '='; unsigned (GCS, bearer), as GCS documents it. */
	struct store_req *r = store_req_new(s, "POST", key, store_s3_bearer(s) ? "uploads" : "uploads=",
	                                    STORE_BODY_MAX, err);
	if (!r) {
		up_free(u);
		return err ? err->code : CP_E_NOMEM;
	}
	int rc = store_req_start(r, initiated, u, err);
	if (rc) {
		store_req_free(r);
		up_free(u);
	}
	return rc;
}
