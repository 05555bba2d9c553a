/*
 * test_outcome.c - the outcome JSON of docs/contract.md §4, built by
 * codepod_outcome_build from a struct codepod_exec filled in by hand: status,
 * result, error with programError, calls, usage, logs and logsTruncated.
 * Every check compares the exact JSON text (compact, keys sorted).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "runner/exec_int.h"

#define DIGEST "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

struct fx {
	struct codepod_backend backend;
	struct codepod cp;
	struct codepod_exec e;
	char id[16];
	char tools[4][16];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	if (!f)
		return -1;
	f->backend.name = "local";
	f->cp.cfg.backend = &f->backend;
	f->e.cp = &f->cp;
	snprintf(f->id, sizeof f->id, "e1");
	f->e.id = f->id;
	memcpy(f->e.digest, DIGEST, sizeof DIGEST);
	f->e.code = CP_OK;
	f->e.t_submit_ms = 1000;
	f->e.t_ready_ms = 1250;
	f->e.t_end_ms = 1900;
	if (codepod_logwin_init(&f->e.logs, 32, NULL))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	codepod_logwin_free(&f->e.logs);
	json_decref(f->e.result);
	json_decref(f->e.program_error);
	free(f->e.calls);
	free(f);
	return 0;
}

static json_t *parse(const char *text)
{
	json_error_t jerr;
	json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);
	if (!v)
		fail_msg("bad test JSON %s: %s", text, jerr.text);
	return v;
}

/* Builds the outcome and compares its sorted compact text with `want`. */
static void expect_outcome(const struct codepod_exec *e, const char *want)
{
	json_t *o = codepod_outcome_build(e);
	assert_non_null(o);
	char *got = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	assert_non_null(got);
	if (strcmp(got, want) != 0)
		fail_msg("outcome\n got: %s\nwant: %s", got, want);
	free(got);
	json_decref(o);
}

/* The fixture's times: submitted at 1000, ready at 1250, ended at 1900. */
#define USAGE_L(req, startup, run, logs) \
	"\"usage\":{\"bridgeRequests\":" #req ",\"digest\":\"" DIGEST "\"," \
	"\"logBytes\":" #logs ",\"resultBytes\":0," \
	"\"runMs\":" #run ",\"sandbox\":\"local\",\"startupMs\":" #startup "," \
	"\"toolCalls\":0,\"toolInputBytes\":0,\"toolOutputBytes\":0,\"wallMs\":900}"
#define USAGE(req, startup, run) USAGE_L(req, startup, run, 0)

static void test_succeeded_with_result(void **state)
{
	struct fx *f = *state;
	f->e.result = parse("{\"total\":3,\"names\":[\"a\",\"b\"],\"ok\":true}");
	expect_outcome(&f->e,
	               "{\"calls\":[],\"executionId\":\"e1\",\"logs\":\"\",\"logsTruncated\":false,"
	               "\"result\":{\"names\":[\"a\",\"b\"],\"ok\":true,\"total\":3},"
	               "\"status\":\"succeeded\"," USAGE(0, 250, 650) "}");
}

/* A scalar and JSON null are results too (null is not "no result"). */
static void test_succeeded_scalar_and_null_result(void **state)
{
	struct fx *f = *state;
	f->e.result = json_integer(42);
	expect_outcome(&f->e,
	               "{\"calls\":[],\"executionId\":\"e1\",\"logs\":\"\",\"logsTruncated\":false,"
	               "\"result\":42,\"status\":\"succeeded\"," USAGE(0, 250, 650) "}");
	json_decref(f->e.result);
	f->e.result = json_null();
	expect_outcome(&f->e,
	               "{\"calls\":[],\"executionId\":\"e1\",\"logs\":\"\",\"logsTruncated\":false,"
	               "\"result\":null,\"status\":\"succeeded\"," USAGE(0, 250, 650) "}");
}

static void test_succeeded_without_result(void **state)
{
	struct fx *f = *state;
	f->e.result = NULL;
	expect_outcome(&f->e,
	               "{\"calls\":[],\"executionId\":\"e1\",\"logs\":\"\",\"logsTruncated\":false,"
	               "\"status\":\"succeeded\"," USAGE(0, 250, 650) "}");
}

