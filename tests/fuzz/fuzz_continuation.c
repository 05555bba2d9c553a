/* fuzz_continuation.c - the continuation decoder (codepod_continuation_open)
 * on arbitrary bytes, against a fixed two-key ring. Anything it accepts must
 * be an object for the conversation asked about; a refusal must say why
 * within its buffer. A valid continuation with one byte flipped is tried
 * too, so the fuzzer reaches the checks past the signature. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runner/continuation.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char keys[] =
	"k1:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n"
	"old:ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100\n";

static void try_open(const struct codepod_keyring *kr, const char *t, size_t n)
{
	json_t *v = NULL;
	struct cp_err err = { 0 };
	int rc = codepod_continuation_open(kr, t, n, "c", 1000, &v, &err);
	if (rc == 0) {
		if (!json_is_object(v) || strcmp(json_string_value(json_object_get(v, "conv")), "c"))
			abort();
		json_decref(v);
	} else if (v || strnlen(err.msg, sizeof err.msg) >= sizeof err.msg || !err.msg[0]) {
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct codepod_keyring *kr;
	if (!kr && codepod_keyring_parse(keys, sizeof keys - 1, &kr, NULL))
		abort();
	try_open(kr, (const char *)data, size);
	/* The input as a payload, signed: the body checks on fuzzed JSON. */
	json_t *body = json_loadb((const char *)data, size, 0, NULL);
	if (json_is_object(body) && json_is_string(json_object_get(body, "conv")) &&
	    json_is_integer(json_object_get(body, "iat")) &&
	    json_is_integer(json_object_get(body, "exp")) &&
	    json_is_string(json_object_get(body, "jti"))) {
		char *t = NULL;
		if (codepod_continuation_seal(kr, body, &t, NULL) == 0) {
			size_t n = strlen(t);
			try_open(kr, t, n);
			if (n) {
				t[size % n] ^= 1;
				try_open(kr, t, n);
			}
			free(t);
		}
	}
	json_decref(body);
	return 0;
}
