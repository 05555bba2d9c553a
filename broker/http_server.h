/*
 * http_server.h - `codepod serve --listen`: the HTTP and WebSocket API of
 * docs/contract.md §5 with libwebsockets on the project's libuv loop.
 *
 *   GET  /v1/session     WebSocket, subprotocol codepod.v1: the session
 *                        protocol (session.h), one broker_session per socket
 *   POST /v1/executions  the execute message plus broker {url, headers}; tool
 *                        calls are POSTed to the broker (webhook.h); the
 *                        answer is the outcome JSON
 *   GET  /v1/executions/{id}  a kept outcome (200), 202 while it runs, 404
 *   GET  /healthz, /readyz, /metrics (Prometheus text format), no auth
 *
 * Every other endpoint needs `Authorization: Bearer TOKEN` (the token file is
 * re-read when it changes; compared in constant time); else 401 with a small
 * JSON body. Limits (all fixed at start): WebSocket messages up to
 * max_message bytes (fragments are reassembled up to the cap; a longer
 * message is read to its end and discarded, and the session answers with an
 * INVALID_REQUEST `error`: the connection stays up, as on stdio), request
 * bodies up to max_body (413), a bounded send queue per connection (a client
 * that does not read is disconnected), header/body timeouts and an idle
 * timeout for sessions with nothing running, a ping every ws_ping_interval_s
 * and a drop of a WebSocket peer silent for ws_idle_timeout_s (its
 * executions are detached as when its connection resets), max_sessions (429 on upgrade)
 * and max_executions in flight (an `error` with code TOO_MANY_EXECUTIONS, or
 * 429). While draining, new executes get SHUTTING_DOWN (503 over HTTP).
 *
 * Every execution id is checked against ONE id set shared by all sessions.
 * Each finished execution writes one audit line (audit.h style: cp_log event
 * "audit" on stderr, or a line in audit_file).
 *
 * Loop context: the loop thread only.
 *
 * Ownership: the config is copied (its strings too); the engine and id set
 * are borrowed and must outlive the server. broker_http_free() after the
 * stopped() callback of broker_http_shutdown(), or after a failed start.
 */
#ifndef BROKER_HTTP_SERVER_H
#define BROKER_HTTP_SERVER_H

#include <stddef.h>

#include <uv.h>

#include "runner/codepod.h"
#include "broker/hub.h"
#include "base/idset.h"
#include "broker/otlp.h"

struct broker_http;

struct broker_http_config {
	uv_loop_t *loop;
	struct codepod *cp;
	struct cp_idset *ids;
	const char *const *listen;   /* "HOST:PORT" ("[v6]:PORT"); port 0 picks one */
	size_t nlisten;
	const char *token_file;
	const char *audit_file;      /* NULL: audit lines go to stderr */
	unsigned max_sessions;       /* open WebSocket sessions + POST executions */
	unsigned max_executions;     /* in flight, across all sessions */
	size_t max_message;          /* one WebSocket message */
	size_t max_body;             /* one request body */
	size_t max_queue;            /* bytes queued for one connection */
	unsigned header_timeout_s;   /* headers, and a request body, must arrive within */
	unsigned idle_timeout_s;     /* a session with nothing running and no traffic */
	unsigned ws_ping_interval_s; /* a WebSocket peer is pinged this often */
	unsigned ws_idle_timeout_s;  /* ... and dropped when silent this long (> the interval) */
	unsigned webhook_timeout_ms; /* one tool call POSTed to a broker; 0: the deadline's */
	const char *webhook_secret_file; /* signs webhook requests; NULL: unsigned */
	unsigned max_pending;        /* connections without a complete request head */
	const char *const *broker_allow; /* --broker-allow values (url_guard.h), NULL-terminated;
	                                  * NULL: the default rules */
	struct broker_hub_config hub; /* reattach grace, outcome retention (loop: ours) */
	const struct broker_otlp *otlp; /* the span exporter, for /metrics; NULL: none */
};

/* Defaults for every limit (listen, token_file and the pointers left NULL). */
void broker_http_config_defaults(struct broker_http_config *cfg);

/**
 * broker_http_start() - listen on every address and serve.
 * Logs one "serve.listen" line per address with the bound port.
 * Returns 0, CP_E_INVALID_REQUEST (a bad address, a ws_idle_timeout_s not
 * above ws_ping_interval_s), CP_E_IO (bind failed,
 * token file unreadable), CP_E_UNSUPPORTED (lws cannot use the uv loop).
 */
int broker_http_start(const struct broker_http_config *cfg, struct broker_http **out,
                      struct cp_err *err);

/**
 * broker_http_shutdown() - graceful stop: refuse new sessions and
 * executions, let running executions finish for @drain_ms, then stop the
 * rest (CANCELLED); deliver every result, close every connection, destroy
 * the lws context, then call @stopped(@ud) once. A second call stops the
 * rest at once.
 */
void broker_http_shutdown(struct broker_http *srv, unsigned drain_ms,
                          void (*stopped)(void *ud), void *ud);

/* 1 if every execution ended before the drain deadline (none stopped). */
int broker_http_clean_drain(const struct broker_http *srv);

void broker_http_free(struct broker_http *srv);

#endif
