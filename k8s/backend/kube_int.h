/*
 * kube_int.h - the Kubernetes backend's private state, shared by
 * kube_backend.c (process handles and exec), kube_acquire.c (conversation
 * -> ready pod) and kube_pool.c (warm pool and reaper).
 *
 * Ownership: struct kube owns its conversations; a conversation owns its
 * strings and the REST call or watch it has in progress. A process handle
 * (struct codepod_proc) is owned by the backend and freed after its exited()
 * report went out and its killer exec (if any) ended.
 */
#ifndef K8S_KUBE_INT_H
#define K8S_KUBE_INT_H

#include <stdint.h>
#include <time.h>

#include "base/buf.h"
#include "k8s/api/creds.h"
#include "k8s/api/pod_exec.h"
#include "k8s/backend/kube_backend.h"
#include "k8s/backend/kube_super.h"
#include "k8s/api/pod.h"
#include "k8s/api/rest.h"
#include "k8s/api/watch.h"

/* Snapshots (kube_snap.h): the pod's snapshot folder (a hash of the
 * conversation key, as the local backend's), and, while its workspace has
 * not been restored yet, when the replica that made or claimed it began. */
#define KUBE_ANNOT_SNAPSHOT "codepod.dev/snapshot"
#define KUBE_ANNOT_RESTORE "codepod.dev/restore-pending"
/* When the replica that made (or claimed) a pod started: --template-drift-idle
 * replaces only pods of another template made by a replica older than
 * itself, so the replicas of an upgrade never take turns replacing each
 * other's pods (the newest release's template wins). */
#define KUBE_ANNOT_REPLICA_START "codepod.dev/replica-start"
/* A restore annotation older than this: its replica died mid-restore; the
 * pod is deleted and the conversation restored into a new one. */
#define KUBE_RESTORE_STALE_S 600

struct kube_snaps;
struct kube_snap_conv;

/* The killer exec's program (k8s/backend/killer.js, built), for boot.js. */
extern const unsigned char kube_killer_js[];
extern const unsigned long kube_killer_js_len;

/*
 * A conversation's pod: IDLE (none known), ACQUIRING (finding, claiming or
 * creating one and waiting for it to be ready), READY (c->pod is in use).
 * Changed only by kube_acquire.c's conv_set_state, which logs the change
 * (debug, kube.conv_state) and asserts it is one of:
 *   IDLE -> ACQUIRING       an execution wants the pod; an attempt starts over
 *   ACQUIRING -> IDLE       released: failed, retried, nobody waits, closing
 *   ACQUIRING -> READY      the pod is ready
 *   READY -> IDLE           the pod went stale
 */
enum kube_conv_state { KUBE_CONV_IDLE, KUBE_CONV_ACQUIRING, KUBE_CONV_READY };

struct kube_conv {
	struct kube_conv *next;
	struct kube *k;
	char label[41];                /* hash of namespace + key */
	char name[K8S_POD_NAME_MAX];   /* the name a created pod gets */
	char *pod;                     /* the pod in use (READY) */
	char dead_uid[64];             /* a pod judged a dead end and being deleted:
	                                * never judged again, only waited out */
	char drift_uid[64];            /* the last pod of another template served,
	                                * reported once (kube.template_drift) */
	enum kube_conv_state state;    /* conv_set_state only */
	struct codepod_proc *waiters;       /* executions waiting for the pod */
	unsigned running;              /* executions running in the pod */
	int attempts;                  /* acquisitions since the last success */
	unsigned gen;                  /* bumped when in-flight steps go stale */
	struct k8s_rest_call *call;
	struct k8s_pod_watch *watch;
	uint64_t touched_ms;           /* last-used annotation written */
	int busy_marked;               /* in-use-until written, not cleared yet */
	uint64_t clear_due_ms;         /* the last execution ended: clear the mark then (0: not due) */
	time_t ended_at;               /* when it ended (the last-used then written) */
	struct kube_super *super;          /* the pod's supervisor (kube_super.h) */
	int super_off;                 /* it failed in this pod: one exec per script */
	int super_lost_work;           /* its stream ended under an execution */
	struct codepod_proc *super_waiters; /* executions waiting for it to be ready */
	struct kube_standby *standby;      /* a warm pod's runner, inherited (kube_warm.c) */
	/* snapshots (kube_snap.c) */
	char snap_hash[33];            /* its snapshot folder ("": unknown here) */
	int keyed;                     /* its key was seen (name and hash from it) */
	char restore_uid[64];          /* the pod this replica made or claimed: restored
	                                * before anything but our own file operations runs */
	int restoring;                 /* READY, but waiters wait for the restore */
	struct codepod_proc *gated;    /* executions whose runners start during the
	                                * restore, their input held until it ends
	                                * (kube_gate_start); newest first, as waiters */
	int64_t restore_ms;            /* the restore's time, for the next execution (-1: none) */
	int deleting;                  /* delete_conversation in progress: waiters wait */
	struct kube_snap_conv *snap;   /* the coordinator's (NULL: none yet) */
};

