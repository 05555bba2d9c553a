/*
 * Unit tests for the dispatch of broker/session.c: its table names exactly
 * the client->server messages of broker/schema/index.json ("toServer"; read
 * at test time, from the repository root), and every type reaches a handler
 * of its own, which answers with that type as inReplyTo.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "broker/session_int.h"

#define INDEX "broker/schema/index.json"

static size_t table_size(void)
{
	size_t n = 0;
	while (broker_session_type(n))
		n++;
	return n;
}

static int in_table(const char *type)
{
	for (size_t i = 0; broker_session_type(i); i++)
		if (strcmp(broker_session_type(i), type) == 0)
			return 1;
	return 0;
}

static void test_table_matches_schema_index(void **state)
{
	json_error_t jerr;
	json_t *index, *to_server, *v;
	const char *key;

	(void)state;
	index = json_load_file(INDEX, JSON_REJECT_DUPLICATES, &jerr);
	if (!index)
		fail_msg("%s: %s", INDEX, jerr.text);
	to_server = json_object_get(index, "toServer");
	assert_true(json_is_object(to_server));
	assert_true(json_object_size(to_server) > 0);
	json_object_foreach(to_server, key, v) {
		if (!in_table(key))
			fail_msg("%s lists %s under toServer; the dispatch table does not", INDEX, key);
	}
	for (size_t i = 0; broker_session_type(i); i++) {
		const char *type = broker_session_type(i);
		if (!json_object_get(to_server, type))
			fail_msg("the dispatch table has %s; %s does not list it under toServer", type,
			         INDEX);
		for (size_t j = 0; j < i; j++)
			if (strcmp(broker_session_type(j), type) == 0)
				fail_msg("the dispatch table has %s twice", type);
	}
	assert_int_equal(table_size(), json_object_size(to_server));
	json_decref(index);
}

/* A session over an engine that never runs anything: every message below
 * is answered before anything would be submitted. */
struct fixture {
	uv_loop_t loop;
	struct codepod_backend backend;
	struct codepod_backend_ops ops;
	struct codepod *cp;
	struct cp_idset *ids;
	struct broker_session *s;
	json_t *sent; /* the messages the session sent, in order */
	int drained;
};

static void io_send(void *ud, const json_t *msg)
{
	struct fixture *fx = ud;
	json_array_append_new(fx->sent, json_deep_copy(msg));
}

static void io_drained(void *ud)
{
	struct fixture *fx = ud;
	fx->drained = 1;
}

static const struct broker_session_io io = { io_send, io_drained, NULL };

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof *fx);
	struct codepod_config cfg;
	struct cp_err err;

	if (!fx || uv_loop_init(&fx->loop))
		return -1;
	fx->backend.ops = &fx->ops;
	fx->backend.name = "none";
	memset(&cfg, 0, sizeof cfg);
	cfg.loop = &fx->loop;
	cfg.backend = &fx->backend;
	if (codepod_new(&cfg, &fx->cp, &err))
		return -1;
	fx->ids = cp_idset_new(16);
	fx->sent = json_array();
	fx->s = broker_session_new(fx->cp, fx->ids, NULL, &io, fx);
	if (!fx->ids || !fx->sent || !fx->s)
		return -1;
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	broker_session_close(fx->s, 1);
	assert_true(fx->drained);
	broker_session_free(fx->s);
	codepod_free(fx->cp);
	cp_idset_free(fx->ids);
	json_decref(fx->sent);
	uv_run(&fx->loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&fx->loop), 0);
	free(fx);
	return 0;
}

/* Sends @text and returns the one message it got back (borrowed). */
static const json_t *one_reply(struct fixture *fx, const char *text)
{
	json_array_clear(fx->sent);
	broker_session_message(fx->s, text, strlen(text));
	if (json_array_size(fx->sent) != 1)
		fail_msg("%s: %zu replies", text, json_array_size(fx->sent));
	return json_array_get(fx->sent, 0);
}

static void assert_error_in_reply_to(const json_t *m, const char *type, const char *message)
{
	assert_string_equal(json_string_value(json_object_get(m, "type")), "error");
	if (type)
		assert_string_equal(json_string_value(json_object_get(m, "inReplyTo")), type);
	else
		assert_true(json_is_null(json_object_get(m, "inReplyTo")));
	const char *got = json_string_value(json_object_get(json_object_get(m, "error"), "message"));
	assert_non_null(got);
	if (!strstr(got, message))
		fail_msg("inReplyTo %s: \"%s\" does not say \"%s\"", type ? type : "null", got, message);
}

/* Each type reaches its own handler: without the field that handler reads
 * first (id; declarations' tools), the answer names it, with the type as
 * inReplyTo and the type's name in the message; hello, which reads none,
 * is answered. */
static void test_each_type_reaches_its_handler(void **state)
{
	struct fixture *fx = *state;

	for (size_t i = 0; broker_session_type(i); i++) {
		const char *type = broker_session_type(i);
		char text[128], want[128];
		/* the field each one cannot do without */
		const char *field = !strcmp(type, "declarations")          ? "tools"
		                    : !strcmp(type, "delete_conversation") ? "conversation"
		                                                            : "id";
		snprintf(text, sizeof text, "{\"type\":\"%s\"}", type);
		if (strcmp(type, "hello") == 0) { /* it needs nothing: it answers */
			const json_t *m = one_reply(fx, text);
			assert_string_equal(json_string_value(json_object_get(m, "type")), "hello");
			assert_non_null(json_string_value(json_object_get(m, "protocol")));
			continue;
		}
		snprintf(want, sizeof want, "%s: missing field: %s", type, field);
		assert_error_in_reply_to(one_reply(fx, text), type, want);
	}
}

static void test_unknown_and_missing_types(void **state)
{
	struct fixture *fx = *state;

	assert_error_in_reply_to(one_reply(fx, "{\"type\":\"exec\",\"id\":\"a\"}"), NULL,
	                         "unknown message type: exec");
	assert_error_in_reply_to(one_reply(fx, "{\"type\":\"\"}"), NULL, "unknown message type");
	assert_error_in_reply_to(one_reply(fx, "{\"type\":7}"), NULL, "missing field: type");
	assert_error_in_reply_to(one_reply(fx, "{\"type\":\"stop\\u0000\"}"), NULL,
	                         "missing field: type");
	assert_error_in_reply_to(one_reply(fx, "[\"execute\"]"), NULL, "must be a JSON object");
}

/* A closing session still names the type it refuses. */
static void test_closing_session_names_the_type(void **state)
{
	struct fixture *fx = *state;

	broker_session_close(fx->s, 1);
	for (size_t i = 0; broker_session_type(i); i++) {
		const char *type = broker_session_type(i);
		char text[128];
		snprintf(text, sizeof text, "{\"type\":\"%s\",\"id\":\"x\"}", type);
		assert_error_in_reply_to(one_reply(fx, text), type, "the session is closing");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_matches_schema_index),
		cmocka_unit_test_setup_teardown(test_each_type_reaches_its_handler, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_and_missing_types, setup, teardown),
		cmocka_unit_test_setup_teardown(test_closing_session_names_the_type, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
