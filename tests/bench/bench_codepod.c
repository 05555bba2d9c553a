/*
 * bench_codepod.c - the speed and memory figures of `make bench`, measured
 * through the C library (runner/codepod.h) on the local backend. One mode per
 * process, so each memory figure starts from a fresh process; the result is
 * one JSON object on stdout (tests/bench/bench.py formats it).
 *
 *   bench_codepod startup    [--runs N] [--no-isolation] [--no-cgroup] [--prestart GAP_MS]
 *       `return 1` through codepod vs a bare `node -e 0` spawned through the
 *       same backend (same uv_spawn path, same bwrap argv), alternating.
 *       --prestart: the engine keeps a runner started and waiting
 *       (runner/prestart.h), and every run, bare or not, comes GAP_MS after
 *       the previous one (the model's turn between two programs, in which
 *       the next runner starts).
 *   bench_codepod first      [--runs N] [--no-disk-bound]
 *       `return 1` as the first execution of a new conversation, every run
 *       (its workspace made: as root an image, mkfs.ext4 and a mount,
 *       runner/local/workspace.h; --no-disk-bound: a folder, as before).
 *   --no-disk-bound (startup and first): the workspaces without their disk
 *       bound, so the two can be set side by side.
 *   bench_codepod calls      [--count N] [--no-isolation]
 *       one program making N sequential `await tools.echo({i})` calls, answered
 *       from inside tool_call; with the CPU time per call (first call to
 *       last) of this process (codepod) and of its descendants (the runner).
 *   bench_codepod pingpong-c [--count N]
 *       the machine's floor for calls: a parent and a forked child exchanging
 *       N small messages over a socketpair, each blocking in epoll_wait.
 *   bench_codepod concurrent [--n N] [--delay-ms MS] [--no-isolation]
 *       N executions at once, each awaiting a tool answered after MS by a
 *       uv timer; codepod's own peak RSS per in-flight execution.
 *
 * Common options: --node PATH, --state-dir DIR. Exit status: 0 when every
 * execution succeeded (goals are reported, never asserted), 1 when one
 * failed, 2 on a usage or set-up error.
 */
#include <dirent.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runner/codepod.h"
#include "runner/local/local_backend.h"
#include "base/log.h"

struct bench {
	uv_loop_t loop;
	struct codepod_backend *backend;
	struct codepod *cp;
	int isolate;
	int no_cgroup; /* --no-cgroup: the sandbox without its cgroup (runner/local/cgroup.h) */
	int no_disk;   /* --no-disk-bound: workspaces are folders (runner/local/workspace.h) */
	int prestart_gap_ms;  /* > 0: runners are started ahead, runs this far apart */
	int failures;
	char first_error[512];
};

/* A positive decimal option, or -1. */
static long num_arg(const char *s)
{
	char *end = NULL;
	long v = strtol(s, &end, 10);
	return end && *end == '\0' && end != s && v >= 0 ? v : -1;
}

static double now_ms(void)
{
	return (double)uv_hrtime() / 1e6;
}

