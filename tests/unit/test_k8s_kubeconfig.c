/* test_k8s_kubeconfig.c - k8s/kubeconfig*.c on every kubeconfig fixture,
 * the merge fixtures' expected result, in-cluster config, broken input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "k8s/api/kubeconfig.h"
#include "test_k8s_fixture.h"

static char tmpdir[256];

static void write_file(const char *dir, const char *rel, const char *data, size_t len)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, rel);
	char *slash = strrchr(path, '/');
	*slash = '\0';
	char cmd[600];
	snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path);
	assert_int_equal(system(cmd), 0);
	*slash = '/';
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	fclose(f);
}

static int setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof tmpdir, "/tmp/test_k8s_kubeconfig.XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static struct k8s_kubeconfig *load(const char *file)
{
	struct k8s_kubeconfig *kc = k8s_kubeconfig_new();
	struct cp_err err;
	cp_err_clear(&err);
	int rc = k8s_kubeconfig_load_file(kc, file, &err);
	if (rc)
		fprintf(stderr, "%s\n", err.msg);
	assert_int_equal(rc, 0);
	return kc;
}

static void test_kind(void **state)
{
	(void)state;
	struct k8s_kubeconfig *kc = load(FIXTURE_DIR "kubeconfig-kind.yaml");
	struct k8s_config cfg;
	assert_int_equal(k8s_kubeconfig_resolve(kc, NULL, &cfg, NULL), 0);
	k8s_kubeconfig_free(kc); /* the config is independent */
	assert_string_equal(cfg.server, "https://127.0.0.1:41235");
	assert_string_equal(cfg.context, "kind-kind");
	assert_string_equal(cfg.ns, "default");
	assert_non_null(cfg.ca_pem);
	assert_true(strncmp((char *)cfg.ca_pem, "-----BEGIN CERTIFICATE-----\nPLACEHOLDER-CA", 42) == 0);
	assert_true(strstr((char *)cfg.cert_pem, "PLACEHOLDER-CLIENT-CERT") != NULL);
	assert_true(strstr((char *)cfg.key_pem, "BEGIN RSA PRIVATE KEY") != NULL);
	assert_int_equal(cfg.key_pem_len, strlen((char *)cfg.key_pem));
	assert_null(cfg.token);
	assert_null(cfg.exec);
	assert_int_equal(cfg.insecure, 0);
	k8s_config_release(&cfg);
	k8s_config_release(&cfg);
}

