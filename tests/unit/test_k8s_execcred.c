/* test_k8s_execcred.c - k8s/api/execcred.c and k8s/api/b64.c on the ExecCredential
 * fixtures and on broken plugin output. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "k8s/api/b64.h"
#include "k8s/api/execcred.h"
#include "test_k8s_fixture.h"

static void assert_json_equals_fixture(const char *got, const char *file)
{
	char path[256];
	snprintf(path, sizeof path, FIXTURE_DIR "%s", file);
	json_t *want = json_load_file(path, 0, NULL);
	json_t *have = json_loads(got, 0, NULL);
	assert_non_null(want);
	assert_non_null(have);
	if (!json_equal(want, have)) {
		char *w = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS);
		fprintf(stderr, "want %s\ngot  %s\n", w, got);
		free(w);
		fail();
	}
	json_decref(want);
	json_decref(have);
}

static void test_input_v1(void **state)
{
	(void)state;
	struct k8s_exec_plugin p = {0};
	p.api_version = (char *)K8S_EXECCRED_V1;
	p.command = (char *)"plugin";
	p.interactive_mode = K8S_EXEC_INTERACTIVE_NEVER;
	char *js = NULL;
	assert_int_equal(k8s_execcred_input(&p, NULL, 0, &js, NULL), 0);
	assert_json_equals_fixture(js, "execcredential-input-v1.json");
	free(js);
	/* Always needs a terminal; a daemon has none. */
	p.interactive_mode = K8S_EXEC_INTERACTIVE_ALWAYS;
	struct cp_err err;
	assert_int_equal(k8s_execcred_input(&p, NULL, 0, &js, &err), CP_E_INVALID_REQUEST);
	assert_null(js);
	p.interactive_mode = K8S_EXEC_INTERACTIVE_IF_AVAILABLE;
	p.api_version = (char *)"client.authentication.k8s.io/v1alpha1";
	assert_int_equal(k8s_execcred_input(&p, NULL, 0, &js, &err), CP_E_INVALID_REQUEST);
	assert_non_null(strstr(err.msg, "v1alpha1"));
	p.api_version = (char *)K8S_EXECCRED_V1BETA1;
	p.provide_cluster_info = 1;
	assert_int_equal(k8s_execcred_input(&p, NULL, 0, &js, &err), CP_E_INVALID_REQUEST);
	assert_int_equal(k8s_execcred_input(&p, &(struct k8s_exec_cluster){.server = "https://x"}, 1, &js, &err), 0);
	assert_non_null(strstr(js, "\"interactive\":true"));
	assert_non_null(strstr(js, K8S_EXECCRED_V1BETA1));
	free(js);
}

static void test_input_cluster_info(void **state)
{
	(void)state;
	static const char ca_b64[] = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tClBMQUNFSE9MREVSLUNBLU5PVC1BLVJFQUwtQ0VSVAotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg==";
	unsigned char *ca = NULL;
	size_t ca_len = 0;
	assert_int_equal(k8s_b64_decode(ca_b64, strlen(ca_b64), &ca, &ca_len, NULL), 0);
	assert_true(strncmp((char *)ca, "-----BEGIN CERTIFICATE-----\n", 28) == 0);
	json_t *config = json_pack("{s:s}", "audience", "example-audience");
	struct k8s_exec_cluster c = {
		.server = "https://34.118.0.10", .ca_data = ca, .ca_len = ca_len, .config = config,
	};
	struct k8s_exec_plugin p = {.api_version = (char *)K8S_EXECCRED_V1, .command = (char *)"x",
	                            .interactive_mode = K8S_EXEC_INTERACTIVE_NEVER,
	                            .provide_cluster_info = 1};
	char *js = NULL;
	assert_int_equal(k8s_execcred_input(&p, &c, 0, &js, NULL), 0);
	assert_json_equals_fixture(js, "execcredential-input-v1-clusterinfo.json");
	free(js);
	/* Optional fields appear only when set. */
	c.tls_server_name = "kubernetes.default.svc";
	c.insecure_skip_tls_verify = 1;
	c.proxy_url = "http://proxy:3128";
	c.disable_compression = 1;
	assert_int_equal(k8s_execcred_input(&p, &c, 0, &js, NULL), 0);
	json_t *j = json_loads(js, 0, NULL);
	json_t *cl = json_object_get(json_object_get(j, "spec"), "cluster");
	assert_string_equal(json_string_value(json_object_get(cl, "tls-server-name")), "kubernetes.default.svc");
	assert_true(json_is_true(json_object_get(cl, "insecure-skip-tls-verify")));
	assert_string_equal(json_string_value(json_object_get(cl, "proxy-url")), "http://proxy:3128");
	assert_true(json_is_true(json_object_get(cl, "disable-compression")));
	json_decref(j);
	free(js);
	json_decref(config);
	free(ca);
}

