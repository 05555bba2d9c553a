/* snap_upload.c - a snapshot archive uploaded while it is packed: parts
 * from the worker to the loop through a bounded queue (snap_upload.h). */
#include "store/snap_upload.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "base/hex.h"

#define PART_DEFAULT (8u << 20)
#define PARTS_PLANNED 9000u /* of S3's 10000, room for the compression's overhead */

struct ready {
	struct ready *next;
	void *buf;
	size_t len;
	char sha256[65];
	int last;
};

struct store_upload {
	uv_loop_t *loop;
	struct store_s3 *s3;
	char *key;
	size_t part_size;
	unsigned window;
	int hash_parts;            /* each part's SHA-256 signs it (s3.h) */
	store_done_fn done;
	void *ud;
	uv_async_t async;
	/* shared, under mu */
	uv_mutex_t mu;
	uv_cond_t cv;
	struct ready *q, *qtail;   /* parts for the loop */
	unsigned outstanding;      /* handed over, not sent yet */
	int failed;                /* the upload failed: the worker stops */
	/* the worker's */
	unsigned char *cur;
	size_t cur_len;
	EVP_MD_CTX *md;
	/* the loop's */
	struct store_s3_stream *st;
	int st_ended, st_rc, st_failed_first;
	struct cp_err st_err;
	int finished, wrc, ended;
	struct cp_err werr;
};

size_t store_upload_part_size(uint64_t max_bytes)
{
	uint64_t need = max_bytes / PARTS_PLANNED + 1;
	if (need <= PART_DEFAULT)
		return PART_DEFAULT;
	need = (need + (1u << 20) - 1) & ~(uint64_t)((1u << 20) - 1);
	return need > (5ull << 30) ? (size_t)(5ull << 30) : (size_t)need;
}

static void free_queue(struct ready *r)
{
	while (r) {
		struct ready *n = r->next;
		free(r->buf);
		free(r);
		r = n;
	}
}

static void closed(uv_handle_t *h)
{
	struct store_upload *up = h->data;
	free_queue(up->q);
	free(up->cur);
	EVP_MD_CTX_free(up->md);
	uv_cond_destroy(&up->cv);
	uv_mutex_destroy(&up->mu);
	free(up->key);
	free(up);
}

/* -- the loop's side ------------------------------------------------------ */

static void on_sent(void *ud)
{
	struct store_upload *up = ud;
	uv_mutex_lock(&up->mu);
	if (up->outstanding)
		up->outstanding--;
	uv_cond_signal(&up->cv);
	uv_mutex_unlock(&up->mu);
}

static void on_stream_done(void *ud, const struct store_result *r)
{
	struct store_upload *up = ud;
	up->st = NULL;
	up->st_ended = 1;
	up->st_rc = r->rc;
	if (r->rc) {
		up->st_err = *r->err;
		if (!up->st_err.code)
			up->st_err.code = r->rc;
		up->st_failed_first = !up->finished;
		uv_mutex_lock(&up->mu);
		up->failed = 1;
		uv_cond_broadcast(&up->cv);
		uv_mutex_unlock(&up->mu);
	}
	uv_async_send(&up->async);
}

/* Every part handed over is given to the stream; once the worker finished
 * and the stream ended (or never began), @done. */
static void on_async(uv_async_t *a)
{
	struct store_upload *up = a->data;
	if (up->ended)
		return;
	uv_mutex_lock(&up->mu);
	struct ready *list = up->q;
	up->q = up->qtail = NULL;
	uv_mutex_unlock(&up->mu);
	while (list) {
		struct ready *r = list;
		list = r->next;
		struct cp_err e = { 0 };
		int give = !up->st_ended && !(up->finished && up->wrc);
		if (give && !up->st &&
		    store_s3_stream_new(up->s3, up->key, on_sent, on_stream_done, up, &up->st, &e)) {
			up->st_ended = 1;
			up->st_rc = e.code;
			up->st_err = e;
			up->st_failed_first = !up->finished;
			uv_mutex_lock(&up->mu);
			up->failed = 1;
			uv_cond_broadcast(&up->cv);
			uv_mutex_unlock(&up->mu);
			give = 0;
		}
		if (give) /* stolen, also on error (then the stream's done comes) */
			(void)store_s3_stream_part(up->st, r->buf, r->len,
			                           r->sha256[0] ? r->sha256 : NULL, r->last, &e);
		else
			free(r->buf);
		free(r);
	}
	if (!up->finished || up->ended || (up->st && !up->st_ended))
		return;
	up->ended = 1;
	struct cp_err e;
	struct store_result res = { .mtime = -1, .err = &e };
	if (up->st_rc && (up->st_failed_first || !up->wrc)) {
		e = up->st_err;
		res.rc = up->st_rc;
	} else if (up->wrc) {
		e = up->werr;
		res.rc = up->wrc;
	} else if (!up->st_ended) {
		cp_err_set(&e, CP_E_INTERNAL, "snapshot upload: no archive was written");
		res.rc = CP_E_INTERNAL;
	} else {
		memset(&e, 0, sizeof e);
	}
	up->done(up->ud, &res);
	uv_close((uv_handle_t *)&up->async, closed);
}

