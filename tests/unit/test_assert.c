/* Unit tests for base/assert.h: a failed CP_ASSERT logs one JSON line
 * (condition, file, line) and aborts; a true one does nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
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

static void test_true_passes(void **state)
{
	int evaluated = 0;

	(void)state;
	CP_ASSERT(++evaluated == 1);
	/* With the checks compiled out the condition is not evaluated. */
	assert_int_equal(evaluated, CP_ASSERTS ? 1 : 0);
}

static void fail_one(void)
{
	CP_ASSERT(1 + 1 == 3);
}
static const int fail_one_line = __LINE__ - 2;

static void test_false_logs_and_aborts(void **state)
{
	int fds[2];
	pid_t pid;
	char buf[4096];
	size_t len = 0;
	ssize_t n;
	int status = 0;
	json_t *o;
	json_error_t jerr;

	(void)state;
	if (!CP_ASSERTS)
		skip();
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit no_core = { 0, 0 };
		setrlimit(RLIMIT_CORE, &no_core);
		dup2(fds[1], STDERR_FILENO);
		fail_one();
		_exit(0);
	}
	close(fds[1]);
	while (len < sizeof buf - 1 && (n = read(fds[0], buf + len, sizeof buf - 1 - len)) > 0)
		len += (size_t)n;
	buf[len] = '\0';
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGABRT);
	/* exactly one line, and it is a JSON object */
	assert_true(len > 0 && buf[len - 1] == '\n');
	assert_null(memchr(buf, '\n', len - 1));
	o = json_loads(buf, 0, &jerr);
	if (!o)
		fail_msg("not JSON: %s (%s)", buf, jerr.text);
	assert_string_equal(json_string_value(json_object_get(o, "level")), "error");
	assert_string_equal(json_string_value(json_object_get(o, "event")), "assert.failed");
	assert_string_equal(json_string_value(json_object_get(o, "condition")), "1 + 1 == 3");
	assert_string_equal(json_string_value(json_object_get(o, "file")), "tests/unit/test_assert.c");
	assert_int_equal(json_integer_value(json_object_get(o, "line")), fail_one_line);
	json_decref(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_true_passes),
		cmocka_unit_test(test_false_logs_and_aborts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
