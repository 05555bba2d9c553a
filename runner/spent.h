/*
 * spent.h - the continuations this codepod already resumed: a bounded
 * record of their ids, each kept until it expires, written to a file so a
 * restarted codepod refuses them too.
 *
 * The file holds one line per id, "JTI EXP\n" (EXP in seconds since the
 * epoch). codepod_spent_open reads it (blocking: call it before the loop
 * runs), drops the expired lines and rewrites it; codepod_spent_add appends
 * with an asynchronous write on the loop. Over the bound (CODEPOD_SPENT_MAX)
 * the id that expires first is forgotten: the record bounds memory, and the
 * idempotency key a resumed call carries is what makes a repeat harmless.
 *
 * Ownership: codepod_spent_open allocates, codepod_spent_free frees (a write
 * still on its way finishes on the loop first: free before running the loop
 * dry). Strings are borrowed for the call.
 *
 * Context: the loop's thread.
 */
#ifndef CODEPOD_SPENT_H
#define CODEPOD_SPENT_H

#include <stdint.h>

#include <uv.h>

#include "base/err.h"

#define CODEPOD_SPENT_MAX 100000
#define CODEPOD_SPENT_ID_LEN 32

struct codepod_spent;

/* @path: the record's file (created if missing), or NULL: in memory only.
 * CP_E_IO when the file cannot be read or written, naming it. */
int codepod_spent_open(uv_loop_t *loop, const char *path, uint64_t now_s,
                       struct codepod_spent **out, struct cp_err *err);

/* 1 when @jti (CODEPOD_SPENT_ID_LEN hex digits) was resumed and has not
 * expired by @now_s. */
int codepod_spent_has(const struct codepod_spent *sp, const char *jti, uint64_t now_s);

/* Records @jti until @exp_s. CP_E_NOMEM only; a failed write to the file
 * is logged (the id is still refused by this process). */
int codepod_spent_add(struct codepod_spent *sp, const char *jti, uint64_t exp_s,
                      struct cp_err *err);

void codepod_spent_free(struct codepod_spent *sp);

#endif
