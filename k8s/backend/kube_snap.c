/*
 * kube_snap.c - snapshots of workspaces that live in pods (kube_snap.h):
 * the pod's tar read out through the engine's archive_read into a spool
 * file, checked and unpacked into a staging folder, taken by the store;
 * and back: the store's snapshot restored into a staging folder, packed as
 * a tar and written into the pod through archive_write.
 */
#include "k8s/backend/kube_snap.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/rand.h>

#include "base/log.h"
#include "k8s/backend/kube_int.h"
#include "store/snap_archive.h"

#define DEFAULT_DEBOUNCE_MS 2000u
#define DEFAULT_MAX_BYTES (4ull << 30)
#define DEFAULT_DRAIN_MS 30000u
#define OP_TIMEOUT_MS 600000
#define CHUNK 262144

struct kube_snap_conv {
	struct kube_snaps *ks;
	struct kube_conv *c;
	uv_timer_t timer;       /* the debounce */
	int dirty;              /* an execution ended since the last snapshot began */
	int busy;               /* a snapshot runs (read, unpack, store) */
	int restore_busy;       /* a restore runs (store, pack, write) */
	int restore_wanted;     /* restore once the snapshot running ends */
	unsigned epoch;         /* bumped by a delete: work begun before is dropped */
	unsigned op_epoch;
	json_t *reap_pod;       /* the reaper deletes it once the snapshot ends */
	int reap_drift;         /* for its template (--template-drift-idle), not idleness */
	/* the operation running (one at a time) */
	struct codepod_exec *e;
	int writing;            /* the operation is the restore's archive_write */
	int fd;                 /* the snapshot's spool file */
	int rfd;                /* the restore's tar (its own: a fetch may be held) */
	uint64_t bytes, sent, limit;
	int over;               /* the read passed the ceiling (1) or the spool failed (2) */
	int write_failed;
	char staging[4200];     /* the snapshot's */
	char rstaging[4200];    /* the restore's */
	char pod_uid[64];       /* the pod the restore is for */
	int fetch;              /* the restore's fetch: 0 none, 1 running, 2 done */
	int pod_ready;          /* its pod is there: the write follows the fetch */
	int fetch_rc, fetch_side, nothing; /* the fetch's end (nothing: no snapshot) */
	char fetch_why[CP_ERR_MSG_MAX];
	uint64_t fetched_at, fetch_ms, t_ready;
	uint64_t t0;
	struct store_pack pack;
	int work_rc;
	struct cp_err work_err;
	uv_work_t work;
};

struct kube_snaps {
	uv_loop_t *loop;
	struct kube *k;
	struct codepod *cp;
	struct store_snaps *store;
	char *spool;
	uint64_t max_bytes;
	unsigned debounce_ms;
	unsigned long seq;
	unsigned long failures, restore_failures; /* those of the pod's side */
	unsigned live;          /* operations, work and removals not ended */
	int draining, finishing, bound_hit;
	uv_timer_t drain_timer;
	unsigned handles;
	void (*drained)(void *ud);
	void *drained_ud;
	char *chunk;
};

static void snap_start(struct kube_snap_conv *x);
static void fetch_start(struct kube_snap_conv *x);
static void write_start(struct kube_snap_conv *x);
static void maybe_drained(struct kube_snaps *ks);

/* ---- small helpers ---- */

struct rm_job {
	struct kube_snaps *ks;
	uv_work_t work;
	char path[4200];
};

static int open_up(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)ftw;
	if (flag == FTW_D && (st->st_mode & 0700) != 0700)
		(void)chmod(path, (st->st_mode & 07777) | 0700);
	return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	(void)remove(path);
	return 0;
}

/* A staging folder away, read-only folders in it included. Blocking. */
static void rm_tree(const char *path)
{
	if (!path[0])
		return;
	(void)nftw(path, open_up, 16, FTW_PHYS);
	(void)nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void rm_work(uv_work_t *w)
{
	struct rm_job *j = w->data;
	rm_tree(j->path);
}

static void rm_after(uv_work_t *w, int status)
{
	(void)status;
	struct rm_job *j = w->data;
	struct kube_snaps *ks = j->ks;
	free(j);
	ks->live--;
	maybe_drained(ks);
}

/* The folder goes on the pool; its name is free at once. */
static void rm_later(struct kube_snaps *ks, char *path)
{
	if (!path[0])
		return;
	struct rm_job *j = calloc(1, sizeof *j);
	if (!j) {
		rm_tree(path);
		path[0] = '\0';
		return;
	}
	j->ks = ks;
	snprintf(j->path, sizeof j->path, "%s", path);
	path[0] = '\0';
	j->work.data = j;
	if (uv_queue_work(ks->loop, &j->work, rm_work, rm_after)) {
		rm_tree(j->path);
		free(j);
		return;
	}
	ks->live++;
}

static int spool_fd(struct kube_snaps *ks, struct cp_err *err)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/.kube-snap-XXXXXX", ks->spool);
	int fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return cp_err_errno(err, CP_E_IO, errno, "snapshot spool file");
	unlink(path);
	return fd;
}