static void test_output_fixtures(void **state)
{
	(void)state;
	size_t len = 0;
	char *b = fixture_read("execcredential-output-v1-token.json", &len);
	struct k8s_exec_credential c;
	assert_int_equal(k8s_execcred_parse(K8S_EXECCRED_V1, b, len, &c, NULL), 0);
	assert_string_equal(c.token, "my-bearer-token");
	assert_null(c.client_cert);
	assert_int_equal(c.has_expiry, 1);
	assert_int_equal(c.expiry, 1741948013); /* 2025-03-14T10:26:53Z */
	k8s_exec_credential_release(&c);
	/* The output must echo the configured apiVersion. */
	struct cp_err err;
	assert_int_equal(k8s_execcred_parse(K8S_EXECCRED_V1BETA1, b, len, &c, &err), CP_E_AUTH);
	assert_non_null(strstr(err.msg, "does not match"));
	free(b);

	b = fixture_read("execcredential-output-v1-cert.json", &len);
	assert_int_equal(k8s_execcred_parse(K8S_EXECCRED_V1, b, len, &c, NULL), 0);
	assert_null(c.token);
	assert_string_equal(c.client_cert, "-----BEGIN CERTIFICATE-----\nPLACEHOLDER\n-----END CERTIFICATE-----\n");
	assert_string_equal(c.client_key, "-----BEGIN RSA PRIVATE KEY-----\nPLACEHOLDER\n-----END RSA PRIVATE KEY-----\n");
	assert_int_equal(c.has_expiry, 0);
	k8s_exec_credential_release(&c);
	free(b);

	b = fixture_read("execcredential-output-gke-v1beta1.json", &len);
	assert_int_equal(k8s_execcred_parse(K8S_EXECCRED_V1BETA1, b, len, &c, NULL), 0);
	assert_string_equal(c.token, "ya29.PLACEHOLDER-ACCESS-TOKEN");
	assert_int_equal(c.expiry, 1741948011);
	k8s_exec_credential_release(&c);
	free(b);
}

