/*
 * traceparent.h - the W3C trace context grammar: the traceparent and
 * tracestate headers (https://www.w3.org/TR/trace-context/ names them; this
 * file is the one place that reads and writes them) and random trace and
 * span ids.
 *
 * Ownership: the caller owns every buffer; nothing here allocates.
 * Context: pure, except cp_trace_random, which draws from OpenSSL's
 * RAND_bytes.
 */
#ifndef CP_TRACEPARENT_H
#define CP_TRACEPARENT_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define CP_TRACE_ID_LEN 16
#define CP_SPAN_ID_LEN 8
/* "00-" 32 hex "-" 16 hex "-" 2 hex, and its NUL. */
#define CP_TRACEPARENT_LEN 55
#define CP_TRACESTATE_MAX 512

struct cp_trace_ctx {
	uint8_t trace_id[CP_TRACE_ID_LEN];
	uint8_t span_id[CP_SPAN_ID_LEN];
	uint8_t flags; /* bit 0: sampled */
};

/* Reads a traceparent of @len bytes. Version 00 must be exactly 55
 * characters; a later version (not ff) is read by its first four fields and
 * what follows must start with '-'. Hex is lowercase only; an all-zero
 * trace or span id is refused. 0, or CP_E_INVALID_REQUEST with why in err
 * (the reason names the part, never echoes the value). */
int cp_traceparent_parse(const char *s, size_t len, struct cp_trace_ctx *out,
                         struct cp_err *err);

/* Writes version 00 of @c into @out (CP_TRACEPARENT_LEN + 1 bytes, NUL-ended). */
void cp_traceparent_format(const struct cp_trace_ctx *c, char out[CP_TRACEPARENT_LEN + 1]);

/* Checks a tracestate of @len bytes: at most 512 bytes and 32 list members,
 * each key=value as the grammar says (empty members allowed). 0, or
 * CP_E_INVALID_REQUEST with why in err. */
int cp_tracestate_check(const char *s, size_t len, struct cp_err *err);

/* @n random bytes, never all zero (a zero id is invalid): 0, or
 * CP_E_INTERNAL when there is no randomness. */
int cp_trace_random(uint8_t *out, size_t n, struct cp_err *err);

/* Lowercase hex of @n bytes into @out (2n + 1 bytes, NUL-ended). */
void cp_trace_hex(const uint8_t *in, size_t n, char *out);

#endif
