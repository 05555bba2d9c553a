/*
 * Unit tests for broker/decl.c: the golden cases of tests/decl/cases (run
 * from the repository root; DECL_UPDATE=1 rewrites the .d.ts files), the
 * error cases, and hostile schemas that must stay within the bounds.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "broker/decl.h"

#define CASES "tests/decl/cases"

static char *read_all(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) {
			buf[n] = '\0';
		} else {
			free(buf);
			buf = NULL;
		}
	}
	fclose(f);
	return buf;
}

/* Renders CASES/name.json and compares with CASES/name.d.ts. */
static void check_case(const char *name)
{
	char jpath[512], tpath[512];
	json_error_t jerr;
	struct cp_err err = { 0 };
	char *out = NULL, *want = NULL;
	json_t *tools = NULL;

	snprintf(jpath, sizeof jpath, CASES "/%s.json", name);
	snprintf(tpath, sizeof tpath, CASES "/%s.d.ts", name);
	tools = json_load_file(jpath, JSON_REJECT_DUPLICATES, &jerr);
	if (!tools)
		fail_msg("%s: %s", jpath, jerr.text);
	if (broker_decl_render(tools, &out, &err) != 0)
		fail_msg("%s: %s", jpath, err.msg);
	if (getenv("DECL_UPDATE")) {
		FILE *f = fopen(tpath, "wb");
		assert_non_null(f);
		fputs(out, f);
		fclose(f);
	}
	want = read_all(tpath);
	if (!want)
		fail_msg("%s: missing", tpath);
	if (strcmp(out, want) != 0)
		fail_msg("%s differs from %s; got:\n%s", jpath, tpath, out);
	free(want);
	free(out);
	json_decref(tools);
}

static void test_golden(void **state)
{
	DIR *d = opendir(CASES);
	struct dirent *e = NULL;
	int count = 0;

	(void)state;
	if (!d)
		fail_msg("%s: run the test from the repository root", CASES);
	while ((e = readdir(d)) != NULL) {
		size_t n = strlen(e->d_name);
		char name[256];
		if (n <= 5 || n >= sizeof name || strcmp(e->d_name + n - 5, ".json") != 0)
			continue;
		memcpy(name, e->d_name, n - 5);
		name[n - 5] = '\0';
		check_case(name);
		count++;
	}
	closedir(d);
	assert_true(count >= 12);
}

/* Renders text (one tool list); returns the code, *out the output. */
static int render_text(const char *text, char **out, struct cp_err *err)
{
	json_error_t jerr;
	json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
	int rc;

	if (!v)
		fail_msg("bad test JSON: %s", jerr.text);
	rc = broker_decl_render(v, out, err);
	json_decref(v);
	return rc;
}

/* The one line of the single tool `t` whose inputSchema is `schema`. */
static char *render_input(const char *schema)
{
	char text[4096];
	char *out = NULL;
	struct cp_err err = { 0 };

	snprintf(text, sizeof text, "[{\"name\":\"t\",\"inputSchema\":%s}]", schema);
	if (render_text(text, &out, &err) != 0)
		fail_msg("%s: %s", schema, err.msg);
	return out;
}

static void expect_input(const char *schema, const char *type)
{
	char want[4096];
	char *out = render_input(schema);

	snprintf(want, sizeof want,
	         BROKER_DECL_PREAMBLE "declare const tools: {\n  t: (input: %s) => Promise<unknown>;\n};\n",
	         type);
	if (strcmp(out, want) != 0)
		fail_msg("%s\nwant %sgot  %s", schema, want, out);
	free(out);
}

