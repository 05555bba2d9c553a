/*
 * session.c - the session protocol v1.1 over any message transport
 * (broker/SESSION.md is the reference).
 */
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/decl.h"
#include "broker/features.h"
#include "runner/fileop.h"
#include "base/jsonutil.h"
#include "base/log.h"
#include "broker/session_int.h"

/* Live output ("stream": true): at most one flush per LOG_FLUSH_MS per
 * execution, each at most LOG_MAX_BYTES in LOG_MAX_SEGMENTS messages. */
#define LOG_FLUSH_MS 100
#define LOG_MAX_BYTES 65536
#define LOG_MAX_SEGMENTS 64

static void on_tool_call(void *ud, struct codepod_exec *e, const char *call,
                         const char *tool, const json_t *input);
static void on_cancel_call(void *ud, struct codepod_exec *e, const char *call);
static void on_done(void *ud, struct codepod_exec *e, const json_t *outcome);
static void on_output(void *ud, struct codepod_exec *e, int is_stderr, const char *buf,
                      size_t len);
static void on_approval_request(void *ud, struct codepod_exec *e, const char *call,
                                const char *tool, const json_t *input);
static void on_file_data(void *ud, struct codepod_exec *e, const char *buf, size_t len);
static void on_file_ready(void *ud, struct codepod_exec *e);
static const struct codepod_host host = {
	.tool_call = on_tool_call, .cancel_call = on_cancel_call, .done = on_done,
	.output = on_output, .approval_request = on_approval_request,
	.file_data = on_file_data, .file_ready = on_file_ready,
};

struct broker_session *broker_session_new(struct codepod *cp, struct cp_idset *ids,
                                          struct broker_hub *hub,
                                          const struct broker_session_io *io, void *ud)
{
	struct broker_session *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	if (!hub) {
		struct broker_hub_config hc;
		broker_hub_config_defaults(&hc);
		hc.loop = codepod_loop(cp);
		hc.grace_s = 0;
		hc.retention_s = 0;
		hub = broker_hub_new(&hc);
		s->own_hub = 1;
		if (!hub) {
			free(s);
			return NULL;
		}
	}
	s->cp = cp;
	s->ids = ids;
	s->hub = hub;
	s->io = io;
	s->ud = ud;
	s->can_send = 1;
	return s;
}

void broker_session_set_webhook(struct broker_session *s)
{
	s->webhook = 1;
}

static void send_to(struct broker_session *s, json_t *msg /* steals */)
{
	if (msg && s && s->can_send)
		s->io->send(s->ud, msg);
	json_decref(msg);
}

/* Messages about an execution go to the session holding it, if any. */
static void entry_send(struct entry *en, json_t *msg /* steals */)
{
	send_to(en->s, msg);
}

/* The error message: inReplyTo is the type it answers (null when none
 * could be read), id and call where there are. */
static void send_error_named(struct broker_session *s, const char *id, const char *reply_to,
                             const char *call, const char *code, const char *msg)
{
	json_t *m = json_pack("{s:s,s:o,s:{s:s,s:s}}", "type", "error", "inReplyTo",
	                      reply_to ? json_string(reply_to) : json_null(), "error", "code",
	                      code, "message", msg);
	if (m && id)
		json_object_set_new(m, "id", json_string(id));
	if (m && call)
		json_object_set_new(m, "call", json_string(call));
	send_to(s, m);
}

static void send_error(struct broker_session *s, const char *id, const char *reply_to,
                       const char *call, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));
