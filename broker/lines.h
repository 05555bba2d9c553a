/*
 * lines.h - bounded JSON-lines splitter for the session protocol over stdio.
 *
 * The session protocol is one JSON object per line. broker_lines_feed()
 * splits a byte stream on '\n' and hands each line (without the '\n' and
 * without one trailing '\r') to sink->line. Empty lines (also a lone "\r")
 * are skipped. A line whose length (counted the same way) is over max_line
 * is never buffered: its bytes are counted and dropped, and sink->oversize
 * reports its length when it ends. Memory is fixed at creation: max_line + 1
 * bytes (the + 1 holds a trailing '\r'), allocated by broker_lines_new(), so
 * feeding never allocates and never fails; a 100 MB line costs no more.
 * Lines entirely inside one fed buffer are passed straight from it (no copy).
 *
 * Ownership: broker_lines_new() returns a new splitter, freed with
 * broker_lines_free(). Lines given to the sink are borrowed for the duration
 * of the callback. The sink and ud are borrowed for each call. Callbacks may
 * not free the splitter nor feed it again.
 *
 * Context: pure (no I/O); single thread per splitter.
 */
#ifndef BROKER_LINES_H
#define BROKER_LINES_H

#include <stddef.h>

struct broker_lines;

struct broker_lines_sink {
	/* without the \n (and without a trailing \r); borrowed; len >= 1 */
	void (*line)(void *ud, const char *line, size_t len);
	/* a line longer than max ended (its bytes were discarded, never buffered);
	 * len is its length counted like a line's */
	void (*oversize)(void *ud, unsigned long long len);
};

/**
 * broker_lines_new() - a new splitter for lines of at most @max_line bytes.
 *
 * Return: a new splitter (free with broker_lines_free()), or NULL when
 * allocation failed or @max_line is SIZE_MAX.
 */
struct broker_lines *broker_lines_new(size_t max_line);

/** broker_lines_free() - free the splitter. NULL is a no-op. */
void broker_lines_free(struct broker_lines *l);

/** broker_lines_feed() - split @len bytes of @buf; calls the sink synchronously. */
void broker_lines_feed(struct broker_lines *l, const char *buf, size_t len,
                       const struct broker_lines_sink *s, void *ud);

/**
 * broker_lines_finish() - end of stream: a final unterminated line is
 * delivered (or reported oversize). The splitter is then empty again.
 */
void broker_lines_finish(struct broker_lines *l, const struct broker_lines_sink *s, void *ud);

#endif
