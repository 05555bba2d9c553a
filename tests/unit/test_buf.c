/* Unit tests for base/buf.c and base/fileio.c. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/buf.h"
#include "base/fileio.h"

/* The out-of-memory cases ask for more than any allocator gives: under
 * ASan that must come back as NULL, not as a report. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "allocator_may_return_null=1";
}

/* An err that no call has set yet. */
static void unset(struct cp_err *err)
{
	memset(err, 0, sizeof *err);
	err->code = CP_OK;
}

static void check_holds(const struct cp_buf *b, const char *want)
{
	size_t n = strlen(want);

	assert_int_equal(cp_buf_len(b), n);
	assert_memory_equal(cp_buf_ptr(b), want, n);
	assert_int_equal(cp_buf_ptr(b)[n], '\0');
}

static void test_empty(void **state)
{
	struct cp_buf b;
	struct cp_buf zero = { 0 };

	(void)state;
	cp_buf_init(&b, 16);
	assert_non_null(cp_buf_ptr(&b));
	check_holds(&b, "");
	assert_int_equal(cp_buf_cap(&b), 0);
	assert_int_equal(cp_buf_add(&b, NULL, 0, NULL), 0); /* nothing to add: nothing allocated */
	assert_int_equal(cp_buf_cap(&b), 0);
	cp_buf_reset(&b);
	cp_buf_truncate(&b, 5);
	cp_buf_tail(&b, 5);
	check_holds(&b, "");
	cp_buf_free(&b);
	/* A zeroed struct is an empty buffer with a limit of 0. */
	check_holds(&zero, "");
	assert_int_equal(cp_buf_add(&zero, "x", 1, NULL), CP_E_TOO_BIG);
	cp_buf_free(&zero);
}

static void test_add_nul_terminated(void **state)
{
	struct cp_buf b;
	char big[300];

	(void)state;
	cp_buf_init(&b, SIZE_MAX);
	assert_int_equal(cp_buf_add(&b, "abc", 3, NULL), 0);
	check_holds(&b, "abc");
	assert_int_equal(cp_buf_add(&b, "a\0b", 3, NULL), 0); /* NUL bytes are bytes */
	assert_int_equal(cp_buf_len(&b), 6);
	assert_memory_equal(cp_buf_ptr(&b), "abca\0b", 7);
	memset(big, 'z', sizeof big);
	assert_int_equal(cp_buf_add(&b, big, sizeof big, NULL), 0); /* grows */
	assert_int_equal(cp_buf_len(&b), 6 + sizeof big);
	assert_int_equal(cp_buf_ptr(&b)[6 + sizeof big], '\0');
	assert_true(cp_buf_cap(&b) >= cp_buf_len(&b));
	cp_buf_free(&b);
	check_holds(&b, "");
	/* Free keeps the limit: the buffer is usable again. */
	assert_int_equal(cp_buf_add(&b, "again", 5, NULL), 0);
	check_holds(&b, "again");
	cp_buf_free(&b);
}

static void test_limit_exact(void **state)
{
	struct cp_buf b;
	struct cp_err err;

	(void)state;
	cp_buf_init(&b, 10);
	assert_int_equal(cp_buf_add(&b, "0123456", 7, NULL), 0);
	assert_int_equal(cp_buf_add(&b, "789", 3, NULL), 0); /* exactly the limit */
	check_holds(&b, "0123456789");
	unset(&err);
	assert_int_equal(cp_buf_add(&b, "X", 1, &err), CP_E_TOO_BIG); /* one byte over */
	assert_int_equal(err.code, CP_E_TOO_BIG);
	assert_true(err.msg[0] != '\0');
	check_holds(&b, "0123456789"); /* kept */
	assert_int_equal(cp_buf_add(&b, NULL, 0, NULL), 0); /* nothing more is fine at the limit */
	cp_buf_reset(&b);
	unset(&err);
	assert_int_equal(cp_buf_add(&b, "0123456789X", 11, &err), CP_E_TOO_BIG);
	assert_int_equal(err.code, CP_E_TOO_BIG);
	check_holds(&b, "");
	/* A failure is not sticky. */
	assert_int_equal(cp_buf_add(&b, "ok", 2, NULL), 0);
	check_holds(&b, "ok");
	/* err may be NULL. */
	assert_int_equal(cp_buf_add(&b, "0123456789", 10, NULL), CP_E_TOO_BIG);
	check_holds(&b, "ok");
	cp_buf_free(&b);
}

