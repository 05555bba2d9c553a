/* Unit tests for runner/frame.c: the runner -> codepod stdout stream parser. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "runner/frame.h"

#define NONCE "0123456789abcdef0123456789abcdef"
#define OTHER "0123456789abcdef0123456789abcdee"

/*
 * Records what the sink saw as one string: adjacent raw pieces are merged
 * (how raw is split depends on the feeds, its content must not), so the
 * record of one feed equals the record of any chunking of the same bytes.
 */
struct rec {
	char *log;
	size_t len, cap;
	int in_raw;
	size_t raw_calls, frames;
};

static void rec_put(struct rec *r, const void *buf, size_t len)
{
	if (r->len + len + 1 > r->cap) {
		size_t ncap = r->cap ? r->cap : 256;

		while (ncap < r->len + len + 1)
			ncap *= 2;
		r->log = realloc(r->log, ncap);
		assert_non_null(r->log);
		r->cap = ncap;
	}
	memcpy(r->log + r->len, buf, len);
	r->len += len;
	r->log[r->len] = '\0';
}

static void on_raw(void *ud, const char *buf, size_t len)
{
	struct rec *r = ud;

	assert_true(len > 0);
	if (!r->in_raw)
		rec_put(r, "<raw>", 5);
	r->in_raw = 1;
	r->raw_calls++;
	rec_put(r, buf, len);
}

static void on_frame(void *ud, char kind, const char *payload, size_t len)
{
	struct rec *r = ud;
	char head[64];
	int n = snprintf(head, sizeof head, "<frame %c %zu>", kind, len);

	assert_non_null(payload);
	r->in_raw = 0;
	r->frames++;
	rec_put(r, head, (size_t)n);
	rec_put(r, payload, len);
}

static const struct codepod_frame_sink sink = { on_raw, on_frame };

static void rec_free(struct rec *r)
{
	free(r->log);
	memset(r, 0, sizeof *r);
}

/* Appends a frame (header + payload) to a growing buffer. */
static void add_frame(struct rec *b, const char *nonce, char kind, const char *payload, size_t len)
{
	char h[CODEPOD_FRAME_HDR_MAX];
	int n = codepod_frame_header(h, sizeof h, nonce, kind, len);

	assert_true(n > 0);
	rec_put(b, h, (size_t)n);
	rec_put(b, payload, len);
}

static void add_str(struct rec *b, const char *s)
{
	rec_put(b, s, strlen(s));
}

/* Feeds the stream in pieces of the given sizes (cycled); 0 = all at once. */
static int run(const char *buf, size_t len, const size_t *sizes, size_t nsizes,
               size_t max_payload, struct rec *r, int *cut)
{
	struct codepod_frame_parser *p = codepod_frame_parser_new(NONCE, max_payload);
	size_t pos = 0, k = 0;
	int rc = 0;

	assert_non_null(p);
	memset(r, 0, sizeof *r);
	while (pos < len && rc == 0) {
		size_t n = nsizes ? sizes[k++ % nsizes] : len;

		if (n > len - pos)
			n = len - pos;
		rc = codepod_frame_feed(p, buf + pos, n, &sink, r, NULL);
		pos += n;
	}
	if (rc == 0)
		*cut = codepod_frame_finish(p, &sink, r);
	codepod_frame_parser_free(p);
	if (!r->log)
		rec_put(r, "", 0);
	return rc;
}

static void expect(const char *buf, size_t len, const char *want, int want_cut)
{
	struct rec r;
	int cut = -1;

	assert_int_equal(run(buf, len, NULL, 0, 1 << 20, &r, &cut), 0);
	assert_string_equal(r.log, want);
	assert_int_equal(cut, want_cut);
	rec_free(&r);
}

