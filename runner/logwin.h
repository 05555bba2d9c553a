/*
 * logwin.h - the log window: keeps the LAST `cap` bytes of everything
 * appended (a ring buffer), and counts everything.
 *
 * An execution's logs can be any size; the outcome carries only the tail.
 * codepod_logwin_append() never fails (bytes it has no memory for are dropped
 * and counted as truncated); codepod_logwin_take()
 * returns the window as valid UTF-8 (see utf8.h): leading continuation bytes
 * of a character cut by the window (at most 3) are dropped, and every other
 * ill-formed sequence (and NUL) becomes U+FFFD. Because of those
 * replacements the result may be longer than cap (at most 3 * cap bytes).
 *
 * Fields (read-only for callers): ring/cap the ring, start/len the window in
 * it, truncated is 1 once any byte fell out of the window (total > cap),
 * total counts every byte ever appended.
 *
 * Ownership: the struct is caller-owned (usually embedded); codepod_logwin_init()
 * allocates buf, codepod_logwin_free() releases it. codepod_logwin_take() returns a
 * new string the caller frees with free(). Appended bytes are copied.
 *
 * Context: pure, single thread per window.
 */
#ifndef CODEPOD_LOGWIN_H
#define CODEPOD_LOGWIN_H

#include <stddef.h>

#include "base/buf.h"
#include "base/err.h"

struct codepod_logwin {
	/* The ring's bytes: they grow to cap as output arrives, so an execution
	 * that prints little costs little. */
	struct cp_buf ring;
	size_t cap, start, len;
	int truncated;
	unsigned long long total;
};

/**
 * codepod_logwin_init() - an empty window of @cap bytes (@cap may be 0: then
 * nothing is kept, only counted).
 *
 * Return: 0, or CP_E_NOMEM (the struct is then zeroed).
 */
int codepod_logwin_init(struct codepod_logwin *w, size_t cap, struct cp_err *err);

/** codepod_logwin_append() - append @len bytes of @buf (copied); oldest bytes fall out. */
void codepod_logwin_append(struct codepod_logwin *w, const char *buf, size_t len);

/**
 * codepod_logwin_take() - the window as a new, NUL-terminated, valid UTF-8 string.
 * @len_out: if not NULL, receives its length (without the NUL).
 *
 * The window is not changed. The result may exceed cap bytes only through
 * U+FFFD replacements (at most 3 * cap).
 *
 * Return: a new string (free with free()), or NULL on allocation failure.
 */
char *codepod_logwin_take(const struct codepod_logwin *w, size_t *len_out);

/** codepod_logwin_free() - release the buffer; the struct is zeroed (re-init to reuse). */
void codepod_logwin_free(struct codepod_logwin *w);

#endif