static void test_failed_with_error(void **state)
{
	struct fx *f = *state;
	f->e.code = CP_E_TIMEOUT;
	snprintf(f->e.message, sizeof f->e.message, "The program did not finish.");
	expect_outcome(&f->e,
	               "{\"calls\":[],\"error\":{\"code\":\"TIMEOUT\","
	               "\"message\":\"The program did not finish.\"},"
	               "\"executionId\":\"e1\",\"logs\":\"\",\"logsTruncated\":false,"
	               "\"status\":\"failed\"," USAGE(0, 250, 650) "}");
}

/* A failed execution never carries a result, even if one was stored. */
static void test_failed_drops_result(void **state)
{
	struct fx *f = *state;
	f->e.code = CP_E_RESULT_TOO_LARGE;
	f->e.result = json_string("should not appear");
	snprintf(f->e.message, sizeof f->e.message, "too big");
	expect_outcome(&f->e,
	               "{\"calls\":[],\"error\":{\"code\":\"RESULT_TOO_LARGE\",\"message\":\"too big\"},"
	               "\"executionId\":\"e1\",\"logs\":\"\",\"logsTruncated\":false,"
	               "\"status\":\"failed\"," USAGE(0, 250, 650) "}");
}

static void test_failed_with_program_error(void **state)
{
	struct fx *f = *state;
	f->e.code = CP_E_SCRIPT_ERROR;
	snprintf(f->e.message, sizeof f->e.message, "The program threw.");
	f->e.program_error = parse("{\"name\":\"TypeError\",\"message\":\"x is not a function\","
	                           "\"stack\":\"TypeError: x is not a function\\n    at script.ts:3:5\"}");
	expect_outcome(&f->e,
	               "{\"calls\":[],\"error\":{\"code\":\"SCRIPT_ERROR\",\"message\":\"The program threw.\","
	               "\"programError\":{\"message\":\"x is not a function\",\"name\":\"TypeError\","
	               "\"stack\":\"TypeError: x is not a function\\n    at script.ts:3:5\"}},"
	               "\"executionId\":\"e1\",\"logs\":\"\",\"logsTruncated\":false,"
	               "\"status\":\"failed\"," USAGE(0, 250, 650) "}");
}

/* programError is attached only to a failure. */
static void test_program_error_ignored_on_success(void **state)
{
	struct fx *f = *state;
	f->e.program_error = parse("{\"name\":\"E\",\"message\":\"m\",\"stack\":\"s\"}");
	expect_outcome(&f->e,
	               "{\"calls\":[],\"executionId\":\"e1\",\"logs\":\"\",\"logsTruncated\":false,"
	               "\"status\":\"succeeded\"," USAGE(0, 250, 650) "}");
}

/* Every outcome code maps to its contract name; internal codes to INTERNAL. */
static void test_error_code_names(void **state)
{
	struct fx *f = *state;
	static const struct {
		enum cp_code code;
		const char *name;
	} codes[] = {
		{ CP_E_INVALID_REQUEST, "INVALID_REQUEST" },
		{ CP_E_SOURCE_TOO_LARGE, "SOURCE_TOO_LARGE" },
		{ CP_E_SANDBOX_UNAVAILABLE, "SANDBOX_UNAVAILABLE" },
		{ CP_E_STARTUP_TIMEOUT, "STARTUP_TIMEOUT" },
		{ CP_E_TIMEOUT, "TIMEOUT" },
		{ CP_E_SCRIPT_ERROR, "SCRIPT_ERROR" },
		{ CP_E_RESULT_TOO_LARGE, "RESULT_TOO_LARGE" },
		{ CP_E_PROCESS_EXITED, "PROCESS_EXITED" },
		{ CP_E_NEVER_SETTLES, "NEVER_SETTLES" },
		{ CP_E_CANCELLED, "CANCELLED" },
		{ CP_E_OUTCOME_UNKNOWN, "OUTCOME_UNKNOWN" },
		{ CP_E_INTERNAL, "INTERNAL" },
		{ CP_E_CPU_LIMIT, "CPU_LIMIT" },
		{ CP_E_REPLAY_DIVERGED, "REPLAY_DIVERGED" },
		{ CP_E_NOMEM, "INTERNAL" },
		{ CP_E_PARSE, "INTERNAL" },
		{ CP_E_RETRY, "INTERNAL" },
	};
	snprintf(f->e.message, sizeof f->e.message, "m");
	for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
		f->e.code = codes[i].code;
		json_t *o = codepod_outcome_build(&f->e);
		assert_non_null(o);
		assert_string_equal(json_string_value(json_object_get(o, "status")), "failed");
		assert_string_equal(json_string_value(json_object_get(json_object_get(o, "error"), "code")),
		                    codes[i].name);
		json_decref(o);
	}
}

