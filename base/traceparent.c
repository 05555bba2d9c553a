/*
 * traceparent.c - the W3C trace context grammar (base/traceparent.h).
 */
#include <string.h>

#include <openssl/rand.h>

#include "base/traceparent.h"
#include "base/hex.h"

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1; /* uppercase is invalid in traceparent */
}

/* @n bytes from 2n lowercase hex characters; -1 on a bad character. */
static int unhex(const char *s, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

static int all_zero(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

int cp_traceparent_parse(const char *s, size_t len, struct cp_trace_ctx *out,
                         struct cp_err *err)
{
	uint8_t ver;
	if (!s || len < CP_TRACEPARENT_LEN)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "traceparent must be 55 characters");
	if (unhex(s, &ver, 1) || ver == 0xff || s[2] != '-')
		return cp_err_set(err, CP_E_INVALID_REQUEST, "traceparent: bad version");
	if (ver == 0 && len != CP_TRACEPARENT_LEN)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "traceparent must be 55 characters");
	if (ver != 0 && len > CP_TRACEPARENT_LEN && s[CP_TRACEPARENT_LEN] != '-')
		return cp_err_set(err, CP_E_INVALID_REQUEST, "traceparent: bad field after the flags");
	struct cp_trace_ctx c;
	if (unhex(s + 3, c.trace_id, CP_TRACE_ID_LEN) || s[35] != '-' ||
	    all_zero(c.trace_id, CP_TRACE_ID_LEN))
		return cp_err_set(err, CP_E_INVALID_REQUEST, "traceparent: bad trace id");
	if (unhex(s + 36, c.span_id, CP_SPAN_ID_LEN) || s[52] != '-' ||
	    all_zero(c.span_id, CP_SPAN_ID_LEN))
		return cp_err_set(err, CP_E_INVALID_REQUEST, "traceparent: bad parent id");
	if (unhex(s + 53, &c.flags, 1))
		return cp_err_set(err, CP_E_INVALID_REQUEST, "traceparent: bad flags");
	if (memchr(s, '\0', len))
		return cp_err_set(err, CP_E_INVALID_REQUEST, "traceparent: bad character");
	*out = c;
	return 0;
}

void cp_trace_hex(const uint8_t *in, size_t n, char *out)
{
	cp_hex_encode(in, n, out);
}

void cp_traceparent_format(const struct cp_trace_ctx *c, char out[CP_TRACEPARENT_LEN + 1])
{
	memcpy(out, "00-", 3);
	cp_trace_hex(c->trace_id, CP_TRACE_ID_LEN, out + 3);
	out[35] = '-';
	cp_trace_hex(c->span_id, CP_SPAN_ID_LEN, out + 36);
	out[52] = '-';
	cp_trace_hex(&c->flags, 1, out + 53);
}

static int key_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
	       c == '*' || c == '/';
}

/* One list member, already stripped of the spaces and tabs around it. */
static int member_ok(const char *m, size_t n)
{
	const char *eq = memchr(m, '=', n);
	if (!eq)
		return 0;
	size_t klen = (size_t)(eq - m), vlen = n - klen - 1;
	if (klen == 0 || klen > 256 || vlen == 0 || vlen > 256)
		return 0;
	if (!((m[0] >= 'a' && m[0] <= 'z') || (m[0] >= '0' && m[0] <= '9')))
		return 0;
	int ats = 0;
	for (size_t i = 0; i < klen; i++) {
		if (m[i] == '@') {
			if (++ats > 1 || i == 0 || i + 1 == klen)
				return 0;
		} else if (!key_char(m[i])) {
			return 0;
		}
	}
	for (size_t i = 0; i < vlen; i++) {
		unsigned char c = (unsigned char)eq[1 + i];
		if (c < 0x20 || c > 0x7e || c == ',' || c == '=')
			return 0;
	}
	return eq[vlen] != ' '; /* the value's last character */
}

int cp_tracestate_check(const char *s, size_t len, struct cp_err *err)
{
	if (!s || len > CP_TRACESTATE_MAX)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "tracestate is over 512 bytes");
	unsigned members = 0;
	size_t i = 0;
	while (i <= len) {
		size_t end = i;
		while (end < len && s[end] != ',')
			end++;
		size_t a = i, b = end;
		while (a < b && (s[a] == ' ' || s[a] == '\t'))
			a++;
		while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t'))
			b--;
		if (b > a) {
			if (++members > 32)
				return cp_err_set(err, CP_E_INVALID_REQUEST,
				                  "tracestate has over 32 list members");
			if (!member_ok(s + a, b - a))
				return cp_err_set(err, CP_E_INVALID_REQUEST,
				                  "tracestate: list member %u is not key=value", members);
		}
		i = end + 1;
	}
	return 0;
}

int cp_trace_random(uint8_t *out, size_t n, struct cp_err *err)
{
	do {
		if (RAND_bytes(out, (int)n) != 1)
			return cp_err_set(err, CP_E_INTERNAL, "no randomness for a trace id");
	} while (all_zero(out, n));
	return 0;
}
