/*
 * digest.h - the execution digest: one SHA-256 over what determines a run.
 *
 * codepod_digest() hashes "codepod-digest-v1\0" + source + "\0" + tools + "\0" +
 * policy, where tools and policy are jansson values dumped with
 * JSON_COMPACT | JSON_SORT_KEYS (JSON_ENCODE_ANY too, so scalars are
 * allowed; a NULL value is hashed as the text "null"). Key order in the
 * objects therefore does not change the digest. Uses OpenSSL's EVP API.
 *
 * Ownership: all arguments are borrowed for the duration of the call; out
 * is caller-owned (65 bytes). Nothing to free.
 *
 * Context: pure, any thread.
 */
#ifndef CODEPOD_DIGEST_H
#define CODEPOD_DIGEST_H

#include <stddef.h>

#include <jansson.h>

#include "base/err.h"

/* Length of the digest in hex, without the NUL. */
#define CODEPOD_DIGEST_HEX_LEN 64

/**
 * codepod_digest() - SHA-256 digest of an execution's inputs.
 * @src: @src_len bytes of program source (may contain NUL; NULL if 0).
 * @tools, @policy: jansson values (borrowed; NULL hashes as "null").
 * @out: receives 64 lowercase hex characters and a NUL.
 * @err: filled on failure; may be NULL.
 *
 * Return: 0, CP_E_NOMEM (a dump failed: out of memory), or CP_E_INTERNAL
 * (OpenSSL failed). On failure @out holds an empty string.
 */
int codepod_digest(const char *src, size_t src_len, const json_t *tools, const json_t *policy,
              char out[65], struct cp_err *err);

#endif