static void test_header_writer(void **state)
{
	char h[CODEPOD_FRAME_HDR_MAX];
	char small[10];

	(void)state;
	/* 1 + "cp1 " + 32 + " O " + "12" + "\n" = 43 */
	assert_int_equal(codepod_frame_header(h, sizeof h, NONCE, 'O', 12), 43);
	assert_memory_equal(h, "\x1e" "cp1 " NONCE " O 12\n", 44);
	assert_int_equal(codepod_frame_header(h, sizeof h, NONCE, 'N', 0), 42);
	assert_int_equal(codepod_frame_header(h, sizeof h, NONCE, 'Q', 0), -1);
	assert_int_equal(codepod_frame_header(h, sizeof h, "0123456789ABCDEF0123456789abcdef", 'O', 0), -1);
	assert_int_equal(codepod_frame_header(h, sizeof h, "0123", 'O', 0), -1);
	assert_int_equal(codepod_frame_header(small, sizeof small, NONCE, 'O', 0), -1);
	assert_int_equal(codepod_frame_header(h, 42, NONCE, 'N', 0), -1);
	assert_int_equal(codepod_frame_header(h, 43, NONCE, 'N', 0), 42);
	/* The longest header: 20 digits, 61 bytes. */
	assert_int_equal(codepod_frame_header(h, sizeof h, NONCE, 'O', SIZE_MAX), 61);
}

static void test_new_rejects_bad_nonce(void **state)
{
	(void)state;
	assert_null(codepod_frame_parser_new(NULL, 10));
	assert_null(codepod_frame_parser_new("", 10));
	assert_null(codepod_frame_parser_new("0123456789abcdef0123456789abcde", 10));
	assert_null(codepod_frame_parser_new("0123456789abcdef0123456789abcdeF", 10));
	assert_null(codepod_frame_parser_new("g123456789abcdef0123456789abcdef", 10));
	codepod_frame_parser_free(NULL);
}

static void test_simple_frames(void **state)
{
	struct rec b = { 0 };

	(void)state;
	add_frame(&b, NONCE, 'Y', "{\"pid\":7}", 9);
	add_frame(&b, NONCE, 'O', "hello\n", 6);
	add_frame(&b, NONCE, 'N', "", 0);
	expect(b.log, b.len, "<frame Y 9>{\"pid\":7}<frame O 6>hello\n<frame N 0>", 0);
	rec_free(&b);
}

static void test_every_kind(void **state)
{
	const char *k;

	(void)state;
	for (k = "YOECRZTNX"; *k; k++) {
		struct rec b = { 0 };
		char want[64];

		add_frame(&b, NONCE, *k, "xy", 2);
		snprintf(want, sizeof want, "<frame %c 2>xy", *k);
		expect(b.log, b.len, want, 0);
		rec_free(&b);
	}
}

static void test_raw_around_frames(void **state)
{
	struct rec b = { 0 };

	(void)state;
	add_str(&b, "before ");
	add_frame(&b, NONCE, 'O', "a", 1);
	add_str(&b, "between");
	add_frame(&b, NONCE, 'E', "b", 1);
	add_str(&b, " after");
	expect(b.log, b.len, "<raw>before <frame O 1>a<raw>between<frame E 1>b<raw> after", 0);
	rec_free(&b);
}

static void test_wrong_nonce_is_raw(void **state)
{
	struct rec b = { 0 }, want = { 0 };

	(void)state;
	add_frame(&b, OTHER, 'O', "forged", 6);
	add_str(&want, "<raw>");
	rec_put(&want, b.log, b.len);
	expect(b.log, b.len, want.log, 0);
	rec_free(&b);
	rec_free(&want);
}

