/* test_k8s_watch_stream.c - k8s/api/watch_stream.c on the watch fixtures, every
 * chunking of them, pod fixtures wrapped as events, and broken streams. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "k8s/api/watch_stream.h"
#include "test_k8s_fixture.h"

static const enum k8s_watch_type pod_types[] = {
	K8S_WATCH_ADDED, K8S_WATCH_MODIFIED, K8S_WATCH_MODIFIED, K8S_WATCH_MODIFIED,
	K8S_WATCH_BOOKMARK, K8S_WATCH_MODIFIED, K8S_WATCH_DELETED,
};

/* Feed @data in chunks of @chunk bytes, draining events; returns the count
 * and checks types against pod_types and that RVs are present. */
static size_t run_pod_stream(const char *data, size_t len, size_t chunk, char last_rv[32])
{
	struct k8s_watch *w = k8s_watch_new(64 * 1024);
	assert_non_null(w);
	size_t n = 0;
	struct k8s_watch_event ev;
	for (size_t off = 0; off < len; off += chunk) {
		size_t c = len - off < chunk ? len - off : chunk;
		assert_int_equal(k8s_watch_feed(w, data + off, c, NULL), 0);
		int rc;
		while ((rc = k8s_watch_next(w, &ev, NULL)) == 1) {
			assert_true(n < 7);
			assert_int_equal(ev.type, pod_types[n]);
			assert_non_null(ev.object);
			assert_non_null(ev.resource_version);
			assert_int_equal(ev.expired, 0);
			snprintf(last_rv, 32, "%s", ev.resource_version);
			k8s_watch_event_release(&ev);
			n++;
		}
		assert_int_equal(rc, 0);
	}
	assert_int_equal(k8s_watch_finish(w, NULL), 0);
	assert_int_equal(k8s_watch_next(w, &ev, NULL), 0);
	assert_int_equal(k8s_watch_pending(w), 0);
	k8s_watch_free(w);
	return n;
}

static void test_pod_stream_chunkings(void **state)
{
	(void)state;
	size_t len = 0;
	char *data = fixture_read("watch-stream-pod.jsonl", &len);
	assert_non_null(data);
	static const size_t chunks[] = {1, 2, 3, 7, 64, 1000, 4096, 1 << 20};
	for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
		char rv[32] = "";
		assert_int_equal(run_pod_stream(data, len, chunks[i], rv), 7);
		assert_string_equal(rv, "48533");
	}
	free(data);
}

static void test_pod_stream_details(void **state)
{
	(void)state;
	size_t len = 0;
	char *data = fixture_read("watch-stream-pod.jsonl", &len);
	struct k8s_watch *w = k8s_watch_new(1 << 20);
	assert_int_equal(k8s_watch_feed(w, data, len, NULL), 0);
	struct k8s_watch_event ev;
	const char *rvs[7];
	char *keep[7];
	for (int i = 0; i < 7; i++) {
		assert_int_equal(k8s_watch_next(w, &ev, NULL), 1);
		keep[i] = strdup(ev.resource_version);
		rvs[i] = keep[i];
		if (ev.type == K8S_WATCH_BOOKMARK) {
			assert_string_equal(ev.resource_version, "48460");
		} else {
			const json_t *name = json_object_get(json_object_get(ev.object, "metadata"), "name");
			assert_string_equal(json_string_value(name), "convo-7f3a9c2e1b");
		}
		if (ev.type == K8S_WATCH_DELETED)
			assert_string_equal(ev.resource_version, "48533");
		/* The object outlives the event when the caller takes a ref. */
		json_t *obj = json_incref(ev.object);
		k8s_watch_event_release(&ev);
		assert_non_null(json_object_get(obj, "kind"));
		json_decref(obj);
	}
	/* Versions are opaque but distinct here. */
	for (int i = 1; i < 7; i++)
		assert_string_not_equal(rvs[i], rvs[i - 1]);
	for (int i = 0; i < 7; i++)
		free(keep[i]);
	assert_int_equal(k8s_watch_next(w, &ev, NULL), 0);
	k8s_watch_free(w);
	free(data);
}

