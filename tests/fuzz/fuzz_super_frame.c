/* fuzz_super_frame.c - the supervisor stream decoder (k8s/backend/super_frame.h) on
 * arbitrary bytes: byte 0 is a chunk size (1..256), the rest the stream,
 * parsed whole and in chunks; both must agree on every frame and on the
 * error, and no payload piece may go past its frame's declared length. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "k8s/backend/super_frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct rec {
	unsigned long sum;    /* a digest of everything the sink saw, in order */
	size_t frames, bytes;
};

static void mix(struct rec *r, char kind, uint32_t chan, const char *buf, size_t len)
{
	r->sum = r->sum * 31u + (unsigned char)kind;
	r->sum = r->sum * 31u + chan;
	for (size_t i = 0; i < len; i++)
		r->sum = r->sum * 131u + (unsigned char)buf[i];
	r->bytes += len;
}

static int on_data(void *ud, char kind, uint32_t chan, const char *buf, size_t len)
{
	if (len > KUBE_SFRAME_MAX_DATA)
		abort();
	mix(ud, kind, chan, buf, len);
	return 0;
}

static int on_ctl(void *ud, char kind, uint32_t chan, const char *buf, size_t len)
{
	struct rec *r = ud;
	if (len > KUBE_SFRAME_MAX_CTL || !strchr("HXFD", kind))
		abort();
	r->frames++;
	mix(r, (char)(kind + 1), chan, buf, len);
	return 0;
}

static const struct kube_sframe_sink sink = { on_data, on_ctl };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t chunk = (size_t)data[0] + 1;
	const char *s = (const char *)data + 1;
	size_t n = size - 1;
	struct kube_sframe_parser a, b;
	struct rec ra = { 0, 0, 0 }, rb = { 0, 0, 0 };
	const char *wa = NULL, *wb = NULL;
	kube_sframe_init(&a);
	kube_sframe_init(&b);
	int ea = kube_sframe_feed(&a, s, n, &sink, &ra, &wa);
	int eb = 0;
	for (size_t off = 0; off < n && eb == 0; off += chunk)
		eb = kube_sframe_feed(&b, s + off, n - off < chunk ? n - off : chunk, &sink, &rb, &wb);
	/* Data pieces may be split differently; whole frames, errors and the
	 * byte count may not. */
	if (ea != eb || ra.frames != rb.frames || ra.bytes != rb.bytes)
		abort();
	if (ea < 0 && (!wa || !wb))
		abort();
	return 0;
}
