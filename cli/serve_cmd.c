/*
 * serve_cmd.c - `codepod serve --listen HOST:PORT --token-file FILE`: its own
 * options, and the HTTP/WebSocket server on the caller's loop and engine,
 * with SIGTERM and SIGINT starting a graceful stop (a second signal stops
 * what still runs).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/http_server.h"
#include "base/log.h"
#include "cli/serve_cmd.h"

struct serve_cmd {
	struct broker_http *srv;
	uv_signal_t sigterm, sigint;
	unsigned drain_ms;
	int stopped;
	void (*quiet)(void *ud); /* the caller's: release what keeps the loop alive */
	void *quiet_ud;
};

static void on_stopped(void *ud)
{
	struct serve_cmd *st = ud;
	st->stopped = 1;
	uv_close((uv_handle_t *)&st->sigterm, NULL);
	uv_close((uv_handle_t *)&st->sigint, NULL);
	if (st->quiet)
		st->quiet(st->quiet_ud);
}

static void on_signal(uv_signal_t *h, int sig)
{
	struct serve_cmd *st = h->data;
	cp_log(CP_LOG_INFO, "serve.signal", "signal", json_integer(sig), NULL);
	broker_http_shutdown(st->srv, st->drain_ms, on_stopped, st);
}

static int add_listen(void *base, const char *arg)
{
	struct cli_listen_opts *o = base;
	if (o->http.nlisten == CLI_MAX_LISTEN) {
		fprintf(stderr, "codepod: at most %d --listen\n", CLI_MAX_LISTEN);
		return -1;
	}
	o->addr[o->http.nlisten++] = arg;
	return 0;
}

static int add_broker_allow(void *base, const char *arg)
{
	struct cli_listen_opts *o = base;
	if (o->nbroker_allow == CLI_MAX_BROKER_ALLOW) {
		fprintf(stderr, "codepod: at most %d --broker-allow (each may list several, "
		        "comma-separated)\n", CLI_MAX_BROKER_ALLOW);
		return -1;
	}
	o->broker_allow[o->nbroker_allow++] = arg;
	return 0;
}

#define STR_(x) #x
#define STR(x) STR_(x)
#define L struct cli_listen_opts
static const struct cli_opt listen_opts[] = {
	{ "listen", "HOST:PORT", CLI_CALL, .call = add_listen,
	  .help = "serve HTTP and WebSocket there (or [v6]:PORT; port 0 picks one); "
	          "repeatable, up to " STR(CLI_MAX_LISTEN) " times" },
	{ "token-file", "FILE", CLI_STR_AT(L, http.token_file), CLI_SECRET,
	  .help = "the bearer token (its first line); required" },
	{ "drain-seconds", "N", CLI_UINT_AT(L, drain_s, 0, 86400),
	  .help = "SIGTERM: how long running executions may finish" },
	{ "max-sessions", "N", CLI_UINT_AT(L, http.max_sessions, 1, 1000000),
	  .help = "open WebSocket sessions plus running POST /v1/executions" },
	{ "audit-file", "FILE", CLI_STR_AT(L, http.audit_file), CLI_SECRET,
	  .help = "one JSON line per finished execution (default: on stderr)" },
	{ "header-timeout", "S", CLI_UINT_AT(L, http.header_timeout_s, 1, 3600),
	  .help = "headers, and a request body, must arrive within S seconds" },
	{ "idle-timeout", "S", CLI_UINT_AT(L, http.idle_timeout_s, 1, 86400),
	  .help = "a session with nothing running and no traffic is closed after S seconds" },
	{ "ws-ping-interval", "S", CLI_UINT_AT(L, http.ws_ping_interval_s, 1, 3600),
	  .help = "a WebSocket peer is pinged every S seconds" },
	{ "ws-idle-timeout", "S", CLI_UINT_AT(L, http.ws_idle_timeout_s, 1, 86400),
	  .help = "a WebSocket peer silent for S seconds (no pong, no message) is dropped; "
	          "its executions wait for attach" },
	{ "webhook-timeout-ms", "N", CLI_UINT_AT(L, http.webhook_timeout_ms, 1, 3600000),
	  .help = "lowers every webhook call's timeout (default: the program's deadline)" },
	{ "reattach-grace", "S", CLI_UINT_AT(L, http.hub.grace_s, 0, 86400),
	  .help = "a dropped session's executions wait S seconds for attach; 0: stop at once" },
	{ "outcome-retention", "S", CLI_UINT_AT(L, http.hub.retention_s, 0, 86400),
	  .help = "finished outcomes are kept S seconds; 0: none" },
	{ "webhook-secret-file", "FILE", CLI_STR_AT(L, http.webhook_secret_file), CLI_SECRET,
	  .help = "signs every webhook request (default: unsigned)" },
	{ "max-pending-connections", "N", CLI_UINT_AT(L, http.max_pending, 1, 65536),
	  .help = "connections without a complete request head (silent, part-way, or kept "
	          "alive between requests), each closed after --header-timeout; past it a "
	          "new one is closed at once" },
	{ "broker-allow", "HOST|CIDR", CLI_CALL, .call = add_broker_allow,
	  .help = "the only brokers POST /v1/executions may name: host names, addresses "
	          "and CIDRs, comma-separated or repeated (default: any but link-local and "
	          "metadata addresses); codepod's own listener never" },
	CLI_END,
};
#undef L

const struct cli_group cli_listen_group = { "serve --listen", listen_opts };

void cli_listen_defaults(struct cli_listen_opts *o)
{
	memset(o, 0, sizeof *o);
	broker_http_config_defaults(&o->http);
	o->drain_s = 20;
}

int cli_serve_listen(uv_loop_t *loop, struct codepod *cp, struct cp_idset *ids,
                     const struct cli_listen_opts *o, void (*quiet)(void *ud), void *quiet_ud)
{
	if (!o->http.token_file) {
		fprintf(stderr, "codepod: serve --listen needs --token-file FILE\n");
		return 2;
	}
	struct broker_http_config cfg = o->http;
	cfg.loop = loop;
	cfg.cp = cp;
	cfg.ids = ids;
	cfg.listen = o->addr;
	cfg.broker_allow = o->nbroker_allow ? o->broker_allow : NULL;
	struct serve_cmd st = { .drain_ms = o->drain_s * 1000u, .quiet = quiet, .quiet_ud = quiet_ud };
	struct cp_err err;
	if (broker_http_start(&cfg, &st.srv, &err)) {
		fprintf(stderr, "codepod: %s\n", err.msg);
		/* The backend's handles (a Kubernetes client's timers and
		 * connections) would keep the loop, and so this run, alive. */
		if (quiet)
			quiet(quiet_ud);
		uv_run(loop, UV_RUN_DEFAULT); /* lws's handles finish closing */
		return 2;
	}
	uv_signal_init(loop, &st.sigterm);
	uv_signal_init(loop, &st.sigint);
	st.sigterm.data = st.sigint.data = &st;
	uv_signal_start(&st.sigterm, on_signal, SIGTERM);
	uv_signal_start(&st.sigint, on_signal, SIGINT);
	cp_log(CP_LOG_INFO, "serve.start", "transport", json_string("http"), NULL);
	uv_run(loop, UV_RUN_DEFAULT);
	int clean = st.stopped && broker_http_clean_drain(st.srv);
	cp_log(CP_LOG_INFO, "serve.exit", "cleanDrain", json_boolean(clean), NULL);
	broker_http_free(st.srv);
	uv_run(loop, UV_RUN_DEFAULT);
	return st.stopped ? 0 : 1;
}
