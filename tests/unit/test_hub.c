/* Unit tests for broker/hub.c (kept outcomes: the memory bound, which go
 * first) and broker/logstream.c (coalescing, order, the rate bound). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "broker/session_int.h"

static uv_loop_t loop;

static struct broker_hub *hub(size_t max_outcomes, size_t max_bytes)
{
	struct broker_hub_config hc;
	broker_hub_config_defaults(&hc);
	hc.loop = &loop;
	hc.max_outcomes = max_outcomes;
	hc.max_outcome_bytes = max_bytes;
	return broker_hub_new(&hc);
}

static void keep(struct broker_hub *h, const char *id, size_t pad, int delivered)
{
	char *text = malloc(pad + 1);
	memset(text, 'x', pad);
	text[pad] = '\0';
	json_t *o = json_pack("{s:s,s:s}", "executionId", id, "logs", text);
	/* a conversation per first letter: "a1" and "a2" share one */
	char conv[2] = { id[0], '\0' };
	broker_hub_retain(h, id, conv, o, delivered);
	json_decref(o);
	free(text);
}

static int kept(struct broker_hub *h, const char *id)
{
	const json_t *o = NULL;
	return broker_hub_lookup(h, id, &o) == BROKER_HUB_FINISHED;
}

static void test_count_bound_drops_delivered_first(void **state)
{
	(void)state;
	struct broker_hub *h = hub(3, 1 << 20);
	keep(h, "a", 10, 0);
	keep(h, "b", 10, 1);
	keep(h, "c", 10, 0);
	keep(h, "d", 10, 0); /* b goes: the oldest delivered one */
	assert_true(kept(h, "a") && !kept(h, "b") && kept(h, "c") && kept(h, "d"));
	keep(h, "e", 10, 0); /* none delivered: the oldest goes */
	assert_true(!kept(h, "a") && kept(h, "c") && kept(h, "e"));
	assert_int_equal(broker_hub_kept(h, NULL), 3);
	/* Taken for an attach: now delivered, so it goes first. */
	assert_non_null(broker_hub_take_outcome(h, "e"));
	keep(h, "f", 10, 0);
	assert_true(kept(h, "c") && kept(h, "d") && !kept(h, "e") && kept(h, "f"));
	broker_hub_free(h);
}

/* A deleted conversation's kept outcomes go, the others stay, and the
 * bounds still count right after. */
static void test_forget_conversation(void **state)
{
	(void)state;
	struct broker_hub *h = hub(10, 1 << 20);
	keep(h, "a1", 10, 0);
	keep(h, "b1", 10, 0);
	keep(h, "a2", 10, 1);
	broker_hub_forget_conversation(h, "a");
	assert_true(!kept(h, "a1") && !kept(h, "a2") && kept(h, "b1"));
	assert_int_equal(broker_hub_kept(h, NULL), 1);
	keep(h, "c1", 10, 0); /* the list's tail is right after removing it */
	assert_true(kept(h, "b1") && kept(h, "c1"));
	broker_hub_forget_conversation(h, "b");
	broker_hub_forget_conversation(h, "c");
	assert_int_equal(broker_hub_kept(h, NULL), 0);
	keep(h, "d1", 10, 0);
	assert_true(kept(h, "d1"));
	broker_hub_free(h);
}

static void test_byte_bound(void **state)
{
	(void)state;
	struct broker_hub *h = hub(100, 1000);
	keep(h, "a", 400, 0);
	keep(h, "b", 400, 0);
	size_t bytes = 0;
	assert_int_equal(broker_hub_kept(h, &bytes), 2);
	assert_true(bytes <= 1000);
	keep(h, "c", 400, 0);
	assert_true(!kept(h, "a") && kept(h, "b") && kept(h, "c"));
	broker_hub_kept(h, &bytes);
	assert_true(bytes <= 1000);
	keep(h, "huge", 2000, 0); /* over the bound alone: not kept, nothing dropped */
	assert_true(!kept(h, "huge") && kept(h, "b") && kept(h, "c"));
	assert_int_equal(broker_hub_lookup(h, "nope", &(const json_t *){ NULL }), BROKER_HUB_UNKNOWN);
	broker_hub_free(h);
}

