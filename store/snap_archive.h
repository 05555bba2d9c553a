/*
 * snap_archive.h - a workspace as one snapshot archive and back: tar
 * (pax, for nanosecond times) compressed with zstd, through Debian's libarchive (which links
 * Debian's libzstd and keeps up with tar's corner cases, so no tar writer
 * of our own), and its manifest's figures.
 *
 * What goes in: regular files (contents, permission bits, mtime), folders
 * and symbolic links, found without following any link; anything else (a
 * socket, a FIFO, a device) is left out. The walk is sorted, so the same
 * workspace gives the same fingerprint (a hash of every entry's path, type,
 * mode, size, mtime and link target) whether or not it is packed.
 *
 * What comes out (store_archive_unpack), into an empty folder: regular
 * files, folders and symbolic links only, each made under its parent opened
 * one component at a time without following links, so nothing is written
 * outside the folder. Refused, with the archive as a whole: an absolute
 * path, a `..` component, a hard link, a device node or FIFO, a symbolic
 * link that is absolute or climbs out of the folder, an entry already
 * there. Set-id bits are dropped.
 *
 * Context: blocking file I/O and CPU: call from a worker thread (the
 * snapshot work is queued with uv_queue_work), never from the loop.
 *
 * Ownership: the caller owns the descriptors (left open) and @out's
 * part_sha, freed with free().
 */
#ifndef STORE_SNAP_ARCHIVE_H
#define STORE_SNAP_ARCHIVE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"
#include "store/snap_keys.h"

/* Client-side encryption of an archive: AES-256-GCM with @key, the 12-byte
 * @iv (new for every archive), the archive's own object key as additional
 * data (an archive moved to another name or conversation does not
 * decrypt); the 16-byte tag follows the ciphertext. Hashes and sizes are
 * of what is stored: the ciphertext and its tag. */
struct store_crypt {
	const struct store_key *key;
	unsigned char iv[12];
	const char *aad;
};

struct store_pack {
	uint64_t size;          /* archive bytes */
	uint64_t files;         /* entries archived */
	uint64_t bytes;         /* file contents, before compression */
	char sha256[65];        /* of the archive */
	char fingerprint[65];   /* of the workspace (see above) */
	char (*part_sha)[65];   /* the archive's parts' hashes (new), nparts of them */
	size_t nparts;
};

/**
 * store_archive_pack() - @dir archived into @out_fd (from offset 0),
 * hashed whole and in parts of @part_size bytes as written; encrypted with
 * @enc when not NULL.
 * Returns 0; CP_E_TOO_BIG when the contents pass @max_bytes (the message
 * says the ceiling); CP_E_IO; CP_E_INTERNAL (libarchive).
 */
int store_archive_pack(const char *dir, int out_fd, uint64_t max_bytes, uint64_t part_size,
                       const struct store_crypt *enc, struct store_pack *out,
                       struct cp_err *err);

/**
 * store_archive_pack_tar() - @dir as a plain tar (ustar, pax records only
 * where a name or link is too long for it; no compression, no encryption)
 * into @out_fd from offset 0: what a sandbox's archive_write takes
 * (runner/runner.js). @out: size, files, bytes, sha256, fingerprint; no
 * part hashes. Errors as store_archive_pack().
 */
int store_archive_pack_tar(const char *dir, int out_fd, uint64_t max_bytes,
                           struct store_pack *out, struct cp_err *err);

/* Where an archive's bytes go: 0, or -1 with errno (the packing stops). */
typedef int (*store_sink_write_fn)(void *ud, const void *buf, size_t len);

/**
 * store_archive_pack_to() - the same, the archive handed to @write_fn as
 * it is made (a snapshot streamed to the store: snap_upload.h);
 * @part_size 0: no part hashes (@out's part_sha NULL, nparts 0).
 */
int store_archive_pack_to(const char *dir, store_sink_write_fn write_fn, void *ud,
                          uint64_t max_bytes, uint64_t part_size,
                          const struct store_crypt *enc, struct store_pack *out,
                          struct cp_err *err);

/** store_archive_fingerprint() - the fingerprint alone (no archive). */
int store_archive_fingerprint(const char *dir, char out[65], struct cp_err *err);

/**
 * store_archive_unpack() - @fd's archive into the empty folder @dir,
 * hashed as it is read: with @sha256 (64 hex, or NULL) a whole file of
 * another hash is CP_E_PARSE once read, so the caller unpacks into a folder
 * of its own and keeps it only on 0.
 * @uid/@gid: owner of what is made ((uid_t)-1: left as made).
 * @dec: the archive's key, IV and name when it is encrypted (NULL: plain);
 * @size: the whole file's length (the tag is its last 16 bytes); an
 * archive that does not authenticate is CP_E_PARSE once read.
 * @files: receives the entries made.
 * Returns 0; CP_E_DENIED for a refused entry (see above; the message
 * says what kind, never the entry's name); CP_E_PARSE for an archive that
 * does not read; CP_E_IO.
 */
int store_archive_unpack(int fd, const char *dir, uid_t uid, gid_t gid, const char *sha256,
                         const struct store_crypt *dec, uint64_t size, uint64_t *files,
                         struct cp_err *err);

/* An archive's bytes as they come (snap_download.h): their count with
 * *@buf pointing at them, 0 at the end, -1 when they cannot be had. */
typedef ssize_t (*store_source_fn)(void *ud, const void **buf);

/**
 * store_archive_unpack_from() - the same, the archive read from @src while
 * it arrives; @size (the manifest's) is checked once all is read: a
 * truncated or longer archive is CP_E_PARSE ("N bytes, its manifest says
 * M"). The caller keeps @dir only on 0.
 */
int store_archive_unpack_from(store_source_fn src, void *ud, const char *dir, uid_t uid,
                              gid_t gid, const char *sha256, const struct store_crypt *dec,
                              uint64_t size, uint64_t *files, struct cp_err *err);

#endif
