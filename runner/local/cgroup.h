/*
 * cgroup.h - the kernel's bound on each execution of the local backend:
 * its memory (every page the kernel charges: heap, shared memory, memfd,
 * the private /tmp, page cache it dirties), its processes, its CPU share.
 *
 * One folder of codepod's own holds every sandbox: `codepod-<pidns>-<pid>`
 * under codepod's own cgroup, in each hierarchy of cgroup v1 (memory, and
 * pids and cpu where mounted) or once on cgroup v2. Its pids.max is the
 * ceiling over all sandboxes together (--max-sandbox-pids), so programs
 * cannot take the host's last PIDs from codepod. Below it, one folder per
 * execution (not per conversation: each execution has its own maxMemoryMb,
 * and an OOM kill or a bomb then belongs to exactly one execution, whose
 * folder goes with its processes):
 *   memory  maxMemoryMb + LOCAL_CG_SLACK_MB, no swap, one OOM group (v2
 *           memory.oom.group; on v1 the backend kills the group when the
 *           OOM event comes, local_cg_oom_fd);
 *   pids    a share of the ceiling that shrinks as more executions are
 *           live (local_cg_share), keeping a headroom free for starts and
 *           room for the PIDs refused forks take for a moment;
 *   cpu     equal weights, so a spinning bomb has one execution's share
 *           however many processes it has; until its runner is ready
 *           (only bubblewrap's and Node's own code runs then) an
 *           execution weighs LOCAL_CG_START_WEIGHT times more, so a start
 *           is not starved by busy neighbours (local_cg_started).
 *
 * Context: every call is a few synchronous writes and reads on the cgroup
 * pseudo-filesystem (kernel memory, no disk): they are made on the loop.
 * local_cg_root_init also runs once before the loop.
 *
 * Ownership: the caller owns both structs; the strings inside are
 * allocated here and freed by local_cg_root_free and local_cg_forget.
 */
#ifndef LOCAL_CGROUP_H
#define LOCAL_CGROUP_H

#include <stddef.h>
#include <sys/types.h>

#include "base/err.h"

/* Room over maxMemoryMb for the runner itself (Node's code, its young
 * generation and buffers beside V8's heap, which maxMemoryMb caps). */
#define LOCAL_CG_SLACK_MB 64ul
/* Fewest processes one execution may have whatever the load: Node and
 * bubblewrap need about 15 to start. */
#define LOCAL_CG_MIN_PIDS 64ul
/* Most processes one execution may have (as the per-user limit). */
#define LOCAL_CG_MAX_PIDS 4096ul

/* How many times an execution's CPU weight a start has. */
#define LOCAL_CG_START_WEIGHT 8ul

enum local_cg_kind { LOCAL_CG_NONE = 0, LOCAL_CG_V1, LOCAL_CG_V2 };

/* The controllers, in the order of the folder arrays below. */
enum { LOCAL_CG_MEMORY, LOCAL_CG_PIDS, LOCAL_CG_CPU, LOCAL_CG_NCTL };

struct local_cg;

struct local_cg_root {
	enum local_cg_kind kind;
	char *dir[LOCAL_CG_NCTL]; /* the folder of all sandboxes per controller
	                           * (NULL: not mounted); on v2 the same one */
	int have_memsw;           /* v1 memory.memsw.limit_in_bytes */
	unsigned long max_pids;   /* the ceiling over all sandboxes; 0: none */
	unsigned long share;      /* pids.max of each execution now */
	struct local_cg *live;    /* every execution folder not removed yet */
	unsigned nlive;
};

struct local_cg {
	struct local_cg *next;    /* in root->live */
	char *dir[LOCAL_CG_NCTL];
	char *procs[LOCAL_CG_NCTL]; /* their cgroup.procs, NULL for a repeat */
	unsigned long limit_mb;   /* memory.max, MiB; 0: no memory limit */
	int oom_fd;               /* v1: an eventfd that becomes readable on OOM; else -1 */
	int orphan;               /* the backend's: its processes were reaped, the
	                           * folders were busy still (removed later) */
};

struct local_cg_conf {
	const char *fs;      /* where the cgroup filesystems are: "/sys/fs/cgroup" */
	const char *self;    /* the text of /proc/self/cgroup */
	const char *name;    /* the sandboxes' folder, e.g. "codepod-4026531836-812" */
	unsigned long max_pids; /* ceiling over all sandboxes, 0: none */
};

/**
 * local_cg_root_init() - find the hierarchy (v2 with the memory controller
 * first, then v1's memory hierarchy), make the sandboxes' folder under
 * codepod's own cgroup and set the ceiling. Stale folders of codepods of
 * this PID namespace that are gone are removed first.
 * Return: 0, or CP_E_UNSUPPORTED saying why no memory cgroup can be had.
 */
int local_cg_root_init(struct local_cg_root *r, const struct local_cg_conf *c,
                       struct cp_err *err);

/* Removes the sandboxes' folder (what is still busy stays, for the next
 * start's sweep) and frees the strings. */
void local_cg_root_free(struct local_cg_root *r);

/**
 * local_cg_make() - the folder @name of one execution, with its limits;
 * it joins root->live and every live execution's pids share is set again.
 * Return: 0, or CP_E_IO (nothing is left behind).
 */
int local_cg_make(struct local_cg_root *r, struct local_cg *cg, const char *name,
                  unsigned long memory_mb, struct cp_err *err);

/* The cgroup.procs files of the execution's folders, one per folder, into
 * @out (borrowed from @cg); how many. A process writing its PID to each
 * is in the execution's cgroup, and so is everything it starts after. */
size_t local_cg_procs(const struct local_cg *cg, const char **out, size_t max);

/* The runner is ready: the execution's CPU weight becomes an equal one. */
void local_cg_started(const struct local_cg_root *r, const struct local_cg *cg);

/* OOM kills counted in the execution's folder (0: none, or unknown). */
unsigned long local_cg_oom_kills(const struct local_cg_root *r, const struct local_cg *cg);

/* SIGKILL to every process listed in the execution's folders. */
void local_cg_kill_all(const struct local_cg *cg);

/**
 * local_cg_remove() - remove the execution's folders.
 * Return: 0 once they are gone (the struct leaves root->live and may be
 * freed), -1 while processes are still in them (try again later).
 */
int local_cg_remove(struct local_cg_root *r, struct local_cg *cg);

/* The pids.max each of @nlive executions gets under @max_pids: half the
 * ceiling less a headroom kept for starts (an eighth, at least 128),
 * split evenly, within [LOCAL_CG_MIN_PIDS, LOCAL_CG_MAX_PIDS]. Half: a
 * fork the cgroup refuses has held a PID for a moment first, so tasks
 * spinning on refused forks can occupy up to twice what they hold. */
unsigned long local_cg_share(unsigned long max_pids, unsigned nlive);

/* Three quarters of @pid_max: the default ceiling. */
unsigned long local_cg_default_max_pids(unsigned long pid_max);

#endif
