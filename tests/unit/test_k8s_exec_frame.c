/* test_k8s_exec_frame.c - k8s/api/exec_frame.c on the v5 transcript fixture,
 * every fragmentation of it, builders, and malformed messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "k8s/api/exec_frame.h"
#include "k8s/api/status.h"
#include "test_k8s_fixture.h"

struct frame {
	int to_server;
	unsigned char *bytes;
	size_t len;
};

static size_t unhex(const char *h, unsigned char **out)
{
	size_t n = strlen(h) / 2;
	*out = malloc(n ? n : 1);
	for (size_t i = 0; i < n; i++) {
		unsigned v = 0;
		sscanf(h + 2 * i, "%2x", &v);
		(*out)[i] = (unsigned char)v;
	}
	return n;
}

/* Data frames of the transcript (the close control frame is not one). */
static size_t load_transcript(struct frame *f, size_t max)
{
	json_t *root = json_load_file(FIXTURE_DIR "exec-v5-transcript.json", 0, NULL);
	assert_non_null(root);
	assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(
	                    root, "response"), "headers"), "Sec-WebSocket-Protocol")), "v5.channel.k8s.io");
	size_t n = 0, i;
	json_t *fr;
	json_array_foreach(json_object_get(root, "frames"), i, fr) {
		const char *hex = json_string_value(json_object_get(fr, "hex"));
		if (!hex)
			continue;
		assert_true(n < max);
		f[n].to_server = strcmp(json_string_value(json_object_get(fr, "dir")), "client->server") == 0;
		f[n].len = unhex(hex, &f[n].bytes);
		n++;
	}
	json_decref(root);
	return n;
}

static void free_frames(struct frame *f, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(f[i].bytes);
}

static void test_transcript_demux(void **state)
{
	(void)state;
	struct frame f[16];
	size_t n = load_transcript(f, 16);
	assert_int_equal(n, 6);
	struct k8s_exec_msg m;
	struct cp_err err;

	/* The connected message: stdout with no data. */
	assert_int_equal(k8s_exec_frame_parse(f[0].bytes, f[0].len, K8S_EXEC_V5, &m, &err), 0);
	assert_int_equal(m.channel, K8S_EXEC_STDOUT);
	assert_int_equal(m.len, 0);

	/* Our stdin frame and CLOSE are what the builders produce. */
	static const char script[] = "console.log(\"hi\");console.error(\"oops\");process.exit(3)\n";
	unsigned char buf[256];
	size_t w = 0;
	assert_int_equal(k8s_exec_frame_data(K8S_EXEC_STDIN, script, strlen(script), buf, sizeof buf, &w, &err), 0);
	assert_int_equal(w, f[1].len);
	assert_memory_equal(buf, f[1].bytes, w);
	unsigned char cl[2];
	k8s_exec_frame_close(K8S_EXEC_STDIN, cl);
	assert_int_equal(f[2].len, 2);
	assert_memory_equal(cl, f[2].bytes, 2);
	/* A server accepts what we send: the codec parses them back. */
	assert_int_equal(k8s_exec_frame_parse(f[1].bytes, f[1].len, K8S_EXEC_V5, &m, &err), 0);
	assert_int_equal(m.channel, K8S_EXEC_STDIN);
	assert_int_equal(k8s_exec_frame_parse(f[2].bytes, f[2].len, K8S_EXEC_V5, &m, &err), 0);
	assert_int_equal(m.channel, K8S_EXEC_CLOSE);
	assert_int_equal(m.closed_channel, K8S_EXEC_STDIN);

	assert_int_equal(k8s_exec_frame_parse(f[3].bytes, f[3].len, K8S_EXEC_V5, &m, &err), 0);
	assert_int_equal(m.channel, K8S_EXEC_STDOUT);
	assert_int_equal(m.len, 3);
	assert_memory_equal(m.data, "hi\n", 3);
	assert_int_equal(k8s_exec_frame_parse(f[4].bytes, f[4].len, K8S_EXEC_V5, &m, &err), 0);
	assert_int_equal(m.channel, K8S_EXEC_STDERR);
	assert_memory_equal(m.data, "oops\n", 5);
	assert_int_equal(k8s_exec_frame_parse(f[5].bytes, f[5].len, K8S_EXEC_V4, &m, &err), 0);
	assert_int_equal(m.channel, K8S_EXEC_ERROR);
	int code = -1;
	assert_int_equal(k8s_status_exec(m.data, m.len, &code, NULL, &err), 0);
	assert_int_equal(code, 3);
	free_frames(f, n);
}

/* Split every server message at every position, and into single bytes:
 * the pieces concatenate back to the payload, channel known on each. */
