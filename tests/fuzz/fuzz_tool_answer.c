/* fuzz_tool_answer.c - a tool's answer from outside codepod: a webhook
 * broker's HTTP reply (broker_webhook_answer) and a tool command's exit
 * status, stdout and stderr tail (broker_cmdtool_answer), on arbitrary bytes.
 * Byte 0 picks the HTTP status and exit status, byte 1 splits the rest into
 * stdout and stderr. Exactly one of output and message must come back, the
 * message NUL-terminated within its buffer (a suspend, 3, has no output); a
 * broker failure (2) names its reason. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "broker/tool_answer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int rc, json_t *out, const char *msg, size_t cap)
{
	if (rc == 0 ? out == NULL : (out != NULL || (rc != 1 && rc != 2 && rc != 3)))
		abort();
	if (strnlen(msg, cap) >= cap)
		abort();
	json_decref(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const long statuses[] = {200, 201, 204, 299, 300, 404, 500, 199};
	if (size < 2)
		return 0;
	const char *body = (const char *)data + 2;
	size_t len = size - 2;
	size_t split = len ? data[1] % (len + 1) : 0;
	/* Small buffers, so every message gets cut somewhere. */
	size_t cap = (size_t)(data[1] % 64) + 1;
	char *msg = malloc(cap);
	if (!msg)
		return 0;
	memset(msg, 'x', cap);
	msg[cap - 1] = '\0';
	json_t *out = NULL;
	const char *reason = NULL;
	int rc = broker_webhook_answer(statuses[data[0] & 7], body, len, &out, msg, cap, &reason);
	check(rc, out, msg, cap);
	if ((rc == 2) != (reason != NULL)) /* a broker failure always says which */
		abort();
	rc = broker_cmdtool_answer((data[0] >> 3) & 3, (data[0] >> 5) & 1, 1024, body, split,
	                           body + split, len - split, &out, msg, cap);
	check(rc, out, msg, cap);
	free(msg);
	return 0;
}
