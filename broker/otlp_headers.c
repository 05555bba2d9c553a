/*
 * otlp_headers.c - the OTLP exporter's extra headers, from the environment
 * variable's form or a headers file (otlp_headers.h).
 *
 * Each form is cut into (name, value) pairs here, and every pair goes
 * through add(), the one place that says what a header may be; the pairs
 * are collected in a list of their own and joined to the caller's only
 * when all of them passed.
 */
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "base/hex.h"
#include "broker/otlp_headers.h"

/* Written by the exporter itself: the collector must see ours. */
static const char *const reserved[] = {
	"content-type", "content-length", "host", "expect", "transfer-encoding", "connection",
};

/* RFC 9110 tchar. */
static int is_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static int is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* The name of "Name: value" (up to the colon), compared without case. */
static int same_name(const char *entry, const char *name, size_t n)
{
	return strncasecmp(entry, name, n) == 0 && entry[n] == ':';
}

static size_t count(const struct curl_slist *l)
{
	size_t n = 0;
	for (; l; l = l->next)
		n++;
	return n;
}

/* Checks one header and appends "name: value" to *mine. @where names the
 * entry ("entry 2", "line 7"); @have is the caller's list (no name twice). */
static int add(const char *name, size_t nlen, const char *value, size_t vlen,
               const struct curl_slist *have, struct curl_slist **mine, const char *what,
               const char *where, struct cp_err *err)
{
	if (nlen == 0)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "%s: %s has no header name", what, where);
	for (size_t i = 0; i < nlen; i++)
		if (!is_tchar((unsigned char)name[i]))
			return cp_err_set(err, CP_E_INVALID_REQUEST,
			                  "%s: %s: a header name is letters, digits and !#$%%&'*+-.^_`|~ only",
			                  what, where);
	for (size_t i = 0; i < vlen; i++) {
		unsigned char c = (unsigned char)value[i];
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return cp_err_set(err, CP_E_INVALID_REQUEST,
			                  "%s: %s: the value of %.*s holds a control character", what,
			                  where, (int)nlen, name);
	}
	if (nlen + vlen + 2 > BROKER_OTLP_MAX_HEADER_BYTES)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "%s: %s: %.*s is over %d bytes", what,
		                  where, (int)nlen, name, BROKER_OTLP_MAX_HEADER_BYTES);
	for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
		if (strlen(reserved[i]) == nlen && strncasecmp(reserved[i], name, nlen) == 0)
			return cp_err_set(err, CP_E_INVALID_REQUEST,
			                  "%s: %s: %.*s is written by codepod and cannot be set", what,
			                  where, (int)nlen, name);
	for (int pass = 0; pass < 2; pass++)
		for (const struct curl_slist *l = pass ? have : *mine; l; l = l->next)
			if (same_name(l->data, name, nlen))
				return cp_err_set(err, CP_E_INVALID_REQUEST,
				                  "%s: %s: %.*s is given twice", what, where, (int)nlen,
				                  name);
	if (count(have) + count(*mine) >= BROKER_OTLP_MAX_HEADERS)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "%s: more than %d headers", what,
		                  BROKER_OTLP_MAX_HEADERS);
	struct cp_buf b;
	cp_buf_init(&b, BROKER_OTLP_MAX_HEADER_BYTES + 1);
	int rc = cp_buf_addf(&b, err, "%.*s: ", (int)nlen, name);
	if (!rc)
		rc = cp_buf_add(&b, value, vlen, err);
	if (!rc)
		rc = cp_buf_add(&b, "", 1, err);
	struct curl_slist *l = rc ? NULL : curl_slist_append(*mine, cp_buf_ptr(&b));
	cp_buf_free(&b);
	if (rc)
		return rc;
	if (!l)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	*mine = l;
	return 0;
}

/* Drops blanks at both ends of [*p, *p + *n). */
static void trim(const char **p, size_t *n)
{
	while (*n > 0 && is_blank(**p)) {
		(*p)++;
		(*n)--;
	}
	while (*n > 0 && is_blank((*p)[*n - 1]))
		(*n)--;
}

