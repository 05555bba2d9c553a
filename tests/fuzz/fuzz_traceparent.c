/* fuzz_traceparent.c - the W3C trace context grammar on arbitrary bytes.
 *
 * Byte 0 picks the reader (even: traceparent, odd: tracestate); the rest is
 * the value. A traceparent that is read must format back to a valid version
 * 00 one naming the same ids, and must equal the input when that was
 * version 00; a tracestate that is accepted is at most 512 bytes.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/traceparent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const char *s = (const char *)data + 1;
	size_t len = size - 1;
	struct cp_err err;
	if (data[0] & 1) {
		if (cp_tracestate_check(s, len, &err) == 0 && len > CP_TRACESTATE_MAX)
			abort();
		return 0;
	}
	struct cp_trace_ctx c, again;
	if (cp_traceparent_parse(s, len, &c, &err))
		return 0;
	char out[CP_TRACEPARENT_LEN + 1];
	cp_traceparent_format(&c, out);
	if (strlen(out) != CP_TRACEPARENT_LEN || cp_traceparent_parse(out, CP_TRACEPARENT_LEN, &again, &err) ||
	    memcmp(&c, &again, sizeof c))
		abort();
	if (s[0] == '0' && s[1] == '0' && (len != CP_TRACEPARENT_LEN || memcmp(out, s, len)))
		abort();
	return 0;
}