static void add_call(struct fx *f, const char *tool, enum codepod_call_state st,
                     uint64_t start, uint64_t end)
{
	size_t i = f->e.ncalls++;
	assert_true(i < 4);
	snprintf(f->tools[i], sizeof f->tools[i], "%s", tool);
	f->e.calls[i].tool = f->tools[i];
	f->e.calls[i].state = st;
	f->e.calls[i].t_start_ms = start;
	f->e.calls[i].t_end_ms = end;
}

/* ids are the call numbers; ms from start to end (or to the execution's end
 * when the call never ended); the four states have their contract names. */
static void test_calls(void **state)
{
	struct fx *f = *state;
	f->e.calls = calloc(4, sizeof *f->e.calls);
	f->e.calls_cap = 4;
	add_call(f, "listInvoices", CODEPOD_CALL_OK, 1300, 1340);
	add_call(f, "my-tool", CODEPOD_CALL_ERROR, 1350, 1350);
	add_call(f, "nope", CODEPOD_CALL_DENIED, 1400, 1401);
	add_call(f, "slow", CODEPOD_CALL_CANCELLED, 1500, 0); /* never answered */
	f->e.requests = 4;
	expect_outcome(&f->e,
	               "{\"calls\":["
	               "{\"id\":\"1\",\"ms\":40,\"status\":\"ok\",\"tool\":\"listInvoices\"},"
	               "{\"id\":\"2\",\"ms\":0,\"status\":\"error\",\"tool\":\"my-tool\"},"
	               "{\"id\":\"3\",\"ms\":1,\"status\":\"denied\",\"tool\":\"nope\"},"
	               "{\"id\":\"4\",\"ms\":400,\"status\":\"cancelled\",\"tool\":\"slow\"}],"
	               "\"executionId\":\"e1\",\"logs\":\"\",\"logsTruncated\":false,"
	               "\"status\":\"succeeded\"," USAGE(4, 250, 650) "}");
}

/* Calls still queued or in flight when the outcome is built (codepod_exec_finish
 * cancels them first, so this is defensive) read "cancelled"; an end before
 * the start reads 0 ms rather than wrapping around. */
static void test_calls_unfinished_states(void **state)
{
	struct fx *f = *state;
	f->e.calls = calloc(4, sizeof *f->e.calls);
	f->e.calls_cap = 4;
	add_call(f, "q", CODEPOD_CALL_QUEUED, 1800, 0);
	add_call(f, "f", CODEPOD_CALL_IN_FLIGHT, 1850, 0);
	add_call(f, "w", CODEPOD_CALL_OK, 1850, 1700);
	f->e.requests = 7;
	expect_outcome(&f->e,
	               "{\"calls\":["
	               "{\"id\":\"1\",\"ms\":100,\"status\":\"cancelled\",\"tool\":\"q\"},"
	               "{\"id\":\"2\",\"ms\":50,\"status\":\"cancelled\",\"tool\":\"f\"},"
	               "{\"id\":\"3\",\"ms\":0,\"status\":\"ok\",\"tool\":\"w\"}],"
	               "\"executionId\":\"e1\",\"logs\":\"\",\"logsTruncated\":false,"
	               "\"status\":\"succeeded\"," USAGE(7, 250, 650) "}");
}

/* Requests over maxBridgeRequests are not listed, only counted by status:
 * the outcome of 100,000 calls stays within the limit's entries. */
static void test_calls_omitted_over_the_limit(void **state)
{
	struct fx *f = *state;
	f->e.calls = calloc(4, sizeof *f->e.calls);
	f->e.calls_cap = 4;
	add_call(f, "a", CODEPOD_CALL_OK, 1300, 1301);
	f->e.requests = 100000;
	f->e.calls_omitted = 99999;
	expect_outcome(&f->e,
	               "{\"calls\":["
	               "{\"id\":\"1\",\"ms\":1,\"status\":\"ok\",\"tool\":\"a\"}],"
	               "\"callsOmitted\":{\"denied\":99999},"
	               "\"executionId\":\"e1\",\"logs\":\"\",\"logsTruncated\":false,"
	               "\"status\":\"succeeded\"," USAGE(100000, 250, 650) "}");
}

