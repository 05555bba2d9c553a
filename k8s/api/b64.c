/* b64.c - strict standard base64. */
#include "k8s/api/b64.h"

#include <stdlib.h>

static const char alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int val(unsigned char c)
{
	if (c >= 'A' && c <= 'Z') return c - 'A';
	if (c >= 'a' && c <= 'z') return c - 'a' + 26;
	if (c >= '0' && c <= '9') return c - '0' + 52;
	if (c == '+') return 62;
	if (c == '/') return 63;
	return -1;
}

int k8s_b64_decode(const char *in, size_t len, unsigned char **out,
                   size_t *out_len, struct cp_err *err)
{
	*out = NULL;
	*out_len = 0;
	unsigned char *buf = malloc(len / 4 * 3 + 3);
	if (!buf)
		return cp_err_set(err, CP_E_NOMEM, "base64: out of memory");
	size_t n = 0, quad = 0, pad = 0;
	unsigned acc = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];
		if (c == '\r' || c == '\n' || c == ' ' || c == '\t')
			continue;
		int v;
		if (c == '=') {
			if (quad < 2)
				goto bad;
			pad++;
			v = 0;
		} else {
			v = val(c);
			if (v < 0 || pad)
				goto bad;
		}
		acc = (acc << 6) | (unsigned)v;
		if (++quad == 4) {
			buf[n++] = (unsigned char)(acc >> 16);
			if (pad < 2)
				buf[n++] = (unsigned char)(acc >> 8);
			if (pad < 1)
				buf[n++] = (unsigned char)acc;
			/* Non-canonical trailing bits are rejected, as Go's Strict. */
			if ((pad == 1 && (acc & 0xff)) || (pad == 2 && (acc & 0xffff)))
				goto bad;
			quad = 0;
			acc = 0;
			if (pad)
				pad = 3; /* data after padding is invalid */
		}
	}
	if (quad != 0)
		goto bad;
	buf[n] = '\0';
	*out = buf;
	*out_len = n;
	return 0;
bad:
	free(buf);
	return cp_err_set(err, CP_E_PARSE, "not valid base64");
}

int k8s_b64_encode(const void *in, size_t len, char **out, size_t *out_len,
                   struct cp_err *err)
{
	const unsigned char *p = in;
	size_t n = (len + 2) / 3 * 4;
	char *buf = malloc(n + 1);
	*out = NULL;
	if (!buf)
		return cp_err_set(err, CP_E_NOMEM, "base64: out of memory");
	size_t j = 0;
	for (size_t i = 0; i < len; i += 3) {
		unsigned a = p[i];
		unsigned b = i + 1 < len ? p[i + 1] : 0;
		unsigned c = i + 2 < len ? p[i + 2] : 0;
		unsigned t = (a << 16) | (b << 8) | c;
		buf[j++] = alphabet[(t >> 18) & 63];
		buf[j++] = alphabet[(t >> 12) & 63];
		buf[j++] = i + 1 < len ? alphabet[(t >> 6) & 63] : '=';
		buf[j++] = i + 2 < len ? alphabet[t & 63] : '=';
	}
	buf[j] = '\0';
	*out = buf;
	if (out_len)
		*out_len = j;
	return 0;
}
