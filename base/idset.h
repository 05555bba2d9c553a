/*
 * idset.h - the set of execution ids that may not be reused.
 *
 * Holds the ids of running executions plus the last finished ones, up to a
 * capacity fixed at creation. Adding to a full set evicts the oldest id
 * (FIFO by insertion). The set does not know which ids are still running:
 * the capacity must exceed the number of executions that can run at once,
 * so that an evicted id is always a finished one.
 *
 * Open addressing (linear probing, backward-shift deletion, load <= 1/2)
 * with a keyed SipHash-2-4 whose key comes from getentropy() at creation,
 * so client-chosen ids cannot be crafted to collide. O(1) average for both
 * operations; memory is proportional to the capacity plus the ids' bytes.
 *
 * Ownership: cp_idset_new() returns a new set, freed with cp_idset_free()
 * (which frees the copies of the ids). cp_idset_add() copies the id; ids
 * passed in are borrowed for the duration of the call.
 *
 * Context: pure (no I/O besides the entropy read at creation); single thread.
 */
#ifndef CP_IDSET_H
#define CP_IDSET_H

#include <stddef.h>

#include "base/err.h"

struct cp_idset;

/**
 * cp_idset_new() - a new, empty set holding at most @capacity ids.
 * @capacity: 1 .. 2^30 (e.g. 100000).
 *
 * Return: a new set (free with cp_idset_free()), or NULL when @capacity is
 * out of range or allocation failed.
 */
struct cp_idset *cp_idset_new(size_t capacity);

/** cp_idset_free() - free the set and its copies of the ids. NULL is a no-op. */
void cp_idset_free(struct cp_idset *s);

/** cp_idset_has() - 1 if @id (NUL-terminated) is in the set, else 0. */
int cp_idset_has(const struct cp_idset *s, const char *id);

/**
 * cp_idset_add() - add a copy of @id; when the set is full, the oldest id
 * is evicted first.
 *
 * Return: 0, or
 *  CP_E_CONFLICT - @id is already in the set (nothing changes);
 *  CP_E_NOMEM    - the copy could not be made (nothing changes);
 *  CP_E_INTERNAL - @id is NULL.
 */
int cp_idset_add(struct cp_idset *s, const char *id, struct cp_err *err);

#endif
