/* fuzz_lines.c - the JSON-lines splitter on arbitrary bytes in arbitrary chunks.
 *
 * Byte 0 sets max_line (0..255); bytes 1..4 are a cycle of chunk sizes
 * (1..256); the rest is the stream. Parsed whole and in chunks: the records
 * must match, every line must be non-empty, at most max_line bytes and
 * without '\n' (only one trailing '\r' is stripped: "a\r\r\n" gives "a\r"),
 * and oversize lengths must exceed max_line.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "broker/lines.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct rec {
	unsigned char *log;
	size_t len, cap, max;
	unsigned long long bytes; /* line + oversize lengths, bounded by the input */
};

static void put(struct rec *r, const void *buf, size_t len)
{
	if (r->len + len > r->cap) {
		size_t ncap = r->cap ? r->cap : 1024;
		unsigned char *n;

		while (ncap < r->len + len)
			ncap *= 2;
		n = realloc(r->log, ncap);
		if (!n)
			abort();
		r->log = n;
		r->cap = ncap;
	}
	memcpy(r->log + r->len, buf, len);
	r->len += len;
}

static void on_line(void *ud, const char *line, size_t len)
{
	struct rec *r = ud;

	if (len == 0 || len > r->max || memchr(line, '\n', len))
		abort();
	r->bytes += len;
	put(r, "L", 1);
	put(r, &len, sizeof len);
	put(r, line, len);
}

static void on_oversize(void *ud, unsigned long long len)
{
	struct rec *r = ud;

	if (len <= r->max)
		abort();
	r->bytes += len;
	put(r, "O", 1);
	put(r, &len, sizeof len);
}

static const struct broker_lines_sink sink = { on_line, on_oversize };

static void split(const uint8_t *s, size_t n, const size_t *chunks, size_t nchunks,
                  struct rec *r)
{
	struct broker_lines *l = broker_lines_new(r->max);
	size_t pos = 0, k = 0;

	if (!l)
		abort();
	while (pos < n) {
		size_t c = nchunks ? chunks[k++ % nchunks] : n - pos;

		if (c > n - pos)
			c = n - pos;
		broker_lines_feed(l, (const char *)s + pos, c, &sink, r);
		pos += c;
	}
	broker_lines_finish(l, &sink, r);
	broker_lines_free(l);
	if (r->bytes > n)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rec whole = { 0 }, parts = { 0 };
	size_t chunks[4], i;

	if (size < 5)
		return 0;
	for (i = 0; i < 4; i++)
		chunks[i] = (size_t)data[1 + i] + 1;
	whole.max = parts.max = data[0];
	split(data + 5, size - 5, NULL, 0, &whole);
	split(data + 5, size - 5, chunks, 4, &parts);
	if (whole.len != parts.len || (whole.len && memcmp(whole.log, parts.log, whole.len) != 0))
		abort();
	free(whole.log);
	free(parts.log);
	return 0;
}