static void test_small(void **state)
{
	(void)state;
	expect_input("{\"type\":\"integer\"}", "number");
	expect_input("{\"type\":\"string\",\"nullable\":true}", "string | null");
	expect_input("{\"type\":\"null\",\"nullable\":true}", "null");
	expect_input("{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\"]}}", "(\"a\" | \"b\")[]");
	expect_input("{\"type\":\"array\",\"items\":{\"type\":\"string\",\"nullable\":true}}",
	             "(string | null)[]");
	expect_input("{\"allOf\":[{\"type\":\"string\"},{}]}", "string");
	expect_input("{\"anyOf\":[]}", "never");
	expect_input("{\"anyOf\":[false,{\"type\":\"string\"}]}", "string");
	expect_input("{\"allOf\":[{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"number\"}]},"
	             "{\"type\":\"object\",\"properties\":{}}]}",
	             "(string | number) & {}");
	expect_input("{\"const\":\"\\u0000x\"}", "\"\\u0000x\"");
	expect_input("{\"const\":\"a\\u2028b\"}", "\"a\xe2\x80\xa8" "b\"");
	expect_input("{\"$ref\":\"#/$defs/A\",\"$defs\":{\"A\":{\"$ref\":\"#/$defs/A\"}}}", "unknown");
	expect_input("{\"$ref\":\"#\"}", "unknown");
	expect_input("{\"$ref\":\"#/x/01\",\"x\":[1,2]}", "unknown");
	expect_input("{\"$ref\":\"#/x/1\",\"x\":[{},{\"type\":\"boolean\"}]}", "boolean");
	expect_input("{\"$ref\":\"#/x/99999999999999999999\",\"x\":[]}", "unknown");
	expect_input("{\"$ref\":\"#/$defs/\",\"$defs\":{\"\":{\"type\":\"number\"}}}", "number");
	/* The fragment is percent-decoded before it is split (RFC 6901 section 6). */
	expect_input("{\"$ref\":\"#/a%2Fb\",\"a\":{\"b\":{\"type\":\"number\"}}}", "number");
	expect_input("{\"$ref\":\"#/a~1b\",\"a/b\":{\"type\":\"number\"}}", "number");
	expect_input("{\"$ref\":\"#/a%2\",\"a%2\":{\"type\":\"number\"}}", "number");
	expect_input("{\"$ref\":\"#/a%zz\",\"a%zz\":{\"type\":\"number\"}}", "number");
	expect_input("{\"$ref\":\"#/~2\",\"~2\":{\"type\":\"number\"}}", "number");
	expect_input("{\"$ref\":\"\"}", "unknown");
	expect_input("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},"
	             "\"required\":[\"a\",\"a\",7,\"zz\"]}",
	             "{ a: string; }");
}

static void test_deterministic(void **state)
{
	char *a = NULL, *b = NULL;
	const char *text = "[{\"name\":\"z\",\"inputSchema\":{\"type\":\"object\",\"properties\":"
	                   "{\"b\":{},\"a\":{},\"c\":{}}}},{\"name\":\"a\"}]";

	(void)state;
	assert_int_equal(render_text(text, &a, NULL), 0);
	assert_int_equal(render_text(text, &b, NULL), 0);
	assert_string_equal(a, b);
	assert_non_null(strstr(a, "{ b?: unknown; a?: unknown; c?: unknown; }"));
	assert_true(strstr(a, "  z:") < strstr(a, "  a:"));
	free(a);
	free(b);
}

static void expect_error(const char *text, int code, const char *needle)
{
	struct cp_err err = { 0 };
	char *out = (char *)"untouched";

	assert_int_equal(render_text(text, &out, &err), code);
	assert_null(out);
	assert_int_equal(err.code, code);
	if (!strstr(err.msg, needle))
		fail_msg("%s: message \"%s\" lacks \"%s\"", text, err.msg, needle);
	assert_int_equal(render_text(text, NULL, NULL), code);
}

static void test_invalid(void **state)
{
	(void)state;
	expect_error("7", CP_E_INVALID_REQUEST, "tools must be an array");
	expect_error("{\"tool\":[]}", CP_E_INVALID_REQUEST, "tools must be an array");
	expect_error("[1]", CP_E_INVALID_REQUEST, "tools[0] is not an object");
	expect_error("[{\"name\":\"a\"},{}]", CP_E_INVALID_REQUEST, "tools[1]: name");
	expect_error("[{\"name\":\"\"}]", CP_E_INVALID_REQUEST, "tools[0]: name");
	expect_error("[{\"name\":\"a\",\"enabled\":\"no\"}]", CP_E_INVALID_REQUEST, "enabled");
	expect_error("[{\"name\":\"a\"},{\"name\":\"a\"}]", CP_E_INVALID_REQUEST,
	             "two enabled tools are named a");
}

