/* snapshots.c - snapshots of workspaces in an S3 store: when they are taken,
 * restored, deleted and expired (snapshots.h). */
#include "store/snapshots.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/rand.h>

#include "base/buf.h"
#include "base/curl_uv.h"
#include "base/log.h"
#include "store/s3.h"
#include "store/snap_archive.h"
#include "store/snap_download.h"
#include "store/snap_keys.h"
#include "store/snap_manifest.h"
#include "store/snap_upload.h"

/* Streaming (snap_upload.h, snap_download.h): parts waiting or in flight
 * per snapshot, bytes waiting per restore; snapshots packing at once (each
 * holds a thread of libuv's pool of four while it uploads: two are left
 * for restores and the rest). */
#define UP_WINDOW 3u
#define DOWN_CAP (8u << 20)
#define PACKING_MAX 2u
#define PACKING_WAIT_MS 250u
#define DEFAULT_DEBOUNCE_MS (STORE_SNAPS_DEFAULT_DELAY_S * 1000u)
#define DEFAULT_MAX_BYTES STORE_SNAPS_DEFAULT_MAX_BYTES
#define RETRY_MIN_MS 2000u
#define RETRY_MAX_MS 60000u

struct waiter {
	struct waiter *next;
	store_restore_fn done;
	void *ud;
	struct store_restore_need *need; /* store_snaps_restore_into(), or NULL */
};

/* A store_snaps_take() caller, told when its snapshot ends. */
struct taker {
	struct taker *next;
	store_taken_fn done;
	void *ud;
};

struct conv {
	struct conv *next;
	struct store_snaps *s;
	char hash[33];
	char dir[960];           /* "PREFIX/HASH/" */
	char *ws;
	uv_timer_t timer;
	int pending, busy;
	unsigned retry_ms;
	unsigned epoch;          /* bumped by a delete: work of before is dropped */
	char last_fp[65];        /* of the workspace as last snapshotted or restored */
	char cur_archive[1100];  /* the archive the last manifest we wrote names */
	struct taker *takers;    /* store_snaps_take: for the next snapshot */
	struct taker *run_takers; /* for the one running */
	/* the snapshot running */
	uv_work_t work;
	int fd;
	unsigned work_epoch;
	int work_rc, skipped;
	uint64_t t_start;        /* uv_now at the snapshot's start */
	unsigned char iv[12];    /* of its encryption, new for each */
	struct cp_err work_err;
	struct store_pack pack;
	struct store_upload *up; /* the archive on its way, while packing */
	char new_key[1100];
	/* the restore running */
	int restoring;
	struct waiter *waiters;
	char *rws;
	char *rpending;          /* store_snaps_restore_into(): its @pending, else NULL */
	int rskip;               /* ... which was gone: nothing touched */
	int unrestored;          /* the last restore_into failed: no snapshot of the
	                            workspace it left, which would replace the one kept */
	struct store_restore_need need;
	uid_t uid;
	gid_t gid;
	uint64_t t0;
	struct store_manifest m;
	int rfd;
	struct store_download *dl; /* the archive while it is unpacked */
	uv_work_t rwork;
	int rrc;
	struct cp_err rerr;
	char rfp[65];
};

struct store_snaps {
	uv_loop_t *loop;
	struct cp_curl *curl;
	struct store_s3 *s3;
	char prefix[900];        /* "" or "PREFIX/" */
	char *spool;
	unsigned ttl_s, debounce_ms;
	uint64_t max_bytes;
	struct conv *convs;
	struct store_snaps_stats st;
	struct store_keys keys;  /* --snapshot-key-file; n 0: none */
	unsigned deletes_running;
	unsigned packing;        /* snapshots on the thread pool (PACKING_MAX) */
	uv_timer_t ttl_timer;
	int ttl_listing;
	int closing, freed;
	void (*closed)(void *ud);
	void *closed_ud;
	unsigned handles_open;
};

static void maybe_closed(struct store_snaps *s);
static void start_snapshot(struct conv *c);

/* -- set-up ------------------------------------------------------------- */

static void on_ttl(uv_timer_t *t);