static void send_error(struct broker_session *s, const char *id, const char *reply_to,
                       const char *call, const char *code, const char *fmt, ...)
{
	char msg[CP_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	send_error_named(s, id, reply_to, call, code, msg);
}

#define INVALID "INVALID_REQUEST"

/* A string field, or NULL when absent, not a string, or holding a NUL: such
 * a value would name something else once read as a C string. */
static const char *text_field(const json_t *msg, const char *key)
{
	const json_t *v = json_object_get(msg, key);
	if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
		return NULL;
	return json_string_value(v);
}

/* ---- unanswered tool calls ---- */

static void pending_add(struct entry *en, const json_t *msg)
{
	struct pending_call *p = calloc(1, sizeof *p);
	if (!p)
		return; /* it is not sent again on attach; the call still works */
	p->msg = json_incref((json_t *)msg);
	struct pending_call **pp = &en->calls;
	while (*pp)
		pp = &(*pp)->next;
	*pp = p;
}

static void pending_remove(struct entry *en, const char *call)
{
	for (struct pending_call **pp = &en->calls; *pp; pp = &(*pp)->next) {
		struct pending_call *p = *pp;
		if (strcmp(json_string_value(json_object_get(p->msg, "call")), call) == 0) {
			*pp = p->next;
			json_decref(p->msg);
			free(p);
			return;
		}
	}
}

/* ---- live output ---- */

static void emit_log(void *ud, int is_stderr, const char *text, size_t len,
                     unsigned long long dropped)
{
	struct entry *en = ud;
	json_t *m = json_pack("{s:s,s:s,s:s,s:s%}", "type", "log", "id", en->id, "stream",
	                      is_stderr ? "stderr" : "stdout", "text", text, len);
	if (m && dropped)
		json_object_set_new(m, "dropped", json_integer((json_int_t)dropped));
	entry_send(en, m);
}

/* @len bytes as base64, NUL-terminated (free it), or NULL. */
static char *base64_of(const char *buf, size_t len, size_t *out_len)
{
	char *b64 = malloc(4 * ((len + 2) / 3) + 1);
	if (!b64)
		return NULL;
	int n = EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)buf, (int)len);
	*out_len = n > 0 ? (size_t)n : 0;
	return b64;
}

/* A command's output: its bytes base64 (the stream keeps its own order). */
static void emit_command_output(void *ud, int is_stderr, const char *text, size_t len,
                                unsigned long long dropped)
{
	struct entry *en = ud;
	size_t n = 0;
	char *b64 = base64_of(text, len, &n);
	if (!b64)
		return;
	json_t *m = json_pack("{s:s,s:s,s:s,s:s%}", "type", "command_output", "id", en->id, "stream",
	                      is_stderr ? "stderr" : "stdout", "data", b64, n);
	free(b64);
	if (m && dropped)
		json_object_set_new(m, "dropped", json_integer((json_int_t)dropped));
	entry_send(en, m);
}

static void flush_logs(struct entry *en)
{
	if (en->ls && broker_logstream_pending(en->ls))
		broker_logstream_flush(en->ls, en->command ? emit_command_output : emit_log, en);
}

/* The request type of a file operation's outcome (its op). */
static const char *file_request_type(const json_t *outcome, char *buf, size_t cap)
{
	const char *op = json_string_value(json_object_get(outcome, "op"));
	if (!op)
		return NULL;
	snprintf(buf, cap, "%s%s", strncmp(op, "archive_", 8) == 0 ? "" : "file_", op);
	return buf;
}

/* The message an outcome goes out as (new reference): a file operation's
 * (it has an op) is a file_result or an error answering its request, a
 * command's (it has an exitCode) a command_result, a program's a result. */
static json_t *outcome_message(const char *id, const json_t *outcome)
{
	char type[32];
	if (file_request_type(outcome, type, sizeof type)) {
		const json_t *error = json_object_get(outcome, "error");
		if (error)
			return json_pack("{s:s,s:s,s:s,s:O}", "type", "error", "id", id, "inReplyTo", type,
			                 "error", error);
		json_t *m = json_deep_copy(outcome);
		if (!m)
			return NULL;
		json_object_del(m, "executionId");
		json_object_del(m, "status");
		json_object_del(m, "usage");
		json_object_set_new(m, "type", json_string("file_result"));
		json_object_set_new(m, "id", json_string(id));
		return m;
	}
	json_t *m = json_pack("{s:s,s:s}", "type",
	                      json_object_get(outcome, "exitCode") ? "command_result" : "result",
	                      "id", id);
	if (m && json_object_update(m, (json_t *)outcome)) {
		json_decref(m);
		m = NULL;
	}
	return m;
}

/* ---- file chunks ---- */

