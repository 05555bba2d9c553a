/*
 * serve_cmd.c - `codepod serve --listen HOST:PORT --token-file FILE`: the
 * HTTP/WebSocket server on the caller's loop and engine, with SIGTERM and
 * SIGINT starting a graceful stop (a second signal stops what still runs).
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/http_server.h"
#include "base/log.h"
#include "cli/serve_cmd.h"

#define RECENT_IDS 100000
#define MAX_LISTEN 16

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

static int parse_uint(const char *flag, const char *v, unsigned long max, unsigned long *out)
{
	char *e = NULL;
	unsigned long n = strtoul(v, &e, 10);
	if (!*v || *e || n > max) {
		fprintf(stderr, "codepod: %s needs a number up to %lu\n", flag, max);
		return -1;
	}
	*out = n;
	return 0;
}

/* Options of `serve --listen` (the backend's are parsed by main.c). */
static int parse(int argc, char **argv, struct broker_http_config *cfg, const char **listen,
                 unsigned *drain_s)
{
	static const struct option longopts[] = {
		{ "listen", required_argument, NULL, 'L' },
		{ "token-file", required_argument, NULL, 'T' },
		{ "audit-file", required_argument, NULL, 'A' },
		{ "drain-seconds", required_argument, NULL, 'D' },
		{ "max-sessions", required_argument, NULL, 'S' },
		{ "max-executions", required_argument, NULL, 'E' },
		{ "header-timeout", required_argument, NULL, 'H' },
		{ "idle-timeout", required_argument, NULL, 'I' },
		{ "webhook-timeout-ms", required_argument, NULL, 'W' },
		{ "reattach-grace", required_argument, NULL, 'G' },
		{ "webhook-secret-file", required_argument, NULL, 'K' },
		{ "outcome-retention", required_argument, NULL, 'R' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	unsigned long v = 0;
	optind = 1;
	opterr = 0; /* main.c's options are skipped here */
	while ((c = getopt_long(argc, argv, "-", longopts, NULL)) != -1) {
		switch (c) {
		case 'L':
			if (cfg->nlisten == MAX_LISTEN) {
				fprintf(stderr, "codepod: at most %d --listen\n", MAX_LISTEN);
				return -1;
			}
			listen[cfg->nlisten++] = optarg;
			break;
		case 'T': cfg->token_file = optarg; break;
		case 'A': cfg->audit_file = optarg; break;
		case 'K': cfg->webhook_secret_file = optarg; break;
		case 'D': if (parse_uint("--drain-seconds", optarg, 86400, &v)) return -1; *drain_s = (unsigned)v; break;
		case 'S': if (parse_uint("--max-sessions", optarg, 1000000, &v) || !v) return -1; cfg->max_sessions = (unsigned)v; break;
		case 'E': if (parse_uint("--max-executions", optarg, 100000, &v) || !v) return -1; cfg->max_executions = (unsigned)v; break;
		case 'H': if (parse_uint("--header-timeout", optarg, 3600, &v) || !v) return -1; cfg->header_timeout_s = (unsigned)v; break;
		case 'I': if (parse_uint("--idle-timeout", optarg, 86400, &v) || !v) return -1; cfg->idle_timeout_s = (unsigned)v; break;
		case 'W': if (parse_uint("--webhook-timeout-ms", optarg, 3600000, &v) || !v) return -1; cfg->webhook_timeout_ms = (unsigned)v; break;
		case 'G': if (parse_uint("--reattach-grace", optarg, 86400, &v)) return -1; cfg->hub.grace_s = (unsigned)v; break;
		case 'R': if (parse_uint("--outcome-retention", optarg, 86400, &v)) return -1; cfg->hub.retention_s = (unsigned)v; break;
		default: break;
		}
	}
	optind = 1;
	opterr = 1;
	if (!cfg->token_file) {
		fprintf(stderr, "codepod: serve --listen needs --token-file FILE\n");
		return -1;
	}
	return 0;
}

int broker_serve_main(uv_loop_t *loop, struct codepod *cp, int argc, char **argv,
                      void (*quiet)(void *ud), void *quiet_ud)
{
	struct broker_http_config cfg;
	const char *listen[MAX_LISTEN];
	unsigned drain_s = 20;
	broker_http_config_defaults(&cfg);
	if (parse(argc, argv, &cfg, listen, &drain_s))
		return 2;
	struct cp_idset *ids = cp_idset_new(RECENT_IDS);
	if (!ids) {
		fprintf(stderr, "codepod: out of memory\n");
		return 2;
	}
	cfg.loop = loop;
	cfg.cp = cp;
	cfg.ids = ids;
	cfg.listen = listen;
	struct serve_cmd st = { .drain_ms = drain_s * 1000u, .quiet = quiet, .quiet_ud = quiet_ud };
	struct cp_err err;
	if (broker_http_start(&cfg, &st.srv, &err)) {
		fprintf(stderr, "codepod: %s\n", err.msg);
		uv_run(loop, UV_RUN_DEFAULT); /* lws's handles finish closing */
		cp_idset_free(ids);
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
	cp_idset_free(ids);
	return st.stopped ? 0 : 1;
}
