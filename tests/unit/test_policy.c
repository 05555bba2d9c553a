/*
 * test_policy.c - the execution policy of docs/contract.md §3: defaults,
 * per-field overrides, the ceiling, refusals naming the field, and the JSON
 * form with the contract's names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "runner/policy.h"

/* The contract's names, in struct order, with docs/contract.md §3's default
 * (memory: policy.h's 512 MiB) and the built-in ceiling. maxCpuMs, whose
 * default and built-in ceiling are none, has tests of its own below. */
struct row {
	const char *name;
	size_t offset;
	uint64_t def;
	uint64_t ceil;
};

#define R(json, member, d, c) { json, offsetof(struct codepod_policy, member), d, c }
static const struct row rows[] = {
	R("timeoutMs", timeout_ms, 30000, 900000),
	R("startupTimeoutMs", startup_timeout_ms, 120000, 900000),
	R("maxSourceBytes", max_source_bytes, 131072, 1048576),
	R("maxResultBytes", max_result_bytes, 32768, 4194304),
	R("maxBridgeRequests", max_bridge_requests, 256, 10000),
	R("maxInFlightBridgeRequests", max_in_flight, 32, 256),
	R("maxToolInputBytes", max_tool_input_bytes, 65536, 4194304),
	R("maxToolOutputBytes", max_tool_output_bytes, 1048576, 16777216),
	R("maxMemoryMb", max_memory_mb, 512, 8192),
};
#undef R
#define NROWS (sizeof rows / sizeof rows[0])

static uint64_t get(const struct codepod_policy *p, size_t i)
{
	uint64_t v;
	memcpy(&v, (const char *)p + rows[i].offset, sizeof v);
	return v;
}

static json_t *parse(const char *text)
{
	json_error_t jerr;
	json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);
	if (!v)
		fail_msg("bad test JSON %s: %s", text, jerr.text);
	return v;
}

/* Applies `text` over the defaults with the built-in ceiling. */
static int apply_text(struct codepod_policy *p, const char *text, struct cp_err *err)
{
	struct codepod_policy ceil;
	codepod_policy_defaults(p);
	codepod_policy_ceiling_defaults(&ceil);
	json_t *obj = text ? parse(text) : NULL;
	cp_err_clear(err);
	int rc = codepod_policy_apply(p, obj, &ceil, err);
	json_decref(obj);
	return rc;
}

static void test_defaults_match_design(void **state)
{
	(void)state;
	struct codepod_policy p;
	memset(&p, 0xAB, sizeof p);
	codepod_policy_defaults(&p);
	assert_int_equal(sizeof p, (NROWS + 4) * sizeof(uint64_t)); /* no field untested */
	assert_int_equal(p.max_cpu_ms, CODEPOD_POLICY_NONE);
	assert_int_equal(p.max_file_bytes, 1ull << 30);
	assert_int_equal(p.max_workspace_bytes, 1ull << 30);
	assert_int_equal(p.max_workspace_files, 100000);
	for (size_t i = 0; i < NROWS; i++) {
		if (get(&p, i) != rows[i].def)
			fail_msg("%s: default %llu, want %llu", rows[i].name,
			         (unsigned long long)get(&p, i), (unsigned long long)rows[i].def);
	}
	/* The named fields, spelled out, against the table of section 3. */
	assert_int_equal(p.timeout_ms, 30000);
	assert_int_equal(p.startup_timeout_ms, 120000);
	assert_int_equal(p.max_source_bytes, 131072);
	assert_int_equal(p.max_result_bytes, 32768);
	assert_int_equal(p.max_bridge_requests, 256);
	assert_int_equal(p.max_in_flight, 32);
	assert_int_equal(p.max_tool_input_bytes, 65536);
	assert_int_equal(p.max_tool_output_bytes, 1048576);
}

static void test_ceiling_at_least_defaults(void **state)
{
	(void)state;
	struct codepod_policy d, c;
	codepod_policy_defaults(&d);
	memset(&c, 0xAB, sizeof c);
	codepod_policy_ceiling_defaults(&c);
	for (size_t i = 0; i < NROWS; i++) {
		assert_true(get(&c, i) >= get(&d, i));
		assert_int_equal(get(&c, i), rows[i].ceil);
	}
}