/* VmRSS / VmHWM of this process, in KiB. */
static long status_kib(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return -1;
	char line[256];
	long v = -1;
	size_t n = strlen(key);
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, key, n) == 0 && line[n] == ':') {
			v = strtol(line + n + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return v;
}

static void note_failure(struct bench *b, const json_t *outcome)
{
	b->failures++;
	if (!b->first_error[0]) {
		char *s = json_dumps(json_object_get(outcome, "error"), JSON_COMPACT);
		snprintf(b->first_error, sizeof b->first_error, "%s", s ? s : "(no error object)");
		free(s);
	}
}

static int outcome_ok(const json_t *outcome)
{
	const char *st = json_string_value(json_object_get(outcome, "status"));
	return st && strcmp(st, "succeeded") == 0;
}

static int setup(struct bench *b, const char *node_flag, const char *state_dir, int isolate)
{
	struct cp_err err;
	char node[PATH_MAX];
	if (local_node_find(node_flag, node, sizeof node, &err)) {
		fprintf(stderr, "bench: %s\n", err.msg);
		return -1;
	}
	if (isolate && !local_bwrap_usable(&err)) {
		fprintf(stderr, "bench: bubblewrap unusable here: %s\n", err.msg);
		return -1;
	}
	uv_loop_init(&b->loop);
	b->isolate = isolate;
	/* Where no cgroup can be had the figures are the sandbox's without
	 * one; --no-cgroup points the backend at no cgroup filesystem. */
	struct local_config lc = { .loop = &b->loop, .state_dir = state_dir, .node = node,
	                              .isolate = isolate, .no_memory_bound = 1,
	                              .cgroup_fs = b->no_cgroup ? "/nonexistent-cgroupfs" : NULL,
	                              .no_disk_bound = 1, .disk_bound_off = b->no_disk };
	if (local_new(&lc, &b->backend, &err)) {
		fprintf(stderr, "bench: %s\n", err.msg);
		return -1;
	}
	struct codepod_config cfg = { .loop = &b->loop, .backend = b->backend,
	                              .prestart_max = b->prestart_gap_ms > 0 ? 1 : 0 };
	codepod_policy_defaults(&cfg.defaults);
	codepod_policy_ceiling_defaults(&cfg.ceiling);
	if (codepod_new(&cfg, &b->cp, &err)) {
		fprintf(stderr, "bench: %s\n", err.msg);
		return -1;
	}
	return 0;
}

static void teardown(struct bench *b)
{
	codepod_quiesce(b->cp);
	uv_run(&b->loop, UV_RUN_DEFAULT);
	codepod_free(b->cp);
	b->backend->ops->destroy(b->backend);
	uv_run(&b->loop, UV_RUN_DEFAULT);
	uv_loop_close(&b->loop);
}

static json_t *request(const char *id, const char *js, const char *tool, json_t *policy)
{
	json_t *tools = json_array();
	if (tool)
		json_array_append_new(tools, json_pack("{s:s}", "name", tool));
	json_t *req = json_pack("{s:s,s:s,s:s,s:o}", "id", id, "conversation", "bench",
	                        "js", js, "tools", tools);
	if (policy)
		json_object_set_new(req, "policy", policy);
	return req;
}

static int submit(struct bench *b, const json_t *req, const struct codepod_host *host,
                  void *ud)
{
	struct cp_err err;
	struct codepod_exec *e = NULL;
	if (codepod_submit(b->cp, req, host, ud, &e, &err)) {
		fprintf(stderr, "bench: submit: %s\n", err.msg);
		return -1;
	}
	return 0;
}

static void no_cancel(void *ud, struct codepod_exec *e, const char *call_id)
{
	(void)ud;
	(void)e;
	(void)call_id;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	double *c = malloc((size_t)n * sizeof *c);
	if (!c)
		return -1;
	memcpy(c, v, (size_t)n * sizeof *c);
	qsort(c, (size_t)n, sizeof *c, cmp_double);
	double m = n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
	free(c);
	return m;
}

static json_t *ms_array(const double *v, int n)
{
	json_t *a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a, json_real((double)(long)(v[i] * 1000) / 1000));
	return a;
}

/* ---- (a) startup ---- */

struct one_run {
	struct bench *b;
	double t0, t1;
	int ok;
	int finished;
	json_t *usage;
};

static void run_tool_call(void *ud, struct codepod_exec *e, const char *call_id,
                          const char *tool, const json_t *input)
{
	(void)ud;
	(void)tool;
	(void)input;
	codepod_tool_error(e, call_id, "no tools in this run", NULL);
}

static void run_done(void *ud, struct codepod_exec *e, const json_t *outcome)
{
	(void)e;
	struct one_run *r = ud;
	r->t1 = now_ms();
	r->finished = 1;
	r->ok = outcome_ok(outcome) && json_integer_value(json_object_get(outcome, "result")) == 1;
	if (!r->ok)
		note_failure(r->b, outcome);
	r->usage = json_incref(json_object_get(outcome, "usage"));
}

static const struct codepod_host run_host = { .tool_call = run_tool_call, .cancel_call = no_cancel, .done = run_done };

static void bare_out(void *ud, const char *buf, size_t len)
{
	(void)ud;
	(void)buf;
	(void)len;
}

static void bare_exited(void *ud, const struct codepod_proc_exit *ex)
{
	struct one_run *r = ud;
	r->t1 = now_ms();
	r->finished = 1;
	r->ok = ex->code == 0 && !ex->signal;
	if (!r->ok) {
		r->b->failures++;
		if (!r->b->first_error[0])
			snprintf(r->b->first_error, sizeof r->b->first_error,
			         "bare node exited with code %d signal %d", ex->code, ex->signal);
	}
}

