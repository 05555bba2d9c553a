/* Pod names, templates and the reading of pod status, on the fixtures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>
#include <unistd.h>

#include "k8s/api/pod.h"
#include "test_k8s_fixture.h"
#include "k8s/api/yamljson.h"

static json_t *fixture_json(const char *name)
{
	size_t len = 0;
	char *buf = fixture_read(name, &len);
	assert_non_null(buf);
	json_t *v = json_loadb(buf, len, 0, NULL);
	free(buf);
	assert_non_null(v);
	return v;
}

static void classify(const char *fixture, enum k8s_pod_verdict want, const char *reason)
{
	json_t *pod = fixture_json(fixture);
	struct k8s_pod_state st;
	k8s_pod_classify(pod, &st);
	assert_int_equal(st.verdict, want);
	assert_string_equal(st.reason, reason);
	json_decref(pod);
}

static void test_classify_fixtures(void **state)
{
	(void)state;
	classify("pod-running-ready.json", K8S_POD_READY, "Ready");
	classify("pod-pending-containercreating.json", K8S_POD_WAITING, "ContainerCreating");
	classify("pod-pending-imagepullbackoff.json", K8S_POD_UNAVAILABLE, "ImagePullBackOff");
	classify("pod-running-crashloopbackoff.json", K8S_POD_UNAVAILABLE, "CrashLoopBackOff");
	classify("pod-pending-unschedulable.json", K8S_POD_UNAVAILABLE, "Unschedulable");
	classify("pod-terminating.json", K8S_POD_REPLACE, "Terminating");
}

static void test_unavailable_carries_message(void **state)
{
	(void)state;
	json_t *pod = fixture_json("pod-pending-imagepullbackoff.json");
	struct k8s_pod_state st;
	k8s_pod_classify(pod, &st);
	assert_non_null(st.message);
	assert_non_null(strstr(st.message, "Back-off pulling image"));
	json_decref(pod);
}

/* A pod of another template is as usable as one of this replica's: only
 * its state decides. */
static void test_failed_and_template_of_another_replica(void **state)
{
	(void)state;
	json_t *pod = fixture_json("pod-running-ready.json");
	json_t *labels = json_object();
	json_object_set_new(labels, K8S_LABEL_TEMPLATE, json_string("0123456789abcdef"));
	json_object_set_new(json_object_get(pod, "metadata"), "labels", labels);
	struct k8s_pod_state st;
	k8s_pod_classify(pod, &st);
	assert_int_equal(st.verdict, K8S_POD_READY);
	assert_string_equal(k8s_pod_template(pod), "0123456789abcdef");
	json_object_set_new(json_object_get(pod, "status"), "phase", json_string("Failed"));
	k8s_pod_classify(pod, &st);
	assert_int_equal(st.verdict, K8S_POD_REPLACE);
	assert_string_equal(st.reason, "Failed");
	json_decref(pod);
}