static void test_null_and_json_null_change_nothing(void **state)
{
	(void)state;
	struct codepod_policy p, d;
	struct cp_err err;
	codepod_policy_defaults(&d);
	assert_int_equal(apply_text(&p, NULL, &err), 0);
	assert_memory_equal(&p, &d, sizeof p);
	assert_int_equal(apply_text(&p, "null", &err), 0);
	assert_memory_equal(&p, &d, sizeof p);
	assert_int_equal(apply_text(&p, "{}", &err), 0);
	assert_memory_equal(&p, &d, sizeof p);
}

/* Each field alone: only that field changes; 1 and the ceiling itself are
 * accepted. */
static void test_each_field_overrides_alone(void **state)
{
	(void)state;
	struct codepod_policy d;
	codepod_policy_defaults(&d);
	for (size_t i = 0; i < NROWS; i++) {
		const uint64_t vals[] = { 1, rows[i].def + 1, rows[i].ceil };
		for (size_t k = 0; k < 3; k++) {
			char text[128];
			snprintf(text, sizeof text, "{\"%s\":%llu}", rows[i].name,
			         (unsigned long long)vals[k]);
			struct codepod_policy p;
			struct cp_err err;
			if (apply_text(&p, text, &err) != 0)
				fail_msg("%s refused: %s", text, err.msg);
			for (size_t j = 0; j < NROWS; j++)
				assert_int_equal(get(&p, j), j == i ? vals[k] : get(&d, j));
		}
	}
}

static void test_several_fields_and_base_kept(void **state)
{
	(void)state;
	struct codepod_policy p, ceil;
	struct cp_err err;
	codepod_policy_ceiling_defaults(&ceil);
	/* The base is whatever `out` holds, not the defaults. */
	memset(&p, 0, sizeof p);
	p.max_memory_mb = 77;
	json_t *obj = parse("{\"timeoutMs\":10000,\"maxBridgeRequests\":50,"
	                    "\"maxToolOutputBytes\":2048}");
	assert_int_equal(codepod_policy_apply(&p, obj, &ceil, &err), 0);
	json_decref(obj);
	assert_int_equal(p.timeout_ms, 10000);
	assert_int_equal(p.max_bridge_requests, 50);
	assert_int_equal(p.max_tool_output_bytes, 2048);
	assert_int_equal(p.max_memory_mb, 77);
	assert_int_equal(p.startup_timeout_ms, 0);
}

/* A misspelled key must not silently run the program under the default. */
static void test_unknown_fields_refused(void **state)
{
	(void)state;
	static const char *const bad[] = { "{\"timeoutMS\":5000}", "{\"bogus\":1,\"timeoutMs\":5}",
	                                   "{\"TimeoutMs\":5}", "{\"\":null}",
	                                   "{\"nested\":{\"timeoutMs\":1}}" };
	static const char *const named[] = { "policy.timeoutMS", "policy.bogus", "policy.TimeoutMs",
	                                     "policy. ", "policy.nested" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct codepod_policy p;
		struct cp_err err;
		assert_int_equal(apply_text(&p, bad[i], &err), CP_E_INVALID_REQUEST);
		if (i != 3)
			assert_non_null(strstr(err.msg, named[i]));
		assert_non_null(strstr(err.msg, "not a policy field"));
	}
}

static void test_deployment_ceiling_and_defaults(void **state)
{
	(void)state;
	struct codepod_policy d, c, built_in;
	struct cp_err err;
	codepod_policy_ceiling_defaults(&built_in);
	json_t *ceil = parse("{\"timeoutMs\":1000,\"maxResultBytes\":65536}");
	json_t *def = parse("{\"maxBridgeRequests\":7}");
	assert_int_equal(codepod_policy_deployment(&d, &c, def, ceil, &err), 0);
	assert_int_equal(c.timeout_ms, 1000);
	assert_int_equal(d.timeout_ms, 1000);       /* the 30000 default came down */
	assert_int_equal(c.max_result_bytes, 65536);
	assert_int_equal(d.max_result_bytes, 32768); /* under the ceiling: unchanged */
	assert_int_equal(d.max_bridge_requests, 7);
	assert_int_equal(c.max_memory_mb, built_in.max_memory_mb);
	json_decref(def);
	/* A default over the deployment's ceiling, a ceiling over the built-in one. */
	def = parse("{\"timeoutMs\":2000}");
	assert_int_equal(codepod_policy_deployment(&d, &c, def, ceil, &err), CP_E_INVALID_REQUEST);
	assert_non_null(strstr(err.msg, "ceiling of 1000"));
	json_decref(def);
	json_decref(ceil);
	ceil = parse("{\"timeoutMs\":100000000}");
	assert_int_equal(codepod_policy_deployment(&d, &c, NULL, ceil, &err), CP_E_INVALID_REQUEST);
	json_decref(ceil);
	assert_int_equal(codepod_policy_deployment(&d, &c, NULL, NULL, &err), 0);
	assert_memory_equal(&c, &built_in, sizeof c);
}

