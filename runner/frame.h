/*
 * frame.h - parser of the runner -> codepod stdout stream (runner/PROTOCOL.md).
 *
 * The runner's stdout carries frames, each a header line
 * "\x1ecp1 <nonce> <kind> <len>\n" followed by <len> bytes of payload, mixed
 * with raw program output (anything that is not a valid header with our
 * nonce). codepod_frame_feed() splits the stream: raw bytes go to sink->raw,
 * complete frames to sink->frame. Pure: no I/O, no loop; callbacks run
 * synchronously inside codepod_frame_feed()/codepod_frame_finish().
 *
 * Scanning: bytes up to the next 0x1E are raw. At a 0x1E the parser checks
 * for exactly `\x1ecp1 <nonce> <K> <decimal len>\n`, K a kind of
 * runner/frame_kinds.def, nonce equal to ours (compared in constant time),
 * len plain decimal (no sign; leading zeros allowed), at most 20 digits, no
 * overflow. A candidate that turns out not to be a header makes its 0x1E
 * byte raw and scanning resumes right after it, so garbage never swallows a
 * following real frame.
 * A header split across feeds is held back (at most CODEPOD_FRAME_HDR_MAX bytes).
 * A payload is delivered whole: straight from the caller's buffer when it is
 * there entirely, else collected across feeds (at most max_payload bytes).
 *
 * Ownership: codepod_frame_parser_new() returns a new parser, freed with
 * codepod_frame_parser_free(). Buffers passed to the sink are borrowed for the
 * duration of the callback only. The sink and its ud are borrowed for the
 * duration of each call. Callbacks may not free the parser nor feed it
 * again (no re-entry).
 *
 * Context: any single thread; a parser is not shared between threads.
 */
#ifndef CODEPOD_FRAME_H
#define CODEPOD_FRAME_H

#include <stddef.h>

#include "base/err.h"

/* Longest header the parser holds back; real headers are at most 61 bytes. */
#define CODEPOD_FRAME_HDR_MAX 64
/* Length of the nonce: lowercase hex characters. */
#define CODEPOD_FRAME_NONCE_LEN 32

/* The frame kinds: CODEPOD_FRAME_READY = 'Y' and so on (runner/frame_kinds.def). */
enum codepod_frame_kind {
#define CODEPOD_FRAME_KIND(letter, name, final) CODEPOD_FRAME_##name = letter,
#include "runner/frame_kinds.def"
#undef CODEPOD_FRAME_KIND
};

struct codepod_frame_parser; /* opaque */

struct codepod_frame_sink {
	/* bytes that are not part of a valid frame (raw program output); borrowed for the call.
	 * May be NULL: raw bytes are then dropped. */
	void (*raw)(void *ud, const char *buf, size_t len);
	/* one complete frame; payload borrowed for the call (not NUL-terminated;
	 * never NULL, even when len is 0). May be NULL: frames are then dropped. */
	void (*frame)(void *ud, char kind, const char *payload, size_t len);
};

/**
 * codepod_frame_parser_new() - a new parser.
 * @nonce: 32 lowercase hex characters (more characters are ignored); copied.
 * @max_payload: a header announcing more than this fails the feed.
 *
 * Return: a new parser (free with codepod_frame_parser_free()), or NULL when the
 * nonce is not 32 lowercase hex characters or allocation failed.
 */
struct codepod_frame_parser *codepod_frame_parser_new(const char *nonce, size_t max_payload);

/** codepod_frame_parser_free() - free a parser and its buffers. NULL is a no-op. */
void codepod_frame_parser_free(struct codepod_frame_parser *p);

/**
 * codepod_frame_feed() - feed bytes of the stream; calls the sink synchronously.
 * @buf: @len bytes, borrowed for the call.
 * @sink, @ud: callbacks and their argument.
 * @err: filled on failure; may be NULL.
 *
 * Return: 0, or
 *  CP_E_TOO_BIG - a header announced a payload over max_payload;
 *  CP_E_NOMEM   - the payload buffer could not grow.
 * Both are sticky: later feeds return the same code at once and call nothing.
 * Raw bytes and frames before the failing header have been delivered.
 */
int codepod_frame_feed(struct codepod_frame_parser *p, const char *buf, size_t len,
                  const struct codepod_frame_sink *sink, void *ud, struct cp_err *err);

/**
 * codepod_frame_finish() - end of stream.
 *
 * Whatever is held back is given to sink->raw: a partial header (its bytes,
 * 0x1E included), or the payload bytes received so far of a frame cut short
 * (the header itself is not repeated). The parser is then back at its
 * initial state (a sticky error stays; after one, finish delivers nothing).
 *
 * Return: 1 if a frame was cut short (header complete, payload partial),
 * else 0.
 */
int codepod_frame_finish(struct codepod_frame_parser *p, const struct codepod_frame_sink *sink, void *ud);

/**
 * codepod_frame_header() - write "\x1ecp1 NONCE KIND LEN\n" and a NUL into @out.
 * @cap: size of @out; must hold the header and the NUL (64 is always enough).
 *
 * For tests and tools. Return: the header's length (without the NUL), or -1
 * if the nonce is not 32 lowercase hex, the kind is not one of
 * runner/frame_kinds.def, or @cap is too small.
 */
int codepod_frame_header(char *out, size_t cap, const char *nonce, char kind, size_t len);

#endif
