/* fuzz_jsondepth.c - JSON depth on arbitrary text.
 *
 * Byte 0 is the limit (0..255); the rest is the text. The text depth must be
 * in 0..limit+1 and never decrease when the limit grows; when jansson parses
 * the text, the value depth must equal the text depth.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <jansson.h>

#include "base/jsondepth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data + 1;
	size_t len;
	int limit, d, big;
	json_t *v = NULL;

	if (size < 1)
		return 0;
	limit = data[0];
	len = size - 1;
	d = cp_json_text_depth(text, len, limit);
	if (d < 0 || d > limit + 1)
		abort();
	big = cp_json_text_depth(text, len, 100000);
	if (d <= limit ? big != d : big <= limit)
		abort();
	v = json_loadb(text, len, JSON_DECODE_ANY, NULL);
	if (v) {
		if (cp_json_value_depth(v, limit) != d || cp_json_value_depth(v, 100000) != big)
			abort();
		json_decref(v);
	}
	return 0;
}
