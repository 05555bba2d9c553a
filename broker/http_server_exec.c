/*
 * http_server_exec.c - POST /v1/executions: the execute message plus
 * `broker: {url, headers}`. A one-execution broker_session whose tool calls
 * are POSTed to the broker URL ({"id","conversation","call","tool","input"} in;
 * {"output": ...} or {"error": "safe message"} out); the answer is the
 * outcome JSON (200), or the `error` that refused the execute (400, 429 for
 * TOO_MANY_EXECUTIONS, 503 for SHUTTING_DOWN).
 *
 * Each call may take until the program's deadline (which cancels it), or
 * webhook_timeout_ms when that is set and lower. Each request is signed when
 * the server has a secret (webhook_sign.h). A broker that fails, hangs or
 * answers garbage is a broker failure, not a tool error: the program hears
 * "The tool NAME could not be reached." and the call's outcome entry says
 * broker: true and the reason. A cancel_call aborts the POST. A client that
 * goes away leaves the execution running to its end; its outcome is kept for
 * GET /v1/executions/{id}.
 *
 * A call whose input does not match its tool's inputSchema is not POSTed:
 * the program hears "Invalid input for tool NAME: input.x must be ..." as
 * from the SDKs (broker/schema_check.h), and the broker never sees it.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "broker/http_server_int.h"
#include "base/jsonutil.h"
#include "base/log.h"
#include "broker/schema_check.h"
#include "broker/tool_answer.h"
#include "broker/webhook_sign.h"

#define MAX_BROKER_ANSWER ((size_t)16 << 20)
/* Beyond any deadline a policy can ask for (the built-in ceiling is 15 min). */
#define MAX_CALL_MS (24L * 3600 * 1000)

struct pending {
	struct pending *next;
	struct exec_req *r;   /* NULL once the request is gone */
	char *call;
	struct broker_webhook_call *h;
};

struct exec_req {
	struct sess_base base; /* first: the hooks' ud */
	struct lws *wsi;       /* NULL once detached */
	struct broker_http_pss *pss;
	char *url;
	char *conversation;
	json_t *headers;
	json_t *tools; /* the execute's tool list, for their inputSchemas */
	long call_timeout_ms;
	struct pending *calls;
	int in_submit, answered;
	int deleting;          /* DELETE /v1/conversations/{key}, not an execution */
	unsigned err_status;
	json_t *err_body;
	struct cp_err refused; /* the URL guard's reason, for the 400 */
};

static unsigned status_for(const char *code)
{
	if (!code)
		return 500;
	if (!strcmp(code, "INVALID_REQUEST"))
		return 400;
	if (!strcmp(code, "TOO_MANY_EXECUTIONS"))
		return 429;
	if (!strcmp(code, "SHUTTING_DOWN") || !strcmp(code, "SANDBOX_UNAVAILABLE"))
		return 503;
	return 500;
}

static void answer(struct exec_req *r, unsigned status, const json_t *body)
{
	if (r->answered)
		return;
	r->answered = 1;
	if (r->wsi) {
		broker_http_respond_json(r->wsi, r->pss, status, body);
		r->pss->req = NULL; /* the response now belongs to the connection */
		r->wsi = NULL;
		r->pss = NULL;
	}
	r->base.gone = 1;
	r->base.close_pending = 1;
	broker_http_reap_schedule(r->base.srv);
}

static void feed(struct exec_req *r, json_t *msg /* steals */)
{
	char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
	json_decref(msg);
	if (text)
		broker_session_message(r->base.session, text, strlen(text));
	free(text);
}

static void tool_error(struct exec_req *r, const char *eid, const char *call, const char *msg)
{
	feed(r, json_pack("{s:s,s:s,s:s,s:s}", "type", "tool_error", "id", eid, "call", call,
	                  "message", msg));
}

