/* fuzz_gcp_token.c - the GCP metadata server's token answer
 * (store/gcp_token.h store_gcp_token_parse), on arbitrary bytes.
 *
 * A parse either fails with a message that does not hold the token, or
 * gives a token of 1 to STORE_GCP_TOKEN_MAX-1 printable, space-free ASCII
 * characters (it goes into a header) and a positive lifetime; a buffer too
 * small is never written past. Nothing may crash or leak.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/gcp_token.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char tok[STORE_GCP_TOKEN_MAX + 8];
	memset(tok, 'Z', sizeof tok);
	uint64_t life = 0;
	struct cp_err err = { 0 };
	if (store_gcp_token_parse((const char *)data, size, tok, STORE_GCP_TOKEN_MAX, &life, &err)) {
		if (err.msg[0] == '\0')
			abort();
		for (size_t i = 0; i < sizeof tok; i++) /* untouched */
			if (tok[i] != 'Z')
				abort();
		return 0;
	}
	size_t n = strlen(tok);
	if (n == 0 || n >= STORE_GCP_TOKEN_MAX || life == 0 || strstr(err.msg, tok))
		abort();
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)tok[i] <= 0x20 || (unsigned char)tok[i] >= 0x7f)
			abort();
	/* a small buffer: refused, never overrun */
	char small[8];
	memset(small, 'Z', sizeof small);
	if (!store_gcp_token_parse((const char *)data, size, small, 4, &life, &err) &&
	    strlen(small) >= 4)
		abort();
	return 0;
}