static void test_output_broken(void **state)
{
	(void)state;
	static const struct { const char *json; int rc; const char *msg; } cases[] = {
		{"", CP_E_PARSE, "not a JSON object"},
		{"[]", CP_E_PARSE, "not a JSON object"},
		{"{\"kind\":\"Pod\",\"apiVersion\":\"client.authentication.k8s.io/v1\",\"status\":{\"token\":\"t\"}}", CP_E_AUTH, "kind"},
		{"{\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t\"}}", CP_E_AUTH, "apiVersion"},
		{"{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1\"}", CP_E_AUTH, "no status"},
		{"{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1\",\"status\":{}}", CP_E_AUTH, "neither"},
		{"{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1\",\"status\":{\"token\":\"\"}}", CP_E_AUTH, "neither"},
		{"{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1\",\"status\":{\"clientKeyData\":\"k\"}}", CP_E_AUTH, "both"},
		{"{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1\",\"status\":{\"token\":\"t\",\"expirationTimestamp\":\"tomorrow\"}}", CP_E_AUTH, "RFC 3339"},
		{"{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1\",\"status\":{\"token\":\"t\",\"expirationTimestamp\":5}}", CP_E_AUTH, "RFC 3339"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct k8s_exec_credential c;
		struct cp_err err;
		assert_int_equal(k8s_execcred_parse(K8S_EXECCRED_V1, cases[i].json, strlen(cases[i].json), &c, &err), cases[i].rc);
		assert_non_null(strstr(err.msg, cases[i].msg));
		assert_null(c.token);
		assert_null(c.client_key);
	}
	char *big = malloc(K8S_EXECCRED_MAX_OUTPUT + 1);
	memset(big, ' ', K8S_EXECCRED_MAX_OUTPUT + 1);
	struct k8s_exec_credential c;
	assert_int_equal(k8s_execcred_parse(K8S_EXECCRED_V1, big, K8S_EXECCRED_MAX_OUTPUT + 1, &c, NULL), CP_E_TOO_BIG);
	free(big);
}

static void test_rfc3339(void **state)
{
	(void)state;
	time_t t = 0;
	assert_int_equal(k8s_rfc3339_parse("2018-03-05T17:30:20-08:00", &t), 0);
	assert_int_equal(t, 1520299820);
	assert_int_equal(k8s_rfc3339_parse("2018-03-06T01:30:20Z", &t), 0);
	assert_int_equal(t, 1520299820);
	assert_int_equal(k8s_rfc3339_parse("2018-03-06T01:30:20.123456789Z", &t), 0);
	assert_int_equal(t, 1520299820);
	assert_int_equal(k8s_rfc3339_parse("2018-03-06T03:00:20+01:30", &t), 0);
	assert_int_equal(t, 1520299820);
	static const char *bad[] = {"", "2018-03-06", "2018-03-06T01:30:20", "2018-13-06T01:30:20Z",
	                            "2018-03-06T01:30:20Zjunk", "2018-03-06T01:30:20.Z",
	                            "2018-03-06T01:30:20+0100", "18-03-06T01:30:20Z"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		assert_int_equal(k8s_rfc3339_parse(bad[i], &t), CP_E_PARSE);
}

static void test_b64(void **state)
{
	(void)state;
	static const struct { const char *in, *out; } ok[] = {
		{"", ""}, {"Zg==", "f"}, {"Zm8=", "fo"}, {"Zm9v", "foo"}, {"Zm9v\nYmFy\r\n", "foobar"},
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		unsigned char *o = NULL;
		size_t n = 0;
		assert_int_equal(k8s_b64_decode(ok[i].in, strlen(ok[i].in), &o, &n, NULL), 0);
		assert_int_equal(n, strlen(ok[i].out));
		assert_memory_equal(o, ok[i].out, n);
		char *e = NULL;
		assert_int_equal(k8s_b64_encode(o, n, &e, NULL, NULL), 0);
		free(o);
		o = NULL;
		k8s_b64_decode(e, strlen(e), &o, &n, NULL);
		assert_memory_equal(o, ok[i].out, n);
		free(e);
		free(o);
	}
	static const char *bad[] = {"Zg", "Zg=", "Z===", "Zh==", "Zm9v!", "Zg==Zg==", "Zm=v", "====", "Zm9-"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		unsigned char *o = (unsigned char *)"x";
		size_t n = 9;
		assert_int_equal(k8s_b64_decode(bad[i], strlen(bad[i]), &o, &n, NULL), CP_E_PARSE);
		assert_null(o);
	}
}

static void test_plugin_dup(void **state)
{
	(void)state;
	char *args[] = {(char *)"a", (char *)"b"};
	struct k8s_exec_env env[] = {{(char *)"K", (char *)"V"}};
	struct k8s_exec_plugin p = {.api_version = (char *)K8S_EXECCRED_V1, .command = (char *)"c",
	                            .args = args, .n_args = 2, .env = env, .n_env = 1,
	                            .provide_cluster_info = 1};
	struct k8s_exec_plugin *d = k8s_exec_plugin_dup(&p);
	assert_non_null(d);
	assert_string_equal(d->args[1], "b");
	assert_string_equal(d->env[0].value, "V");
	assert_null(d->install_hint);
	assert_int_equal(d->provide_cluster_info, 1);
	k8s_exec_plugin_free(d);
	k8s_exec_plugin_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_input_v1),
		cmocka_unit_test(test_input_cluster_info),
		cmocka_unit_test(test_output_fixtures),
		cmocka_unit_test(test_output_broken),
		cmocka_unit_test(test_rfc3339),
		cmocka_unit_test(test_b64),
		cmocka_unit_test(test_plugin_dup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
