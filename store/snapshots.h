/*
 * snapshots.h - a conversation's workspace kept in an S3 store: snapshots
 * taken after it changed, restored when its workspace is new, deleted with
 * the conversation, and expired after a time (--snapshot-ttl).
 *
 * Layout under `s3://BUCKET/PREFIX`: each conversation has a folder named
 * by a hash of its key (the caller's, never the raw key), holding
 * `manifest.json` (snap_manifest.h) and the archive it names,
 * `archive-GENERATION.tar.zst`. A snapshot uploads a new archive, then
 * replaces the manifest (one PUT, atomic), then deletes the archive the
 * previous manifest named: a crash or a failure at any point leaves the
 * previous snapshot readable. Two codepods snapshotting one conversation
 * at once: the last manifest written wins, and it names a whole archive.
 *
 * Work off the loop: fingerprinting, packing, verifying and unpacking run
 * on libuv's thread pool (uv_queue_work: a few bounded tasks, never a
 * thread per execution); the transfers run on the loop through the S3
 * client, streamed: the archive's parts upload while it is packed
 * (snap_upload.h) and a restore unpacks while it downloads
 * (snap_download.h), through bounded pipes in memory, no spool file. An
 * execution never waits for a snapshot.
 *
 * Ownership: store_snaps_new() returns a new object freed by
 * store_snaps_close(), which first finishes what is running and takes the
 * snapshots that were waiting (drain), then calls @closed. Strings are
 * copied.
 *
 * Context: the loop thread. Callbacks are never called from inside the
 * call that asked for them.
 */
#ifndef STORE_SNAPSHOTS_H
#define STORE_SNAPSHOTS_H

#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "base/err.h"

struct store_snaps;

#define STORE_SNAPS_DEFAULT_DELAY_S 2u              /* --snapshot-delay */
#define STORE_SNAPS_DEFAULT_MAX_BYTES (4ull << 30)  /* --snapshot-max-bytes */

struct store_snaps_config {
	uv_loop_t *loop;
	const char *url;              /* "s3://BUCKET/PREFIX" (PREFIX may be empty), or
	                                 "gs://BUCKET/PREFIX": GCS, a token from the
	                                 GCP metadata server (store/gcp_token.h) */
	const char *endpoint;         /* --s3-endpoint, or NULL: AWS */
	const char *region;           /* --s3-region, or NULL */
	const char *credentials_file; /* --s3-credentials-file, or NULL: AWS_* */
	const char *spool_dir;        /* a folder of codepod's (unused since
	                                 snapshots stream; kept for callers) */
	unsigned ttl_s;               /* --snapshot-ttl; 0: kept until deleted */
	unsigned debounce_ms;         /* after a change, until the snapshot (0: 2000) */
	uint64_t max_bytes;           /* workspace ceiling (0: 4 GiB) */
	const char *key_file;         /* --snapshot-key-file (snap_keys.h), or NULL */
};

/* Counters for /metrics. */
struct store_snaps_stats {
	unsigned long snapshots, failures, skipped, restores, restore_failures, deletes;
};

int store_snaps_new(const struct store_snaps_config *cfg, struct store_snaps **out,
                    struct cp_err *err);

/** Finish, then free; @closed(@ud) on a later loop turn (may be NULL). */
void store_snaps_close(struct store_snaps *s, void (*closed)(void *ud), void *ud);

/**
 * store_snaps_touch() - an execution in the conversation @hash (32 hex)
 * whose workspace is @ws has ended: within the debounce, its workspace is
 * fingerprinted and, when it changed since the last snapshot, snapshotted.
 * A failure is logged (warn, "snapshot.failed", with @hash and the
 * store's answer), counted, and retried later.
 */
void store_snaps_touch(struct store_snaps *s, const char *hash, const char *ws);

typedef void (*store_taken_fn)(void *ud, int rc, const struct cp_err *err);

/**
 * store_snaps_take() - snapshot @dir, a copy of @hash's workspace the
 * caller made (a sandbox's workspace read out of it), now: no debounce,
 * and no retry of its own. @done once it was written or found unchanged
 * (rc 0), or failed (rc and @err, borrowed for the call; logged and
 * counted as for store_snaps_touch); @dir is the caller's again from then
 * on. Never from inside this call.
 */
int store_snaps_take(struct store_snaps *s, const char *hash, const char *dir,
                     store_taken_fn done, void *ud, struct cp_err *err);

/* @rc 0: restored (@ms, the time it took) or nothing to restore (@ms -1);
 * else CP_E_SANDBOX_UNAVAILABLE with the reason in @err. */
typedef void (*store_restore_fn)(void *ud, int rc, const struct cp_err *err, int64_t ms);

/**
 * store_snaps_restore() - @ws does not exist: make it from the snapshot
 * of @hash, owned by @uid/@gid ((uid_t)-1: ours), or learn there is none
 * (the store's 404: the caller starts it empty). A refusal, an unreachable
 * store, a manifest or archive that does not verify: SANDBOX_UNAVAILABLE
 * naming why. Calls for a restore already running join it.
 */
int store_snaps_restore(struct store_snaps *s, const char *hash, const char *ws, uid_t uid,
                        gid_t gid, store_restore_fn done, void *ud, struct cp_err *err);

/* What a snapshot that did not fit needs of its workspace's file system. */
struct store_restore_need {
	uint64_t bytes, files;
};

/**
 * store_snaps_restore_into() - as store_snaps_restore(), into @ws itself:
 * a folder that exists, made ready for its first process (a workspace
 * image mounted, its owner set), so the files are written once, where they
 * stay. The file @pending says @ws waits for its restore: the caller makes
 * it before the first try; it is removed here once @ws is whole, or when
 * there is no snapshot, and stays after a failure or a crash, so the next
 * try starts over. While it exists nothing in @ws is anyone's: its entries
 * are removed before the archive is unpacked, and again after a failure.
 * Without @pending nothing is touched and @done says "nothing to restore"
 * (@ms -1): the restore that joined late finds @ws filled by the one
 * before. A snapshot whose files do not fit @ws's file system (free bytes,
 * free inodes): CP_E_TOO_BIG before any download, its needs in @need (the
 * caller's, written before @done), not counted as a failure: the caller
 * makes room and asks again.
 */
int store_snaps_restore_into(struct store_snaps *s, const char *hash, const char *ws,
                             const char *pending, uid_t uid, gid_t gid,
                             struct store_restore_need *need, store_restore_fn done, void *ud,
                             struct cp_err *err);

typedef void (*store_deleted_fn)(void *ud, int rc, const struct cp_err *err);

/** store_snaps_delete() - every object of @hash's folder, then @done. */
int store_snaps_delete(struct store_snaps *s, const char *hash, store_deleted_fn done,
                       void *ud, struct cp_err *err);

void store_snaps_get_stats(const struct store_snaps *s, struct store_snaps_stats *out);

/** store_snaps_busy() - 1 while a snapshot of @hash is waiting, being taken
 * or restored: its workspace must stay where and as it is. */
int store_snaps_busy(const struct store_snaps *s, const char *hash);

#endif
