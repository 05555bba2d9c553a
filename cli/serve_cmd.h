/*
 * serve_cmd.h - `codepod serve --listen`: its options (cli_listen_group,
 * read into struct cli_listen_opts by the serve command's one parse), and
 * the HTTP/WebSocket server on @loop until a signal has drained it.
 *
 * Loop context: runs the loop. Ownership: @cp and @ids are borrowed.
 */
#ifndef CLI_SERVE_CMD_H
#define CLI_SERVE_CMD_H

#include <uv.h>

#include "base/idset.h"
#include "broker/http_server.h"
#include "cli/options.h"
#include "runner/codepod.h"

#define CLI_MAX_LISTEN 16
#define CLI_MAX_BROKER_ALLOW 64 /* --broker-allow given this many times at most */

struct cli_listen_opts {
	struct broker_http_config http; /* its listen is set from addr at start */
	const char *addr[CLI_MAX_LISTEN];
	unsigned drain_s; /* SIGTERM: how long running executions may finish */
	const char *broker_allow[CLI_MAX_BROKER_ALLOW + 1]; /* NULL-terminated */
	size_t nbroker_allow;
};

/* serve --listen's own options (every one sets a field of cli_listen_opts). */
extern const struct cli_group cli_listen_group;

/* The defaults: broker_http_config_defaults(), no address, 20 s to drain. */
void cli_listen_defaults(struct cli_listen_opts *o);

/**
 * cli_serve_listen() - serve until a signal has drained the server.
 * @o: the options; @o->http's loop, cp, ids and listen are set here.
 * @quiet: called once the server has stopped (drained or not): release
 *         whatever else keeps the loop alive (the backend), so the loop can
 *         end.
 *
 * Return: the exit code: 0 after a graceful stop, 1 when the loop ended
 * without one, 2 on a usage (no --token-file) or start error.
 */
int cli_serve_listen(uv_loop_t *loop, struct codepod *cp, struct cp_idset *ids,
                     const struct cli_listen_opts *o, void (*quiet)(void *ud), void *quiet_ud);

#endif
