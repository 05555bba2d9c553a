/*
 * cmdtool.h - tools implemented by commands, for `codepod run --tools`.
 * Each call runs the tool's command with the input JSON on stdin; the output
 * JSON is what it prints on stdout. A non-zero exit rejects the call with the
 * last line of the command's stderr as the safe message.
 *
 * TOOLS.json: {"tools":[{"name":..,"description":..,"inputSchema":{..},
 *              "outputSchema":{..},"enabled":true,"command":["prog","arg"]}]}
 * Relative command paths are taken from the folder of TOOLS.json. A NULL
 * path loads an empty set.
 *
 * Loop context: the loop thread only.
 * Ownership: broker_cmdtools_load returns a new set (broker_cmdtools_free) and
 * *decls, a new reference to the tools array without "command" (for the
 * execute request). The set must outlive the execution that uses it.
 */
#ifndef BROKER_CMDTOOL_H
#define BROKER_CMDTOOL_H

#include <jansson.h>
#include <uv.h>

#include "runner/codepod.h"

struct broker_cmdtools;

int broker_cmdtools_load(uv_loop_t *loop, const char *path, struct broker_cmdtools **out,
                         json_t **decls, struct cp_err *err);
void broker_cmdtools_free(struct broker_cmdtools *set);

/* The codepod_host callbacks; ud is the set. done is forwarded to on_done. */
void broker_cmdtools_bind(struct broker_cmdtools *set,
                          void (*on_done)(void *ud, const json_t *outcome), void *ud);
extern const struct codepod_host broker_cmdtools_host;

/* The output size cap for a command's stdout (default 16 MiB). */
void broker_cmdtools_set_max_output(struct broker_cmdtools *set, size_t max);

#endif