/* Never ready (failed at startup): startupMs runs to the end, runMs is 0. */
static void test_usage_never_ready(void **state)
{
	struct fx *f = *state;
	f->e.t_ready_ms = 0;
	f->e.code = CP_E_SANDBOX_UNAVAILABLE;
	snprintf(f->e.message, sizeof f->e.message, "The sandbox is unavailable: ImagePullBackOff");
	f->backend.name = "kubernetes";
	json_t *o = codepod_outcome_build(&f->e);
	assert_non_null(o);
	char *got = json_dumps(json_object_get(o, "usage"), JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(got, "{\"bridgeRequests\":0,\"digest\":\"" DIGEST "\",\"logBytes\":0,"
	                         "\"resultBytes\":0,\"runMs\":0,\"sandbox\":\"kubernetes\","
	                         "\"startupMs\":900,\"toolCalls\":0,\"toolInputBytes\":0,"
	                         "\"toolOutputBytes\":0,\"wallMs\":900}");
	free(got);
	json_decref(o);
}

static void test_usage_large_numbers(void **state)
{
	struct fx *f = *state;
	f->e.t_submit_ms = 5000000000ULL;
	f->e.t_ready_ms = 5000000007ULL;
	f->e.t_end_ms = 5900000007ULL;
	f->e.requests = 10000;
	json_t *o = codepod_outcome_build(&f->e);
	assert_non_null(o);
	char *got = json_dumps(json_object_get(o, "usage"), JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(got, "{\"bridgeRequests\":10000,\"digest\":\"" DIGEST "\","
	                         "\"logBytes\":0,\"resultBytes\":0,\"runMs\":900000000,"
	                         "\"sandbox\":\"local\",\"startupMs\":7,\"toolCalls\":0,"
	                         "\"toolInputBytes\":0,\"toolOutputBytes\":0,\"wallMs\":900000007}");
	free(got);
	json_decref(o);
}

/* The backend's figures: cpuMs counts from the hello (the runner's own CPU
 * then is taken off), maxRssBytes as read; the bytes as counted. */
static void test_usage_figures(void **state)
{
	struct fx *f = *state;
	f->e.usage.known = 1;
	f->e.usage.cpu_us = 245999;
	f->e.usage.max_rss_bytes = 52428800;
	f->e.hello_cpu_us = 40000;
	f->e.tool_calls = 2;
	f->e.tool_input_bytes = 20;
	f->e.tool_output_bytes = 19;
	f->e.result_bytes = 7;
	json_t *o = codepod_outcome_build(&f->e);
	assert_non_null(o);
	char *got = json_dumps(json_object_get(o, "usage"), JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(got, "{\"bridgeRequests\":0,\"cpuMs\":205,\"digest\":\"" DIGEST "\","
	                         "\"logBytes\":0,\"maxRssBytes\":52428800,\"resultBytes\":7,"
	                         "\"runMs\":650,\"sandbox\":\"local\",\"startupMs\":250,"
	                         "\"toolCalls\":2,\"toolInputBytes\":20,\"toolOutputBytes\":19,"
	                         "\"wallMs\":900}");
	free(got);
	json_decref(o);
	/* a reading below the hello's (ticks cut it short): 0, not a wrap-around */
	f->e.usage.cpu_us = 39000;
	assert_int_equal(codepod_exec_cpu_us(&f->e), 0);
	/* never ready: the program used nothing */
	f->e.usage.cpu_us = 245999;
	f->e.t_ready_ms = 0;
	assert_int_equal(codepod_exec_cpu_us(&f->e), 0);
	o = codepod_outcome_build(&f->e);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(o, "usage"), "cpuMs")), 0);
	json_decref(o);
}

static void test_logs_from_window(void **state)
{
	struct fx *f = *state;
	codepod_logwin_append(&f->e.logs, "hello\n", 6);
	codepod_logwin_append(&f->e.logs, "world \"q\"\n", 10);
	expect_outcome(&f->e,
	               "{\"calls\":[],\"executionId\":\"e1\",\"logs\":\"hello\\nworld \\\"q\\\"\\n\","
	               "\"logsTruncated\":false,\"status\":\"succeeded\"," USAGE_L(0, 250, 650, 16) "}");
	/* Exactly the capacity: still not truncated. */
	codepod_logwin_append(&f->e.logs, "0123456789abcdef", 16);
	assert_int_equal(f->e.logs.len, 32);
	json_t *o = codepod_outcome_build(&f->e);
	assert_true(json_is_false(json_object_get(o, "logsTruncated")));
	json_decref(o);
}

/* Over the window: the last cap bytes, logsTruncated true; logs come with a
 * failure too. */