static void test_transcript_fragmented(void **state)
{
	(void)state;
	struct frame f[16];
	size_t n = load_transcript(f, 16);
	struct k8s_exec_reasm *r = k8s_exec_reasm_new(K8S_EXEC_V5, 1 << 20);
	for (size_t i = 0; i < n; i++) {
		if (f[i].to_server)
			continue;
		for (size_t step = 1; step <= f[i].len; step++) {
			unsigned char got[1024];
			size_t glen = 0;
			int ch = -2, saw_final = 0;
			for (size_t off = 0; off < f[i].len || off == 0; off += step) {
				size_t c = f[i].len - off < step ? f[i].len - off : step;
				struct k8s_exec_msg m;
				int rc = k8s_exec_reasm_feed(r, f[i].bytes + off, c, off == 0,
				                             off + c >= f[i].len, &m, NULL);
				assert_true(rc == 0 || rc == 1);
				if (rc == 1) {
					assert_int_equal(m.channel, f[i].bytes[0]);
					assert_true(ch == -2 || ch == m.channel);
					ch = m.channel;
					memcpy(got + glen, m.data, m.len);
					glen += m.len;
					saw_final |= m.final;
				}
				if (off + c >= f[i].len)
					break;
			}
			assert_int_equal(saw_final, 1);
			assert_int_equal(glen, f[i].len - 1);
			assert_memory_equal(got, f[i].bytes + 1, glen);
		}
	}
	/* The error channel arrives whole even when fragmented. */
	struct k8s_exec_msg m;
	size_t half = f[5].len / 2;
	assert_int_equal(k8s_exec_reasm_feed(r, f[5].bytes, half, 1, 0, &m, NULL), 0);
	assert_int_equal(k8s_exec_reasm_feed(r, f[5].bytes + half, 0, 0, 0, &m, NULL), 0);
	assert_int_equal(k8s_exec_reasm_feed(r, f[5].bytes + half, f[5].len - half, 0, 1, &m, NULL), 1);
	assert_int_equal(m.channel, K8S_EXEC_ERROR);
	assert_int_equal(m.len, f[5].len - 1);
	int code = -1;
	assert_int_equal(k8s_status_exec(m.data, m.len, &code, NULL, NULL), 0);
	assert_int_equal(code, 3);
	k8s_exec_reasm_free(r);
	free_frames(f, n);
}

static void test_parse_broken(void **state)
{
	(void)state;
	struct k8s_exec_msg m;
	struct cp_err err;
	assert_int_equal(k8s_exec_frame_parse("", 0, K8S_EXEC_V5, &m, &err), 0);
	assert_int_equal(m.channel, K8S_EXEC_NONE);
	static const unsigned char c5[] = {5, 'x'};
	assert_int_equal(k8s_exec_frame_parse(c5, 2, K8S_EXEC_V5, &m, &err), CP_E_PARSE);
	assert_non_null(strstr(err.msg, "unknown channel 5"));
	static const unsigned char close_v4[] = {255, 0};
	assert_int_equal(k8s_exec_frame_parse(close_v4, 2, K8S_EXEC_V4, &m, &err), CP_E_PARSE);
	static const unsigned char close1[] = {255};
	assert_int_equal(k8s_exec_frame_parse(close1, 1, K8S_EXEC_V5, &m, &err), CP_E_PARSE);
	static const unsigned char close3[] = {255, 0, 0};
	assert_int_equal(k8s_exec_frame_parse(close3, 3, K8S_EXEC_V5, &m, &err), CP_E_PARSE);
	static const unsigned char close9[] = {255, 9};
	assert_int_equal(k8s_exec_frame_parse(close9, 2, K8S_EXEC_V5, &m, &err), CP_E_PARSE);
	static const unsigned char close_out[] = {255, 1};
	assert_int_equal(k8s_exec_frame_parse(close_out, 2, K8S_EXEC_V5, &m, &err), 0);
	assert_int_equal(m.closed_channel, 1);
	static const unsigned char rs[] = {4, '{', '}'};
	assert_int_equal(k8s_exec_frame_parse(rs, 3, K8S_EXEC_V4, &m, &err), 0);
	assert_int_equal(m.channel, K8S_EXEC_RESIZE);
}

static void test_builders(void **state)
{
	(void)state;
	unsigned char buf[64];
	size_t w = 0;
	struct cp_err err;
	assert_int_equal(k8s_exec_frame_data(K8S_EXEC_STDIN, "abc", 3, buf, 3, &w, &err), CP_E_TOO_BIG);
	assert_int_equal(k8s_exec_frame_data(K8S_EXEC_STDIN, "abc", 3, buf, 4, &w, &err), 0);
	assert_int_equal(w, 4);
	assert_int_equal(k8s_exec_frame_data(K8S_EXEC_STDOUT, "abc", 3, buf, 64, &w, &err),
	                 CP_E_INVALID_REQUEST);
	assert_int_equal(k8s_exec_frame_data(K8S_EXEC_STDIN, NULL, 0, buf, 1, &w, &err), 0);
	assert_int_equal(w, 1);
	assert_int_equal(buf[0], 0);
	assert_int_equal(k8s_exec_frame_resize(80, 24, buf, sizeof buf, &w, &err), 0);
	assert_int_equal(buf[0], 4);
	assert_memory_equal(buf + 1, "{\"Width\":80,\"Height\":24}", w - 1);
	assert_int_equal(k8s_exec_frame_resize(80, 24, buf, 10, &w, &err), CP_E_TOO_BIG);
}