/* Each malformed header is raw, and a real frame right after still parses. */
static void test_malformed_headers(void **state)
{
	static const char *const bad[] = {
		"\x1e" "cp1 " NONCE " O +3\n",
		"\x1e" "cp1 " NONCE " O -3\n",
		"\x1e" "cp1 " NONCE " O \n",
		"\x1e" "cp1 " NONCE " O 3 \n",
		"\x1e" "cp1 " NONCE " O 3\r\n",
		"\x1e" "cp1 " NONCE " Q 3\n",
		"\x1e" "cp1 " NONCE " o 3\n",
		"\x1e" "cp1 " NONCE "  O 3\n",
		"\x1e" "cp1 " NONCE "O 3\n",
		"\x1e" "cp1  " NONCE " O 3\n",
		"\x1e" " cp1 " NONCE " O 3\n",
		"\x1e" "cp2 " NONCE " O 3\n",
		"\x1e" "CP1 " NONCE " O 3\n",
		"\x1e" "cp1 0123456789ABCDEF0123456789abcdef O 3\n",
		"\x1e" "cp1 " NONCE "0 O 3\n",
		"\x1e" "cp1 0123456789abcdef0123456789abcde O 3\n",
		"\x1e" "cp1 " NONCE " O 123456789012345678901\n",   /* 21 digits */
		"\x1e" "cp1 " NONCE " O 18446744073709551616\n",   /* 2^64 */
		"\x1e" "cp1 " NONCE " O 99999999999999999999\n",
		"\x1e" "cp1 " NONCE " O 3",
		"\x1e" "cp1 " NONCE " O",
		"\x1e" "cp1 " NONCE,
		"\x1e" "cp1",
		"\x1e",
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct rec b = { 0 }, want = { 0 };

		add_str(&b, bad[i]);
		add_frame(&b, NONCE, 'O', "ok", 2);
		add_str(&want, "<raw>");
		add_str(&want, bad[i]);
		add_str(&want, "<frame O 2>ok");
		expect(b.log, b.len, want.log, 0);
		rec_free(&b);
		rec_free(&want);
	}
}

static void test_leading_zeros_and_max_digits(void **state)
{
	struct rec b = { 0 };

	(void)state;
	add_str(&b, "\x1e" "cp1 " NONCE " O 003\nabc");
	add_str(&b, "\x1e" "cp1 " NONCE " E 00000000000000000002\nde");
	expect(b.log, b.len, "<frame O 3>abc<frame E 2>de", 0);
	rec_free(&b);
}

/* A header-like prefix followed by a real header: the prefix's 0x1E is raw,
 * and scanning resumes right after it, so the real frame is not swallowed. */
static void test_garbage_then_frame(void **state)
{
	struct rec b = { 0 }, want = { 0 };

	(void)state;
	add_str(&b, "\x1e\x1e\x1e" "cp1 " NONCE " O 1");
	add_frame(&b, NONCE, 'O', "abc", 3);
	add_str(&b, "\x1e" "cp1 01");
	add_frame(&b, NONCE, 'R', "42", 2);
	add_str(&want, "<raw>\x1e\x1e\x1e" "cp1 " NONCE " O 1<frame O 3>abc<raw>\x1e" "cp1 01<frame R 2>42");
	expect(b.log, b.len, want.log, 0);
	rec_free(&b);
	rec_free(&want);
}

/* Bytes inside a payload are payload, even when they look like a header. */
static void test_payload_is_opaque(void **state)
{
	struct rec inner = { 0 }, b = { 0 }, want = { 0 };
	char head[64];

	(void)state;
	add_frame(&inner, NONCE, 'T', "x", 1);
	add_str(&inner, "\x1e\x1e\n");
	add_frame(&b, NONCE, 'O', inner.log, inner.len);
	snprintf(head, sizeof head, "<frame O %zu>", inner.len);
	add_str(&want, head);
	rec_put(&want, inner.log, inner.len);
	expect(b.log, b.len, want.log, 0);
	rec_free(&inner);
	rec_free(&b);
	rec_free(&want);
}

static void test_finish_partial_header(void **state)
{
	(void)state;
	expect("out\x1e" "cp1 " NONCE " O 1", 4 + 4 + 32 + 4,
	       "<raw>out\x1e" "cp1 " NONCE " O 1", 0);
	expect("\x1e", 1, "<raw>\x1e", 0);
}

