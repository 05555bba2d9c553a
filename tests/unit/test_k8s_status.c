/* test_k8s_status.c - k8s/api/status.c on every Status fixture and on junk. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "k8s/api/status.h"
#include "test_k8s_fixture.h"

struct status_case {
	const char *file;
	int code;
	const char *reason;
	int cp;
	const char *name;
	const char *kind;
	size_t n_causes;
};

static const struct status_case cases[] = {
	{"status-401-unauthorized.json", 401, "Unauthorized", CP_E_AUTH, NULL, NULL, 0},
	{"status-403-forbidden-exec.json", 403, "Forbidden", CP_E_DENIED, "convo-7f3a9c2e1b", "pods", 0},
	{"status-403-forbidden-podsecurity.json", 403, "Forbidden", CP_E_DENIED, "convo-7f3a9c2e1b", "pods", 0},
	{"status-403-forbidden-rbac.json", 403, "Forbidden", CP_E_DENIED, NULL, "pods", 0},
	{"status-404-notfound.json", 404, "NotFound", CP_E_NOT_FOUND, "convo-7f3a9c2e1b", "pods", 0},
	{"status-409-alreadyexists.json", 409, "AlreadyExists", CP_E_CONFLICT, "convo-7f3a9c2e1b", "pods", 0},
	{"status-409-conflict.json", 409, "Conflict", CP_E_CONFLICT, "convo-7f3a9c2e1b", "pods", 0},
	{"status-409-precondition-uid.json", 409, "Conflict", CP_E_CONFLICT, "convo-7f3a9c2e1b", "pods", 0},
	{"status-410-expired.json", 410, "Expired", CP_E_HTTP, NULL, NULL, 0},
	{"status-422-invalid.json", 422, "Invalid", CP_E_HTTP, "convo-7f3a9c2e1b", "Pod", 1},
	{"status-422-invalid-immutable-update.json", 422, "Invalid", CP_E_HTTP, "convo-7f3a9c2e1b", "Pod", 1},
};

static void assert_str_or_null(const char *want, const char *got)
{
	if (!want)
		assert_null(got);
	else
		assert_string_equal(want, got);
}

static void test_fixtures(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct status_case *c = &cases[i];
		size_t len = 0;
		char *body = fixture_read(c->file, &len);
		assert_non_null(body);
		struct k8s_status st;
		struct cp_err err;
		cp_err_clear(&err);
		int rc = k8s_status_parse(body, len, c->code, &st, &err);
		assert_int_equal(rc, c->cp);
		assert_int_equal(err.code, c->cp);
		assert_int_equal(st.is_status, 1);
		assert_int_equal(st.code, c->code);
		assert_int_equal(st.http_code, c->code);
		assert_string_equal(st.status, "Failure");
		assert_string_equal(st.reason, c->reason);
		assert_non_null(st.message);
		assert_str_or_null(c->name, st.name);
		assert_str_or_null(c->kind, st.kind);
		assert_int_equal(st.n_causes, c->n_causes);
		/* The error text names the code and the reason. */
		char want[64];
		snprintf(want, sizeof want, "HTTP %d %s: ", c->code, c->reason);
		assert_true(strncmp(err.msg, want, strlen(want)) == 0);
		k8s_status_release(&st);
		k8s_status_release(&st); /* idempotent */
		/* NULL out and NULL err are accepted. */
		assert_int_equal(k8s_status_parse(body, len, c->code, NULL, NULL), c->cp);
		free(body);
	}
}

static void test_422_causes(void **state)
{
	(void)state;
	size_t len = 0;
	char *body = fixture_read("status-422-invalid.json", &len);
	struct k8s_status st;
	k8s_status_parse(body, len, 422, &st, NULL);
	assert_int_equal(st.n_causes, 1);
	assert_string_equal(st.causes[0].reason, "FieldValueRequired");
	assert_string_equal(st.causes[0].message, "Required value");
	assert_string_equal(st.causes[0].field, "spec.containers[0].image");
	k8s_status_release(&st);
	free(body);
}

static void test_not_a_status(void **state)
{
	(void)state;
	static const char html[] = "<html><body>502 Bad Gateway</body></html>";
	struct k8s_status st;
	struct cp_err err;
	int rc = k8s_status_parse(html, strlen(html), 502, &st, &err);
	assert_int_equal(rc, CP_E_RETRY);
	assert_int_equal(st.is_status, 0);
	assert_int_equal(st.code, 502);
	assert_null(st.reason);
	assert_non_null(strstr(err.msg, "HTTP 502"));
	assert_non_null(strstr(err.msg, "not a Kubernetes Status"));
	k8s_status_release(&st);

	rc = k8s_status_parse(NULL, 0, 403, &st, &err);
	assert_int_equal(rc, CP_E_DENIED);
	assert_non_null(strstr(err.msg, "HTTP 403 with an empty body"));
	k8s_status_release(&st);

	static const char other[] = "{\"kind\":\"Pod\",\"status\":{}}";
	rc = k8s_status_parse(other, strlen(other), 400, &st, &err);
	assert_int_equal(rc, CP_E_HTTP);
	assert_non_null(strstr(err.msg, "HTTP 400: body is not"));
	k8s_status_release(&st);

	static const char trunc[] = "{\"kind\":\"Status\",\"code\":40";
	rc = k8s_status_parse(trunc, strlen(trunc), 404, &st, &err);
	assert_int_equal(rc, CP_E_NOT_FOUND);
	assert_int_equal(st.is_status, 0);
	k8s_status_release(&st);

	/* Binary junk with NULs and high bytes is excerpted printably. */
	static const unsigned char junk[] = {0, 0xff, 'a', '\n', 0x80};
	rc = k8s_status_parse(junk, sizeof junk, 500, NULL, &err);
	assert_int_equal(rc, CP_E_RETRY);
	assert_non_null(strstr(err.msg, "\"..a..\""));
}

