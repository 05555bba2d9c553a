/*
 * workspace.h - the local backend's conversation workspaces where they are
 * more than a folder: bounded by the kernel (maxWorkspaceBytes,
 * maxWorkspaceFiles), and moved to the user their conversation runs as.
 *
 * The disk bound. Each workspace is an ext4 filesystem in an image file of
 * its own, `WS_ROOT/<hash>.img`, mounted (by a loop device) on the
 * workspace folder `WS_ROOT/<hash>`, which is what the sandbox binds at
 * /workspace, the file operations and commands use, and snapshots
 * archive. The image is sparse: it takes the host's disk only as the
 * program fills it, never more than its size (maxWorkspaceBytes, plus
 * about 1.6% and 272 bytes per file of maxWorkspaceFiles for ext4's own
 * records, so that the files themselves can hold maxWorkspaceBytes); the
 * file bound is its inode count. A program past either sees ENOSPC. It is
 * made (mkfs.ext4, a few tens of milliseconds) on the conversation's first
 * use, mounted then and after it was unmounted, grown online (resize2fs)
 * when a later spawn asks for more bytes (its inodes grow in proportion;
 * neither shrinks), and unmounted when unused for idle_s seconds, at
 * delete (its image removed) and at close. Everything that blocks or
 * waits runs off the loop: the file and mount work on libuv's thread pool
 * (uv_queue_work), mkfs.ext4, resize2fs, cp and chown as child processes
 * (uv_spawn); a spawn waits for it through the callback.
 *
 * Why an image: a quota (ext4 project quotas, XFS pquota) needs the
 * filesystem that holds the state folder made and mounted with it, which
 * is the host's choice, not codepod's: these hosts' root filesystem is
 * mounted without (and their kernel builds no XFS quota), and so is a
 * common host's. A tmpfs with size= and nr_inodes= is memory, charged to
 * whichever execution touched it first, and gone when codepod restarts.
 * An image needs root, loop devices and e2fsprogs, which local_ws_probe()
 * checks with a real one at start. What it costs (measured here): a
 * mkfs.ext4 of 10-30 ms for 1 GiB and 100000 files, a mount of 20-45 ms,
 * an unmount of 35-70 ms, about 700 KiB of the host's disk for an empty
 * workspace, and a journal thread and a loop worker in the kernel while
 * mounted.
 *
 * Mounts. Each loop device is named (LO_NAME) `codepod-<pidns>-<pid>` of
 * the codepod that made it, and detaches itself once its filesystem is
 * unmounted everywhere (LO_FLAGS_AUTOCLEAR); local_ws_new() unmounts the
 * workspaces of codepods of its PID namespace that are gone (killed before
 * they could), as cgroup.h sweeps their cgroups. WS_ROOT is a bind mount
 * of itself marked shared, so the copies a sandbox's mount namespace takes
 * of the other workspaces (out of its sight, under the hidden state
 * folder) follow the host's unmounts instead of keeping the filesystem
 * alive; its codepod holds WS_ROOT/.codepod-lock (flock, shared) while it
 * lives, so such a bind whose lock nobody holds is a dead codepod's, and
 * is swept too. An image already attached to a loop device (its filesystem held
 * by something that outlived an unmount) is mounted through that device,
 * so one filesystem is never mounted twice.
 *
 * Existing plain folders (made before the bound, or by a snapshot's
 * restore) are moved into an image on their first use: an image as large
 * as the bounds asked for or 1.25 times what the folder holds, the files
 * copied with `cp -a` (links not followed), the folder then removed. A
 * folder that cannot be moved stays a folder, unbounded, with a warning
 * (local.workspace_unbounded): no file is lost.
 *
 * The owner. A workspace whose owner is not the user its conversation now
 * runs as (made under --sandbox-user, then --sandbox-uids, or the other
 * way) is handed over on first use: every entry owned by the old user goes
 * to the new one (`chown -R -P --from=OLD`: links themselves, never
 * followed, in a child process), before the program starts.
 *
 * Context: the loop thread, but local_ws_probe() and local_ws_new(), which
 * block (once, before the loop). Callbacks come from the loop, never from
 * inside the call that asked for them.
 *
 * Ownership: local_ws_new() returns an object freed by local_ws_close()
 * (after its unmounts, @closed). Request strings are copied.
 */