int store_snaps_new(const struct store_snaps_config *cfg, struct store_snaps **out,
                    struct cp_err *err)
{
	*out = NULL;
	const char *u = cfg->url;
	/* gs://: Google Cloud Storage with a token from the metadata server */
	int gcs = u && strncmp(u, "gs://", 5) == 0;
	if (!u || (!gcs && strncmp(u, "s3://", 5) != 0))
		return cp_err_set(err, CP_E_INVALID_REQUEST,
		                  "--snapshot-url must be s3://BUCKET/PREFIX or gs://BUCKET/PREFIX");
	if (gcs && cfg->credentials_file)
		return cp_err_set(err, CP_E_INVALID_REQUEST,
		                  "gs:// takes its token from the GCP metadata server: for GCS with "
		                  "HMAC keys use s3://BUCKET/PREFIX with --s3-endpoint "
		                  "https://storage.googleapis.com");
	u += 5;
	const char *slash = strchr(u, '/');
	char bucket[256];
	size_t bl = slash ? (size_t)(slash - u) : strlen(u);
	if (bl == 0 || bl >= sizeof bucket)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "--snapshot-url: no bucket");
	memcpy(bucket, u, bl);
	bucket[bl] = '\0';
	char prefix[900] = "";
	if (slash) {
		const char *p = slash;
		while (*p == '/')
			p++;
		size_t pl = strlen(p);
		while (pl && p[pl - 1] == '/')
			pl--;
		if (pl >= sizeof prefix - 2)
			return cp_err_set(err, CP_E_INVALID_REQUEST, "--snapshot-url: prefix too long");
		if (pl) {
			memcpy(prefix, p, pl);
			prefix[pl] = '\0';
			if (!store_key_ok(prefix))
				return cp_err_set(err, CP_E_INVALID_REQUEST,
				                  "--snapshot-url: the prefix may hold [A-Za-z0-9/._-] only");
			prefix[pl] = '/';
			prefix[pl + 1] = '\0';
		}
	}
	struct store_snaps *s = calloc(1, sizeof *s);
	if (!s || !(s->spool = strdup(cfg->spool_dir))) {
		free(s);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	s->loop = cfg->loop;
	memcpy(s->prefix, prefix, sizeof prefix);
	s->ttl_s = cfg->ttl_s;
	s->debounce_ms = cfg->debounce_ms ? cfg->debounce_ms : DEFAULT_DEBOUNCE_MS;
	s->max_bytes = cfg->max_bytes ? cfg->max_bytes : DEFAULT_MAX_BYTES;
	int rc = cfg->key_file ? store_keys_load(&s->keys, cfg->key_file, err) : 0;
	if (rc) {
		free(s->spool);
		free(s);
		return rc;
	}
	rc = cp_curl_new(s->loop, &s->curl, err);
	struct store_s3_config sc = { bucket, cfg->endpoint, cfg->region, cfg->credentials_file,
	                              gcs, s->loop };
	if (!rc)
		rc = store_s3_new(s->curl, &sc, &s->s3, err);
	if (rc) {
		if (s->curl)
			cp_curl_close(s->curl, NULL, NULL);
		free(s->spool);
		free(s);
		return rc;
	}
	uv_timer_init(s->loop, &s->ttl_timer);
	s->ttl_timer.data = s;
	s->handles_open = 1;
	if (s->ttl_s) {
		uint64_t every = s->ttl_s < 60 ? s->ttl_s : 60;
		uv_timer_start(&s->ttl_timer, on_ttl, every * 1000, every * 1000);
		uv_unref((uv_handle_t *)&s->ttl_timer);
	}
	*out = s;
	return 0;
}

static struct conv *conv_of(struct store_snaps *s, const char *hash)
{
	for (struct conv *c = s->convs; c; c = c->next)
		if (!strcmp(c->hash, hash))
			return c;
	if (strlen(hash) != 32)
		return NULL;
	struct conv *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->s = s;
	memcpy(c->hash, hash, 33);
	snprintf(c->dir, sizeof c->dir, "%s%s/", s->prefix, hash);
	c->fd = c->rfd = -1;
	uv_timer_init(s->loop, &c->timer);
	c->timer.data = c;
	s->handles_open++;
	c->next = s->convs;
	s->convs = c;
	return c;
}

static uint64_t now_s(void)
{
	return (uint64_t)time(NULL);
}

/* -- snapshots ------------------------------------------------------------ */

static void on_timer(uv_timer_t *t)
{
	start_snapshot(t->data);
}

void store_snaps_touch(struct store_snaps *s, const char *hash, const char *ws)
{
	if (s->freed)
		return;
	struct conv *c = conv_of(s, hash);
	if (!c || c->unrestored)
		return; /* its files are still in the store only: nothing to take */
	if (!c->ws || strcmp(c->ws, ws) != 0) {
		char *w = strdup(ws);
		if (!w)
			return;
		free(c->ws);
		c->ws = w;
	}
	c->pending = 1;
	if (s->closing)
		start_snapshot(c); /* draining: now */
	else if (!c->busy)
		uv_timer_start(&c->timer, on_timer, s->debounce_ms, 0);
}

/* The callers of store_snaps_take() whose snapshot just ended: their
 * folder is theirs again (and is not looked at after this). */
static void takers_end(struct conv *c, int rc, const struct cp_err *e)
{
	struct taker *t = c->run_takers;
	c->run_takers = NULL;
	if (t && !c->takers) {
		free(c->ws);
		c->ws = NULL;
		c->pending = 0;
	}
	while (t) {
		struct taker *n = t->next;
		t->done(t->ud, rc, e);
		free(t);
		t = n;
	}
}

