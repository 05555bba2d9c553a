/* Unit tests for broker/otlp_headers.c: the OTLP exporter's extra headers
 * from OTEL_EXPORTER_OTLP_HEADERS's form and from a headers file
 * (otlp_headers.h). What reaches a collector is checked end to end by
 * tests/e2e/test_otlp_export.py; here, every rule as data, and that no
 * refusal repeats a value (they are credentials). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "broker/otlp_headers.h"

/* The list as "a|b|c". */
static void joined(const struct curl_slist *l, char *out, size_t cap)
{
	out[0] = '\0';
	for (; l; l = l->next) {
		if (out[0])
			strncat(out, "|", cap - strlen(out) - 1);
		strncat(out, l->data, cap - strlen(out) - 1);
	}
}

static void env_gives(const char *text, const char *want)
{
	struct curl_slist *l = NULL;
	struct cp_err err = { 0 };
	if (broker_otlp_headers_env(text, "OTEL_EXPORTER_OTLP_HEADERS", &l, &err))
		fail_msg("\"%s\" refused: %s", text, err.msg);
	char got[4096];
	joined(l, got, sizeof got);
	curl_slist_free_all(l);
	if (strcmp(got, want))
		fail_msg("\"%s\" gave \"%s\", not \"%s\"", text, got, want);
}

/* Refused, naming @rule; the list is left as it was; @secret not in the message. */
static void env_refused(const char *text, const char *rule, const char *secret)
{
	struct curl_slist *l = curl_slist_append(NULL, "Kept: 1");
	struct cp_err err = { 0 };
	int rc = broker_otlp_headers_env(text, "OTEL_EXPORTER_OTLP_HEADERS", &l, &err);
	char got[4096];
	joined(l, got, sizeof got);
	curl_slist_free_all(l);
	if (rc != CP_E_INVALID_REQUEST)
		fail_msg("\"%s\" was taken (%d)", text, rc);
	if (!strstr(err.msg, rule))
		fail_msg("\"%s\": \"%s\" does not say \"%s\"", text, err.msg, rule);
	if (secret && strstr(err.msg, secret))
		fail_msg("\"%s\": the message \"%s\" repeats the value", text, err.msg);
	assert_string_equal(got, "Kept: 1");
}

static void file_gives(const char *text, const char *want)
{
	struct curl_slist *l = NULL;
	struct cp_err err = { 0 };
	if (broker_otlp_headers_file(text, strlen(text), "h.txt", &l, &err))
		fail_msg("\"%s\" refused: %s", text, err.msg);
	char got[4096];
	joined(l, got, sizeof got);
	curl_slist_free_all(l);
	if (strcmp(got, want))
		fail_msg("\"%s\" gave \"%s\", not \"%s\"", text, got, want);
}

static void file_refused(const char *text, size_t len, const char *rule, const char *secret)
{
	struct curl_slist *l = NULL;
	struct cp_err err = { 0 };
	int rc = broker_otlp_headers_file(text, len, "h.txt", &l, &err);
	assert_null(l);
	if (rc != CP_E_INVALID_REQUEST)
		fail_msg("\"%s\" was taken (%d)", text, rc);
	if (!strstr(err.msg, rule))
		fail_msg("\"%s\": \"%s\" does not say \"%s\"", text, err.msg, rule);
	if (secret && strstr(err.msg, secret))
		fail_msg("\"%s\": the message \"%s\" repeats the value", text, err.msg);
}

static void test_env_form(void **state)
{
	(void)state;
	env_gives("api-key=s3cr3t", "api-key: s3cr3t");
	env_gives(" x-tenant = acme , Authorization=Basic%20dXNlcjpwYXNz ",
	          "x-tenant: acme|Authorization: Basic dXNlcjpwYXNz");
	env_gives("a=1%2C2,b=%3d", "a: 1,2|b: =");           /* a comma and = in values */
	env_gives("a=x=y", "a: x=y");                         /* the first = splits */
	env_gives("", "");
	env_gives("a=1,,b=2,", "a: 1|b: 2");                  /* empty entries are nothing */
	env_gives("empty=", "empty: ");
}