static void test_retry_after_and_body_code(void **state)
{
	(void)state;
	static const char b[] = "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"TooManyRequests\","
	                        "\"message\":\"Too many requests\",\"details\":{\"retryAfterSeconds\":7},\"code\":429}";
	struct k8s_status st;
	/* The body's code wins over the HTTP code for the mapping. */
	assert_int_equal(k8s_status_parse(b, strlen(b), 200, &st, NULL), CP_E_RETRY);
	assert_int_equal(st.code, 429);
	assert_int_equal(st.retry_after_seconds, 7);
	k8s_status_release(&st);
}

static void test_exec_fixtures(void **state)
{
	(void)state;
	size_t len = 0;
	int code = -1;
	struct cp_err err;
	char *b = fixture_read("exec-status-success.json", &len);
	assert_int_equal(k8s_status_exec(b, len, &code, NULL, &err), 0);
	assert_int_equal(code, 0);
	free(b);

	b = fixture_read("exec-status-nonzero-exit.json", &len);
	struct k8s_status st;
	assert_int_equal(k8s_status_exec(b, len, &code, &st, &err), 0);
	assert_int_equal(code, 3);
	assert_string_equal(st.reason, "NonZeroExitCode");
	k8s_status_release(&st);
	free(b);

	b = fixture_read("exec-status-internal-error.json", &len);
	code = -1;
	assert_int_equal(k8s_status_exec(b, len, &code, &st, &err), CP_E_HTTP);
	assert_int_equal(code, -1);
	assert_int_equal(st.code, 500);
	assert_non_null(strstr(err.msg, "InternalError (500)"));
	assert_non_null(strstr(err.msg, "container not found"));
	k8s_status_release(&st);
	free(b);
}

static void test_exec_broken(void **state)
{
	(void)state;
	static const char *bad[] = {
		"",
		"not json",
		"[1,2]",
		"{\"status\":\"Failure\",\"reason\":\"NonZeroExitCode\"}",
		"{\"status\":\"Failure\",\"reason\":\"NonZeroExitCode\",\"details\":{\"causes\":[{\"reason\":\"ExitCode\",\"message\":\"x\"}]}}",
		"{\"status\":\"Failure\",\"reason\":\"NonZeroExitCode\",\"details\":{\"causes\":[{\"reason\":\"ExitCode\",\"message\":\"256\"}]}}",
		"{\"status\":\"Failure\",\"reason\":\"NonZeroExitCode\",\"details\":{\"causes\":[{\"reason\":\"ExitCode\",\"message\":\"-1\"}]}}",
		"{\"status\":\"Failure\",\"reason\":\"NonZeroExitCode\",\"details\":{\"causes\":[{\"reason\":\"ExitCode\",\"message\":\"3x\"}]}}",
		"{\"status\":\"Failure\",\"reason\":\"NonZeroExitCode\",\"details\":{\"causes\":[1,{\"reason\":\"ExitCode\"}]}}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int code = -7;
		struct cp_err err;
		assert_int_equal(k8s_status_exec(bad[i], strlen(bad[i]), &code, NULL, &err), CP_E_PARSE);
		assert_int_equal(code, -7);
	}
	/* A later ExitCode cause is found; 137 (SIGKILL) is in range. */
	static const char ok[] = "{\"status\":\"Failure\",\"reason\":\"NonZeroExitCode\",\"details\":"
	                         "{\"causes\":[{\"reason\":\"Other\"},{\"reason\":\"ExitCode\",\"message\":\"137\"}]}}";
	int code = 0;
	assert_int_equal(k8s_status_exec(ok, strlen(ok), &code, NULL, NULL), 0);
	assert_int_equal(code, 137);
	/* Failure without a reason is an error, not an exit code. */
	static const char f[] = "{\"status\":\"Failure\",\"message\":\"boom\"}";
	struct cp_err err;
	assert_int_equal(k8s_status_exec(f, strlen(f), &code, NULL, &err), CP_E_HTTP);
	assert_non_null(strstr(err.msg, "boom"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixtures),
		cmocka_unit_test(test_422_causes),
		cmocka_unit_test(test_not_a_status),
		cmocka_unit_test(test_retry_after_and_body_code),
		cmocka_unit_test(test_exec_fixtures),
		cmocka_unit_test(test_exec_broken),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
