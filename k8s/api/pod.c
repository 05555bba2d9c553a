#include "k8s/api/pod.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fileio.h"
#include "base/hex.h"
#include "k8s/api/yamljson.h"

#define TEMPLATE_MAX_BYTES (1 << 20)

static int hash_hex(const char *a, const char *b, char *out, size_t hexlen,
                    struct cp_err *err)
{
	unsigned char md[32];
	unsigned int n = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) &&
	         EVP_DigestUpdate(ctx, a, strlen(a) + 1) &&
	         EVP_DigestUpdate(ctx, b, strlen(b)) && EVP_DigestFinal_ex(ctx, md, &n);
	EVP_MD_CTX_free(ctx);
	if (!ok)
		return cp_err_set(err, CP_E_INTERNAL, "sha256 failed");
	cp_hex_encode(md, hexlen / 2, out);
	return 0;
}

int k8s_pod_name(const char *ns, const char *key, char out[K8S_POD_NAME_MAX],
                 struct cp_err *err)
{
	char hex[25];
	int rc = hash_hex(ns, key, hex, 24, err);
	if (rc)
		return rc;
	snprintf(out, K8S_POD_NAME_MAX, "codepod-%s", hex);
	return 0;
}

int k8s_conversation_label(const char *ns, const char *key, char out[41],
                           struct cp_err *err)
{
	return hash_hex(ns, key, out, 40, err);
}

static const char default_template[] =
	"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{},\"spec\":{"
	"\"restartPolicy\":\"Never\",\"terminationGracePeriodSeconds\":5,"
	"\"activeDeadlineSeconds\":86400,\"automountServiceAccountToken\":false,"
	"\"enableServiceLinks\":false,"
	"\"securityContext\":{\"runAsNonRoot\":true,\"runAsUser\":1000,\"runAsGroup\":1000,"
	"\"fsGroup\":1000,\"seccompProfile\":{\"type\":\"RuntimeDefault\"}},"
	"\"containers\":[{\"name\":\"node\",\"image\":\"docker.io/library/node:22-bookworm-slim\","
	"\"command\":[\"node\",\"-e\",\"setInterval(() => {}, 1 << 30)\"],"
	"\"workingDir\":\"/workspace\","
	"\"env\":[{\"name\":\"HOME\",\"value\":\"/workspace\"},{\"name\":\"TMPDIR\",\"value\":\"/tmp\"}],"
	"\"resources\":{\"requests\":{\"cpu\":\"100m\",\"memory\":\"256Mi\"},"
	"\"limits\":{\"cpu\":\"1\",\"memory\":\"1Gi\",\"ephemeral-storage\":\"3Gi\"}},"
	"\"securityContext\":{\"allowPrivilegeEscalation\":false,\"readOnlyRootFilesystem\":true,"
	"\"runAsNonRoot\":true,\"capabilities\":{\"drop\":[\"ALL\"]},"
	"\"seccompProfile\":{\"type\":\"RuntimeDefault\"}},"
	"\"volumeMounts\":[{\"name\":\"workspace\",\"mountPath\":\"/workspace\"},"
	"{\"name\":\"tmp\",\"mountPath\":\"/tmp\"}]}],"
	"\"volumes\":[{\"name\":\"workspace\",\"emptyDir\":{\"sizeLimit\":\"2Gi\"}},"
	"{\"name\":\"tmp\",\"emptyDir\":{\"medium\":\"Memory\",\"sizeLimit\":\"64Mi\"}}]}}";

json_t *k8s_template_default(void)
{
	return json_loads(default_template, 0, NULL);
}

static int reserved_label(const char *key)
{
	return !strcmp(key, K8S_LABEL_MANAGED_BY) || !strncmp(key, "codepod.dev/", 12);
}