static void unlink_pending(struct pending *p)
{
	if (!p->r)
		return;
	for (struct pending **pp = &p->r->calls; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
}

/* The broker failed (not the tool): the program hears only that the tool
 * could not be reached; the operator's log says why. */
static void unreachable(struct exec_req *r, const char *eid, const char *call, const char *reason,
                        long status, const char *why)
{
	cp_log(CP_LOG_WARN, "webhook.fail", "id", json_string(eid), "call", json_string(call),
	       "reason", json_string(reason), "message", json_string(why), NULL);
	broker_session_unreachable(r->base.session, eid, call, reason, status);
}

static void on_broker_answer(struct exec_req *r, const char *eid, const char *call, long status,
                             const char *body, size_t len)
{
	char msg[4097]; /* the engine keeps 4096 bytes of a tool's error message */
	json_t *out = NULL;
	const char *reason = NULL;
	int rc = broker_webhook_answer(status, body, len, &out, msg, sizeof msg, &reason);
	if (rc == 0)
		feed(r, json_pack("{s:s,s:s,s:s,s:o}", "type", "tool_result", "id", eid, "call", call,
		                  "output", out));
	else if (rc == 1)
		tool_error(r, eid, call, msg);
	else if (rc == 3) /* a person decides: the execution suspends at this call */
		feed(r, json_pack("{s:s,s:s,s:s}", "type", "suspend", "id", eid, "call", call));
	else
		unreachable(r, eid, call, reason, reason && !strcmp(reason, "http_status") ? status : 0,
		            msg);
}

static const char *failure_reason(const struct cp_err *err)
{
	if (err->code == CP_E_TIMEOUT)
		return "timeout";
	if (err->code == CP_E_TOO_BIG)
		return "too_large";
	return "unreachable";
}

static void on_webhook_done(void *ud, long status, const char *body, size_t len,
                            const struct cp_err *err)
{
	struct pending *p = ud;
	struct exec_req *r = p->r;
	unlink_pending(p);
	if (r && !(err && err->code == CP_E_CANCELLED)) {
		const char *id = p->call + strlen(p->call) + 1;
		if (err)
			unreachable(r, id, p->call, failure_reason(err), 0, err->msg);
		else
			on_broker_answer(r, id, p->call, status, body, len);
	}
	free(p->call);
	free(p);
}

/* The request's headers for one call: the caller's, less any it set under
 * our names, plus the signature when the server has a secret. */
static json_t *call_headers(struct exec_req *r, const json_t *msg, const char *body, size_t len)
{
	json_t *h = json_object();
	const char *k;
	json_t *v;
	json_t *tp = json_object_get(msg, "traceparent");
	json_t *tstate = json_object_get(msg, "tracestate");
	json_object_foreach(r->headers, k, v) {
		if (strcasecmp(k, "Codepod-Timestamp") && strcasecmp(k, "Codepod-Signature") &&
		    !(tp && (!strcasecmp(k, "traceparent") || !strcasecmp(k, "tracestate"))))
			json_object_set(h, k, v);
	}
	/* The call's own span is the parent of whatever the broker does for it. */
	if (h && tp)
		json_object_set(h, "traceparent", tp);
	if (h && tstate)
		json_object_set(h, "tracestate", tstate);
	const struct broker_http *srv = r->base.srv;
	if (!h || !srv->webhook_key)
		return h;
	char ts[24], sig[BROKER_SIG_LEN];
	snprintf(ts, sizeof ts, "%lld", (long long)time(NULL));
	if (broker_webhook_sign(srv->webhook_key, srv->webhook_key_len, ts, body, len, sig)) {
		json_decref(h);
		return NULL;
	}
	json_object_set_new(h, "Codepod-Timestamp", json_string(ts));
	json_object_set_new(h, "Codepod-Signature", json_string(sig));
	return h;
}

/* The inputSchema of the enabled tool named @tool; NULL if none. */
static const json_t *input_schema(const struct exec_req *r, const char *tool)
{
	for (size_t i = 0; tool && i < json_array_size(r->tools); i++) {
		const json_t *t = json_array_get(r->tools, i);
		const char *name = json_string_value(json_object_get(t, "name"));
		if (name && !strcmp(name, tool) && !json_is_false(json_object_get(t, "enabled")))
			return json_object_get(t, "inputSchema");
	}
	return NULL;
}

/* 1 when the input fails its schema: the program is told, nothing is sent. */
static int refused_input(struct exec_req *r, const json_t *msg, const char *eid, const char *call)
{
	const char *tool = json_string_value(json_object_get(msg, "tool"));
	char why[600], text[800];
	if (!broker_schema_check(input_schema(r, tool), json_object_get(msg, "input"), why,
	                         sizeof why))
		return 0;
	snprintf(text, sizeof text, "Invalid input for tool %.100s: %s", tool, why);
	tool_error(r, eid, call, text);
	return 1;
}

static void send_call(struct exec_req *r, const json_t *msg)
{
	const char *eid = json_string_value(json_object_get(msg, "id"));
	const char *call = json_string_value(json_object_get(msg, "call"));
	if (refused_input(r, msg, eid, call))
		return;
	json_t *body = json_pack("{s:O,s:s,s:O,s:O,s:O}", "id", json_object_get(msg, "id"),
	                         "conversation", r->conversation, "call",
	                         json_object_get(msg, "call"), "tool", json_object_get(msg, "tool"),
	                         "input", json_object_get(msg, "input"));
	const json_t *key = json_object_get(msg, "idempotencyKey"); /* approved on resume */
	if (body && key)
		json_object_set(body, "idempotencyKey", (json_t *)key);
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	struct pending *p = calloc(1, sizeof *p);
	size_t cl = strlen(call), el = strlen(eid);
	/* call id, NUL, execution id, NUL: both are needed for the answer */
	if (p)
		p->call = malloc(cl + el + 2);
	struct cp_err err;
	if (!text || !p || !p->call) {
		cp_err_set(&err, CP_E_NOMEM, "out of memory");
	} else {
		memcpy(p->call, call, cl + 1);
		memcpy(p->call + cl + 1, eid, el + 1);
		p->r = r;
		json_t *hdrs = call_headers(r, msg, text, strlen(text));
		int rc = hdrs ? broker_webhook_post(r->base.srv->webhook, r->url, hdrs, text,
		                                    strlen(text), r->call_timeout_ms,
		                                    MAX_BROKER_ANSWER, on_webhook_done, p, &p->h, &err)
		              : cp_err_set(&err, CP_E_INTERNAL, "the request could not be signed");
		json_decref(hdrs);
		if (rc == 0) {
			p->next = r->calls;
			r->calls = p;
			free(text);
			return;
		}
	}
	free(text);
	if (p)
		free(p->call);
	free(p);
	unreachable(r, eid, call, "unreachable", 0, err.msg);
}

static void cancel_call(struct exec_req *r, const char *call)
{
	for (struct pending *p = r->calls; p; p = p->next) {
		if (strcmp(p->call, call) == 0) {
			broker_webhook_cancel(p->h);
			return;
		}
	}
}

static void io_send(void *ud, const json_t *msg)
{
	struct exec_req *r = ud;
	const char *type = json_string_value(json_object_get(msg, "type"));
	if (!type)
		return;
	if (!strcmp(type, "tool_call")) {
		send_call(r, msg);
	} else if (!strcmp(type, "approval_request")) {
		/* A webhook answers tool calls only: nobody here can approve. */
		feed(r, json_pack("{s:s,s:O,s:O,s:b,s:s}", "type", "approval", "id",
		                  json_object_get(msg, "id"), "call", json_object_get(msg, "call"),
		                  "approved", 0, "message",
		                  "This call needs a person's approval, which the webhook broker "
		                  "cannot ask for."));
	} else if (!strcmp(type, "cancel_call")) {
		cancel_call(r, json_string_value(json_object_get(msg, "call")));
	} else if (!strcmp(type, "result")) {
		json_t *o = json_deep_copy(msg);
		json_object_del(o, "type");
		json_object_del(o, "id");
		answer(r, 200, o);
		json_decref(o);
	} else if (!strcmp(type, "conversation_deleted") && r->deleting) {
		json_t *o = json_pack("{s:O}", "conversation", json_object_get(msg, "conversation"));
		answer(r, 200, o);
		json_decref(o);
	} else if (!strcmp(type, "error") && r->deleting && !r->in_submit) {
		const json_t *e = json_object_get(msg, "error");
		json_t *o = json_pack("{s:O}", "error", e);
		answer(r, status_for(json_string_value(json_object_get(e, "code"))), o);
		json_decref(o);
	} else if (!strcmp(type, "error") && r->in_submit && !r->err_body) {
		const json_t *e = json_object_get(msg, "error");
		r->err_status = status_for(json_string_value(json_object_get(e, "code")));
		r->err_body = json_pack("{s:O}", "error", e);
	}
}

static void io_drained(void *ud)
{
	struct exec_req *r = ud;
	r->base.drained = 1;
	if (r->base.gone)
		broker_http_sess_retire(&r->base);
}

static const struct broker_session_io exec_io = { io_send, io_drained, NULL };

void broker_http_exec_free(struct sess_base *b)
{
	struct exec_req *r = (struct exec_req *)b;
	while (r->calls) {
		struct pending *p = r->calls;
		r->calls = p->next;
		p->r = NULL;
		broker_webhook_cancel(p->h);
	}
	broker_session_free(b->session);
	json_decref(r->headers);
	json_decref(r->tools);
	json_decref(r->err_body);
	free(r->url);
	free(r->conversation);
	free(r);
}

/* The caller's connection dropped. Its tool calls go to the broker URL, not
 * to the connection, so the execution runs on to its end; the outcome is
 * kept (hub.h) for GET /v1/executions/{id}. */
void broker_http_exec_detach(struct exec_req *r)
{
	r->wsi = NULL;
	r->pss = NULL;
	if (!r->answered)
		cp_log(CP_LOG_INFO, "exec.caller_gone", "running",
		       json_integer(broker_session_running(r->base.session)), NULL);
}

/* The execute message from the body, the broker's URL and headers. */
static int parse_request(struct exec_req *r, json_t *req, const char **why)
{
	const json_t *broker = json_object_get(req, "broker");
	const char *url = json_string_value(json_object_get(broker, "url"));
	const json_t *headers = json_object_get(broker, "headers");
	if (!json_is_object(req))
		*why = "the body must be a JSON object";
	else if (!url || (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)))
		*why = "broker.url must be an http:// or https:// URL";
	else if (headers && !json_is_object(headers))
		*why = "broker.headers must be an object of strings";
	else if (broker_urlguard_url(r->base.srv->guard, url, NULL, 0, &r->refused))
		*why = r->refused.msg; /* names the rule */
	else
		*why = NULL;
	if (*why)
		return -1;
	const char *conv = json_string_value(json_object_get(req, "conversation"));
	r->url = strdup(url);
	r->conversation = strdup(conv ? conv : "");
	r->headers = headers ? json_deep_copy(headers) : json_object();
	r->tools = json_incref(json_object_get(req, "tools"));
	/* A call may take as long as the program's deadline, which cancels it
	 * (so the outcome is TIMEOUT, not a failed call); --webhook-timeout-ms
	 * lowers that. */
	long w = (long)r->base.srv->cfg.webhook_timeout_ms;
	r->call_timeout_ms = w > 0 ? w : MAX_CALL_MS;
	json_object_del(req, "broker");
	json_object_set_new(req, "type", json_string("execute"));
	return r->url && r->conversation && r->headers ? 0 : -1;
}