static const struct codepod_proc_cbs bare_cbs = { bare_out, bare_out, bare_exited, NULL, NULL };

/* A bare `node -e 0` through the backend: the backend resolves "node" and,
 * when isolating, puts the same bwrap argv in front. */
static double run_bare(struct bench *b)
{
	static const char *const argv[] = { "node", "-e", "0", NULL };
	struct codepod_spawn_req req = { .conversation = "bench", .exec_id = "bare", .argv = argv,
	                            .memory_mb = 512 };
	struct one_run r = { .b = b };
	struct codepod_proc *p = NULL;
	struct cp_err err;
	r.t0 = now_ms();
	if (b->backend->ops->spawn(b->backend, &req, &bare_cbs, &r, &p, &err)) {
		fprintf(stderr, "bench: spawn: %s\n", err.msg);
		b->failures++;
		return -1;
	}
	while (!r.finished)
		uv_run(&b->loop, UV_RUN_ONCE);
	return r.t1 - r.t0;
}

static double run_codepod(struct bench *b, const char *js, double *startup_ms)
{
	struct one_run r = { .b = b };
	json_t *req = request("startup", js, NULL, NULL);
	r.t0 = now_ms();
	int rc = submit(b, req, &run_host, &r);
	json_decref(req);
	if (rc) {
		b->failures++;
		return -1;
	}
	/* Not until the loop is empty: a runner may be waiting for the next. */
	while (!r.finished)
		uv_run(&b->loop, UV_RUN_ONCE);
	if (startup_ms)
		*startup_ms = (double)json_integer_value(json_object_get(r.usage, "startupMs"));
	json_decref(r.usage);
	return r.t1 - r.t0;
}

static void on_gap(uv_timer_t *t)
{
	(void)t;
}

/* The loop runs (the next runner starts) for the gap between two runs. */
static void gap(struct bench *b)
{
	if (b->prestart_gap_ms <= 0)
		return;
	uv_timer_t t;
	uv_timer_init(&b->loop, &t);
	uv_timer_start(&t, on_gap, (uint64_t)b->prestart_gap_ms, 0);
	while (uv_is_active((uv_handle_t *)&t))
		uv_run(&b->loop, UV_RUN_ONCE);
	uv_close((uv_handle_t *)&t, NULL);
	uv_run(&b->loop, UV_RUN_NOWAIT);
}

/* The first execution of a new conversation, every run. */
static int mode_first(struct bench *b, int runs)
{
	double *ms = calloc((size_t)runs, sizeof *ms);
	double *su = calloc((size_t)runs, sizeof *su);
	if (!ms || !su)
		return 2;
	for (int i = -2; i < runs; i++) { /* two to warm up */
		char conv[64];
		snprintf(conv, sizeof conv, "first-%ld-%d", (long)getpid(), i + 2);
		json_t *req = request("first", "return 1", NULL, NULL);
		json_object_set_new(req, "conversation", json_string(conv));
		struct one_run r = { .b = b };
		r.t0 = now_ms();
		int rc = submit(b, req, &run_host, &r);
		json_decref(req);
		if (rc) {
			b->failures++;
			continue;
		}
		while (!r.finished)
			uv_run(&b->loop, UV_RUN_ONCE);
		if (i >= 0) {
			ms[i] = r.t1 - r.t0;
			su[i] = (double)json_integer_value(json_object_get(r.usage, "startupMs"));
		}
		json_decref(r.usage);
	}
	json_t *o = json_pack("{s:s,s:b,s:i,s:f,s:f,s:o}", "mode", "first", "disk_bound", !b->no_disk,
	                      "runs", runs, "median_ms", median(ms, runs),
	                      "startupMs_median", median(su, runs), "ms", ms_array(ms, runs));
	json_dumpf(o, stdout, JSON_COMPACT);
	fputc('\n', stdout);
	json_decref(o);
	free(ms);
	free(su);
	return 0;
}

