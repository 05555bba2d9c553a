/* snap_download.c - a snapshot archive from the store's GET to the worker
 * that unpacks it, through a bounded pipe (snap_download.h). */
#include "store/snap_download.h"

#include <stdlib.h>
#include <string.h>

#define CHUNK_CAP (256u << 10) /* handed to the worker a chunk at a time: few wakeups */

struct chunk {
	struct chunk *next;
	size_t len, cap;
	unsigned char data[];
};

struct store_download {
	uv_loop_t *loop;
	struct store_req *req;     /* the GET while it runs */
	uv_async_t async;          /* the worker asks the loop to resume it */
	/* shared, under mu */
	uv_mutex_t mu;
	uv_cond_t cv;
	struct chunk *q, *qtail;
	size_t queued, cap;
	int eof, failed, paused, orphan;
	/* the worker's */
	struct chunk *cur;
	/* the loop's */
	struct chunk *open;        /* being filled, not yet the worker's */
	int get_done, rc;
	struct cp_err err;
	uint64_t bytes;
};

static void closed(uv_handle_t *h)
{
	struct store_download *d = h->data;
	while (d->q) {
		struct chunk *c = d->q;
		d->q = c->next;
		free(c);
	}
	free(d->cur);
	free(d->open);
	uv_cond_destroy(&d->cv);
	uv_mutex_destroy(&d->mu);
	free(d);
}

/* The open chunk goes to the worker (loop). */
static void seal(struct store_download *d)
{
	struct chunk *c = d->open;
	d->open = NULL;
	if (!c)
		return;
	if (!c->len) {
		free(c);
		return;
	}
	uv_mutex_lock(&d->mu);
	if (d->qtail)
		d->qtail->next = c;
	else
		d->q = c;
	d->qtail = c;
	d->queued += c->len;
	uv_cond_signal(&d->cv);
	uv_mutex_unlock(&d->mu);
}

static int sink(void *ud, const void *buf, size_t len)
{
	struct store_download *d = ud;
	uv_mutex_lock(&d->mu);
	int orphan = d->orphan;
	int full = d->queued + (d->open ? d->open->len : 0) >= d->cap;
	if (full && !orphan)
		d->paused = 1;
	uv_mutex_unlock(&d->mu);
	if (orphan)
		return -1;
	if (full) {
		seal(d); /* what is there is the worker's to read */
		return STORE_SINK_PAUSE;
	}
	const unsigned char *b = buf;
	while (len) {
		if (!d->open) {
			size_t cap = len > CHUNK_CAP ? len : CHUNK_CAP;
			if (!(d->open = malloc(sizeof *d->open + cap)))
				return -1;
			d->open->next = NULL;
			d->open->len = 0;
			d->open->cap = cap;
		}
		size_t n = d->open->cap - d->open->len;
		if (n > len)
			n = len;
		memcpy(d->open->data + d->open->len, b, n);
		d->open->len += n;
		b += n;
		len -= n;
		if (d->open->len == d->open->cap)
			seal(d);
	}
	return 0;
}

static void got(void *ud, const struct store_result *r)
{
	struct store_download *d = ud;
	d->req = NULL;
	seal(d);
	d->get_done = 1;
	d->rc = r->rc;
	if (r->rc)
		d->err = *r->err;
	d->bytes = r->size;
	uv_mutex_lock(&d->mu);
	if (r->rc)
		d->failed = 1;
	else
		d->eof = 1;
	int orphan = d->orphan;
	uv_cond_broadcast(&d->cv);
	uv_mutex_unlock(&d->mu);
	if (orphan)
		uv_close((uv_handle_t *)&d->async, closed);
}

static void on_async(uv_async_t *a)
{
	struct store_download *d = a->data;
	if (d->req && !d->get_done)
		store_s3_resume(d->req);
}

int store_download_new(uv_loop_t *loop, struct store_s3 *s3, const char *key, uint64_t max,
                       size_t cap, struct store_download **out, struct cp_err *err)
{
	*out = NULL;
	struct store_download *d = calloc(1, sizeof *d);
	if (!d)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	d->loop = loop;
	d->cap = cap ? cap : (16u << 20);
	if (uv_mutex_init(&d->mu) || uv_cond_init(&d->cv) ||
	    uv_async_init(loop, &d->async, on_async)) {
		free(d);
		return cp_err_set(err, CP_E_NOMEM, "snapshot download: no thread primitives");
	}
	d->async.data = d;
	int rc = store_s3_get_sink(s3, key, max, sink, d, &d->req, got, d, err);
	if (rc) {
		d->get_done = 1;
		uv_close((uv_handle_t *)&d->async, closed);
		return rc;
	}
	*out = d;
	return 0;
}

ssize_t store_download_read(void *ud, const void **buf)
{
	struct store_download *d = ud;
	free(d->cur);
	d->cur = NULL;
	uv_mutex_lock(&d->mu);
	while (!d->q && !d->eof && !d->failed)
		uv_cond_wait(&d->cv, &d->mu);
	ssize_t n;
	int resume = 0;
	if (d->failed) {
		n = -1;
	} else if (d->q) {
		struct chunk *c = d->q;
		d->q = c->next;
		if (!d->q)
			d->qtail = NULL;
		d->queued -= c->len;
		d->cur = c;
		*buf = c->data;
		n = (ssize_t)c->len;
		if (d->paused && d->queued <= d->cap / 2) {
			d->paused = 0;
			resume = 1;
		}
	} else {
		n = 0;
	}
	uv_mutex_unlock(&d->mu);
	if (resume)
		uv_async_send(&d->async);
	return n;
}

int store_download_result(const struct store_download *d, struct cp_err *err, uint64_t *bytes)
{
	if (bytes)
		*bytes = d->bytes;
	if (!d->get_done)
		return cp_err_set(err, CP_E_STATE, "snapshot download still running");
	if (d->rc && err)
		*err = d->err;
	return d->rc;
}

void store_download_free(struct store_download *d)
{
	if (!d)
		return;
	if (!d->get_done) { /* the GET ends first (fails, as nobody reads), then it goes */
		uv_mutex_lock(&d->mu);
		d->orphan = 1;
		int paused = d->paused;
		uv_mutex_unlock(&d->mu);
		uv_unref((uv_handle_t *)&d->async); /* never what keeps the loop alive */
		if (paused && d->req)
			store_s3_resume(d->req);
		return;
	}
	uv_close((uv_handle_t *)&d->async, closed);
}