static void on_file_data(void *ud, struct codepod_exec *e, const char *buf, size_t len)
{
	struct entry *en = ud;
	const json_t *info = codepod_file_info(e);
	struct broker_session *s = en->s;
	if (s && s->io->file_data) {
		if (s->can_send) {
			s->io->file_data(s->ud, en->id, en->info_sent ? NULL : info, buf, len);
			en->info_sent = info != NULL;
		}
		return;
	}
	size_t n = 0;
	char *b64 = base64_of(buf, len, &n);
	if (!b64)
		return;
	json_t *m = json_pack("{s:s,s:s,s:s%}", "type", "file_chunk", "id", en->id, "data", b64, n);
	free(b64);
	/* The first chunk of a read also says the whole file's size and etag
	 * (an HTTP answer's headers need them before the body). */
	if (m && info && !en->info_sent) {
		en->info_sent = 1;
		json_object_update(m, (json_t *)info);
	}
	entry_send(en, m);
}

static void on_file_ready(void *ud, struct codepod_exec *e)
{
	(void)e;
	struct entry *en = ud;
	entry_send(en, json_pack("{s:s,s:s}", "type", "file_ack", "id", en->id));
}

static void on_flush_timer(uv_timer_t *t)
{
	flush_logs(t->data);
}

static void on_output(void *ud, struct codepod_exec *e, int is_stderr, const char *buf,
                      size_t len)
{
	(void)e;
	struct entry *en = ud;
	if (!en->ls || !en->s)
		return; /* not asked for, or detached: the result's logs keep the tail */
	broker_logstream_feed(en->ls, is_stderr, buf, len);
	if (!uv_is_active((uv_handle_t *)en->flush))
		uv_timer_start(en->flush, on_flush_timer, LOG_FLUSH_MS, 0);
}

static void on_flush_closed(uv_handle_t *h)
{
	free(h);
}

/* ---- engine callbacks ---- */

static void on_tool_call(void *ud, struct codepod_exec *e, const char *call,
                         const char *tool, const json_t *input)
{
	struct entry *en = ud;
	json_t *m = json_pack("{s:s,s:s,s:s,s:s,s:O}", "type", "tool_call", "id",
	                      codepod_exec_id(e), "call", call, "tool", tool, "input", input);
	if (!m)
		return;
	const char *key = codepod_tool_call_key(e, call); /* approved on resume */
	if (key)
		json_object_set_new(m, "idempotencyKey", json_string(key));
	broker_session_trace_fields(m, e, call);
	flush_logs(en); /* output printed before the call comes before it */
	pending_add(en, m);
	entry_send(en, m);
}

/* A call held for approval: sent again on attach, like a tool_call. */
static void on_approval_request(void *ud, struct codepod_exec *e, const char *call,
                                const char *tool, const json_t *input)
{
	struct entry *en = ud;
	json_t *m = json_pack("{s:s,s:s,s:s,s:s,s:O}", "type", "approval_request", "id",
	                      codepod_exec_id(e), "call", call, "tool", tool, "input", input);
	if (!m)
		return;
	flush_logs(en);
	pending_add(en, m);
	entry_send(en, m);
}

static void on_cancel_call(void *ud, struct codepod_exec *e, const char *call)
{
	struct entry *en = ud;
	pending_remove(en, call);
	entry_send(en, json_pack("{s:s,s:s,s:s}", "type", "cancel_call", "id",
	                         codepod_exec_id(e), "call", call));
}

static void entry_free(struct entry *en)
{
	while (en->calls) {
		struct pending_call *p = en->calls;
		en->calls = p->next;
		json_decref(p->msg);
		free(p);
	}
	if (en->flush) {
		uv_timer_stop(en->flush);
		uv_close((uv_handle_t *)en->flush, on_flush_closed);
	}
	broker_logstream_free(en->ls);
	free(en->conversation);
	free(en->id);
	free(en);
}

static void check_drained(struct broker_session *s)
{
	if (s->closed && s->running == 0 && !s->drained) {
		s->drained = 1;
		s->io->drained(s->ud);
	}
}

static void on_done(void *ud, struct codepod_exec *e, const json_t *outcome)
{
	(void)e;
	struct entry *en = ud;
	struct broker_session *s = en->s;
	flush_logs(en); /* every log message comes before the result */
	json_t *m = outcome_message(en->id, outcome);
	int delivered = m && s && s->can_send;
	/* Before the result goes out (a WebSocket writes it at once): a client
	 * holding the result finds its audit line and its metrics counted. */
	if (en->hooks && en->hooks->on_outcome)
		en->hooks->on_outcome(en->hooks_ud, en->id, en->conversation, outcome);
	send_to(s, m);
	if (!s)
		cp_log(CP_LOG_INFO, "exec.kept", "id", json_string(en->id), NULL);
	if (!en->forgotten)
		broker_hub_retain(en->hub, en->id, en->conversation, outcome, delivered);
	broker_hub_remove(en->hub, en);
	entry_free(en);
	if (s) {
		s->running--;
		check_drained(s);
	}
}

