/* Unit tests for runner/spent.c: ids are refused until they expire, kept
 * across a reopen of the file (a restart), and the expired ones leave it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/fileio.h"
#include "runner/spent.h"

#define ID1 "0123456789abcdef0123456789abcdef"
#define ID2 "fedcba9876543210fedcba9876543210"

static void test_in_memory(void **state)
{
	(void)state;
	uv_loop_t loop;
	uv_loop_init(&loop);
	struct codepod_spent *sp = NULL;
	assert_int_equal(codepod_spent_open(&loop, NULL, 0, &sp, NULL), 0);
	assert_false(codepod_spent_has(sp, ID1, 10));
	assert_int_equal(codepod_spent_add(sp, ID1, 100, NULL), 0);
	assert_true(codepod_spent_has(sp, ID1, 10));
	assert_false(codepod_spent_has(sp, ID2, 10));
	assert_false(codepod_spent_has(sp, ID1, 100)); /* expired: nothing to refuse */
	assert_int_not_equal(codepod_spent_add(sp, "not-an-id", 100, NULL), 0);
	codepod_spent_free(sp);
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_loop_close(&loop);
}

static void test_kept_across_reopen(void **state)
{
	(void)state;
	char dir[] = "/tmp/codepod-spent-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[128];
	snprintf(path, sizeof path, "%s/record", dir);
	uv_loop_t loop;
	uv_loop_init(&loop);
	struct codepod_spent *sp = NULL;
	assert_int_equal(codepod_spent_open(&loop, path, 0, &sp, NULL), 0);
	assert_int_equal(codepod_spent_add(sp, ID1, 100, NULL), 0);
	assert_int_equal(codepod_spent_add(sp, ID2, 50, NULL), 0);
	uv_run(&loop, UV_RUN_DEFAULT); /* the appends land */
	codepod_spent_free(sp);
	/* reopened at 60: ID2 expired and is dropped from the file */
	assert_int_equal(codepod_spent_open(&loop, path, 60, &sp, NULL), 0);
	assert_true(codepod_spent_has(sp, ID1, 60));
	assert_false(codepod_spent_has(sp, ID2, 40));
	codepod_spent_free(sp);
	size_t len = 0;
	char *text = cp_read_file(path, 4096, &len, NULL);
	assert_non_null(text);
	assert_string_equal(text, ID1 " 100\n");
	free(text);
	unlink(path);
	rmdir(dir);
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_loop_close(&loop);
}

static void test_unwritable(void **state)
{
	(void)state;
	uv_loop_t loop;
	uv_loop_init(&loop);
	struct codepod_spent *sp = NULL;
	struct cp_err err = { 0 };
	assert_int_equal(codepod_spent_open(&loop, "/nonexistent-dir/record", 0, &sp, &err), CP_E_IO);
	assert_null(sp);
	assert_non_null(strstr(err.msg, "/nonexistent-dir/record"));
	uv_loop_close(&loop);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_in_memory),
		cmocka_unit_test(test_kept_across_reopen),
		cmocka_unit_test(test_unwritable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