static void test_no_retention_keeps_nothing(void **state)
{
	(void)state;
	struct broker_hub_config hc;
	broker_hub_config_defaults(&hc);
	hc.loop = &loop;
	hc.retention_s = 0;
	struct broker_hub *h = broker_hub_new(&hc);
	keep(h, "a", 1, 0);
	assert_false(kept(h, "a"));
	broker_hub_free(h);
}

struct emitted {
	char text[4096];
	int stream[64];
	size_t n;
	unsigned long long dropped;
};

static void emit(void *ud, int is_stderr, const char *text, size_t len, unsigned long long dropped)
{
	struct emitted *e = ud;
	assert_true(e->n < 64);
	e->stream[e->n++] = is_stderr;
	strncat(e->text, text, len);
	strcat(e->text, "|");
	e->dropped += dropped;
}

static void test_logstream_coalesces_in_order(void **state)
{
	(void)state;
	struct broker_logstream *ls = broker_logstream_new(64, 8);
	struct emitted e = { { 0 }, { 0 }, 0, 0 };
	broker_logstream_feed(ls, 0, "a", 1);
	broker_logstream_feed(ls, 0, "b", 1);
	broker_logstream_feed(ls, 1, "E", 1);
	broker_logstream_feed(ls, 0, "c", 1);
	assert_true(broker_logstream_pending(ls));
	broker_logstream_flush(ls, emit, &e);
	assert_string_equal(e.text, "ab|E|c|");
	assert_int_equal(e.n, 3);
	assert_int_equal(e.stream[1], 1);
	assert_false(broker_logstream_pending(ls));
	broker_logstream_free(ls);
}

static void test_logstream_bound_counts_what_it_drops(void **state)
{
	(void)state;
	struct broker_logstream *ls = broker_logstream_new(8, 2);
	struct emitted e = { { 0 }, { 0 }, 0, 0 };
	broker_logstream_feed(ls, 0, "12345", 5);
	broker_logstream_feed(ls, 0, "6\xe2\x82\xac", 4); /* the euro sign does not fit: cut before it */
	broker_logstream_feed(ls, 1, "later", 5);        /* after a drop everything is dropped */
	broker_logstream_flush(ls, emit, &e);
	assert_string_equal(e.text, "123456|");
	assert_int_equal(e.dropped, 3 + 5);
	/* A new batch starts clean; a third stream switch is over max_segments. */
	memset(&e, 0, sizeof e);
	broker_logstream_feed(ls, 0, "a", 1);
	broker_logstream_feed(ls, 1, "b", 1);
	broker_logstream_feed(ls, 0, "c", 1);
	broker_logstream_flush(ls, emit, &e);
	assert_string_equal(e.text, "a|b|");
	assert_int_equal(e.dropped, 1);
	/* Ill-formed bytes come out as U+FFFD. */
	memset(&e, 0, sizeof e);
	broker_logstream_feed(ls, 0, "\xff", 1);
	broker_logstream_flush(ls, emit, &e);
	assert_string_equal(e.text, "\xef\xbf\xbd|");
	broker_logstream_free(ls);
}

int main(void)
{
	uv_loop_init(&loop);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_count_bound_drops_delivered_first),
		cmocka_unit_test(test_byte_bound),
		cmocka_unit_test(test_forget_conversation),
		cmocka_unit_test(test_no_retention_keeps_nothing),
		cmocka_unit_test(test_logstream_coalesces_in_order),
		cmocka_unit_test(test_logstream_bound_counts_what_it_drops),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	uv_loop_close(&loop);
	return rc;
}