/* Doubling never allocates past the limit (and its NUL). */
static void test_growth_capped(void **state)
{
	struct cp_buf b;

	(void)state;
	cp_buf_init(&b, 1000);
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(cp_buf_add(&b, "x", 1, NULL), 0);
		assert_true(cp_buf_cap(&b) <= 1000);
		assert_true(cp_buf_cap(&b) >= cp_buf_len(&b));
	}
	assert_int_equal(cp_buf_cap(&b), 1000);
	assert_int_equal(cp_buf_add(&b, "x", 1, NULL), CP_E_TOO_BIG);
	assert_int_equal(cp_buf_len(&b), 1000);
	cp_buf_free(&b);
}

static void test_nomem(void **state)
{
	struct cp_buf b;
	struct cp_err err;
	static const char src[8] = "payload";

	(void)state;
	cp_buf_init(&b, SIZE_MAX);
	assert_int_equal(cp_buf_add(&b, "abc", 3, NULL), 0);
	unset(&err);
	/* No allocator has half the address space: the add fails before reading src. */
	assert_int_equal(cp_buf_add(&b, src, SIZE_MAX / 2, &err), CP_E_NOMEM);
	assert_int_equal(err.code, CP_E_NOMEM);
	check_holds(&b, "abc");
	unset(&err);
	assert_int_equal(cp_buf_add(&b, src, SIZE_MAX - 3, &err), CP_E_NOMEM); /* no room for the NUL */
	assert_int_equal(err.code, CP_E_NOMEM);
	check_holds(&b, "abc");
	cp_buf_free(&b);
}

static void test_addf(void **state)
{
	struct cp_buf b;
	struct cp_err err;
	char want[200];

	(void)state;
	cp_buf_init(&b, 100);
	assert_int_equal(cp_buf_addf(&b, NULL, "%s=%d", "a", 1), 0);
	check_holds(&b, "a=1");
	assert_int_equal(cp_buf_addf(&b, NULL, "%s", ""), 0);
	check_holds(&b, "a=1");
	/* Longer than the room left: formatted again after growing. */
	assert_int_equal(cp_buf_addf(&b, NULL, ";%080d", 7), 0);
	snprintf(want, sizeof want, "a=1;%080d", 7);
	check_holds(&b, want);
	/* Over the limit: refused, the contents (and their NUL) intact although
	 * a first attempt wrote into the room past them. */
	unset(&err);
	assert_int_equal(cp_buf_addf(&b, &err, "%020d", 0), CP_E_TOO_BIG);
	assert_int_equal(err.code, CP_E_TOO_BIG);
	check_holds(&b, want);
	/* Exactly up to the limit. */
	assert_int_equal(cp_buf_addf(&b, NULL, "%0*d", (int)(100 - strlen(want)), 0), 0);
	assert_int_equal(cp_buf_len(&b), 100);
	assert_int_equal(cp_buf_ptr(&b)[100], '\0');
	cp_buf_free(&b);
}

static void test_take_reset(void **state)
{
	struct cp_buf b;
	size_t n = 99;
	char *s;

	(void)state;
	cp_buf_init(&b, 8);
	assert_int_equal(cp_buf_add(&b, "hello", 5, NULL), 0);
	s = cp_buf_take(&b, &n, NULL);
	assert_non_null(s);
	assert_int_equal(n, 5);
	assert_string_equal(s, "hello");
	free(s);
	/* Taken: empty, nothing allocated, the same limit. */
	check_holds(&b, "");
	assert_int_equal(cp_buf_cap(&b), 0);
	assert_int_equal(cp_buf_add(&b, "12345678", 8, NULL), 0);
	assert_int_equal(cp_buf_add(&b, "9", 1, NULL), CP_E_TOO_BIG);
	/* Reset keeps the allocation. */
	size_t cap = cp_buf_cap(&b);
	cp_buf_reset(&b);
	check_holds(&b, "");
	assert_int_equal(cp_buf_cap(&b), cap);
	cp_buf_free(&b);
	/* An empty buffer hands over a new "". */
	n = 99;
	s = cp_buf_take(&b, &n, NULL);
	assert_non_null(s);
	assert_int_equal(n, 0);
	assert_string_equal(s, "");
	free(s);
	assert_non_null(s = cp_buf_take(&b, NULL, NULL));
	free(s);
}

