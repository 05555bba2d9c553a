/*
 * cmdtool.h - tools implemented by commands, for `codepod run --tools`.
 * Each call runs the tool's command with the input JSON on stdin; the output
 * JSON is what it prints on stdout. A non-zero exit rejects the call with the
 * last line of the command's stderr as the safe message.
 *
 * TOOLS.json: {"tools":[{"name":..,"description":..,"inputSchema":{..},
 *              "outputSchema":{..},"enabled":true,"command":["prog","arg"]}]}
 * (or the bare array). A relative command word with a slash in it is taken
 * from the folder of TOOLS.json. A NULL path loads an empty set.
 *
 * Loop context: the loop thread only.
 * Ownership: broker_cmdtools_load and broker_cmdtools_parse return a new set
 * (broker_cmdtools_free) and *decls, a new reference to the tools array
 * without "command" (for the execute request). The set must outlive the
 * execution that uses it.
 */
#ifndef BROKER_CMDTOOL_H
#define BROKER_CMDTOOL_H

#include <jansson.h>
#include <uv.h>

#include "runner/codepod.h"

struct broker_cmdtools;

/* TOOLS.json at @path (NULL: no tools) read and parsed; its calls run on
 * @loop. Errors as broker_cmdtools_parse, or the file's (base/fileio.h). */
int broker_cmdtools_load(uv_loop_t *loop, const char *path, struct broker_cmdtools **out,
                         json_t **decls, struct cp_err *err);

/* The parse step alone, on the @len bytes of @buf: what load does once the
 * file is read, with no I/O and no loop (tests/fuzz/fuzz_tools_file.c).
 * @name is the file's name in messages, @dir the folder relative command
 * paths are taken from. Returns 0, or CP_E_PARSE (not JSON, a key given
 * twice), CP_E_INVALID_REQUEST (not the format above, a command path over
 * PATH_MAX) or CP_E_NOMEM, with *out and *decls untouched. The set's calls
 * need a loop: only broker_cmdtools_load gives one. The tool declarations
 * themselves are checked by the engine (codepod_submit). */
int broker_cmdtools_parse(const char *buf, size_t len, const char *name, const char *dir,
                          struct broker_cmdtools **out, json_t **decls, struct cp_err *err);

/* The command of tool @name (the first of that name), NULL-terminated,
 * borrowed from the set; NULL when no tool has that name. */
const char *const *broker_cmdtools_command(const struct broker_cmdtools *set, const char *name);
void broker_cmdtools_free(struct broker_cmdtools *set);

/* The codepod_host callbacks; ud is the set. done is forwarded to on_done. */
void broker_cmdtools_bind(struct broker_cmdtools *set,
                          void (*on_done)(void *ud, const json_t *outcome), void *ud);
extern const struct codepod_host broker_cmdtools_host;

/* The output size cap for a command's stdout (default 16 MiB). */
void broker_cmdtools_set_max_output(struct broker_cmdtools *set, size_t max);

#endif
