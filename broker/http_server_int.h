/*
 * http_server_int.h - shared between the files of the HTTP server:
 * http_server.c (context, routing, responses, shutdown), http_server_ws.c
 * (WebSocket sessions), http_server_exec.c (POST /v1/executions),
 * http_server_auth.c (bearer token), http_server_metrics.c (Prometheus
 * text and the audit line).
 *
 * Loop context: the loop thread only. Ownership as in http_server.h; a
 * session object (ws_conn, exec_req) is freed only by the server's reaper,
 * never inside one of its own callbacks.
 */
#ifndef BROKER_HTTP_SERVER_INT_H
#define BROKER_HTTP_SERVER_INT_H

#include <stdio.h>

#include <libwebsockets.h>

#include "broker/http_server.h"
#include "base/buf.h"
#include "base/lws_uv.h"
#include "broker/session.h"
#include "broker/webhook.h"

#define BROKER_HTTP_SUBPROTOCOL "codepod.v1"

struct broker_http_auth;
struct broker_http_metrics;

/* First member of every session holder: what the session hooks get. */
struct sess_base {
	struct broker_http *srv;
	struct broker_session *session;
	struct sess_base *next, *prev; /* srv->sessions (open) or srv->reap */
	int kind;                      /* BROKER_SESS_WS or BROKER_SESS_EXEC */
	int drained;                   /* io.drained came */
	int gone;                      /* the transport is closed */
	int close_pending;             /* the reaper closes the session */
};
enum { BROKER_SESS_WS = 1, BROKER_SESS_EXEC = 2, BROKER_SESS_FILES = 3 };

struct broker_http {
	struct broker_http_config cfg; /* strings below are our copies */
	char **listen;
	char *token_file, *audit_file;
	uv_loop_t *loop;
	struct cp_lws *lws;
	struct broker_http_auth *auth;
	struct broker_http_metrics *metrics;
	struct broker_webhook *webhook;
	struct broker_urlguard *guard; /* the broker URLs allowed (url_guard.h) */
	struct broker_hub *hub;     /* every execution of every session, kept outcomes */
	unsigned char *webhook_key; /* --webhook-secret-file, or NULL: requests unsigned */
	size_t webhook_key_len;
	FILE *audit;
	struct sess_base *sessions; /* open: counted in nsessions */
	struct sess_base *reap;     /* drained and closed: freed by the reaper */
	unsigned nsessions;
	uv_timer_t reaper;          /* zero timeout: frees what is in reap */
	uv_timer_t sweep;           /* 1 Hz: idle sessions, the drain's end */
	uv_timer_t drain;           /* drain deadline */
	struct { int fd; long ino; } *waiting; /* no complete request head yet */
	size_t nwaiting;                        /* (http_server_pending.c) */
	int timers_open;
	int draining, stopped_rest, finishing, destroyed, freed_pending;
	uint64_t finish_started_ms;
	void (*stopped)(void *ud);
	void *stopped_ud;
};

/* What a POST body being read is for (broker_http_pss.post). */
enum { BROKER_HTTP_POST_NONE, BROKER_HTTP_POST_EXECUTION, BROKER_HTTP_POST_DECLARATIONS,
       BROKER_HTTP_POST_COMMAND };

/* Per-connection data of the HTTP protocol (protocols[0]). */
/* The W3C trace context headers of a POST /v1/executions (read with the
 * request line, since lws keeps headers only that long). Lengths: 0 absent,
 * -1 longer than the field can be. */
struct broker_http_trace_hdrs {
	char tp[64], ts[520];
	int tp_len, ts_len;
};

struct broker_http_pss {
	unsigned char *resp;         /* LWS_PRE + body, or NULL */
	size_t resp_len, resp_off;
	unsigned status;
	const char *ctype;
	int hdr_sent, responding, close_after, post;
	struct cp_buf body;          /* a POST body being read (zeroed until a POST) */
	int body_over;
	int linger;                  /* answered before its body was read: after the
	                              * answer, the rest of the body is read and
	                              * dropped (a few seconds at most) before the
	                              * close, so the answer is not lost to a reset */
	struct exec_req *req;        /* POST /v1/executions running */
	struct file_req *freq;       /* a file route or command running (http_server_files.c) */
	char *post_uri;              /* POST .../commands: its URI, for after the body */
	struct broker_http_trace_hdrs trace;
};

/* http_server_trace.c: the traceparent and tracestate headers into pss;
 * then into the execute request @req where its body names none (a
 * malformed value is refused there, as in the body). -1 with @why when a
 * header is too long to be valid. */
void broker_http_trace_read(struct lws *wsi, struct broker_http_pss *pss);
int broker_http_trace_apply(const struct broker_http_pss *pss, json_t *req, const char **why);

