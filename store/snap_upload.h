/*
 * snap_upload.h - a snapshot archive uploaded while it is being packed: a
 * bounded pipe from the worker thread that packs (snap_archive.h) to the
 * S3 stream on the loop (s3.h store_s3_stream).
 *
 * The worker's bytes fill parts of @part_size in memory, each hashed as it
 * fills (SHA-256, for its signature over http://; not over https://,
 * where TLS authenticates the bytes, nor with bearer tokens: s3.h
 * store_s3_hashes_payload()); a full part goes to the loop, which
 * sends it (the first one also begins the multipart upload; an archive of
 * one part is one PUT). At most @window parts are waiting or in flight:
 * past that the worker waits, so memory stays under (window + 1) parts
 * and a slow store slows the packing, never the other way round. No spool
 * file: the loop thread does no file I/O for it.
 *
 * Life: store_upload_new() on the loop; the worker calls
 * store_upload_write() (a store_archive_pack_to() sink) and, when packing
 * succeeded, store_upload_flush(); then the loop calls
 * store_upload_finish() with the worker's result, and @done follows once:
 * rc 0 when the whole object is in the store, else the first failure (the
 * store's, when the upload failed first: then the worker's writes failed
 * too). store_upload_drop() instead, when the worker wrote nothing.
 *
 * Ownership: the object frees itself after @done (or drop).
 * Context: new, finish and drop on the loop; write and flush on one worker
 * thread.
 */
#ifndef STORE_SNAP_UPLOAD_H
#define STORE_SNAP_UPLOAD_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "base/err.h"
#include "store/s3.h"

struct store_upload;

int store_upload_new(uv_loop_t *loop, struct store_s3 *s3, const char *key, size_t part_size,
                     unsigned window, store_done_fn done, void *ud, struct store_upload **out,
                     struct cp_err *err);

/** Worker: @len bytes of the archive; waits while the window is full.
 * Returns 0, or -1 once the upload failed (stop packing). */
int store_upload_write(void *up, const void *buf, size_t len);

/** Worker: the archive is whole: its last part goes. Returns 0 or -1. */
int store_upload_flush(struct store_upload *up);

/** Loop: the worker ended with @rc (and @why); @done follows. */
void store_upload_finish(struct store_upload *up, int rc, const struct cp_err *why);

/** Loop: the worker wrote nothing (no snapshot needed): freed, no @done. */
void store_upload_drop(struct store_upload *up);

/** The part size for a workspace ceiling of @max_bytes: 8 MiB, more when
 * the ceiling would need over 9000 parts. */
size_t store_upload_part_size(uint64_t max_bytes);

#endif
