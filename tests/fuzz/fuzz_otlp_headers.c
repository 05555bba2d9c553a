/* fuzz_otlp_headers.c - the OTLP exporter's header forms on arbitrary bytes.
 *
 * Byte 0 picks the reader (even: the environment variable's form, read up
 * to the first NUL; odd: a headers file). Whatever is accepted must be
 * headers a request can carry: "Name: value" with a token name, no CR, LF
 * or NUL, within the count and size bounds; a refusal leaves the list as
 * it was.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "broker/otlp_headers.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct curl_slist *l)
{
	size_t n = 0;
	for (; l; l = l->next, n++) {
		const char *h = l->data;
		const char *colon = strchr(h, ':');
		if (!colon || colon == h || colon[1] != ' ' || strpbrk(h, "\r\n") ||
		    strlen(h) > BROKER_OTLP_MAX_HEADER_BYTES)
			abort();
		for (const char *p = h; p < colon; p++)
			if (*p <= ' ' || *p >= 0x7f || strchr("\"(),/:;<=>?@[\\]{}", *p))
				abort();
	}
	if (n > BROKER_OTLP_MAX_HEADERS)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	struct curl_slist *l = NULL;
	struct cp_err err;
	int rc;
	if (data[0] & 1) {
		rc = broker_otlp_headers_file((const char *)data + 1, size - 1, "f", &l, &err);
	} else {
		char *s = malloc(size);
		if (!s)
			return 0;
		memcpy(s, data + 1, size - 1);
		s[size - 1] = '\0';
		rc = broker_otlp_headers_env(s, "e", &l, &err);
		free(s);
	}
	if (rc && l)
		abort();
	check(l);
	curl_slist_free_all(l);
	return 0;
}