static void test_truncate_tail_limit(void **state)
{
	struct cp_buf b;
	struct cp_err err;

	(void)state;
	cp_buf_init(&b, 32);
	assert_int_equal(cp_buf_add(&b, "0123456789", 10, NULL), 0);
	cp_buf_truncate(&b, 20); /* longer: nothing changes */
	check_holds(&b, "0123456789");
	cp_buf_truncate(&b, 8);
	check_holds(&b, "01234567");
	cp_buf_tail(&b, 20);
	check_holds(&b, "01234567");
	cp_buf_tail(&b, 3);
	check_holds(&b, "567");
	cp_buf_tail(&b, 0);
	check_holds(&b, "");
	assert_int_equal(cp_buf_add(&b, "abcdef", 6, NULL), 0);
	/* A new limit below the contents is refused; at them, taken. */
	unset(&err);
	assert_int_equal(cp_buf_set_limit(&b, 5, &err), CP_E_TOO_BIG);
	assert_int_equal(err.code, CP_E_TOO_BIG);
	check_holds(&b, "abcdef");
	assert_int_equal(cp_buf_set_limit(&b, 6, NULL), 0);
	assert_int_equal(cp_buf_add(&b, "g", 1, NULL), CP_E_TOO_BIG);
	assert_int_equal(cp_buf_set_limit(&b, 7, NULL), 0);
	assert_int_equal(cp_buf_add(&b, "g", 1, NULL), 0);
	check_holds(&b, "abcdefg");
	cp_buf_free(&b);
}

static void test_array_grow(void **state)
{
	struct cp_err err;
	size_t cap = 0, n = 0;
	int *v = NULL;

	(void)state;
	for (int i = 0; i < 1000; i++) {
		size_t before = cap;
		int *g = cp_array_grow(v, &cap, n + 1, sizeof *v, NULL);

		assert_non_null(g);
		assert_true(cap >= n + 1);
		if (cap != before)
			assert_true(cap >= 2 * before); /* grown rooms at least double */
		v = g;
		v[n++] = i;
	}
	for (int i = 0; i < 1000; i++)
		assert_int_equal(v[i], i);
	/* Room enough: the same array, no change. */
	size_t had = cap;
	assert_ptr_equal(cp_array_grow(v, &cap, 10, sizeof *v, NULL), v);
	assert_int_equal(cap, had);
	/* Too large, or overflowing count * size: NULL, the array untouched. */
	unset(&err);
	assert_null(cp_array_grow(v, &cap, SIZE_MAX / 2, sizeof *v, &err));
	assert_int_equal(err.code, CP_E_NOMEM);
	assert_int_equal(cap, had);
	unset(&err);
	assert_null(cp_array_grow(v, &cap, SIZE_MAX / 64, 64, &err));
	assert_int_equal(err.code, CP_E_NOMEM);
	assert_int_equal(v[999], 999);
	free(v);
}

/* ---- cp_read_file ---- */

static char dir[64];