struct kube {
	struct codepod_backend base;
	uv_loop_t *loop;
	struct k8s_client *api;
	struct k8s_exec_client *execs;
	char *ns;
	json_t *tmpl;
	char tmpl_hash[17];
	struct kube_conv *convs;
	struct kube_warm_pod *warm;            /* warm pods this replica made (kube_warm.c) */
	uv_timer_t warm_timer;         /* looks again while one is not Ready */
	uv_timer_t clear_timer;        /* in-use marks due to be cleared (kube_acquire.c) */
	int handles_open;              /* tick, warm_timer and clear_timer, until closed */
	unsigned warm_pool, idle_ttl_s, tick_s;
	unsigned drift_idle_s;         /* --template-drift-idle (0: off) */
	char started[24];              /* this replica's start, seconds since the epoch:
	                                * KUBE_ANNOT_REPLICA_START of the pods it makes */
	char drift_kept[16][64];       /* pods of another template kept (no store),
	                                * reported once each: a ring of uids */
	unsigned drift_kept_next;
	int supervise;                 /* run executions through a supervisor */
	int pod_helper;                /* its runners under the pod helper */
	char **runner_argv;            /* the engine's default runner (its
	                                  default_runner op), NULL until told: */
	char *runner_input;            /* what a warm pod's standby runner is */
	size_t runner_input_len;       /* started with */
	unsigned long runner_mb;
	uint64_t runner_ws_bytes, runner_ws_files; /* its workspace bounds */
	uint64_t ws_cap;               /* the pod's own limit on the workspace, less a
	                                * margin (0: none): no bound goes past it */
	uv_timer_t tick;
	int pool_busy, reap_busy;
	unsigned long passes;          /* pool-and-reaper passes begun (1: the one at start) */
	struct kube_backend_stats stats;
	unsigned pending;              /* REST calls, watches and supervisor streams
	                                  not ended yet */
	unsigned procs;                /* process handles not freed yet */
	int closing;                   /* destroy was asked: free when all is quiet */
	struct kube_snaps *snaps;      /* --snapshot-url (kube_snap.h), or NULL */
	char own_prefix[48];           /* the coordinator's ids and aliases start so */
};

/*
 * A process handle: waiting for the conversation's pod (where a new handle
 * starts), for the exec credentials, for the pod's supervisor; running
 * (EXEC: on p->ex, or on a channel of p->sup); DONE once its exit was
 * reported (kube_proc_report, once). Changed only by kube_backend.c's
 * proc_set_state, which logs the change (debug, kube.proc_state) and
 * asserts it is one of:
 *   WAIT_POD -> WAIT_CREDS    the pod is ready (at once, or later)
 *   WAIT_CREDS -> WAIT_SUPER  the supervisor is not up yet
 *   WAIT_CREDS -> EXEC        on the supervisor, or a direct exec
 *   WAIT_CREDS -> WAIT_POD    the supervisor, up, refused a channel (its
 *                             stream just went): again in the
 *                             conversation's next pod
 *   WAIT_SUPER -> EXEC        it came up, or failed (a direct exec)
 *   WAIT_SUPER -> WAIT_CREDS  it went or failed: one exec per script
 *   WAIT_SUPER -> WAIT_POD    it was dropped with its pod
 *   EXEC -> WAIT_CREDS        nothing ran yet and the supervisor went: again
 *                             in the same pod
 *   EXEC -> WAIT_POD          nothing ran yet and the pod went: again in
 *                             the conversation's next pod
 *   any but DONE -> DONE      the exit is reported (killed, unavailable,
 *                             exited)
 */
