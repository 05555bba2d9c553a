#include "base/utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char repl[3] = { '\xef', '\xbf', '\xbd' };

/*
 * Length of the sequence at s[0..n). Sets *ok when it is a well-formed
 * sequence (Unicode Table 3-7), else returns the length of the maximal
 * subpart to replace with one U+FFFD (at least 1). NUL is not "ok".
 */
static size_t seq_len(const unsigned char *s, size_t n, int *ok)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;
	size_t need, i;

	*ok = 0;
	if (c >= 0x01 && c <= 0x7f) {
		*ok = 1;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		need = 1;
	} else if (c >= 0xe0 && c <= 0xef) {
		need = 2;
		if (c == 0xe0)
			lo = 0xa0; /* overlong */
		else if (c == 0xed)
			hi = 0x9f; /* surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		need = 3;
		if (c == 0xf0)
			lo = 0x90; /* overlong */
		else if (c == 0xf4)
			hi = 0x8f; /* over U+10FFFF */
	} else {
		return 1; /* NUL, continuation byte, C0, C1, F5..FF */
	}
	for (i = 1; i <= need; i++) {
		if (i >= n || s[i] < lo || s[i] > hi)
			return i;
		lo = 0x80;
		hi = 0xbf;
	}
	*ok = 1;
	return need + 1;
}

/* One pass: counts the output when out is NULL, else writes it too. */
static size_t pass(const unsigned char *s, size_t len, char *out)
{
	size_t i = 0, o = 0;

	while (i < len) {
		size_t run = i, k;
		int ok;

		while (run < len && s[run] >= 0x01 && s[run] <= 0x7f)
			run++;
		if (run > i) {
			if (out)
				memcpy(out + o, s + i, run - i);
			o += run - i;
			i = run;
			continue;
		}
		k = seq_len(s + i, len - i, &ok);
		if (out)
			memcpy(out + o, ok ? (const char *)s + i : repl, ok ? k : sizeof repl);
		o += ok ? k : sizeof repl;
		i += k;
	}
	return o;
}

char *cp_utf8_sanitize(const char *s, size_t len, size_t *out_len)
{
	const unsigned char *u = (const unsigned char *)s;
	char *out = NULL;
	size_t n;

	if (len > (SIZE_MAX - 1) / 3)
		return NULL;
	n = len ? pass(u, len, NULL) : 0;
	out = malloc(n + 1);
	if (!out)
		return NULL;
	if (len)
		pass(u, len, out);
	out[n] = '\0';
	if (out_len)
		*out_len = n;
	return out;
}