/* http_server_decl.c: answers POST /v1/declarations from pss->body */
/* Connections without a complete request head (http_server_pending.c):
 * open is a new connection (-1: over the limit, close it), done its head
 * complete or its close, again a kept-alive one waiting for another head;
 * the sweep forgets descriptors lws closed unseen. */
int broker_http_pending_open(struct broker_http *srv, int fd);
void broker_http_pending_done(struct broker_http *srv, int fd);
void broker_http_pending_again(struct broker_http *srv, int fd);
void broker_http_pending_sweep(struct broker_http *srv);

void broker_http_decl_respond(struct lws *wsi, struct broker_http_pss *pss);

/* http_server.c */
void broker_http_reap_schedule(struct broker_http *srv);
void broker_http_sess_link(struct broker_http *srv, struct sess_base *b, int kind);
/* The session's transport is gone and its session drained: to the reaper. */
void broker_http_sess_retire(struct sess_base *b);
/* Queue a response on an HTTP wsi (body taken: malloc'd with LWS_PRE
 * headroom, or NULL). */
void broker_http_respond_take(struct lws *wsi, struct broker_http_pss *pss, unsigned status,
                       const char *ctype, unsigned char *body, size_t len);
void broker_http_respond_json(struct lws *wsi, struct broker_http_pss *pss, unsigned status,
                       const json_t *body);
void broker_http_respond_error(struct lws *wsi, struct broker_http_pss *pss, unsigned status,
                        const char *code, const char *msg);
extern const struct broker_session_hooks broker_http_session_hooks;
void broker_http_check_drained(struct broker_http *srv);

/* http_server_ws.c */
int broker_http_ws_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user,
                     void *in, size_t len);
void broker_http_ws_free(struct sess_base *b);
void broker_http_ws_sweep(struct sess_base *b, uint64_t now_ms);
void broker_http_ws_finish(struct sess_base *b);

/* http_server_exec.c */
void broker_http_exec_start(struct broker_http *srv, struct lws *wsi, struct broker_http_pss *pss);
void broker_http_exec_detach(struct exec_req *r); /* its HTTP connection closed */
void broker_http_exec_free(struct sess_base *b);
/* DELETE /v1/conversations/{key} (@key borrowed for the call) */
void broker_http_delete_start(struct broker_http *srv, struct lws *wsi,
                              struct broker_http_pss *pss, const char *key);

/* http_server_files.c: the /v1/conversations/{key}/ routes. route: 0 not
 * one of them, 1 handled (answered or started), 2 a POST whose body is to
 * be read (then command_start). */
int broker_http_files_route(struct broker_http *srv, struct lws *wsi, struct broker_http_pss *pss,
                            const char *uri);
void broker_http_command_start(struct broker_http *srv, struct lws *wsi, struct broker_http_pss *pss,
                               const char *uri);
int broker_http_files_body(struct broker_http_pss *pss, struct lws *wsi, const void *in, size_t len);
void broker_http_files_body_done(struct broker_http_pss *pss);
int broker_http_files_writeable(struct lws *wsi, struct broker_http_pss *pss);
void broker_http_files_detach(struct file_req *r); /* its HTTP connection closed */
void broker_http_files_free(struct sess_base *b);

/* http_server_auth.c */
struct broker_http_auth *broker_http_auth_new(const char *path, struct cp_err *err);
void broker_http_auth_free(struct broker_http_auth *a);
/* 1 when @header ("Bearer TOKEN", may be NULL) holds the current token. */
int broker_http_auth_check(struct broker_http_auth *a, const char *header);
/* Hex SHA-256 of @s into @hex (65 bytes). */
void broker_http_sha256_hex(const char *s, size_t len, char hex[65]);

/* http_server_metrics.c */
struct broker_http_metrics *broker_http_metrics_new(void);
void broker_http_metrics_free(struct broker_http_metrics *m);
void broker_http_metrics_outcome(struct broker_http_metrics *m, const json_t *outcome);
void broker_http_metrics_count(struct broker_http_metrics *m, const char *what); /* rejections */
/* The Prometheus text (new string, free()). */
/* The exporter whose drops /metrics counts (borrowed; NULL: none). */
void broker_http_metrics_set_otlp(struct broker_http_metrics *m, const struct broker_otlp *otlp);
char *broker_http_metrics_render(struct broker_http_metrics *m, const struct codepod_backend *backend,
                          unsigned in_flight, unsigned sessions, const struct broker_hub *hub,
                          size_t *len);
/* One audit line for a finished execution. */
void broker_http_audit(struct broker_http *srv, const char *id, const char *conversation,
                const json_t *outcome);

#endif