static int mode_startup(struct bench *b, int runs)
{
	const int warmup = 3;
	double *bare = calloc((size_t)runs, sizeof *bare);
	double *cpd = calloc((size_t)runs, sizeof *cpd);
	double *su = calloc((size_t)runs, sizeof *su);
	if (!bare || !cpd || !su)
		return 2;
	for (int i = 0; i < warmup; i++) {
		gap(b);
		run_bare(b);
		gap(b);
		run_codepod(b, "return 1", NULL);
	}
	/* Alternate the order each round so neither side always runs second. */
	for (int i = 0; i < runs; i++) {
		gap(b);
		if (i % 2) {
			cpd[i] = run_codepod(b, "return 1", &su[i]);
			gap(b);
			bare[i] = run_bare(b);
		} else {
			bare[i] = run_bare(b);
			gap(b);
			cpd[i] = run_codepod(b, "return 1", &su[i]);
		}
	}
	double mb = median(bare, runs), mc = median(cpd, runs);
	json_t *o = json_pack("{s:s,s:b,s:i,s:i,s:f,s:f,s:f,s:f,s:o,s:o}", "mode", "startup",
	                      "isolated", b->isolate, "prestart_gap_ms", b->prestart_gap_ms,
	                      "runs", runs,
	                      "bare_median_ms", mb, "codepod_median_ms", mc,
	                      "ratio", mc / mb, "codepod_startupMs_median", median(su, runs),
	                      "bare_ms", ms_array(bare, runs), "codepod_ms", ms_array(cpd, runs));
	json_dumpf(o, stdout, JSON_COMPACT);
	fputc('\n', stdout);
	json_decref(o);
	free(bare);
	free(cpd);
	free(su);
	return 0;
}

/* ---- (b) tool-call throughput ---- */

/* CPU seconds (user + system) used so far by this process, and by all its
 * descendants still running (bwrap, Node: read from /proc/PID/stat, since
 * they are not reaped yet when the calls end). */
static double self_cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static double descendants_cpu_s(void)
{
	enum { MAXP = 4096 };
	static long pid[MAXP], ppid[MAXP];
	static double cpu[MAXP];
	size_t n = 0;
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	struct dirent *de;
	while ((de = readdir(d)) && n < MAXP) {
		char path[300], buf[1024];
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		size_t got = fread(buf, 1, sizeof buf - 1, f);
		fclose(f);
		buf[got] = '\0';
		char *rp = strrchr(buf, ')');
		unsigned long ut = 0, st = 0;
		long pp = 0;
		/* after "(comm)": state ppid pgrp session tty tpgid flags minflt
		 * cminflt majflt cmajflt utime stime */
		if (!rp || sscanf(rp + 2, "%*c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
		                  &pp, &ut, &st) != 3)
			continue;
		pid[n] = atol(de->d_name);
		ppid[n] = pp;
		cpu[n] = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
		n++;
	}
	closedir(d);
	double sum = 0;
	for (size_t i = 0; i < n; i++) {
		long p = ppid[i];
		for (int hops = 0; p > 1 && hops < 64; hops++) {
			if (p == (long)getpid()) {
				sum += cpu[i];
				break;
			}
			size_t j = 0;
			while (j < n && pid[j] != p)
				j++;
			p = j < n ? ppid[j] : 0;
		}
	}
	return sum;
}

struct calls_run {
	struct bench *b;
	long count, seen;
	double t_submit, t_first, t_last, t_done;
	double self_cpu0, self_cpu1, kids_cpu0, kids_cpu1;
	int ok;
	long run_ms;
};

static void echo_call(void *ud, struct codepod_exec *e, const char *call_id,
                      const char *tool, const json_t *input)
{
	(void)tool;
	struct calls_run *r = ud;
	double t = now_ms();
	if (r->seen++ == 0) {
		r->self_cpu0 = self_cpu_s();
		r->kids_cpu0 = descendants_cpu_s();
		t = now_ms(); /* the clock starts after the CPU readings */
		r->t_first = t;
	}
	r->t_last = t;
	if (r->seen == r->count) {
		r->self_cpu1 = self_cpu_s();
		r->kids_cpu1 = descendants_cpu_s();
	}
	struct cp_err err;
	if (codepod_tool_result(e, call_id, input, &err))
		fprintf(stderr, "bench: tool_result: %s\n", err.msg);
}

static void calls_done(void *ud, struct codepod_exec *e, const json_t *outcome)
{
	(void)e;
	struct calls_run *r = ud;
	r->t_done = now_ms();
	r->ok = outcome_ok(outcome) && json_integer_value(json_object_get(outcome, "result")) == r->count;
	if (!r->ok)
		note_failure(r->b, outcome);
	r->run_ms = (long)json_integer_value(json_object_get(json_object_get(outcome, "usage"), "runMs"));
}

