/*
 * decl_alias.c - the identifier alias the runner gives a tool name
 * (decl_alias.h; runner/runner.js makeTools is the other half).
 */
#include <stdlib.h>
#include <string.h>

#include "broker/decl_alias.h"

static int is_ident_char(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '_' || ch == '$';
}

int broker_decl_is_identifier(const char *s, size_t n)
{
	if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!is_ident_char((unsigned char)s[i]))
			return 0;
	return 1;
}

/* Names the runner's tools object treats as JavaScript machinery unless a
 * tool has exactly that name (runner/PROTOCOL.md). */
static int is_reserved(const char *s)
{
	static const char *const r[] = { "then", "catch", "finally", "toJSON", "constructor",
		"toString", "valueOf", "toLocaleString", "hasOwnProperty", "isPrototypeOf",
		"propertyIsEnumerable", "__proto__", "prototype", "inspect", "asymmetricMatch",
		"nodeType", "$$typeof" };
	for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
		if (strcmp(s, r[i]) == 0)
			return 1;
	return 0;
}

char *broker_decl_alias(const char *name, size_t n)
{
	if (broker_decl_is_identifier(name, n))
		return NULL;
	char *a = malloc(n + 1);
	size_t k = 0;
	if (!a)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)name[i];
		if (ch >= 0x80) {
			/* One UTF-16 unit per character below U+10000, two above. */
			if ((ch & 0xC0) == 0x80)
				continue;
			a[k++] = '_';
			if (ch >= 0xF0)
				a[k++] = '_';
			continue;
		}
		a[k++] = is_ident_char(ch) ? (char)ch : '_';
	}
	a[k] = '\0';
	if (!broker_decl_is_identifier(a, k) || is_reserved(a)) {
		free(a);
		return NULL;
	}
	return a;
}

