/*
 * local.h - the local backend (docs/contract.md §6): one workspace folder per
 * conversation under the state folder, a fresh Node process per execution
 * with the workspace as its working folder, isolated with bubblewrap (no
 * network, host read-only but for the workspace and a private /tmp, the state
 * folder hidden, own PID namespace). When an execution ends, its whole
 * process tree is killed. The processes are started with posix_spawn and
 * reaped here with wait4() for their usage; isolated, this process becomes
 * the subreaper of what it starts (PR_SET_CHILD_SUBREAPER), so bubblewrap's
 * PID-namespace init, which bubblewrap does not wait for, is reaped here
 * with the figures of everything that ran in the sandbox; orphans of other
 * commands it runs are reaped too.
 *
 * Isolated, each runner also gets a cgroup of its own (cgroup.h): the
 * process spawned is a shell that writes its own PID to the cgroup's
 * cgroup.procs files and then execs bubblewrap, so every process of the
 * sandbox starts inside; without a cgroup, local_new refuses unless
 * no_memory_bound. Isolated, each workspace is bounded by the kernel
 * (workspace.h: an ext4 image of its own, maxWorkspaceBytes and
 * maxWorkspaceFiles); where that cannot be had (not root, no loop devices,
 * no e2fsprogs) local_new refuses unless no_disk_bound.
 *
 * Loop context: the loop thread only. local_new blocks briefly (it runs
 * the sandbox once with `node`, to prove its guarantees: local_sandbox.h).
 *
 * Ownership: the config strings are copied. The backend is freed through
 * backend->ops->destroy once every process handle has exited.
 */
#ifndef LOCAL_BACKEND_H
#define LOCAL_BACKEND_H

#include <uv.h>

#include "runner/sandbox.h"
#include "store/snapshots.h"

struct local_config {
	uv_loop_t *loop;
	const char *state_dir;  /* created if missing */
	const char *node;       /* resolved Node 22 binary (see local_node_find) */
	int isolate;            /* 1: bubblewrap required; 0: plain processes */
	const char *sandbox_user; /* --sandbox-user: one user for all (root only), or NULL */
	const char *sandbox_uids; /* --sandbox-uids FIRST-LAST: a user per conversation
	                           * (root only), or NULL: the default range */
	const char *const *hide; /* host files programs must not read: NULL-terminated, or NULL */
	int no_memory_bound;     /* isolated: run on without a cgroup when none can be had */
	int no_disk_bound;       /* isolated: run on without the workspaces' disk bound
	                          * when it cannot be had (workspace.h) */
	int disk_bound_off;      /* never bound the workspaces (benchmarks) */
	unsigned workspace_idle_s; /* a mounted workspace unused this long is
	                            * unmounted; 0: LOCAL_WS_IDLE_S */
	unsigned long max_sandbox_pids; /* processes of all sandboxes together; 0: three
	                                 * quarters of kernel.pid_max (cgroup.h) */
	const char *cgroup_fs;   /* where the cgroup filesystems are; NULL: /sys/fs/cgroup */
	struct store_snaps *snaps; /* --snapshot-url: workspaces snapshotted and restored
	                            * (store/snapshots.h), or NULL; stolen, also when
	                            * local_new fails; closed (drained) at destroy */
};

int local_new(const struct local_config *cfg, struct codepod_backend **out,
                 struct cp_err *err);

/*
 * local_node_find - the Node binary to run: @flag (--node) if given, then
 * $CODEPOD_NODE, then the project's own install (.deps/node beside the
 * build folder of this executable), then `node` on PATH. A Node older than
 * 22.13 is refused with CP_E_UNSUPPORTED naming its version.
 */
int local_node_find(const char *flag, char *out, size_t cap, struct cp_err *err);

/* 1 when bubblewrap can build the sandbox on this machine; else 0 with the
 * reason in err. */
int local_bwrap_usable(struct cp_err *err);

#endif
