/* fuzz_watch.c - the watch splitter on arbitrary bytes in arbitrary chunks.
 * Byte 0 sets the chunk size and byte 1 the line limit; the rest is the
 * stream. Events are pulled after every chunk and after finish. */
#include <stddef.h>
#include <stdint.h>

#include "k8s/api/watch_stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void drain(struct k8s_watch *w)
{
	struct k8s_watch_event ev;
	int rc;
	while ((rc = k8s_watch_next(w, &ev, NULL)) != 0) {
		if (rc == 1)
			k8s_watch_event_release(&ev);
		else if (rc != CP_E_PARSE)
			break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t chunk = (size_t)data[0] + 1;
	size_t max_line = data[1] < 128 ? (size_t)data[1] * 64 + 1 : 1u << 20;
	data += 2;
	size -= 2;
	struct k8s_watch *w = k8s_watch_new(max_line);
	if (!w)
		return 0;
	for (size_t off = 0; off < size; off += chunk) {
		size_t c = size - off < chunk ? size - off : chunk;
		if (k8s_watch_feed(w, data + off, c, NULL) != 0)
			break;
		drain(w);
	}
	k8s_watch_finish(w, NULL);
	drain(w);
	k8s_watch_free(w);
	return 0;
}
