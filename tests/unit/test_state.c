/* Unit tests for base/state.h: a legal transition is logged at debug level
 * with the machine's names; an illegal one (or a state out of range) aborts
 * after its assert.failed line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "base/assert.h"
#include "base/log.h"
#include "base/state.h"

enum { A, B, C, N };
static const char *const names[] = { "a", "b", "c" };
static const unsigned char legal[N][N] = { [A] = { [B] = 1 }, [B] = { [C] = 1 } };
static const struct cp_state_machine machine = { "test.state", "thing", names, &legal[0][0], N };

/* Runs cp_state_change(from, to) in a child with stderr to a pipe: its
 * stderr in @buf, how it ended as the result. */
static int run_child(unsigned from, unsigned to, char *buf, size_t cap)
{
	int fds[2], status = 0;
	size_t len = 0;
	ssize_t n;
	assert_int_equal(pipe(fds), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit no_core = { 0, 0 };
		setrlimit(RLIMIT_CORE, &no_core);
		dup2(fds[1], STDERR_FILENO);
		cp_log_set_level(CP_LOG_DEBUG);
		cp_state_change(&machine, "t1", 7, from, to);
		_exit(0);
	}
	close(fds[1]);
	while (len < cap - 1 && (n = read(fds[0], buf + len, cap - 1 - len)) > 0)
		len += (size_t)n;
	buf[len] = '\0';
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

static void test_legal_change_is_logged(void **state)
{
	char buf[4096];
	json_error_t jerr;
	(void)state;
	int status = run_child(A, B, buf, sizeof buf);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	json_t *o = json_loads(buf, 0, &jerr);
	if (!o)
		fail_msg("not one JSON line: %s", buf);
	assert_string_equal(json_string_value(json_object_get(o, "level")), "debug");
	assert_string_equal(json_string_value(json_object_get(o, "event")), "test.state");
	assert_string_equal(json_string_value(json_object_get(o, "thing")), "t1");
	assert_int_equal(json_integer_value(json_object_get(o, "call")), 7);
	assert_string_equal(json_string_value(json_object_get(o, "from")), "a");
	assert_string_equal(json_string_value(json_object_get(o, "to")), "b");
	json_decref(o);
}

static void expect_abort(unsigned from, unsigned to)
{
	char buf[4096];
	int status = run_child(from, to, buf, sizeof buf);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGABRT);
	assert_non_null(strstr(buf, "\"assert.failed\""));
}

static void test_illegal_change_aborts(void **state)
{
	(void)state;
	if (!CP_ASSERTS)
		skip();
	expect_abort(A, C); /* not in the table */
	expect_abort(C, A); /* from a state with no way out */
	expect_abort(A, N); /* out of range */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_legal_change_is_logged),
		cmocka_unit_test(test_illegal_change_aborts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
