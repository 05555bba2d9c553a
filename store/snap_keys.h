/*
 * snap_keys.h - the keys of client-side snapshot encryption
 * (--snapshot-key-file): AES-256-GCM through OpenSSL, so whoever can read
 * the bucket cannot read users' files.
 *
 * The file holds one key a line, `KEYID HEX` (KEYID 1 to 64 of
 * [A-Za-z0-9._-], HEX 64 hex digits: 32 bytes), `#` starts a comment. The
 * first key encrypts new snapshots; every key listed decrypts the
 * snapshots made with it (the manifest names the key id): rotation is a new
 * first line, the old keys kept below until their snapshots are replaced
 * or expired. A snapshot whose key is no longer listed cannot be restored
 * (the error names its key id); deleting it still works.
 *
 * Ownership: caller-owned struct, wiped by store_keys_wipe().
 * Context: any thread (read once, at start).
 */
#ifndef STORE_SNAP_KEYS_H
#define STORE_SNAP_KEYS_H

#include <stddef.h>

#include "base/err.h"

#define STORE_KEYS_MAX 16
#define STORE_KEY_ID_MAX 65

struct store_key {
	char id[STORE_KEY_ID_MAX];
	unsigned char key[32];
};

struct store_keys {
	size_t n;
	struct store_key k[STORE_KEYS_MAX];
};

/** store_keys_parse() - the keys of @len bytes of text. 0, or CP_E_PARSE
 * naming the line (never its key). */
int store_keys_parse(struct store_keys *ks, const char *text, size_t len, struct cp_err *err);

/** store_keys_load() - the keys of the file @path (store_keys_parse). */
int store_keys_load(struct store_keys *ks, const char *path, struct cp_err *err);

/** The key of @id, or NULL. */
const struct store_key *store_keys_find(const struct store_keys *ks, const char *id);

void store_keys_wipe(struct store_keys *ks);

#endif