/* 10,000 levels of nested objects (built in memory: jansson's parser stops
 * at 2048): the renderer stops at its depth cap with unknown. */
static void test_deep_nesting(void **state)
{
	json_t *schema = json_pack("{s:s}", "type", "string");
	json_t *tools = NULL;
	struct cp_err err = { 0 };
	char *out = NULL;

	(void)state;
	for (int i = 0; i < 10000; i++) {
		json_t *next = i % 2 ? json_pack("{s:s, s:{s:o}, s:[s]}", "type", "object", "properties",
		                                 "a", schema, "required", "a")
		                     : json_pack("{s:s, s:o}", "type", "array", "items", schema);
		assert_non_null(next);
		schema = next;
	}
	tools = json_pack("[{s:s, s:o}]", "name", "deep", "inputSchema", schema);
	assert_int_equal(broker_decl_render(tools, &out, &err), 0);
	assert_non_null(strstr(out, "unknown"));
	assert_true(strlen(out) < 4096);
	free(out);
	json_decref(tools);
}

/* defs d0 .. d{n-1}, each built from fmt with the next index (up to 4 times). */
static json_t *chain(int n, const char *fmt)
{
	json_t *defs = json_object();
	char key[32], body[256];

	for (int i = 0; i < n; i++) {
		snprintf(key, sizeof key, "d%d", i);
		snprintf(body, sizeof body, fmt, i + 1, i + 1, i + 1, i + 1);
		json_object_set_new(defs, key, json_loads(body, 0, NULL));
	}
	snprintf(key, sizeof key, "d%d", n);
	json_object_set_new(defs, key, json_pack("{s:s}", "type", "string")); /* the last */
	return json_pack("[{s:s, s:{s:s, s:o}}]", "name", "t", "inputSchema", "$ref", "#/$defs/d0",
	                 "$defs", defs);
}

static void test_ref_explosion(void **state)
{
	struct cp_err err = { 0 };
	char *out = NULL;
	clock_t t0 = clock();
	json_t *tools = chain(30, "{\"anyOf\":[{\"$ref\":\"#/$defs/d%d\"},"
	                          "{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/d%d\"}},"
	                          "{\"properties\":{\"a\":{\"$ref\":\"#/$defs/d%d\"}}},"
	                          "{\"allOf\":[{\"$ref\":\"#/$defs/d%d\"}]}]}");
	int rc;

	(void)state;
	assert_int_equal(broker_decl_render(tools, &out, &err), CP_E_TOO_BIG);
	assert_null(out);
	if (!strstr(err.msg, "nodes") && !strstr(err.msg, "bytes"))
		fail_msg("unexpected message: %s", err.msg);
	json_decref(tools);
	/* Two members: the depth cap alone bounds it (2^16 leaves at most). */
	tools = chain(30, "{\"anyOf\":[{\"$ref\":\"#/$defs/d%d\"},{\"type\":\"array\","
	                  "\"items\":{\"$ref\":\"#/$defs/d%d\"}}]}");
	rc = broker_decl_render(tools, &out, &err);
	assert_true(rc == 0 || rc == CP_E_TOO_BIG);
	assert_true(rc != 0 || strlen(out) <= BROKER_DECL_MAX_OUT);
	free(out);
	json_decref(tools);
	/* A long chain of single references hits the depth cap instead. */
	tools = chain(10000, "{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/d%d\"},\"x\":%d}");
	assert_int_equal(broker_decl_render(tools, &out, &err), 0);
	assert_non_null(strstr(out, "unknown[][]"));
	free(out);
	json_decref(tools);
	assert_true((double)(clock() - t0) / CLOCKS_PER_SEC < 20.0);
}