int store_snaps_take(struct store_snaps *s, const char *hash, const char *dir,
                     store_taken_fn done, void *ud, struct cp_err *err)
{
	struct conv *c = s->freed ? NULL : conv_of(s, hash);
	struct taker *t = malloc(sizeof *t);
	char *w = strdup(dir);
	if (!c || !t || !w) {
		free(t);
		free(w);
		return cp_err_set(err, s->freed ? CP_E_STATE : CP_E_NOMEM,
		                  s->freed ? "snapshots are closed" : "out of memory");
	}
	free(c->ws);
	c->ws = w;
	t->done = done;
	t->ud = ud;
	t->next = c->takers;
	c->takers = t;
	c->pending = 1;
	/* Now (from the loop, never inside this call), or once the one
	 * running ends. */
	if (!c->busy)
		uv_timer_start(&c->timer, on_timer, 0, 0);
	return 0;
}

static void finish_snapshot(struct conv *c)
{
	struct store_snaps *s = c->s;
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->pack.part_sha);
	memset(&c->pack, 0, sizeof c->pack);
	c->busy = 0;
	takers_end(c, 0, NULL);
	if (c->pending) {
		if (s->closing || c->takers)
			start_snapshot(c);
		else
			uv_timer_start(&c->timer, on_timer, s->debounce_ms, 0);
	}
	maybe_closed(s);
}

static void snapshot_failed(struct conv *c, const char *step, const struct cp_err *e)
{
	struct store_snaps *s = c->s;
	s->st.failures++;
	cp_log(CP_LOG_WARN, "snapshot.failed", "conversation", json_string(c->hash),
	       "step", json_string(step), "reason", json_string(e && e->msg[0] ? e->msg : "failed"),
	       NULL);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->pack.part_sha);
	memset(&c->pack, 0, sizeof c->pack);
	c->busy = 0;
	/* A store_snaps_take() is told, and its caller decides what next. */
	int taken = c->run_takers != NULL;
	takers_end(c, e && e->code ? e->code : CP_E_IO, e);
	/* Again later, unless we are draining: then the failure is the end; a
	 * workspace over the ceiling is tried again after its next change. */
	if (c->takers) {
		start_snapshot(c);
	} else if (!s->closing && c->ws && !taken && !(e && e->code == CP_E_TOO_BIG)) {
		c->pending = 1;
		c->retry_ms = c->retry_ms ? c->retry_ms * 2 : RETRY_MIN_MS;
		if (c->retry_ms > RETRY_MAX_MS)
			c->retry_ms = RETRY_MAX_MS;
		uv_timer_start(&c->timer, on_timer, c->retry_ms, 0);
	} else {
		c->pending = 0;
	}
	maybe_closed(s);
}

static void old_archive_deleted(void *ud, const struct store_result *r)
{
	struct store_snaps *s = ud;
	s->deletes_running--;
	if (r->rc)
		cp_log(CP_LOG_WARN, "snapshot.old_archive_kept", "reason", json_string(r->err->msg), NULL);
	maybe_closed(s);
}

static void drop_key(struct store_snaps *s, const char *key)
{
	struct cp_err e = { 0 };
	if (store_s3_delete(s->s3, key, old_archive_deleted, s, &e) == 0)
		s->deletes_running++;
}

static void manifest_put(void *ud, const struct store_result *r)
{
	struct conv *c = ud;
	struct store_snaps *s = c->s;
	if (r->rc) {
		drop_key(s, c->new_key); /* the previous manifest still names its archive */
		snapshot_failed(c, "manifest", r->err);
		return;
	}
	if (c->work_epoch != c->epoch) { /* deleted meanwhile: undo */
		drop_key(s, c->new_key);
		char mk[1200];
		snprintf(mk, sizeof mk, "%smanifest.json", c->dir);
		drop_key(s, mk);
		c->pending = 0;
		finish_snapshot(c);
		return;
	}
	if (c->cur_archive[0] && strcmp(c->cur_archive, c->new_key) != 0)
		drop_key(s, c->cur_archive);
	snprintf(c->cur_archive, sizeof c->cur_archive, "%s", c->new_key);
	memcpy(c->last_fp, c->pack.fingerprint, 65);
	c->retry_ms = 0;
	s->st.snapshots++;
	cp_log(CP_LOG_DEBUG, "snapshot.done", "conversation", json_string(c->hash),
	       "bytes", json_integer((json_int_t)c->pack.size),
	       "files", json_integer((json_int_t)c->pack.files),
	       "ms", json_integer((json_int_t)(uv_now(s->loop) - c->t_start)), NULL);
	finish_snapshot(c);
}

/* The archive's upload ended (snap_upload.h): it is in the store, or the
 * packing or the upload failed (the upload was aborted). */
