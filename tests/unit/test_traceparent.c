/* Unit tests for base/traceparent.c: the W3C trace context grammar. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/traceparent.h"

#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

static int parse(const char *s, struct cp_trace_ctx *c)
{
	struct cp_err err;
	return cp_traceparent_parse(s, strlen(s), c, &err);
}

static int state_ok(const char *s)
{
	struct cp_err err;
	return cp_tracestate_check(s, strlen(s), &err) == 0;
}

static void test_round_trip(void **state)
{
	(void)state;
	struct cp_trace_ctx c;
	assert_int_equal(parse(TP, &c), 0);
	assert_int_equal(c.trace_id[0], 0x4b);
	assert_int_equal(c.trace_id[15], 0x36);
	assert_int_equal(c.span_id[0], 0x00);
	assert_int_equal(c.span_id[7], 0xb7);
	assert_int_equal(c.flags, 1);
	char out[CP_TRACEPARENT_LEN + 1];
	cp_traceparent_format(&c, out);
	assert_string_equal(out, TP);
}

static void test_refused(void **state)
{
	(void)state;
	struct cp_trace_ctx c;
	const char *bad[] = {
		"",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01",
		"0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		assert_int_equal(parse(bad[i], &c), CP_E_INVALID_REQUEST);
	/* a NUL inside is not a shorter string */
	struct cp_err err;
	char nul[] = TP;
	nul[10] = '\0';
	assert_int_equal(cp_traceparent_parse(nul, sizeof nul - 1, &c, &err), CP_E_INVALID_REQUEST);
}

static void test_later_versions(void **state)
{
	(void)state;
	struct cp_trace_ctx c;
	assert_int_equal(parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03", &c), 0);
	assert_int_equal(c.flags, 3);
	assert_int_equal(parse("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more", &c), 0);
}

static void test_tracestate(void **state)
{
	(void)state;
	assert_true(state_ok(""));
	assert_true(state_ok("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"));
	assert_true(state_ok(" a=1 ,\t, b@c=x y "));
	assert_false(state_ok("Rojo=1"));
	assert_false(state_ok("a"));
	assert_false(state_ok("a=1=2"));
	assert_false(state_ok("a= "));
	assert_false(state_ok("@a=1"));
	assert_false(state_ok("a@=1"));
	assert_false(state_ok("a@b@c=1"));
	char many[200] = "";
	for (int i = 0; i < 33; i++)
		strcat(many, "a=1,");
	assert_false(state_ok(many));
	char big[600];
	memset(big, 'a', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	big[1] = '=';
	assert_false(state_ok(big));
}

static void test_random(void **state)
{
	(void)state;
	uint8_t a[8], b[8];
	struct cp_err err;
	assert_int_equal(cp_trace_random(a, sizeof a, &err), 0);
	assert_int_equal(cp_trace_random(b, sizeof b, &err), 0);
	assert_memory_not_equal(a, b, sizeof a);
	char hex[17];
	cp_trace_hex(a, sizeof a, hex);
	assert_int_equal(strlen(hex), 16);
	assert_int_equal(strspn(hex, "0123456789abcdef"), 16);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_later_versions),
		cmocka_unit_test(test_tracestate),
		cmocka_unit_test(test_random),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
