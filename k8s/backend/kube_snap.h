/*
 * kube_snap.h - snapshots of a conversation's workspace on the Kubernetes
 * backend (--snapshot-url): the workspace lives in the pod's emptyDir, so
 * its bytes travel over the exec stream as the runner's archive_read and
 * archive_write file operations (runner/fileop.h), submitted to the engine
 * like any execution, and are kept in the store by store/snapshots.h, as
 * on the local backend. The sandbox never holds the store's credentials.
 *
 *  - Restore: a pod this replica created or claimed for a conversation
 *    carries the annotation KUBE_ANNOT_RESTORE until its workspace was
 *    restored; the conversation's executions wait meanwhile (other
 *    replicas wait for the annotation to go). The snapshot is restored and
 *    verified into a staging folder (store_snaps_restore: manifest, SHA-256,
 *    hostile entries), packed as a plain tar and written into the pod.
 *    No snapshot (404): the pod starts empty. Anything else:
 *    SANDBOX_UNAVAILABLE naming why, and the pod is deleted (a later
 *    acquisition restores into a fresh one), never an empty workspace.
 *  - Snapshot: after an execution in the pod ended (debounced), before the
 *    reaper deletes an idle pod (the delete follows the snapshot, whether
 *    it succeeded or failed with a warning and a count), and at drain
 *    (bounded). The pod's tar is read into a spool file, unpacked into a
 *    staging folder with the restore's checks (a hostile sandbox cannot
 *    write outside it), and taken by store_snaps_take(): an unchanged
 *    workspace is not uploaded.
 *  - Delete: every pod of the conversation deleted and waited out, every
 *    snapshot deleted (kube_backend.c, delete_conversation).
 *
 * The file operations name the conversation by an alias only this process
 * knows (a random prefix, the pod's label and name): the reaper can so read
 * a pod whose conversation key it never saw; their ids carry the same
 * prefix, which is how the backend tells them from a client's (they skip
 * the restore's wait, never start an acquisition, never count as use).
 *
 * Context: the loop thread. Ownership: the coordinator owns the store
 * (closed by kube_snaps_drain); the engine is borrowed and must stay until
 * the drain's @done.
 */
#ifndef K8S_KUBE_SNAP_H
#define K8S_KUBE_SNAP_H

#include <stdint.h>
#include <uv.h>

#include "base/err.h"
#include "runner/codepod.h"
#include "store/snapshots.h"

struct kube_snaps;
struct kube_conv;
struct kube;

struct kube_snaps_config {
	uv_loop_t *loop;
	struct store_snaps *store; /* handed over */
	const char *spool_dir;     /* staging folders, spool files */
	uint64_t max_bytes;        /* workspace ceiling (0: 4 GiB) */
	unsigned debounce_ms;      /* after an execution, until the snapshot (0: 2000) */
};

/* A new coordinator for the Kubernetes backend @b (kube_backend_new's),
 * which it attaches itself to. On failure the store is closed. */
int kube_snaps_new(struct codepod_backend *b, const struct kube_snaps_config *cfg,
                   struct kube_snaps **out, struct cp_err *err);

/* The engine its file operations go through (before any execution). */
void kube_snaps_set_engine(struct kube_snaps *ks, struct codepod *cp);

/* Drain: the snapshots due are taken now, for at most @bound_ms in all
 * (0: 30 s), then the store is closed, the coordinator freed and @done
 * called (from the loop). Call before the backend's destroy. */
void kube_snaps_drain(struct kube_snaps *ks, unsigned bound_ms, void (*done)(void *ud), void *ud);

/* ---- for the backend (kube_*.c) ---- */

/* 1: @exec_id / @conversation are this coordinator's own. */
int kube_snap_is_own_exec(const struct kube *k, const char *exec_id);
int kube_snap_is_alias(const struct kube *k, const char *conversation);
/* An alias @key: its label and pod name (0), or -1: not an alias. */
int kube_snap_alias_parse(const struct kube *k, const char *key, char label[41],
                          char *name, size_t name_cap);

/* A pod is being made or claimed for the conversation: the snapshot's
 * download and packing may begin (kube_snap_restore writes it). */
void kube_snap_prefetch(struct kube_conv *c);
/* The conversation's new pod needs its workspace: kube_restored() follows. */
void kube_snap_restore(struct kube_conv *c);
/* Its pod turned out to be another's (found, not made): a fetch is dropped. */
void kube_snap_not_ours(struct kube_conv *c);
/* An execution ended in the conversation's pod. */
void kube_snap_changed(struct kube_conv *c);
/* The reaper wants @pod (borrowed) gone: 1 when a snapshot is taken first
 * (the coordinator deletes it then, kube_pool_reap_idle), 0: delete now. */
int kube_snap_before_reap(struct kube *k, const json_t *pod, int drift);
/* Deleting the conversation: drop what waits for it; @done when its
 * snapshots are deleted from the store. */
int kube_snap_forget(struct kube_conv *c, store_deleted_fn done, void *ud, struct cp_err *err);
/* A process handle was freed: a drain may be over. */
void kube_snap_poke(struct kube *k);
/* The counters (codepod_snapshot_* of /metrics). */
void kube_snap_stats(const struct kube *k, struct store_snaps_stats *out);

#endif
