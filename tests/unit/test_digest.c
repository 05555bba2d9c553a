/* Unit tests for runner/digest.c. The expected digests were computed
 * independently with printf and sha256sum:
 *
 *   printf 'codepod-digest-v1\0console.log(1)\0[{"n":"a","on":true}]\0{"maxDepth":32,"z":1}' | sha256sum
 *   96dca13b79c5bbd51122e90bd2193681d685d8d7e41bec9273df2640bee4795a
 *
 *   printf 'codepod-digest-v1\0\0null\0null' | sha256sum
 *   0bfee6af23d50e41cd6802ed25c0beab3815caef1b8ad56baedfb7e4dcfa85be
 *
 *   printf 'codepod-digest-v1\0a\0b\0[]\0{}' | sha256sum      (source "a\0b")
 *   cf3541dff0e03e68629e00b71bf81744200f31925e8d8cf014824ae6058ffeb7
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "runner/digest.h"

static void test_known_vector(void **state)
{
	json_t *tools = json_loads("[{\"on\":true,\"n\":\"a\"}]", 0, NULL);
	json_t *policy = json_loads("{\"z\":1,\"maxDepth\":32}", 0, NULL);
	char out[65];

	(void)state;
	assert_non_null(tools);
	assert_non_null(policy);
	assert_int_equal(codepod_digest("console.log(1)", 14, tools, policy, out, NULL), 0);
	assert_string_equal(out, "96dca13b79c5bbd51122e90bd2193681d685d8d7e41bec9273df2640bee4795a");
	json_decref(tools);
	json_decref(policy);
}

static void test_key_order_irrelevant(void **state)
{
	json_t *p1 = json_pack("{s:i,s:i}", "a", 1, "b", 2);
	json_t *p2 = json_pack("{s:i,s:i}", "b", 2, "a", 1);
	json_t *t = json_array();
	char d1[65], d2[65], d3[65];

	(void)state;
	assert_int_equal(codepod_digest("x", 1, t, p1, d1, NULL), 0);
	assert_int_equal(codepod_digest("x", 1, t, p2, d2, NULL), 0);
	assert_string_equal(d1, d2);
	assert_int_equal(codepod_digest("y", 1, t, p2, d3, NULL), 0);
	assert_string_not_equal(d1, d3);
	json_decref(p1);
	json_decref(p2);
	json_decref(t);
}

static void test_null_values_and_empty_source(void **state)
{
	char out[65];
	struct cp_err err = { 0 };

	(void)state;
	assert_int_equal(codepod_digest(NULL, 0, NULL, NULL, out, &err), 0);
	assert_string_equal(out, "0bfee6af23d50e41cd6802ed25c0beab3815caef1b8ad56baedfb7e4dcfa85be");
}

static void test_source_with_nul(void **state)
{
	json_t *t = json_array(), *p = json_object();
	char out[65];

	(void)state;
	assert_int_equal(codepod_digest("a\0b", 3, t, p, out, NULL), 0);
	assert_string_equal(out, "cf3541dff0e03e68629e00b71bf81744200f31925e8d8cf014824ae6058ffeb7");
	assert_int_equal(strlen(out), CODEPOD_DIGEST_HEX_LEN);
	json_decref(t);
	json_decref(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_known_vector),
		cmocka_unit_test(test_key_order_irrelevant),
		cmocka_unit_test(test_null_values_and_empty_source),
		cmocka_unit_test(test_source_with_nul),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