static void test_env_refusals(void **state)
{
	(void)state;
	env_refused("novalue", "entry 1 is not name=value", NULL);
	env_refused("a=1,=2", "entry 2 has no header name", NULL);
	env_refused("bad name=1", "letters, digits", NULL);
	env_refused("a=s3cr3t%0d%0aX-Evil: 1", "control character", "s3cr3t");
	env_refused("a=s3cr3t%0", "two hex digits", "s3cr3t");
	env_refused("a=s3cr3t%zz", "two hex digits", "s3cr3t");
	env_refused("a=s3cr3t%00", "control character", "s3cr3t");
	env_refused("content-type=text/plain", "written by codepod", NULL);
	env_refused("HOST=x", "written by codepod", NULL);
	env_refused("a=1,A=2", "given twice", NULL);
	env_refused("kept=2", "given twice", NULL);           /* the caller's list counts */
}

static void test_file_form(void **state)
{
	(void)state;
	file_gives("X-Honeycomb-Team: abc\n", "X-Honeycomb-Team: abc");
	file_gives("# the collector's key\n\r\nAuthorization:  Bearer t0k  \r\nx-scope:a",
	           "Authorization: Bearer t0k|x-scope: a");
	file_gives("a: tab\there\n", "a: tab\there");
	file_gives("a: http://x:8080/y\n", "a: http://x:8080/y"); /* the first colon splits */
	file_gives("", "");
}

static void test_file_refusals(void **state)
{
	(void)state;
	file_refused("ok: 1\nno colon s3cr3t\n", 22, "line 2 is not \"Name: value\"", "s3cr3t");
	file_refused("Name : s3cr3t\n", 14, "line 1: a header name is letters", "s3cr3t");
	file_refused(": s3cr3t\n", 9, "line 1 has no header name", "s3cr3t");
	file_refused("a: s3cr3t\rX-Evil: 1\n", 20, "control character", "s3cr3t");
	file_refused("a: s3\0cr3t\n", 11, "NUL", "s3");
	file_refused("Expect: 100-continue\n", 21, "written by codepod", NULL);
	file_refused("a: 1\nA: 2\n", 10, "line 2: A is given twice", NULL);
	char big[BROKER_OTLP_MAX_HEADER_BYTES + 16];
	memset(big, 'v', sizeof big);
	memcpy(big, "a: ", 3);
	file_refused(big, sizeof big, "over 8192 bytes", NULL);
	char many[BROKER_OTLP_MAX_HEADERS * 16 + 16];
	many[0] = '\0';
	for (int i = 0; i <= BROKER_OTLP_MAX_HEADERS; i++)
		snprintf(many + strlen(many), sizeof many - strlen(many), "h%d: 1\n", i);
	file_refused(many, strlen(many), "more than 32 headers", NULL);
}

/* Both forms into one list: the file's names are checked against the
 * environment's. */
static void test_both_forms_in_one_list(void **state)
{
	(void)state;
	struct curl_slist *l = NULL;
	struct cp_err err = { 0 };
	assert_int_equal(broker_otlp_headers_env("a=1", "E", &l, &err), 0);
	assert_int_equal(broker_otlp_headers_file("b: 2\n", 5, "F", &l, &err), 0);
	assert_int_equal(broker_otlp_headers_file("A: 3\n", 5, "F", &l, &err), CP_E_INVALID_REQUEST);
	assert_non_null(strstr(err.msg, "F: line 1: A is given twice"));
	char got[256];
	joined(l, got, sizeof got);
	assert_string_equal(got, "a: 1|b: 2");
	curl_slist_free_all(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_env_form),
		cmocka_unit_test(test_env_refusals),
		cmocka_unit_test(test_file_form),
		cmocka_unit_test(test_file_refusals),
		cmocka_unit_test(test_both_forms_in_one_list),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
