/*
 * s3_creds.h - the store's credentials: an access key id, its secret and
 * an optional session token, from the environment (AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) or from a file in the AWS shared
 * credentials format (`aws_access_key_id = ...` lines, in a `[default]`
 * section or before any section), which is read again whenever it changes
 * (a rotated Secret mounted in a pod is a new file): each use looks at its
 * inode, size and modification time first (one stat, small enough for the
 * loop: the file is read only when it changed).
 *
 * A file that no longer reads or parses keeps the last good credentials and
 * says so once in the log (a rotation in progress is not an outage).
 *
 * Ownership: caller-owned struct, copied strings; nothing to free.
 *
 * Context: the loop thread (or any one thread per struct).
 */
#ifndef STORE_S3_CREDS_H
#define STORE_S3_CREDS_H

#include <stdint.h>

#include "base/err.h"

#define STORE_CRED_MAX 256
#define STORE_TOKEN_MAX 4096

struct store_creds {
	char access[STORE_CRED_MAX];
	char secret[STORE_CRED_MAX];
	char token[STORE_TOKEN_MAX]; /* "" when none */
	char file[4096];             /* "" when from the environment */
	uint64_t ino, size;          /* the file as last read */
	int64_t mtime_ns;
	int loaded;
	int warned;                  /* the file's current failure was logged */
};

/**
 * store_creds_init() - credentials from @file (NULL: the environment),
 * read now. Returns 0, or CP_E_AUTH/CP_E_IO/CP_E_NOT_FOUND with the reason
 * (no key id, no secret, a file that cannot be read).
 */
int store_creds_init(struct store_creds *c, const char *file, struct cp_err *err);

/**
 * store_creds_fresh() - read the file again when it changed since it was
 * last read. Returns 0 (the credentials are usable), or the error of
 * store_creds_init when none were ever loaded.
 */
int store_creds_fresh(struct store_creds *c, struct cp_err *err);

/**
 * store_creds_parse() - the three values out of the text of a credentials
 * file (@len bytes). Returns 0, or CP_E_PARSE/CP_E_AUTH when a key id or
 * secret is missing or a value is too long. @c's values change only on 0.
 */
int store_creds_parse(struct store_creds *c, const char *text, size_t len, struct cp_err *err);

#endif
