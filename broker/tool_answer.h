/*
 * tool_answer.h - what a tool's answer means for its call, read from bytes
 * codepod does not control: the HTTP reply of a webhook broker (POST
 * /v1/executions) and the exit status and output of a tool command
 * (`codepod run --tools`). Pure functions: no I/O, no loop.
 *
 * Each returns 0 with *output a new reference (json_decref) when the call
 * succeeded, or nonzero with a message in msg (always NUL-terminated, at
 * most cap - 1 bytes) and *output NULL. The message never
 * holds tool data, except a tool command's own last stderr line, which is
 * its error message by contract.
 */
#ifndef BROKER_TOOL_ANSWER_H
#define BROKER_TOOL_ANSWER_H

#include <stddef.h>

#include <jansson.h>

/* The broker's reply: 2xx with {"output": ...} (0), {"error": "..."} (1:
 * the tool's own error, msg is its message) or {"suspend": true} (3: the
 * call waits for a person's approval; no output). Anything else is the broker
 * failing, not the tool (2): *reason is "http_status" (not 2xx) or
 * "malformed" (not one of the two forms), a static string, and msg says what
 * for the operator's log (never for the model: the program is told only that
 * the tool could not be reached). */
int broker_webhook_answer(long status, const char *body, size_t len, json_t **output,
                          char *msg, size_t cap, const char **reason);

/* A tool command that exited with @exit_status: its stdout (@out, @olen)
 * must be JSON; on failure the last non-empty line of its stderr tail
 * (@etail, @elen) is the message. @overflow: stdout went past @max_output. */
int broker_cmdtool_answer(int exit_status, int overflow, size_t max_output,
                          const char *out, size_t olen, const char *etail, size_t elen,
                          json_t **output, char *msg, size_t cap);

#endif
