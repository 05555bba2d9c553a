/* test_k8s_rest_fake.c - k8s/http, creds, rest and watch against the fake
 * API server (tests/fakekube/serve), over TLS, with client-certificate,
 * bearer-token, token-file and exec-plugin credentials, and every HTTP and
 * watch fault of the fake once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <jansson.h>
#include <uv.h>

#include "fakekube_fixture.h"
#include "k8s/api/http.h"
#include "k8s/api/kubeconfig.h"
#include "k8s/api/rest.h"
#include "k8s/api/watch.h"

static struct fakekube fx;
static uv_loop_t loop;
static uv_timer_t guard;
/* The client of the running test; a failed test (cmocka longjmp) leaves it
 * open, and test_teardown closes it with `dropping` set so that the late
 * callbacks do not touch the dead test's stack. */
static struct k8s_client *cur_client;
static int dropping;

/* ---- loop helpers ------------------------------------------------------- */

static void on_guard(uv_timer_t *t) { (void)t; }

static void loop_step(long ms)
{
	uv_timer_start(&guard, on_guard, (uint64_t)ms, 0);
	uv_run(&loop, UV_RUN_ONCE);
	uv_timer_stop(&guard);
}

#define RUN_UNTIL(cond, ms)                                           \
	do {                                                          \
		long end_ = fk_now_ms() + (ms);                       \
		while (!(cond) && fk_now_ms() < end_)                 \
			loop_step(20);                                \
	} while (0)

/* ---- clients ------------------------------------------------------------ */

static struct k8s_client *client_from(const char *kubeconfig)
{
	struct cp_err e;
	cp_err_clear(&e);
	struct k8s_kubeconfig *kc = k8s_kubeconfig_new();
	assert_non_null(kc);
	if (k8s_kubeconfig_load_file(kc, kubeconfig, &e))
		fail_msg("load %s: %s", kubeconfig, e.msg);
	struct k8s_config cfg;
	if (k8s_kubeconfig_resolve(kc, NULL, &cfg, &e))
		fail_msg("resolve %s: %s", kubeconfig, e.msg);
	k8s_kubeconfig_free(kc);
	struct k8s_client *c = k8s_client_new(&loop, &cfg, &e);
	k8s_config_release(&cfg);
	if (!c)
		fail_msg("client: %s", e.msg);
	cur_client = c;
	return c;
}

static void client_done(struct k8s_client *c)
{
	k8s_client_close(c);
	uv_run(&loop, UV_RUN_DEFAULT); /* the guard is stopped: returns once all is closed */
	if (c == cur_client)
		cur_client = NULL;
}

/* Write a kubeconfig for the fake with @user_yaml (indented 4) and extra
 * cluster lines @cluster_yaml (indented 4, may be ""). */
static void write_kc(const char *path, const char *server, const char *cluster_yaml,
                     const char *user_yaml)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f,
	        "apiVersion: v1\nkind: Config\nclusters:\n- name: fk\n  cluster:\n"
	        "    server: %s\n%s"
	        "contexts:\n- name: fk\n  context: {cluster: fk, user: u, namespace: default}\n"
	        "current-context: fk\nusers:\n- name: u\n  user:\n%s",
	        server, cluster_yaml, user_yaml);
	fclose(f);
}

static void dir_path(char *out, size_t cap, const char *name)
{
	snprintf(out, cap, "%s/%s", fx.dir, name);
}

static void write_file(const char *path, const char *text, int mode)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	chmod(path, (mode_t)mode);
}

static void ca_line(char *out, size_t cap)
{
	snprintf(out, cap, "    certificate-authority: %s\n", fx.ca);
}

/* ---- results ------------------------------------------------------------ */

struct result {
	int calls;
	int code;
	json_t *obj;
	int st_code;
	char reason[64];
	char msg[CP_ERR_MSG_MAX];
};

static void on_result(void *arg, json_t *obj, const struct k8s_status *st,
                      const struct cp_err *err)
{
	struct result *r = arg;
	if (dropping)
		return;
	if (r->calls++)
		fail_msg("a second callback for one call (%s)", err ? err->msg : "ok");
	r->code = err ? (int)err->code : 0;
	r->obj = obj ? json_incref(obj) : NULL;
	r->st_code = st ? st->code : 0;
	snprintf(r->reason, sizeof r->reason, "%s", st && st->reason ? st->reason : "");
	snprintf(r->msg, sizeof r->msg, "%s", err ? err->msg : "");
}

static void result_reset(struct result *r)
{
	json_decref(r->obj);
	memset(r, 0, sizeof *r);
}

static struct k8s_rest_cb cb_of(struct result *r)
{
	struct k8s_rest_cb cb = {on_result, r};
	return cb;
}

static void wait_result(struct result *r, long ms)
{
	RUN_UNTIL(r->calls, ms);
	assert_int_equal(r->calls, 1); /* a second callback fails in on_result */
}

static const char *str_at(json_t *o, const char *a, const char *b)
{
	return json_string_value(json_object_get(json_object_get(o, a), b));
}

static json_t *pod_json(const char *name, const char *app)
{
	json_t *p = json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:[{s:s, s:s}]}}", "apiVersion", "v1",
	                      "kind", "Pod", "metadata", "name", name, "labels", "app", app, "spec",
	                      "containers", "name", "main", "image", "node:22-slim");
	assert_non_null(p);
	return p;
}

