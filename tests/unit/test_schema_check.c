/*
 * Unit tests for broker/schema_check.c: each case's message is what the
 * TypeScript SDK's validator (Ajv 2020, first error) says for the same
 * schema and input, and what cannot be judged passes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "broker/schema_check.h"

/* NULL want: the input passes. */
static void expect(const char *schema, const char *input, const char *want)
{
	json_error_t jerr;
	json_t *s = json_loads(schema, JSON_DECODE_ANY, &jerr);
	json_t *v = json_loads(input, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
	char msg[600] = "";

	if (!s || !v)
		fail_msg("bad case: %s / %s", schema, input);
	int bad = broker_schema_check(s, v, msg, sizeof msg);
	if (!want && bad)
		fail_msg("%s / %s: refused with \"%s\"", schema, input, msg);
	if (want && (!bad || strcmp(msg, want) != 0))
		fail_msg("%s / %s: got %d \"%s\", want \"%s\"", schema, input, bad, msg, want);
	json_decref(s);
	json_decref(v);
}

static void test_ajv_words(void **state)
{
	(void)state;
	expect("{\"uniqueItems\":true}", "[\"a\",\"b\",\"a\",\"b\"]",
	       "input must NOT have duplicate items (items ## 1 and 3 are identical)");
	expect("{\"uniqueItems\":true,\"items\":{\"type\":\"string\"}}", "[\"a\",\"b\",\"a\",\"b\"]",
	       "input must NOT have duplicate items (items ## 3 and 1 are identical)");
	expect("{\"uniqueItems\":true}", "[{\"x\":1},2,{\"x\":1},2]",
	       "input must NOT have duplicate items (items ## 1 and 3 are identical)");
	expect("{\"type\":\"number\",\"multipleOf\":0.1}", "0.3", "input must be multiple of 0.1");
	expect("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},"
	       "\"additionalProperties\":false,\"required\":[\"b\"]}", "{\"a\":1,\"c\":1}",
	       "input must have required property 'b'");
	expect("{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"number\"}]}", "true",
	       "input must be string");
	expect("{\"oneOf\":[{\"type\":\"number\"},{\"type\":\"integer\"}]}", "1",
	       "input must match exactly one schema in oneOf");
	expect("{\"type\":[\"string\",\"null\"]}", "1", "input must be string,null");
	expect("{\"type\":\"string\",\"nullable\":true}", "1", "input must be string");
	expect("{\"type\":\"string\",\"nullable\":true}", "null", NULL);
	expect("{\"const\":3}", "4", "input must be equal to constant");
	expect("{\"not\":{\"type\":\"string\"}}", "\"x\"", "input must NOT be valid");
	expect("false", "1", "input boolean schema is false");
	expect("{\"prefixItems\":[{\"type\":\"string\"}],\"items\":false}", "[\"a\",1]",
	       "input must NOT have more than 1 items");
	expect("{\"type\":\"string\",\"minLength\":2}", "\"\xf0\x9f\x98\x80\"",
	       "input must NOT have fewer than 2 characters");
	expect("{\"maximum\":1e21}", "2e21", "input must be <= 1e+21");
	expect("{\"minimum\":0.1}", "0.05", "input must be >= 0.1");
	expect("{\"type\":\"integer\"}", "2.0", NULL);
	expect("{\"properties\":{\"a/b~\":{\"items\":{\"type\":\"integer\"}}}}",
	       "{\"a/b~\":[1,\"x\"]}", "input.a~1b~0.1 must be integer");
	expect("{\"$ref\":\"#/$defs/n\",\"$defs\":{\"n\":{\"type\":\"object\","
	       "\"additionalProperties\":{\"$ref\":\"#/$defs/n\"}}}}", "{\"a\":{\"b\":3}}",
	       "input.a.b must be object");
	expect("{\"allOf\":[{\"required\":[\"a\"]},{\"required\":[\"b\"]}]}", "{\"a\":1}",
	       "input must have required property 'b'");
}

/* JavaScript patterns POSIX can read are judged; the rest pass. */
static void test_patterns(void **state)
{
	(void)state;
	expect("{\"pattern\":\"^\\\\d{4}-\\\\d{2}$\"}", "\"2026-12\"", NULL);
	expect("{\"pattern\":\"^\\\\d{4}-\\\\d{2}$\"}", "\"2026-1\"",
	       "input must match pattern \"^\\d{4}-\\d{2}$\"");
	expect("{\"pattern\":\"^[\\\\w.]+@[a-z]+\\\\.com$\"}", "\"a.b@x.com\"", NULL);
	expect("{\"pattern\":\"^[\\\\w.]+@[a-z]+\\\\.com$\"}", "\"a b@x.com\"",
	       "input must match pattern \"^[\\w.]+@[a-z]+\\.com$\"");
	expect("{\"pattern\":\"^\\\\S+$\"}", "\"a b\"", "input must match pattern \"^\\S+$\"");
	expect("{\"pattern\":\"a\"}", "\"xax\"", NULL); /* a search, not a whole match */
	expect("{\"pattern\":\"^(?!x)\"}", "\"x\"", NULL);
	expect("{\"pattern\":\"\\\\bx\"}", "\"yx\"", NULL);
	expect("{\"pattern\":\"[\\\\]]\"}", "\"y\"", NULL);
	expect("{\"pattern\":\"((\"}", "\"y\"", NULL);
	/* Patterns regcomp would blow up on are not judged (and cost nothing). */
	expect("{\"pattern\":\"^c+++++++++++++++++++++++++++++++++++++++++$\"}", "\"y\"", NULL);
	expect("{\"pattern\":\"^(((a{100}){100}){100})$\"}", "\"y\"", NULL);
	expect("{\"pattern\":\"^[[:alpha:]]$\"}", "\"y\"", NULL);
	expect("{\"pattern\":\"^a\\\\-b$\"}", "\"y\"", NULL); /* Ajv: not a u-flag escape */
	expect("{\"pattern\":\"^a\\\\/b$\"}", "\"y\"", "input must match pattern \"^a\\/b$\"");
	/* Lazy quantifiers and small counts are judged. */
	expect("{\"pattern\":\"^a+?b{2,3}$\"}", "\"aabb\"", NULL);
	expect("{\"pattern\":\"^a+?b{2,3}$\"}", "\"ab\"",
	       "input must match pattern \"^a+?b{2,3}$\"");
	expect("{\"pattern\":\"^(ab|cd){2}$\"}", "\"abab\"", NULL);
	expect("{\"pattern\":\"^(ab|cd){2}$\"}", "\"abx\"", "input must match pattern \"^(ab|cd){2}$\"");
	expect("{\"pattern\":\"^a$\"}", "\"a\\u0000b\"", NULL);
	expect("{\"$ref\":\"https://example.com/s.json\"}", "1", NULL);
	expect("{\"$ref\":\"#/nowhere\"}", "1", NULL);
	expect("{\"type\":\"string\",\"format\":\"email\"}", "\"no\"", NULL);
}

/* A hostile input costs a bounded walk and never a crash. */
static void test_bounds(void **state)
{
	json_t *s = json_pack("{s:b}", "uniqueItems", 1), *v = json_array();
	char msg[64];

	(void)state;
	for (int i = 0; i < 20000; i++)
		json_array_append_new(v, json_pack("{s:i}", "i", i));
	assert_int_equal(broker_schema_check(s, v, msg, sizeof msg), 0);
	json_decref(s);
	json_decref(v);
	/* A schema that refers to itself forever stops at the depth cap. */
	s = json_loads("{\"$ref\":\"#\"}", 0, NULL);
	assert_int_equal(broker_schema_check(s, json_true(), msg, sizeof msg), 0);
	json_decref(s);
	/* A message that does not fit is cut, NUL-terminated. */
	s = json_loads("{\"required\":[\"a-rather-long-property-name-indeed\"]}", 0, NULL);
	v = json_object();
	assert_int_equal(broker_schema_check(s, v, msg, 16), 1);
	assert_string_equal(msg, "input must have");
	assert_int_equal(broker_schema_check(NULL, v, msg, sizeof msg), 0);
	json_decref(s);
	json_decref(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ajv_words),
		cmocka_unit_test(test_patterns),
		cmocka_unit_test(test_bounds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
