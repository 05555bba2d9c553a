/*
 * host_root.h - the host's top-level entries as the local sandbox's root
 * gets them. The sandbox's / is bubblewrap's own tmpfs, read-only once the
 * mounts are made, so that /workspace can be a folder of its own there (a
 * read-only bind of the host's whole / could not hold a new mount point,
 * and the host's own /workspace, if any, must not be what programs see).
 * Each host entry is put back at its own path: a folder or a regular file
 * bound read-only (recursively, with what is mounted under it), a symlink
 * (/bin -> usr/bin) made again with the same target. Left out: /proc, /dev
 * and /tmp (the sandbox makes its own), /workspace (the conversation's), and
 * any other kind of entry (a socket or a device at the top: nothing a
 * program needs). The scan is made for each sandbox, so a top-level entry
 * the host gains later is seen, read-only, by the sandboxes started after
 * it, as it was with the host's / bound whole.
 *
 * Ownership: the caller owns the struct; its strings live inside it.
 * Context: local_root_scan() reads a folder and lstat()s each entry (the
 * root folder's metadata, which the kernel keeps cached): synchronous, on
 * the loop, like the workspace's own mkdir and lstat before a spawn.
 */
#ifndef LOCAL_HOST_ROOT_H
#define LOCAL_HOST_ROOT_H

#include <stddef.h>

#include "base/err.h"

/* Top-level entries kept; a host with more has the rest left out and the
 * scan fails (the sandbox refuses rather than start with part of /). */
#define LOCAL_ROOT_MAX 96

enum local_root_kind { LOCAL_ROOT_BIND, LOCAL_ROOT_SYMLINK };

struct local_root_entry {
	enum local_root_kind kind;
	const char *path;   /* "/usr": the same path inside and out */
	const char *target; /* LOCAL_ROOT_SYMLINK: what the link holds */
};

struct local_root {
	size_t n;
	struct local_root_entry e[LOCAL_ROOT_MAX];
	char strings[16384];
	size_t used;
};

/**
 * local_root_scan() - the entries of the folder @top ("/" but in tests)
 * that the sandbox's root gets, in @r, with paths as they are under "/"
 * ("/usr", whatever @top is).
 *
 * Return: 0, or CP_E_IO when @top cannot be read, CP_E_INTERNAL when it has
 * more entries (or longer names and targets) than @r has room for.
 */
int local_root_scan(struct local_root *r, const char *top, struct cp_err *err);

#endif
