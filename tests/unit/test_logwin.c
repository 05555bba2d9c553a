/* Unit tests for runner/logwin.c and base/utf8.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "runner/logwin.h"
#include "base/utf8.h"

#define FFFD "\xef\xbf\xbd"

static void check_sanitize(const char *in, size_t len, const char *want)
{
	size_t out_len = 12345;
	char *out = cp_utf8_sanitize(in, len, &out_len);

	assert_non_null(out);
	assert_int_equal(out_len, strlen(want));
	assert_int_equal(out[out_len], '\0');
	assert_memory_equal(out, want, out_len);
	free(out);
}

#define SAN(lit, want) check_sanitize((lit), sizeof(lit) - 1, (want))

static void test_utf8_valid_passes(void **state)
{
	(void)state;
	SAN("", "");
	SAN("plain ascii\n\t~", "plain ascii\n\t~");
	SAN("\xc2\x80 \xdf\xbf", "\xc2\x80 \xdf\xbf");                 /* U+0080, U+07FF */
	SAN("\xe0\xa0\x80 \xef\xbf\xbf", "\xe0\xa0\x80 \xef\xbf\xbf"); /* U+0800, U+FFFF */
	SAN("\xed\x9f\xbf \xee\x80\x80", "\xed\x9f\xbf \xee\x80\x80"); /* U+D7FF, U+E000 */
	SAN("\xf0\x90\x80\x80 \xf4\x8f\xbf\xbf", "\xf0\x90\x80\x80 \xf4\x8f\xbf\xbf");
	SAN("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80");
	check_sanitize(NULL, 0, "");
}

static void test_utf8_invalid_replaced(void **state)
{
	(void)state;
	SAN("a\x80z", "a" FFFD "z");                 /* lone continuation */
	SAN("\x80\x80", FFFD FFFD);
	SAN("\xc0\xaf", FFFD FFFD);                  /* overlong '/' */
	SAN("\xc1\xbf", FFFD FFFD);
	SAN("\xe0\x80\xaf", FFFD FFFD FFFD);         /* overlong, 3 bytes */
	SAN("\xf0\x80\x80\xaf", FFFD FFFD FFFD FFFD); /* overlong, 4 bytes */
	SAN("\xed\xa0\x80", FFFD FFFD FFFD);         /* surrogate U+D800 */
	SAN("\xed\xbf\xbf", FFFD FFFD FFFD);         /* surrogate U+DFFF */
	SAN("\xf4\x90\x80\x80", FFFD FFFD FFFD FFFD); /* U+110000 */
	SAN("\xf5\x80\x80\x80", FFFD FFFD FFFD FFFD);
	SAN("\xfe\xff", FFFD FFFD);
	SAN("\xe2\x82", FFFD);                       /* truncated: one maximal subpart */
	SAN("\xe2\x82z", FFFD "z");
	SAN("\xf0\x9f\x98", FFFD);
	SAN("\xf0\x9f\x98 ok", FFFD " ok");
	SAN("\xc3", FFFD);
	SAN("\xc3\xc3\xa9", FFFD "\xc3\xa9");
	/* Unicode 15 Table 3-8 example: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64 */
	SAN("\x61\xf1\x80\x80\xe1\x80\xc2\x62\x80\x63\x80\xbf\x64",
	    "a" FFFD FFFD FFFD "b" FFFD "c" FFFD FFFD "d");
}

static void test_utf8_nul_replaced(void **state)
{
	(void)state;
	SAN("a\0b", "a" FFFD "b");
	SAN("\0", FFFD);
}

static void test_utf8_worst_case_growth(void **state)
{
	char in[100];
	size_t n;
	char *out;

	(void)state;
	memset(in, '\xff', sizeof in);
	out = cp_utf8_sanitize(in, sizeof in, &n);
	assert_non_null(out);
	assert_int_equal(n, 3 * sizeof in);
	free(out);
	out = cp_utf8_sanitize("x", 1, NULL);
	assert_string_equal(out, "x");
	free(out);
}

static char *take(const struct codepod_logwin *w)
{
	size_t n = 0;
	char *s = codepod_logwin_take(w, &n);

	assert_non_null(s);
	assert_int_equal(strlen(s), n);
	return s;
}

#define TAKE_EQ(w, want)                      \
	do {                                  \
		char *s_ = take(w);           \
		assert_string_equal(s_, want); \
		free(s_);                     \
	} while (0)

static void test_logwin_basic(void **state)
{
	struct codepod_logwin w;

	(void)state;
	assert_int_equal(codepod_logwin_init(&w, 8, NULL), 0);
	TAKE_EQ(&w, "");
	codepod_logwin_append(&w, "abc", 3);
	TAKE_EQ(&w, "abc");
	assert_int_equal(w.truncated, 0);
	codepod_logwin_append(&w, "defgh", 5);
	TAKE_EQ(&w, "abcdefgh");
	assert_int_equal(w.truncated, 0);
	codepod_logwin_append(&w, "ij", 2);
	TAKE_EQ(&w, "cdefghij");
	assert_int_equal(w.truncated, 1);
	assert_int_equal(w.total, 10);
	codepod_logwin_append(&w, "", 0);
	TAKE_EQ(&w, "cdefghij");
	codepod_logwin_append(&w, "0123456789XYZ", 13); /* longer than cap */
	TAKE_EQ(&w, "56789XYZ");
	codepod_logwin_append(&w, "k", 1);
	TAKE_EQ(&w, "6789XYZk");
	assert_int_equal(w.total, 24);
	codepod_logwin_free(&w);
	assert_int_equal(cp_buf_cap(&w.ring), 0);
	assert_int_equal(w.cap, 0);
}

