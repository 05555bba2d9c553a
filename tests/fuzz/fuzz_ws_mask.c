/* fuzz_ws_mask.c - the WebSocket mask check's parse (broker/ws_mask.h) on
 * arbitrary client bytes: a request head and frames as a client could send
 * them. The first byte picks how the rest is split between reads; whatever
 * the split, the parse ends in the same state as when fed whole (the bytes
 * lws reads arrive in any pieces), and nothing may crash. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "broker/ws_mask.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t step = (size_t)data[0] % 17 + 1;
	data++;
	size--;
	struct broker_wsmask whole, pieces;
	memset(&whole, 0, sizeof whole);
	memset(&pieces, 0, sizeof pieces);
	broker_wsmask_feed(&whole, data, size);
	for (size_t i = 0; i < size; i += step)
		broker_wsmask_feed(&pieces, data + i, size - i < step ? size - i : step);
	if (whole.in_frames != pieces.in_frames || whole.unmasked != pieces.unmasked ||
	    whole.fstate != pieces.fstate || whole.len != pieces.len || whole.need != pieces.need)
		abort();
	return 0;
}
