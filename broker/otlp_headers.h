/*
 * otlp_headers.h - the extra HTTP headers of the OTLP exporter's requests (a
 * hosted collector's API key, a tenant id), read from the two forms
 * operators keep them in:
 *
 *  - the OpenTelemetry environment variable's form
 *    (OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_TRACES_HEADERS):
 *    "name=value,name2=value2", blanks around each part ignored, values
 *    percent-encoded (%2C is a comma);
 *  - a headers file (--otlp-headers-file, a secret file): one
 *    "Name: value" per line, blank lines and lines starting with # skipped.
 *
 * Both are checked whole before anything is kept: a name must be an HTTP
 * token, a value must hold no control character but tab (so no header can
 * be smuggled in through a CR or LF), a name may come once, and the
 * headers codepod writes itself (Content-Type, Content-Length, Host,
 * Expect, Transfer-Encoding, Connection) cannot be replaced. At most
 * BROKER_OTLP_MAX_HEADERS headers of at most BROKER_OTLP_MAX_HEADER_BYTES
 * each. A message names the entry (by position or line) and the rule,
 * never a value: values are credentials.
 *
 * Ownership: *list belongs to the caller (curl_slist_free_all); on success
 * the headers are appended to it as "Name: value" strings, on failure it is
 * left as it was. Context: any thread; no I/O.
 */
#ifndef BROKER_OTLP_HEADERS_H
#define BROKER_OTLP_HEADERS_H

#include <stddef.h>

#include <curl/curl.h>

#include "base/err.h"

#define BROKER_OTLP_MAX_HEADERS 32
#define BROKER_OTLP_MAX_HEADER_BYTES 8192

/* @text: the variable's value (NUL-terminated); @what names it in messages. */
int broker_otlp_headers_env(const char *text, const char *what, struct curl_slist **list,
                            struct cp_err *err);

/* @text: @len bytes of the file (a NUL in them is refused); @what names it. */
int broker_otlp_headers_file(const char *text, size_t len, const char *what,
                             struct curl_slist **list, struct cp_err *err);

#endif
