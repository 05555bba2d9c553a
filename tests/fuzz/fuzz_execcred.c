/* fuzz_execcred.c - k8s_execcred_parse on arbitrary plugin output (the
 * stdout of an exec credential plugin such as gke-gcloud-auth-plugin).
 * Byte 0 picks the configured apiVersion (v1, v1beta1, or an unknown one);
 * the rest is the output. On success the credential must be usable: a token,
 * or both a certificate and a key. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "k8s/api/execcred.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const versions[] = {K8S_EXECCRED_V1, K8S_EXECCRED_V1BETA1,
	                                       "client.authentication.k8s.io/v1alpha1"};
	if (size == 0)
		return 0;
	const char *v = versions[data[0] % 3];
	struct k8s_exec_credential c;
	struct cp_err err;
	if (k8s_execcred_parse(v, data + 1, size - 1, &c, &err) == 0) {
		if (!c.token && !(c.client_cert && c.client_key))
			abort();
		if ((c.client_cert == NULL) != (c.client_key == NULL))
			abort();
	}
	k8s_exec_credential_release(&c);
	return 0;
}
