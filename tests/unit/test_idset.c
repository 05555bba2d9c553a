/* Unit tests for base/idset.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/idset.h"

static void name(char *buf, size_t cap, unsigned long i)
{
	snprintf(buf, cap, "exec-%lu", i);
}

static void test_add_has(void **state)
{
	struct cp_idset *s = cp_idset_new(10);
	struct cp_err err = { 0 };
	char id[8] = "abc";

	(void)state;
	assert_non_null(s);
	assert_int_equal(cp_idset_has(s, "abc"), 0);
	assert_int_equal(cp_idset_add(s, id, NULL), 0);
	id[0] = 'X'; /* the set holds its own copy */
	assert_int_equal(cp_idset_has(s, "abc"), 1);
	assert_int_equal(cp_idset_has(s, "Xbc"), 0);
	assert_int_equal(cp_idset_has(s, ""), 0);
	assert_int_equal(cp_idset_add(s, "", NULL), 0);
	assert_int_equal(cp_idset_has(s, ""), 1);
	assert_int_equal(cp_idset_add(s, "abc", &err), CP_E_CONFLICT);
	assert_int_equal(err.code, CP_E_CONFLICT);
	assert_int_equal(cp_idset_add(s, NULL, NULL), CP_E_INTERNAL);
	assert_int_equal(cp_idset_has(s, NULL), 0);
	cp_idset_free(s);
	cp_idset_free(NULL);
}

static void test_bad_capacity(void **state)
{
	(void)state;
	assert_null(cp_idset_new(0));
	assert_null(cp_idset_new(((size_t)1 << 30) + 1));
}

static void test_fifo_eviction(void **state)
{
	struct cp_idset *s = cp_idset_new(3);

	(void)state;
	assert_int_equal(cp_idset_add(s, "a", NULL), 0);
	assert_int_equal(cp_idset_add(s, "b", NULL), 0);
	assert_int_equal(cp_idset_add(s, "c", NULL), 0);
	assert_int_equal(cp_idset_add(s, "d", NULL), 0); /* evicts a */
	assert_int_equal(cp_idset_has(s, "a"), 0);
	assert_int_equal(cp_idset_has(s, "b"), 1);
	assert_int_equal(cp_idset_has(s, "d"), 1);
	/* A conflicting add changes nothing, not even the eviction order. */
	assert_int_equal(cp_idset_add(s, "b", NULL), CP_E_CONFLICT);
	assert_int_equal(cp_idset_add(s, "e", NULL), 0); /* evicts b */
	assert_int_equal(cp_idset_has(s, "b"), 0);
	assert_int_equal(cp_idset_has(s, "c"), 1);
	assert_int_equal(cp_idset_add(s, "a", NULL), 0); /* evicted ids may come back */
	assert_int_equal(cp_idset_has(s, "c"), 0);
	assert_int_equal(cp_idset_has(s, "d"), 1);
	assert_int_equal(cp_idset_has(s, "e"), 1);
	assert_int_equal(cp_idset_has(s, "a"), 1);
	cp_idset_free(s);
}

static void test_capacity_one(void **state)
{
	struct cp_idset *s = cp_idset_new(1);

	(void)state;
	assert_int_equal(cp_idset_add(s, "x", NULL), 0);
	assert_int_equal(cp_idset_add(s, "y", NULL), 0);
	assert_int_equal(cp_idset_has(s, "x"), 0);
	assert_int_equal(cp_idset_has(s, "y"), 1);
	cp_idset_free(s);
}

/* Many adds through many evictions: exactly the last `cap` ids are present
 * (this exercises backward-shift deletion across long probe runs). */
static void test_many(void **state)
{
	const size_t cap = 1000;
	struct cp_idset *s = cp_idset_new(cap);
	char id[32];
	unsigned long i, j;

	(void)state;
	for (i = 0; i < 20 * cap; i++) {
		name(id, sizeof id, i);
		assert_int_equal(cp_idset_add(s, id, NULL), 0);
		if (i % 997 == 0) {
			for (j = 0; j <= i + 5; j++) {
				name(id, sizeof id, j);
				assert_int_equal(cp_idset_has(s, id), j <= i && i - j < cap);
			}
		}
	}
	cp_idset_free(s);
}

static void test_big(void **state)
{
	struct cp_idset *s = cp_idset_new(100000);
	char id[48];
	unsigned long i;

	(void)state;
	for (i = 0; i < 300000; i++) {
		snprintf(id, sizeof id, "0190a8b2-7c3e-7%03lx-8000-%012lu", i % 4096, i);
		assert_int_equal(cp_idset_add(s, id, NULL), 0);
	}
	for (i = 0; i < 300000; i += 7) {
		snprintf(id, sizeof id, "0190a8b2-7c3e-7%03lx-8000-%012lu", i % 4096, i);
		assert_int_equal(cp_idset_has(s, id), i >= 200000);
	}
	cp_idset_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_add_has),
		cmocka_unit_test(test_bad_capacity),
		cmocka_unit_test(test_fifo_eviction),
		cmocka_unit_test(test_capacity_one),
		cmocka_unit_test(test_many),
		cmocka_unit_test(test_big),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