/* ---- execute ---- */

static struct entry *new_entry(struct broker_session *s, const char *id, const json_t *msg)
{
	const char *conv = json_string_value(json_object_get(msg, "conversation"));
	struct entry *en = calloc(1, sizeof *en);
	if (!en || !(en->id = strdup(id)) || !(en->conversation = strdup(conv ? conv : ""))) {
		if (en)
			free(en->id);
		free(en);
		return NULL;
	}
	en->hooks = s->hooks;
	en->hooks_ud = s->hooks_ud;
	en->webhook = s->webhook;
	const char *type = json_string_value(json_object_get(msg, "type"));
	en->command = type && strcmp(type, "command") == 0;
	en->file = codepod_fileop_type(type);
	if (json_is_true(json_object_get(msg, "stream"))) {
		en->ls = broker_logstream_new(LOG_MAX_BYTES, LOG_MAX_SEGMENTS);
		en->flush = malloc(sizeof *en->flush);
		if (!en->ls || !en->flush) {
			free(en->flush);
			en->flush = NULL;
			entry_free(en);
			return NULL;
		}
		uv_timer_init(codepod_loop(s->cp), en->flush);
		en->flush->data = en;
	}
	return en;
}

static void do_execute(struct broker_session *s, const json_t *msg, const char *type,
                       const char *id)
{
	const json_t *stream = json_object_get(msg, "stream");
	if (!id) {
		send_error(s, NULL, type, NULL, INVALID, "%s: missing field: id", type);
		return;
	}
	if (cp_idset_has(s->ids, id)) {
		send_error(s, id, type, NULL, INVALID,
		           "execution id %.64s is already running or was used recently", id);
		return;
	}
	if (stream && !json_is_boolean(stream)) {
		send_error(s, id, type, NULL, INVALID, "stream must be a boolean");
		return;
	}
	if (s->hooks && s->hooks->admit) {
		const char *code = "INTERNAL";
		char why[CP_ERR_MSG_MAX] = "refused";
		if (s->hooks->admit(s->hooks_ud, msg, &code, why)) {
			send_error_named(s, id, type, NULL, code, why);
			return;
		}
	}
	struct entry *en = new_entry(s, id, msg);
	if (!en) {
		send_error(s, id, type, NULL, "INTERNAL", "out of memory");
		return;
	}
	struct cp_err err;
	if (codepod_submit(s->cp, msg, &host, en, &en->exec, &err)) {
		send_error(s, id, type, NULL, err.code == CP_E_INVALID_REQUEST ? INVALID : "INTERNAL",
		           "%s: %s", type, err.msg);
		entry_free(en);
		return;
	}
	cp_idset_add(s->ids, id, NULL);
	broker_hub_add(s->hub, en);
	en->s = s;
	s->running++;
	/* Nothing else about it can have been sent: every engine callback
	 * comes on a later loop turn. A file operation's first answer is its
	 * data, its file_ack or its end. */
	if (!en->file)
		send_to(s, json_pack("{s:s,s:s,s:s}", "type", "accepted", "id", id, "inReplyTo", type));
}

/* ---- answers, stop ---- */

/* tool_result, tool_error, stop: the execution this session holds, or
 * NULL after the error went out. */
static struct entry *held_entry(struct broker_session *s, const json_t *msg, const char *type,
                                const char *id)
{
	struct entry *en = id ? broker_hub_find(s->hub, id) : NULL;
	if (!id)
		send_error(s, NULL, type, text_field(msg, "call"), INVALID, "%s: missing field: id", type);
	else if (!en || en->s != s)
		send_error(s, id, type, text_field(msg, "call"), INVALID,
		           "%s: no running execution with id %.64s on this session", type, id);
	else
		return en;
	return NULL;
}

/* The call a tool_result or tool_error answers, or NULL after the error. */
static const char *answer_call(struct broker_session *s, const json_t *msg, const char *type,
                               struct entry *en)
{
	const char *call = text_field(msg, "call");
	if (!call)
		send_error(s, en->id, type, NULL, INVALID, "%s: missing field: call", type);
	return call;
}

