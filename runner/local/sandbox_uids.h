/*
 * sandbox_uids.h - one host user per conversation, when codepod runs as root
 * on the local backend (SECURITY.md).
 *
 * Why: the kernel counts RLIMIT_NPROC per host user, not per sandbox. With
 * one sandbox user for everyone, one conversation's fork bomb fills that
 * user's budget and every other conversation's Node then fails to start its
 * threads (it aborts in uv_thread_create) until the bomb's deadline. A user
 * per conversation gives each its own budget.
 *
 * The users come from a range (--sandbox-uids FIRST-LAST; the group has the
 * same number). A workspace's owner is the record of which user its
 * conversation has: it survives restarts and needs no file of its own. A new
 * workspace takes the first user, from a keyed hash of the conversation
 * onwards, that owns no workspace of this state folder: two conversations of
 * one codepod never share a user while the range has room. Two codepods with
 * different state folders pick independently (the key is random per process),
 * so they share a user only by chance: about n*m/65536 for n and m
 * conversations with a range of 65536.
 *
 * Ownership: local_uids_init() fills a caller-owned struct whose set it
 * allocates; local_uids_free() releases it.
 *
 * Context: local_uids_init() reads the state folder (blocking, once, before the
 * loop). The rest never blocks: the set is in memory.
 */
#ifndef LOCAL_SANDBOX_UIDS_H
#define LOCAL_SANDBOX_UIDS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"

/* The default range: 65536 users from 0x70000000, above the ranges systemd
 * gives containers (0x80000-0x6fffffff) and below 2^31 (tools that read a
 * uid as a signed int). No user there needs an /etc/passwd entry. */
#define LOCAL_UIDS_DEFAULT_FIRST 0x70000000u
#define LOCAL_UIDS_DEFAULT_COUNT 65536u

struct local_uids {
	uint32_t first, count;
	uint32_t *owned;       /* uids owning a workspace here, sorted, no repeats */
	size_t n, cap;
	unsigned char key[32]; /* random: the hash that spreads new conversations */
};

/**
 * local_uids_parse() - parse --sandbox-uids "FIRST-LAST" (decimal, inclusive).
 * Root (0) and ranges past 2^32-2 are refused.
 */
int local_uids_parse(const char *spec, uint32_t *first, uint32_t *count, struct cp_err *err);

/**
 * local_uids_init() - @ws_root's workspaces whose owner is in the range are
 * taken as owned; the rest (made under another --sandbox-user, or by an older
 * codepod) keep their owner and are not counted.
 */
int local_uids_init(struct local_uids *u, uint32_t first, uint32_t count, const char *ws_root,
                 struct cp_err *err);

void local_uids_free(struct local_uids *u);

/* 1 when @uid is in the range. */
int local_uids_in_range(const struct local_uids *u, uid_t uid);

/**
 * local_uids_take() - the user for a new workspace of @conversation, recorded
 * as owned. Return: 0, CP_E_DENIED when every user of the range owns a
 * workspace, CP_E_NOMEM.
 */
int local_uids_take(struct local_uids *u, const char *conversation, uid_t *out, struct cp_err *err);

#endif