static int make_dir(void **state)
{
	(void)state;
	snprintf(dir, sizeof dir, "/tmp/test_buf.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* A file of @n bytes (a repeating pattern); returns its path. */
static const char *make_file(const char *name, size_t n)
{
	static char path[128];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	f = fopen(path, "wb");
	assert_non_null(f);
	for (size_t i = 0; i < n; i++)
		assert_int_not_equal(fputc('a' + (int)(i % 26), f), EOF);
	assert_int_equal(fclose(f), 0);
	return path;
}

static void check_pattern(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		assert_int_equal(s[i], 'a' + (int)(i % 26));
	assert_int_equal(s[n], '\0');
}

static void test_read_at_and_over_cap(void **state)
{
	struct cp_err err;
	size_t len = 12345;
	char *s;

	(void)state;
	/* More than one read's worth, to cross the reader's chunks. */
	const char *p = make_file("big", 100000);
	s = cp_read_file(p, 100000, &len, NULL);
	assert_non_null(s);
	assert_int_equal(len, 100000);
	check_pattern(s, len);
	free(s);
	len = 12345;
	unset(&err);
	assert_null(cp_read_file(p, 99999, &len, &err));
	assert_int_equal(err.code, CP_E_TOO_BIG);
	assert_non_null(strstr(err.msg, p));
	assert_int_equal(len, 12345); /* untouched on failure */
	/* Small files, at the cap and one byte over. */
	p = make_file("ten", 10);
	s = cp_read_file(p, 10, &len, NULL);
	assert_non_null(s);
	assert_int_equal(len, 10);
	check_pattern(s, len);
	free(s);
	unset(&err);
	assert_null(cp_read_file(p, 9, &len, &err));
	assert_int_equal(err.code, CP_E_TOO_BIG);
	unset(&err);
	assert_null(cp_read_file(p, 0, &len, &err));
	assert_int_equal(err.code, CP_E_TOO_BIG);
}

static void test_read_empty_missing_dir(void **state)
{
	struct cp_err err;
	char path[128];
	size_t len = 12345;
	char *s;

	(void)state;
	s = cp_read_file(make_file("empty", 0), 0, &len, NULL);
	assert_non_null(s);
	assert_int_equal(len, 0);
	assert_string_equal(s, "");
	free(s);
	snprintf(path, sizeof path, "%s/missing", dir);
	unset(&err);
	assert_null(cp_read_file(path, 100, &len, &err));
	assert_int_equal(err.code, CP_E_NOT_FOUND);
	assert_non_null(strstr(err.msg, "missing"));
	unset(&err);
	assert_null(cp_read_file(dir, 100, &len, &err));
	assert_int_equal(err.code, CP_E_IO);
	assert_non_null(strstr(err.msg, "directory"));
	snprintf(path, sizeof path, "%s/missing/x", dir);
	unset(&err);
	assert_null(cp_read_file(path, 100, &len, &err));
	assert_int_equal(err.code, CP_E_NOT_FOUND);
}

/* A pipe has no size: it is read to its end all the same. */
static void test_read_fd_pipe(void **state)
{
	struct cp_err err;
	int fds[2];
	size_t len = 0;
	char *s;

	(void)state;
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(write(fds[1], "through a pipe", 14), 14);
	close(fds[1]);
	s = cp_read_fd(fds[0], "pipe", 14, &len, NULL);
	close(fds[0]);
	assert_non_null(s);
	assert_int_equal(len, 14);
	assert_string_equal(s, "through a pipe");
	free(s);
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(write(fds[1], "through a pipe", 14), 14);
	close(fds[1]);
	unset(&err);
	assert_null(cp_read_fd(fds[0], "pipe", 13, &len, &err));
	close(fds[0]);
	assert_int_equal(err.code, CP_E_TOO_BIG);
	assert_non_null(strstr(err.msg, "pipe"));
	unset(&err);
	assert_null(cp_read_fd(-1, "bad fd", 13, &len, &err));
	assert_int_equal(err.code, CP_E_IO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_add_nul_terminated),
		cmocka_unit_test(test_limit_exact),
		cmocka_unit_test(test_growth_capped),
		cmocka_unit_test(test_nomem),
		cmocka_unit_test(test_addf),
		cmocka_unit_test(test_take_reset),
		cmocka_unit_test(test_truncate_tail_limit),
		cmocka_unit_test(test_array_grow),
		cmocka_unit_test(test_read_at_and_over_cap),
		cmocka_unit_test(test_read_empty_missing_dir),
		cmocka_unit_test(test_read_fd_pipe),
	};

	return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
