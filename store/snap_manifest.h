/*
 * snap_manifest.h - a snapshot's manifest: the small JSON object stored
 * beside the archive, and the pointer to it. Replacing a snapshot is
 * uploading a new archive under a new key, then this one PUT (atomic in
 * S3): a reader sees the previous snapshot or the new one, never a mix.
 *
 *   {"version":1,"archive":"KEY","size":N,"files":N,"bytes":N,
 *    "sha256":"64 hex","fingerprint":"64 hex","created":SECONDS
 *    [,"keyId":"ID","iv":"24 hex"]}   (client-side encryption)
 *
 * The manifest comes back from the store, so it is parsed as untrusted:
 * every field checked (the archive key against @dir, the caller's folder
 * of the conversation, so a manifest cannot point elsewhere).
 *
 * Ownership: plain struct; store_manifest_json() returns new text (free()).
 * Context: pure; any thread.
 */
#ifndef STORE_SNAP_MANIFEST_H
#define STORE_SNAP_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define STORE_MANIFEST_MAX 4096

struct store_manifest {
	char archive[1100];
	uint64_t size, files, bytes;
	char sha256[65];
	char fingerprint[65];
	int64_t created;
	char key_id[65];          /* encrypted with this key (snap_keys.h), or "" */
	unsigned char iv[12];     /* its IV (manifest: "iv", 24 hex) */
};

/** The manifest as JSON text (new, @len bytes), or NULL with @err. */
char *store_manifest_json(const struct store_manifest *m, size_t *len, struct cp_err *err);

/**
 * store_manifest_parse() - @len bytes of JSON into @m; the archive key must
 * start with @dir (the conversation's folder, "PREFIX/HASH/").
 * Returns 0 or CP_E_PARSE naming the field.
 */
int store_manifest_parse(const char *text, size_t len, const char *dir,
                         struct store_manifest *m, struct cp_err *err);

#endif
