/*
 * webhook_sign.h - the signature on each webhook request (broker/SESSION.md
 * "Signature"): HMAC-SHA256 with the server's secret over the timestamp, a
 * '.', and the body, as "v1=" and 64 lowercase hex digits.
 *
 * Ownership: everything is borrowed for the call; @out is the caller's.
 * Context: pure (OpenSSL's HMAC), any thread.
 */
#ifndef BROKER_WEBHOOK_SIGN_H
#define BROKER_WEBHOOK_SIGN_H

#include <stddef.h>

#include "base/err.h"

/* "v1=" + 64 hex + NUL */
#define BROKER_SIG_LEN 68

/* Return 0, or CP_E_INTERNAL when OpenSSL fails (@out is then ""). */
int broker_webhook_sign(const unsigned char *key, size_t keylen, const char *timestamp,
                        const char *body, size_t len, char out[BROKER_SIG_LEN]);

/*
 * broker_webhook_secret_load() - the secret from @path: the file's bytes
 * without trailing newlines (CR or LF), at least 16 and at most 4096 bytes.
 * Reads the file at once (call it at start, not on the loop).
 * Return: a new buffer (free()) with its length in *len, or NULL with err set.
 */
unsigned char *broker_webhook_secret_load(const char *path, size_t *len, struct cp_err *err);

#endif
