/* fuzz_kubeconfig.c - the kubeconfig loader on arbitrary bytes: parse,
 * merge a second copy (first wins), then resolve the current context and
 * the first context by name. Relative paths point under /nonexistent so
 * resolution never reads real files. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "k8s/api/kubeconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct k8s_kubeconfig *kc = k8s_kubeconfig_new();
	if (!kc)
		return 0;
	struct cp_err err;
	if (k8s_kubeconfig_load_buffer(kc, (const char *)data, size, "/nonexistent/a", &err) == 0 &&
	    k8s_kubeconfig_load_buffer(kc, (const char *)data, size, "/nonexistent/b", &err) == 0) {
		struct k8s_config cfg;
		if (k8s_kubeconfig_resolve(kc, NULL, &cfg, &err) == 0)
			k8s_config_release(&cfg);
		if (kc->n_contexts &&
		    k8s_kubeconfig_resolve(kc, kc->contexts[0]->name, &cfg, &err) == 0) {
			struct k8s_exec_cluster ec;
			k8s_config_exec_cluster(&cfg, &ec);
			char *js = NULL;
			if (cfg.exec && k8s_execcred_input(cfg.exec, &ec, 0, &js, NULL) == 0)
				free(js);
			k8s_config_release(&cfg);
		}
	}
	k8s_kubeconfig_free(kc);
	return 0;
}
