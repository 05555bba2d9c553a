/* Unit tests for broker/lines.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "broker/lines.h"

/* Everything the sink saw, as "L<line>|" and "O<len>|". */
struct rec {
	char log[65536];
	size_t len;
};

static void on_line(void *ud, const char *line, size_t len)
{
	struct rec *r = ud;

	assert_true(len > 0);
	assert_true(r->len + len + 2 < sizeof r->log);
	r->log[r->len++] = 'L';
	memcpy(r->log + r->len, line, len);
	r->len += len;
	r->log[r->len++] = '|';
	r->log[r->len] = '\0';
}

static void on_oversize(void *ud, unsigned long long len)
{
	struct rec *r = ud;
	int n = snprintf(r->log + r->len, sizeof r->log - r->len, "O%llu|", len);

	r->len += (size_t)n;
}

static const struct broker_lines_sink sink = { on_line, on_oversize };

/* Feeds in pieces of the given sizes (cycled; none = all at once), then finishes. */
static void run(const char *in, size_t len, size_t max, const size_t *sizes, size_t nsizes,
                struct rec *r)
{
	struct broker_lines *l = broker_lines_new(max);
	size_t pos = 0, k = 0;

	assert_non_null(l);
	memset(r, 0, sizeof *r);
	while (pos < len) {
		size_t n = nsizes ? sizes[k++ % nsizes] : len;

		if (n > len - pos)
			n = len - pos;
		broker_lines_feed(l, in + pos, n, &sink, r);
		pos += n;
	}
	broker_lines_finish(l, &sink, r);
	broker_lines_free(l);
}

static void expect(const char *in, size_t max, const char *want)
{
	struct rec r;

	run(in, strlen(in), max, NULL, 0, &r);
	assert_string_equal(r.log, want);
}

static void test_basic(void **state)
{
	(void)state;
	expect("", 10, "");
	expect("{\"a\":1}\n{\"b\":2}\n", 10, "L{\"a\":1}|L{\"b\":2}|");
	expect("one\ntwo", 10, "Lone|Ltwo|");
	expect("\n\n\nx\n\n", 10, "Lx|");
}

static void test_crlf(void **state)
{
	(void)state;
	expect("a\r\nb\r\n", 10, "La|Lb|");
	expect("\r\n\r\n", 10, "");
	expect("a\r\r\n", 10, "La\r|");
	expect("a\rb\n", 10, "La\rb|");
	expect("tail\r", 10, "Ltail|");
}

static void test_oversize(void **state)
{
	(void)state;
	expect("12345\n123456\n1234567\nok\n", 6, "L12345|L123456|O7|Lok|");
	expect("123456\r\n1234567\r\n", 6, "L123456|O7|");
	expect("1234567", 6, "O7|");
	expect("1234567\r", 6, "O7|");
	expect("x\n", 0, "O1|");
}

/* Same result however the input is split. */
static void test_splits(void **state)
{
	const char *in = "first\r\n\n" "toolongline_over_limit\n" "ok\r\n" "exactly_16_bytes\r\n"
	                 "seventeen_bytes__\n\r\n" "last";
	size_t len = strlen(in), max = 16, i, one = 1;
	struct rec whole, r;

	(void)state;
	run(in, len, max, NULL, 0, &whole);
	assert_string_equal(whole.log,
	                    "Lfirst|O22|Lok|Lexactly_16_bytes|O17|Llast|");
	run(in, len, max, &one, 1, &r);
	assert_string_equal(r.log, whole.log);
	for (i = 1; i < len; i++) {
		size_t sizes[3] = { i, 1 + i % 7, len };

		run(in, len, max, sizes, 2, &r);
		assert_string_equal(r.log, whole.log);
		run(in, len, max, sizes, 3, &r);
		assert_string_equal(r.log, whole.log);
	}
}

static void test_huge_line(void **state)
{
	struct broker_lines *l = broker_lines_new(1024);
	char chunk[65536];
	struct rec *r = calloc(1, sizeof *r);
	int i;

	(void)state;
	assert_non_null(l);
	assert_non_null(r);
	memset(chunk, 'x', sizeof chunk);
	broker_lines_feed(l, "{\"k\":1}\n", 8, &sink, r);
	for (i = 0; i < 1600; i++) /* ~100 MB */
		broker_lines_feed(l, chunk, sizeof chunk, &sink, r);
	broker_lines_feed(l, "\n{\"k\":2}\n", 9, &sink, r);
	broker_lines_finish(l, &sink, r);
	assert_string_equal(r->log, "L{\"k\":1}|O104857600|L{\"k\":2}|");
	broker_lines_free(l);
	free(r);
}

/* A sink member left NULL is skipped: the other one still sees its
 * events, and the splitter goes on as if both were there (a line or an
 * oversize count taken by a NULL member is not kept for later). */
static void test_null_sink_members_and_free(void **state)
{
	const struct broker_lines_sink none = { NULL, NULL };
	const struct broker_lines_sink lines_only = { on_line, NULL };
	const struct broker_lines_sink oversize_only = { NULL, on_oversize };
	struct broker_lines *l = broker_lines_new(3);
	struct rec *r = calloc(1, sizeof *r);

	(void)state;
	assert_non_null(l);
	assert_non_null(r);
	broker_lines_feed(l, "ab\nabcdef\nx", 11, &none, r);
	broker_lines_finish(l, &none, r);
	assert_string_equal(r->log, "");
	broker_lines_feed(l, "ab\nabcdef\nx", 11, &lines_only, r);
	broker_lines_finish(l, &lines_only, r);
	assert_string_equal(r->log, "Lab|Lx|");
	broker_lines_feed(l, "ab\nabcdef\nx", 11, &oversize_only, r);
	broker_lines_finish(l, &oversize_only, r);
	assert_string_equal(r->log, "Lab|Lx|O6|");
	/* an unterminated oversize line, finished with nobody to hear it */
	broker_lines_feed(l, "abcdef", 6, &none, r);
	broker_lines_finish(l, &none, r);
	broker_lines_feed(l, "y\n", 2, &sink, r);
	broker_lines_finish(l, &sink, r);
	assert_string_equal(r->log, "Lab|Lx|O6|Ly|");
	broker_lines_free(l);
	broker_lines_free(NULL);
	free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_basic),
		cmocka_unit_test(test_crlf),
		cmocka_unit_test(test_oversize),
		cmocka_unit_test(test_splits),
		cmocka_unit_test(test_huge_line),
		cmocka_unit_test(test_null_sink_members_and_free),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
