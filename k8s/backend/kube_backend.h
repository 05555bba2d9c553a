/*
 * kube_backend.h - the Kubernetes backend (docs/contract.md §6): each
 * conversation has one sandbox pod, named and labelled from a hash of the
 * namespace and the scope key; each execution is a fresh `node` in it over
 * the exec WebSocket. Pods are found by label, claimed from a warm pool, or
 * created from the pod template, then waited for through a watch. A pod that
 * can never become ready (ImagePullBackOff, Unschedulable, ...) ends the
 * acquisition at once with its reason. Each execution's runner is started
 * by the pod's supervisor over one long-lived exec (kube_super.h), which also
 * kills every process it started; where the supervisor cannot run (or dies),
 * each runner is its own exec and ending it is a second exec (closing the
 * stream does not kill it).
 * A periodic tick keeps the warm pool full and reaps idle and broken pods,
 * with preconditions so two replicas never delete a pod the other just used;
 * the first tick, at start, adopts the managed pods already there.
 * Replicas of different pod templates (an upgrade rolling out) share the
 * pods: a conversation's pod of another template is used as it is, never
 * deleted for it; only warm pods of one's own template are claimed.
 *
 * Loop context: the loop thread only; nothing blocks.
 *
 * Ownership: the config, its k8s_config and the template are borrowed for
 * the call to kube_backend_new (copied as needed). The backend is released
 * with backend->ops->destroy once every process handle has exited; the loop
 * must then run until its handles are closed.
 */
#ifndef K8S_KUBE_BACKEND_H
#define K8S_KUBE_BACKEND_H

#include <jansson.h>
#include <uv.h>

#include "k8s/api/kubeconfig.h"
#include "runner/sandbox.h"

struct kube_backend_config {
	uv_loop_t *loop;
	const struct k8s_config *cfg;
	const char *ns;             /* NULL: the config's namespace */
	const json_t *tmpl;         /* NULL: k8s_template_default() */
	unsigned warm_pool;         /* ready unclaimed pods to keep; 0: none */
	unsigned idle_ttl_s;        /* reap conversation pods idle longer; 0: never */
	unsigned drift_idle_s;      /* replace a pod of another template idle longer,
	                               with a snapshot store (kube_snap.h); 0: never */
	unsigned tick_s;            /* pool and reaper period; 0: 15 s */
	int no_supervisor;          /* 1: one exec per script (kube_super.h) */
	int no_pod_helper;          /* 1: runners without the pod helper (kube_super.h) */
};

int kube_backend_new(const struct kube_backend_config *c, struct codepod_backend **out,
                    struct cp_err *err);

/* Where the command's options lead: the kubeconfig files (a KUBECONFIG-style
 * list; NULL: $KUBECONFIG, else ~/.kube/config if present, else in-cluster),
 * the context (NULL: current), the namespace (NULL: the context's), the pod
 * template file (NULL: the built-in one). Every problem is named. */
struct kube_backend_options {
	const char *kubeconfig;
	const char *context;
	const char *ns;
	const char *pod_template;
	unsigned warm_pool;
	unsigned idle_ttl_s;
	unsigned drift_idle_s;
	int no_supervisor;
	int no_pod_helper;
};
int kube_backend_from_options(uv_loop_t *loop, const struct kube_backend_options *o,
                             struct codepod_backend **out, struct cp_err *err);

/* Counters for logs and metrics (codepod_backend_ops.stats).
 * served_own/served_other: conversation pods made ready for use here, made
 * from this replica's template or another's (an upgrade in progress);
 * replaced: pods judged broken while acquiring, reaped_bad: by the reaper;
 * drained: warm pods of another template deleted once unused, and with
 * --template-drift-idle conversation pods of an older replica's template,
 * idle that long, snapshotted first (a template difference alone never
 * deletes a pod whose files would not carry over). */
struct kube_backend_stats {
	unsigned long found, claimed, created, replaced, reaped, warm_created;
	unsigned long supervisors_started, supervisor_fallbacks;
	unsigned long served_own, served_other, reaped_bad, drained;
};

#endif