static void test_error_410(void **state)
{
	(void)state;
	size_t len = 0;
	char *data = fixture_read("watch-stream-error-410.jsonl", &len);
	for (size_t chunk = 1; chunk <= len; chunk += 13) {
		struct k8s_watch *w = k8s_watch_new(4096);
		int got = 0;
		struct k8s_watch_event ev;
		for (size_t off = 0; off < len; off += chunk) {
			size_t c = len - off < chunk ? len - off : chunk;
			assert_int_equal(k8s_watch_feed(w, data + off, c, NULL), 0);
			while (k8s_watch_next(w, &ev, NULL) == 1) {
				assert_int_equal(ev.type, K8S_WATCH_ERROR);
				assert_int_equal(ev.expired, 1);
				assert_int_equal(ev.status.code, 410);
				assert_string_equal(ev.status.reason, "Expired");
				assert_string_equal(ev.status.message, "too old resource version: 48001 (48199)");
				assert_null(ev.resource_version);
				k8s_watch_event_release(&ev);
				got++;
			}
		}
		k8s_watch_finish(w, NULL);
		assert_int_equal(k8s_watch_next(w, &ev, NULL), 0);
		assert_int_equal(got, 1);
		k8s_watch_free(w);
	}
	free(data);
	/* Older servers say Gone; key on the code. CRLF endings are accepted. */
	static const char gone[] = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"status\":\"Failure\","
	                           "\"reason\":\"Gone\",\"code\":410}}\r\n";
	struct k8s_watch *w = k8s_watch_new(4096);
	struct k8s_watch_event ev;
	k8s_watch_feed(w, gone, strlen(gone), NULL);
	assert_int_equal(k8s_watch_next(w, &ev, NULL), 1);
	assert_int_equal(ev.expired, 1);
	k8s_watch_event_release(&ev);
	/* An ERROR with another code is not "expired". */
	static const char e500[] = "{\"type\":\"ERROR\",\"object\":{\"code\":500,\"message\":\"x\"}}\n";
	k8s_watch_feed(w, e500, strlen(e500), NULL);
	assert_int_equal(k8s_watch_next(w, &ev, NULL), 1);
	assert_int_equal(ev.type, K8S_WATCH_ERROR);
	assert_int_equal(ev.expired, 0);
	assert_int_equal(ev.status.code, 500);
	k8s_watch_event_release(&ev);
	k8s_watch_free(w);
}

/* Each pod fixture, wrapped as a MODIFIED event, yields its own RV. */
static void test_pod_fixtures_as_events(void **state)
{
	(void)state;
	static const char *files[] = {
		"pod-create-request.json", "pod-pending-containercreating.json",
		"pod-pending-imagepullbackoff.json", "pod-pending-unschedulable.json",
		"pod-running-crashloopbackoff.json", "pod-running-ready.json",
		"pod-terminating.json", "podlist-fieldselector.json",
	};
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		char path[256];
		snprintf(path, sizeof path, FIXTURE_DIR "%s", files[i]);
		json_t *obj = json_load_file(path, 0, NULL);
		assert_non_null(obj);
		const json_t *rvj = json_object_get(json_object_get(obj, "metadata"), "resourceVersion");
		json_t *evj = json_pack("{s:s, s:O}", "type", "MODIFIED", "object", obj);
		char *line = json_dumps(evj, JSON_COMPACT);
		struct k8s_watch *w = k8s_watch_new(1 << 16);
		assert_int_equal(k8s_watch_feed(w, line, strlen(line), NULL), 0);
		assert_int_equal(k8s_watch_feed(w, "\n", 1, NULL), 0);
		struct k8s_watch_event ev;
		assert_int_equal(k8s_watch_next(w, &ev, NULL), 1);
		assert_int_equal(ev.type, K8S_WATCH_MODIFIED);
		assert_true(json_equal(ev.object, obj));
		if (json_is_string(rvj))
			assert_string_equal(ev.resource_version, json_string_value(rvj));
		else
			assert_null(ev.resource_version);
		k8s_watch_event_release(&ev);
		k8s_watch_free(w);
		free(line);
		json_decref(evj);
		json_decref(obj);
	}
}

static void test_huge_line(void **state)
{
	(void)state;
	size_t big = 10u * 1024 * 1024;
	char *junk = malloc(big);
	memset(junk, 'x', big);
	struct k8s_watch *w = k8s_watch_new(1 << 20);
	struct cp_err err;
	/* Fed in 64 KiB chunks: refused once the line passes 1 MiB. */
	int rc = 0;
	size_t off;
	for (off = 0; off < big && rc == 0; off += 65536)
		rc = k8s_watch_feed(w, junk + off, 65536, &err);
	assert_int_equal(rc, CP_E_TOO_BIG);
	assert_true(off <= (1u << 20) + 65536);
	assert_true(k8s_watch_pending(w) <= 1u << 20);
	assert_non_null(strstr(err.msg, "longer than"));
	/* Sticky. */
	assert_int_equal(k8s_watch_feed(w, "\n", 1, NULL), CP_E_TOO_BIG);
	struct k8s_watch_event ev;
	assert_int_equal(k8s_watch_next(w, &ev, &err), CP_E_TOO_BIG);
	assert_int_equal(k8s_watch_finish(w, NULL), CP_E_TOO_BIG);
	k8s_watch_free(w);

	/* In one feed, newline-terminated, still refused. */
	w = k8s_watch_new(1 << 20);
	junk[big - 1] = '\n';
	assert_int_equal(k8s_watch_feed(w, junk, big, NULL), CP_E_TOO_BIG);
	assert_int_equal(k8s_watch_pending(w), 0);
	k8s_watch_free(w);
	free(junk);

	/* Exactly max_line is accepted (it is then not JSON). */
	w = k8s_watch_new(8);
	assert_int_equal(k8s_watch_feed(w, "12345678\n", 9, NULL), 0);
	assert_int_equal(k8s_watch_next(w, &ev, NULL), CP_E_PARSE);
	assert_int_equal(k8s_watch_feed(w, "123456789", 9, NULL), CP_E_TOO_BIG);
	k8s_watch_free(w);
	assert_null(k8s_watch_new(0));
}

