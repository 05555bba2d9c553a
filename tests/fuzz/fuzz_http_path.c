/* fuzz_http_path.c - what a client puts in the URL and headers of the
 * conversation routes: a percent-encoded segment (broker_http_pct_decode),
 * a Range header (broker_http_parse_range) and a workspace path's string
 * rules (codepod_path_check), on arbitrary bytes. A decoded name never
 * holds a NUL and is never longer than its input; a range that parses is
 * never empty and never wraps; a path that passes has no ".." component
 * and does not start with '/'. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "broker/http_path.h"
#include "runner/fileop.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	char *d = broker_http_pct_decode(s, size);
	if (d && strlen(d) > size)
		abort();
	char *text = malloc(size + 1);
	if (!text) {
		free(d);
		return 0;
	}
	memcpy(text, data, size);
	text[size] = 0;
	unsigned long long start = 0, len = 0;
	if (broker_http_parse_range(text, &start, &len) == 0 &&
	    (len == 0 || (len != ~0ull && start + len < start)))
		abort();
	if (d) {
		json_t *v = json_string(d);
		if (v && codepod_path_check("path", v, 1, NULL) == 0) {
			if (d[0] == '/')
				abort();
			for (const char *c = d; *c;) {
				size_t n = strcspn(c, "/");
				if (n == 2 && c[0] == '.' && c[1] == '.')
					abort();
				c += n;
				while (*c == '/')
					c++;
			}
		}
		json_decref(v);
	}
	free(text);
	free(d);
	return 0;
}