int k8s_template_check(const json_t *tmpl, const char *what, struct cp_err *err)
{
	if (!json_is_object(tmpl))
		return cp_err_set(err, CP_E_INVALID_REQUEST, "%s: the template is not an object", what);
	const char *kind = json_string_value(json_object_get(tmpl, "kind"));
	if (kind && strcmp(kind, "Pod"))
		return cp_err_set(err, CP_E_INVALID_REQUEST, "%s: kind is %s, not Pod", what, kind);
	const json_t *meta = json_object_get(tmpl, "metadata");
	const char *key;
	const json_t *v;
	json_object_foreach((json_t *)json_object_get(meta, "labels"), key, v) {
		if (reserved_label(key))
			return cp_err_set(err, CP_E_INVALID_REQUEST,
			                  "%s: label %s is codepod's own; remove it from the template",
			                  what, key);
	}
	if (json_object_get(meta, "name") || json_object_get(meta, "generateName"))
		return cp_err_set(err, CP_E_INVALID_REQUEST,
		                  "%s: metadata.name is chosen by codepod; remove it", what);
	const json_t *cs = json_object_get(json_object_get(tmpl, "spec"), "containers");
	if (!json_is_array(cs) || json_array_size(cs) == 0)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "%s: spec.containers is empty", what);
	size_t i;
	json_array_foreach(cs, i, v) {
		const char *name = json_string_value(json_object_get(v, "name"));
		if (name && !strcmp(name, K8S_CONTAINER))
			return 0;
	}
	return cp_err_set(err, CP_E_INVALID_REQUEST,
	                  "%s: no container is named \"%s\" (codepod runs node in it)",
	                  what, K8S_CONTAINER);
}

json_t *k8s_template_load(const char *path, struct cp_err *err)
{
	struct cp_err ferr;
	size_t n = 0;
	char *buf = cp_read_file(path, TEMPLATE_MAX_BYTES, &n, &ferr);
	if (!buf) {
		if (ferr.code == CP_E_TOO_BIG)
			cp_err_set(err, CP_E_TOO_BIG, "pod template %s is over %d bytes", path,
			           TEMPLATE_MAX_BYTES);
		else /* a missing template is an I/O error like any other here */
			cp_err_set(err, ferr.code == CP_E_NOMEM ? CP_E_NOMEM : CP_E_IO, "pod template %s",
			           ferr.msg);
		return NULL;
	}
	char what[300];
	snprintf(what, sizeof what, "pod template %s", path);
	json_t *t = k8s_yaml_to_json(buf, n, what, err);
	free(buf);
	if (t && k8s_template_check(t, what, err)) {
		json_decref(t);
		return NULL;
	}
	return t;
}

/* The template as every pod made from it renders it, less what codepod sets
 * on each pod: apiVersion and kind as rendering sets them; no name or
 * namespace; none of codepod's labels (refused in a template, set on every
 * pod) nor its per-pod annotations; an empty labels or annotations object
 * as none. A pod made from the template (its status aside) comes back to
 * the same. For a template that already says apiVersion v1 and kind Pod,
 * which the built-in one and the chart's do, this is the template as it
 * was hashed before pods of other templates were kept: the label of a pod
 * made with an unchanged template stays the same across that upgrade, so
 * replicas of the release before, which still replace pods of another
 * template, leave them alone. */
static json_t *canonical_pod(const json_t *tmpl)
{
	json_t *pod = json_deep_copy(tmpl);
	if (!pod)
		return NULL;
	json_object_set_new(pod, "apiVersion", json_string("v1"));
	json_object_set_new(pod, "kind", json_string("Pod"));
	json_t *meta = json_object_get(pod, "metadata");
	json_object_del(meta, "name");
	json_object_del(meta, "generateName");
	json_object_del(meta, "namespace");
	json_t *labels = json_object_get(meta, "labels");
	json_object_del(labels, K8S_LABEL_MANAGED_BY);
	json_object_del(labels, K8S_LABEL_CONVERSATION);
	json_object_del(labels, K8S_LABEL_WARM);
	json_object_del(labels, K8S_LABEL_TEMPLATE);
	if (json_is_object(labels) && json_object_size(labels) == 0)
		json_object_del(meta, "labels");
	json_t *annots = json_object_get(meta, "annotations");
	json_object_del(annots, K8S_ANNOT_LAST_USED);
	json_object_del(annots, K8S_ANNOT_IN_USE_UNTIL);
	if (json_is_object(annots) && json_object_size(annots) == 0)
		json_object_del(meta, "annotations");
	return pod;
}