/* Calls whose result we only need to be a success. */
static json_t *get_pod(struct k8s_client *c, const char *name, const struct k8s_rest_opts *o,
                       struct result *r)
{
	result_reset(r);
	assert_int_equal(k8s_pod_get(c, NULL, name, o, cb_of(r), NULL, NULL), 0);
	wait_result(r, 15000);
	return r->obj;
}

/* The pod once the fake has it Running (its last status step): polls with a
 * deadline that only catches a hang. */
static json_t *get_running_pod(struct k8s_client *c, const char *name, struct result *r)
{
	for (int i = 0; i < 1500; i++) {
		json_t *got = get_pod(c, name, NULL, r);
		if (r->code)
			fail_msg("get %s: %s", name, r->msg);
		const char *phase = str_at(got, "status", "phase");
		if (phase && strcmp(phase, "Running") == 0)
			return got;
		usleep(20 * 1000);
	}
	fail_msg("pod %s never became Running", name);
	return NULL;
}

static void create_pod(struct k8s_client *c, const char *name, const char *app)
{
	struct result r = {0};
	json_t *p = pod_json(name, app);
	assert_int_equal(k8s_pod_create(c, NULL, p, NULL, cb_of(&r), NULL, NULL), 0);
	json_decref(p);
	wait_result(&r, 10000);
	if (r.code)
		fail_msg("create %s: %s", name, r.msg);
	result_reset(&r);
}

static void delete_pod(struct k8s_client *c, const char *name)
{
	struct result r = {0};
	struct k8s_delete_opts d = {NULL, NULL, 0};
	assert_int_equal(k8s_pod_delete(c, NULL, name, &d, NULL, cb_of(&r), NULL, NULL), 0);
	wait_result(&r, 10000);
	result_reset(&r);
}

static size_t list_count(struct k8s_client *c, const char *ls, const char *fs)
{
	struct result r = {0};
	assert_int_equal(k8s_pod_list(c, NULL, ls, fs, NULL, cb_of(&r), NULL, NULL), 0);
	wait_result(&r, 10000);
	if (r.code)
		fail_msg("list: %s", r.msg);
	assert_string_equal(json_string_value(json_object_get(r.obj, "kind")), "PodList");
	assert_non_null(str_at(r.obj, "metadata", "resourceVersion"));
	size_t n = json_array_size(json_object_get(r.obj, "items"));
	result_reset(&r);
	return n;
}

static void add_fault(const char *json)
{
	char *out = NULL;
	int st = fakekube_ctl(&fx, "POST", "/fakekube/faults", json, &out);
	if (st != 200)
		fail_msg("fault %s: %d %s", json, st, out ? out : "");
	free(out);
}

static void clear_faults(void)
{
	assert_int_equal(fakekube_ctl(&fx, "DELETE", "/fakekube/faults", NULL, NULL), 200);
}

/* Number of fault rules still armed. */
static size_t faults_left(void)
{
	char *out = NULL;
	assert_int_equal(fakekube_ctl(&fx, "GET", "/fakekube/faults", NULL, &out), 200);
	json_t *j = json_loads(out, 0, NULL);
	free(out);
	size_t n = json_array_size(json_object_get(j, "rules"));
	json_decref(j);
	return n;
}

/* ---- every call, both auth kinds ---------------------------------------- */

