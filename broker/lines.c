#include "broker/lines.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct broker_lines {
	size_t max;
	char *buf; /* max + 1 bytes: a line's start, split across feeds */
	size_t len;
	int discarding;          /* inside an oversize line */
	unsigned long long dlen; /* its bytes so far */
	char dlast;              /* its last byte (to drop a trailing \r) */
};

struct broker_lines *broker_lines_new(size_t max_line)
{
	struct broker_lines *l = NULL;

	if (max_line == SIZE_MAX)
		return NULL;
	l = calloc(1, sizeof *l);
	if (!l)
		return NULL;
	l->buf = malloc(max_line + 1);
	if (!l->buf) {
		free(l);
		return NULL;
	}
	l->max = max_line;
	return l;
}

void broker_lines_free(struct broker_lines *l)
{
	if (!l)
		return;
	free(l->buf);
	free(l);
}

/* A whole line (no \n): strip one \r, skip empties, enforce the limit. */
static void deliver(struct broker_lines *l, const char *line, size_t len,
                    const struct broker_lines_sink *s, void *ud)
{
	if (len > 0 && line[len - 1] == '\r')
		len--;
	if (len == 0)
		return;
	if (len > l->max) {
		if (s->oversize)
			s->oversize(ud, len);
		return;
	}
	if (s->line)
		s->line(ud, line, len);
}

static void end_oversize(struct broker_lines *l, const struct broker_lines_sink *s, void *ud)
{
	unsigned long long n = l->dlen;

	if (n > 0 && l->dlast == '\r')
		n--;
	l->discarding = 0;
	l->dlen = 0;
	if (n > 0 && s->oversize)
		s->oversize(ud, n);
}

/* Bytes [seg, seg + n) of a line; `ends` when a \n follows them. */
static void segment(struct broker_lines *l, const char *seg, size_t n, int ends,
                    const struct broker_lines_sink *s, void *ud)
{
	if (!l->discarding && l->len + n > l->max + 1) {
		/* Over max even without a \r: stop buffering, just count. */
		l->discarding = 1;
		l->dlen = l->len;
		if (l->len > 0)
			l->dlast = l->buf[l->len - 1];
		l->len = 0;
	}
	if (l->discarding) {
		l->dlen += n;
		if (n > 0)
			l->dlast = seg[n - 1];
		if (ends)
			end_oversize(l, s, ud);
		return;
	}
	if (ends && l->len == 0) {
		deliver(l, seg, n, s, ud); /* no copy */
		return;
	}
	memcpy(l->buf + l->len, seg, n);
	l->len += n;
	if (ends) {
		size_t total = l->len;

		l->len = 0;
		deliver(l, l->buf, total, s, ud);
	}
}

void broker_lines_feed(struct broker_lines *l, const char *buf, size_t len,
                       const struct broker_lines_sink *s, void *ud)
{
	size_t pos = 0;

	while (pos < len) {
		const char *nl = memchr(buf + pos, '\n', len - pos);
		size_t end = nl ? (size_t)(nl - buf) : len;

		segment(l, buf + pos, end - pos, nl != NULL, s, ud);
		pos = nl ? end + 1 : len;
	}
}

void broker_lines_finish(struct broker_lines *l, const struct broker_lines_sink *s, void *ud)
{
	if (l->discarding) {
		end_oversize(l, s, ud);
	} else if (l->len > 0) {
		size_t n = l->len;

		l->len = 0;
		deliver(l, l->buf, n, s, ud);
	}
}
