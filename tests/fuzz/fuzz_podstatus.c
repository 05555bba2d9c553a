/* fuzz_podstatus.c - a pod as the API server (or anything posing as one)
 * returns it, on arbitrary bytes: what the Kubernetes backend reads of it,
 * k8s_pod_classify (acquisition) and k8s_pod_oom_killed (a runner's
 * SIGKILL). Verdicts must be in range and their strings point into the pod. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <jansson.h>

#include "k8s/api/pod.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *pod = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
	if (!pod)
		return 0;
	struct k8s_pod_state st;
	k8s_pod_classify(pod, &st);
	if ((unsigned)st.verdict > K8S_POD_UNAVAILABLE || !st.reason)
		abort();
	const char *limit = NULL;
	int oom = k8s_pod_oom_killed(pod, 1764500000LL, &limit);
	if (oom < -1 || oom > 1 || (oom != 1 && limit))
		abort();
	json_decref(pod);
	return 0;
}
