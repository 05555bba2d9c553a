/*
 * kube_setup.c - the Kubernetes backend from the command's options: which
 * kubeconfig (or the in-cluster service account), context, namespace and
 * pod template.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "k8s/backend/kube_backend.h"
#include "base/log.h"
#include "k8s/api/pod.h"

#define HOME_CFG_MAX 4096

/* *@from: where the config came from, for the log; it may point into
 * @home_cfg, the caller's. */
static int load_config(const struct kube_backend_options *o, struct k8s_config *cfg,
                       const char **from, char home_cfg[HOME_CFG_MAX], struct cp_err *err)
{
	const char *list = o->kubeconfig;
	if (!list || !*list)
		list = getenv("KUBECONFIG");
	if (!list || !*list) {
		const char *home = getenv("HOME");
		snprintf(home_cfg, HOME_CFG_MAX, "%s/.kube/config", home ? home : "");
		if (home && access(home_cfg, R_OK) == 0)
			list = home_cfg;
	}
	if (!list || !*list) {
		*from = "the in-cluster service account";
		return k8s_config_in_cluster(NULL, cfg, err);
	}
	*from = list;
	struct k8s_kubeconfig *kc = k8s_kubeconfig_new();
	if (!kc)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	int rc = k8s_kubeconfig_load_list(kc, list, err);
	if (!rc)
		rc = k8s_kubeconfig_resolve(kc, o->context, cfg, err);
	k8s_kubeconfig_free(kc);
	return rc;
}

int kube_backend_from_options(uv_loop_t *loop, const struct kube_backend_options *o,
                             struct codepod_backend **out, struct cp_err *err)
{
	struct k8s_config cfg;
	memset(&cfg, 0, sizeof cfg);
	const char *from = NULL;
	char home_cfg[HOME_CFG_MAX];
	int rc = load_config(o, &cfg, &from, home_cfg, err);
	if (rc)
		return rc;
	json_t *tmpl = NULL;
	if (o->pod_template && !(tmpl = k8s_template_load(o->pod_template, err))) {
		k8s_config_release(&cfg);
		return err ? err->code : CP_E_INVALID_REQUEST;
	}
	struct kube_backend_config bc = { .loop = loop, .cfg = &cfg, .ns = o->ns, .tmpl = tmpl,
	                                 .warm_pool = o->warm_pool, .idle_ttl_s = o->idle_ttl_s,
	                                 .drift_idle_s = o->drift_idle_s,
	                                 .no_supervisor = o->no_supervisor,
	                                 .no_pod_helper = o->no_pod_helper };
	rc = kube_backend_new(&bc, out, err);
	if (!rc)
		cp_log(CP_LOG_INFO, "kube.start", "config", json_string(from),
		       "server", json_string(cfg.server),
		       "namespace", json_string(o->ns ? o->ns : cfg.ns),
		       "warmPool", json_integer(o->warm_pool),
		       "supervisor", json_boolean(!o->no_supervisor), NULL);
	json_decref(tmpl);
	k8s_config_release(&cfg);
	return rc;
}
