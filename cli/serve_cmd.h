/*
 * serve_cmd.h - `codepod serve --listen`: parses its own options from argv
 * (--listen HOST:PORT (repeatable), --token-file FILE, --audit-file FILE,
 * --drain-seconds N (20), --max-sessions N (1000), --max-executions N (256),
 * --header-timeout S (10), --idle-timeout S (300), --webhook-timeout-ms N
 * (30000); other options are skipped: main.c owns them), runs the server on
 * @loop until a signal has drained it, and returns the exit code (0 after a
 * graceful stop, 2 on a usage or start error).
 *
 * Loop context: runs the loop. Ownership: @cp is borrowed.
 */
#ifndef BROKER_SERVE_CMD_H
#define BROKER_SERVE_CMD_H

#include <uv.h>

#include "runner/codepod.h"

/* @quiet is called once the server has stopped (drained or not): release
 * whatever else keeps the loop alive (the backend), so the loop can end. */
int broker_serve_main(uv_loop_t *loop, struct codepod *cp, int argc, char **argv,
                      void (*quiet)(void *ud), void *quiet_ud);

#endif
