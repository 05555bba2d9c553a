/* fuzz_frame.c - the frame parser on arbitrary bytes in arbitrary chunks.
 *
 * Byte 0 sets max_payload (0..255 * 8) and the log window size; bytes 1..8
 * are a cycle of chunk sizes (1..256); the rest is the stream. The stream is
 * parsed twice, whole and in chunks, and both must give the same record
 * (raw bytes merged, frames in order) and the same error. Raw output also
 * goes through a codepod_logwin whose codepod_logwin_take() must be valid UTF-8
 * (sanitizing it again changes nothing).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runner/frame.h"
#include "runner/logwin.h"
#include "base/utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NONCE "00112233445566778899aabbccddeeff"

struct rec {
	unsigned char *log;
	size_t len, cap;
	int in_raw;
	size_t max_payload;
	struct codepod_logwin *win;
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
	if (len)
		memcpy(r->log + r->len, buf, len);
	r->len += len;
}

static void on_raw(void *ud, const char *buf, size_t len)
{
	struct rec *r = ud;

	if (len == 0)
		abort();
	if (!r->in_raw)
		put(r, "R", 1);
	r->in_raw = 1;
	put(r, buf, len);
	if (r->win)
		codepod_logwin_append(r->win, buf, len);
}

static void on_frame(void *ud, char kind, const char *payload, size_t len)
{
	struct rec *r = ud;
	unsigned char head[1 + 1 + sizeof len];

	if (!payload || !strchr("YOECRZTNX", kind) || kind == '\0' || len > r->max_payload)
		abort();
	r->in_raw = 0;
	head[0] = 'F';
	head[1] = (unsigned char)kind;
	memcpy(head + 2, &len, sizeof len);
	put(r, head, sizeof head);
	put(r, payload, len);
}

static const struct codepod_frame_sink sink = { on_raw, on_frame };

static int parse(const uint8_t *s, size_t n, const size_t *chunks, size_t nchunks,
                 struct rec *r)
{
	struct codepod_frame_parser *p = codepod_frame_parser_new(NONCE, r->max_payload);
	size_t pos = 0, k = 0;
	int rc = 0;

	if (!p)
		abort();
	while (pos < n && rc == 0) {
		size_t c = nchunks ? chunks[k++ % nchunks] : n - pos;

		if (c > n - pos)
			c = n - pos;
		rc = codepod_frame_feed(p, (const char *)s + pos, c, &sink, r, NULL);
		pos += c;
	}
	if (rc == 0)
		rc = codepod_frame_finish(p, &sink, r) ? 1 : 0;
	else if (codepod_frame_feed(p, "x", 1, &sink, r, NULL) != rc)
		abort(); /* sticky */
	codepod_frame_parser_free(p);
	return rc;
}

static void check_window(const struct codepod_logwin *w)
{
	size_t n = 0, m = 0;
	char *s = codepod_logwin_take(w, &n);
	char *again = NULL;

	if (!s)
		abort();
	if (n > 3 * w->cap || strlen(s) != n)
		abort();
	again = cp_utf8_sanitize(s, n, &m);
	if (!again || m != n || memcmp(s, again, n) != 0)
		abort();
	free(again);
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rec whole = { 0 }, split = { 0 };
	struct codepod_logwin win;
	size_t chunks[8], i;
	int rc1, rc2;

	if (size < 9)
		return 0;
	for (i = 0; i < 8; i++)
		chunks[i] = (size_t)data[1 + i] + 1;
	whole.max_payload = split.max_payload = (size_t)data[0] * 8;
	if (codepod_logwin_init(&win, (size_t)data[0] % 64, NULL) != 0)
		return 0;
	split.win = &win;
	rc1 = parse(data + 9, size - 9, NULL, 0, &whole);
	rc2 = parse(data + 9, size - 9, chunks, 8, &split);
	if (rc1 != rc2 || whole.len != split.len ||
	    (whole.len && memcmp(whole.log, split.log, whole.len) != 0))
		abort();
	check_window(&win);
	codepod_logwin_free(&win);
	free(whole.log);
	free(split.log);
	return 0;
}
