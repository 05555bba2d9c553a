/* fuzz_logstream.c - the live-output coalescer (broker/logstream.c) on
 * arbitrary pieces.
 *
 * Byte 0 sets max_bytes (1..256), byte 1 max_segments (1..16). The rest is
 * a list of records: a control byte c, then (c >> 2) bytes of output on
 * stream (c & 1); c & 2 flushes after the piece. Checked (abort() on
 * failure): every emitted text is valid UTF-8 without NUL (jansson accepts
 * it), a batch holds at most max_segments messages (+1 for a drop count
 * alone), nothing is pending after a flush, and the dropped counts never
 * exceed the bytes fed.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "broker/logstream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct tally {
	unsigned long long dropped;
	size_t in_batch, max_segs;
};

static void on_emit(void *ud, int is_stderr, const char *text, size_t len,
                    unsigned long long dropped)
{
	struct tally *t = ud;
	json_t *s = json_stringn(text, len); /* NULL when not valid UTF-8 */
	if (!s || strlen(text) != len || (is_stderr != 0 && is_stderr != 1))
		abort();
	json_decref(s);
	if (++t->in_batch > t->max_segs + 1)
		abort();
	t->dropped += dropped;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t max_bytes = (size_t)data[0] + 1, max_segs = (size_t)(data[1] % 16) + 1;
	struct broker_logstream *ls = broker_logstream_new(max_bytes, max_segs);
	if (!ls)
		abort();
	struct tally t = { 0, 0, max_segs };
	size_t i = 2;
	while (i < size) {
		uint8_t c = data[i++];
		size_t n = (size_t)(c >> 2);
		if (n > size - i)
			n = size - i;
		broker_logstream_feed(ls, c & 1, (const char *)data + i, n);
		i += n;
		if (c & 2) {
			t.in_batch = 0;
			broker_logstream_flush(ls, on_emit, &t);
			if (broker_logstream_pending(ls))
				abort();
		}
	}
	t.in_batch = 0;
	broker_logstream_flush(ls, on_emit, &t);
	if (t.dropped > size)
		abort();
	broker_logstream_free(ls);
	return 0;
}