static void crud_sequence(struct k8s_client *c, const char *name, const char *app)
{
	struct result r = {0};
	json_t *p = pod_json(name, app);
	/* create: 201 + Pod */
	assert_int_equal(k8s_pod_create(c, NULL, p, NULL, cb_of(&r), NULL, NULL), 0);
	wait_result(&r, 10000);
	if (r.code)
		fail_msg("create: %s", r.msg);
	char uid[64], rv0[32];
	snprintf(uid, sizeof uid, "%s", str_at(r.obj, "metadata", "uid"));
	snprintf(rv0, sizeof rv0, "%s", str_at(r.obj, "metadata", "resourceVersion"));
	/* create again: 409 AlreadyExists */
	result_reset(&r);
	assert_int_equal(k8s_pod_create(c, NULL, p, NULL, cb_of(&r), NULL, NULL), 0);
	json_decref(p);
	wait_result(&r, 10000);
	assert_int_equal(r.code, CP_E_CONFLICT);
	assert_int_equal(r.st_code, 409);
	assert_string_equal(r.reason, "AlreadyExists");
	assert_non_null(strstr(r.msg, "already exists"));
	/* get */
	json_t *got = get_pod(c, name, NULL, &r);
	assert_int_equal(r.code, 0);
	assert_string_equal(str_at(got, "metadata", "name"), name);
	assert_string_equal(str_at(got, "metadata", "uid"), uid);
	/* list with selectors */
	char sel[128];
	snprintf(sel, sizeof sel, "app=%s", app);
	assert_int_equal(list_count(c, sel, NULL), 1);
	snprintf(sel, sizeof sel, "metadata.name=%s", name);
	assert_int_equal(list_count(c, NULL, sel), 1);
	assert_int_equal(list_count(c, NULL, "metadata.name=no-such-pod"), 0);
	assert_int_equal(list_count(c, "app in (nothing,nobody)", NULL), 0);
	/* patch with the current resourceVersion, then with a stale one; the
	 * fake moves a new pod through Pending -> Running, each step a new
	 * resourceVersion, so the "current" one is read once the pod is Running */
	got = get_running_pod(c, name, &r);
	char rv[32];
	snprintf(rv, sizeof rv, "%s", str_at(got, "metadata", "resourceVersion"));
	json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "patched", "yes");
	result_reset(&r);
	assert_int_equal(k8s_pod_patch(c, NULL, name, patch, rv, NULL, cb_of(&r), NULL, NULL), 0);
	wait_result(&r, 10000);
	if (r.code)
		fail_msg("patch: %s", r.msg);
	assert_string_equal(json_string_value(json_object_get(
	                        json_object_get(json_object_get(r.obj, "metadata"), "labels"), "patched")),
	                    "yes");
	result_reset(&r);
	assert_int_equal(k8s_pod_patch(c, NULL, name, patch, rv0, NULL, cb_of(&r), NULL, NULL), 0);
	json_decref(patch);
	wait_result(&r, 10000);
	assert_int_equal(r.code, CP_E_CONFLICT);
	assert_string_equal(r.reason, "Conflict");
	/* delete with a wrong uid precondition: 409; with the right one: 200 */
	struct k8s_delete_opts d = {"00000000-0000-0000-0000-000000000000", NULL, 0};
	result_reset(&r);
	assert_int_equal(k8s_pod_delete(c, NULL, name, &d, NULL, cb_of(&r), NULL, NULL), 0);
	wait_result(&r, 10000);
	assert_int_equal(r.code, CP_E_CONFLICT);
	assert_non_null(strstr(r.msg, "recondition"));
	d.uid = uid;
	result_reset(&r);
	assert_int_equal(k8s_pod_delete(c, NULL, name, &d, NULL, cb_of(&r), NULL, NULL), 0);
	wait_result(&r, 10000);
	if (r.code)
		fail_msg("delete: %s", r.msg);
	/* gone: 404 NotFound, eventually (graceful deletion) */
	long end = fk_now_ms() + 10000;
	do {
		get_pod(c, name, NULL, &r);
	} while (r.code == 0 && fk_now_ms() < end);
	assert_int_equal(r.code, CP_E_NOT_FOUND);
	assert_int_equal(r.st_code, 404);
	assert_string_equal(r.reason, "NotFound");
	result_reset(&r);
}

static void test_crud_client_cert(void **state)
{
	(void)state;
	struct k8s_client *c = client_from(fx.kubeconfig);
	crud_sequence(c, "rest-cert", "restcert");
	client_done(c);
}

static void test_crud_bearer_token(void **state)
{
	(void)state;
	char kc[400], user[300], ca[400];
	dir_path(kc, sizeof kc, "kc-token");
	ca_line(ca, sizeof ca);
	snprintf(user, sizeof user, "    token: %s\n", fx.token);
	write_kc(kc, fx.server, ca, user);
	struct k8s_client *c = client_from(kc);
	crud_sequence(c, "rest-token", "resttoken");
	client_done(c);
}

static void test_no_credentials_401(void **state)
{
	(void)state;
	char kc[400], ca[400];
	dir_path(kc, sizeof kc, "kc-anon");
	ca_line(ca, sizeof ca);
	write_kc(kc, fx.server, ca, "    {}\n");
	struct k8s_client *c = client_from(kc);
	struct result r = {0};
	get_pod(c, "whatever", NULL, &r);
	assert_int_equal(r.code, CP_E_AUTH);
	assert_int_equal(r.st_code, 401);
	assert_string_equal(r.reason, "Unauthorized");
	result_reset(&r);
	client_done(c);
}

/* A wrong token in the file: 401; the file is re-read on the 401 and the
 * request made again, so fixing the file fixes the next call. */
static void test_token_file_reread_on_401(void **state)
{
	(void)state;
	char kc[400], user[500], ca[400], tok[400];
	dir_path(kc, sizeof kc, "kc-tokfile");
	dir_path(tok, sizeof tok, "tokfile");
	ca_line(ca, sizeof ca);
	snprintf(user, sizeof user, "    tokenFile: %s\n", tok);
	write_file(tok, "wrong-token\n", 0600);
	write_kc(kc, fx.server, ca, user);
	struct k8s_client *c = client_from(kc);
	struct result r = {0};
	get_pod(c, "nope", NULL, &r);
	assert_int_equal(r.code, CP_E_AUTH);
	assert_int_equal(r.st_code, 401);
	write_file(tok, fx.token, 0600);
	get_pod(c, "nope", NULL, &r);
	assert_int_equal(r.code, CP_E_NOT_FOUND); /* authenticated now */
	result_reset(&r);
	client_done(c);
}

static void test_insecure_skip_verify(void **state)
{
	(void)state;
	char kc[400], user[300];
	dir_path(kc, sizeof kc, "kc-insecure");
	snprintf(user, sizeof user, "    token: %s\n", fx.token);
	write_kc(kc, fx.server, "    insecure-skip-tls-verify: true\n", user);
	struct k8s_client *c = client_from(kc);
	assert_int_equal(list_count(c, "app=none", NULL), 0);
	client_done(c);
}

