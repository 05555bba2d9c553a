/*
 * continuation.h - the signed blob a suspended execution hands out, and the
 * keys that sign and verify it.
 *
 * A continuation is "KEYID.PAYLOAD.MAC": PAYLOAD the base64url (no padding)
 * of a compact JSON object, MAC the base64url of HMAC-SHA256 over
 * "KEYID.PAYLOAD" with the key KEYID names. The object carries, besides what
 * the engine puts in it, "v" (1), "kid" (the signing key's id, the same as
 * the prefix), "conv", "iat" and "exp" (seconds since the epoch) and "jti"
 * (32 hex digits, random): seal() checks the caller gave them, open()
 * checks them against the key, the conversation and the clock.
 *
 * Keys: a keyring holds one or more (id, secret) pairs; the first signs and
 * every one verifies, so a key can be rotated in by putting it first and
 * rotated out once no continuation it signed is alive (the TTL).
 *
 * Ownership: a keyring is made by codepod_keyring_parse or
 * codepod_keyring_random and freed by codepod_keyring_free. seal() returns
 * a new string (free()); open() a new reference (json_decref). Arguments
 * are borrowed for the call.
 *
 * Context: pure (OpenSSL's HMAC and, for a random keyring, its RNG); any
 * thread.
 */
#ifndef CODEPOD_CONTINUATION_H
#define CODEPOD_CONTINUATION_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/err.h"

/* The largest continuation codepod writes or reads, in bytes of its text. */
#define CODEPOD_CONTINUATION_MAX_BYTES (4u << 20)
/* A key's secret: at least this many bytes (twice as many hex digits). */
#define CODEPOD_KEY_MIN_BYTES 32
#define CODEPOD_KEY_MAX_BYTES 256
#define CODEPOD_KEY_ID_MAX 64
/* How long a continuation stays valid unless --continuation-ttl says. */
#define CODEPOD_CONTINUATION_DEFAULT_TTL_S 86400u

struct codepod_keyring;

/*
 * codepod_keyring_parse() - keys from the text of a key file: one per line,
 * "KEYID:HEX", KEYID 1 to 64 of [A-Za-z0-9_-], HEX an even number of hex
 * digits, at least 64 (32 bytes). Empty lines and lines starting with '#'
 * are skipped. Errors (CP_E_PARSE) name the line, never its secret.
 */
int codepod_keyring_parse(const char *text, size_t len, struct codepod_keyring **out,
                          struct cp_err *err);

/* One random key with the id "ephemeral": continuations it signs die with
 * the process. */
int codepod_keyring_random(struct codepod_keyring **out, struct cp_err *err);

void codepod_keyring_free(struct codepod_keyring *kr);

/* The id of the key that signs (borrowed). */
const char *codepod_keyring_signer(const struct codepod_keyring *kr);

/*
 * codepod_continuation_seal() - sign @body (an object with "conv", "iat",
 * "exp" and "jti"; "v" and "kid" are set here, on the caller's object).
 * Return: 0 and *out, CP_E_TOO_BIG when the text would pass
 * CODEPOD_CONTINUATION_MAX_BYTES (the message gives its size), CP_E_NOMEM,
 * CP_E_INTERNAL.
 */
int codepod_continuation_seal(const struct codepod_keyring *kr, json_t *body, char **out,
                              struct cp_err *err);

/*
 * codepod_continuation_open() - verify @text (@len bytes, not necessarily
 * NUL-terminated) and return its object: its MAC under the key its prefix
 * names, its shape, its conversation (@conversation) and its expiry (@now_s
 * < exp). Every refusal is CP_E_INVALID_REQUEST with a message that says
 * which check failed and quotes nothing of @text.
 */
int codepod_continuation_open(const struct codepod_keyring *kr, const char *text, size_t len,
                              const char *conversation, uint64_t now_s, json_t **out,
                              struct cp_err *err);

#endif
