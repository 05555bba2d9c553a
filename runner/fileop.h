/*
 * fileop.h - executions of the file kind: one operation on a file of the
 * conversation's workspace (read, write, stat, list, delete), done by the
 * runner the engine starts for a program, as the sandbox's user and inside
 * the sandbox (runner/runner.js, "a file operation"). The request is the
 * session's file_read, file_write, file_stat, file_list or file_delete
 * message (broker/SESSION.md); codepod_submit takes it by its "type".
 *
 * Bytes move a chunk at a time, each acknowledged before the next
 * (codepod_file_ack, codepod_file_chunk in codepod.h): flow control from
 * the client to the sandbox on every transport. To the runner, a write's
 * and an archive_write's chunks are a line that gives their length and
 * then the bytes themselves (runner/PROTOCOL.md), whichever way the host
 * gave them (codepod_file_chunk decodes base64, codepod_file_bytes takes
 * them raw).
 *
 * Ownership: the hello object built by codepod_fileop_init belongs to the
 * execution (e->fop) and is freed with it.
 */
#ifndef CODEPOD_FILEOP_H
#define CODEPOD_FILEOP_H

#include "runner/exec_int.h"

/* The largest chunk of raw bytes either way. */
#define CODEPOD_FILE_CHUNK 262144

/* 1 when @type names a file operation's request. */
int codepod_fileop_type(const char *type);

/* Read the request's fields into e->fop (the hello's "fop") and e->src (its
 * JSON text, for the digest). CP_E_INVALID_REQUEST names the field or the
 * path rule. */
int codepod_fileop_init(struct codepod_exec *e, const char *type, const json_t *request,
                        struct cp_err *err);

/* The hello's "fop" (new reference): e->fop, and for a read, or a write
 * with ifMatch, what is known of the file's ETag (runner/etags.h). */
json_t *codepod_fileop_hello(const struct codepod_exec *e);

/* The runner's frames of a file operation: B (data read), A (ready for the
 * next chunk), F (the end). */
void codepod_fileop_frame(struct codepod_exec *e, char kind, const char *payload, size_t len);

/* The string rules of a workspace path (@root_ok: "" and "." may name the
 * workspace): relative, no "..", no NUL. The runner checks again where it
 * opens the file; this answers a mistake before a sandbox is started. */
int codepod_path_check(const char *key, const json_t *v, int root_ok, struct cp_err *err);

/* 1 when the runner sent its end but chunks before it still wait for the
 * host: its exit then ends nothing (the held end does, once delivered). */
int codepod_fileop_pending(const struct codepod_exec *e);

/* Frees what a read holds (exec_free). */
void codepod_fileop_free(struct codepod_exec *e);

/* The file_result fields (new reference), for codepod_outcome_build. */
json_t *codepod_fileop_outcome(const struct codepod_exec *e, json_t *usage /* steals */);

#endif
