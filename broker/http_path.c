/*
 * http_path.c - percent-decoding and the Range header (http_path.h).
 */
#include <stdlib.h>
#include <string.h>

#include "base/hex.h"
#include "broker/http_path.h"

char *broker_http_pct_decode(const char *s, size_t n)
{
	char *out = malloc(n + 1), *o = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '%') {
			if (!s[i])
				break; /* a NUL ends the input as it would a C string */
			*o++ = s[i];
			continue;
		}
		int hi = i + 2 < n ? cp_hex_digit(s[i + 1]) : -1;
		int lo = hi >= 0 ? cp_hex_digit(s[i + 2]) : -1;
		if (lo < 0 || (hi | lo) == 0) {
			free(out);
			return NULL;
		}
		*o++ = (char)(hi << 4 | lo);
		i += 2;
	}
	*o = 0;
	return out;
}

/* Decimal digits at *p into *v (no sign, no overflow); 0 when there were some. */
static int number(const char **p, unsigned long long *v)
{
	const char *s = *p;
	unsigned long long n = 0;
	while (*s >= '0' && *s <= '9') {
		unsigned d = (unsigned)(*s - '0');
		if (n > (~0ull - d) / 10)
			return -1;
		n = n * 10 + d;
		s++;
	}
	if (s == *p)
		return -1;
	*p = s;
	*v = n;
	return 0;
}

int broker_http_parse_range(const char *h, unsigned long long *start, unsigned long long *len)
{
	unsigned long long a = 0, b = 0;
	if (strncmp(h, "bytes=", 6))
		return -1;
	const char *p = h + 6;
	if (number(&p, &a) || *p++ != '-')
		return -1;
	if (!*p) {
		*start = a;
		*len = ~0ull;
		return 0;
	}
	if (number(&p, &b) || *p || b < a || b == ~0ull)
		return -1;
	*start = a;
	*len = b - a + 1;
	return 0;
}
