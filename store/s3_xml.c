/* s3_xml.c - element values out of S3's XML answers (s3_xml.h). */
#include "store/s3_xml.h"

#include <string.h>

#define VALUE_MAX 1024

static const char *find(const char *p, const char *end, const char *pat, size_t plen)
{
	if (plen == 0 || (size_t)(end - p) < plen)
		return NULL;
	for (const char *q = p; q + plen <= end; q++) {
		q = memchr(q, pat[0], (size_t)(end - q) - plen + 1);
		if (!q)
			return NULL;
		if (memcmp(q, pat, plen) == 0)
			return q;
	}
	return NULL;
}

/* Decodes [p, e) into out; -1 when it is not a plain value. */
static long decode(const char *p, const char *e, char *out)
{
	static const struct { const char *ent; char c; } ents[] = {
		{ "&amp;", '&' }, { "&lt;", '<' }, { "&gt;", '>' },
		{ "&quot;", '"' }, { "&apos;", '\'' },
	};
	size_t n = 0;
	while (p < e) {
		if (n + 1 >= VALUE_MAX)
			return -1;
		if (*p == '<' || *p == '\0') /* a NUL would cut the value short */
			return -1;
		if (*p != '&') {
			out[n++] = *p++;
			continue;
		}
		size_t i;
		for (i = 0; i < sizeof ents / sizeof ents[0]; i++) {
			size_t l = strlen(ents[i].ent);
			if ((size_t)(e - p) >= l && memcmp(p, ents[i].ent, l) == 0) {
				out[n++] = ents[i].c;
				p += l;
				break;
			}
		}
		if (i == sizeof ents / sizeof ents[0])
			return -1;
	}
	out[n] = '\0';
	return (long)n;
}

static size_t walk(const char *body, size_t len, const char *name, int raw,
                   int (*each)(void *ud, const char *value, size_t vlen), void *ud)
{
	char open[80], close[82], val[VALUE_MAX];
	size_t nl = strlen(name);
	if (!body || nl == 0 || nl + 3 > sizeof open)
		return 0;
	open[0] = '<';
	memcpy(open + 1, name, nl);
	open[nl + 1] = '>';
	close[0] = '<';
	close[1] = '/';
	memcpy(close + 2, name, nl);
	close[nl + 2] = '>';
	const char *p = body, *end = body + len;
	size_t count = 0;
	for (;;) {
		const char *o = find(p, end, open, nl + 2);
		if (!o)
			return count;
		const char *v = o + nl + 2;
		const char *c = find(v, end, close, nl + 3);
		if (!c)
			return count;
		p = c + nl + 3;
		if (raw) {
			count++;
			if (each && each(ud, v, (size_t)(c - v)))
				return count;
			continue;
		}
		long n = decode(v, c, val);
		if (n < 0)
			continue;
		count++;
		if (each && each(ud, val, (size_t)n))
			return count;
	}
}

size_t store_xml_each(const char *body, size_t len, const char *name,
                      int (*each)(void *ud, const char *value, size_t vlen), void *ud)
{
	return walk(body, len, name, 0, each, ud);
}

size_t store_xml_blocks(const char *body, size_t len, const char *name,
                        int (*each)(void *ud, const char *inner, size_t ilen), void *ud)
{
	return walk(body, len, name, 1, each, ud);
}

struct first {
	char *out;
	size_t cap;
	int found;
};

static int take_first(void *ud, const char *value, size_t vlen)
{
	struct first *f = ud;
	if (vlen >= f->cap)
		return 0; /* too long for the caller: look for another */
	memcpy(f->out, value, vlen + 1);
	f->found = 1;
	return 1;
}

int store_xml_first(const char *body, size_t len, const char *name, char *out, size_t cap)
{
	if (cap == 0)
		return 0;
	out[0] = '\0';
	struct first f = { out, cap, 0 };
	store_xml_each(body, len, name, take_first, &f);
	return f.found;
}
