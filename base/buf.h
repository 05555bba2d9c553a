/*
 * buf.h - the one growing byte buffer of codepod, and the one growing array.
 *
 * struct cp_buf follows curl's dynbuf: bytes appended at the end, a hard
 * limit on the length fixed by the owner, growth by doubling capped at the
 * limit. Every buffer of the product that grows (a response body, a
 * message, a frame, a file read whole) is one, so a size limit is checked in
 * one place and in one way: the length may reach the limit exactly, one
 * byte more is refused.
 *
 * The contents are always NUL-terminated (the NUL is not counted in the
 * length and not charged to the limit), so text can be read as a C string;
 * bytes may contain NUL themselves, the length is what counts.
 *
 * Every failing call sets the caller's err (which may be NULL, as for
 * cp_err_set) and leaves the previous contents intact:
 *  CP_E_TOO_BIG - the length would pass the limit;
 *  CP_E_NOMEM   - the allocation failed.
 * A failing call is not sticky: the next add may succeed.
 *
 * Fields are read-only for callers (the accessors below cover the usual
 * reads). A zeroed struct is a valid empty buffer whose limit is 0 (it
 * refuses every byte and never allocates): an owner that zeroes its structs
 * may free such a buffer before having initialised it.
 *
 * Ownership: the struct is caller-owned (usually embedded) and owns its
 * bytes; cp_buf_free() releases them. cp_buf_ptr() lends the bytes until the
 * next call that changes the buffer (an add may move them). cp_buf_take()
 * hands them over: the caller then frees them with free(). Added bytes are
 * copied (borrowed for the call).
 *
 * Context: pure, single thread per buffer.
 */
#ifndef CP_BUF_H
#define CP_BUF_H

#include <stdarg.h>
#include <stddef.h>

#include "base/err.h"

struct cp_buf {
	char *bytes;  /* NULL until something is allocated */
	size_t len;   /* length of the contents, without the NUL */
	size_t alloc; /* bytes allocated (len + 1 at least), or 0; growth never
	                 takes it past limit + 1 */
	size_t limit; /* len never passes it */
};

/**
 * cp_buf_init() - an empty buffer whose length may never pass @limit
 * (SIZE_MAX: no limit but memory). Allocates nothing.
 */
void cp_buf_init(struct cp_buf *b, size_t limit);

/**
 * cp_buf_set_limit() - a new limit for a buffer that may be in use.
 *
 * For an owner whose bound changes between uses (a frame announces its own
 * length). The allocation is kept even when it is over the new limit.
 *
 * Return: 0, or CP_E_TOO_BIG when the buffer already holds more than @limit
 * (nothing changes).
 */
int cp_buf_set_limit(struct cp_buf *b, size_t limit, struct cp_err *err);

/**
 * cp_buf_add() - append @len bytes of @p (NULL is allowed when @len is 0).
 *
 * Return: 0, CP_E_TOO_BIG or CP_E_NOMEM (contents unchanged).
 */
int cp_buf_add(struct cp_buf *b, const void *p, size_t len, struct cp_err *err);

/**
 * cp_buf_addf() - append printf-formatted text.
 *
 * Return: 0, CP_E_TOO_BIG, CP_E_NOMEM, or CP_E_INTERNAL when the format
 * itself fails (vsnprintf's error); contents unchanged on failure.
 */
int cp_buf_addf(struct cp_buf *b, struct cp_err *err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/** cp_buf_vaddf() - cp_buf_addf() with a va_list (@ap is used up). */
int cp_buf_vaddf(struct cp_buf *b, struct cp_err *err, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

/**
 * cp_buf_truncate() - keep the first @len bytes (a larger @len keeps
 * everything). The allocation is kept.
 */
void cp_buf_truncate(struct cp_buf *b, size_t len);

/**
 * cp_buf_tail() - keep the last @keep bytes, moved to the front (a larger
 * @keep keeps everything). For a consumer that eats its buffer from the
 * front. The allocation is kept.
 */
void cp_buf_tail(struct cp_buf *b, size_t keep);

/** cp_buf_reset() - empty the buffer, keeping its allocation and limit. */
void cp_buf_reset(struct cp_buf *b);

/**
 * cp_buf_free() - release the bytes. The buffer is empty and keeps its
 * limit: it may be used again without cp_buf_init().
 */
void cp_buf_free(struct cp_buf *b);

/**
 * cp_buf_take() - hand the contents to the caller.
 * @len: if not NULL, receives their length (without the NUL).
 *
 * The buffer is then empty (nothing allocated) with the same limit.
 *
 * Return: the NUL-terminated bytes (free with free()); an empty buffer gives
 * a new "". NULL only when that one byte could not be allocated
 * (CP_E_NOMEM; the buffer is unchanged).
 */
char *cp_buf_take(struct cp_buf *b, size_t *len, struct cp_err *err);

/* The contents of every buffer with nothing allocated (buf.c). */
extern char cp_buf_empty[1];

/**
 * cp_buf_ptr() - the contents, NUL-terminated; never NULL (a static "" when
 * nothing is allocated). The caller may change bytes [0, len) in place, never
 * the NUL nor anything past it.
 */
static inline char *cp_buf_ptr(const struct cp_buf *b)
{
	return b->bytes ? b->bytes : cp_buf_empty;
}

/** cp_buf_len() - the length of the contents, without the NUL. */
static inline size_t cp_buf_len(const struct cp_buf *b)
{
	return b->len;
}

/**
 * cp_buf_cap() - how long the contents may grow before the next allocation
 * (0 when nothing is allocated). For owners that release a big buffer
 * after use rather than keep it.
 */
static inline size_t cp_buf_cap(const struct cp_buf *b)
{
	return b->alloc ? b->alloc - 1 : 0;
}

/**
 * cp_array_grow() - room for at least @need elements of @size bytes in the
 * array @v, which has room for *@cap now (NULL and 0 for a new array).
 *
 * The one growing array of structs: callers keep their own count and store
 * the result back (v = cp_array_grow(v, ...)). When growth is needed the
 * room at least doubles, so a full array always gets room for as many more
 * elements again (a ring buffer can unwrap into it).
 *
 * Return: the array, moved or not, with *@cap >= @need; or NULL with @err
 * set (CP_E_NOMEM, also when @need * @size overflows; CP_E_INTERNAL for a
 * @size of 0), @v and *@cap then unchanged and @v still the caller's.
 */
void *cp_array_grow(void *v, size_t *cap, size_t need, size_t size, struct cp_err *err);

#endif