static void test_tls_server_name(void **state)
{
	(void)state;
	char kc[400], user[300], cl[600];
	dir_path(kc, sizeof kc, "kc-sni");
	snprintf(user, sizeof user, "    token: %s\n", fx.token);
	/* Right name (a SAN of the server cert) through CONNECT_TO: works. */
	snprintf(cl, sizeof cl, "    certificate-authority: %s\n    tls-server-name: kubernetes.default.svc\n",
	         fx.ca);
	write_kc(kc, fx.server, cl, user);
	struct k8s_client *c = client_from(kc);
	assert_int_equal(list_count(c, "app=none", NULL), 0);
	client_done(c);
	/* A name the certificate does not carry: verification fails. */
	snprintf(cl, sizeof cl, "    certificate-authority: %s\n    tls-server-name: wrong.example\n", fx.ca);
	write_kc(kc, fx.server, cl, user);
	c = client_from(kc);
	struct result r = {0};
	get_pod(c, "x", NULL, &r);
	assert_int_equal(r.code, CP_E_IO);
	result_reset(&r);
	client_done(c);
}

/* ---- faults ------------------------------------------------------------- */

static void test_fault_delay(void **state)
{
	(void)state;
	struct k8s_client *c = client_from(fx.kubeconfig);
	create_pod(c, "fault-delay", "faults");
	add_fault("{\"type\":\"delay\",\"ms\":400,\"method\":\"GET\",\"path\":\"/pods/fault-delay$\"}");
	struct result r = {0};
	long t0 = fk_now_ms();
	get_pod(c, "fault-delay", NULL, &r);
	assert_int_equal(r.code, 0);
	assert_true(fk_now_ms() - t0 >= 400);
	/* The same delay past the call's timeout is a timeout. */
	add_fault("{\"type\":\"delay\",\"ms\":1500,\"method\":\"GET\",\"path\":\"/pods/fault-delay$\"}");
	struct k8s_rest_opts o = {.timeout_ms = 300};
	get_pod(c, "fault-delay", &o, &r);
	assert_int_equal(r.code, CP_E_TIMEOUT);
	result_reset(&r);
	delete_pod(c, "fault-delay");
	client_done(c);
}

static void test_fault_500_retried(void **state)
{
	(void)state;
	struct k8s_client *c = client_from(fx.kubeconfig);
	create_pod(c, "fault-500", "faults");
	add_fault("{\"type\":\"status\",\"code\":500,\"method\":\"GET\",\"path\":\"/pods/fault-500$\",\"count\":2}");
	struct k8s_rest_opts o = {.backoff_ms = 20};
	struct result r = {0};
	get_pod(c, "fault-500", &o, &r);
	if (r.code)
		fail_msg("get after 500s: %s", r.msg);
	assert_int_equal(faults_left(), 0); /* both 500s were consumed by retries */
	/* Too many: the last Status is the answer. */
	add_fault("{\"type\":\"status\",\"code\":503,\"method\":\"GET\",\"path\":\"/pods/fault-500$\",\"count\":3,\"retry_after\":0}");
	o.max_attempts = 2;
	get_pod(c, "fault-500", &o, &r);
	assert_int_equal(r.code, CP_E_RETRY);
	assert_int_equal(r.st_code, 503);
	clear_faults();
	/* Create is not retried on 500 (it may have happened). */
	add_fault("{\"type\":\"status\",\"code\":500,\"method\":\"POST\",\"count\":1}");
	json_t *p = pod_json("fault-500-b", "faults");
	result_reset(&r);
	assert_int_equal(k8s_pod_create(c, NULL, p, &o, cb_of(&r), NULL, NULL), 0);
	json_decref(p);
	wait_result(&r, 10000);
	assert_int_equal(r.code, CP_E_RETRY);
	assert_int_equal(r.st_code, 500);
	assert_string_equal(r.reason, "InternalError");
	result_reset(&r);
	delete_pod(c, "fault-500");
	client_done(c);
}

static void test_fault_429_retry_after(void **state)
{
	(void)state;
	struct k8s_client *c = client_from(fx.kubeconfig);
	create_pod(c, "fault-429", "faults");
	/* 429 is retried for a create too, honouring Retry-After: 1. */
	add_fault("{\"type\":\"status\",\"code\":429,\"retry_after\":1,\"method\":\"POST\",\"count\":1}");
	struct k8s_rest_opts o = {.backoff_ms = 10};
	struct result r = {0};
	json_t *p = pod_json("fault-429-b", "faults");
	long t0 = fk_now_ms();
	assert_int_equal(k8s_pod_create(c, NULL, p, &o, cb_of(&r), NULL, NULL), 0);
	json_decref(p);
	wait_result(&r, 10000);
	if (r.code)
		fail_msg("create after 429: %s", r.msg);
	assert_true(fk_now_ms() - t0 >= 1000);
	assert_int_equal(faults_left(), 0);
	result_reset(&r);
	delete_pod(c, "fault-429");
	delete_pod(c, "fault-429-b");
	client_done(c);
}

static void test_fault_garbage_body(void **state)
{
	(void)state;
	struct k8s_client *c = client_from(fx.kubeconfig);
	add_fault("{\"type\":\"garbage\",\"method\":\"GET\",\"path\":\"/pods/garbage$\"}");
	struct result r = {0};
	get_pod(c, "garbage", NULL, &r);
	assert_int_equal(r.code, CP_E_PARSE);
	assert_non_null(strstr(r.msg, "not JSON"));
	/* Garbage with an error code: still a clear error naming the code. */
	add_fault("{\"type\":\"garbage\",\"code\":502,\"method\":\"GET\",\"path\":\"/pods/garbage$\"}");
	struct k8s_rest_opts o = {.max_attempts = 1};
	get_pod(c, "garbage", &o, &r);
	assert_int_equal(r.code, CP_E_RETRY);
	assert_int_equal(r.st_code, 502);
	assert_non_null(strstr(r.msg, "502"));
	result_reset(&r);
	client_done(c);
}

