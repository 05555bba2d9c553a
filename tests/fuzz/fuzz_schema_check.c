/* fuzz_schema_check.c - the webhook's input check on arbitrary JSON.
 *
 * The input is parsed as JSON: an array [schema, value] is checked as it
 * is, anything else as its own schema and value both. A check either
 * passes, or fails with a NUL-terminated message that starts "input" and
 * fits the caller's buffer; nothing may crash, leak or run unbounded.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "broker/schema_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const json_t *schema, const json_t *value)
{
	char msg[128];

	memset(msg, 'x', sizeof msg);
	int rc = broker_schema_check(schema, value, msg, sizeof msg);
	if (rc != 0 && rc != 1)
		abort();
	if (rc == 1 && (memchr(msg, '\0', sizeof msg) == NULL || strncmp(msg, "input", 5) != 0))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *v = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);

	if (!v)
		return 0;
	if (json_is_array(v) && json_array_size(v) == 2)
		check(json_array_get(v, 0), json_array_get(v, 1));
	check(v, v);
	json_decref(v);
	return 0;
}
