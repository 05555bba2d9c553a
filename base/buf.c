/* buf.c - the growing buffer and the growing array (see buf.h). The only
 * file of the product that calls realloc. */
#include "base/buf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* First allocation of a buffer that starts small (bytes, NUL included). */
#define FIRST_ALLOC 64
/* First room of an array, in elements. */
#define FIRST_ELEMS 8

char cp_buf_empty[1];

void cp_buf_init(struct cp_buf *b, size_t limit)
{
	memset(b, 0, sizeof *b);
	b->limit = limit;
}

int cp_buf_set_limit(struct cp_buf *b, size_t limit, struct cp_err *err)
{
	if (b->len > limit)
		return cp_err_set(err, CP_E_TOO_BIG, "buffer holds %zu bytes, over the new %zu-byte limit",
		                  b->len, limit);
	b->limit = limit;
	return 0;
}

/* Room for @add more bytes and the NUL, within the limit. Changes nothing
 * but the allocation; on failure not even that. */
static int reserve(struct cp_buf *b, size_t add, struct cp_err *err)
{
	if (add > b->limit - b->len)
		return cp_err_set(err, CP_E_TOO_BIG, "%zu more bytes would take a buffer of %zu "
		                  "over its %zu-byte limit", add, b->len, b->limit);
	if (b->len + add == SIZE_MAX)
		return cp_err_set(err, CP_E_NOMEM, "no room for a buffer's NUL");
	size_t fit = b->len + add + 1;
	if (fit <= b->alloc)
		return 0;
	/* The limit caps the allocation: limit + 1, the NUL's byte included. */
	size_t most = b->limit < SIZE_MAX ? b->limit + 1 : SIZE_MAX;
	size_t a;
	if (b->alloc == 0) {
		a = fit < FIRST_ALLOC ? FIRST_ALLOC : fit;
	} else {
		a = b->alloc;
		while (a < fit)
			a = a > most / 2 ? most : a * 2;
	}
	if (a > most)
		a = most;
	char *nb = realloc(b->bytes, a);
	if (!nb)
		return cp_err_set(err, CP_E_NOMEM, "out of memory growing a buffer to %zu bytes", a);
	b->bytes = nb;
	b->alloc = a;
	return 0;
}

int cp_buf_add(struct cp_buf *b, const void *p, size_t len, struct cp_err *err)
{
	if (len == 0)
		return 0;
	int rc = reserve(b, len, err);
	if (rc)
		return rc;
	memcpy(b->bytes + b->len, p, len);
	b->len += len;
	b->bytes[b->len] = '\0';
	return 0;
}

int cp_buf_vaddf(struct cp_buf *b, struct cp_err *err, const char *fmt, va_list ap)
{
	/* Formatted in place when it fits (the common case), else measured,
	 * grown and formatted again. */
	size_t room = b->alloc - (b->alloc ? b->len : 0);
	va_list again;
	va_copy(again, ap);
	int n = vsnprintf(room ? b->bytes + b->len : NULL, room, fmt, ap);
	if (n >= 0 && (size_t)n < room) {
		b->len += (size_t)n;
		va_end(again);
		return 0;
	}
	if (b->bytes)
		b->bytes[b->len] = '\0'; /* a cut attempt overwrote the NUL */
	int rc = 0;
	if (n < 0)
		rc = cp_err_set(err, CP_E_INTERNAL, "cannot format \"%.40s\"", fmt);
	else if (n > 0 && (rc = reserve(b, (size_t)n, err)) == 0) {
		vsnprintf(b->bytes + b->len, (size_t)n + 1, fmt, again);
		b->len += (size_t)n;
	}
	va_end(again);
	return rc;
}

int cp_buf_addf(struct cp_buf *b, struct cp_err *err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = cp_buf_vaddf(b, err, fmt, ap);
	va_end(ap);
	return rc;
}

void cp_buf_truncate(struct cp_buf *b, size_t len)
{
	if (len >= b->len)
		return;
	b->len = len;
	b->bytes[len] = '\0';
}

void cp_buf_tail(struct cp_buf *b, size_t keep)
{
	if (keep >= b->len)
		return;
	memmove(b->bytes, b->bytes + (b->len - keep), keep);
	b->len = keep;
	b->bytes[keep] = '\0';
}

void cp_buf_reset(struct cp_buf *b)
{
	b->len = 0;
	if (b->bytes)
		b->bytes[0] = '\0';
}

void cp_buf_free(struct cp_buf *b)
{
	free(b->bytes);
	b->bytes = NULL;
	b->len = 0;
	b->alloc = 0;
}

char *cp_buf_take(struct cp_buf *b, size_t *len, struct cp_err *err)
{
	char *p = b->bytes;
	if (!p) {
		p = malloc(1);
		if (!p) {
			cp_err_set(err, CP_E_NOMEM, "out of memory");
			return NULL;
		}
		p[0] = '\0';
	}
	if (len)
		*len = b->len;
	b->bytes = NULL;
	b->len = 0;
	b->alloc = 0;
	return p;
}

void *cp_array_grow(void *v, size_t *cap, size_t need, size_t size, struct cp_err *err)
{
	if (need <= *cap)
		return v;
	if (size == 0) {
		cp_err_set(err, CP_E_INTERNAL, "array of zero-sized elements");
		return NULL;
	}
	size_t n = *cap < FIRST_ELEMS / 2 ? FIRST_ELEMS : *cap;
	while (n < need || n < *cap * 2) {
		if (n > SIZE_MAX / 2) {
			cp_err_set(err, CP_E_NOMEM, "an array of %zu elements is too large", need);
			return NULL;
		}
		n *= 2;
	}
	if (n > SIZE_MAX / size) {
		cp_err_set(err, CP_E_NOMEM, "an array of %zu elements is too large", need);
		return NULL;
	}
	void *nv = realloc(v, n * size);
	if (!nv) {
		cp_err_set(err, CP_E_NOMEM, "out of memory growing an array to %zu elements", n);
		return NULL;
	}
	*cap = n;
	return nv;
}