static void test_fault_hang_times_out(void **state)
{
	(void)state;
	struct k8s_client *c = client_from(fx.kubeconfig);
	add_fault("{\"type\":\"hang\",\"method\":\"GET\",\"path\":\"/pods/hang$\"}");
	struct k8s_rest_opts o = {.timeout_ms = 500};
	struct result r = {0};
	/* The server never answers: only the call's own timeout can end it
	 * (get_pod's wait is a hang catcher). */
	get_pod(c, "hang", &o, &r);
	assert_int_equal(r.code, CP_E_TIMEOUT);
	result_reset(&r);
	client_done(c);
}

static void test_fault_reset_retried(void **state)
{
	(void)state;
	struct k8s_client *c = client_from(fx.kubeconfig);
	add_fault("{\"type\":\"reset\",\"method\":\"GET\",\"path\":\"/pods/reset$\"}");
	struct k8s_rest_opts o = {.backoff_ms = 10};
	struct result r = {0};
	get_pod(c, "reset", &o, &r);
	assert_int_equal(r.code, CP_E_NOT_FOUND); /* second attempt reached the API */
	assert_int_equal(faults_left(), 0);
	result_reset(&r);
	client_done(c);
}

static void test_cancel_and_close(void **state)
{
	(void)state;
	struct k8s_client *c = client_from(fx.kubeconfig);
	add_fault("{\"type\":\"hang\",\"method\":\"GET\",\"path\":\"/pods/hang2$\",\"count\":2}");
	struct result r1 = {0}, r2 = {0};
	struct k8s_rest_call *call = NULL;
	assert_int_equal(k8s_pod_get(c, NULL, "hang2", NULL, cb_of(&r1), &call, NULL), 0);
	assert_int_equal(k8s_pod_get(c, NULL, "hang2", NULL, cb_of(&r2), NULL, NULL), 0);
	RUN_UNTIL(0, 200);
	k8s_rest_cancel(call);
	wait_result(&r1, 2000);
	assert_int_equal(r1.code, CP_E_CANCELLED);
	assert_int_equal(r2.calls, 0);
	k8s_client_close(c); /* r2 gets CANCELLED too */
	uv_run(&loop, UV_RUN_DEFAULT);
	cur_client = NULL;
	assert_int_equal(r2.calls, 1);
	assert_int_equal(r2.code, CP_E_CANCELLED);
	clear_faults();
}

/* ---- exec plugin -------------------------------------------------------- */

static int count_lines(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	int n = 0, ch;
	while ((ch = fgetc(f)) != EOF)
		n += ch == '\n';
	fclose(f);
	return n;
}

static void write_plugin_kc(const char *kc, const char *script, const char *count)
{
	char user[1500], ca[400];
	ca_line(ca, sizeof ca);
	snprintf(user, sizeof user,
	         "    exec:\n"
	         "      apiVersion: client.authentication.k8s.io/v1\n"
	         "      command: %s\n"
	         "      args: [\"%s\"]\n"
	         "      env: [{name: FK_TOKEN_FILE, value: \"%s\"}]\n"
	         "      interactiveMode: Never\n",
	         script, count, fx.token_file);
	write_kc(kc, fx.server, ca, user);
}

static void test_exec_plugin_cached_and_rerun_on_401(void **state)
{
	(void)state;
	char kc[400], script[400], count[400], info[420];
	dir_path(kc, sizeof kc, "kc-exec");
	dir_path(script, sizeof script, "plugin.sh");
	dir_path(count, sizeof count, "plugin.count");
	snprintf(info, sizeof info, "%s.info", count);
	write_file(script,
	           "#!/bin/sh\n"
	           "echo run >> \"$1\"\n"
	           "printf '%s\\n' \"$KUBERNETES_EXEC_INFO\" > \"$1.info\"\n"
	           "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
	           "\"status\":{\"token\":\"%s\"}}\\n' \"$(cat \"$FK_TOKEN_FILE\")\"\n",
	           0755);
	write_plugin_kc(kc, script, count);
	struct k8s_client *c = client_from(kc);
	/* Three calls at once: one plugin run serves them all. */
	struct result r[3] = {{0}};
	for (int i = 0; i < 3; i++)
		assert_int_equal(k8s_pod_list(c, NULL, "app=none", NULL, NULL, cb_of(&r[i]), NULL, NULL), 0);
	for (int i = 0; i < 3; i++) {
		wait_result(&r[i], 10000);
		if (r[i].code)
			fail_msg("list with plugin token: %s", r[i].msg);
		result_reset(&r[i]);
	}
	assert_int_equal(list_count(c, "app=none", NULL), 0);
	assert_int_equal(count_lines(count), 1);
	assert_int_equal(k8s_creds_plugin_runs(k8s_client_creds(c)), 1);
	char buf[1024];
	assert_int_equal(fk_read(info, buf, sizeof buf), 0);
	assert_non_null(strstr(buf, "\"kind\":\"ExecCredential\""));
	assert_non_null(strstr(buf, "client.authentication.k8s.io/v1"));
	/* A 401 makes the plugin run again and the call succeed. */
	add_fault("{\"type\":\"status\",\"code\":401,\"method\":\"GET\",\"count\":1}");
	assert_int_equal(list_count(c, "app=none", NULL), 0);
	assert_int_equal(count_lines(count), 2);
	assert_int_equal(list_count(c, "app=none", NULL), 0);
	assert_int_equal(count_lines(count), 2);
	client_done(c);
}