static void test_finish_partial_payload(void **state)
{
	struct rec b = { 0 }, r;
	int cut = -1;

	(void)state;
	add_str(&b, "x");
	add_frame(&b, NONCE, 'O', "abcdef", 6);
	b.len -= 2; /* cut "ef" */
	assert_int_equal(run(b.log, b.len, NULL, 0, 100, &r, &cut), 0);
	assert_string_equal(r.log, "<raw>xabcd");
	assert_int_equal(cut, 1);
	rec_free(&r);
	/* Header complete, no payload yet. */
	b.len -= 4;
	assert_int_equal(run(b.log, b.len, NULL, 0, 100, &r, &cut), 0);
	assert_string_equal(r.log, "<raw>x");
	assert_int_equal(cut, 1);
	rec_free(&r);
	rec_free(&b);
}

static void test_finish_resets(void **state)
{
	struct codepod_frame_parser *p = codepod_frame_parser_new(NONCE, 100);
	struct rec r = { 0 };
	char h[CODEPOD_FRAME_HDR_MAX];
	int n = codepod_frame_header(h, sizeof h, NONCE, 'O', 3);

	(void)state;
	assert_int_equal(codepod_frame_feed(p, h, (size_t)n, &sink, &r, NULL), 0);
	assert_int_equal(codepod_frame_feed(p, "a", 1, &sink, &r, NULL), 0);
	assert_int_equal(codepod_frame_finish(p, &sink, &r), 1);
	assert_int_equal(codepod_frame_finish(p, &sink, &r), 0);
	assert_int_equal(codepod_frame_feed(p, h, (size_t)n, &sink, &r, NULL), 0);
	assert_int_equal(codepod_frame_feed(p, "xyz", 3, &sink, &r, NULL), 0);
	assert_int_equal(codepod_frame_finish(p, &sink, &r), 0);
	assert_string_equal(r.log, "<raw>a<frame O 3>xyz");
	rec_free(&r);
	codepod_frame_parser_free(p);
}

static void test_too_big_sticky(void **state)
{
	struct codepod_frame_parser *p = codepod_frame_parser_new(NONCE, 10);
	struct rec b = { 0 }, r = { 0 };
	struct cp_err err = { 0 };

	(void)state;
	add_frame(&b, NONCE, 'O', "0123456789", 10); /* exactly the limit: fine */
	add_str(&b, "raw");
	add_str(&b, "\x1e" "cp1 " NONCE " O 11\n");
	add_str(&b, "after");
	assert_int_equal(codepod_frame_feed(p, b.log, b.len, &sink, &r, &err), CP_E_TOO_BIG);
	assert_int_equal(err.code, CP_E_TOO_BIG);
	assert_non_null(strstr(err.msg, "11"));
	assert_string_equal(r.log, "<frame O 10>0123456789<raw>raw");
	assert_int_equal(codepod_frame_feed(p, "more", 4, &sink, &r, NULL), CP_E_TOO_BIG);
	assert_int_equal(codepod_frame_feed(p, "", 0, &sink, &r, NULL), CP_E_TOO_BIG);
	assert_int_equal(codepod_frame_finish(p, &sink, &r), 0);
	assert_string_equal(r.log, "<frame O 10>0123456789<raw>raw");
	codepod_frame_parser_free(p);
	rec_free(&b);
	rec_free(&r);
}

static void test_too_big_split_header(void **state)
{
	const char *h = "\x1e" "cp1 " NONCE " O 18446744073709551615\n";
	struct codepod_frame_parser *p = codepod_frame_parser_new(NONCE, 1000);
	struct rec r = { 0 };
	size_t i, n = strlen(h);
	int rc = 0;

	(void)state;
	for (i = 0; i < n && rc == 0; i++)
		rc = codepod_frame_feed(p, h + i, 1, &sink, &r, NULL);
	assert_int_equal(rc, CP_E_TOO_BIG);
	assert_int_equal(i, n);
	assert_null(r.log);
	codepod_frame_parser_free(p);
}