static const struct codepod_host calls_host = { .tool_call = echo_call, .cancel_call = no_cancel, .done = calls_done };

static int mode_calls(struct bench *b, long count)
{
	char js[512];
	snprintf(js, sizeof js,
	         "const n = %ld;\n"
	         "for (let i = 0; i < n; i++) {\n"
	         "  const r = await tools.echo({ i });\n"
	         "  if (r.i !== i) throw new Error('echo returned ' + JSON.stringify(r) + ' for ' + i);\n"
	         "}\n"
	         "return n;\n", count);
	json_t *req = request("calls", js, "echo",
	                      json_pack("{s:I,s:I}", "maxBridgeRequests", (json_int_t)count,
	                                "timeoutMs", (json_int_t)600000));
	struct calls_run r = { .b = b, .count = count };
	r.t_submit = now_ms();
	int rc = submit(b, req, &calls_host, &r);
	json_decref(req);
	if (rc)
		return 2;
	uv_run(&b->loop, UV_RUN_DEFAULT);
	double span = r.t_last - r.t_first;
	double rate = r.seen > 1 && span > 0 ? (double)(r.seen - 1) / (span / 1000) : 0;
	double per = r.seen > 1 ? 1e6 / (double)(r.seen - 1) : 0;
	json_t *o = json_pack("{s:s,s:b,s:b,s:I,s:I,s:f,s:f,s:f,s:I,s:f,s:f,s:f}", "mode", "calls",
	                      "isolated", b->isolate, "ok", r.ok, "count", (json_int_t)count,
	                      "seen", (json_int_t)r.seen, "calls_per_s", rate,
	                      "first_to_last_call_ms", span,
	                      "submit_to_done_ms", r.t_done - r.t_submit,
	                      "runMs", (json_int_t)r.run_ms,
	                      "calls_per_s_over_runMs", r.run_ms > 0 ? (double)count / ((double)r.run_ms / 1000) : 0.0,
	                      "codepod_cpu_us_per_call", (r.self_cpu1 - r.self_cpu0) * per,
	                      "runner_cpu_us_per_call", (r.kids_cpu1 - r.kids_cpu0) * per);
	json_dumpf(o, stdout, JSON_COMPACT);
	fputc('\n', stdout);
	json_decref(o);
	return 0;
}

/* ---- (c) many executions at once ---- */

struct pending_answer {
	uv_timer_t timer;
	struct codepod_exec *e;
	char call_id[24];
	json_t *input;
	struct conc_run *r;
	int cancelled;
};

struct conc_run {
	struct bench *b;
	int n, delay_ms;
	int done, succeeded;
	int in_flight, max_in_flight;
	long rss_peak_in_flight;
	double t_all_in_flight;
	struct pending_answer **by_exec; /* one tool call per execution */
};

static void answer_closed(uv_handle_t *h)
{
	struct pending_answer *pa = h->data;
	json_decref(pa->input);
	free(pa);
}

static void answer_now(uv_timer_t *t)
{
	struct pending_answer *pa = t->data;
	pa->r->in_flight--;
	if (!pa->cancelled) {
		struct cp_err err;
		if (codepod_tool_result(pa->e, pa->call_id, pa->input, &err))
			fprintf(stderr, "bench: tool_result: %s\n", err.msg);
	}
	uv_close((uv_handle_t *)&pa->timer, answer_closed);
}

static void wait_call(void *ud, struct codepod_exec *e, const char *call_id,
                      const char *tool, const json_t *input)
{
	(void)tool;
	struct conc_run *r = ud;
	struct pending_answer *pa = calloc(1, sizeof *pa);
	if (!pa) {
		codepod_tool_error(e, call_id, "out of memory", NULL);
		return;
	}
	pa->e = e;
	pa->r = r;
	snprintf(pa->call_id, sizeof pa->call_id, "%s", call_id);
	pa->input = json_incref((json_t *)input);
	uv_timer_init(&r->b->loop, &pa->timer);
	pa->timer.data = pa;
	uv_timer_start(&pa->timer, answer_now, (uint64_t)r->delay_ms, 0);
	if (++r->in_flight > r->max_in_flight) {
		r->max_in_flight = r->in_flight;
		if (r->in_flight == r->n) {
			r->t_all_in_flight = now_ms();
			r->rss_peak_in_flight = status_kib("VmRSS");
		}
	}
}