static void test_output_cap(void **state)
{
	size_t n = BROKER_DECL_MAX_OUT + 10;
	char *big = malloc(n + 1);
	json_t *tools = NULL, *e = json_array();
	struct cp_err err = { 0 };
	char *out = NULL;

	(void)state;
	assert_non_null(big);
	memset(big, 'x', n);
	big[n] = '\0';
	tools = json_pack("[{s:s, s:s}]", "name", "t", "description", big);
	assert_int_equal(broker_decl_render(tools, &out, &err), CP_E_TOO_BIG);
	assert_null(out);
	assert_non_null(strstr(err.msg, "bytes"));
	json_decref(tools);
	free(big);
	/* 150,000 literals of 10 bytes: over the output cap. */
	for (int i = 0; i < 150000; i++) {
		char lit[16];
		snprintf(lit, sizeof lit, "v%08d", i);
		json_array_append_new(e, json_string(lit));
	}
	tools = json_pack("[{s:s, s:{s:o}}]", "name", "t", "inputSchema", "enum", e);
	assert_int_equal(broker_decl_render(tools, &out, &err), CP_E_TOO_BIG);
	json_decref(tools);
}

/* 60,000 properties, all required: the required look-ups are bounded. */
static void test_wide(void **state)
{
	json_t *props = json_object(), *req = json_array(), *tools = NULL;
	struct cp_err err = { 0 };
	char *out = NULL;
	clock_t t0 = clock();

	(void)state;
	for (int i = 0; i < 60000; i++) {
		char key[16];
		snprintf(key, sizeof key, "p%d", i);
		json_object_set_new(props, key, json_true());
		json_array_append_new(req, json_string(key));
	}
	tools = json_pack("[{s:s, s:{s:o, s:o}}]", "name", "t", "inputSchema", "properties", props,
	                  "required", req);
	assert_int_equal(broker_decl_render(tools, &out, &err), CP_E_TOO_BIG);
	assert_null(out);
	json_decref(tools);
	assert_true((double)(clock() - t0) / CLOCKS_PER_SEC < 20.0);
}

/* The preamble of an empty tool list. */
static char *preamble_now(void)
{
	json_t *tools = json_array();
	struct cp_err err = { 0 };
	char *out = NULL;

	assert_int_equal(broker_decl_render(tools, &out, &err), 0);
	json_decref(tools);
	char *end = strstr(out, "declare const tools");
	assert_non_null(end);
	*end = '\0';
	return out;
}

/* The deployment's packages are named, wrapped as a comment, and a bad
 * list leaves the last good one in place. */
static void test_packages(void **state)
{
	struct cp_err err = { 0 };
	char *p = NULL, list[4096] = "";

	(void)state;
	assert_int_equal(broker_decl_set_packages(" lodash , zod,,@scope/pkg.js ", &err), 0);
	p = preamble_now();
	assert_non_null(strstr(p, "no network access"));
	assert_non_null(strstr(p, "built-in modules and these packages: lodash, zod,\n"
	                          " * @scope/pkg.js.\n */\n"));
	free(p);

	assert_int_equal(broker_decl_set_packages("lodash,lo dash", &err), CP_E_INVALID_REQUEST);
	assert_int_equal(broker_decl_set_packages("a*/b", &err), CP_E_INVALID_REQUEST);
	p = preamble_now();
	assert_non_null(strstr(p, "lodash, zod,\n * @scope/pkg.js."));
	free(p);

	/* Many names: every line of the comment stays within 80 columns. */
	for (int i = 0; i < BROKER_DECL_MAX_PACKAGES; i++)
		snprintf(list + strlen(list), sizeof list - strlen(list), "%spackage-number-%d",
		         i ? "," : "", i);
	assert_int_equal(broker_decl_set_packages(list, &err), 0);
	p = preamble_now();
	for (char *line = p, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
		assert_true(nl - line <= 80);
		assert_true(strncmp(line, "/**", 3) == 0 || strncmp(line, " *", 2) == 0);
	}
	assert_non_null(strstr(p, "package-number-99."));
	free(p);
	strcat(list, ",one-too-many");
	assert_int_equal(broker_decl_set_packages(list, &err), CP_E_INVALID_REQUEST);

	assert_int_equal(broker_decl_set_packages(NULL, &err), 0);
	p = preamble_now();
	assert_string_equal(p, BROKER_DECL_PREAMBLE);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_golden),
		cmocka_unit_test(test_small),
		cmocka_unit_test(test_deterministic),
		cmocka_unit_test(test_invalid),
		cmocka_unit_test(test_deep_nesting),
		cmocka_unit_test(test_ref_explosion),
		cmocka_unit_test(test_output_cap),
		cmocka_unit_test(test_wide),
		cmocka_unit_test(test_packages),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