static void test_exec_plugin_failure_names_command(void **state)
{
	(void)state;
	char kc[400], script[400], count[400];
	dir_path(kc, sizeof kc, "kc-exec-bad");
	dir_path(script, sizeof script, "plugin-bad.sh");
	dir_path(count, sizeof count, "plugin-bad.count");
	write_file(script, "#!/bin/sh\necho 'cannot reach the identity provider' >&2\nexit 3\n", 0755);
	write_plugin_kc(kc, script, count);
	struct k8s_client *c = client_from(kc);
	struct result r = {0};
	get_pod(c, "x", NULL, &r);
	assert_int_equal(r.code, CP_E_AUTH);
	assert_non_null(strstr(r.msg, script));
	assert_non_null(strstr(r.msg, "status 3"));
	assert_non_null(strstr(r.msg, "identity provider"));
	result_reset(&r);
	client_done(c);
	/* A command that does not exist. */
	char missing[400];
	dir_path(missing, sizeof missing, "no-such-plugin");
	write_plugin_kc(kc, missing, count);
	c = client_from(kc);
	get_pod(c, "x", NULL, &r);
	assert_int_equal(r.code, CP_E_AUTH);
	assert_non_null(strstr(r.msg, "no-such-plugin"));
	result_reset(&r);
	client_done(c);
}

/* The plugin hands out the fake's client certificate instead of a token,
 * with an expirationTimestamp already past: the certificate serves the call
 * it was fetched for, and every later call runs the plugin again (the cache
 * while a credential is valid: test_exec_plugin_cached_and_rerun_on_401). */
static void test_exec_plugin_cert_and_expiry(void **state)
{
	(void)state;
	char kc[400], script[400], count[400], text[1500];
	dir_path(kc, sizeof kc, "kc-exec-cert");
	dir_path(script, sizeof script, "plugin-cert.sh");
	dir_path(count, sizeof count, "plugin-cert.count");
	snprintf(text, sizeof text,
	         "#!/bin/sh\n"
	         "echo run >> \"$1\"\n"
	         "exp=2001-02-03T04:05:06Z\n"
	         "exec /usr/bin/python3 -c 'import json,sys; print(json.dumps({\"apiVersion\":"
	         "\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{"
	         "\"clientCertificateData\":open(sys.argv[1]).read(),\"clientKeyData\":open(sys.argv[2]).read(),"
	         "\"expirationTimestamp\":sys.argv[3]}}))' %s %s \"$exp\"\n",
	         fx.cert, fx.key);
	write_file(script, text, 0755);
	write_plugin_kc(kc, script, count);
	struct k8s_client *c = client_from(kc);
	assert_int_equal(list_count(c, "app=none", NULL), 0);
	assert_int_equal(count_lines(count), 1);
	assert_int_equal(list_count(c, "app=none", NULL), 0);
	assert_int_equal(count_lines(count), 2);
	assert_int_equal(list_count(c, "app=none", NULL), 0);
	assert_int_equal(count_lines(count), 3);
	client_done(c);
}

static void test_body_limit(void **state)
{
	(void)state;
	struct k8s_client *c = client_from(fx.kubeconfig);
	struct k8s_rest_opts o = {.max_body = 64};
	struct result r = {0};
	assert_int_equal(k8s_pod_list(c, NULL, NULL, NULL, &o, cb_of(&r), NULL, NULL), 0);
	wait_result(&r, 10000);
	assert_int_equal(r.code, CP_E_TOO_BIG);
	result_reset(&r);
	client_done(c);
}

/* ---- watch -------------------------------------------------------------- */

struct wstate {
	int resyncs, added, modified, deleted, bookmarks, done, done_code;
	size_t last_list_items;
	struct k8s_pod_watch *w;
	int stop_on_added;
};

static void w_event(void *arg, const struct k8s_watch_event *ev)
{
	struct wstate *s = arg;
	if (dropping)
		return;
	assert_false(s->done);
	if (ev->type == K8S_WATCH_ADDED)
		s->added++;
	else if (ev->type == K8S_WATCH_MODIFIED)
		s->modified++;
	else if (ev->type == K8S_WATCH_DELETED)
		s->deleted++;
	else if (ev->type == K8S_WATCH_BOOKMARK)
		s->bookmarks++;
	if (ev->type == K8S_WATCH_ADDED && s->stop_on_added)
		k8s_pod_watch_stop(s->w);
}

static void w_resync(void *arg, json_t *list)
{
	struct wstate *s = arg;
	if (dropping)
		return;
	assert_false(s->done);
	s->resyncs++;
	s->last_list_items = json_array_size(json_object_get(list, "items"));
}

static void w_done(void *arg, const struct cp_err *err)
{
	struct wstate *s = arg;
	if (dropping)
		return;
	s->done++;
	s->done_code = err ? (int)err->code : 0;
}