static void test_reasm_limits_and_sequence(void **state)
{
	(void)state;
	struct k8s_exec_reasm *r = k8s_exec_reasm_new(K8S_EXEC_V5, 8);
	struct k8s_exec_msg m;
	struct cp_err err;
	/* Exactly max_msg payload bytes pass; one more fails. */
	static const unsigned char ok[] = {1, 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'};
	assert_int_equal(k8s_exec_reasm_feed(r, ok, sizeof ok, 1, 1, &m, &err), 1);
	assert_int_equal(m.len, 8);
	assert_int_equal(k8s_exec_reasm_feed(r, ok, 5, 1, 0, &m, &err), 1);
	assert_int_equal(k8s_exec_reasm_feed(r, ok + 1, 4, 0, 0, &m, &err), 1);
	assert_int_equal(k8s_exec_reasm_feed(r, "x", 1, 0, 1, &m, &err), CP_E_TOO_BIG);
	/* After an error a continuation is out of sequence. */
	assert_int_equal(k8s_exec_reasm_feed(r, "x", 1, 0, 1, &m, &err), CP_E_PARSE);
	static const unsigned char e[] = {3, '{', '}', '1', '2', '3', '4', '5', '6', '7'};
	assert_int_equal(k8s_exec_reasm_feed(r, e, sizeof e, 1, 1, &m, &err), CP_E_TOO_BIG);
	/* A first fragment while a message is open. */
	assert_int_equal(k8s_exec_reasm_feed(r, ok, 2, 1, 0, &m, &err), 1);
	assert_int_equal(k8s_exec_reasm_feed(r, ok, 2, 1, 0, &m, &err), CP_E_PARSE);
	/* Empty message, and a channel byte that comes in a later fragment. */
	assert_int_equal(k8s_exec_reasm_feed(r, "", 0, 1, 1, &m, &err), 0);
	assert_int_equal(k8s_exec_reasm_feed(r, "", 0, 1, 0, &m, &err), 0);
	static const unsigned char two[] = {2, 'z'};
	assert_int_equal(k8s_exec_reasm_feed(r, two, 2, 0, 1, &m, &err), 1);
	assert_int_equal(m.channel, 2);
	assert_int_equal(m.len, 1);
	assert_int_equal(m.first, 1);
	/* Unknown channel; v5 CLOSE fragmented. */
	static const unsigned char bad[] = {7, 1};
	assert_int_equal(k8s_exec_reasm_feed(r, bad, 2, 1, 1, &m, &err), CP_E_PARSE);
	static const unsigned char cl[] = {255, 0};
	assert_int_equal(k8s_exec_reasm_feed(r, cl, 1, 1, 0, &m, &err), 0);
	assert_int_equal(k8s_exec_reasm_feed(r, cl + 1, 1, 0, 1, &m, &err), 1);
	assert_int_equal(m.channel, K8S_EXEC_CLOSE);
	assert_int_equal(m.closed_channel, 0);
	static const unsigned char cl3[] = {255, 0, 1};
	assert_int_equal(k8s_exec_reasm_feed(r, cl3, 3, 1, 1, &m, &err), CP_E_PARSE);
	k8s_exec_reasm_free(r);
	assert_null(k8s_exec_reasm_new(K8S_EXEC_V4, 0));
	/* v4 has no CLOSE. */
	r = k8s_exec_reasm_new(K8S_EXEC_V4, 8);
	assert_int_equal(k8s_exec_reasm_feed(r, cl, 2, 1, 1, &m, &err), CP_E_PARSE);
	k8s_exec_reasm_free(r);
}

/* 10 MB of stdout in 4 KiB fragments streams through without buffering. */
static void test_reasm_large_stdout(void **state)
{
	(void)state;
	size_t total = 10u * 1024 * 1024;
	struct k8s_exec_reasm *r = k8s_exec_reasm_new(K8S_EXEC_V5, 32u << 20);
	unsigned char frag[4096];
	memset(frag, 'y', sizeof frag);
	frag[0] = 1;
	size_t got = 0, sent = 0;
	struct k8s_exec_msg m;
	while (sent < total + 1) {
		size_t c = total + 1 - sent < sizeof frag ? total + 1 - sent : sizeof frag;
		int rc = k8s_exec_reasm_feed(r, frag, c, sent == 0, sent + c == total + 1, &m, NULL);
		assert_int_equal(rc, 1);
		assert_int_equal(m.channel, 1);
		got += m.len;
		frag[0] = 'y';
		sent += c;
	}
	assert_int_equal(got, total);
	assert_int_equal(m.final, 1);
	k8s_exec_reasm_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_transcript_demux),
		cmocka_unit_test(test_transcript_fragmented),
		cmocka_unit_test(test_parse_broken),
		cmocka_unit_test(test_builders),
		cmocka_unit_test(test_reasm_limits_and_sequence),
		cmocka_unit_test(test_reasm_large_stdout),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