static void conc_done(void *ud, struct codepod_exec *e, const json_t *outcome)
{
	(void)e;
	struct conc_run *r = ud;
	r->done++;
	if (outcome_ok(outcome))
		r->succeeded++;
	else
		note_failure(r->b, outcome);
}

static const struct codepod_host conc_host = { .tool_call = wait_call, .cancel_call = no_cancel, .done = conc_done };

static int mode_concurrent(struct bench *b, int n, int delay_ms)
{
	struct conc_run r = { .b = b, .n = n, .delay_ms = delay_ms };
	/* Warm the allocator and the library paths with one execution first, so
	 * the baseline is codepod at rest rather than before its first use. */
	run_codepod(b, "return 1", NULL);
	long rss0 = status_kib("VmRSS");
	long hwm0 = status_kib("VmHWM");
	json_t **reqs = calloc((size_t)n, sizeof *reqs);
	if (!reqs)
		return 2;
	const char *js = "const r = await tools.wait({ ms: 1000 });\nreturn r.ms;\n";
	for (int i = 0; i < n; i++) {
		char id[32];
		snprintf(id, sizeof id, "c%d", i);
		reqs[i] = request(id, js, "wait", NULL);
	}
	double t0 = now_ms();
	for (int i = 0; i < n; i++) {
		if (submit(b, reqs[i], &conc_host, &r))
			b->failures++;
		json_decref(reqs[i]);
	}
	free(reqs);
	uv_run(&b->loop, UV_RUN_DEFAULT);
	double wall = now_ms() - t0;
	long hwm = status_kib("VmHWM");
	long rss_end = status_kib("VmRSS");
	double per = (double)(hwm - rss0) / n;
	json_t *o = json_pack("{s:s,s:b,s:i,s:i,s:i,s:i,s:f,s:f,s:I,s:I,s:I,s:I,s:I,s:f}",
	                      "mode", "concurrent", "isolated", b->isolate, "n", n,
	                      "delay_ms", delay_ms, "succeeded", r.succeeded,
	                      "max_in_flight", r.max_in_flight, "wall_ms", wall,
	                      "all_in_flight_after_ms", r.t_all_in_flight > 0 ? r.t_all_in_flight - t0 : -1.0,
	                      "rss_before_kib", (json_int_t)rss0, "hwm_before_kib", (json_int_t)hwm0,
	                      "hwm_peak_kib", (json_int_t)hwm,
	                      "rss_all_in_flight_kib", (json_int_t)r.rss_peak_in_flight,
	                      "rss_end_kib", (json_int_t)rss_end, "peak_kib_per_exec", per);
	json_dumpf(o, stdout, JSON_COMPACT);
	fputc('\n', stdout);
	json_decref(o);
	if (r.succeeded != n && b->failures == 0)
		b->failures++;
	return 0;
}

/* ---- the machine's floor for (b): two bare processes ping-ponging ---- */

/* A parent and a forked child exchange COUNT small messages over a
 * socketpair (what libuv gives a child's stdio), each blocking in
 * epoll_wait for the other: no parsing, no runtime. What a tool call's
 * round trip cannot beat on this machine (two wake-ups of a sleeping
 * process). */
