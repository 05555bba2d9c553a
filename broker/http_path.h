/*
 * http_path.h - the pieces of an HTTP request line and headers that the
 * conversation routes (http_server_files.c) read: a percent-encoded path
 * segment and a Range header. Pure functions on untrusted bytes.
 *
 * Ownership: broker_http_pct_decode returns a new string the caller frees.
 */
#ifndef BROKER_HTTP_PATH_H
#define BROKER_HTTP_PATH_H

#include <stddef.h>

/* @n bytes of @s with every %XX decoded, as a new NUL-terminated string;
 * NULL when an escape is cut, not hex, or makes a NUL (a NUL would end the
 * name early), or out of memory. */
char *broker_http_pct_decode(const char *s, size_t n);

/* A Range header's value: "bytes=A-B" (*start A, *len B-A+1) or "bytes=A-"
 * (*len ~0ull: to the end). Return: 0, or -1 for anything else (several
 * ranges, a suffix range, B < A, trailing bytes). */
int broker_http_parse_range(const char *h, unsigned long long *start, unsigned long long *len);

#endif