static void close_fd(struct kube_snap_conv *x)
{
	if (x->fd >= 0)
		close(x->fd);
	x->fd = -1;
}

static void close_rfd(struct kube_snap_conv *x)
{
	if (x->rfd >= 0)
		close(x->rfd);
	x->rfd = -1;
}

static void on_debounce(uv_timer_t *t)
{
	snap_start(t->data);
}

static struct kube_snap_conv *ksc_of(struct kube_conv *c)
{
	struct kube_snaps *ks = c->k->snaps;
	if (c->snap || !ks || ks->finishing)
		return c->snap;
	struct kube_snap_conv *x = calloc(1, sizeof *x);
	if (!x)
		return NULL;
	x->ks = ks;
	x->c = c;
	x->fd = -1;
	x->rfd = -1;
	uv_timer_init(ks->loop, &x->timer);
	x->timer.data = x;
	ks->handles++;
	c->snap = x;
	return x;
}

/* ---- aliases and own ids ---- */

int kube_snap_is_own_exec(const struct kube *k, const char *exec_id)
{
	return k->snaps && exec_id && strncmp(exec_id, k->own_prefix, strlen(k->own_prefix)) == 0;
}

int kube_snap_is_alias(const struct kube *k, const char *conversation)
{
	return k->own_prefix[0] && conversation &&
	       strncmp(conversation, k->own_prefix, strlen(k->own_prefix)) == 0;
}

int kube_snap_alias_parse(const struct kube *k, const char *key, char label[41], char *name,
                          size_t name_cap)
{
	if (!kube_snap_is_alias(k, key))
		return -1;
	const char *p = key + strlen(k->own_prefix);
	if (strlen(p) < 42 || p[40] != '/' || strlen(p + 41) >= name_cap)
		return -1;
	memcpy(label, p, 40);
	label[40] = '\0';
	snprintf(name, name_cap, "%s", p + 41);
	return 0;
}

/* ---- the engine's side: one file operation ---- */

static void h_tool_call(void *ud, struct codepod_exec *e, const char *call_id, const char *tool,
                        const json_t *input)
{
	(void)ud;
	(void)tool;
	(void)input;
	codepod_tool_error(e, call_id, "no tools here", NULL);
}

static void h_cancel_call(void *ud, struct codepod_exec *e, const char *call_id)
{
	(void)ud;
	(void)e;
	(void)call_id;
}

static void h_file_data(void *ud, struct codepod_exec *e, const char *buf, size_t len)
{
	struct kube_snap_conv *x = ud;
	if (x->over)
		return;
	x->bytes += len;
	if (x->bytes > x->limit) {
		x->over = 1;
		codepod_stop(e);
		return;
	}
	for (size_t off = 0; off < len;) {
		ssize_t k = write(x->fd, buf + off, len - off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			x->over = 2;
			codepod_stop(e);
			return;
		}
		off += (size_t)k;
	}
	codepod_file_ack(e, NULL);
}

