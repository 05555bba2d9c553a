/* fuzz_s3_answer.c - what the S3 client reads from a store's answers
 * (store/s3_xml.h: element values of error, multipart and listing XML) and
 * from a credentials file (store/s3_creds.h), on arbitrary bytes.
 *
 * The same input is read both ways. A value found is NUL-terminated,
 * as long as it says and below its bound; the first value is the
 * first of the walk; a credentials parse either fails with a message and
 * leaves the struct as it was, or fills a key id and a secret. Nothing may
 * crash, read out of bounds or leak.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/s3_creds.h"
#include "store/s3_xml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
	size_t n;
	char first[1024];
};

static int value(void *ud, const char *v, size_t len)
{
	struct seen *s = ud;
	if (strlen(v) != len || len >= 1024)
		abort();
	if (s->n++ == 0)
		memcpy(s->first, v, len + 1);
	return 0;
}

static int block(void *ud, const char *inner, size_t len)
{
	const char *end = ud;
	if (inner + len > end)
		abort();
	char key[64];
	(void)store_xml_first(inner, len, "Key", key, sizeof key);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	if (size)
		memcpy(copy, data, size);
	static const char *const names[] = { "Code", "UploadId", "Key", "IsTruncated", "A" };
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		struct seen s = { 0 };
		size_t n = store_xml_each(copy, size, names[i], value, &s);
		if (n != s.n)
			abort();
		char out[1024];
		int found = store_xml_first(copy, size, names[i], out, sizeof out);
		if (found != (n > 0) || (found && strcmp(out, s.first) != 0))
			abort();
		store_xml_blocks(copy, size, names[i], block, copy + size);
	}
	static struct store_creds c;
	memset(&c, 0, sizeof c);
	struct cp_err err = { 0 };
	int rc = store_creds_parse(&c, copy, size, &err);
	if (rc) {
		if (err.msg[0] == '\0' || c.loaded || c.access[0])
			abort();
	} else if (!c.loaded || !c.access[0] || !c.secret[0]) {
		abort();
	}
	free(copy);
	return 0;
}
