/*
 * err.h - the one error convention of codepod.
 *
 * Functions that can fail return 0 on success or a negative enum cp_code,
 * and describe the failure in a caller-owned struct cp_err (usually on the
 * caller's stack). Passing NULL for the struct is allowed: the code is still
 * returned, the text is dropped.
 *
 * The codes split in two ranges: the outcome codes of docs/contract.md §4
 * (mapped one-to-one onto the strings of the outcome by cp_code_name) and
 * internal codes that never reach a backend as such (mapped to INTERNAL or to
 * an outcome code at the edge).
 *
 * Ownership: struct cp_err holds no pointers to heap memory; `where` points
 * at a string literal (__func__). Nothing to free.
 */
#ifndef CP_ERR_H
#define CP_ERR_H

#include <stddef.h>

enum cp_code {
	CP_OK = 0,
	/* Outcome codes (docs/contract.md §4). */
	CP_E_INVALID_REQUEST = -1,
	CP_E_SOURCE_TOO_LARGE = -2,
	CP_E_SANDBOX_UNAVAILABLE = -3,
	CP_E_STARTUP_TIMEOUT = -4,
	CP_E_TIMEOUT = -5,
	CP_E_SCRIPT_ERROR = -6,
	CP_E_RESULT_TOO_LARGE = -7,
	CP_E_PROCESS_EXITED = -8,
	CP_E_NEVER_SETTLES = -9,
	CP_E_CANCELLED = -10,
	CP_E_OUTCOME_UNKNOWN = -11,
	CP_E_INTERNAL = -12,
	CP_E_CPU_LIMIT = -13,
	CP_E_REPLAY_DIVERGED = -14,
	/* Outcome codes of file operations (broker/SESSION.md, files). */
	CP_E_FILE_NOT_FOUND = -15,    /* NOT_FOUND: no such file */
	CP_E_PRECONDITION = -16,      /* PRECONDITION_FAILED: a stale ifMatch */
	CP_E_FILE_TOO_LARGE = -17,    /* TOO_LARGE: over maxFileBytes or the workspace */
	/* Internal codes. */
	CP_E_NOMEM = -20,    /* allocation failed */
	CP_E_IO = -21,       /* an OS call failed: see errno text in msg */
	CP_E_PARSE = -22,    /* malformed input (JSON, YAML, frame, ...) */
	CP_E_TOO_BIG = -23,  /* input over a size limit fixed at creation */
	CP_E_TOO_DEEP = -24, /* JSON nesting over the limit */
	CP_E_NOT_FOUND = -25,
	CP_E_CONFLICT = -26,
	CP_E_AUTH = -27,
	CP_E_HTTP = -28,     /* a non-2xx answer (see msg, and the module's status) */
	CP_E_UNSUPPORTED = -29,
	CP_E_STATE = -30,    /* call not valid in the object's current state */
	CP_E_DENIED = -31,   /* a limit or allowlist refused the operation */
	CP_E_RETRY = -32     /* temporary failure: may be retried */
};

#define CP_ERR_MSG_MAX 1024 /* a Pod Security refusal lists every violation */

struct cp_err {
	enum cp_code code;
	char msg[CP_ERR_MSG_MAX];
	const char *where; /* __func__ of the setter */
};

/* Set code and message; returns code so callers can `return cp_err_set(...)`.
 * err may be NULL. The message is truncated to CP_ERR_MSG_MAX - 1 bytes. */
#define cp_err_set(err, code, ...) cp_err_set_at((err), __func__, (code), __VA_ARGS__)
int cp_err_set_at(struct cp_err *err, const char *where, enum cp_code code,
                  const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Like cp_err_set, appending ": <strerror(errnum)>". */
#define cp_err_errno(err, code, errnum, ...) \
	cp_err_errno_at((err), __func__, (code), (errnum), __VA_ARGS__)
int cp_err_errno_at(struct cp_err *err, const char *where, enum cp_code code,
                    int errnum, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

void cp_err_clear(struct cp_err *err);

/* "TIMEOUT", "SCRIPT_ERROR", ... for outcome codes; internal codes map to
 * "INTERNAL". Never NULL; the string is static. */
const char *cp_code_name(enum cp_code code);

#endif