static void test_null_sink_members(void **state)
{
	struct codepod_frame_parser *p = codepod_frame_parser_new(NONCE, 100);
	const struct codepod_frame_sink none = { NULL, NULL };
	struct rec b = { 0 };

	(void)state;
	add_str(&b, "raw");
	add_frame(&b, NONCE, 'O', "abc", 3);
	assert_int_equal(codepod_frame_feed(p, b.log, b.len, &none, NULL, NULL), 0);
	assert_int_equal(codepod_frame_finish(p, &none, NULL), 0);
	codepod_frame_parser_free(p);
	rec_free(&b);
}

/* A stream mixing everything; the record must not depend on the chunking. */
static void build_mixed(struct rec *b)
{
	char payload[300];
	size_t i;

	for (i = 0; i < sizeof payload; i++)
		payload[i] = (char)(i * 7 + 3);
	add_str(b, "start\x1e\x1e");
	add_frame(b, NONCE, 'Y', "{\"pid\":1}", 9);
	add_str(b, "\x1e" "cp1 " NONCE " O 5"); /* cut header */
	add_frame(b, NONCE, 'O', payload, sizeof payload);
	add_frame(b, OTHER, 'O', "forged", 6);
	add_frame(b, NONCE, 'E', "", 0);
	add_str(b, "\x1e" "cp1 " NONCE " Q 1\n");
	add_frame(b, NONCE, 'C', "{\"c\":1,\"t\":\"x\",\"i\":{}}", 22);
	add_str(b, "\x1e" "cp1 " NONCE " O 123456789012345678901\n");
	add_frame(b, NONCE, 'E', payload, 100);
	add_str(b, "tail\x1e" "cp1 ");
}

static void test_splits_every_position(void **state)
{
	struct rec b = { 0 }, whole, r;
	size_t one = 1, i;
	int cut = -1;

	(void)state;
	build_mixed(&b);
	assert_int_equal(run(b.log, b.len, NULL, 0, 1000, &whole, &cut), 0);
	assert_int_equal(whole.frames, 5);
	assert_int_equal(cut, 0);
	/* One byte at a time. */
	assert_int_equal(run(b.log, b.len, &one, 1, 1000, &r, &cut), 0);
	assert_string_equal(r.log, whole.log);
	rec_free(&r);
	/* Two pieces, split at every position. */
	for (i = 1; i < b.len; i++) {
		size_t sizes[2] = { i, b.len };

		assert_int_equal(run(b.log, b.len, sizes, 2, 1000, &r, &cut), 0);
		assert_string_equal(r.log, whole.log);
		rec_free(&r);
	}
	/* Three pieces around every position, so a header spans three feeds. */
	for (i = 1; i + 2 < b.len; i++) {
		size_t sizes[3] = { i, 2, b.len };

		assert_int_equal(run(b.log, b.len, sizes, 3, 1000, &r, &cut), 0);
		assert_string_equal(r.log, whole.log);
		rec_free(&r);
	}
	rec_free(&whole);
	rec_free(&b);
}

static void test_splits_random(void **state)
{
	struct rec b = { 0 }, whole, r;
	unsigned seed = 12345;
	int iter, cut = -1;

	(void)state;
	build_mixed(&b);
	build_mixed(&b);
	assert_int_equal(run(b.log, b.len, NULL, 0, 1000, &whole, &cut), 0);
	for (iter = 0; iter < 500; iter++) {
		size_t sizes[16];
		size_t k;

		for (k = 0; k < 16; k++) {
			seed = seed * 1103515245u + 12345u;
			sizes[k] = 1 + (seed >> 16) % (iter % 3 == 0 ? 5 : 90);
		}
		assert_int_equal(run(b.log, b.len, sizes, 16, 1000, &r, &cut), 0);
		assert_string_equal(r.log, whole.log);
		rec_free(&r);
	}
	rec_free(&whole);
	rec_free(&b);
}

