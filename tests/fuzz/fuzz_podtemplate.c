/* fuzz_podtemplate.c - a pod template (--pod-template, JSON or YAML) on
 * arbitrary bytes: k8s_yaml_to_json, then what k8s_template_load does with
 * the value (check, hash) and the pod made from it. A template that passes
 * the check must hash and must give a pod carrying codepod's labels. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "k8s/api/pod.h"
#include "k8s/api/yamljson.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cp_err err;
	/* An exact-size copy: ASan sees any read past the end. */
	char *buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	if (size)
		memcpy(buf, data, size);
	json_t *v = k8s_yaml_to_json(buf, size, "fuzz.yaml", &err);
	free(buf);
	if (!v)
		return 0;
	char hash[17];
	if (k8s_template_check(v, "fuzz.yaml", &err) == 0) {
		if (k8s_template_hash(v, hash, &err))
			abort();
		json_t *warm = k8s_pod_from_template(v, "codepod-warm-0", "default", NULL, hash,
		                                     "2026-01-01T00:00:00Z");
		json_t *pod = k8s_pod_from_template(v, "codepod-0", "default",
		                                    "0123456789abcdef0123456789abcdef01234567", hash,
		                                    "2026-01-01T00:00:00Z");
		if (!pod || !json_is_object(json_object_get(json_object_get(pod, "metadata"), "labels")))
			abort();
		json_decref(warm);
		json_decref(pod);
	}
	json_decref(v);
	return 0;
}