static int join(struct curl_slist **list, struct curl_slist *mine, struct cp_err *err)
{
	for (struct curl_slist *l = mine; l; l = l->next) {
		struct curl_slist *n = curl_slist_append(*list, l->data);
		if (!n) {
			curl_slist_free_all(mine);
			return cp_err_set(err, CP_E_NOMEM, "out of memory");
		}
		*list = n;
	}
	curl_slist_free_all(mine);
	return 0;
}

int broker_otlp_headers_env(const char *text, const char *what, struct curl_slist **list,
                            struct cp_err *err)
{
	struct curl_slist *mine = NULL;
	struct cp_buf val;
	cp_buf_init(&val, BROKER_OTLP_MAX_HEADER_BYTES);
	int rc = 0;
	unsigned entry = 0;
	for (const char *p = text; !rc && *p;) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		const char *e = p;
		size_t en = n;
		p += n + (end ? 1 : 0);
		entry++;
		trim(&e, &en);
		char where[32];
		snprintf(where, sizeof where, "entry %u", entry);
		if (en == 0) /* "a=b," and "": nothing there, as OpenTelemetry's SDKs read it */
			continue;
		const char *eq = memchr(e, '=', en);
		if (!eq) {
			rc = cp_err_set(err, CP_E_INVALID_REQUEST, "%s: %s is not name=value", what, where);
			break;
		}
		const char *name = e, *v = eq + 1;
		size_t nn = (size_t)(eq - e), vn = en - nn - 1;
		trim(&name, &nn);
		trim(&v, &vn);
		cp_buf_reset(&val);
		for (size_t i = 0; !rc && i < vn; i++) {
			char c = v[i];
			if (c == '%') {
				int hi = i + 2 < vn ? cp_hex_digit((unsigned char)v[i + 1]) : -1;
				int lo = hi >= 0 ? cp_hex_digit((unsigned char)v[i + 2]) : -1;
				if (lo < 0) {
					rc = cp_err_set(err, CP_E_INVALID_REQUEST,
					                "%s: %s: a %% in a value starts two hex digits",
					                what, where);
					break;
				}
				c = (char)(hi * 16 + lo);
				i += 2;
			}
			if (cp_buf_add(&val, &c, 1, err))
				rc = cp_err_set(err, CP_E_INVALID_REQUEST, "%s: %s: %.*s is over %d bytes",
				                what, where, (int)nn, name, BROKER_OTLP_MAX_HEADER_BYTES);
		}
		if (!rc)
			rc = add(name, nn, cp_buf_ptr(&val) ? cp_buf_ptr(&val) : "", cp_buf_len(&val),
			         *list, &mine, what, where, err);
	}
	cp_buf_free(&val);
	if (rc) {
		curl_slist_free_all(mine);
		return rc;
	}
	return join(list, mine, err);
}

int broker_otlp_headers_file(const char *text, size_t len, const char *what,
                             struct curl_slist **list, struct cp_err *err)
{
	if (memchr(text, '\0', len))
		return cp_err_set(err, CP_E_INVALID_REQUEST, "%s: holds a NUL byte", what);
	struct curl_slist *mine = NULL;
	int rc = 0;
	unsigned line = 0;
	for (size_t at = 0; !rc && at < len;) {
		const char *p = text + at;
		const char *nl = memchr(p, '\n', len - at);
		size_t n = nl ? (size_t)(nl - p) : len - at;
		at += n + (nl ? 1 : 0);
		line++;
		if (n > 0 && p[n - 1] == '\r')
			n--;
		trim(&p, &n);
		if (n == 0 || p[0] == '#')
			continue;
		char where[32];
		snprintf(where, sizeof where, "line %u", line);
		const char *colon = memchr(p, ':', n);
		if (!colon) {
			rc = cp_err_set(err, CP_E_INVALID_REQUEST, "%s: %s is not \"Name: value\"", what,
			                where);
			break;
		}
		const char *name = p, *v = colon + 1;
		size_t nn = (size_t)(colon - p), vn = n - nn - 1;
		trim(&v, &vn);
		/* "Name : value" is refused by add(): a blank is no name's. */
		rc = add(name, nn, v, vn, *list, &mine, what, where, err);
	}
	if (rc) {
		curl_slist_free_all(mine);
		return rc;
	}
	return join(list, mine, err);
}