enum kube_proc_state { KUBE_PROC_WAIT_POD, KUBE_PROC_WAIT_CREDS, KUBE_PROC_WAIT_SUPER, KUBE_PROC_EXEC, KUBE_PROC_DONE };

struct codepod_proc {
	struct codepod_proc *next_wait;
	struct kube *k;
	struct kube_conv *conv;
	const struct codepod_proc_cbs *cbs;
	void *ud;
	char **argv;
	char *exec_id;
	char tag[33];
	enum kube_proc_state state;    /* proc_set_state only */
	struct k8s_exec *ex;
	struct kube_super *sup;            /* KUBE_PROC_EXEC on a supervisor channel */
	uint32_t chan;
	struct k8s_exec *killer;
	struct k8s_creds_wait cw;
	struct cp_buf sent;            /* stdin so far, kept until output comes,
	                                  to replay on a fresh pod */
	long pid;
	unsigned long long start;      /* the runner's start, ticks since boot */
	/* The int flags here and below (killed, got_output, retried, fed,
	 * oom_tries, standby, counted) are facts, not states: each is set in
	 * more than one state and the state goes on moving while it holds.
	 * The one flag that was a state, reported, is KUBE_PROC_DONE. */
	int killed;                    /* the engine asked for the kill (any state):
	                                  the exit is ours, not lost nor an OOM */
	int got_output;                /* output came: nothing is replayed */
	int retried;                   /* the one start-over was used */
	int fed; /* a byte went into a supervisor channel: the program may have run */
	uv_timer_t timer;              /* async reports, kill grace, OOM re-reads */
	time_t exec_wall;              /* when the runner's exec started (wall clock) */
	char *oom_pod;                 /* the pod read by kube_oom.c, while it is */
	int oom_tries;                 /* GETs of the pod so far (kube_oom.c) */
	int standby;                   /* started ahead: not counted as running */
	unsigned long memory_mb;       /* of the spawn request */
	uint64_t ws_bytes, ws_files;   /* of the spawn request */
	size_t input_len;              /* its input: the first bytes of sent */
	int counted;                   /* counted in conv->running */
	int maint;                     /* the snapshot coordinator's file operation */
	int restored;                  /* the first after a restore: usage says so */
	int gated;                     /* on conv->gated: its runner starts and takes
	                                  its own source (input_len), nothing more yet */
	struct codepod_proc *gate_next;
	size_t gate_held;              /* sent from here on waits for kube_gate_open
	                                  (what a stream opened while gated was given) */
	char gate_why[CP_ERR_MSG_MAX]; /* its pod's restore failed: it ends unavailable,
	                                  saying this ("": not) */
	uint64_t restore_ms;
	struct codepod_proc_exit exit;
};

/* kube_acquire.c: the restore kube_snap_restore() began for pod @uid ended */
void kube_restored(struct kube_conv *c, const char *uid, int rc, const char *detail, int64_t ms);
/* kube_acquire.c: the reaper snapshots @pod of an idle conversation: it
 * becomes the conversation's pod here if it has none (0), else -1. */
int kube_conv_adopt(struct kube_conv *c, const char *pod);
/* kube_pool.c: delete an idle pod (resourceVersion precondition) */
void kube_pool_reap_idle(struct kube *k, const json_t *pod, int drift);
const char *kube_pod_annotation(const json_t *pod, const char *key);

