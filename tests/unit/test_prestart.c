/* Unit tests for runner/prestart.c against a fake backend: a runner that
 * wrote anything while waiting, on stdout or stderr, is killed and never
 * handed out (prestart.h). From outside, only stderr can be provoked in a
 * real waiting runner (SIGUSR1 opens Node's inspector, which says so:
 * tests/e2e/test_prestart_output.py); nothing makes one write a frame on
 * stdout while it waits, so stdout is checked here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "runner/prestart.h"

#define MAX_PROCS 8

struct codepod_proc {
	const struct codepod_proc_cbs *cbs;
	void *ud;
	int killed, exited;
};

static struct codepod_proc procs[MAX_PROCS];
static size_t nprocs;

static int fake_spawn(struct codepod_backend *b, const struct codepod_spawn_req *req,
                      const struct codepod_proc_cbs *cbs, void *ud, struct codepod_proc **out,
                      struct cp_err *err)
{
	(void)b;
	(void)req;
	(void)err;
	assert_true(nprocs < MAX_PROCS);
	struct codepod_proc *p = &procs[nprocs++];
	*p = (struct codepod_proc){ cbs, ud, 0, 0 };
	*out = p;
	return 0;
}

static int fake_write(struct codepod_proc *p, const char *buf, size_t len, struct cp_err *err)
{
	(void)p;
	(void)buf;
	(void)len;
	(void)err;
	return 0;
}

static void fake_kill(struct codepod_proc *p)
{
	p->killed++;
}

static const struct codepod_backend_ops fake_ops = { .spawn = fake_spawn, .write = fake_write,
                                                     .kill = fake_kill };
static struct codepod_backend fake = { .ops = &fake_ops, .name = "fake" };

static void exit_proc(struct codepod_proc *p)
{
	struct codepod_proc_exit ex = { .code = -1, .signal = 9 };
	assert_false(p->exited);
	p->exited = 1;
	p->cbs->exited(p->ud, &ex);
}

/* The taker's callbacks: output must never reach one here. */
static void never_out(void *ud, const char *buf, size_t len)
{
	(void)ud;
	(void)buf;
	(void)len;
	fail_msg("a taker got output");
}

static int taker_exits;

static void taker_exited(void *ud, const struct codepod_proc_exit *ex)
{
	(void)ud;
	(void)ex;
	taker_exits++;
}

static const struct codepod_proc_cbs taker = { never_out, never_out, taker_exited, NULL, NULL };

static uv_loop_t loop;

/* What the executions of conversation "c" ask for. */
static const struct codepod_runner_spec want_c = { "c", "e1", 512, NULL, 0, 1u << 30, 100000 };

/* A pool with one runner waiting for conversation "c": that runner. */
static struct codepod_proc *one_waiting(struct codepod_prestart **ps)
{
	nprocs = 0;
	struct cp_err err;
	assert_int_equal(codepod_prestart_new(&loop, &fake, 2, 120, ps, &err), 0);
	codepod_prestart_exec_started(*ps, &want_c);
	codepod_prestart_exec_ended(*ps, "c");
	uv_run(&loop, UV_RUN_NOWAIT); /* the start comes on the loop's next turn */
	assert_int_equal(nprocs, 1);
	assert_int_equal(codepod_prestart_waiting(*ps), 1);
	return &procs[0];
}

static void done(struct codepod_prestart *ps)
{
	codepod_prestart_free(ps);
	for (size_t i = 0; i < nprocs; i++)
		if (!procs[i].exited && procs[i].killed)
			exit_proc(&procs[i]);
	uv_run(&loop, UV_RUN_DEFAULT); /* the timer's close frees the pool */
}

static void test_a_pristine_runner_is_handed_out(void **state)
{
	(void)state;
	struct codepod_prestart *ps;
	struct codepod_proc *p = one_waiting(&ps), *got = NULL;
	char tag[33];
	assert_int_equal(codepod_prestart_take(ps, &want_c, "e1", &taker, NULL, &got, tag), 1);
	assert_ptr_equal(got, p);
	assert_int_equal(p->killed, 0);
	assert_int_equal(codepod_prestart_waiting(ps), 0);
	/* its exit is the taker's now */
	taker_exits = 0;
	exit_proc(p);
	assert_int_equal(taker_exits, 1);
	done(ps);
}

/* A runner started for other workspace bounds is not handed out: the
 * backend sized the workspace at its spawn. */
static void test_other_workspace_bounds_get_a_fresh_runner(void **state)
{
	(void)state;
	struct codepod_prestart *ps;
	struct codepod_proc *got = NULL;
	one_waiting(&ps);
	char tag[33];
	struct codepod_runner_spec bigger = want_c;
	bigger.ws_bytes = 2u << 30;
	assert_int_equal(codepod_prestart_take(ps, &bigger, "e1", &taker, NULL, &got, tag), 0);
	bigger = want_c;
	bigger.ws_files = 7;
	assert_int_equal(codepod_prestart_take(ps, &bigger, "e1", &taker, NULL, &got, tag), 0);
	assert_null(got);
	assert_int_equal(codepod_prestart_waiting(ps), 1);
	done(ps);
}

static void wrote_while_waiting(int on_stderr)
{
	struct codepod_prestart *ps;
	struct codepod_proc *p = one_waiting(&ps), *got = NULL;
	const struct codepod_proc_cbs *pool_cbs = p->cbs;
	(on_stderr ? pool_cbs->err : pool_cbs->out)(p->ud, "x", 1);
	assert_int_equal(p->killed, 1);
	assert_int_equal(codepod_prestart_waiting(ps), 0);
	char tag[33];
	assert_int_equal(codepod_prestart_take(ps, &want_c, "e1", &taker, NULL, &got, tag), 0);
	/* more output before it is gone is ignored; its exit frees it quietly */
	pool_cbs->out(p->ud, "y", 1);
	assert_int_equal(p->killed, 1);
	exit_proc(p);
	assert_int_equal(codepod_prestart_take(ps, &want_c, "e1", &taker, NULL, &got, tag), 0);
	assert_null(got);
	done(ps);
}

static void test_stdout_while_waiting_kills_it_and_it_is_not_handed_out(void **state)
{
	(void)state;
	wrote_while_waiting(0);
}

static void test_stderr_while_waiting_kills_it_and_it_is_not_handed_out(void **state)
{
	(void)state;
	wrote_while_waiting(1);
}

int main(void)
{
	uv_loop_init(&loop);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_pristine_runner_is_handed_out),
		cmocka_unit_test(test_other_workspace_bounds_get_a_fresh_runner),
		cmocka_unit_test(test_stdout_while_waiting_kills_it_and_it_is_not_handed_out),
		cmocka_unit_test(test_stderr_while_waiting_kills_it_and_it_is_not_handed_out),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_loop_close(&loop);
	return rc;
}