static void test_truncated_and_broken(void **state)
{
	(void)state;
	size_t len = 0;
	char *data = fixture_read("watch-stream-pod.jsonl", &len);
	/* Cut in the middle of the third event. */
	const char *p = data;
	for (int i = 0; i < 2; i++)
		p = strchr(p, '\n') + 1;
	size_t cut = (size_t)(p - data) + 100;
	struct k8s_watch *w = k8s_watch_new(1 << 16);
	assert_int_equal(k8s_watch_feed(w, data, cut, NULL), 0);
	struct k8s_watch_event ev;
	struct cp_err err;
	assert_int_equal(k8s_watch_next(w, &ev, NULL), 1);
	k8s_watch_event_release(&ev);
	assert_int_equal(k8s_watch_next(w, &ev, NULL), 1);
	k8s_watch_event_release(&ev);
	assert_int_equal(k8s_watch_next(w, &ev, NULL), 0);
	assert_int_equal(k8s_watch_finish(w, NULL), 0);
	assert_int_equal(k8s_watch_next(w, &ev, &err), CP_E_PARSE);
	assert_non_null(strstr(err.msg, "truncated"));
	assert_null(ev.object);
	assert_int_equal(k8s_watch_next(w, &ev, NULL), 0);
	assert_int_equal(k8s_watch_feed(w, "x", 1, NULL), CP_E_STATE);
	k8s_watch_free(w);
	free(data);

	/* A complete last event without its newline is still delivered. */
	static const char last[] = "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"9\"}}}";
	w = k8s_watch_new(1024);
	k8s_watch_feed(w, last, strlen(last), NULL);
	assert_int_equal(k8s_watch_next(w, &ev, NULL), 0);
	k8s_watch_finish(w, NULL);
	assert_int_equal(k8s_watch_next(w, &ev, NULL), 1);
	assert_string_equal(ev.resource_version, "9");
	k8s_watch_event_release(&ev);
	k8s_watch_free(w);

	static const char *bad[] = {
		"garbage\n", "[]\n", "{\"type\":\"ADDED\"}\n", "{\"type\":\"ADDED\",\"object\":[]}\n",
		"{\"type\":\"UPSERTED\",\"object\":{}}\n", "{\"type\":7,\"object\":{}}\n",
		"{\"type\":\"ADDED\",\"object\":{}} trailing\n", "<html>\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		w = k8s_watch_new(1024);
		k8s_watch_feed(w, bad[i], strlen(bad[i]), NULL);
		/* The bad line is consumed; a good line after it still parses. */
		k8s_watch_feed(w, "\n \n", 3, NULL);
		k8s_watch_feed(w, last, strlen(last), NULL);
		k8s_watch_feed(w, "\n", 1, NULL);
		assert_int_equal(k8s_watch_next(w, &ev, &err), CP_E_PARSE);
		assert_null(ev.object);
		assert_int_equal(k8s_watch_next(w, &ev, NULL), 1);
		assert_int_equal(ev.type, K8S_WATCH_BOOKMARK);
		k8s_watch_event_release(&ev);
		k8s_watch_free(w);
	}
	assert_string_equal(k8s_watch_type_name(K8S_WATCH_DELETED), "DELETED");
	assert_string_equal(k8s_watch_type_name((enum k8s_watch_type)0), "?");
}

/* Many small events in one feed, pulled gradually, keep the buffer bounded. */
static void test_many_events(void **state)
{
	(void)state;
	static const char ev1[] = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":\"1\"}}}\n";
	struct k8s_watch *w = k8s_watch_new(128);
	struct k8s_watch_event ev;
	for (int round = 0; round < 2000; round++) {
		assert_int_equal(k8s_watch_feed(w, ev1, strlen(ev1), NULL), 0);
		assert_int_equal(k8s_watch_feed(w, ev1, strlen(ev1), NULL), 0);
		assert_int_equal(k8s_watch_next(w, &ev, NULL), 1);
		k8s_watch_event_release(&ev);
	}
	int n = 0;
	while (k8s_watch_next(w, &ev, NULL) == 1) {
		k8s_watch_event_release(&ev);
		n++;
	}
	assert_int_equal(n, 2000);
	k8s_watch_free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pod_stream_chunkings),
		cmocka_unit_test(test_pod_stream_details),
		cmocka_unit_test(test_error_410),
		cmocka_unit_test(test_pod_fixtures_as_events),
		cmocka_unit_test(test_huge_line),
		cmocka_unit_test(test_truncated_and_broken),
		cmocka_unit_test(test_many_events),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
