/* fuzz_status.c - k8s_status_parse and k8s_status_exec on arbitrary bytes.
 * The first byte picks the HTTP code so both mappings get exercised. */
#include <stddef.h>
#include <stdint.h>

#include "k8s/api/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int codes[] = {400, 401, 403, 404, 409, 410, 422, 429, 500, 502};
	int http = size ? codes[data[0] % 10] : 500;
	struct k8s_status st;
	struct cp_err err;
	k8s_status_parse(data, size, http, &st, &err);
	k8s_status_release(&st);
	int exit_code = 0;
	k8s_status_exec(data, size, &exit_code, &st, &err);
	k8s_status_release(&st);
	k8s_status_exec(data, size, &exit_code, NULL, NULL);
	return 0;
}
