/* Unit tests for broker/ws_mask.c's parse: the first request head is
 * skipped, then every client frame header is read (7-bit, 16-bit and 64-bit
 * lengths, the mask and its key) and its payload skipped, however the bytes
 * are split between reads; one frame without a mask is remembered. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "broker/ws_mask.h"

static const char head[] = "\r\nGET /v1/session HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n";

/* A client frame: FIN + text, @len bytes of 'x' (payload bytes that look
 * like frame headers when misread), masked or not. */
static size_t frame(unsigned char *out, size_t len, int masked)
{
	size_t n = 0;
	out[n++] = 0x81;
	unsigned char m = masked ? 0x80 : 0;
	if (len < 126) {
		out[n++] = (unsigned char)(m | len);
	} else if (len < 65536) {
		out[n++] = m | 126;
		out[n++] = (unsigned char)(len >> 8);
		out[n++] = (unsigned char)len;
	} else {
		out[n++] = m | 127;
		for (int i = 7; i >= 0; i--)
			out[n++] = (unsigned char)((uint64_t)len >> (8 * i));
	}
	if (masked) {
		memcpy(out + n, "\x11\x22\x33\x44", 4);
		n += 4;
	}
	memset(out + n, 0x01, len); /* 0x01 as a header byte: an unmasked length */
	return n + len;
}

/* The stream fed in pieces of @step bytes. */
static int unmasked_after(const unsigned char *s, size_t n, size_t step)
{
	struct broker_wsmask m;
	memset(&m, 0, sizeof m);
	for (size_t i = 0; i < n; i += step)
		broker_wsmask_feed(&m, s + i, n - i < step ? n - i : step);
	assert_true(m.in_frames);
	return m.unmasked;
}

static void test_masked_frames_of_every_length_pass(void **state)
{
	(void)state;
	size_t cap = 300000;
	unsigned char *s = malloc(cap);
	assert_non_null(s);
	size_t n = strlen(head);
	memcpy(s, head, n);
	static const size_t lens[] = { 0, 1, 125, 126, 127, 65535, 65536, 70000 };
	for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
		n += frame(s + n, lens[i], 1);
	static const size_t steps[] = { 1, 2, 3, 7, 4096, 300000 };
	for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
		assert_false(unmasked_after(s, n, steps[i]));
	/* one unmasked frame among them, anywhere */
	for (size_t at = 0; at < 3; at++) {
		size_t m = strlen(head);
		for (size_t i = 0; i < 3; i++)
			m += frame(s + m, lens[5 + i], i != at);
		for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
			assert_true(unmasked_after(s, m, steps[i]));
	}
	free(s);
}

static void test_the_head_is_not_read_as_frames(void **state)
{
	(void)state;
	struct broker_wsmask m;
	memset(&m, 0, sizeof m);
	/* a head alone, "\r\n\r" split from "\n" */
	broker_wsmask_feed(&m, (const unsigned char *)head, strlen(head) - 1);
	assert_false(m.in_frames);
	broker_wsmask_feed(&m, (const unsigned char *)"\n", 1);
	assert_true(m.in_frames);
	assert_false(m.unmasked);
	/* an unmasked frame right after it, in the same read */
	unsigned char s[256];
	size_t n = strlen(head);
	memcpy(s, head, n);
	n += frame(s + n, 5, 0);
	assert_true(unmasked_after(s, n, sizeof s));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_masked_frames_of_every_length_pass),
		cmocka_unit_test(test_the_head_is_not_read_as_frames),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
