/*
 * command.h - executions of the command kind: a shell line or an argv run
 * as a fresh process in the conversation's sandbox, by the same runner a
 * program gets (the runner starts it as its child, so the backend's spawn,
 * kill, deadline, isolation and usage are a program's). The request is the
 * session's "command" message (broker/SESSION.md); codepod_submit takes it
 * when its "type" is "command".
 *
 * Ownership: the hello object built by codepod_command_init belongs to the
 * execution (e->cmd) and is freed with it.
 */
#ifndef CODEPOD_COMMAND_H
#define CODEPOD_COMMAND_H

#include "runner/exec_int.h"

/* Read the command fields of @request into e->cmd (the hello's "cmd"
 * object) and e->src (its JSON text, for the digest and maxSourceBytes).
 * CP_E_INVALID_REQUEST names the field. */
int codepod_command_init(struct codepod_exec *e, const json_t *request, struct cp_err *err);

/* The runner's P frame: the command ended by itself. */
void codepod_command_ended(struct codepod_exec *e, const char *payload, size_t len);

/* The command_result fields (new reference), for codepod_outcome_build. */
json_t *codepod_command_outcome(const struct codepod_exec *e, json_t *usage /* steals */);

#endif