static void archive_put(void *ud, const struct store_result *r)
{
	struct conv *c = ud;
	c->up = NULL;
	if (c->work_epoch != c->epoch) { /* deleted meanwhile: nothing is kept */
		drop_key(c->s, c->new_key);
		c->s->st.skipped++;
		finish_snapshot(c);
		return;
	}
	if (r->rc) {
		snapshot_failed(c, "archive", r->err);
		return;
	}
	struct store_manifest m = { 0 };
	snprintf(m.archive, sizeof m.archive, "%s", c->new_key);
	m.size = c->pack.size;
	m.files = c->pack.files;
	m.bytes = c->pack.bytes;
	memcpy(m.sha256, c->pack.sha256, 65);
	memcpy(m.fingerprint, c->pack.fingerprint, 65);
	m.created = (int64_t)now_s();
	if (c->s->keys.n) {
		snprintf(m.key_id, sizeof m.key_id, "%s", c->s->keys.k[0].id);
		memcpy(m.iv, c->iv, sizeof m.iv);
	}
	struct cp_err e = { 0 };
	size_t len = 0;
	char *json = store_manifest_json(&m, &len, &e);
	char key[1200];
	snprintf(key, sizeof key, "%smanifest.json", c->dir);
	int rc = json ? store_s3_put_mem(c->s->s3, key, json, len, manifest_put, c, &e) : e.code;
	free(json);
	if (rc) {
		drop_key(c->s, c->new_key);
		snapshot_failed(c, "manifest", &e);
	}
}

static void snapshot_work(uv_work_t *w)
{
	struct conv *c = w->data;
	c->skipped = 0;
	cp_err_clear(&c->work_err);
	struct stat st;
	if (stat(c->ws, &st) != 0) {
		c->skipped = 1; /* the workspace is gone: nothing to keep */
		c->work_rc = 0;
		return;
	}
	char fp[65];
	c->work_rc = store_archive_fingerprint(c->ws, fp, &c->work_err);
	if (c->work_rc)
		return;
	if (!strcmp(fp, c->last_fp)) {
		c->skipped = 1;
		return;
	}
	struct store_crypt enc = { .key = c->s->keys.n ? &c->s->keys.k[0] : NULL, .aad = c->new_key };
	memcpy(enc.iv, c->iv, sizeof enc.iv);
	/* Packed straight into the upload: parts go while the rest is packed. */
	c->work_rc = store_archive_pack_to(c->ws, store_upload_write, c->up, c->s->max_bytes, 0,
	                                   enc.key ? &enc : NULL, &c->pack, &c->work_err);
	if (!c->work_rc && store_upload_flush(c->up))
		c->work_rc = cp_err_set(&c->work_err, CP_E_INTERNAL, "snapshot upload stopped");
}

/* Draining: snapshots that waited for a place on the thread pool. */
static void start_waiting(struct store_snaps *s)
{
	for (struct conv *c = s->convs; c && s->packing < PACKING_MAX; c = c->next)
		if (c->pending && !c->busy)
			start_snapshot(c);
}

static void snapshot_after(uv_work_t *w, int status)
{
	struct conv *c = w->data;
	struct store_snaps *s = c->s;
	s->packing--;
	if (s->closing)
		start_waiting(s);
	if (status && !c->work_rc)
		c->work_rc = cp_err_set(&c->work_err, CP_E_INTERNAL, "snapshot work cancelled");
	if (!c->work_rc && c->skipped) { /* nothing was written */
		store_upload_drop(c->up);
		c->up = NULL;
		s->st.skipped++;
		cp_log(CP_LOG_DEBUG, "snapshot.unchanged", "conversation", json_string(c->hash), NULL);
		finish_snapshot(c);
		return;
	}
	if (!c->work_rc)
		cp_log(CP_LOG_DEBUG, "snapshot.upload", "conversation", json_string(c->hash),
		       "bytes", json_integer((json_int_t)c->pack.size),
		       "packMs", json_integer((json_int_t)(uv_now(s->loop) - c->t_start)), NULL);
	/* archive_put() follows once the last parts are in (or the upload was
	 * aborted, on a failure) */
	store_upload_finish(c->up, c->work_rc, &c->work_err);
}

