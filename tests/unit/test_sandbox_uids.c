/* Unit tests for runner/local/sandbox_uids.c: --sandbox-uids parsing, a user per
 * conversation without repeats, the workspaces' owners read back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "runner/local/sandbox_uids.h"

static void test_parse(void **state)
{
	uint32_t first = 0, count = 0;
	struct cp_err err = { 0 };

	(void)state;
	assert_int_equal(local_uids_parse("100000-165535", &first, &count, &err), 0);
	assert_int_equal(first, 100000);
	assert_int_equal(count, 65536);
	assert_int_equal(local_uids_parse("7-7", &first, &count, &err), 0);
	assert_int_equal(count, 1);
	assert_int_equal(local_uids_parse("1-4294967294", &first, &count, &err), 0);
	assert_int_equal(count, 4294967294u);
	static const char *const bad[] = {
		"", "5", "5-", "-5", "0-10", "10-5", "1-4294967295", "1-99999999999", "a-b", "1-2x",
		"1--2", "1 - 2",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		memset(&err, 0, sizeof err);
		assert_int_equal(local_uids_parse(bad[i], &first, &count, &err), CP_E_INVALID_REQUEST);
		assert_non_null(strstr(err.msg, "--sandbox-uids"));
	}
}

static char *empty_dir(void)
{
	char tmpl[] = "/tmp/cp-uids-XXXXXX";
	char *d = mkdtemp(tmpl);
	assert_non_null(d);
	return strdup(d);
}

static void test_every_conversation_its_own_until_full(void **state)
{
	struct local_uids u;
	struct cp_err err = { 0 };
	char *dir = empty_dir();
	uid_t got[8];

	(void)state;
	assert_int_equal(local_uids_init(&u, 5000, 8, dir, &err), 0);
	for (int i = 0; i < 8; i++) {
		char conv[32];
		snprintf(conv, sizeof conv, "conversation-%d", i % 2); /* same key, new user */
		assert_int_equal(local_uids_take(&u, conv, &got[i], &err), 0);
		assert_true(local_uids_in_range(&u, got[i]));
		for (int j = 0; j < i; j++)
			assert_int_not_equal(got[i], got[j]);
	}
	assert_int_equal(local_uids_take(&u, "one more", &got[0], &err), CP_E_DENIED);
	assert_non_null(strstr(err.msg, "widen the range"));
	assert_false(local_uids_in_range(&u, 4999));
	assert_false(local_uids_in_range(&u, 5008));
	local_uids_free(&u);
	rmdir(dir);
	free(dir);
}

/* The owners of existing workspaces are taken; owners outside the range,
 * and files that are not folders, are not. Needs root (chown). */
static void test_owners_read_back(void **state)
{
	struct local_uids u;
	struct cp_err err = { 0 };
	char *dir = empty_dir();
	char path[256];

	(void)state;
	if (geteuid() != 0) {
		rmdir(dir);
		free(dir);
		skip();
	}
	static const struct { const char *name; uid_t owner; int is_dir; } ws[] = {
		{ "a", 7000, 1 }, { "b", 7002, 1 }, { "c", 65534, 1 }, { "d", 7001, 0 },
	};
	for (size_t i = 0; i < 4; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, ws[i].name);
		if (ws[i].is_dir)
			assert_int_equal(mkdir(path, 0700), 0);
		else
			fclose(fopen(path, "w"));
		assert_int_equal(chown(path, ws[i].owner, ws[i].owner), 0);
	}
	assert_int_equal(local_uids_init(&u, 7000, 4, dir, &err), 0);
	assert_int_equal(u.n, 2);
	uid_t a, b;
	assert_int_equal(local_uids_take(&u, "x", &a, &err), 0);
	assert_int_equal(local_uids_take(&u, "y", &b, &err), 0);
	assert_true((a == 7001 && b == 7003) || (a == 7003 && b == 7001));
	assert_int_equal(local_uids_take(&u, "z", &a, &err), CP_E_DENIED);
	local_uids_free(&u);
	for (size_t i = 0; i < 4; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, ws[i].name);
		(ws[i].is_dir ? rmdir : unlink)(path);
	}
	rmdir(dir);
	free(dir);
}

static void test_missing_folder(void **state)
{
	struct local_uids u;
	struct cp_err err = { 0 };

	(void)state;
	assert_int_equal(local_uids_init(&u, 1000, 10, "/nonexistent/codepod-uids", &err), CP_E_IO);
	assert_non_null(strstr(err.msg, "/nonexistent/codepod-uids"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_every_conversation_its_own_until_full),
		cmocka_unit_test(test_owners_read_back),
		cmocka_unit_test(test_missing_folder),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