static struct k8s_pod_watch *watch_start(struct k8s_client *c, const char *label, struct wstate *s)
{
	struct k8s_pod_watch_ops ops = {w_event, w_resync, w_done, s};
	struct k8s_pod_watch_opts o = {.label_selector = label, .timeout_s = 30, .backoff_ms = 50};
	struct cp_err e;
	if (k8s_pod_watch_start(c, &o, &ops, &s->w, &e))
		fail_msg("watch: %s", e.msg);
	RUN_UNTIL(s->resyncs >= 1, 10000);
	assert_true(s->resyncs >= 1); /* a 410 fault may already have caused the second */
	return s->w;
}

static void watch_stop(struct wstate *s)
{
	k8s_pod_watch_stop(s->w);
	RUN_UNTIL(s->done, 5000);
	assert_int_equal(s->done, 1);
	assert_int_equal(s->done_code, CP_E_CANCELLED);
}

static void test_watch_events(void **state)
{
	(void)state;
	struct k8s_client *c = client_from(fx.kubeconfig);
	create_pod(c, "w-pre", "wev");
	struct wstate s = {0};
	watch_start(c, "app=wev", &s);
	assert_int_equal(s.last_list_items, 1);
	create_pod(c, "w-a", "wev");
	create_pod(c, "w-other", "wother"); /* not selected */
	RUN_UNTIL(s.added >= 1 && s.modified >= 2, 10000);
	assert_int_equal(s.added, 1);
	assert_true(s.modified >= 2); /* scheduled, creating, running */
	delete_pod(c, "w-a");
	RUN_UNTIL(s.deleted >= 1, 10000);
	assert_int_equal(s.deleted, 1);
	assert_true(strlen(k8s_pod_watch_rv(s.w)) > 0);
	struct k8s_pod_watch_stats st;
	k8s_pod_watch_get_stats(s.w, &st);
	assert_int_equal(st.relists, 1);
	assert_int_equal(st.failures, 0);
	watch_stop(&s);
	delete_pod(c, "w-pre");
	delete_pod(c, "w-other");
	client_done(c);
}

/* The fault rule is armed before the watch starts: the list does not match
 * it (no watch=1), the first watch request does. */
static void test_watch_dropped_resumes(void **state)
{
	(void)state;
	struct k8s_client *c = client_from(fx.kubeconfig);
	static const char *modes[] = {"reset", "end"};
	for (int m = 0; m < 2; m++) {
		char fault[200], label[32], a[32], b[32];
		snprintf(fault, sizeof fault,
		         "{\"type\":\"watch_drop\",\"mode\":\"%s\",\"after_events\":1,\"path\":\"watch=1.*wdrop%d\"}",
		         modes[m], m);
		snprintf(label, sizeof label, "app=wdrop%d", m);
		snprintf(a, sizeof a, "wdrop%d-a", m);
		snprintf(b, sizeof b, "wdrop%d-b", m);
		add_fault(fault);
		struct wstate s = {0};
		watch_start(c, label, &s);
		create_pod(c, a, label + 4);
		RUN_UNTIL(s.added >= 1 && s.modified >= 3, 15000);
		struct k8s_pod_watch_stats st;
		k8s_pod_watch_get_stats(s.w, &st);
		assert_int_equal(s.added, 1);
		assert_true(s.modified >= 3); /* the rest came on the resumed stream */
		assert_true(st.watches >= 2);
		assert_int_equal(st.relists, 1); /* resumed from the resourceVersion */
		if (m == 0)
			assert_true(st.failures >= 1);
		else
			assert_int_equal(st.failures, 0);
		assert_int_equal(faults_left(), 0);
		create_pod(c, b, label + 4);
		RUN_UNTIL(s.added >= 2, 10000);
		assert_int_equal(s.added, 2);
		watch_stop(&s);
		delete_pod(c, a);
		delete_pod(c, b);
	}
	client_done(c);
}

static void test_watch_410_relists(void **state)
{
	(void)state;
	struct k8s_client *c = client_from(fx.kubeconfig);
	for (int http = 0; http < 2; http++) {
		struct wstate s = {0};
		char label[32], fault[200], name[32];
		snprintf(label, sizeof label, "app=w410-%d", http);
		snprintf(name, sizeof name, "w410-%d", http);
		snprintf(fault, sizeof fault, "{\"type\":\"watch_410\",\"http\":%s,\"path\":\"watch=1.*w410-%d\"}",
		         http ? "true" : "false", http);
		add_fault(fault);
		watch_start(c, label, &s);
		RUN_UNTIL(s.resyncs >= 2, 10000);
		struct k8s_pod_watch_stats st;
		k8s_pod_watch_get_stats(s.w, &st);
		assert_int_equal(s.resyncs, 2);
		assert_int_equal(st.relists, 2);
		assert_int_equal(faults_left(), 0);
		create_pod(c, name, name);
		RUN_UNTIL(s.added >= 1, 10000);
		assert_int_equal(s.added, 1);
		watch_stop(&s);
		delete_pod(c, name);
	}
	client_done(c);
}

static void test_watch_stop_inside_event(void **state)
{
	(void)state;
	struct k8s_client *c = client_from(fx.kubeconfig);
	struct wstate s = {.stop_on_added = 1};
	watch_start(c, "app=wstop", &s);
	create_pod(c, "ws-a", "wstop");
	RUN_UNTIL(s.done, 10000);
	assert_int_equal(s.added, 1);
	assert_int_equal(s.modified, 0);
	assert_int_equal(s.done, 1);
	assert_int_equal(s.done_code, CP_E_CANCELLED);
	delete_pod(c, "ws-a");
	client_done(c);
}