static void test_gke(void **state)
{
	(void)state;
	struct k8s_kubeconfig *kc = load(FIXTURE_DIR "kubeconfig-gke-exec.yaml");
	struct k8s_config cfg;
	struct cp_err err;
	assert_int_equal(k8s_kubeconfig_resolve(kc, NULL, &cfg, &err), 0);
	assert_string_equal(cfg.server, "https://34.118.0.10");
	assert_string_equal(cfg.context, "gke_my-project_us-central1_convo-cluster");
	assert_non_null(cfg.exec);
	assert_string_equal(cfg.exec->api_version, K8S_EXECCRED_V1BETA1);
	assert_string_equal(cfg.exec->command, "gke-gcloud-auth-plugin"); /* PATH lookup */
	assert_int_equal(cfg.exec->n_args, 0);
	assert_int_equal(cfg.exec->n_env, 0);
	assert_int_equal(cfg.exec->interactive_mode, K8S_EXEC_INTERACTIVE_IF_AVAILABLE);
	assert_int_equal(cfg.exec->provide_cluster_info, 1);
	assert_string_equal(cfg.exec->install_hint,
	                    "Install gke-gcloud-auth-plugin for use with kubectl by following "
	                    "https://cloud.google.com/blog/products/containers-kubernetes/kubectl-auth-changes-in-gke");
	struct k8s_exec_cluster ec;
	k8s_config_exec_cluster(&cfg, &ec);
	char *js = NULL;
	assert_int_equal(k8s_execcred_input(cfg.exec, &ec, 0, &js, NULL), 0);
	json_t *j = json_loads(js, 0, NULL);
	json_t *cl = json_object_get(json_object_get(j, "spec"), "cluster");
	assert_string_equal(json_string_value(json_object_get(cl, "server")), "https://34.118.0.10");
	assert_string_equal(json_string_value(json_object_get(cl, "certificate-authority-data")),
	                    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tClBMQUNFSE9MREVSLUNBLU5PVC1BLVJFQUwtQ0VSVAotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg==");
	json_decref(j);
	free(js);
	k8s_config_release(&cfg);
	k8s_kubeconfig_free(kc);
}

/* kubeconfig-features.yaml copied next to the files it names. */
static struct k8s_kubeconfig *features_in_tmp(char *path, size_t cap)
{
	size_t len = 0;
	char *yaml = fixture_read("kubeconfig-features.yaml", &len);
	write_file(tmpdir, "kc/config", yaml, len);
	free(yaml);
	write_file(tmpdir, "kc/certs/prod-ca.crt", "CA-PEM\n", 7);
	write_file(tmpdir, "kc/certs/user.crt", "USER-CERT\n", 10);
	write_file(tmpdir, "kc/certs/user.key", "USER-KEY\n", 9);
	write_file(tmpdir, "kc/tokens/sa.token", "  sa-token-value\n\n", 18);
	snprintf(path, cap, "%s/kc/config", tmpdir);
	return load(path);
}

static void test_features(void **state)
{
	(void)state;
	char path[300], want[400];
	struct k8s_kubeconfig *kc = features_in_tmp(path, sizeof path);
	struct k8s_config cfg;
	struct cp_err err;
	assert_int_equal(kc->n_clusters, 3);
	assert_int_equal(kc->n_users, 7);
	assert_int_equal(kc->n_contexts, 5);

	/* current-context: prod-token. */
	assert_int_equal(k8s_kubeconfig_resolve(kc, NULL, &cfg, &err), 0);
	assert_string_equal(cfg.context, "prod-token");
	assert_string_equal(cfg.server, "https://10.0.0.1:6443");
	assert_string_equal((char *)cfg.ca_pem, "CA-PEM\n");
	assert_string_equal(cfg.tls_server_name, "kubernetes.default.svc");
	assert_string_equal(cfg.proxy_url, "http://proxy.internal.example:3128");
	assert_string_equal(cfg.token, "static-bearer-token-placeholder");
	assert_null(cfg.token_file);
	assert_string_equal(cfg.ns, "convo-sandbox");
	k8s_config_release(&cfg);

	assert_int_equal(k8s_kubeconfig_resolve(kc, "prod-tokenfile", &cfg, &err), 0);
	assert_string_equal(cfg.server, "https://[fd00::1]:6443");
	assert_true(strstr((char *)cfg.ca_pem, "PLACEHOLDER-CA-NOT-A-REAL-CERT") != NULL);
	assert_int_equal(cfg.disable_compression, 1);
	assert_string_equal(cfg.token, "sa-token-value");
	snprintf(want, sizeof want, "%s/kc/tokens/sa.token", tmpdir);
	assert_string_equal(cfg.token_file, want);
	assert_string_equal(cfg.ns, "default");
	assert_string_equal(json_string_value(json_object_get(cfg.exec_cluster_config, "audience")),
	                    "example-audience");
	k8s_config_release(&cfg);

	assert_int_equal(k8s_kubeconfig_resolve(kc, "prod-cert", &cfg, &err), 0);
	assert_string_equal((char *)cfg.cert_pem, "USER-CERT\n");
	assert_string_equal((char *)cfg.key_pem, "USER-KEY\n");
	assert_int_equal(cfg.key_pem_len, 9);
	assert_string_equal(cfg.ns, "team-a");
	k8s_config_release(&cfg);

	assert_int_equal(k8s_kubeconfig_resolve(kc, "prod-exec", &cfg, &err), 0);
	snprintf(want, sizeof want, "%s/kc/./bin/example-credential-plugin", tmpdir);
	assert_string_equal(cfg.exec->command, want);
	assert_int_equal(cfg.exec->n_args, 2);
	assert_string_equal(cfg.exec->args[0], "get-token");
	assert_string_equal(cfg.exec->args[1], "--cluster=prod");
	assert_int_equal(cfg.exec->n_env, 1);
	assert_string_equal(cfg.exec->env[0].name, "PLUGIN_MODE");
	assert_string_equal(cfg.exec->env[0].value, "ci");
	assert_int_equal(cfg.exec->interactive_mode, K8S_EXEC_INTERACTIVE_NEVER);
	assert_string_equal(cfg.exec->install_hint, "build ./bin/example-credential-plugin first");
	struct k8s_exec_cluster ec;
	k8s_config_exec_cluster(&cfg, &ec);
	char *js = NULL;
	assert_int_equal(k8s_execcred_input(cfg.exec, &ec, 0, &js, NULL), 0);
	assert_non_null(strstr(js, "\"config\":{\"audience\":\"example-audience\"}"));
	assert_non_null(strstr(js, "\"server\":\"https://[fd00::1]:6443\""));
	free(js);
	k8s_config_release(&cfg);

	assert_int_equal(k8s_kubeconfig_resolve(kc, "lab-basic", &cfg, &err), 0);
	assert_int_equal(cfg.insecure, 1);
	assert_null(cfg.ca_pem);
	assert_string_equal(cfg.username, "admin");
	assert_string_equal(cfg.password, "placeholder-password");
	k8s_config_release(&cfg);

	const struct k8s_kc_user *imp = k8s_kubeconfig_user(kc, "impersonating-user");
	assert_string_equal(imp->token, "admin-token-placeholder");
	assert_string_equal(k8s_kubeconfig_cluster(kc, "prod")->origin, path);
	k8s_kubeconfig_free(kc);

	/* From the fixture folder the referenced files are missing: the error
	 * names the file, the entry and the problem. */
	kc = load(FIXTURE_DIR "kubeconfig-features.yaml");
	assert_int_equal(k8s_kubeconfig_resolve(kc, NULL, &cfg, &err), CP_E_NOT_FOUND);
	assert_non_null(strstr(err.msg, "kubeconfig " FIXTURE_DIR "kubeconfig-features.yaml: cluster \"prod\": "
	                                "certificate-authority: " FIXTURE_DIR "certs/prod-ca.crt"));
	assert_int_equal(k8s_kubeconfig_resolve(kc, "prod-tokenfile", &cfg, &err), CP_E_NOT_FOUND);
	assert_non_null(strstr(err.msg, "user \"tokenfile-user\": tokenFile:"));
	k8s_kubeconfig_free(kc);
}

static void check_merged_ab(struct k8s_kubeconfig *kc)
{
	assert_string_equal(kc->current_context, "ctx-b");
	const struct k8s_kc_user *u = k8s_kubeconfig_user(kc, "shared");
	assert_string_equal(u->token, "token-from-A");
	assert_null(u->cert_file);
	assert_null(u->key_file);
	assert_non_null(k8s_kubeconfig_cluster(kc, "cluster-a"));
	assert_non_null(k8s_kubeconfig_cluster(kc, "cluster-b"));
	assert_non_null(k8s_kubeconfig_context(kc, "ctx-a"));
	assert_non_null(k8s_kubeconfig_context(kc, "ctx-b"));
	assert_int_equal(kc->n_users, 1);
	struct k8s_config cfg;
	assert_int_equal(k8s_kubeconfig_resolve(kc, NULL, &cfg, NULL), 0);
	assert_string_equal(cfg.server, "https://b.example:6443");
	assert_string_equal(cfg.token, "token-from-A");
	assert_null(cfg.cert_pem);
	assert_string_equal(cfg.ns, "ns-b");
	assert_int_equal(cfg.insecure, 1);
	k8s_config_release(&cfg);
	assert_int_equal(k8s_kubeconfig_resolve(kc, "ctx-a", &cfg, NULL), 0);
	assert_string_equal(cfg.server, "https://a.example:6443");
	assert_string_equal(cfg.ns, "ns-a");
	k8s_config_release(&cfg);
}

static void test_merge(void **state)
{
	(void)state;
	struct k8s_kubeconfig *kc = k8s_kubeconfig_new();
	struct cp_err err;
	assert_int_equal(k8s_kubeconfig_load_list(kc, FIXTURE_DIR "kubeconfig-merge-a.yaml:"
	                                          FIXTURE_DIR "kubeconfig-merge-b.yaml", &err), 0);
	check_merged_ab(kc);
	k8s_kubeconfig_free(kc);

	/* Empty entries, a missing file and repeats are skipped. */
	kc = k8s_kubeconfig_new();
	assert_int_equal(k8s_kubeconfig_load_list(kc, "::/nonexistent/kubeconfig:" FIXTURE_DIR
	                 "kubeconfig-merge-a.yaml:" FIXTURE_DIR "kubeconfig-merge-a.yaml::"
	                 FIXTURE_DIR "kubeconfig-merge-b.yaml:", &err), 0);
	check_merged_ab(kc);
	assert_int_equal(kc->n_files, 2);
	k8s_kubeconfig_free(kc);

	/* Reversed: B's whole "shared" user wins, current-context still ctx-b. */
	kc = k8s_kubeconfig_new();
	assert_int_equal(k8s_kubeconfig_load_list(kc, FIXTURE_DIR "kubeconfig-merge-b.yaml:"
	                                          FIXTURE_DIR "kubeconfig-merge-a.yaml", &err), 0);
	assert_string_equal(kc->current_context, "ctx-b");
	const struct k8s_kc_user *u = k8s_kubeconfig_user(kc, "shared");
	assert_string_equal(u->token, "token-from-B");
	assert_string_equal(u->cert_file, FIXTURE_DIR "b-only.crt");
	assert_string_equal(u->origin, FIXTURE_DIR "kubeconfig-merge-b.yaml");
	k8s_kubeconfig_free(kc);

	/* A broken file in the list is an error; the explicit single file too. */
	write_file(tmpdir, "broken.yaml", "clusters: [\n", 12);
	char list[600];
	snprintf(list, sizeof list, FIXTURE_DIR "kubeconfig-merge-a.yaml:%s/broken.yaml", tmpdir);
	kc = k8s_kubeconfig_new();
	assert_int_equal(k8s_kubeconfig_load_list(kc, list, &err), CP_E_PARSE);
	assert_non_null(strstr(err.msg, "broken.yaml: invalid YAML"));
	assert_int_equal(k8s_kubeconfig_load_file(kc, "/nonexistent/kc", &err), CP_E_NOT_FOUND);
	assert_non_null(strstr(err.msg, "kubeconfig /nonexistent/kc: No such file"));
	k8s_kubeconfig_free(kc);
}

struct bad_case {
	const char *yaml;
	int rc;
	const char *msg;
};

static void test_broken_yaml(void **state)
{
	(void)state;
	static const struct bad_case cases[] = {
		{"clusters: [\n", CP_E_PARSE, "kubeconfig /k/c: invalid YAML"},
		{"key: \"unterminated\n", CP_E_PARSE, "invalid YAML"},
		{"- a\n- b\n", CP_E_PARSE, "top level is not a mapping"},
		{"clusters: {}\n", CP_E_PARSE, "clusters is not a list"},
		{"users:\n- user: {token: x}\n", CP_E_PARSE, "users[0] has no name"},
		{"users:\n- 5\n", CP_E_PARSE, "users[0] is not a mapping"},
		{"users:\n- name: bob\n  user:\n    client-key-data: '!!notbase64'\n", CP_E_PARSE,
		 "kubeconfig /k/c: user \"bob\": client-key-data is not valid base64"},
		{"clusters:\n- name: c\n  cluster: {server: x}\n- name: c\n  cluster: {server: y}\n", CP_E_PARSE,
		 "cluster \"c\": defined twice in this file"},
		{"clusters:\n- name: c\n  cluster: {insecure-skip-tls-verify: maybe}\n", CP_E_PARSE,
		 "cluster \"c\": insecure-skip-tls-verify is not a boolean"},
		{"clusters:\n- name: c\n  cluster: [1]\n", CP_E_PARSE, "cluster is not a mapping"},
		{"clusters:\n- name: c\n  cluster: {server: [1]}\n", CP_E_PARSE, "server is not a string"},
		{"clusters:\n- name: c\n  cluster: {server: \"a\\0b\"}\n", CP_E_PARSE, "NUL byte"},
		{"users:\n- name: e\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never}\n",
		 CP_E_PARSE, "user \"e\": exec has no command"},
		{"users:\n- name: e\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1, command: x}\n",
		 CP_E_PARSE, "interactiveMode is required"},
		{"users:\n- name: e\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1alpha1, command: x}\n",
		 CP_E_PARSE, "not supported"},
		{"users:\n- name: e\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1, command: x, interactiveMode: Sometimes}\n",
		 CP_E_PARSE, "interactiveMode \"Sometimes\""},
		{"users:\n- name: e\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: x, args: a}\n",
		 CP_E_PARSE, "exec args is not a list"},
		{"users:\n- name: e\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: x, env: [{value: v}]}\n",
		 CP_E_PARSE, "exec env[0] has no name"},
		{"current-context: [a]\n", CP_E_PARSE, "current-context is not a string"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct k8s_kubeconfig *kc = k8s_kubeconfig_new();
		struct cp_err err;
		cp_err_clear(&err);
		int rc = k8s_kubeconfig_load_buffer(kc, cases[i].yaml, strlen(cases[i].yaml), "/k/c", &err);
		if (rc != cases[i].rc || !strstr(err.msg, cases[i].msg))
			fprintf(stderr, "case %zu: rc %d msg %s\n", i, rc, err.msg);
		assert_int_equal(rc, cases[i].rc);
		assert_non_null(strstr(err.msg, cases[i].msg));
		/* On error the config is unchanged. */
		assert_int_equal(kc->n_clusters + kc->n_users + kc->n_contexts, 0);
		k8s_kubeconfig_free(kc);
	}
	/* Empty input and an explicit null document are an empty config. */
	struct k8s_kubeconfig *kc = k8s_kubeconfig_new();
	assert_int_equal(k8s_kubeconfig_load_buffer(kc, "", 0, NULL, NULL), 0);
	assert_int_equal(k8s_kubeconfig_load_buffer(kc, "~\n", 2, NULL, NULL), 0);
	assert_int_equal(k8s_kubeconfig_load_buffer(kc, "{}", 2, NULL, NULL), 0);
	struct k8s_config cfg;
	struct cp_err err;
	assert_int_equal(k8s_kubeconfig_resolve(kc, NULL, &cfg, &err), CP_E_NOT_FOUND);
	assert_non_null(strstr(err.msg, "no current-context"));
	k8s_kubeconfig_free(kc);
}

static void test_resolve_errors(void **state)
{
	(void)state;
	static const char yaml[] =
		"{\"current-context\": \"nope\", \"clusters\": [\n"
		" {\"name\": \"noserver\", \"cluster\": {}},\n"
		" {\"name\": \"ftp\", \"cluster\": {\"server\": \"ftp://x\"}},\n"
		" {\"name\": \"ok\", \"cluster\": {\"server\": \"https://ok\"}},\n"
		" {\"name\": \"both\", \"cluster\": {\"server\": \"https://ok\", \"insecure-skip-tls-verify\": true,"
		"   \"certificate-authority-data\": \"Zm9v\"}}],\n"
		"\"users\": [\n"
		" {\"name\": \"certonly\", \"user\": {\"client-certificate-data\": \"Zm9v\"}},\n"
		" {\"name\": \"two\", \"user\": {\"token\": \"t\", \"username\": \"u\"}},\n"
		" {\"name\": \"tokexec\", \"user\": {\"token\": \"t\", \"exec\": {\"apiVersion\": "
		"   \"client.authentication.k8s.io/v1beta1\", \"command\": \"x\"}}},\n"
		" {\"name\": \"both\", \"user\": {\"token\": \"tok\", \"tokenFile\": \"/nonexistent\"}}],\n"
		"\"contexts\": [\n"
		" {\"name\": \"c-noserver\", \"context\": {\"cluster\": \"noserver\"}},\n"
		" {\"name\": \"c-ftp\", \"context\": {\"cluster\": \"ftp\"}},\n"
		" {\"name\": \"c-both\", \"context\": {\"cluster\": \"both\"}},\n"
		" {\"name\": \"c-nocluster\", \"context\": {\"cluster\": \"ghost\", \"user\": \"two\"}},\n"
		" {\"name\": \"c-nouser\", \"context\": {\"cluster\": \"ok\", \"user\": \"ghost\"}},\n"
		" {\"name\": \"c-certonly\", \"context\": {\"cluster\": \"ok\", \"user\": \"certonly\"}},\n"
		" {\"name\": \"c-two\", \"context\": {\"cluster\": \"ok\", \"user\": \"two\"}},\n"
		" {\"name\": \"c-tokexec\", \"context\": {\"cluster\": \"ok\", \"user\": \"tokexec\"}},\n"
		" {\"name\": \"c-anon\", \"context\": {\"cluster\": \"ok\", \"namespace\": \"\"}},\n"
		" {\"name\": \"c-tokwins\", \"context\": {\"cluster\": \"ok\", \"user\": \"both\"}}]}\n";
	struct k8s_kubeconfig *kc = k8s_kubeconfig_new();
	struct cp_err err;
	assert_int_equal(k8s_kubeconfig_load_buffer(kc, yaml, strlen(yaml), "/k/j", &err), 0);
	static const struct { const char *ctx; int rc; const char *msg; } cases[] = {
		{NULL, CP_E_NOT_FOUND, "kubeconfig: context \"nope\" not found"},
		{"c-noserver", CP_E_INVALID_REQUEST, "kubeconfig /k/j: cluster \"noserver\": server is missing"},
		{"c-ftp", CP_E_INVALID_REQUEST, "not an http(s) URL"},
		{"c-both", CP_E_INVALID_REQUEST, "insecure-skip-tls-verify"},
		{"c-nocluster", CP_E_NOT_FOUND, "kubeconfig /k/j: context \"c-nocluster\": cluster \"ghost\" not found"},
		{"c-nouser", CP_E_NOT_FOUND, "context \"c-nouser\": user \"ghost\" not found"},
		{"c-certonly", CP_E_INVALID_REQUEST, "user \"certonly\": client-certificate without client-key"},
		{"c-two", CP_E_INVALID_REQUEST, "user \"two\": more than one"},
		{"c-tokexec", CP_E_INVALID_REQUEST, "more than one"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct k8s_config cfg;
		cp_err_clear(&err);
		int rc = k8s_kubeconfig_resolve(kc, cases[i].ctx, &cfg, &err);
		if (rc != cases[i].rc || !strstr(err.msg, cases[i].msg))
			fprintf(stderr, "case %zu: rc %d msg %s\n", i, rc, err.msg);
		assert_int_equal(rc, cases[i].rc);
		assert_non_null(strstr(err.msg, cases[i].msg));
		assert_null(cfg.server);
	}
	struct k8s_config cfg;
	assert_int_equal(k8s_kubeconfig_resolve(kc, "c-anon", &cfg, NULL), 0);
	assert_null(cfg.token);
	assert_string_equal(cfg.ns, "default");
	k8s_config_release(&cfg);
	/* token wins over tokenFile (which is then never read). */
	assert_int_equal(k8s_kubeconfig_resolve(kc, "c-tokwins", &cfg, NULL), 0);
	assert_string_equal(cfg.token, "tok");
	assert_null(cfg.token_file);
	k8s_config_release(&cfg);
	k8s_kubeconfig_free(kc);
}

static void test_limits(void **state)
{
	(void)state;
	/* A 10 MB file is refused by size before parsing. */
	size_t big = 10u * 1024 * 1024;
	char *junk = malloc(big);
	memset(junk, '#', big);
	write_file(tmpdir, "big.yaml", junk, big);
	char path[300];
	snprintf(path, sizeof path, "%s/big.yaml", tmpdir);
	struct k8s_kubeconfig *kc = k8s_kubeconfig_new();
	struct cp_err err;
	assert_int_equal(k8s_kubeconfig_load_file(kc, path, &err), CP_E_TOO_BIG);
	assert_non_null(strstr(err.msg, "big.yaml"));
	assert_int_equal(k8s_kubeconfig_load_buffer(kc, junk, big, "x", &err), CP_E_TOO_BIG);
	free(junk);
	/* Directories are not kubeconfigs. */
	assert_int_equal(k8s_kubeconfig_load_file(kc, tmpdir, &err), CP_E_IO);
	/* A deep or alias-heavy extension is bounded, not expanded. */
	static const char bomb[] =
		"clusters:\n- name: c\n  cluster:\n    server: https://x\n    extensions:\n"
		"    - name: client.authentication.k8s.io/exec\n      extension:\n"
		"        a: &a [x, x, x, x, x, x, x, x, x, x]\n"
		"        b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
		"        c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
		"        d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
		"        e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n";
	assert_int_equal(k8s_kubeconfig_load_buffer(kc, bomb, strlen(bomb), "/b", &err), CP_E_PARSE);
	assert_non_null(strstr(err.msg, "too large or too deep"));
	k8s_kubeconfig_free(kc);
}

static void test_in_cluster(void **state)
{
	(void)state;
	char root[300];
	snprintf(root, sizeof root, "%s/pod", tmpdir);
	struct k8s_config cfg;
	struct cp_err err;
	unsetenv("POD_NAMESPACE");
	unsetenv("KUBERNETES_SERVICE_HOST");
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	assert_int_equal(k8s_config_in_cluster(root, &cfg, &err), CP_E_NOT_FOUND);
	assert_non_null(strstr(err.msg, "KUBERNETES_SERVICE_HOST"));
	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	assert_int_equal(k8s_config_in_cluster(root, &cfg, &err), CP_E_NOT_FOUND);
	assert_non_null(strstr(err.msg, "token"));
	write_file(root, K8S_SA_DIR "/token", "eyJhbGciOi.token\n", 17);
	assert_int_equal(k8s_config_in_cluster(root, &cfg, &err), CP_E_NOT_FOUND);
	assert_non_null(strstr(err.msg, "ca.crt"));
	write_file(root, K8S_SA_DIR "/ca.crt", "CA\n", 3);
	assert_int_equal(k8s_config_in_cluster(root, &cfg, &err), 0);
	assert_string_equal(cfg.server, "https://10.96.0.1:443");
	assert_string_equal(cfg.token, "eyJhbGciOi.token");
	assert_non_null(strstr(cfg.token_file, "/pod/var/run/secrets/kubernetes.io/serviceaccount/token"));
	assert_string_equal((char *)cfg.ca_pem, "CA\n");
	assert_string_equal(cfg.ns, "default");
	k8s_config_release(&cfg);

	write_file(root, K8S_SA_DIR "/namespace", "convo-sandbox\n", 14);
	setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
	assert_int_equal(k8s_config_in_cluster(root, &cfg, &err), 0);
	assert_string_equal(cfg.server, "https://[fd00:10:96::1]:443");
	assert_string_equal(cfg.ns, "convo-sandbox");
	k8s_config_release(&cfg);

	setenv("POD_NAMESPACE", "from-env", 1);
	assert_int_equal(k8s_config_in_cluster(root, &cfg, &err), 0);
	assert_string_equal(cfg.ns, "from-env");
	k8s_config_release(&cfg);

	setenv("KUBERNETES_SERVICE_PORT", "44x", 1);
	assert_int_equal(k8s_config_in_cluster(root, &cfg, &err), CP_E_INVALID_REQUEST);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	setenv("KUBERNETES_SERVICE_HOST", "evil/host", 1);
	assert_int_equal(k8s_config_in_cluster(root, &cfg, &err), CP_E_INVALID_REQUEST);
	write_file(root, K8S_SA_DIR "/token", " \n", 2);
	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	assert_int_equal(k8s_config_in_cluster(root, &cfg, &err), CP_E_AUTH);
	unsetenv("KUBERNETES_SERVICE_HOST");
	unsetenv("KUBERNETES_SERVICE_PORT");
	unsetenv("POD_NAMESPACE");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kind),
		cmocka_unit_test(test_gke),
		cmocka_unit_test(test_features),
		cmocka_unit_test(test_merge),
		cmocka_unit_test(test_broken_yaml),
		cmocka_unit_test(test_resolve_errors),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_in_cluster),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