/* The engine's verdict on an answer: refused (@rc nonzero, said back), or
 * taken, and the call is no longer pending. */
static void answer_taken(struct broker_session *s, const char *type, struct entry *en,
                         const char *call, int rc, const struct cp_err *err)
{
	if (rc)
		send_error(s, en->id, type, call, INVALID, "%s: %s", type, err->msg);
	else
		pending_remove(en, call);
}

static void do_tool_result(struct broker_session *s, const json_t *msg, const char *type,
                           const char *id)
{
	struct entry *en = held_entry(s, msg, type, id);
	const char *call = en ? answer_call(s, msg, type, en) : NULL;
	if (!call)
		return;
	const json_t *out = json_object_get(msg, "output");
	if (!out) {
		send_error(s, en->id, type, call, INVALID, "%s: missing field: output", type);
		return;
	}
	struct cp_err err;
	int rc = codepod_tool_result(en->exec, call, out, &err);
	answer_taken(s, type, en, call, rc, &err);
}

static void do_tool_error(struct broker_session *s, const json_t *msg, const char *type,
                          const char *id)
{
	struct entry *en = held_entry(s, msg, type, id);
	const char *call = en ? answer_call(s, msg, type, en) : NULL;
	if (!call)
		return;
	const json_t *m = json_object_get(msg, "message");
	if (!json_is_string(m)) {
		send_error(s, en->id, type, call, INVALID, "%s: missing field: message", type);
		return;
	}
	struct cp_err err;
	int rc = codepod_tool_error(en->exec, call, json_string_value(m), &err);
	answer_taken(s, type, en, call, rc, &err);
}

static void do_suspend(struct broker_session *s, const json_t *msg, const char *type,
                       const char *id)
{
	struct entry *en = held_entry(s, msg, type, id);
	const char *call = en ? answer_call(s, msg, type, en) : NULL;
	if (!call)
		return;
	struct cp_err err;
	int rc = codepod_tool_suspend(en->exec, call, &err);
	answer_taken(s, type, en, call, rc, &err);
}

static void do_approval(struct broker_session *s, const json_t *msg, const char *type,
                        const char *id)
{
	struct entry *en = held_entry(s, msg, type, id);
	const char *call = en ? answer_call(s, msg, type, en) : NULL;
	if (!call)
		return;
	const json_t *ok = json_object_get(msg, "approved");
	const json_t *m = json_object_get(msg, "message");
	if (!json_is_boolean(ok) || (m && !json_is_string(m))) {
		send_error(s, en->id, type, call, INVALID,
		           "%s: approved must be a boolean and message a string", type);
		return;
	}
	struct cp_err err;
	int rc = codepod_tool_approval(en->exec, call, json_is_true(ok), text_field(msg, "message"),
	                               &err);
	answer_taken(s, type, en, call, rc, &err);
}

/* A command's stdin: base64 data, then eof. */
static void do_command_stdin(struct broker_session *s, const json_t *msg, const char *type,
                             const char *id)
{
	struct entry *en = held_entry(s, msg, type, id);
	if (!en)
		return;
	const json_t *data = json_object_get(msg, "data");
	const json_t *eof = json_object_get(msg, "eof");
	if ((data && !json_is_string(data)) || (eof && !json_is_boolean(eof))) {
		send_error(s, id, type, NULL, INVALID, "%s: data must be a base64 string, eof a boolean",
		           type);
		return;
	}
	if (!en->command) {
		send_error(s, id, type, NULL, INVALID, "%s: execution %.64s is not a command", type, id);
		return;
	}
	struct cp_err err;
	if (codepod_exec_stdin(en->exec, data ? json_string_value(data) : "",
	                       data ? json_string_length(data) : 0, json_is_true(eof), &err))
		send_error(s, id, type, NULL, INVALID, "%s: command %.64s: %s", type, id, err.msg);
}

/* A file write's next chunk. */
static void do_file_chunk(struct broker_session *s, const json_t *msg, const char *type,
                          const char *id)
{
	struct entry *en = held_entry(s, msg, type, id);
	if (!en)
		return;
	const json_t *data = json_object_get(msg, "data");
	const json_t *last = json_object_get(msg, "last");
	if (!json_is_string(data) || (last && !json_is_boolean(last))) {
		send_error(s, id, type, NULL, INVALID, "%s: data must be a base64 string, last a boolean",
		           type);
		return;
	}
	struct cp_err err;
	if (!en->file)
		send_error(s, id, type, NULL, INVALID, "%s: %.64s is not a file operation", type, id);
	else if (codepod_file_chunk(en->exec, json_string_value(data), json_string_length(data),
	                            json_is_true(last), &err))
		send_error(s, id, type, NULL, INVALID, "%s: %.64s: %s", type, id, err.msg);
}

