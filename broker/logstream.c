/*
 * logstream.c - coalesced, bounded live output (logstream.h).
 */
#include <stdlib.h>
#include <string.h>

#include "broker/logstream.h"
#include "base/utf8.h"

struct segment {
	size_t off, len;
	int is_stderr;
};

struct broker_logstream {
	char *buf;
	size_t cap, used;
	struct segment *segs;
	size_t max_segs, nsegs;
	unsigned long long dropped; /* since the last flush, after the last segment */
};

struct broker_logstream *broker_logstream_new(size_t max_bytes, size_t max_segments)
{
	if (!max_bytes || !max_segments)
		return NULL;
	struct broker_logstream *ls = calloc(1, sizeof *ls);
	if (!ls)
		return NULL;
	ls->buf = malloc(max_bytes);
	ls->segs = calloc(max_segments, sizeof *ls->segs);
	if (!ls->buf || !ls->segs) {
		broker_logstream_free(ls);
		return NULL;
	}
	ls->cap = max_bytes;
	ls->max_segs = max_segments;
	return ls;
}

void broker_logstream_free(struct broker_logstream *ls)
{
	if (!ls)
		return;
	free(ls->buf);
	free(ls->segs);
	free(ls);
}

/* The longest prefix of @len bytes of @buf that fits in @room and does not
 * end inside a UTF-8 character (when it is shorter than the whole). */
static size_t fitting(const char *buf, size_t len, size_t room)
{
	if (len <= room)
		return len;
	size_t n = room;
	while (n > 0 && ((unsigned char)buf[n] & 0xC0) == 0x80)
		n--;
	return n;
}

void broker_logstream_feed(struct broker_logstream *ls, int is_stderr, const char *buf, size_t len)
{
	if (!len)
		return;
	is_stderr = is_stderr ? 1 : 0;
	struct segment *last = ls->nsegs ? &ls->segs[ls->nsegs - 1] : NULL;
	int same = last && last->is_stderr == is_stderr && !ls->dropped;
	if (!same && ls->nsegs == ls->max_segs) {
		ls->dropped += len;
		return;
	}
	size_t take = ls->dropped ? 0 : fitting(buf, len, ls->cap - ls->used);
	if (take) {
		if (!same) {
			last = &ls->segs[ls->nsegs++];
			last->off = ls->used;
			last->len = 0;
			last->is_stderr = is_stderr;
		}
		memcpy(ls->buf + ls->used, buf, take);
		ls->used += take;
		last->len += take;
	}
	ls->dropped += len - take;
}

int broker_logstream_pending(const struct broker_logstream *ls)
{
	return ls->nsegs > 0 || ls->dropped > 0;
}

void broker_logstream_flush(struct broker_logstream *ls, broker_logstream_emit_fn emit, void *ud)
{
	unsigned long long lost = 0;
	if (ls->nsegs == 0 && ls->dropped) /* not one character fitted */
		emit(ud, 0, "", 0, ls->dropped);
	for (size_t i = 0; i < ls->nsegs; i++) {
		const struct segment *sg = &ls->segs[i];
		int final = i + 1 == ls->nsegs;
		size_t n = 0;
		char *text = cp_utf8_sanitize(ls->buf + sg->off, sg->len, &n);
		if (!text) {
			lost += sg->len;
			continue;
		}
		emit(ud, sg->is_stderr, text, n, final ? ls->dropped + lost : 0);
		free(text);
	}
	ls->nsegs = 0;
	ls->used = 0;
	ls->dropped = 0;
}