/* Raw output arrives in as few pieces as possible: one per feed here. */
static void test_raw_not_per_byte(void **state)
{
	struct codepod_frame_parser *p = codepod_frame_parser_new(NONCE, 100);
	struct rec r = { 0 };
	char buf[4096];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof buf; i++)
		buf[i] = i % 5 == 0 ? '\x1e' : (char)('a' + i % 26);
	buf[sizeof buf - 1] = 'z';
	assert_int_equal(codepod_frame_feed(p, buf, sizeof buf, &sink, &r, NULL), 0);
	assert_int_equal(r.raw_calls, 1);
	assert_int_equal(r.len, 5 + sizeof buf);
	assert_int_equal(codepod_frame_feed(p, buf, 100, &sink, &r, NULL), 0);
	assert_int_equal(r.raw_calls, 2);
	codepod_frame_parser_free(p);
	rec_free(&r);
}

struct count {
	size_t frames, raw_calls, raw_bytes, payload_bytes;
};

static void count_raw(void *ud, const char *buf, size_t len)
{
	struct count *c = ud;

	(void)buf;
	c->raw_calls++;
	c->raw_bytes += len;
}

static void count_frame(void *ud, char kind, const char *payload, size_t len)
{
	struct count *c = ud;

	(void)payload;
	assert_int_equal(kind, 'O');
	c->frames++;
	c->payload_bytes += len;
}

/* 10 MB of 16 KiB O frames with raw garbage between them, fed in 64 KiB reads. */
static void test_bulk_stream(void **state)
{
	const struct codepod_frame_sink csink = { count_raw, count_frame };
	struct codepod_frame_parser *p = codepod_frame_parser_new(NONCE, 16384);
	struct count c = { 0 };
	char *stream = NULL, *payload = NULL;
	size_t len = 0, cap = 11u << 20, pos, frames = 0, garbage = 0;

	(void)state;
	stream = malloc(cap);
	payload = malloc(16384);
	assert_non_null(stream);
	assert_non_null(payload);
	memset(payload, 'p', 16384);
	while (len + 16384 + 200 < 10u << 20) {
		int n = codepod_frame_header(stream + len, 64, NONCE, 'O', 16384);

		len += (size_t)n;
		memcpy(stream + len, payload, 16384);
		len += 16384;
		frames++;
		if (frames % 3 == 0) {
			memcpy(stream + len, "junk\x1e" "cp1 zz\n", 12);
			len += 12;
			garbage += 12;
		}
	}
	for (pos = 0; pos < len; pos += 65536) {
		size_t n = len - pos < 65536 ? len - pos : 65536;

		assert_int_equal(codepod_frame_feed(p, stream + pos, n, &csink, &c, NULL), 0);
	}
	assert_int_equal(codepod_frame_finish(p, &csink, &c), 0);
	assert_int_equal(c.frames, frames);
	assert_int_equal(c.payload_bytes, frames * 16384);
	assert_int_equal(c.raw_bytes, garbage);
	assert_true(c.raw_calls <= frames / 3 + len / 65536 + 1);
	codepod_frame_parser_free(p);
	free(stream);
	free(payload);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_header_writer),
		cmocka_unit_test(test_new_rejects_bad_nonce),
		cmocka_unit_test(test_simple_frames),
		cmocka_unit_test(test_every_kind),
		cmocka_unit_test(test_raw_around_frames),
		cmocka_unit_test(test_wrong_nonce_is_raw),
		cmocka_unit_test(test_malformed_headers),
		cmocka_unit_test(test_leading_zeros_and_max_digits),
		cmocka_unit_test(test_garbage_then_frame),
		cmocka_unit_test(test_payload_is_opaque),
		cmocka_unit_test(test_finish_partial_header),
		cmocka_unit_test(test_finish_partial_payload),
		cmocka_unit_test(test_finish_resets),
		cmocka_unit_test(test_too_big_sticky),
		cmocka_unit_test(test_too_big_split_header),
		cmocka_unit_test(test_null_sink_members),
		cmocka_unit_test(test_splits_every_position),
		cmocka_unit_test(test_splits_random),
		cmocka_unit_test(test_raw_not_per_byte),
		cmocka_unit_test(test_bulk_stream),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