void broker_session_file_bytes(struct broker_session *s, const char *id, const void *buf,
                               size_t len, int last)
{
	static const char type[] = "file_chunk";
	struct entry *en = broker_hub_find(s->hub, id);
	struct cp_err err;
	if (s->closed)
		send_error(s, id, type, NULL, INVALID, "the session is closing");
	else if (!en || en->s != s)
		send_error(s, id, type, NULL, INVALID,
		           "%s: no running execution with id %.64s on this session", type, id);
	else if (!en->file)
		send_error(s, id, type, NULL, INVALID, "%s: %.64s is not a file operation", type, id);
	else if (codepod_exec_ended(en->exec))
		; /* (the runner refused the file, e.g. the workspace is full: the
		   * rest of the body has nowhere to go, and the outcome answers) */
	else if (codepod_file_bytes(en->exec, buf, len, last, &err))
		send_error(s, id, type, NULL, INVALID, "%s: %.64s: %s", type, id, err.msg);
}

/* A file read's chunk was taken. */
static void do_file_ack(struct broker_session *s, const json_t *msg, const char *type,
                        const char *id)
{
	struct entry *en = held_entry(s, msg, type, id);
	if (!en)
		return;
	struct cp_err err;
	if (!en->file)
		send_error(s, id, type, NULL, INVALID, "%s: %.64s is not a file operation", type, id);
	else if (codepod_file_ack(en->exec, &err))
		send_error(s, id, type, NULL, INVALID, "%s: %.64s: %s", type, id, err.msg);
}

static void do_stop(struct broker_session *s, const json_t *msg, const char *type,
                    const char *id)
{
	struct entry *en = held_entry(s, msg, type, id);
	if (en)
		codepod_stop(en->exec);
}

void broker_session_unreachable(struct broker_session *s, const char *id, const char *call,
                                const char *reason, long http_status)
{
	struct entry *en = broker_hub_find(s->hub, id);
	struct cp_err err;
	if (en && en->s == s &&
	    codepod_tool_unreachable(en->exec, call, reason, http_status, &err) == 0)
		pending_remove(en, call);
}

/* ---- attach ---- */

static void take_over(struct broker_session *s, struct entry *en, const char *type)
{
	if (en->s != s) {
		if (en->s) { /* a session that is still open loses it */
			en->s->running--;
			check_drained(en->s);
		}
		en->s = s;
		s->running++;
		en->detached_ms = 0;
	}
	json_int_t n = 0;
	for (struct pending_call *p = en->calls; p; p = p->next)
		n++;
	cp_log(CP_LOG_INFO, "exec.attached", "id", json_string(en->id), "calls", json_integer(n),
	       NULL);
	send_to(s, json_pack("{s:s,s:s,s:s}", "type", "accepted", "id", en->id, "inReplyTo",
	                     type));
	for (struct pending_call *p = en->calls; p; p = p->next)
		send_to(s, json_incref(p->msg));
}

static void do_attach(struct broker_session *s, const json_t *msg, const char *type,
                      const char *id)
{
	(void)msg;
	if (!id) {
		send_error(s, NULL, type, NULL, INVALID, "%s: missing field: id", type);
		return;
	}
	struct entry *en = broker_hub_find(s->hub, id);
	if (en && (en->webhook || s->webhook)) {
		send_error(s, id, type, NULL, INVALID,
		           "execution %.64s is brokered by a webhook; GET /v1/executions/%.64s "
		           "returns its outcome once it ended", id, id);
		return;
	}
	if (en) { /* also one ending after its grace period: its result follows */
		take_over(s, en, type);
		return;
	}
	const json_t *outcome = broker_hub_take_outcome(s->hub, id);
	if (!outcome && s->own_hub) {
		send_error(s, id, type, NULL, "UNKNOWN_EXECUTION",
		           "no running execution %.64s in this session; attach takes over executions "
		           "of a dropped WebSocket session (serve --listen)", id);
		return;
	}
	if (!outcome) {
		send_error(s, id, type, NULL, "UNKNOWN_EXECUTION",
		           "no running or kept execution %.64s here: unknown, expired, or run "
		           "by another replica", id);
		return;
	}
	send_to(s, json_pack("{s:s,s:s,s:s}", "type", "accepted", "id", id, "inReplyTo", type));
	send_to(s, outcome_message(id, outcome));
}