static void test_logs_truncated(void **state)
{
	struct fx *f = *state;
	for (int i = 0; i < 10; i++) {
		char line[16];
		int n = snprintf(line, sizeof line, "line %d\n", i);
		codepod_logwin_append(&f->e.logs, line, (size_t)n);
	}
	/* 70 bytes appended; the window keeps the last 32 ("e 5\n" + 4 lines). */
	f->e.code = CP_E_PROCESS_EXITED;
	snprintf(f->e.message, sizeof f->e.message, "exited");
	expect_outcome(&f->e,
	               "{\"calls\":[],\"error\":{\"code\":\"PROCESS_EXITED\",\"message\":\"exited\"},"
	               "\"executionId\":\"e1\",\"logs\":\"e 5\\nline 6\\nline 7\\nline 8\\nline 9\\n\","
	               "\"logsTruncated\":true,\"status\":\"failed\"," USAGE_L(0, 250, 650, 70) "}");
}

/* Invalid UTF-8 and NUL in the window become U+FFFD; a character cut by the
 * window's start loses its leading continuation bytes. */
static void test_logs_invalid_utf8(void **state)
{
	struct fx *f = *state;
	static const char bad[] = "a\xff" "b\xc0\xaf" "c\0d\xed\xa0\x80" "e\xe2\x82";
	codepod_logwin_append(&f->e.logs, bad, sizeof bad - 1);
	json_t *o = codepod_outcome_build(&f->e);
	assert_non_null(o);
	const char *logs = json_string_value(json_object_get(o, "logs"));
	assert_non_null(logs);
	assert_int_equal(strlen(logs), json_string_length(json_object_get(o, "logs")));
	assert_string_equal(logs, "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd" "c\xef\xbf\xbd"
	                          "d\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" "e\xef\xbf\xbd");
	/* The whole outcome serializes (jansson refuses invalid UTF-8). */
	char *text = json_dumps(o, JSON_COMPACT);
	assert_non_null(text);
	free(text);
	json_decref(o);

	/* A 3-byte character cut by the start of the window. */
	codepod_logwin_free(&f->e.logs);
	assert_int_equal(codepod_logwin_init(&f->e.logs, 4, NULL), 0);
	codepod_logwin_append(&f->e.logs, "x\xe2\x82\xac" "ab", 6); /* x, euro sign, ab */
	o = codepod_outcome_build(&f->e);
	assert_non_null(o);
	assert_string_equal(json_string_value(json_object_get(o, "logs")), "ab");
	assert_true(json_is_true(json_object_get(o, "logsTruncated")));
	json_decref(o);
}

/* The key set is exactly the contract's (no stray fields). */
static void test_top_level_keys(void **state)
{
	struct fx *f = *state;
	f->e.code = CP_E_CANCELLED;
	snprintf(f->e.message, sizeof f->e.message, "stopped");
	json_t *o = codepod_outcome_build(&f->e);
	assert_non_null(o);
	static const char *const keys[] = { "executionId", "status", "logs", "logsTruncated",
	                                    "error", "calls", "usage" };
	assert_int_equal(json_object_size(o), sizeof keys / sizeof keys[0]);
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		assert_non_null(json_object_get(o, keys[i]));
	assert_int_equal(json_object_size(json_object_get(o, "error")), 2);
	assert_int_equal(json_object_size(json_object_get(o, "usage")), 11); /* no reading: no cpuMs */
	json_decref(o);
}

/* The outcome holds its own references: the exec's result can go first. */
static void test_outcome_outlives_exec_values(void **state)
{
	struct fx *f = *state;
	f->e.result = parse("[1,2,3]");
	json_t *o = codepod_outcome_build(&f->e);
	assert_non_null(o);
	json_decref(f->e.result);
	f->e.result = NULL;
	char *got = json_dumps(json_object_get(o, "result"), JSON_COMPACT);
	assert_string_equal(got, "[1,2,3]");
	free(got);
	json_decref(o);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_succeeded_with_result),
		T(test_succeeded_scalar_and_null_result),
		T(test_succeeded_without_result),
		T(test_failed_with_error),
		T(test_failed_drops_result),
		T(test_failed_with_program_error),
		T(test_program_error_ignored_on_success),
		T(test_error_code_names),
		T(test_calls),
		T(test_calls_unfinished_states),
		T(test_calls_omitted_over_the_limit),
		T(test_usage_never_ready),
		T(test_usage_large_numbers),
		T(test_usage_figures),
		T(test_logs_from_window),
		T(test_logs_truncated),
		T(test_logs_invalid_utf8),
		T(test_top_level_keys),
		T(test_outcome_outlives_exec_values),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
