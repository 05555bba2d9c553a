/*
 * logstream.h - live output of one execution ("stream": true), coalesced
 * and bounded between two flushes.
 *
 * Output arrives in pieces (frames of at most 16 KiB, raw bytes of a
 * subprocess) on two streams. broker_logstream_feed() appends a piece to the
 * segment of its stream when the last segment is of that stream (coalescing),
 * else opens a new segment, so order across the streams is kept. Between two
 * flushes at most max_bytes bytes in at most max_segments segments are kept;
 * what does not fit is dropped and counted (never a piece of a UTF-8
 * character kept: a cut backs off to a character start). Flushing hands
 * every segment, oldest first, to the emitter as valid UTF-8 (cp_utf8_sanitize:
 * ill-formed bytes become U+FFFD), the last one with the count of bytes
 * dropped after it, and empties the stream.
 *
 * Ownership: broker_logstream_new() returns a new object (free with
 * broker_logstream_free()); pieces fed are copied; text given to the emitter
 * is borrowed for the call.
 *
 * Context: pure (no I/O); single thread per object.
 */
#ifndef BROKER_LOGSTREAM_H
#define BROKER_LOGSTREAM_H

#include <stddef.h>

struct broker_logstream;

typedef void (*broker_logstream_emit_fn)(void *ud, int is_stderr, const char *text, size_t len,
                                         unsigned long long dropped);

/* NULL when allocation failed or a bound is 0. */
struct broker_logstream *broker_logstream_new(size_t max_bytes, size_t max_segments);
void broker_logstream_free(struct broker_logstream *ls);

/* Append @len bytes of @buf (copied) to the stream @is_stderr (0 or 1). */
void broker_logstream_feed(struct broker_logstream *ls, int is_stderr, const char *buf, size_t len);

/* 1 when something (text or a drop count) waits for a flush. */
int broker_logstream_pending(const struct broker_logstream *ls);

/* Emit every segment, oldest first, then empty the stream. A segment whose
 * text cannot be made (out of memory) is counted as dropped. */
void broker_logstream_flush(struct broker_logstream *ls, broker_logstream_emit_fn emit, void *ud);

#endif
