/* fuzz_snap_manifest.c - a snapshot's manifest as the store gives it back
 * (store/snap_manifest.h), on arbitrary bytes.
 *
 * A parse either fails with a message, or gives a manifest whose archive
 * key is of the conversation's folder and a valid key, whose hashes are 64
 * hex, and which turns back into JSON that parses to the same manifest.
 * Nothing may crash or leak.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/s3.h"
#include "store/snap_manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char dir[] = "snap/0123456789abcdef0123456789abcdef/";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct store_manifest m, again;
	struct cp_err err = { 0 };
	if (store_manifest_parse((const char *)data, size, dir, &m, &err)) {
		if (err.msg[0] == '\0')
			abort();
		return 0;
	}
	if (strncmp(m.archive, dir, sizeof dir - 1) != 0 || !store_key_ok(m.archive) ||
	    strlen(m.sha256) != 64 || strlen(m.fingerprint) != 64)
		abort();
	size_t len = 0;
	char *json = store_manifest_json(&m, &len, &err);
	if (!json)
		return 0;
	if (store_manifest_parse(json, len, dir, &again, &err) || memcmp(&m, &again, sizeof m) != 0)
		abort();
	free(json);
	return 0;
}