/* Started from a resourceVersion: no list, no resync, events after it. */
static void test_watch_from_resource_version(void **state)
{
	(void)state;
	struct k8s_client *c = client_from(fx.kubeconfig);
	struct result r = {0};
	assert_int_equal(k8s_pod_list(c, NULL, "app=wrv", NULL, NULL, cb_of(&r), NULL, NULL), 0);
	wait_result(&r, 10000);
	char rv[32];
	snprintf(rv, sizeof rv, "%s", str_at(r.obj, "metadata", "resourceVersion"));
	result_reset(&r);
	static struct wstate s;
	memset(&s, 0, sizeof s);
	struct k8s_pod_watch_ops ops = {w_event, w_resync, w_done, &s};
	struct k8s_pod_watch_opts o = {.label_selector = "app=wrv", .resource_version = rv};
	assert_int_equal(k8s_pod_watch_start(c, &o, &ops, &s.w, NULL), 0);
	create_pod(c, "wrv-a", "wrv");
	RUN_UNTIL(s.added >= 1, 10000);
	assert_int_equal(s.added, 1);
	assert_int_equal(s.resyncs, 0);
	struct k8s_pod_watch_stats st;
	k8s_pod_watch_get_stats(s.w, &st);
	assert_int_equal(st.relists, 0);
	watch_stop(&s);
	delete_pod(c, "wrv-a");
	client_done(c);
}

/* A watch that cannot authenticate ends with that error, once. */
static void test_watch_permanent_error(void **state)
{
	(void)state;
	char kc[400], ca[400];
	dir_path(kc, sizeof kc, "kc-anon-watch");
	ca_line(ca, sizeof ca);
	write_kc(kc, fx.server, ca, "    {}\n");
	struct k8s_client *c = client_from(kc);
	struct wstate s = {0};
	struct k8s_pod_watch_ops ops = {w_event, w_resync, w_done, &s};
	assert_int_equal(k8s_pod_watch_start(c, NULL, &ops, &s.w, NULL), 0);
	RUN_UNTIL(s.done, 10000);
	assert_int_equal(s.done, 1);
	assert_int_equal(s.done_code, CP_E_AUTH);
	assert_int_equal(s.resyncs, 0);
	client_done(c);
}

/* Closing the client ends a running watch with CP_E_CANCELLED. */
static void test_watch_client_close(void **state)
{
	(void)state;
	struct k8s_client *c = client_from(fx.kubeconfig);
	struct wstate s = {0};
	watch_start(c, "app=wclose", &s);
	client_done(c);
	assert_int_equal(s.done, 1);
	assert_int_equal(s.done_code, CP_E_CANCELLED);
}

/* ---- group -------------------------------------------------------------- */

static int group_setup(void **state)
{
	(void)state;
	if (uv_loop_init(&loop) || uv_timer_init(&loop, &guard))
		return -1;
	return fakekube_start(&fx);
}

static int group_teardown(void **state)
{
	(void)state;
	uv_close((uv_handle_t *)&guard, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	int rc = uv_loop_close(&loop) ? -1 : 0; /* every handle was closed */
	if (fakekube_stop(&fx, getenv("FAKEKUBE_LOG") != NULL))
		rc = -1;
	return rc;
}

static int test_teardown(void **state)
{
	(void)state;
	if (cur_client) {
		dropping = 1;
		client_done(cur_client);
		dropping = 0;
	}
	clear_faults();
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_crud_client_cert, test_teardown),
		cmocka_unit_test_teardown(test_crud_bearer_token, test_teardown),
		cmocka_unit_test_teardown(test_no_credentials_401, test_teardown),
		cmocka_unit_test_teardown(test_token_file_reread_on_401, test_teardown),
		cmocka_unit_test_teardown(test_insecure_skip_verify, test_teardown),
		cmocka_unit_test_teardown(test_tls_server_name, test_teardown),
		cmocka_unit_test_teardown(test_fault_delay, test_teardown),
		cmocka_unit_test_teardown(test_fault_500_retried, test_teardown),
		cmocka_unit_test_teardown(test_fault_429_retry_after, test_teardown),
		cmocka_unit_test_teardown(test_fault_garbage_body, test_teardown),
		cmocka_unit_test_teardown(test_fault_hang_times_out, test_teardown),
		cmocka_unit_test_teardown(test_fault_reset_retried, test_teardown),
		cmocka_unit_test_teardown(test_cancel_and_close, test_teardown),
		cmocka_unit_test_teardown(test_exec_plugin_cached_and_rerun_on_401, test_teardown),
		cmocka_unit_test_teardown(test_exec_plugin_failure_names_command, test_teardown),
		cmocka_unit_test_teardown(test_exec_plugin_cert_and_expiry, test_teardown),
		cmocka_unit_test_teardown(test_body_limit, test_teardown),
		cmocka_unit_test_teardown(test_watch_events, test_teardown),
		cmocka_unit_test_teardown(test_watch_dropped_resumes, test_teardown),
		cmocka_unit_test_teardown(test_watch_410_relists, test_teardown),
		cmocka_unit_test_teardown(test_watch_stop_inside_event, test_teardown),
		cmocka_unit_test_teardown(test_watch_from_resource_version, test_teardown),
		cmocka_unit_test_teardown(test_watch_permanent_error, test_teardown),
		cmocka_unit_test_teardown(test_watch_client_close, test_teardown),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
