#include "runner/logwin.h"

#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"

int codepod_logwin_init(struct codepod_logwin *w, size_t cap, struct cp_err *err)
{
	(void)err;
	memset(w, 0, sizeof *w);
	cp_buf_init(&w->ring, cap);
	w->cap = cap;
	return 0;
}

/* Copies buf into the ring at offset `at`, wrapping at cap (len <= cap). */
static void ring_put(struct codepod_logwin *w, size_t at, const char *buf, size_t len)
{
	char *ring = cp_buf_ptr(&w->ring);
	size_t first = w->cap - at;

	if (first > len)
		first = len;
	memcpy(ring + at, buf, first);
	memcpy(ring, buf + first, len - first);
}

void codepod_logwin_append(struct codepod_logwin *w, const char *buf, size_t len)
{
	size_t end, have = cp_buf_len(&w->ring);

	w->total += len;
	if (w->total > w->cap)
		w->truncated = 1;
	if (w->cap == 0 || len == 0)
		return;
	if (have < w->cap) {
		/* Not full yet: the window is the whole ring, linear from 0 (the
		 * ring wraps only at cap), and grows by appending. */
		size_t grow = len < w->cap - have ? len : w->cap - have;
		if (cp_buf_add(&w->ring, buf, grow, NULL)) {
			w->truncated = 1; /* out of memory: dropped, and counted */
			return;
		}
		if (grow == len) {
			w->len += len;
			return;
		}
		/* Full now, the bytes just added being the start of buf: the
		 * ring code below puts every byte of buf where it belongs. */
	}
	if (len >= w->cap) {
		memcpy(cp_buf_ptr(&w->ring), buf + (len - w->cap), w->cap);
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

char *codepod_logwin_take(const struct codepod_logwin *w, size_t *len_out)
{
	const char *src = NULL;
	char *tmp = NULL, *out = NULL;
	size_t n = w->len, first, skip = 0;

	if (n == 0)
		return cp_utf8_sanitize(NULL, 0, len_out);
	first = w->cap - w->start;
	if (first >= n) {
		src = cp_buf_ptr(&w->ring) + w->start;
	} else {
		tmp = malloc(n);
		if (!tmp)
			return NULL;
		memcpy(tmp, cp_buf_ptr(&w->ring) + w->start, first);
		memcpy(tmp + first, cp_buf_ptr(&w->ring), n - first);
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

void codepod_logwin_free(struct codepod_logwin *w)
{
	cp_buf_free(&w->ring);
	memset(w, 0, sizeof *w);
}