/* Hands @msg (stolen; NULL: out of memory) to r's session as the request
 * of this connection; refused at once, the answer is the error the session
 * gave, else @fallback as INTERNAL. */
static void submit(struct exec_req *r, struct lws *wsi, struct broker_http_pss *pss, json_t *msg,
                   const char *fallback)
{
	r->wsi = wsi;
	r->pss = pss;
	pss->req = r;
	char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
	json_decref(msg);
	r->in_submit = 1;
	if (text)
		broker_session_message(r->base.session, text, strlen(text));
	r->in_submit = 0;
	free(text);
	if (broker_session_running(r->base.session) == 0 && !r->answered) {
		if (!r->err_body)
			r->err_body = json_pack("{s:{s:s,s:s}}", "error", "code", "INTERNAL", "message",
			                        fallback);
		answer(r, r->err_status ? r->err_status : 500, r->err_body);
	}
}

void broker_http_exec_start(struct broker_http *srv, struct lws *wsi, struct broker_http_pss *pss)
{
	const char *why = NULL;
	json_t *req = cp_json_load(cp_buf_ptr(&pss->body), cp_buf_len(&pss->body), NULL);
	cp_buf_free(&pss->body);
	if (!req) {
		broker_http_respond_error(wsi, pss, 400, "INVALID_REQUEST", "the body is not valid JSON");
		return;
	}
	if (srv->nsessions >= srv->cfg.max_sessions) {
		json_decref(req);
		broker_http_metrics_count(srv->metrics, "too_many_sessions");
		broker_http_respond_error(wsi, pss, 429, "TOO_MANY_SESSIONS", "the server is full; retry later");
		return;
	}
	struct exec_req *r = calloc(1, sizeof *r);
	if (!r) {
		json_decref(req);
		broker_http_respond_error(wsi, pss, 500, "INTERNAL", "out of memory");
		return;
	}
	r->base.srv = srv;
	if (parse_request(r, req, &why) || broker_http_trace_apply(pss, req, &why) ||
	    !(r->base.session = broker_session_new(srv->cfg.cp, srv->cfg.ids, srv->hub, &exec_io,
	                                           r))) {
		json_decref(req);
		/* why may point into r (the URL rule's text): answered before r goes */
		broker_http_respond_error(wsi, pss, 400, "INVALID_REQUEST", why ? why : "out of memory");
		broker_http_exec_free(&r->base);
		return;
	}
	broker_session_set_hooks(r->base.session, &broker_http_session_hooks, srv);
	broker_session_set_webhook(r->base.session);
	broker_http_sess_link(srv, &r->base, BROKER_SESS_EXEC);
	submit(r, wsi, pss, req, "the execution could not be started");
}

