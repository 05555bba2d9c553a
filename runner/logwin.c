#include "runner/logwin.h"

#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"

int cp_logwin_init(struct cp_logwin *w, size_t cap, struct cp_err *err)
{
	(void)err;
	memset(w, 0, sizeof *w);
	w->cap = cap;
	return 0;
}

/* Grows the buffer toward cap. Until it is full the data is linear from 0
 * (the ring wraps only at cap), so realloc keeps it in place. Returns 0, or
 * -1 when memory ran out (the output is then dropped, and counted). */
static int reserve(struct cp_logwin *w, size_t add)
{
	size_t need = w->len + add < w->cap ? w->len + add : w->cap;
	if (need <= w->alloc)
		return 0;
	size_t n = w->alloc ? w->alloc * 2 : 4096;
	if (n < need)
		n = need;
	if (n > w->cap)
		n = w->cap;
	char *nb = realloc(w->buf, n);
	if (!nb)
		return -1;
	w->buf = nb;
	w->alloc = n;
	return 0;
}

/* Copies buf into the ring at offset `at`, wrapping at cap (len <= cap). */
static void ring_put(struct cp_logwin *w, size_t at, const char *buf, size_t len)
{
	size_t first = w->cap - at;

	if (first > len)
		first = len;
	memcpy(w->buf + at, buf, first);
	memcpy(w->buf, buf + first, len - first);
}

void cp_logwin_append(struct cp_logwin *w, const char *buf, size_t len)
{
	size_t end;

	w->total += len;
	if (w->total > w->cap)
		w->truncated = 1;
	if (w->cap == 0 || len == 0)
		return;
	if (reserve(w, len)) {
		w->truncated = 1;
		return;
	}
	if (len >= w->cap) {
		memcpy(w->buf, buf + (len - w->cap), w->cap);
		w->start = 0;
		w->len = w->cap;
		return;
	}
	if (w->len + len > w->cap) {
		size_t drop = w->len + len - w->cap;

		w->start = (w->start + drop) % w->cap;
		w->len -= drop;
	}
	end = (w->start + w->len) % w->cap;
	ring_put(w, end, buf, len);
	w->len += len;
}

char *cp_logwin_take(const struct cp_logwin *w, size_t *len_out)
{
	const char *src = NULL;
	char *tmp = NULL, *out = NULL;
	size_t n = w->len, first, skip = 0;

	if (n == 0)
		return cp_utf8_sanitize(NULL, 0, len_out);
	first = w->cap - w->start;
	if (first >= n) {
		src = w->buf + w->start;
	} else {
		tmp = malloc(n);
		if (!tmp)
			return NULL;
		memcpy(tmp, w->buf + w->start, first);
		memcpy(tmp + first, w->buf, n - first);
		src = tmp;
	}
	/* A character cut by the window leaves at most 3 continuation bytes. */
	if (w->truncated)
		while (skip < 3 && skip < n && ((unsigned char)src[skip] & 0xc0) == 0x80)
			skip++;
	out = cp_utf8_sanitize(src + skip, n - skip, len_out);
	free(tmp);
	return out;
}

void cp_logwin_free(struct cp_logwin *w)
{
	free(w->buf);
	memset(w, 0, sizeof *w);
}