#ifndef LOCAL_WORKSPACE_H
#define LOCAL_WORKSPACE_H

#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "base/err.h"

/* A mounted workspace unused this long is unmounted (its image stays). */
#define LOCAL_WS_IDLE_S 300u

/* The bounds of a request that names none (struct local_ws_req's 0). */
#define LOCAL_WS_DEFAULT_BYTES (1ull << 30)
#define LOCAL_WS_DEFAULT_FILES 100000ull

struct local_ws;

struct local_ws_conf {
	uv_loop_t *loop;
	const char *ws_root;   /* the workspaces' folder (absolute, real) */
	int disk;              /* 1: the disk bound (local_ws_probe passed) */
	unsigned idle_s;       /* 0: LOCAL_WS_IDLE_S */
	/* 1 while something else still reads @hash's workspace folder (its
	 * snapshot): it is not unmounted then. May be NULL. */
	int (*busy)(void *ud, const char *hash);
	void *busy_ud;
};

/**
 * local_ws_probe() - can workspaces have the disk bound here: codepod is
 * root, /dev/loop-control, mkfs.ext4, resize2fs, and one real image made,
 * mounted, written and unmounted under @ws_root. Blocks (about 100 ms).
 * Return: 0, or CP_E_UNSUPPORTED with what is missing.
 */
int local_ws_probe(const char *ws_root, struct cp_err *err);

/**
 * local_ws_new() - with @c->disk: the workspaces' folder a shared bind
 * mount of itself, the mounts of codepods that are gone swept. Blocks.
 */
int local_ws_new(const struct local_ws_conf *c, struct local_ws **out, struct cp_err *err);

struct local_ws_req {
	const char *hash;     /* 32 hex: the workspace folder's name */
	uint64_t bytes;       /* bounds asked for (policy); 0: the built-in default */
	uint64_t files;
	uid_t uid;            /* the owner it has (the folder's), its image's */
	gid_t gid;            /* root's; (uid_t)-1: codepod's own */
	uid_t move_from;      /* (uid_t)-1, or the user its entries are moved from */
};

/* @rc 0: the workspace is ready and held (local_ws_drop when done with it);
 * else why not (@err, borrowed for the call). */
typedef void (*local_ws_ready_fn)(void *ud, int rc, const struct cp_err *err);

/**
 * local_ws_acquire() - the workspace of @req ready for a process: made,
 * moved, grown, mounted, its entries handed over, as needed. Return: 0,
 * ready and held now (@done never called); 1, @done comes later; or an
 * error (CP_E_NOMEM, CP_E_SANDBOX_UNAVAILABLE while closing).
 */
int local_ws_acquire(struct local_ws *w, const struct local_ws_req *req, local_ws_ready_fn done,
                     void *ud, struct cp_err *err);

/**
 * local_ws_moving() - 1 when @hash's workspace is being handed to another
 * user (an acquisition with move_from is waiting or running), with that
 * user and the one it is moved from; 0 when not.
 */
int local_ws_moving(const struct local_ws *w, const char *hash, uid_t *uid, gid_t *gid,
                    uid_t *move_from);

/* The process that held @hash's workspace is gone. */
void local_ws_drop(struct local_ws *w, const char *hash);

/**
 * local_ws_delete() - @hash's conversation is deleted (its processes
 * killed): its workspace unmounted (lazily: a killed sandbox may still
 * hold it a moment) and its image removed; the folder is the caller's to
 * remove. Acquisitions made meanwhile wait and then start afresh. @done
 * comes from the loop. Return: 0, or CP_E_NOMEM and no @done.
 */
int local_ws_delete(struct local_ws *w, const char *hash,
                    void (*done)(void *ud, int rc, const struct cp_err *err), void *ud,
                    struct cp_err *err);

/* 1 when workspaces have the disk bound. */
int local_ws_bounded(const struct local_ws *w);

/**
 * local_ws_close() - once the work in flight is done, every workspace
 * unmounted, the workspaces' own mount too, the memory freed; then
 * @closed(@ud) (may be NULL). Acquisitions after it are refused.
 */
void local_ws_close(struct local_ws *w, void (*closed)(void *ud), void *ud);

/* The image's size for bounds of @bytes and @files (exposed for tests). */
uint64_t local_ws_image_size(uint64_t bytes, uint64_t files);

#endif
