/*
 * kube_oom.c - was a runner that died of SIGKILL killed for memory?
 *
 * On the Kubernetes backend a cgroup OOM kill reaches codepod as any other
 * SIGKILL: exit status 137 on the exec stream. The kubelet says what it was
 * in the pod's container status (state or lastState terminated, reason
 * OOMKilled), but only when the container's first process was the one
 * killed; the OOM killer takes the largest process, most often the runner,
 * and the container lives on. The pod's supervisor tells that case (its
 * exit frame's "oom": the container's memory cgroup counted an OOM kill).
 * So when the runner dies of a SIGKILL codepod did not send, the pod is
 * read - a GET on the loop, a few times over about a second and a half, as
 * the kubelet takes a moment to write the status - until the container
 * status tells, or at once when the supervisor said; then the exit is
 * reported, with exit.oom and a detail naming the container and its memory
 * limit when it was for memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k8s/backend/kube_int.h"
#include "base/log.h"

#define OOM_TRIES 4          /* GETs of the pod */
#define OOM_RETRY_MS 500     /* between them */
#define OOM_GET_TIMEOUT_MS 2000

/* whole: the container itself was OOMKilled (its status says so); else the
 * supervisor saw the container's cgroup kill the runner for memory while
 * the container lived on. */
static void say_oom(struct codepod_proc *p, const char *limit, int whole)
{
	p->exit.oom = 1;
	if (whole)
		snprintf(p->exit.detail, sizeof p->exit.detail,
		         "the container \"%s\" of pod %s was OOMKilled%s%s%s", K8S_CONTAINER, p->oom_pod,
		         limit ? " (memory limit " : "", limit ? limit : "", limit ? ")" : "");
	else
		snprintf(p->exit.detail, sizeof p->exit.detail,
		         "the container \"%s\" of pod %s reached its memory limit%s%s", K8S_CONTAINER,
		         p->oom_pod, limit ? " of " : "", limit ? limit : "");
}

static void get_pod(struct codepod_proc *p);

static void on_retry(uv_timer_t *t)
{
	get_pod(t->data);
}

static void done(struct codepod_proc *p)
{
	free(p->oom_pod);
	p->oom_pod = NULL;
	kube_proc_report(p);
}

static void on_pod(void *arg, json_t *obj, const struct k8s_status *st, const struct cp_err *err)
{
	(void)st;
	struct codepod_proc *p = arg;
	const char *limit = NULL;
	int said = p->exit.oom; /* by the supervisor, from the container's cgroup */
	int verdict = err ? -1 : k8s_pod_oom_killed(obj, (long long)p->exec_wall, &limit);
	if (verdict == 1) {
		say_oom(p, limit, 1);
		cp_log(CP_LOG_INFO, "kube.oom_killed", "id", json_string(p->exec_id),
		       "pod", json_string(p->oom_pod), NULL);
	} else if (said) {
		verdict = 1;
		say_oom(p, err ? NULL : k8s_pod_memory_limit(obj), 0);
		cp_log(CP_LOG_INFO, "kube.oom_killed", "id", json_string(p->exec_id),
		       "pod", json_string(p->oom_pod), "in", json_string("runner"), NULL);
	}
	/* A supervisor's stream that went with its container (kube_super.h):
	 * a pod deleted, or a container that ended, took the runner too, so
	 * its fate is known after all. */
	int gone = (err && err->code == CP_E_NOT_FOUND) || verdict >= 0 ||
	           (!err && json_object_get(json_object_get(obj, "metadata"), "deletionTimestamp"));
	if (p->exit.lost && gone) {
		p->exit.lost = 0;
		if (!p->exit.signal && verdict != 1)
			p->exit.signal = 9;
		p->exit.code = -1;
	}
	if (verdict >= 0 || ++p->oom_tries >= OOM_TRIES || p->k->closing || gone) {
		done(p);
		return;
	}
	uv_timer_stop(&p->timer);
	uv_timer_start(&p->timer, on_retry, OOM_RETRY_MS, 0);
}

static void get_pod(struct codepod_proc *p)
{
	struct k8s_rest_opts o = { .timeout_ms = OOM_GET_TIMEOUT_MS, .max_attempts = 1 };
	struct k8s_rest_cb cb = { on_pod, p };
	struct cp_err err;
	if (k8s_pod_get(p->k->api, p->k->ns, p->oom_pod, &o, cb, NULL, &err))
		done(p);
}

int kube_oom_check(struct codepod_proc *p)
{
	if (p->k->closing || !p->conv->pod)
		return -1;
	p->oom_pod = strdup(p->conv->pod);
	if (!p->oom_pod)
		return -1;
	p->oom_tries = 0;
	p->timer.data = p;
	get_pod(p);
	return 0;
}