int k8s_template_hash(const json_t *tmpl, char out[17], struct cp_err *err)
{
	json_t *pod = canonical_pod(tmpl);
	char *text = pod ? json_dumps(pod, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(pod);
	if (!text)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	int rc = hash_hex("codepod-template-v1", text, out, 16, err);
	free(text);
	return rc;
}

const char *k8s_pod_template(const json_t *pod)
{
	return json_string_value(json_object_get(
		json_object_get(json_object_get(pod, "metadata"), "labels"), K8S_LABEL_TEMPLATE));
}

static json_t *object_at(json_t *parent, const char *key)
{
	json_t *o = json_object_get(parent, key);
	if (!json_is_object(o)) {
		o = json_object();
		json_object_set_new(parent, key, o);
	}
	return o;
}

json_t *k8s_pod_from_template(const json_t *tmpl, const char *name, const char *ns,
                              const char *conversation_label, const char *template_hash,
                              const char *last_used)
{
	json_t *pod = json_deep_copy(tmpl);
	if (!pod)
		return NULL;
	json_object_set_new(pod, "apiVersion", json_string("v1"));
	json_object_set_new(pod, "kind", json_string("Pod"));
	json_t *meta = object_at(pod, "metadata");
	json_object_set_new(meta, "name", json_string(name));
	json_object_set_new(meta, "namespace", json_string(ns));
	json_t *labels = object_at(meta, "labels");
	json_object_set_new(labels, K8S_LABEL_MANAGED_BY, json_string("codepod"));
	json_object_set_new(labels, K8S_LABEL_TEMPLATE, json_string(template_hash));
	if (conversation_label)
		json_object_set_new(labels, K8S_LABEL_CONVERSATION, json_string(conversation_label));
	else
		json_object_set_new(labels, K8S_LABEL_WARM, json_string("true"));
	json_object_set_new(object_at(meta, "annotations"), K8S_ANNOT_LAST_USED,
	                    json_string(last_used));
	return pod;
}

/* ---- reading a pod's status ---- */

static const json_t *condition(const json_t *status, const char *type)
{
	size_t i;
	const json_t *c;
	json_array_foreach(json_object_get(status, "conditions"), i, c) {
		const char *t = json_string_value(json_object_get(c, "type"));
		if (t && !strcmp(t, type))
			return c;
	}
	return NULL;
}

static const json_t *container_status(const json_t *status)
{
	size_t i;
	const json_t *c;
	json_array_foreach(json_object_get(status, "containerStatuses"), i, c) {
		const char *n = json_string_value(json_object_get(c, "name"));
		if (n && !strcmp(n, K8S_CONTAINER))
			return c;
	}
	return NULL;
}

static int fail_fast(const char *reason)
{
	static const char *const reasons[] = {
		"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError",
		"CreateContainerError", "RunContainerError", "CrashLoopBackOff",
	};
	for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
		if (!strcmp(reason, reasons[i]))
			return 1;
	return 0;
}

static void set(struct k8s_pod_state *out, enum k8s_pod_verdict v, const char *reason,
                const char *message)
{
	out->verdict = v;
	out->reason = reason;
	out->message = message;
}

void k8s_pod_classify(const json_t *pod, struct k8s_pod_state *out)
{
	const json_t *meta = json_object_get(pod, "metadata");
	const json_t *status = json_object_get(pod, "status");
	const char *phase = json_string_value(json_object_get(status, "phase"));
	if (json_object_get(meta, "deletionTimestamp"))
		return set(out, K8S_POD_REPLACE, "Terminating", NULL);
	if (phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed")))
		return set(out, K8S_POD_REPLACE, phase,
		           json_string_value(json_object_get(status, "reason")));
	const json_t *sched = condition(status, "PodScheduled");
	const char *sr = json_string_value(json_object_get(sched, "reason"));
	if (sr && !strcmp(sr, "Unschedulable"))
		return set(out, K8S_POD_UNAVAILABLE, "Unschedulable",
		           json_string_value(json_object_get(sched, "message")));
	const json_t *cs = container_status(status);
	const json_t *state = json_object_get(cs, "state");
	const json_t *waiting = json_object_get(state, "waiting");
	const char *wr = json_string_value(json_object_get(waiting, "reason"));
	if (wr && fail_fast(wr))
		return set(out, K8S_POD_UNAVAILABLE, wr,
		           json_string_value(json_object_get(waiting, "message")));
	const json_t *ready = condition(status, "Ready");
	const char *rs = json_string_value(json_object_get(ready, "status"));
	if (phase && !strcmp(phase, "Running") && json_object_get(state, "running") &&
	    rs && !strcmp(rs, "True"))
		return set(out, K8S_POD_READY, "Ready", NULL);
	return set(out, K8S_POD_WAITING, wr ? wr : (phase ? phase : "Pending"), NULL);
}

/* ---- an OOM kill, from the container status ---- */

static long long rfc3339(const char *s)
{
	struct tm tm;
	memset(&tm, 0, sizeof tm);
	const char *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
	return end ? (long long)timegm(&tm) : -1;
}

static const json_t *named_container(const json_t *list)
{
	size_t i;
	const json_t *c;
	json_array_foreach(list, i, c) {
		const char *n = json_string_value(json_object_get(c, "name"));
		if (n && !strcmp(n, K8S_CONTAINER))
			return c;
	}
	return NULL;
}

static const char *terminated_reason(const json_t *state)
{
	return json_string_value(json_object_get(json_object_get(state, "terminated"), "reason"));
}

int k8s_pod_oom_killed(const json_t *pod, long long since, const char **limit)
{
	const json_t *cs = named_container(json_object_get(json_object_get(pod, "status"),
	                                                   "containerStatuses"));
	const char *now = terminated_reason(json_object_get(cs, "state"));
	const json_t *last = json_object_get(cs, "lastState");
	const char *before = terminated_reason(last);
	int verdict = -1;
	if (now)
		verdict = !strcmp(now, "OOMKilled");
	else if (before && !strcmp(before, "OOMKilled")) {
		long long at = rfc3339(json_string_value(
			json_object_get(json_object_get(last, "terminated"), "finishedAt")));
		if (at >= 0 && at + K8S_POD_OOM_SKEW_S >= since)
			verdict = 1;
	}
	/* A pod being deleted has its containers killed: that SIGKILL was no OOM kill. */
	if (verdict == -1 && json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp"))
		verdict = 0;
	if (verdict == 1 && limit)
		*limit = k8s_pod_memory_limit(pod);
	return verdict;
}

const char *k8s_pod_memory_limit(const json_t *pod)
{
	const json_t *spec = named_container(json_object_get(json_object_get(pod, "spec"),
	                                                     "containers"));
	return json_string_value(json_object_get(
		json_object_get(json_object_get(spec, "resources"), "limits"), "memory"));
}

/* ---- the workspace's limits ---- */

int k8s_quantity_bytes(const char *q, uint64_t *out)
{
	static const struct {
		const char *suffix;
		double mult;
	} units[] = {
		{ "Ki", 1024.0 }, { "Mi", 1048576.0 }, { "Gi", 1073741824.0 },
		{ "Ti", 1099511627776.0 }, { "Pi", 1125899906842624.0 }, { "Ei", 1152921504606846976.0 },
		{ "k", 1e3 }, { "M", 1e6 }, { "G", 1e9 }, { "T", 1e12 }, { "P", 1e15 }, { "E", 1e18 },
		{ "m", 1e-3 }, { "", 1.0 },
	};
	if (!q || !*q)
		return -1;
	char *end = NULL;
	double v = strtod(q, &end);
	if (end == q || v < 0 || v != v)
		return -1;
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
		if (strcmp(end, units[i].suffix) != 0)
			continue;
		double b = v * units[i].mult;
		if (b >= 9.2e18)
			return -1;
		*out = (uint64_t)b;
		return 0;
	}
	return -1;
}

uint64_t k8s_template_workspace_limit(const json_t *tmpl)
{
	const json_t *spec = json_object_get(tmpl, "spec");
	uint64_t best = 0, b;
	size_t i;
	const json_t *v;
	json_array_foreach(json_object_get(spec, "volumes"), i, v) {
		const char *n = json_string_value(json_object_get(v, "name"));
		const char *q = json_string_value(
			json_object_get(json_object_get(v, "emptyDir"), "sizeLimit"));
		if (n && !strcmp(n, "workspace") && k8s_quantity_bytes(q, &b) == 0 && b)
			best = b;
	}
	const json_t *c = named_container(json_object_get(spec, "containers"));
	const char *q = json_string_value(json_object_get(
		json_object_get(json_object_get(c, "resources"), "limits"), "ephemeral-storage"));
	if (k8s_quantity_bytes(q, &b) == 0 && b && (!best || b < best))
		best = b;
	return best;
}
