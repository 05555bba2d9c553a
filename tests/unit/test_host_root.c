/* Unit tests for runner/local/host_root.c: which top-level entries the local
 * sandbox's root gets back (folders and files bound, symlinks made again),
 * and which it makes itself (/proc, /dev, /tmp, /workspace) or leaves out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "runner/local/host_root.h"

static const struct local_root_entry *find(const struct local_root *r, const char *path)
{
	for (size_t i = 0; i < r->n; i++)
		if (strcmp(r->e[i].path, path) == 0)
			return &r->e[i];
	return NULL;
}

static void at(char *out, size_t size, const char *dir, const char *name)
{
	snprintf(out, size, "%s/%s", dir, name);
}

static void test_entries_kept_and_left_out(void **state)
{
	(void)state;
	char tmpl[] = "/tmp/codepod-host-root-XXXXXX";
	char *dir = mkdtemp(tmpl);
	assert_non_null(dir);
	char p[4096];
	static const char *const dirs[] = { "usr", "etc", "proc", "dev", "tmp", "workspace" };
	for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
		at(p, sizeof p, dir, dirs[i]);
		assert_int_equal(mkdir(p, 0755), 0);
	}
	at(p, sizeof p, dir, "file.json");
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fclose(f);
	at(p, sizeof p, dir, "bin");
	assert_int_equal(symlink("usr/bin", p), 0);
	at(p, sizeof p, dir, "dashes");
	assert_int_equal(symlink("--", p), 0);
	at(p, sizeof p, dir, "fifo");
	assert_int_equal(mkfifo(p, 0600), 0);

	struct local_root *r = calloc(1, sizeof *r);
	assert_non_null(r);
	struct cp_err err = { 0 };
	assert_int_equal(local_root_scan(r, dir, &err), 0);
	assert_int_equal(r->n, 4);
	const struct local_root_entry *e = find(r, "/usr");
	assert_non_null(e);
	assert_int_equal(e->kind, LOCAL_ROOT_BIND);
	assert_non_null(e = find(r, "/etc"));
	assert_int_equal(e->kind, LOCAL_ROOT_BIND);
	assert_non_null(e = find(r, "/file.json"));
	assert_int_equal(e->kind, LOCAL_ROOT_BIND);
	assert_non_null(e = find(r, "/bin"));
	assert_int_equal(e->kind, LOCAL_ROOT_SYMLINK);
	assert_string_equal(e->target, "usr/bin");
	/* made inside, never the host's: its own /workspace above all */
	static const char *const absent[] = { "/proc", "/dev", "/tmp", "/workspace", "/fifo",
	                                      "/dashes" };
	for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++)
		assert_null(find(r, absent[i]));

	/* an entry the host gains later is there at the next scan */
	at(p, sizeof p, dir, "opt");
	assert_int_equal(mkdir(p, 0755), 0);
	assert_int_equal(local_root_scan(r, dir, &err), 0);
	assert_int_equal(r->n, 5);
	assert_non_null(find(r, "/opt"));

	static const char *const names[] = { "usr", "etc", "proc", "dev", "tmp", "workspace", "opt" };
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		at(p, sizeof p, dir, names[i]);
		rmdir(p);
	}
	static const char *const files[] = { "file.json", "bin", "dashes", "fifo" };
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		at(p, sizeof p, dir, files[i]);
		unlink(p);
	}
	rmdir(dir);
	free(r);
}

static void test_too_many_or_unreadable(void **state)
{
	(void)state;
	char tmpl[] = "/tmp/codepod-host-root-XXXXXX";
	char *dir = mkdtemp(tmpl);
	assert_non_null(dir);
	char p[4096], name[32];
	for (int i = 0; i <= LOCAL_ROOT_MAX; i++) {
		snprintf(name, sizeof name, "d%03d", i);
		at(p, sizeof p, dir, name);
		assert_int_equal(mkdir(p, 0755), 0);
	}
	struct local_root *r = calloc(1, sizeof *r);
	assert_non_null(r);
	struct cp_err err = { 0 };
	assert_int_equal(local_root_scan(r, dir, &err), CP_E_INTERNAL);
	assert_non_null(strstr(err.msg, "more entries"));
	for (int i = 0; i <= LOCAL_ROOT_MAX; i++) {
		snprintf(name, sizeof name, "d%03d", i);
		at(p, sizeof p, dir, name);
		rmdir(p);
	}
	rmdir(dir);
	assert_int_equal(local_root_scan(r, dir, &err), CP_E_IO);
	free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_entries_kept_and_left_out),
		cmocka_unit_test(test_too_many_or_unreadable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
