/*
 * session.c - the session protocol v1 over any message transport.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonutil.h"
#include "log.h"
#include "session.h"

/* One execution of this session. Linear lists: a session holds at most a few
 * hundred executions, and every lookup is by an id the backend sent. */
struct entry {
	struct entry *next;
	struct broker_session *s;
	struct codepod_exec *exec;
	char *id;
	char *conversation; /* for the on_outcome hook */
};

struct broker_session {
	struct codepod *cp;
	struct cp_idset *ids;
	const struct broker_session_io *io;
	void *ud;
	const struct broker_session_hooks *hooks;
	void *hooks_ud;
	struct entry *entries;
	unsigned running;
	int closed, can_send, drained;
};

static void on_tool_call(void *ud, struct codepod_exec *e, const char *call,
                         const char *tool, const json_t *input);
static void on_cancel_call(void *ud, struct codepod_exec *e, const char *call);
static void on_done(void *ud, struct codepod_exec *e, const json_t *outcome);
static const struct codepod_host host = { on_tool_call, on_cancel_call, on_done };

struct broker_session *broker_session_new(struct codepod *cp, struct cp_idset *ids,
                                          const struct broker_session_io *io, void *ud)
{
	struct broker_session *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->cp = cp;
	s->ids = ids;
	s->io = io;
	s->ud = ud;
	s->can_send = 1;
	return s;
}

static void send_msg(struct broker_session *s, json_t *msg /* steals */)
{
	if (msg && s->can_send)
		s->io->send(s->ud, msg);
	json_decref(msg);
}

static void send_error_named(struct broker_session *s, const char *id, const char *code,
                             const char *msg)
{
	json_t *m = json_pack("{s:s,s:{s:s,s:s}}", "type", "error", "error", "code",
	                      code, "message", msg);
	if (m && id)
		json_object_set_new(m, "id", json_string(id));
	send_msg(s, m);
}

