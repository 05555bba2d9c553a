/*
 * workspace_disk.h - the blocking work under the workspaces' disk bound
 * (workspace.h): loop devices, the mounts of the images on the workspace
 * folders, the sweep of what codepods that are gone left mounted, and the
 * file-tree chores (remove a tree, measure one, find a tool). workspace.c
 * decides when each runs; this file only knows how.
 *
 * Loop devices. Each is named (LO_NAME) `codepod-<pidns>-<pid>` of the
 * codepod that attached it (as cgroup.h names its folder) and detaches
 * itself once its filesystem is unmounted everywhere (LO_FLAGS_AUTOCLEAR).
 * An image already attached to one (its filesystem held by something that
 * outlived an unmount) is mounted through that device, so one filesystem
 * is never mounted twice.
 *
 * Context: every call here blocks (file system calls, mount(2), ioctls on
 * loop devices, a walk of a whole tree): it runs on libuv's thread pool
 * (uv_queue_work) or once before the loop (local_ws_probe, local_ws_new),
 * never on the loop itself. Nothing here keeps state between calls but
 * local_disk_du's thread-local counters; any thread may call any function.
 *
 * Ownership: the caller owns every buffer passed in (paths borrowed for
 * the call; @dev and @out filled, LOCAL_DISK_DEV_CAP and
 * LOCAL_DISK_PATH_CAP bytes); nothing is allocated that outlives a call.
 * local_ws_probe (declared in workspace.h) is defined in workspace_disk.c,
 * as it needs only these.
 */
#ifndef LOCAL_WORKSPACE_DISK_H
#define LOCAL_WORKSPACE_DISK_H

#include <stdint.h>

#include "base/err.h"

#define LOCAL_DISK_PATH_CAP 4200
#define LOCAL_DISK_DEV_CAP 32
/* In the workspaces' folder: held (flock, shared) by the codepod that
 * bound the folder on itself, for as long as it lives. */
#define LOCAL_DISK_LOCK_FILE ".codepod-lock"

/* 1 when something is mounted on @path (or it is a root). */
int local_disk_is_mounted(const char *path);

/* The loop device @img is attached to already (its filesystem still held
 * somewhere after an unmount), into @dev; 0 when none. */
int local_disk_loop_holding(const char *img, char dev[LOCAL_DISK_DEV_CAP]);

/* @img mounted on @ws (through the device that holds it already, if any),
 * its loop device into @dev. Return: 0 or CP_E_IO (@err). */
int local_disk_mount(const char *img, const char *ws, char dev[LOCAL_DISK_DEV_CAP],
                     struct cp_err *err);

/* Unmount @ws: 0, or -1 with errno (EBUSY: in use; with @lazy, never). */
int local_disk_unmount(const char *ws, int lazy);

/* @path and everything below it removed (links not followed, other
 * filesystems not entered): 0 (also when it was not there), or -1. */
int local_disk_rm_tree(const char *path);

/* What a folder holds: its entries and their blocks (not following links),
 * @path itself not counted. */
void local_disk_du(const char *path, uint64_t *bytes, uint64_t *files);

/* 1 when @path has no entries (or cannot be read). */
int local_disk_folder_empty(const char *path);

/* The command's path in the sbin folders or PATH, into @out; 0 when none. */
int local_disk_find_tool(const char *name, char out[LOCAL_DISK_PATH_CAP]);

/* Whether this process has capability @bit in its effective set. */
int local_disk_has_cap(int bit);

/**
 * local_disk_sweep() - the mounts codepods of this PID namespace that are
 * gone left (killed before they could unmount): their workspaces' images
 * unmounted (lazily), then their workspaces' folders bound on themselves
 * (a bind whose LOCAL_DISK_LOCK_FILE nobody holds), then their loop
 * devices mounted nowhere detached. Each unmount logged.
 * Return: 1 when @root is a mount point already (this codepod's own bind
 * of before), else 0.
 */
int local_disk_sweep(const char *root);

#endif