static int mode_pingpong_c(long count)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
		perror("bench: socketpair");
		return 2;
	}
	static const char ask[] = "{\"c\":1,\"t\":\"echo\",\"i\":{\"i\":1}}\n";
	static const char ans[] = "{\"k\":\"res\",\"c\":1,\"o\":{\"i\":1}}\n";
	char buf[256];
	pid_t pid = fork();
	if (pid < 0)
		return 2;
	int me = pid == 0 ? sv[1] : sv[0];
	close(pid == 0 ? sv[0] : sv[1]);
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN };
	epoll_ctl(ep, EPOLL_CTL_ADD, me, &ev);
	if (pid == 0) {
		for (long i = 0; i < count; i++) {
			if (write(me, ask, sizeof ask - 1) < 0 || epoll_wait(ep, &ev, 1, -1) < 0 ||
			    read(me, buf, sizeof buf) <= 0)
				_exit(1);
		}
		_exit(0);
	}
	double t0 = 0, t1 = 0, c0 = 0, c1 = 0;
	for (long i = 0; i < count; i++) {
		if (epoll_wait(ep, &ev, 1, -1) < 0 || read(me, buf, sizeof buf) <= 0)
			break;
		if (i == 0) {
			c0 = self_cpu_s();
			t0 = now_ms();
		}
		if (i == count - 1) {
			t1 = now_ms();
			c1 = self_cpu_s();
		}
		if (write(me, ans, sizeof ans - 1) < 0)
			break;
	}
	int st = 0;
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || t1 <= t0)
		return 1;
	json_t *o = json_pack("{s:s,s:I,s:f,s:f}", "mode", "pingpong-c", "count", (json_int_t)count,
	                      "calls_per_s", (double)(count - 1) / ((t1 - t0) / 1000),
	                      "parent_cpu_us_per_call", (c1 - c0) * 1e6 / (double)(count - 1));
	json_dumpf(o, stdout, JSON_COMPACT);
	fputc('\n', stdout);
	json_decref(o);
	return 0;
}

/* ---- main ---- */

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "runs", required_argument, NULL, 'r' },
		{ "count", required_argument, NULL, 'c' },
		{ "n", required_argument, NULL, 'N' },
		{ "delay-ms", required_argument, NULL, 'd' },
		{ "no-isolation", no_argument, NULL, 'I' },
		{ "no-cgroup", no_argument, NULL, 'G' },
		{ "no-disk-bound", no_argument, NULL, 'D' },
		{ "prestart", required_argument, NULL, 'P' },
		{ "node", required_argument, NULL, 'x' },
		{ "state-dir", required_argument, NULL, 's' },
		{ NULL, 0, NULL, 0 },
	};
	if (argc < 2) {
		fprintf(stderr, "usage: bench_codepod startup|first|calls|concurrent|pingpong-c [options]\n");
		return 2;
	}
	const char *mode = argv[1];
	int runs = 30, n = 200, delay_ms = 1000, isolate = 1, prestart_gap_ms = 0, no_cgroup = 0;
	int no_disk = 0;
	long count = 10000;
	const char *node = NULL, *state_dir = NULL;
	int c;
	optind = 2;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'r': runs = (int)num_arg(optarg); break;
		case 'c': count = num_arg(optarg); break;
		case 'N': n = (int)num_arg(optarg); break;
		case 'd': delay_ms = (int)num_arg(optarg); break;
		case 'I': isolate = 0; break;
		case 'G': no_cgroup = 1; break;
		case 'D': no_disk = 1; break;
		case 'P': prestart_gap_ms = (int)num_arg(optarg); break;
		case 'x': node = optarg; break;
		case 's': state_dir = optarg; break;
		default: return 2;
		}
	}
	if (runs < 1 || count < 1 || n < 1 || n > 100000 || delay_ms < 0 || prestart_gap_ms < 0)
		return 2;
	char tmpl[] = "/tmp/codepod-bench-XXXXXX";
	if (!state_dir) {
		state_dir = mkdtemp(tmpl);
		if (!state_dir) {
			perror("bench: mkdtemp");
			return 2;
		}
	}
	if (strcmp(mode, "pingpong-c") == 0)
		return mode_pingpong_c(count);
	cp_log_set_level(CP_LOG_WARN);
	struct bench b = { 0 };
	b.prestart_gap_ms = prestart_gap_ms;
	b.no_cgroup = no_cgroup;
	b.no_disk = no_disk;
	if (setup(&b, node, state_dir, isolate))
		return 2;
	int rc;
	if (strcmp(mode, "startup") == 0)
		rc = mode_startup(&b, runs);
	else if (strcmp(mode, "first") == 0)
		rc = mode_first(&b, runs);
	else if (strcmp(mode, "calls") == 0)
		rc = mode_calls(&b, count);
	else if (strcmp(mode, "concurrent") == 0)
		rc = mode_concurrent(&b, n, delay_ms);
	else {
		fprintf(stderr, "bench: unknown mode %s\n", mode);
		rc = 2;
	}
	teardown(&b);
	if (b.failures) {
		fprintf(stderr, "bench: %d execution(s) failed; first error: %s\n", b.failures,
		        b.first_error);
		if (rc == 0)
			rc = 1;
	}
	return rc;
}