/* kube_delete.c: the backend's delete_conversation */
int kube_delete_conversation(struct codepod_backend *b, const char *conversation,
                             void (*done)(void *ud, int rc, const struct cp_err *err), void *ud,
                             struct cp_err *err);

/* kube_backend.c: frees the backend once closing and quiet */
void kube_maybe_free(struct kube *k);

/* kube_acquire.c */
struct kube_conv *kube_conv_get(struct kube *k, const char *key, struct cp_err *err);
void kube_conv_want(struct kube_conv *c);        /* start acquiring if idle */
void kube_conv_stale(struct kube_conv *c);       /* the pod is gone: forget it */
void kube_conv_release(struct kube_conv *c);     /* stop what is in progress */
void kube_touch(struct kube_conv *c);            /* write the last-used annotation */
void kube_touch_done(struct kube_conv *c);       /* the last execution ended */
void kube_touch_flush(struct kube_conv *c, int now); /* clear the mark if due (or @now) */
void kube_now_rfc3339(char out[32]);

/* kube_backend.c: the conversation's supervisor goes with its pod */
void kube_supervisor_drop(struct kube_conv *c);
const struct kube_super_cbs *kube_supervisor_cbs(void);  /* a conversation's, ud = kube_conv */
const struct codepod_proc_cbs *kube_chan_cbs(void);  /* an execution's, ud = codepod_proc */

/* kube_warm.c: warm pods with their supervisor and a standby runner */
void kube_warm_created(struct kube *k, const char *pod);
void kube_warm_listed(struct kube *k, const json_t *items);  /* a warm-pod list */
void kube_warm_poll(uv_timer_t *t);                         /* kube_pool.c */
int kube_warm_is_up(struct kube *k, const char *pod);
void kube_warm_claimed(struct kube_conv *c, const char *pod);    /* before acquire_claimed */
/* 1: @p now runs on the inherited standby runner; 0: not usable (killed);
 * -1: taken, but writing to it failed. */
int kube_warm_take(struct codepod_proc *p);
void kube_warm_stop(struct kube *k);

/* kube_backend.c: a conversation's pod is ready, or will not be */
void kube_proc_pod_ready(struct codepod_proc *p);
/* kube_backend.c: the pod's workspace is being restored (c->restoring):
 * the waiters' runners start now, in parallel with the restore, and load
 * their own source, but nothing after it (the hello, which carries the
 * program) goes to them before kube_gate_open; a runner waiting for its
 * hello runs nothing and reads nothing of the workspace. */
void kube_gate_start(struct kube_conv *c);
/* The restore ended well: their input goes in; the first execution (the
 * list's last) says how long the restore took (@ms >= 0). */
void kube_gate_open(struct kube_conv *c, int64_t ms);
/* It failed: they end unavailable with @why, whatever state they are in
 * (before kube_conv_stale ends their supervisor). */
void kube_gate_fail(struct kube_conv *c, const char *why);
void kube_proc_unavailable(struct codepod_proc *p, const char *detail);
/* kube_backend.c: hand p->exit to the engine (once; from the loop) */
void kube_proc_report(struct codepod_proc *p);

/* kube_oom.c: the runner died of a SIGKILL codepod did not send: read the
 * pod's container status (non-blocking GETs, for up to ~1.5 s) and then
 * call kube_proc_report(p), with p->exit.oom and p->exit.detail set when
 * the container was OOMKilled. Returns 0 when started; -1 when it could not
 * start, and then the caller reports. Uses p->timer meanwhile. */
int kube_oom_check(struct codepod_proc *p);

/* kube_pool.c */
void kube_pool_start(struct kube *k);
void kube_pool_stop(struct kube *k);
void kube_pool_refill_soon(struct kube *k);
/* Claim a ready warm pod for @c; calls kube_acquire_claimed(c, pod or NULL). */
void kube_pool_claim(struct kube_conv *c);
void kube_acquire_claimed(struct kube_conv *c, const json_t *pod);

#endif