/* ---- declarations ---- */

static void do_declarations(struct broker_session *s, const json_t *msg, const char *type,
                            const char *id)
{
	const json_t *tools = json_object_get(msg, "tools");
	if (!tools) {
		send_error(s, id, type, NULL, INVALID, "%s: missing field: tools", type);
		return;
	}
	char *text = NULL;
	struct cp_err err;
	int rc = broker_decl_render(tools, &text, &err);
	if (rc) {
		send_error(s, id, type, NULL, rc == CP_E_NOMEM ? "INTERNAL" : INVALID,
		           "%s: %s", type, err.msg);
		return;
	}
	json_t *m = json_pack("{s:s,s:s}", "type", "declarations", "declarations", text);
	free(text);
	if (m && id)
		json_object_set_new(m, "id", json_string(id));
	if (!m)
		send_error(s, id, type, NULL, "INTERNAL", "out of memory");
	send_to(s, m);
}

/* ---- hello ---- */

/* Discovery: the protocol, the release and this server's features. */
static void do_hello(struct broker_session *s, const json_t *msg, const char *type,
                     const char *id)
{
	(void)msg;
	json_t *info = broker_info(s->own_hub ? BROKER_SERVED_STDIO : BROKER_SERVED_LISTEN);
	json_t *m = info ? json_pack("{s:s}", "type", type) : NULL;
	if (m && json_object_update(m, info)) {
		json_decref(m);
		m = NULL;
	}
	json_decref(info);
	if (m && id)
		json_object_set_new(m, "id", json_string(id));
	if (!m)
		send_error(s, id, type, NULL, "INTERNAL", "out of memory");
	send_to(s, m);
}

/* ---- delete_conversation ---- */

struct deleting {
	struct broker_session *s;
	char *conversation;
	char *id;
};

static void conversation_gone(void *ud, int rc, const struct cp_err *err)
{
	struct deleting *d = ud;
	struct broker_session *s = d->s;
	static const char type[] = "delete_conversation";
	if (rc) {
		cp_log(CP_LOG_WARN, "conversation.delete_failed", "reason",
		       json_string(err ? err->msg : ""), NULL);
		send_error(s, d->id, type, NULL, "SANDBOX_UNAVAILABLE", "%s: %s", type,
		           err && err->msg[0] ? err->msg : "failed");
	} else {
		cp_log(CP_LOG_INFO, "conversation.deleted", NULL);
		json_t *m = json_pack("{s:s,s:s}", "type", "conversation_deleted", "conversation",
		                      d->conversation);
		if (m && d->id)
			json_object_set_new(m, "id", json_string(d->id));
		send_to(s, m);
	}
	free(d->conversation);
	free(d->id);
	free(d);
	s->running--; /* held open until answered */
	check_drained(s);
}

static void do_delete_conversation(struct broker_session *s, const json_t *msg,
                                   const char *type, const char *id)
{
	const char *conv = json_string_value(json_object_get(msg, "conversation"));
	if (!conv || !*conv) {
		send_error(s, id, type, NULL, INVALID, "%s: missing field: conversation", type);
		return;
	}
	struct deleting *d = calloc(1, sizeof *d);
	if (!d || !(d->conversation = strdup(conv)) || (id && !(d->id = strdup(id)))) {
		if (d)
			free(d->conversation);
		free(d);
		send_error(s, id, type, NULL, "INTERNAL", "out of memory");
		return;
	}
	d->s = s;
	/* Its executions end first (CANCELLED), then its files go. */
	broker_hub_forget_conversation(s->hub, conv);
	struct cp_err err;
	int rc = codepod_delete_conversation(s->cp, conv, conversation_gone, d, &err);
	if (rc) {
		send_error(s, id, type, NULL, rc == CP_E_UNSUPPORTED ? INVALID : "SANDBOX_UNAVAILABLE",
		           "%s: %s", type, err.msg);
		free(d->conversation);
		free(d->id);
		free(d);
		return;
	}
	s->running++;
}