static void expect_refused(const char *text, const char *field, const char *also)
{
	struct codepod_policy p;
	struct cp_err err;
	int rc = apply_text(&p, text, &err);
	if (rc != CP_E_INVALID_REQUEST)
		fail_msg("%s: rc %d, want CP_E_INVALID_REQUEST", text, rc);
	assert_int_equal(err.code, CP_E_INVALID_REQUEST);
	char want[96];
	snprintf(want, sizeof want, "policy.%s ", field);
	if (!strstr(err.msg, want))
		fail_msg("%s: message \"%s\" does not name %s", text, err.msg, field);
	if (also && !strstr(err.msg, also))
		fail_msg("%s: message \"%s\" lacks \"%s\"", text, err.msg, also);
}

static void test_wrong_types_refused(void **state)
{
	(void)state;
	static const char *const bad[] = { "\"100\"", "1.5", "100.0", "true", "false",
	                                   "null", "[1]", "{\"v\":1}" };
	for (size_t i = 0; i < NROWS; i++) {
		for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
			char text[128];
			snprintf(text, sizeof text, "{\"%s\":%s}", rows[i].name, bad[k]);
			expect_refused(text, rows[i].name, "positive integer");
		}
	}
}

static void test_zero_and_negative_refused(void **state)
{
	(void)state;
	static const char *const bad[] = { "0", "-1", "-30000", "-9223372036854775808" };
	for (size_t i = 0; i < NROWS; i++) {
		for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
			char text[128];
			snprintf(text, sizeof text, "{\"%s\":%s}", rows[i].name, bad[k]);
			expect_refused(text, rows[i].name, "positive integer");
		}
	}
}

static void test_over_ceiling_refused_names_ceiling(void **state)
{
	(void)state;
	for (size_t i = 0; i < NROWS; i++) {
		char text[128], ceil[32], val[32];
		snprintf(text, sizeof text, "{\"%s\":%llu}", rows[i].name,
		         (unsigned long long)rows[i].ceil + 1);
		snprintf(ceil, sizeof ceil, "ceiling of %llu", (unsigned long long)rows[i].ceil);
		expect_refused(text, rows[i].name, ceil);
		snprintf(val, sizeof val, "is %llu", (unsigned long long)rows[i].ceil + 1);
		expect_refused(text, rows[i].name, val);
		/* The largest JSON integer too. */
		snprintf(text, sizeof text, "{\"%s\":9223372036854775807}", rows[i].name);
		expect_refused(text, rows[i].name, ceil);
	}
}

/* A custom (lower) ceiling is the one enforced and named. */
static void test_custom_ceiling(void **state)
{
	(void)state;
	struct codepod_policy p, ceil;
	struct cp_err err;
	codepod_policy_defaults(&p);
	codepod_policy_ceiling_defaults(&ceil);
	ceil.timeout_ms = 5000;
	json_t *ok = parse("{\"timeoutMs\":5000}");
	json_t *bad = parse("{\"timeoutMs\":5001}");
	assert_int_equal(codepod_policy_apply(&p, ok, &ceil, &err), 0);
	assert_int_equal(p.timeout_ms, 5000);
	assert_int_equal(codepod_policy_apply(&p, bad, &ceil, &err), CP_E_INVALID_REQUEST);
	assert_non_null(strstr(err.msg, "policy.timeoutMs"));
	assert_non_null(strstr(err.msg, "ceiling of 5000"));
	assert_int_equal(p.timeout_ms, 5000);
	/* NULL err is accepted. */
	assert_int_equal(codepod_policy_apply(&p, bad, &ceil, NULL), CP_E_INVALID_REQUEST);
	json_decref(ok);
	json_decref(bad);
}

static void test_not_an_object_refused(void **state)
{
	(void)state;
	static const char *const bad[] = { "[]", "1", "\"timeoutMs\"", "true" };
	for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
		struct codepod_policy p;
		struct cp_err err;
		assert_int_equal(apply_text(&p, bad[k], &err), CP_E_INVALID_REQUEST);
		assert_non_null(strstr(err.msg, "policy"));
	}
}