/* The restore's next chunk of tar, from the spool file. */
static void h_file_ready(void *ud, struct codepod_exec *e)
{
	struct kube_snap_conv *x = ud;
	struct kube_snaps *ks = x->ks;
	if (x->write_failed)
		return;
	uint64_t left = x->pack.size - x->sent;
	size_t n = left < CHUNK ? (size_t)left : CHUNK;
	size_t got = 0;
	while (got < n) {
		ssize_t k = pread(x->rfd, ks->chunk + got, n - got, (off_t)(x->sent + got));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	struct cp_err err;
	/* Moved on first: the engine may ask for the next one from inside
	 * codepod_file_bytes (a window of chunks in flight). */
	x->sent += n;
	if (got != n || codepod_file_bytes(e, ks->chunk, got, x->sent >= x->pack.size, &err)) {
		x->write_failed = 1;
		codepod_stop(e);
	}
}

static const char *outcome_error(const json_t *o)
{
	const json_t *er = json_object_get(o, "error");
	const char *m = json_string_value(json_object_get(er, "message"));
	return m ? m : "failed";
}

static void read_done(struct kube_snap_conv *x, const json_t *outcome);
static void write_done(struct kube_snap_conv *x, const json_t *outcome);

static void h_done(void *ud, struct codepod_exec *e, const json_t *outcome)
{
	(void)e;
	struct kube_snap_conv *x = ud;
	x->e = NULL;
	x->ks->live--;
	if (x->writing)
		write_done(x, outcome);
	else
		read_done(x, outcome);
	maybe_drained(x->ks);
}

static const struct codepod_host snap_host = {
	.tool_call = h_tool_call, .cancel_call = h_cancel_call, .done = h_done,
	.file_data = h_file_data, .file_ready = h_file_ready,
};

/* archive_read or archive_write in the conversation's pod, named by the
 * alias (this process's prefix, the label, the pod). */
static int submit(struct kube_snap_conv *x, const char *type, struct cp_err *err)
{
	struct kube_snaps *ks = x->ks;
	struct kube_conv *c = x->c;
	if (!ks->cp)
		return cp_err_set(err, CP_E_STATE, "no engine yet");
	char alias[200], id[96];
	snprintf(alias, sizeof alias, "%s%s/%s", ks->k->own_prefix, c->label, c->pod ? c->pod : c->name);
	snprintf(id, sizeof id, "%s%s-%lu", ks->k->own_prefix, type, ++ks->seq);
	json_t *req = json_pack("{s:s,s:s,s:s,s:{s:I,s:I}}", "type", type, "id", id,
	                        "conversation", alias, "policy", "timeoutMs",
	                        (json_int_t)OP_TIMEOUT_MS, "maxFileBytes",
	                        (json_int_t)ks->max_bytes);
	if (!req)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	x->writing = strcmp(type, "archive_write") == 0;
	int rc = codepod_submit(ks->cp, req, &snap_host, x, &x->e, err);
	if (rc == CP_E_INVALID_REQUEST) { /* a deployment's ceiling below ours */
		json_object_del(req, "policy");
		rc = codepod_submit(ks->cp, req, &snap_host, x, &x->e, err);
	}
	json_decref(req);
	if (!rc)
		ks->live++;
	return rc;
}

/* ---- snapshot: the pod's tar -> staging -> store ---- */

static void snap_end(struct kube_snap_conv *x)
{
	struct kube_snaps *ks = x->ks;
	close_fd(x);
	rm_later(ks, x->staging);
	x->busy = 0;
	if (x->reap_pod) {
		json_t *pod = x->reap_pod;
		x->reap_pod = NULL;
		if (!ks->k->closing)
			kube_pool_reap_idle(ks->k, pod, x->reap_drift);
		json_decref(pod);
	}
	if (x->restore_wanted) {
		x->restore_wanted = 0;
		if (x->fetch == 2)
			write_start(x);
		else
			fetch_start(x);
	} else if (x->dirty && !ks->finishing) {
		uv_timer_start(&x->timer, on_debounce, ks->draining ? 0 : ks->debounce_ms, 0);
	}
	maybe_drained(ks);
}

static void snap_fail(struct kube_snap_conv *x, const char *step, const char *why)
{
	struct kube_snaps *ks = x->ks;
	ks->failures++;
	cp_log(CP_LOG_WARN, "snapshot.failed", "conversation", json_string(x->c->snap_hash),
	       "step", json_string(step), "reason", json_string(why), "pod",
	       json_string(x->c->pod ? x->c->pod : x->c->name), NULL);
	snap_end(x);
}

static void taken(void *ud, int rc, const struct cp_err *err)
{
	struct kube_snap_conv *x = ud;
	x->ks->live--;
	(void)rc;
	(void)err; /* a failure was logged and counted by the store */
	if (!rc)
		cp_log(CP_LOG_DEBUG, "snapshot.pod_done", "conversation", json_string(x->c->snap_hash),
		       "bytes", json_integer((json_int_t)x->bytes),
		       "ms", json_integer((json_int_t)(uv_now(x->ks->loop) - x->t0)), NULL);
	snap_end(x);
}

static void unpack_work(uv_work_t *w)
{
	struct kube_snap_conv *x = w->data;
	cp_err_clear(&x->work_err);
	char tmp[4200];
	snprintf(tmp, sizeof tmp, "%s/.kube-staging-XXXXXX", x->ks->spool);
	if (!mkdtemp(tmp)) {
		x->work_rc = cp_err_errno(&x->work_err, CP_E_IO, errno, "staging folder");
		return;
	}
	snprintf(x->staging, sizeof x->staging, "%s", tmp);
	uint64_t files = 0;
	/* The pod is not trusted: the restore's checks (nothing outside the
	 * folder, no devices, no links out). */
	x->work_rc = store_archive_unpack(x->fd, x->staging, (uid_t)-1, (gid_t)-1, NULL, NULL,
	                                  x->bytes, &files, &x->work_err);
}

static void unpack_after(uv_work_t *w, int status)
{
	struct kube_snap_conv *x = w->data;
	struct kube_snaps *ks = x->ks;
	ks->live--;
	close_fd(x);
	if (status || x->work_rc) {
		snap_fail(x, "unpack", x->work_err.msg[0] ? x->work_err.msg : "the pod's archive was refused");
		return;
	}
	if (x->op_epoch != x->epoch) { /* deleted meanwhile */
		snap_end(x);
		return;
	}
	struct cp_err err = { 0 };
	if (store_snaps_take(ks->store, x->c->snap_hash, x->staging, taken, x, &err)) {
		snap_fail(x, "store", err.msg);
		return;
	}
	ks->live++;
}

static void read_done(struct kube_snap_conv *x, const json_t *outcome)
{
	struct kube_snaps *ks = x->ks;
	const char *status = json_string_value(json_object_get(outcome, "status"));
	char why[300];
	if (x->over == 1) {
		snprintf(why, sizeof why, "the workspace is over the snapshot ceiling of %llu bytes",
		         (unsigned long long)ks->max_bytes);
		snap_fail(x, "read", why);
		return;
	}
	if (x->over == 2) {
		snap_fail(x, "spool", "cannot write the spool file");
		return;
	}
	if (!status || strcmp(status, "ok") != 0) {
		snprintf(why, sizeof why, "reading the pod's workspace: %s", outcome_error(outcome));
		snap_fail(x, "read", why);
		return;
	}
	if (x->op_epoch != x->epoch) {
		snap_end(x);
		return;
	}
	x->work.data = x;
	if (uv_queue_work(ks->loop, &x->work, unpack_work, unpack_after)) {
		snap_fail(x, "unpack", "cannot queue the work");
		return;
	}
	ks->live++;
}

static void snap_start(struct kube_snap_conv *x)
{
	struct kube_snaps *ks = x->ks;
	struct kube_conv *c = x->c;
	if (x->busy || x->restore_busy || ks->finishing)
		return; /* snap_end / restore_end look at dirty again */
	uv_timer_stop(&x->timer);
	if (!x->dirty && !x->reap_pod)
		return;
	x->dirty = 0;
	x->busy = 1;
	x->op_epoch = x->epoch;
	x->bytes = 0;
	x->over = 0;
	x->limit = ks->max_bytes + ks->max_bytes / 8 + (64u << 20); /* tar headers */
	x->t0 = uv_now(ks->loop);
	if (c->state != KUBE_CONV_READY || c->restoring || c->deleting || !c->snap_hash[0]) {
		/* No pod to read here (gone, or being restored or deleted). */
		cp_log(CP_LOG_DEBUG, "snapshot.no_pod", "conversation", json_string(c->snap_hash), NULL);
		snap_end(x);
		return;
	}
	struct cp_err err = { 0 };
	x->fd = spool_fd(ks, &err);
	if (x->fd < 0) {
		snap_fail(x, "spool", err.msg);
		return;
	}
	if (submit(x, "archive_read", &err))
		snap_fail(x, "read", err.msg);
}

/* ---- restore: store -> staging -> tar (fetch), then the pod (write) ----
 *
 * The fetch may begin as the pod is asked for (kube_snap_prefetch), so the
 * download and the packing overlap the pod's start; the write waits for
 * the pod (kube_snap_restore). A fetch held longer than FETCH_FRESH_MS
 * without its pod is done again. */

#define FETCH_FRESH_MS 30000


static void drop_fetched(struct kube_snap_conv *x)
{
	if (x->fetch == 2) {
		close_rfd(x);
		x->fetch = 0;
	}
}

static void restore_end(struct kube_snap_conv *x, int rc, const char *why, int64_t ms)
{
	struct kube_snaps *ks = x->ks;
	close_rfd(x);
	rm_later(ks, x->rstaging);
	x->restore_busy = 0;
	x->fetch = 0;
	x->pod_ready = 0;
	char uid[64];
	snprintf(uid, sizeof uid, "%s", x->pod_uid);
	if (!ks->k->closing)
		kube_restored(x->c, uid, rc, why, ms);
	if (x->dirty && !ks->finishing)
		uv_timer_start(&x->timer, on_debounce, ks->draining ? 0 : ks->debounce_ms, 0);
	maybe_drained(ks);
}

/* A failure of the pod's side (the store's own are logged by the store). */
static void restore_fail(struct kube_snap_conv *x, const char *what, const char *why)
{
	char msg[CP_ERR_MSG_MAX];
	snprintf(msg, sizeof msg, "%s: %s", what, why);
	x->ks->restore_failures++;
	cp_log(CP_LOG_WARN, "snapshot.restore_failed", "conversation", json_string(x->c->snap_hash),
	       "reason", json_string(msg), NULL);
	restore_end(x, CP_E_SANDBOX_UNAVAILABLE, msg, -1);
}

static void write_done(struct kube_snap_conv *x, const json_t *outcome)
{
	const char *status = json_string_value(json_object_get(outcome, "status"));
	if (!status || strcmp(status, "ok") != 0 || x->write_failed) {
		restore_fail(x, "writing the restored workspace into the pod",
		             x->write_failed ? "the spool file could not be read" : outcome_error(outcome));
		return;
	}
	int64_t ms = (int64_t)(uv_now(x->ks->loop) - x->t_ready);
	cp_log(CP_LOG_INFO, "snapshot.pod_restored", "conversation", json_string(x->c->snap_hash),
	       "pod", json_string(x->c->pod ? x->c->pod : ""), "bytes",
	       json_integer((json_int_t)x->pack.size), "ms", json_integer(ms),
	       "fetchMs", json_integer((json_int_t)x->fetch_ms), NULL);
	restore_end(x, 0, NULL, ms);
}

/* The pod is ready and the fetch is done: into the pod. */
static void write_start(struct kube_snap_conv *x)
{
	x->pod_ready = 0;
	if (x->fetch_rc) {
		x->fetch = 0;
		if (x->fetch_side) /* ours: counted and logged here */
			restore_fail(x, "packing the restored workspace", x->fetch_why);
		else /* the store's: it logged and counted them */
			restore_end(x, x->fetch_rc, x->fetch_why, -1);
		return;
	}
	if (x->nothing) { /* no snapshot: the pod starts empty */
		restore_end(x, 0, NULL, -1);
		return;
	}
	struct cp_err err = { 0 };
	x->restore_busy = 1;
	x->sent = 0;
	x->write_failed = 0;
	if (submit(x, "archive_write", &err))
		restore_fail(x, "writing the restored workspace into the pod", err.msg);
}

static void fetch_done(struct kube_snap_conv *x, int rc, int side, const char *why)
{
	struct kube_snaps *ks = x->ks;
	x->restore_busy = 0;
	x->fetch = 2;
	x->fetch_rc = rc;
	x->fetch_side = side;
	snprintf(x->fetch_why, sizeof x->fetch_why, "%s", why ? why : "");
	x->fetched_at = uv_now(ks->loop);
	x->fetch_ms = x->fetched_at - x->t0;
	if (x->op_epoch != x->epoch) { /* deleted meanwhile */
		drop_fetched(x);
		if (x->pod_ready)
			restore_end(x, CP_E_SANDBOX_UNAVAILABLE, "the conversation was deleted", -1);
		maybe_drained(ks);
		return;
	}
	if (x->pod_ready && !ks->finishing)
		write_start(x);
	else
		maybe_drained(ks);
}

static void pack_work(uv_work_t *w)
{
	struct kube_snap_conv *x = w->data;
	cp_err_clear(&x->work_err);
	x->work_rc = store_archive_pack_tar(x->rstaging, x->rfd, UINT64_MAX, &x->pack, &x->work_err);
	rm_tree(x->rstaging);
	x->rstaging[0] = '\0';
}

static void pack_after(uv_work_t *w, int status)
{
	struct kube_snap_conv *x = w->data;
	x->ks->live--;
	if (status || x->work_rc) {
		close_rfd(x);
		fetch_done(x, CP_E_SANDBOX_UNAVAILABLE, 1, x->work_err.msg[0] ? x->work_err.msg : "failed");
		return;
	}
	fetch_done(x, 0, 0, NULL);
}

static void store_restored(void *ud, int rc, const struct cp_err *err, int64_t ms)
{
	struct kube_snap_conv *x = ud;
	struct kube_snaps *ks = x->ks;
	ks->live--;
	if (rc) { /* logged and counted by the store; the message names why */
		fetch_done(x, CP_E_SANDBOX_UNAVAILABLE, 0, err && err->msg[0] ? err->msg : "restore failed");
		return;
	}
	if (ms < 0) { /* no snapshot */
		x->rstaging[0] = '\0';
		x->nothing = 1;
		fetch_done(x, 0, 0, NULL);
		return;
	}
	struct cp_err e = { 0 };
	x->rfd = spool_fd(ks, &e);
	if (x->rfd < 0) {
		rm_later(ks, x->rstaging);
		fetch_done(x, CP_E_SANDBOX_UNAVAILABLE, 1, e.msg);
		return;
	}
	x->work.data = x;
	if (uv_queue_work(ks->loop, &x->work, pack_work, pack_after)) {
		close_rfd(x);
		rm_later(ks, x->rstaging);
		fetch_done(x, CP_E_SANDBOX_UNAVAILABLE, 1, "cannot queue the work");
		return;
	}
	ks->live++;
}

static void fetch_start(struct kube_snap_conv *x)
{
	struct kube_snaps *ks = x->ks;
	x->restore_busy = 1;
	x->fetch = 1;
	x->nothing = 0;
	x->fetch_rc = 0;
	x->t0 = uv_now(ks->loop);
	x->op_epoch = x->epoch;
	memset(&x->pack, 0, sizeof x->pack);
	unsigned char r[6];
	RAND_bytes(r, sizeof r);
	snprintf(x->rstaging, sizeof x->rstaging, "%s/.kube-restore-%02x%02x%02x%02x%02x%02x",
	         ks->spool, r[0], r[1], r[2], r[3], r[4], r[5]);
	struct cp_err err = { 0 };
	if (store_snaps_restore(ks->store, x->c->snap_hash, x->rstaging, (uid_t)-1, (gid_t)-1,
	                        store_restored, x, &err)) {
		x->rstaging[0] = '\0';
		fetch_done(x, CP_E_SANDBOX_UNAVAILABLE, 1, err.msg);
		return;
	}
	ks->live++;
}

void kube_snap_prefetch(struct kube_conv *c)
{
	struct kube_snaps *ks = c->k->snaps;
	struct kube_snap_conv *x = ks && ks->cp && c->snap_hash[0] && !ks->draining ? ksc_of(c) : NULL;
	if (!x || x->busy || x->restore_busy || x->fetch == 1)
		return;
	drop_fetched(x);
	x->pod_ready = 0;
	fetch_start(x);
}

void kube_snap_restore(struct kube_conv *c)
{
	struct kube_snaps *ks = c->k->snaps;
	struct kube_snap_conv *x = ks && c->snap_hash[0] ? ksc_of(c) : NULL;
	if (!x || !ks->cp) {
		kube_restored(c, c->restore_uid, CP_E_SANDBOX_UNAVAILABLE,
		              "the snapshot could not be restored (no snapshot store here)", -1);
		return;
	}
	snprintf(x->pod_uid, sizeof x->pod_uid, "%s", c->restore_uid);
	x->pod_ready = 1;
	x->t_ready = uv_now(ks->loop);
	if (x->fetch == 2 && x->t_ready - x->fetched_at > FETCH_FRESH_MS)
		drop_fetched(x); /* the snapshot may have moved on meanwhile */
	if (x->fetch == 1)
		return; /* fetch_done writes */
	if (x->busy) { /* the snapshot of the pod before ends first */
		x->restore_wanted = 1;
		return;
	}
	if (x->fetch == 2)
		write_start(x);
	else
		fetch_start(x);
}

void kube_snap_not_ours(struct kube_conv *c)
{
	if (c->snap && !c->snap->pod_ready)
		drop_fetched(c->snap);
}

/* ---- the backend's events ---- */

void kube_snap_changed(struct kube_conv *c)
{
	struct kube_snaps *ks = c->k->snaps;
	if (!ks || ks->finishing || !c->snap_hash[0])
		return;
	struct kube_snap_conv *x = ksc_of(c);
	if (!x)
		return;
	x->dirty = 1;
	/* Within the debounce of the first change: a stream of executions
	 * does not put the snapshot off. */
	if (!x->busy && !x->restore_busy && !uv_is_active((uv_handle_t *)&x->timer))
		uv_timer_start(&x->timer, on_debounce, ks->draining ? 0 : ks->debounce_ms, 0);
}

int kube_snap_before_reap(struct kube *k, const json_t *pod, int drift)
{
	struct kube_snaps *ks = k->snaps;
	if (!ks || !ks->cp || ks->draining || ks->finishing)
		return 0;
	const char *hash = kube_pod_annotation(pod, KUBE_ANNOT_SNAPSHOT);
	const json_t *meta = json_object_get(pod, "metadata");
	const char *name = json_string_value(json_object_get(meta, "name"));
	const char *label = json_string_value(json_object_get(json_object_get(meta, "labels"),
	                                                      K8S_LABEL_CONVERSATION));
	if (!hash || strlen(hash) != 32 || strspn(hash, "0123456789abcdef") != 32 || !name ||
	    !label || strlen(label) != 40)
		return 0; /* made without snapshots: nothing to keep */
	char alias[200];
	snprintf(alias, sizeof alias, "%s%s/%s", k->own_prefix, label, name);
	struct cp_err err;
	struct kube_conv *c = kube_conv_get(k, alias, &err);
	if (!c)
		return 0;
	if (!c->snap_hash[0])
		snprintf(c->snap_hash, sizeof c->snap_hash, "%s", hash);
	struct kube_snap_conv *x = ksc_of(c);
	if (!x)
		return 0;
	if (x->reap_pod)
		return 1; /* on it already */
	if (c->state == KUBE_CONV_ACQUIRING || c->restoring || c->deleting)
		return 1; /* wanted here: not idle after all; the next pass sees */
	if (c->state == KUBE_CONV_READY && c->pod && strcmp(c->pod, name) != 0)
		return 0; /* not the pod its workspace is in here */
	if (c->state == KUBE_CONV_IDLE && kube_conv_adopt(c, name))
		return 0;
	x->reap_pod = json_deep_copy(pod);
	if (!x->reap_pod)
		return 0;
	x->reap_drift = drift;
	cp_log(CP_LOG_INFO, "snapshot.before_reap", "conversation", json_string(c->snap_hash),
	       "pod", json_string(name), "why", json_string(drift ? "drift" : "idle"), NULL);
	if (!x->busy && !x->restore_busy) {
		x->dirty = 1;
		snap_start(x);
	}
	/* else: the snapshot running ends it (it began after the last use) */
	return 1;
}

int kube_snap_forget(struct kube_conv *c, store_deleted_fn done, void *ud, struct cp_err *err)
{
	struct kube_snaps *ks = c->k->snaps;
	struct kube_snap_conv *x = ksc_of(c);
	if (!ks || !x || !c->snap_hash[0])
		return cp_err_set(err, CP_E_STATE, "no snapshots here");
	x->epoch++;
	x->dirty = 0;
	x->restore_wanted = 0;
	if (!x->pod_ready)
		drop_fetched(x);
	uv_timer_stop(&x->timer);
	if (x->e && !x->writing)
		codepod_stop(x->e);
	return store_snaps_delete(ks->store, c->snap_hash, done, ud, err);
}

void kube_snap_stats(const struct kube *k, struct store_snaps_stats *out)
{
	memset(out, 0, sizeof *out);
	const struct kube_snaps *ks = k->snaps;
	if (!ks)
		return;
	store_snaps_get_stats(ks->store, out);
	out->failures += ks->failures;
	out->restore_failures += ks->restore_failures;
}

/* ---- life ---- */

int kube_snaps_new(struct codepod_backend *b, const struct kube_snaps_config *cfg,
                   struct kube_snaps **out, struct cp_err *err)
{
	struct kube *k = (struct kube *)b;
	struct kube_snaps *ks = calloc(1, sizeof *ks);
	unsigned char r[12];
	if (!ks || !(ks->spool = strdup(cfg->spool_dir)) || !(ks->chunk = malloc(CHUNK)) ||
	    RAND_bytes(r, sizeof r) != 1) {
		if (ks) {
			free(ks->spool);
			free(ks->chunk);
			free(ks);
		}
		store_snaps_close(cfg->store, NULL, NULL);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	ks->loop = cfg->loop;
	ks->k = k;
	ks->store = cfg->store;
	ks->max_bytes = cfg->max_bytes ? cfg->max_bytes : DEFAULT_MAX_BYTES;
	ks->debounce_ms = cfg->debounce_ms ? cfg->debounce_ms : DEFAULT_DEBOUNCE_MS;
	uv_timer_init(ks->loop, &ks->drain_timer);
	ks->drain_timer.data = ks;
	ks->handles = 1;
	snprintf(k->own_prefix, sizeof k->own_prefix,
	         "codepod-own-%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x:", r[0], r[1], r[2],
	         r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11]);
	mkdir(ks->spool, 0700);
	k->snaps = ks;
	*out = ks;
	return 0;
}

void kube_snaps_set_engine(struct kube_snaps *ks, struct codepod *cp)
{
	ks->cp = cp;
}

static void store_closed(void *ud)
{
	struct kube_snaps *ks = ud;
	void (*done)(void *) = ks->drained;
	void *dud = ks->drained_ud;
	free(ks->spool);
	free(ks->chunk);
	free(ks);
	if (done)
		done(dud);
}

static void handle_closed(uv_handle_t *h)
{
	struct kube_snaps *ks = h->data;
	if (h != (uv_handle_t *)&ks->drain_timer)
		free((char *)h - offsetof(struct kube_snap_conv, timer));
	if (--ks->handles == 0)
		store_snaps_close(ks->store, store_closed, ks);
}

static int all_quiet(const struct kube_snaps *ks)
{
	if (ks->live)
		return 0;
	/* Executions still ending may leave a workspace to snapshot. */
	if (ks->k->procs && !ks->bound_hit)
		return 0;
	for (const struct kube_conv *c = ks->k->convs; c; c = c->next)
		if (c->snap && (c->snap->busy || c->snap->restore_busy ||
		                (c->snap->dirty && !ks->bound_hit)))
			return 0; /* (a dirty one's timer is due now) */
	return 1;
}

static void maybe_drained(struct kube_snaps *ks)
{
	if (!ks->draining || ks->finishing || !all_quiet(ks))
		return;
	ks->finishing = 1;
	uv_timer_stop(&ks->drain_timer);
	ks->k->snaps = NULL;
	for (struct kube_conv *c = ks->k->convs; c; c = c->next) {
		struct kube_snap_conv *x = c->snap;
		if (!x)
			continue;
		c->snap = NULL;
		drop_fetched(x);
		json_decref(x->reap_pod);
		x->timer.data = ks;
		uv_close((uv_handle_t *)&x->timer, handle_closed);
	}
	uv_close((uv_handle_t *)&ks->drain_timer, handle_closed);
}

/* The bound: what still reads or writes a pod is stopped (its end comes
 * through done() as ever); uploads running finish in the store's close. */
static void on_drain_bound(uv_timer_t *t)
{
	struct kube_snaps *ks = t->data;
	cp_log(CP_LOG_WARN, "snapshot.drain_bound", "message",
	       json_string("snapshots at drain took too long: those still reading a pod are "
	                   "given up"), NULL);
	for (struct kube_conv *c = ks->k->convs; c; c = c->next)
		if (c->snap && c->snap->e)
			codepod_stop(c->snap->e);
	for (struct kube_conv *c = ks->k->convs; c; c = c->next)
		if (c->snap)
			c->snap->dirty = 0;
	ks->bound_hit = 1;
	maybe_drained(ks);
}

void kube_snap_poke(struct kube *k)
{
	if (k->snaps)
		maybe_drained(k->snaps);
}

void kube_snaps_drain(struct kube_snaps *ks, unsigned bound_ms, void (*done)(void *ud), void *ud)
{
	ks->draining = 1;
	ks->drained = done;
	ks->drained_ud = ud;
	uv_timer_start(&ks->drain_timer, on_drain_bound, bound_ms ? bound_ms : DEFAULT_DRAIN_MS, 0);
	for (struct kube_conv *c = ks->k->convs; c; c = c->next) {
		struct kube_snap_conv *x = c->snap;
		if (x && x->dirty && !x->busy && !x->restore_busy)
			snap_start(x);
	}
	/* @done comes through the handles' and the store's closing: from the
	 * loop, never inside this call. */
	maybe_drained(ks);
}