/* The window equals the tail of everything appended, whatever the pieces. */
static void test_logwin_matches_tail(void **state)
{
	char all[5000];
	size_t total = 0;
	unsigned seed = 7;
	struct codepod_logwin w;
	int i;

	(void)state;
	assert_int_equal(codepod_logwin_init(&w, 37, NULL), 0);
	for (i = 0; i < 400; i++) {
		char piece[60];
		size_t n, k;

		seed = seed * 1103515245u + 12345u;
		n = (seed >> 16) % sizeof piece;
		for (k = 0; k < n; k++)
			piece[k] = (char)('a' + (total + k) % 26);
		if (total + n > sizeof all)
			break;
		memcpy(all + total, piece, n);
		total += n;
		codepod_logwin_append(&w, piece, n);
		{
			size_t keep = total < 37 ? total : 37;
			char *s = take(&w);

			assert_int_equal(strlen(s), keep);
			assert_memory_equal(s, all + total - keep, keep);
			assert_int_equal(w.truncated, total > 37);
			assert_int_equal(w.total, total);
			free(s);
		}
	}
	codepod_logwin_free(&w);
}

static void test_logwin_zero_cap(void **state)
{
	struct codepod_logwin w;

	(void)state;
	assert_int_equal(codepod_logwin_init(&w, 0, NULL), 0);
	TAKE_EQ(&w, "");
	codepod_logwin_append(&w, "abc", 3);
	TAKE_EQ(&w, "");
	assert_int_equal(w.truncated, 1);
	assert_int_equal(w.total, 3);
	codepod_logwin_free(&w);
}

static void test_logwin_cut_character_dropped(void **state)
{
	struct codepod_logwin w;

	(void)state;
	/* "€" is E2 82 AC; keep the last 5 bytes of "x€abc": "\x82\xac" "abc". */
	assert_int_equal(codepod_logwin_init(&w, 5, NULL), 0);
	codepod_logwin_append(&w, "x\xe2\x82\xac" "abc", 7);
	TAKE_EQ(&w, "abc");
	codepod_logwin_free(&w);
	/* 4-byte emoji cut after its first byte: three continuation bytes dropped. */
	assert_int_equal(codepod_logwin_init(&w, 4, NULL), 0);
	codepod_logwin_append(&w, "\xf0\x9f\x98\x80" "z", 5);
	TAKE_EQ(&w, "z");
	codepod_logwin_free(&w);
	/* Not truncated: a leading continuation byte is invalid input, replaced. */
	assert_int_equal(codepod_logwin_init(&w, 8, NULL), 0);
	codepod_logwin_append(&w, "\x80" "ab", 3);
	TAKE_EQ(&w, FFFD "ab");
	codepod_logwin_free(&w);
	/* Truncated, more than 3 continuation bytes: only 3 are the cut's. */
	assert_int_equal(codepod_logwin_init(&w, 5, NULL), 0);
	codepod_logwin_append(&w, "zz\x80\x80\x80\x80" "a", 7);
	TAKE_EQ(&w, FFFD "a");
	codepod_logwin_free(&w);
	/* A character cut at the end (more may come) is replaced. */
	assert_int_equal(codepod_logwin_init(&w, 8, NULL), 0);
	codepod_logwin_append(&w, "ab\xe2\x82", 4);
	TAKE_EQ(&w, "ab" FFFD);
	codepod_logwin_append(&w, "\xac", 1);
	TAKE_EQ(&w, "ab\xe2\x82\xac");
	codepod_logwin_free(&w);
}

/* Wrapped ring with invalid bytes: result may exceed cap only by replacements. */
static void test_logwin_wrapped_invalid(void **state)
{
	struct codepod_logwin w;
	char *s;
	size_t n;

	(void)state;
	assert_int_equal(codepod_logwin_init(&w, 6, NULL), 0);
	codepod_logwin_append(&w, "abcd", 4);
	codepod_logwin_append(&w, "\xff\xfe\x00\xc0", 4);
	assert_true(w.start + w.len > w.cap); /* wrapped */
	s = codepod_logwin_take(&w, &n);
	assert_non_null(s);
	assert_int_equal(n, 2 + 4 * 3);
	assert_memory_equal(s, "cd" FFFD FFFD FFFD FFFD, n);
	assert_true(n <= 3 * w.cap);
	free(s);
	s = codepod_logwin_take(&w, NULL);
	assert_non_null(s);
	free(s);
	codepod_logwin_free(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_utf8_valid_passes),
		cmocka_unit_test(test_utf8_invalid_replaced),
		cmocka_unit_test(test_utf8_nul_replaced),
		cmocka_unit_test(test_utf8_worst_case_growth),
		cmocka_unit_test(test_logwin_basic),
		cmocka_unit_test(test_logwin_matches_tail),
		cmocka_unit_test(test_logwin_zero_cap),
		cmocka_unit_test(test_logwin_cut_character_dropped),
		cmocka_unit_test(test_logwin_wrapped_invalid),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