static void test_to_json_contract_names(void **state)
{
	(void)state;
	struct codepod_policy p;
	codepod_policy_defaults(&p);
	json_t *o = codepod_policy_to_json(&p);
	assert_non_null(o);
	assert_true(json_is_object(o));
	assert_int_equal(json_object_size(o), NROWS);
	for (size_t i = 0; i < NROWS; i++) {
		json_t *v = json_object_get(o, rows[i].name);
		if (!json_is_integer(v))
			fail_msg("to_json lacks integer %s", rows[i].name);
		assert_int_equal(json_integer_value(v), rows[i].def);
	}
	json_decref(o);
}

/* to_json then apply over a zeroed base gives the same policy back. */
static void test_to_json_round_trip(void **state)
{
	(void)state;
	struct codepod_policy src, back, ceil;
	struct cp_err err;
	codepod_policy_ceiling_defaults(&ceil);
	memset(&src, 0, sizeof src);
	for (size_t i = 0; i < NROWS; i++)
		memcpy((char *)&src + rows[i].offset, &(uint64_t){ rows[i].ceil - i }, sizeof(uint64_t));
	json_t *o = codepod_policy_to_json(&src);
	assert_non_null(o);
	memset(&back, 0, sizeof back);
	assert_int_equal(codepod_policy_apply(&back, o, &ceil, &err), 0);
	assert_memory_equal(&src, &back, sizeof src);
	/* And the text form is stable. */
	char *t1 = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_t *o2 = codepod_policy_to_json(&back);
	char *t2 = json_dumps(o2, JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(t1, t2);
	free(t1);
	free(t2);
	json_decref(o);
	json_decref(o2);

	/* The defaults round-trip too, and the exact text is the contract's. */
	codepod_policy_defaults(&src);
	o = codepod_policy_to_json(&src);
	t1 = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(t1,
	                    "{\"maxBridgeRequests\":256,\"maxInFlightBridgeRequests\":32,"
	                    "\"maxMemoryMb\":512,\"maxResultBytes\":32768,"
	                    "\"maxSourceBytes\":131072,\"maxToolInputBytes\":65536,"
	                    "\"maxToolOutputBytes\":1048576,\"startupTimeoutMs\":120000,"
	                    "\"timeoutMs\":30000}");
	free(t1);
	json_decref(o);
}

/* maxFileBytes: 1 GiB by default, 64 GiB at most; a limit of file
 * operations, so a program's digest (to_json) leaves it out. */
static void test_max_file_bytes(void **state)
{
	(void)state;
	struct codepod_policy p, c;
	struct cp_err err;
	codepod_policy_ceiling_defaults(&c);
	assert_int_equal(c.max_file_bytes, 64ull << 30);
	codepod_policy_defaults(&p);
	json_t *o = parse("{\"maxFileBytes\":5}");
	assert_int_equal(codepod_policy_apply(&p, o, &c, &err), 0);
	json_decref(o);
	assert_int_equal(p.max_file_bytes, 5);
	o = codepod_policy_to_json(&p);
	assert_null(json_object_get(o, "maxFileBytes"));
	json_decref(o);
	o = parse("{\"maxFileBytes\":68719476737}");
	assert_int_equal(codepod_policy_apply(&p, o, &c, &err), CP_E_INVALID_REQUEST);
	assert_non_null(strstr(err.msg, "maxFileBytes"));
	json_decref(o);
}

/* maxWorkspaceBytes / maxWorkspaceFiles: 1 GiB and 100000 by default, 1 TiB
 * and 10 million at most; the conversation's workspace, not the program's,
 * so a digest (to_json) leaves them out; a deployment's ceiling lowers the
 * default. */
static void test_max_workspace(void **state)
{
	(void)state;
	struct codepod_policy p, d, c;
	struct cp_err err;
	codepod_policy_ceiling_defaults(&c);
	assert_int_equal(c.max_workspace_bytes, 1ull << 40);
	assert_int_equal(c.max_workspace_files, 10000000);
	codepod_policy_defaults(&p);
	assert_int_equal(p.max_workspace_bytes, 1ull << 30);
	assert_int_equal(p.max_workspace_files, 100000);
	json_t *o = parse("{\"maxWorkspaceBytes\":4096,\"maxWorkspaceFiles\":7}");
	assert_int_equal(codepod_policy_apply(&p, o, &c, &err), 0);
	json_decref(o);
	assert_int_equal(p.max_workspace_bytes, 4096);
	assert_int_equal(p.max_workspace_files, 7);
	o = codepod_policy_to_json(&p);
	assert_null(json_object_get(o, "maxWorkspaceBytes"));
	assert_null(json_object_get(o, "maxWorkspaceFiles"));
	json_decref(o);
	o = parse("{\"maxWorkspaceFiles\":10000001}");
	assert_int_equal(codepod_policy_apply(&p, o, &c, &err), CP_E_INVALID_REQUEST);
	assert_non_null(strstr(err.msg, "maxWorkspaceFiles"));
	json_decref(o);
	json_t *ceil = parse("{\"maxWorkspaceBytes\":1048576}");
	assert_int_equal(codepod_policy_deployment(&d, &c, NULL, ceil, &err), 0);
	json_decref(ceil);
	assert_int_equal(d.max_workspace_bytes, 1048576);
	assert_int_equal(d.max_workspace_files, 100000);
}

/* maxCpuMs: none (0) by default and as the built-in ceiling; a request's
 * value is a positive integer like any other; none is left out of the JSON
 * (the digest of an execution without it is unchanged); a deployment's
 * ceiling brings the default none down to it. */
static void test_max_cpu_ms(void **state)
{
	(void)state;
	struct codepod_policy p, d, c;
	struct cp_err err;
	codepod_policy_ceiling_defaults(&c);
	assert_int_equal(c.max_cpu_ms, CODEPOD_POLICY_NONE);
	assert_int_equal(apply_text(&p, "{\"maxCpuMs\":1}", &err), 0);
	assert_int_equal(p.max_cpu_ms, 1);
	assert_int_equal(apply_text(&p, "{\"maxCpuMs\":9223372036854775807}", &err), 0);
	assert_int_equal(p.max_cpu_ms, 9223372036854775807ULL);
	static const char *const bad[] = { "0", "-1", "\"100\"", "1.5", "null", "true" };
	for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
		char text[64];
		snprintf(text, sizeof text, "{\"maxCpuMs\":%s}", bad[k]);
		expect_refused(text, "maxCpuMs", "positive integer");
	}
	codepod_policy_defaults(&p);
	json_t *o = codepod_policy_to_json(&p);
	assert_null(json_object_get(o, "maxCpuMs"));
	json_decref(o);
	p.max_cpu_ms = 250;
	o = codepod_policy_to_json(&p);
	assert_int_equal(json_integer_value(json_object_get(o, "maxCpuMs")), 250);
	json_decref(o);
	/* the deployment's ceiling: none lowered to 1000, the default with it */
	json_t *ceil = parse("{\"maxCpuMs\":1000}");
	assert_int_equal(codepod_policy_deployment(&d, &c, NULL, ceil, &err), 0);
	assert_int_equal(c.max_cpu_ms, 1000);
	assert_int_equal(d.max_cpu_ms, 1000);
	json_t *def = parse("{\"maxCpuMs\":300}");
	assert_int_equal(codepod_policy_deployment(&d, &c, def, ceil, &err), 0);
	assert_int_equal(d.max_cpu_ms, 300);
	json_decref(def);
	json_t *over = parse("{\"maxCpuMs\":1001}");
	assert_int_equal(codepod_policy_apply(&d, over, &c, &err), CP_E_INVALID_REQUEST);
	assert_non_null(strstr(err.msg, "ceiling of 1000"));
	json_decref(over);
	json_decref(ceil);
	/* without a ceiling for it, the default stays none */
	assert_int_equal(codepod_policy_deployment(&d, &c, NULL, NULL, &err), 0);
	assert_int_equal(d.max_cpu_ms, CODEPOD_POLICY_NONE);
	assert_int_equal(c.max_cpu_ms, CODEPOD_POLICY_NONE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults_match_design),
		cmocka_unit_test(test_max_file_bytes),
		cmocka_unit_test(test_max_workspace),
		cmocka_unit_test(test_ceiling_at_least_defaults),
		cmocka_unit_test(test_null_and_json_null_change_nothing),
		cmocka_unit_test(test_each_field_overrides_alone),
		cmocka_unit_test(test_several_fields_and_base_kept),
		cmocka_unit_test(test_unknown_fields_refused),
		cmocka_unit_test(test_deployment_ceiling_and_defaults),
		cmocka_unit_test(test_wrong_types_refused),
		cmocka_unit_test(test_zero_and_negative_refused),
		cmocka_unit_test(test_over_ceiling_refused_names_ceiling),
		cmocka_unit_test(test_custom_ceiling),
		cmocka_unit_test(test_not_an_object_refused),
		cmocka_unit_test(test_to_json_contract_names),
		cmocka_unit_test(test_to_json_round_trip),
		cmocka_unit_test(test_max_cpu_ms),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