/* DELETE /v1/conversations/{key}: the session message delete_conversation
 * on a session of its own, answered 200 {"conversation"} once everything of
 * it is gone, or with the error (503 SANDBOX_UNAVAILABLE: the store failed;
 * the DELETE may be sent again). A client that goes away does not stop it. */
void broker_http_delete_start(struct broker_http *srv, struct lws *wsi,
                              struct broker_http_pss *pss, const char *key)
{
	if (!*key || strlen(key) > 1024) {
		broker_http_respond_error(wsi, pss, 400, "INVALID_REQUEST",
		                          "the conversation key must be 1 to 1024 bytes");
		return;
	}
	if (srv->nsessions >= srv->cfg.max_sessions) {
		broker_http_metrics_count(srv->metrics, "too_many_sessions");
		broker_http_respond_error(wsi, pss, 429, "TOO_MANY_SESSIONS", "the server is full; retry later");
		return;
	}
	struct exec_req *r = calloc(1, sizeof *r);
	if (!r || !(r->base.session = broker_session_new(srv->cfg.cp, srv->cfg.ids, srv->hub,
	                                                 &exec_io, r))) {
		free(r);
		broker_http_respond_error(wsi, pss, 500, "INTERNAL", "out of memory");
		return;
	}
	r->base.srv = srv;
	r->deleting = 1;
	broker_http_sess_link(srv, &r->base, BROKER_SESS_EXEC);
	submit(r, wsi, pss, json_pack("{s:s,s:s}", "type", "delete_conversation", "conversation", key),
	       "the conversation could not be deleted");
}