int store_upload_new(uv_loop_t *loop, struct store_s3 *s3, const char *key, size_t part_size,
                     unsigned window, store_done_fn done, void *ud, struct store_upload **out,
                     struct cp_err *err)
{
	*out = NULL;
	struct store_upload *up = calloc(1, sizeof *up);
	if (!up || !(up->key = strdup(key)) || !(up->md = EVP_MD_CTX_new()) ||
	    !EVP_DigestInit_ex(up->md, EVP_sha256(), NULL)) {
		if (up) {
			EVP_MD_CTX_free(up->md);
			free(up->key);
		}
		free(up);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	up->loop = loop;
	up->s3 = s3;
	up->part_size = part_size < STORE_PART_MIN ? STORE_PART_MIN : part_size;
	up->window = window ? window : 1;
	up->hash_parts = store_s3_hashes_payload(s3);
	up->done = done;
	up->ud = ud;
	if (uv_mutex_init(&up->mu) || uv_cond_init(&up->cv) ||
	    uv_async_init(loop, &up->async, on_async)) {
		/* uv's init calls fail only for want of resources */
		EVP_MD_CTX_free(up->md);
		free(up->key);
		free(up);
		return cp_err_set(err, CP_E_NOMEM, "snapshot upload: no thread primitives");
	}
	up->async.data = up;
	*out = up;
	return 0;
}

void store_upload_finish(struct store_upload *up, int rc, const struct cp_err *why)
{
	up->finished = 1;
	up->wrc = rc;
	if (rc) {
		if (why)
			up->werr = *why;
		if (!up->werr.code)
			up->werr.code = rc;
		if (up->st)
			store_s3_stream_fail(up->st, &up->werr); /* its done comes */
	}
	uv_async_send(&up->async);
}

void store_upload_drop(struct store_upload *up)
{
	up->ended = 1;
	uv_close((uv_handle_t *)&up->async, closed);
}

/* -- the worker's side ---------------------------------------------------- */

/* The part being filled goes to the loop (@last: the archive's end). */
static int push(struct store_upload *up, int last)
{
	struct ready *r = calloc(1, sizeof *r);
	unsigned char md[32];
	if (!r || (up->hash_parts && (!EVP_DigestFinal_ex(up->md, md, NULL) ||
	                              !EVP_DigestInit_ex(up->md, EVP_sha256(), NULL)))) {
		free(r);
		return -1;
	}
	if (up->hash_parts)
		cp_hex_encode(md, sizeof md, r->sha256);
	r->buf = up->cur ? (void *)up->cur : malloc(1);
	r->len = up->cur_len;
	r->last = last;
	up->cur = NULL;
	up->cur_len = 0;
	uv_mutex_lock(&up->mu);
	while (!up->failed && up->outstanding >= up->window)
		uv_cond_wait(&up->cv, &up->mu);
	int failed = up->failed;
	if (!failed) {
		if (up->qtail)
			up->qtail->next = r;
		else
			up->q = r;
		up->qtail = r;
		up->outstanding++;
	}
	uv_mutex_unlock(&up->mu);
	if (failed) {
		free(r->buf);
		free(r);
		return -1;
	}
	uv_async_send(&up->async);
	return 0;
}

int store_upload_write(void *ud, const void *buf, size_t len)
{
	struct store_upload *up = ud;
	uv_mutex_lock(&up->mu);
	int failed = up->failed;
	uv_mutex_unlock(&up->mu);
	if (failed)
		return -1;
	const unsigned char *b = buf;
	while (len) {
		if (up->cur_len == up->part_size && push(up, 0))
			return -1;
		if (!up->cur && !(up->cur = malloc(up->part_size)))
			return -1;
		size_t n = up->part_size - up->cur_len;
		if (n > len)
			n = len;
		memcpy(up->cur + up->cur_len, b, n);
		if (up->hash_parts)
			EVP_DigestUpdate(up->md, b, n);
		up->cur_len += n;
		b += n;
		len -= n;
	}
	return 0;
}

int store_upload_flush(struct store_upload *up)
{
	return push(up, 1);
}