/* ---- dispatch ---- */

/* The messages a backend may send, each with its handler: the one place a
 * client->server type is named (broker/schema/index.json lists the same
 * ones under toServer; tests/unit/test_session_dispatch.c holds the two to
 * each other). A handler gets the table's own string as @type, for the
 * inReplyTo of what it answers, and @id when the message has a string id. */
static const struct message_type {
	const char *type;
	void (*handle)(struct broker_session *s, const json_t *msg, const char *type,
	               const char *id);
} message_types[] = {
	{ "execute", do_execute },
	{ "command", do_execute },
	{ "command_stdin", do_command_stdin },
	{ "file_read", do_execute },
	{ "file_write", do_execute },
	{ "file_stat", do_execute },
	{ "file_list", do_execute },
	{ "file_delete", do_execute },
	{ "archive_read", do_execute },
	{ "archive_write", do_execute },
	{ "file_chunk", do_file_chunk },
	{ "file_ack", do_file_ack },
	{ "tool_result", do_tool_result },
	{ "tool_error", do_tool_error },
	{ "stop", do_stop },
	{ "attach", do_attach },
	{ "declarations", do_declarations },
	{ "hello", do_hello },
	{ "suspend", do_suspend },
	{ "approval", do_approval },
	{ "delete_conversation", do_delete_conversation },
};

#define N_MESSAGE_TYPES (sizeof message_types / sizeof message_types[0])

static const struct message_type *message_type(const char *type)
{
	for (size_t i = 0; type && i < N_MESSAGE_TYPES; i++)
		if (strcmp(type, message_types[i].type) == 0)
			return &message_types[i];
	return NULL;
}

const char *broker_session_type(size_t i)
{
	return i < N_MESSAGE_TYPES ? message_types[i].type : NULL;
}

void broker_session_message(struct broker_session *s, const char *text, size_t len)
{
	struct cp_err err;
	json_t *msg = cp_json_load(text, len, &err);
	if (!msg) {
		send_error(s, NULL, NULL, NULL, INVALID, "malformed JSON: %s", err.msg);
		return;
	}
	broker_session_feed(s, msg);
	json_decref(msg);
}

void broker_session_feed(struct broker_session *s, const json_t *msg)
{
	const char *id = text_field(msg, "id");
	const char *raw = text_field(msg, "type");
	const struct message_type *t = message_type(raw);
	if (!json_is_object(msg))
		send_error(s, NULL, NULL, NULL, INVALID, "a message must be a JSON object");
	else if (!raw)
		send_error(s, id, NULL, NULL, INVALID, "missing field: type");
	else if (!t)
		send_error(s, id, NULL, NULL, INVALID, "unknown message type: %.64s", raw);
	else if (s->closed)
		send_error(s, id, t->type, NULL, INVALID, "the session is closing");
	else
		t->handle(s, msg, t->type, id);
}

void broker_session_oversize(struct broker_session *s, unsigned long long len,
                             unsigned long long limit)
{
	send_error(s, NULL, NULL, NULL, INVALID,
	           "message of %llu bytes is over the limit of %llu bytes; it was discarded",
	           len, limit);
}

void broker_session_not_text(struct broker_session *s)
{
	send_error(s, NULL, NULL, NULL, INVALID,
	           "binary messages are not part of the protocol; send text");
}

void broker_session_close(struct broker_session *s, int can_send)
{
	if (s->closed)
		return;
	s->closed = 1;
	s->can_send = can_send;
	int detach = !can_send && broker_hub_grace_s(s->hub) > 0 && !s->webhook;
	uint64_t now = broker_hub_now_ms(s->hub);
	for (struct entry *en = broker_hub_entries(s->hub); en; en = en->next) {
		if (en->s != s)
			continue;
		if (detach) {
			en->s = NULL;
			en->detached_ms = now;
			s->running--;
			cp_log(CP_LOG_INFO, "exec.detached", "id", json_string(en->id), "graceS",
			       json_integer(broker_hub_grace_s(s->hub)), NULL);
		} else {
			codepod_abandon(en->exec);
		}
	}
	check_drained(s);
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

void broker_session_free(struct broker_session *s)
{
	if (!s)
		return;
	if (s->own_hub)
		broker_hub_free(s->hub);
	free(s);
}
