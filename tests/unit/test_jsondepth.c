/* Unit tests for base/jsondepth.c. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/jsondepth.h"

static int tdepth(const char *s, int limit)
{
	return cp_json_text_depth(s, strlen(s), limit);
}

/* Text and value agree on every valid document. */
static int both(const char *s, int limit)
{
	json_t *v = json_loads(s, JSON_DECODE_ANY, NULL);
	int t = tdepth(s, limit), d;

	assert_non_null(v);
	d = cp_json_value_depth(v, limit);
	json_decref(v);
	assert_int_equal(t, d);
	return t;
}

static void test_basic(void **state)
{
	(void)state;
	assert_int_equal(both("1", 10), 0);
	assert_int_equal(both("\"s\"", 10), 0);
	assert_int_equal(both("null", 10), 0);
	assert_int_equal(both("[]", 10), 1);
	assert_int_equal(both("{}", 10), 1);
	assert_int_equal(both("[[1]]", 10), 2);
	assert_int_equal(both("{\"a\":[]}", 10), 2);
	assert_int_equal(both("[1,[2,[3]],{\"a\":{\"b\":{}}}]", 10), 4);
	assert_int_equal(both("[[],[[]],[]]", 10), 3);
}

static void test_strings_ignored(void **state)
{
	(void)state;
	assert_int_equal(both("[\"[[[{{{\"]", 10), 1);
	assert_int_equal(both("[\"\\\"[[[\"]", 10), 1);
	assert_int_equal(both("[\"\\\\\",[\"]\"]]", 10), 2);
	assert_int_equal(both("{\"[\":\"}\"}", 10), 1);
}

static void test_limit(void **state)
{
	(void)state;
	assert_int_equal(both("[[[]]]", 3), 3);
	assert_int_equal(both("[[[]]]", 2), 3);
	assert_int_equal(both("[[[]]]", 0), 1);
	assert_int_equal(both("1", 0), 0);
	assert_int_equal(both("[[[[[[]]]]]]", 1), 2);
	assert_int_equal(both("[[],[[]],[[[]]]]", 3), 4);
	assert_int_equal(both("{\"a\":{\"b\":[1]},\"c\":[]}", 2), 3);
	assert_int_equal(tdepth("[]", -5), 1);
	assert_int_equal(tdepth("[]", INT_MAX), 1);
}

static void test_text_stops_early(void **state)
{
	size_t n = 1u << 20, i;
	char *s = malloc(n);

	(void)state;
	assert_non_null(s);
	for (i = 0; i < n; i++)
		s[i] = '[';
	assert_int_equal(cp_json_text_depth(s, n, 32), 33);
	free(s);
}

static void test_text_not_validated(void **state)
{
	(void)state;
	assert_int_equal(tdepth("]]]][", 10), 1);
	assert_int_equal(tdepth("[\"unterminated [[[", 10), 1);
	assert_int_equal(tdepth("[\"\\", 10), 1);
	assert_int_equal(cp_json_text_depth(NULL, 0, 10), 0);
	assert_int_equal(cp_json_text_depth("[\0[", 3, 10), 2);
}

static void test_value_deep(void **state)
{
	json_t *root = json_array(), *cur = root;
	int i;

	(void)state;
	for (i = 0; i < 5000; i++) {
		json_t *next = json_array();

		json_array_append_new(cur, next);
		cur = next;
	}
	assert_int_equal(cp_json_value_depth(root, 64), 65);
	assert_int_equal(cp_json_value_depth(root, 10000), 5001);
	assert_int_equal(cp_json_value_depth(NULL, 5), 0);
	json_decref(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_basic),
		cmocka_unit_test(test_strings_ignored),
		cmocka_unit_test(test_limit),
		cmocka_unit_test(test_text_stops_early),
		cmocka_unit_test(test_text_not_validated),
		cmocka_unit_test(test_value_deep),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