static void start_snapshot(struct conv *c)
{
	struct store_snaps *s = c->s;
	if (!c->ws)
		c->pending = 0;
	if (c->busy || !c->pending)
		return;
	if (s->packing >= PACKING_MAX) { /* later: a place frees up */
		if (!s->closing)
			uv_timer_start(&c->timer, on_timer, PACKING_WAIT_MS, 0);
		return;
	}
	uv_timer_stop(&c->timer);
	c->pending = 0;
	c->busy = 1;
	c->run_takers = c->takers;
	c->takers = NULL;
	c->work_epoch = c->epoch;
	c->t_start = uv_now(s->loop);
	/* The archive's name before it is made: an encrypted one is bound to it. */
	unsigned char rnd[6];
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (RAND_bytes(rnd, sizeof rnd) != 1 || RAND_bytes(c->iv, sizeof c->iv) != 1) {
		struct cp_err re = { 0 };
		cp_err_set(&re, CP_E_INTERNAL, "no random bytes");
		snapshot_failed(c, "queue", &re);
		return;
	}
	snprintf(c->new_key, sizeof c->new_key,
	         "%sarchive-%016llx%02x%02x%02x%02x%02x%02x.tar.zst", c->dir,
	         (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec,
	         rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
	struct cp_err e = { 0 };
	if (store_upload_new(s->loop, s->s3, c->new_key, store_upload_part_size(s->max_bytes),
	                     UP_WINDOW, archive_put, c, &c->up, &e)) {
		snapshot_failed(c, "upload", &e);
		return;
	}
	c->work.data = c;
	if (uv_queue_work(s->loop, &c->work, snapshot_work, snapshot_after)) {
		store_upload_drop(c->up);
		c->up = NULL;
		cp_err_set(&e, CP_E_INTERNAL, "cannot queue the snapshot work");
		snapshot_failed(c, "queue", &e);
		return;
	}
	s->packing++;
}

/* -- restore -------------------------------------------------------------- */

static void restore_end(struct conv *c, int rc, const struct cp_err *e, int64_t ms)
{
	struct waiter *w = c->waiters;
	c->waiters = NULL;
	c->restoring = 0;
	if (c->rfd >= 0)
		close(c->rfd);
	c->rfd = -1;
	free(c->rws);
	c->rws = NULL;
	if (c->rpending)
		c->unrestored = rc != 0;
	free(c->rpending);
	c->rpending = NULL;
	if (rc && rc != CP_E_TOO_BIG) /* too big: the caller makes room and asks again */
		c->s->st.restore_failures++;
	while (w) {
		struct waiter *n = w->next;
		if (w->need)
			*w->need = c->need;
		w->done(w->ud, rc, e, ms);
		free(w);
		w = n;
	}
	maybe_closed(c->s);
}

static void restore_fail(struct conv *c, const char *what, const struct cp_err *why)
{
	struct cp_err e = { 0 };
	cp_err_set(&e, CP_E_SANDBOX_UNAVAILABLE, "%s: %s", what, why && why->msg[0] ? why->msg : "failed");
	cp_log(CP_LOG_WARN, "snapshot.restore_failed", "conversation", json_string(c->hash),
	       "reason", json_string(e.msg), NULL);
	restore_end(c, CP_E_SANDBOX_UNAVAILABLE, &e, -1);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) && errno != ENOENT ? -1 : 0;
}

/* What is inside a folder, not the folder itself. */
static int rm_inside(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return ftw->level == 0 ? 0 : rm_one(path, st, flag, ftw);
}

/* Unpacks while the archive downloads (snap_download.h), either into a
 * folder of its own that becomes @rws only once the size and SHA-256 of
 * the whole archive matched its manifest, or (restore_into) into @rws
 * itself, emptied first and again after a failure: nothing runs there
 * while its pending file says it waits. */
static void restore_work(uv_work_t *w)
{
	struct conv *c = w->data;
	cp_err_clear(&c->rerr);
	const void *rest;
	char tmp[4200];
	struct stat st;
	if (c->rpending) {
		snprintf(tmp, sizeof tmp, "%s", c->rws);
		if (lstat(c->rpending, &st) != 0) {
			c->rskip = 1; /* filled by the restore before this one */
		} else if (nftw(tmp, rm_inside, 16, FTW_DEPTH | FTW_PHYS) != 0) {
			c->rrc = cp_err_errno(&c->rerr, CP_E_IO, errno, "emptying the workspace");
		}
		if (c->rskip || c->rrc) {
			while (store_download_read(c->dl, &rest) > 0) /* the download's end */
				;
			return;
		}
	} else {
		snprintf(tmp, sizeof tmp, "%s.restore-XXXXXX", c->rws);
		if (!mkdtemp(tmp)) {
			c->rrc = cp_err_errno(&c->rerr, CP_E_IO, errno, "restore folder");
			while (store_download_read(c->dl, &rest) > 0) /* the download's end */
				;
			return;
		}
	}
	uint64_t files = 0;
	struct store_crypt dec = { .aad = c->m.archive };
	memcpy(dec.iv, c->m.iv, sizeof dec.iv);
	if (c->m.key_id[0])
		dec.key = store_keys_find(&c->s->keys, c->m.key_id);
	c->rrc = store_archive_unpack_from(store_download_read, c->dl, tmp, c->uid, c->gid,
	                                   c->m.sha256, dec.key ? &dec : NULL, c->m.size, &files,
	                                   &c->rerr);
	while (store_download_read(c->dl, &rest) > 0) /* the download's end, whatever came */
		;
	if (!c->rrc && files != c->m.files)
		c->rrc = cp_err_set(&c->rerr, CP_E_PARSE, "snapshot archive holds %llu entries, "
		                    "its manifest says %llu", (unsigned long long)files,
		                    (unsigned long long)c->m.files);
	if (!c->rrc)
		c->rrc = store_archive_fingerprint(tmp, c->rfp, &c->rerr);
	if (c->rpending) {
		if (c->rrc)
			nftw(tmp, rm_inside, 16, FTW_DEPTH | FTW_PHYS);
		return;
	}
	if (!c->rrc && c->uid != (uid_t)-1 && chown(tmp, c->uid, c->gid))
		c->rrc = cp_err_errno(&c->rerr, CP_E_IO, errno, "restore folder owner");
	if (!c->rrc && rename(tmp, c->rws))
		c->rrc = cp_err_errno(&c->rerr, CP_E_IO, errno, "restore folder into place");
	if (c->rrc)
		nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void archive_failed(struct conv *c, int rc, const struct cp_err *err);

/* restore_into: the workspace is whole (or there was nothing to restore),
 * so its pending file goes. 1; or 0 once the restore failed for it: a
 * mark left would have the next spawn empty a workspace in use. */
static int mark_removed(struct conv *c)
{
	if (!c->rpending || unlink(c->rpending) == 0 || errno == ENOENT)
		return 1;
	struct cp_err e = { 0 };
	cp_err_errno(&e, CP_E_IO, errno, "removing the workspace's restore mark");
	restore_fail(c, "restore", &e);
	return 0;
}

static void restore_after(uv_work_t *w, int status)
{
	struct conv *c = w->data;
	struct cp_err ge = { 0 };
	uint64_t got = 0;
	int grc = store_download_result(c->dl, &ge, &got);
	store_download_free(c->dl);
	c->dl = NULL;
	if (grc) { /* the download's failure says why first */
		archive_failed(c, grc, &ge);
		return;
	}
	cp_log(CP_LOG_DEBUG, "snapshot.downloaded", "conversation", json_string(c->hash),
	       "bytes", json_integer((json_int_t)got), NULL);
	if (!status && c->rskip) {
		restore_end(c, 0, NULL, -1);
		return;
	}
	if (status || c->rrc) {
		restore_fail(c, c->rrc == CP_E_IO ? "the conversation's snapshot cannot be written"
		                                 : "the conversation's snapshot does not verify",
		             &c->rerr);
		return;
	}
	if (!mark_removed(c))
		return;
	snprintf(c->cur_archive, sizeof c->cur_archive, "%s", c->m.archive);
	memcpy(c->last_fp, c->rfp, 65);
	c->s->st.restores++;
	int64_t ms = (int64_t)(uv_now(c->s->loop) - c->t0);
	cp_log(CP_LOG_INFO, "snapshot.restored", "conversation", json_string(c->hash),
	       "bytes", json_integer((json_int_t)c->m.size), "ms", json_integer(ms), NULL);
	restore_end(c, 0, NULL, ms);
}

/* The archive's download failed: why, as the store said it. */
static void archive_failed(struct conv *c, int rc, const struct cp_err *err)
{
	if (rc == CP_E_NOT_FOUND) {
		restore_fail(c, "the snapshot's archive is missing from the store", err);
		return;
	}
	if (rc == CP_E_TOO_BIG) {
		struct cp_err e = { 0 };
		cp_err_set(&e, CP_E_PARSE, "archive longer than its manifest says");
		restore_fail(c, "the conversation's snapshot does not verify", &e);
		return;
	}
	restore_fail(c, rc == CP_E_AUTH ? "the snapshot store refused the restore"
	                                : "the snapshot store is unreachable", err);
}

/* restore_into: the manifest's files fit the file system of the folder
 * they go to, with a block more for each (the last one's part, a folder's
 * own); else what they need, in c->need. A folder with entries (a restore
 * cut short by a crash: they are removed first) is not judged: its space
 * is not all free yet, and a restore that does not fit fails on ENOSPC. */
static int fits(struct conv *c)
{
	struct statvfs sv;
	DIR *d = opendir(c->rws);
	int empty = d != NULL;
	for (struct dirent *de; empty && (de = readdir(d));)
		empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
	if (d)
		closedir(d);
	if (!empty || statvfs(c->rws, &sv) != 0)
		return 1;
	uint64_t bs = sv.f_frsize ? sv.f_frsize : 4096;
	c->need.bytes = c->m.bytes + c->m.files * bs;
	c->need.files = c->m.files + 1;
	return c->need.bytes <= (uint64_t)sv.f_bavail * bs && c->need.files <= sv.f_favail;
}

static void manifest_got(void *ud, const struct store_result *r)
{
	struct conv *c = ud;
	if (r->rc == CP_E_NOT_FOUND) { /* no snapshot: the workspace starts empty */
		/* the fingerprint of an empty folder (a hash of nothing): an
		 * execution that leaves it empty uploads nothing */
		snprintf(c->last_fp, sizeof c->last_fp, "%s",
		         "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
		if (mark_removed(c))
			restore_end(c, 0, NULL, -1);
		return;
	}
	if (r->rc) {
		restore_fail(c, r->rc == CP_E_AUTH ? "the snapshot store refused the restore"
		                : r->rc == CP_E_TOO_BIG ? "the snapshot manifest is too long"
		                                        : "the snapshot store is unreachable", r->err);
		return;
	}
	struct cp_err e = { 0 };
	if (store_manifest_parse(r->body, r->body_len, c->dir, &c->m, &e)) {
		restore_fail(c, "the conversation's snapshot manifest is unreadable", &e);
		return;
	}
	if (c->m.key_id[0] && !store_keys_find(&c->s->keys, c->m.key_id)) {
		cp_err_set(&e, CP_E_AUTH, "it was encrypted with key %s, which --snapshot-key-file "
		           "does not hold", c->m.key_id);
		restore_fail(c, "the conversation's snapshot cannot be decrypted", &e);
		return;
	}
	if (c->rpending && !fits(c)) {
		cp_err_set(&e, CP_E_TOO_BIG, "the snapshot (%llu bytes in %llu entries) does not fit "
		           "the workspace", (unsigned long long)c->m.bytes,
		           (unsigned long long)c->m.files);
		restore_end(c, CP_E_TOO_BIG, &e, -1);
		return;
	}
	if (store_download_new(c->s->loop, c->s->s3, c->m.archive, c->m.size, DOWN_CAP, &c->dl,
	                       &e)) {
		restore_fail(c, "restore", &e);
		return;
	}
	c->rwork.data = c;
	if (uv_queue_work(c->s->loop, &c->rwork, restore_work, restore_after)) {
		store_download_free(c->dl); /* ends with its GET */
		c->dl = NULL;
		cp_err_set(&e, CP_E_INTERNAL, "cannot queue the restore");
		restore_fail(c, "restore", &e);
	}
}

static int restore_start(struct store_snaps *s, const char *hash, const char *ws,
                         const char *pending, uid_t uid, gid_t gid,
                         struct store_restore_need *need, store_restore_fn done, void *ud,
                         struct cp_err *err)
{
	struct conv *c = conv_of(s, hash);
	struct waiter *w = malloc(sizeof *w);
	if (!c || !w) {
		free(w);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	w->done = done;
	w->ud = ud;
	w->need = need;
	w->next = c->waiters;
	c->waiters = w;
	if (c->restoring)
		return 0;
	c->rws = strdup(ws);
	c->rpending = pending ? strdup(pending) : NULL;
	if (!c->rws || (pending && !c->rpending)) {
		c->waiters = w->next;
		free(w);
		free(c->rws);
		free(c->rpending);
		c->rws = c->rpending = NULL;
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	c->restoring = 1;
	c->rskip = 0;
	c->rrc = 0;
	memset(&c->need, 0, sizeof c->need);
	c->uid = uid;
	c->gid = gid;
	c->t0 = uv_now(s->loop);
	char key[1200];
	snprintf(key, sizeof key, "%smanifest.json", c->dir);
	if (store_s3_get_mem(s->s3, key, STORE_MANIFEST_MAX, manifest_got, c, err)) {
		c->restoring = 0;
		c->waiters = w->next;
		free(w);
		free(c->rws);
		free(c->rpending);
		c->rws = c->rpending = NULL;
		return err ? err->code : CP_E_INTERNAL;
	}
	return 0;
}

int store_snaps_restore(struct store_snaps *s, const char *hash, const char *ws, uid_t uid,
                        gid_t gid, store_restore_fn done, void *ud, struct cp_err *err)
{
	return restore_start(s, hash, ws, NULL, uid, gid, NULL, done, ud, err);
}

int store_snaps_restore_into(struct store_snaps *s, const char *hash, const char *ws,
                             const char *pending, uid_t uid, gid_t gid,
                             struct store_restore_need *need, store_restore_fn done, void *ud,
                             struct cp_err *err)
{
	return restore_start(s, hash, ws, pending, uid, gid, need, done, ud, err);
}

/* -- delete and expiry ------------------------------------------------------ */

struct deleter {
	struct store_snaps *s;
	char **keys;
	size_t n, cap, next;
	store_deleted_fn done;
	void *ud;
	struct cp_err err;
	int rc;
};

static void deleter_end(struct deleter *d)
{
	struct store_snaps *s = d->s;
	s->deletes_running--;
	if (!d->rc)
		s->st.deletes++;
	if (d->done)
		d->done(d->ud, d->rc, &d->err);
	for (size_t i = 0; i < d->n; i++)
		free(d->keys[i]);
	free(d->keys);
	free(d);
	maybe_closed(s);
}

static void deleter_next(void *ud, const struct store_result *r)
{
	struct deleter *d = ud;
	if (r && r->rc) {
		d->rc = r->rc;
		d->err = *r->err;
		deleter_end(d);
		return;
	}
	/* The manifest last: until the end a restore still finds a whole
	 * snapshot or none. */
	while (d->next < d->n) {
		size_t i = d->next++;
		struct cp_err e = { 0 };
		if (store_s3_delete(d->s->s3, d->keys[i], deleter_next, d, &e) == 0)
			return;
		d->rc = e.code;
		d->err = e;
		break;
	}
	deleter_end(d);
}

static int collect(void *ud, const char *key, uint64_t size, int64_t mtime)
{
	(void)size;
	(void)mtime;
	struct deleter *d = ud;
	void *g = cp_array_grow(d->keys, &d->cap, d->n + 1, sizeof *d->keys, NULL);
	if (!g)
		return 1;
	d->keys = g;
	d->keys[d->n] = strdup(key);
	if (d->keys[d->n])
		d->n++;
	return 0;
}

static int manifest_last(const void *x, const void *y)
{
	const char *a = *(char *const *)x, *b = *(char *const *)y;
	int ma = strstr(a, "/manifest.json") != NULL, mb = strstr(b, "/manifest.json") != NULL;
	return ma != mb ? ma - mb : strcmp(a, b);
}

static void listed(void *ud, const struct store_result *r)
{
	struct deleter *d = ud;
	if (r->rc) {
		d->rc = r->rc;
		d->err = *r->err;
		deleter_end(d);
		return;
	}
	if (d->n)
		qsort(d->keys, d->n, sizeof *d->keys, manifest_last);
	deleter_next(d, NULL);
}

int store_snaps_delete(struct store_snaps *s, const char *hash, store_deleted_fn done,
                       void *ud, struct cp_err *err)
{
	struct conv *c = conv_of(s, hash);
	struct deleter *d = calloc(1, sizeof *d);
	if (!c || !d) {
		free(d);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	/* What runs for it now is dropped when it ends (epoch), nothing waits. */
	c->epoch++;
	c->pending = 0;
	uv_timer_stop(&c->timer);
	c->last_fp[0] = '\0';
	c->cur_archive[0] = '\0';
	d->s = s;
	d->done = done;
	d->ud = ud;
	if (store_s3_list(s->s3, c->dir, collect, listed, d, err)) {
		free(d);
		return err ? err->code : CP_E_INTERNAL;
	}
	s->deletes_running++;
	return 0;
}

static int expired(void *ud, const char *key, uint64_t size, int64_t mtime)
{
	(void)size;
	struct store_snaps *s = ud;
	size_t pl = strlen(s->prefix), kl = strlen(key);
	/* PREFIX/HASH/manifest.json, last written more than the TTL ago */
	if (kl != pl + 32 + 14 || strcmp(key + pl + 32, "/manifest.json") != 0 || mtime < 0 ||
	    (uint64_t)mtime + s->ttl_s > now_s())
		return 0;
	char hash[33];
	memcpy(hash, key + pl, 32);
	hash[32] = '\0';
	struct conv *c = conv_of(s, hash);
	if (!c || c->busy || c->restoring)
		return 0;
	struct cp_err e = { 0 };
	if (store_snaps_delete(s, hash, NULL, NULL, &e) == 0)
		cp_log(CP_LOG_INFO, "snapshot.expired", "conversation", json_string(hash), NULL);
	return 0;
}

static void ttl_listed(void *ud, const struct store_result *r)
{
	struct store_snaps *s = ud;
	s->ttl_listing = 0;
	if (r->rc)
		cp_log(CP_LOG_WARN, "snapshot.expiry_failed", "reason", json_string(r->err->msg), NULL);
	maybe_closed(s);
}

static void on_ttl(uv_timer_t *t)
{
	struct store_snaps *s = t->data;
	if (s->ttl_listing || s->closing)
		return;
	struct cp_err e = { 0 };
	if (store_s3_list(s->s3, s->prefix, expired, ttl_listed, s, &e) == 0)
		s->ttl_listing = 1;
}

/* -- the end ---------------------------------------------------------------- */

int store_snaps_busy(const struct store_snaps *s, const char *hash)
{
	for (const struct conv *c = s->convs; c; c = c->next)
		if (!strcmp(c->hash, hash))
			return c->pending || c->busy || c->restoring;
	return 0;
}

void store_snaps_get_stats(const struct store_snaps *s, struct store_snaps_stats *out)
{
	*out = s->st;
}

static void curl_closed(void *ud)
{
	struct store_snaps *s = ud;
	void (*closed)(void *) = s->closed;
	void *cud = s->closed_ud;
	free(s->spool);
	store_keys_wipe(&s->keys);
	free(s);
	if (closed)
		closed(cud);
}

static void handle_closed(uv_handle_t *h)
{
	struct store_snaps *s = h->data;
	if (h != (uv_handle_t *)&s->ttl_timer) {
		struct conv *c = (struct conv *)((char *)h - offsetof(struct conv, timer));
		free(c->ws);
		free(c);
	}
	if (--s->handles_open == 0)
		cp_curl_close(s->curl, curl_closed, s);
}

static void maybe_closed(struct store_snaps *s)
{
	if (!s->closing || s->freed || s->deletes_running || s->ttl_listing)
		return;
	for (struct conv *c = s->convs; c; c = c->next)
		if (c->busy || c->restoring || c->pending)
			return;
	s->freed = 1;
	store_s3_free(s->s3);
	s->s3 = NULL;
	struct conv *c = s->convs;
	s->convs = NULL;
	while (c) {
		struct conv *n = c->next;
		c->timer.data = s;
		uv_close((uv_handle_t *)&c->timer, handle_closed);
		c = n;
	}
	uv_close((uv_handle_t *)&s->ttl_timer, handle_closed);
}

void store_snaps_close(struct store_snaps *s, void (*closed)(void *ud), void *ud)
{
	if (!s)
		return;
	s->closing = 1;
	s->closed = closed;
	s->closed_ud = ud;
	uv_timer_stop(&s->ttl_timer);
	/* Drain: the snapshots waiting for their debounce are taken now. */
	for (struct conv *c = s->convs; c; c = c->next)
		if (c->pending && !c->busy)
			start_snapshot(c);
	maybe_closed(s);
}
