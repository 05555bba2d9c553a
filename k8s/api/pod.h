/*
 * pod.h - what codepod knows about its sandbox pods, without any I/O:
 * the conversation's pod name and labels (from a hash, never the raw key),
 * the pod template (a file or the hardened built-in one) and its checks, and
 * the reading of a pod's status into one decision (docs/contract.md §6,
 * docs/kubernetes.md §2.4).
 *
 * Ownership: k8s_template_* return new references (json_decref). Strings in
 * struct k8s_pod_state point into the pod JSON given to k8s_pod_classify and
 * are borrowed for as long as the caller keeps that JSON.
 */
#ifndef K8S_POD_H
#define K8S_POD_H

#include <jansson.h>
#include <stdint.h>

#include "base/err.h"

#define K8S_LABEL_MANAGED_BY "app.kubernetes.io/managed-by"
#define K8S_LABEL_CONVERSATION "codepod.dev/conversation"
#define K8S_LABEL_TEMPLATE "codepod.dev/template"
#define K8S_LABEL_WARM "codepod.dev/warm"
#define K8S_ANNOT_LAST_USED "codepod.dev/last-used"
/* Written while executions run: no replica reaps the pod before this time,
 * whatever its own idle TTL. */
#define K8S_ANNOT_IN_USE_UNTIL "codepod.dev/in-use-until"
#define K8S_CONTAINER "node" /* the container codepod execs into */

/* "codepod-" + 24 hex of SHA-256(namespace NUL key): a DNS-1123 label. */
#define K8S_POD_NAME_MAX 40
int k8s_pod_name(const char *ns, const char *key, char out[K8S_POD_NAME_MAX],
                 struct cp_err *err);

/* The label value naming a conversation: 40 hex of the same hash. */
int k8s_conversation_label(const char *ns, const char *key, char out[41],
                           struct cp_err *err);

/* The hardened default template of docs/contract.md §7 (new reference):
 * Node 22 image, non-root, no privilege escalation, all capabilities
 * dropped, seccomp RuntimeDefault, read-only root, emptyDir /workspace and
 * /tmp, no service-account token, requests and limits, activeDeadlineSeconds.
 * The container runs only `node` (the image needs nothing else). */
json_t *k8s_template_default(void);

/* Reads a template file (JSON or YAML) and checks it: a pod with a container
 * named "node" (or exactly one container, which is then used), no codepod
 * label set by hand. Errors name the file and the problem. */
json_t *k8s_template_load(const char *path, struct cp_err *err);
int k8s_template_check(const json_t *tmpl, const char *what, struct cp_err *err);

/* 16 hex of SHA-256 over the canonical pod the template renders (keys
 * sorted), less what codepod sets on each pod: its name and namespace,
 * codepod's labels (the conversation's, warm, the template's, managed-by)
 * and the last-used and in-use annotations. Every pod carries it in
 * K8S_LABEL_TEMPLATE: which template made it. Two replicas with the same
 * template agree on it whatever the file's format or key order. It never
 * decides whether a pod is used (k8s_pod_classify ignores it): a replica
 * serves a conversation's pod of another template as it is, and only
 * claims warm pods of its own. */
int k8s_template_hash(const json_t *tmpl, char out[17], struct cp_err *err);

/* The template hash a pod carries (borrowed from @pod), or NULL. */
const char *k8s_pod_template(const json_t *pod);

/*
 * k8s_pod_from_template - the pod to create (new reference).
 * @conversation_label: NULL for a warm-pool pod (labelled warm instead).
 */
json_t *k8s_pod_from_template(const json_t *tmpl, const char *name, const char *ns,
                              const char *conversation_label, const char *template_hash,
                              const char *last_used);

enum k8s_pod_verdict {
	K8S_POD_READY,       /* exec can start */
	K8S_POD_WAITING,     /* Pending, ContainerCreating, ...: keep watching */
	K8S_POD_REPLACE,     /* terminating, Succeeded/Failed */
	K8S_POD_UNAVAILABLE  /* can never become ready: ImagePullBackOff, ... */
};

struct k8s_pod_state {
	enum k8s_pod_verdict verdict;
	const char *reason;  /* e.g. "ImagePullBackOff", "Terminating", "Failed" */
	const char *message; /* the kubelet's or scheduler's message, may be NULL */
};

/* Reads a pod (borrowed) into a verdict, from its state alone: the
 * template it was made from is no reason to replace it. */
void k8s_pod_classify(const json_t *pod, struct k8s_pod_state *out);

/* A cgroup OOM kill reaches an exec as any SIGKILL; the kubelet names it in
 * the container status. Was the container K8S_CONTAINER of @pod (borrowed)
 * OOM-killed: state terminated with reason OOMKilled, or lastState so and
 * finished no earlier than @since (seconds since the epoch, less
 * K8S_POD_OOM_SKEW_S for the node's clock)? 1: yes, and *limit is the
 * container's memory limit ("1Gi", borrowed from @pod) or NULL; 0: it ended
 * otherwise, or the pod is being deleted; -1: the status does not say (yet). */
#define K8S_POD_OOM_SKEW_S 30
int k8s_pod_oom_killed(const json_t *pod, long long since, const char **limit);

/* The memory limit of container K8S_CONTAINER in @pod's spec ("1Gi",
 * borrowed from @pod), or NULL when it has none. */
const char *k8s_pod_memory_limit(const json_t *pod);

/* A resource quantity ("2Gi", "1500M", "1e9", "512") in bytes: 0, or -1
 * when it is not one (or past 2^63). Fractions round down. */
int k8s_quantity_bytes(const char *q, uint64_t *out);

/* What the template lets the workspace hold before the kubelet evicts the
 * pod: the smaller of the "workspace" volume's emptyDir sizeLimit and the
 * container K8S_CONTAINER's ephemeral-storage limit, in bytes; 0 when
 * neither is set. */
uint64_t k8s_template_workspace_limit(const json_t *tmpl);

#endif