static void test_names_are_hashes(void **state)
{
	(void)state;
	char a[K8S_POD_NAME_MAX], b[K8S_POD_NAME_MAX], c[K8S_POD_NAME_MAX];
	assert_int_equal(k8s_pod_name("default", "conv-42", a, NULL), 0);
	assert_int_equal(k8s_pod_name("default", "conv-42", b, NULL), 0);
	assert_int_equal(k8s_pod_name("other", "conv-42", c, NULL), 0);
	assert_string_equal(a, b);
	assert_string_not_equal(a, c);
	assert_int_equal(strlen(a), 8 + 24);
	assert_null(strstr(a, "conv"));
	for (const char *p = a; *p; p++)
		assert_true((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-');
	/* the namespace and key are separated: ("ab","c") differs from ("a","bc") */
	assert_int_equal(k8s_pod_name("ab", "c", a, NULL), 0);
	assert_int_equal(k8s_pod_name("a", "bc", b, NULL), 0);
	assert_string_not_equal(a, b);
}

static void test_default_template_is_hardened(void **state)
{
	(void)state;
	json_t *t = k8s_template_default();
	assert_non_null(t);
	assert_int_equal(k8s_template_check(t, "built-in", NULL), 0);
	json_t *spec = json_object_get(t, "spec");
	assert_true(json_is_false(json_object_get(spec, "automountServiceAccountToken")));
	assert_true(json_integer_value(json_object_get(spec, "activeDeadlineSeconds")) > 0);
	json_t *c = json_array_get(json_object_get(spec, "containers"), 0);
	json_t *sc = json_object_get(c, "securityContext");
	assert_true(json_is_false(json_object_get(sc, "allowPrivilegeEscalation")));
	assert_true(json_is_true(json_object_get(sc, "readOnlyRootFilesystem")));
	assert_string_equal(json_string_value(json_array_get(
		json_object_get(json_object_get(sc, "capabilities"), "drop"), 0)), "ALL");
	assert_non_null(json_object_get(json_object_get(c, "resources"), "limits"));
	json_decref(t);
}

static void test_pod_from_template(void **state)
{
	(void)state;
	json_t *t = k8s_template_default();
	char hash[17];
	assert_int_equal(k8s_template_hash(t, hash, NULL), 0);
	json_t *pod = k8s_pod_from_template(t, "codepod-x", "sandbox", "abc", hash, "2026-01-01T00:00:00Z");
	json_t *labels = json_object_get(json_object_get(pod, "metadata"), "labels");
	assert_string_equal(json_string_value(json_object_get(labels, K8S_LABEL_MANAGED_BY)), "codepod");
	assert_string_equal(json_string_value(json_object_get(labels, K8S_LABEL_CONVERSATION)), "abc");
	assert_string_equal(json_string_value(json_object_get(labels, K8S_LABEL_TEMPLATE)), hash);
	assert_string_equal(json_string_value(json_object_get(json_object_get(pod, "metadata"), "name")), "codepod-x");
	/* the template itself is not changed */
	assert_null(json_object_get(json_object_get(t, "metadata"), "labels"));
	json_decref(pod);
	pod = k8s_pod_from_template(t, "codepod-w", "sandbox", NULL, hash, "now");
	labels = json_object_get(json_object_get(pod, "metadata"), "labels");
	assert_string_equal(json_string_value(json_object_get(labels, K8S_LABEL_WARM)), "true");
	assert_null(json_object_get(labels, K8S_LABEL_CONVERSATION));
	json_decref(pod);
	json_decref(t);
}

/* The template hash is over the pod the template renders, less what
 * codepod sets per pod: the same for every pod of one template (a
 * conversation's, a warm one), whatever the template's key order or
 * defaulted fields; another image is another hash. The conversation's pod
 * name carries no template. */
static void test_template_hash_is_the_rendered_pod(void **state)
{
	(void)state;
	json_t *t = k8s_template_default();
	char h1[17], h2[17], h3[17];
	assert_int_equal(k8s_template_hash(t, h1, NULL), 0);
	/* the label pods of the built-in template carry: an upgrade that keeps
	 * the template is no template change (it changed with the workspace's
	 * sizeLimit 2Gi and ephemeral-storage 3Gi: 5f43392818b4da2e before) */
	assert_string_equal(h1, "f590126fa586fa0b");
	/* kind and apiVersion are what rendering sets anyway */
	json_t *bare = json_deep_copy(t);
	json_object_del(bare, "kind");
	json_object_del(bare, "apiVersion");
	assert_int_equal(k8s_template_hash(bare, h2, NULL), 0);
	assert_string_equal(h1, h2);
	/* the same keys in another order (a YAML file of the same pod) */
	char *text = json_dumps(t, JSON_COMPACT);
	json_t *again = json_loads(text, 0, NULL);
	free(text);
	assert_int_equal(k8s_template_hash(again, h2, NULL), 0);
	assert_string_equal(h1, h2);
	/* what codepod set on a rendered pod does not enter it */
	json_t *pod = k8s_pod_from_template(t, "codepod-x", "sandbox", "abc", h1, "2026-01-01T00:00:00Z");
	json_object_set_new(json_object_get(json_object_get(pod, "metadata"), "annotations"),
	                    K8S_ANNOT_IN_USE_UNTIL, json_string("2026-01-01T00:01:00Z"));
	json_object_del(pod, "status");
	assert_int_equal(k8s_template_hash(pod, h2, NULL), 0);
	assert_string_equal(h1, h2);
	json_decref(pod);
	pod = k8s_pod_from_template(t, "codepod-warm-1", "sandbox", NULL, h1, "now");
	json_object_del(pod, "status");
	assert_int_equal(k8s_template_hash(pod, h2, NULL), 0);
	assert_string_equal(h1, h2);
	/* another image is another template */
	json_t *c = json_array_get(json_object_get(json_object_get(bare, "spec"), "containers"), 0);
	json_object_set_new(c, "image", json_string("docker.io/library/node:22.1"));
	assert_int_equal(k8s_template_hash(bare, h3, NULL), 0);
	assert_string_not_equal(h1, h3);
	char name[K8S_POD_NAME_MAX];
	assert_int_equal(k8s_pod_name("sandbox", "conv", name, NULL), 0);
	assert_null(strstr(name, h1));
	json_decref(pod);
	json_decref(again);
	json_decref(bare);
	json_decref(t);
}

static void check_refused(const char *yaml, const char *needle)
{
	struct cp_err err;
	json_t *t = k8s_yaml_to_json(yaml, strlen(yaml), "t.yaml", &err);
	if (t) {
		assert_int_not_equal(k8s_template_check(t, "t.yaml", &err), 0);
		json_decref(t);
	}
	assert_non_null(strstr(err.msg, needle));
}

static void test_unusable_templates_refused(void **state)
{
	(void)state;
	check_refused("kind: Pod\nspec:\n  containers: []\n", "containers is empty");
	check_refused("spec:\n  containers:\n  - name: app\n    image: x\n", "no container is named");
	check_refused("metadata:\n  labels:\n    app.kubernetes.io/managed-by: me\n"
	              "spec:\n  containers:\n  - name: node\n", "codepod's own");
	check_refused("metadata:\n  name: fixed\nspec:\n  containers:\n  - name: node\n", "metadata.name");
	check_refused("kind: Deployment\n", "not Pod");
	check_refused("spec: [unclosed\n", "t.yaml");
	check_refused("a: &a [*a]\n", "t.yaml");
}

static void test_yaml_template_file(void **state)
{
	(void)state;
	char path[] = "/tmp/codepod-tmpl-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	const char *yaml = "apiVersion: v1\nkind: Pod\nspec:\n  runtimeClassName: gvisor\n"
	                   "  containers:\n  - name: node\n    image: node:22\n"
	                   "    resources:\n      limits:\n        cpu: 1\n        memory: 512Mi\n";
	assert_int_equal(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
	close(fd);
	struct cp_err err;
	json_t *t = k8s_template_load(path, &err);
	unlink(path);
	assert_non_null(t);
	json_t *spec = json_object_get(t, "spec");
	assert_string_equal(json_string_value(json_object_get(spec, "runtimeClassName")), "gvisor");
	json_t *lim = json_object_get(json_object_get(json_array_get(json_object_get(spec, "containers"), 0), "resources"), "limits");
	assert_int_equal(json_integer_value(json_object_get(lim, "cpu")), 1);
	assert_string_equal(json_string_value(json_object_get(lim, "memory")), "512Mi");
	json_decref(t);
	assert_null(k8s_template_load("/nonexistent/t.yaml", &err));
	assert_non_null(strstr(err.msg, "/nonexistent/t.yaml"));
}

/* The running fixture with the container "node" ended as given. */
static json_t *ended(const char *where, const char *reason, const char *finished)
{
	json_t *pod = fixture_json("pod-running-ready.json");
	json_t *cs = json_array_get(json_object_get(json_object_get(pod, "status"), "containerStatuses"), 0);
	json_object_set_new(cs, "name", json_string(K8S_CONTAINER));
	json_t *spec_c = json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0);
	json_object_set_new(spec_c, "name", json_string(K8S_CONTAINER));
	json_object_set_new(spec_c, "resources", json_pack("{s:{s:s}}", "limits", "memory", "1Gi"));
	if (where)
		json_object_set_new(cs, where, json_pack("{s:{s:i, s:s, s:s}}", "terminated", "exitCode", 137,
		                                         "reason", reason, "finishedAt", finished));
	return pod;
}

static void test_oom_killed_from_the_container_status(void **state)
{
	(void)state;
	const long long t = 1764500000; /* 2025-11-30T10:53:20Z */
	const char *limit = NULL;
	json_t *pod = ended("state", "OOMKilled", "2025-11-30T10:53:20Z");
	assert_int_equal(k8s_pod_oom_killed(pod, t, &limit), 1);
	assert_string_equal(limit, "1Gi");
	json_decref(pod);
	pod = ended("state", "Error", "2025-11-30T10:53:20Z");
	assert_int_equal(k8s_pod_oom_killed(pod, t, &limit), 0);
	json_decref(pod);
	/* restarted: lastState tells, if it ended after the exec began */
	pod = ended("lastState", "OOMKilled", "2025-11-30T10:53:21Z");
	assert_int_equal(k8s_pod_oom_killed(pod, t, NULL), 1);
	json_decref(pod);
	pod = ended("lastState", "OOMKilled", "2025-11-30T10:40:00Z");
	assert_int_equal(k8s_pod_oom_killed(pod, t, NULL), -1); /* an older OOM kill */
	json_decref(pod);
	pod = ended("lastState", "OOMKilled", "not a time");
	assert_int_equal(k8s_pod_oom_killed(pod, t, NULL), -1);
	json_decref(pod);
	pod = ended(NULL, NULL, NULL); /* still running: not yet known */
	assert_int_equal(k8s_pod_oom_killed(pod, t, NULL), -1);
	json_object_set_new(json_object_get(pod, "metadata"), "deletionTimestamp",
	                    json_string("2025-11-30T10:53:25Z"));
	assert_int_equal(k8s_pod_oom_killed(pod, t, NULL), 0); /* killed by the deletion */
	json_decref(pod);
	json_t *junk = json_pack("{s:[i]}", "status", 1);
	assert_int_equal(k8s_pod_oom_killed(junk, t, NULL), -1);
	json_decref(junk);
}

/* Resource quantities as the API server writes them. */
static void test_quantities(void **state)
{
	(void)state;
	uint64_t b = 0;
	assert_int_equal(k8s_quantity_bytes("2Gi", &b), 0);
	assert_true(b == 2ull << 30);
	assert_int_equal(k8s_quantity_bytes("1500M", &b), 0);
	assert_true(b == 1500000000ull);
	assert_int_equal(k8s_quantity_bytes("1e9", &b), 0);
	assert_true(b == 1000000000ull);
	assert_int_equal(k8s_quantity_bytes("512", &b), 0);
	assert_true(b == 512);
	assert_int_equal(k8s_quantity_bytes("1.5Ki", &b), 0);
	assert_true(b == 1536);
	assert_int_equal(k8s_quantity_bytes("2GiB", &b), -1);
	assert_int_equal(k8s_quantity_bytes("", &b), -1);
	assert_int_equal(k8s_quantity_bytes("-1Gi", &b), -1);
	assert_int_equal(k8s_quantity_bytes("16Ei", &b), -1);
	assert_int_equal(k8s_quantity_bytes(NULL, &b), -1);
}

/* The smaller of the workspace volume's sizeLimit and the container's
 * ephemeral-storage limit; the built-in template's are 2Gi and 3Gi. */
static void test_workspace_limit_of_a_template(void **state)
{
	(void)state;
	json_t *t = k8s_template_default();
	assert_true(k8s_template_workspace_limit(t) == 2ull << 30);
	json_t *c = json_array_get(json_object_get(json_object_get(t, "spec"), "containers"), 0);
	json_object_set_new(json_object_get(json_object_get(c, "resources"), "limits"),
	                    "ephemeral-storage", json_string("1Gi"));
	assert_true(k8s_template_workspace_limit(t) == 1ull << 30);
	json_object_del(json_object_get(json_object_get(c, "resources"), "limits"), "ephemeral-storage");
	json_t *v = json_array_get(json_object_get(json_object_get(t, "spec"), "volumes"), 0);
	json_object_del(json_object_get(v, "emptyDir"), "sizeLimit");
	assert_true(k8s_template_workspace_limit(t) == 0);
	json_decref(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_classify_fixtures),
		cmocka_unit_test(test_oom_killed_from_the_container_status),
		cmocka_unit_test(test_unavailable_carries_message),
		cmocka_unit_test(test_failed_and_template_of_another_replica),
		cmocka_unit_test(test_names_are_hashes),
		cmocka_unit_test(test_default_template_is_hardened),
		cmocka_unit_test(test_pod_from_template),
		cmocka_unit_test(test_template_hash_is_the_rendered_pod),
		cmocka_unit_test(test_unusable_templates_refused),
		cmocka_unit_test(test_yaml_template_file),
		cmocka_unit_test(test_quantities),
		cmocka_unit_test(test_workspace_limit_of_a_template),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