static void send_error(struct broker_session *s, const char *id, enum cp_code code,
                       const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void send_error(struct broker_session *s, const char *id, enum cp_code code,
                       const char *fmt, ...)
{
	char msg[CP_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	send_error_named(s, id, cp_code_name(code), msg);
}

/* A string field, or NULL when absent, not a string, or holding a NUL: such
 * a value would name something else once read as a C string. */
static const char *text_field(const json_t *msg, const char *key)
{
	const json_t *v = json_object_get(msg, key);
	if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
		return NULL;
	return json_string_value(v);
}

static struct entry *find(struct broker_session *s, const char *id)
{
	for (struct entry *en = s->entries; en; en = en->next)
		if (strcmp(en->id, id) == 0)
			return en;
	return NULL;
}

static void on_tool_call(void *ud, struct codepod_exec *e, const char *call,
                         const char *tool, const json_t *input)
{
	struct entry *en = ud;
	json_t *m = json_pack("{s:s,s:s,s:s,s:s,s:O}", "type", "tool_call", "id",
	                      codepod_exec_id(e), "call", call, "tool", tool, "input", input);
	send_msg(en->s, m);
}

static void on_cancel_call(void *ud, struct codepod_exec *e, const char *call)
{
	struct entry *en = ud;
	send_msg(en->s, json_pack("{s:s,s:s,s:s}", "type", "cancel_call", "id",
	                          codepod_exec_id(e), "call", call));
}

static void on_done(void *ud, struct codepod_exec *e, const json_t *outcome)
{
	(void)e;
	struct entry *en = ud;
	struct broker_session *s = en->s;
	json_t *m = json_pack("{s:s,s:s}", "type", "result", "id", en->id);
	if (m && json_object_update(m, (json_t *)outcome)) {
		json_decref(m);
		m = NULL;
	}
	send_msg(s, m);
	if (s->hooks && s->hooks->on_outcome)
		s->hooks->on_outcome(s->hooks_ud, en->id, en->conversation, outcome);
	for (struct entry **pp = &s->entries; *pp; pp = &(*pp)->next) {
		if (*pp == en) {
			*pp = en->next;
			break;
		}
	}
	free(en->conversation);
	free(en->id);
	free(en);
	s->running--;
	if (s->closed && s->running == 0 && !s->drained) {
		s->drained = 1;
		s->io->drained(s->ud);
	}
}

static void do_execute(struct broker_session *s, const json_t *msg, const char *id)
{
	if (!id) {
		send_error(s, NULL, CP_E_INVALID_REQUEST, "execute: missing field: id");
		return;
	}
	if (cp_idset_has(s->ids, id)) {
		send_error(s, id, CP_E_INVALID_REQUEST,
		           "execution id %.64s is already running or was used recently", id);
		return;
	}
	if (s->hooks && s->hooks->admit) {
		const char *code = "INTERNAL";
		char why[CP_ERR_MSG_MAX] = "refused";
		if (s->hooks->admit(s->hooks_ud, msg, &code, why)) {
			send_error_named(s, id, code, why);
			return;
		}
	}
	const char *conv = json_string_value(json_object_get(msg, "conversation"));
	struct entry *en = calloc(1, sizeof *en);
	if (!en || !(en->id = strdup(id)) || !(en->conversation = strdup(conv ? conv : ""))) {
		if (en)
			free(en->id);
		free(en);
		send_error(s, id, CP_E_INTERNAL, "out of memory");
		return;
	}
	en->s = s;
	struct cp_err err;
	if (codepod_submit(s->cp, msg, &host, en, &en->exec, &err)) {
		send_error(s, id, err.code == CP_E_INVALID_REQUEST ? CP_E_INVALID_REQUEST : CP_E_INTERNAL,
		           "execute: %s", err.msg);
		free(en->conversation);
		free(en->id);
		free(en);
		return;
	}
	cp_idset_add(s->ids, id, NULL);
	en->next = s->entries;
	s->entries = en;
	s->running++;
}

static void do_answer(struct broker_session *s, const json_t *msg, const char *type,
                      struct entry *en)
{
	const json_t *call = json_object_get(msg, "call");
	if (!text_field(msg, "call")) {
		send_error(s, en->id, CP_E_INVALID_REQUEST, "%s: missing field: call", type);
		return;
	}
	struct cp_err err;
	int rc;
	if (strcmp(type, "tool_result") == 0) {
		const json_t *out = json_object_get(msg, "output");
		if (!out) {
			send_error(s, en->id, CP_E_INVALID_REQUEST, "tool_result: missing field: output");
			return;
		}
		rc = codepod_tool_result(en->exec, json_string_value(call), out, &err);
	} else {
		const json_t *m = json_object_get(msg, "message");
		if (!json_is_string(m)) {
			send_error(s, en->id, CP_E_INVALID_REQUEST, "tool_error: missing field: message");
			return;
		}
		rc = codepod_tool_error(en->exec, json_string_value(call), json_string_value(m), &err);
	}
	if (rc)
		send_error(s, en->id, CP_E_INVALID_REQUEST, "%s: %s", type, err.msg);
}

void broker_session_message(struct broker_session *s, const char *text, size_t len)
{
	struct cp_err err;
	json_t *msg = cp_json_load(text, len, &err);
	if (!msg) {
		send_error(s, NULL, CP_E_INVALID_REQUEST, "malformed JSON: %s", err.msg);
		return;
	}
	const char *id = text_field(msg, "id");
	const char *type = text_field(msg, "type");
	if (!json_is_object(msg))
		send_error(s, NULL, CP_E_INVALID_REQUEST, "a message must be a JSON object");
	else if (!type)
		send_error(s, id, CP_E_INVALID_REQUEST, "missing field: type");
	else if (s->closed)
		send_error(s, id, CP_E_INVALID_REQUEST, "the session is closing");
	else if (strcmp(type, "execute") == 0)
		do_execute(s, msg, id);
	else if (strcmp(type, "tool_result") && strcmp(type, "tool_error") && strcmp(type, "stop"))
		send_error(s, id, CP_E_INVALID_REQUEST, "unknown message type: %.64s", type);
	else if (!id)
		send_error(s, NULL, CP_E_INVALID_REQUEST, "%s: missing field: id", type);
	else {
		struct entry *en = find(s, id);
		if (!en)
			send_error(s, id, CP_E_INVALID_REQUEST, "%s: no running execution with id %.64s",
			           type, id);
		else if (strcmp(type, "stop") == 0)
			codepod_stop(en->exec);
		else
			do_answer(s, msg, type, en);
	}
	json_decref(msg);
}

void broker_session_oversize(struct broker_session *s, unsigned long long len,
                             unsigned long long limit)
{
	send_error(s, NULL, CP_E_INVALID_REQUEST,
	           "message of %llu bytes is over the limit of %llu bytes; it was discarded",
	           len, limit);
}

void broker_session_close(struct broker_session *s, int can_send)
{
	if (s->closed)
		return;
	s->closed = 1;
	s->can_send = can_send;
	for (struct entry *en = s->entries; en; en = en->next)
		codepod_abandon(en->exec);
	if (s->running == 0 && !s->drained) {
		s->drained = 1;
		s->io->drained(s->ud);
	}
}

unsigned broker_session_running(const struct broker_session *s)
{
	return s->running;
}

void broker_session_set_hooks(struct broker_session *s, const struct broker_session_hooks *h,
                              void *ud)
{
	s->hooks = h;
	s->hooks_ud = ud;
}

void broker_session_stop_all(struct broker_session *s)
{
	for (struct entry *en = s->entries; en; en = en->next)
		codepod_stop(en->exec);
}

void broker_session_free(struct broker_session *s)
{
	free(s);
}
