/*
 * snap_download.h - a snapshot archive read by the worker that unpacks it
 * while it is still being downloaded: a bounded pipe from the S3 client's
 * GET on the loop (s3.h store_s3_get_sink) to a worker thread.
 *
 * The GET's bytes are copied into the pipe as they come; past @cap bytes
 * waiting the GET is paused, and resumed once the worker has read half of
 * them, so memory stays near @cap and a slow unpacking slows the download.
 * No spool file: the loop thread does no file I/O for it.
 *
 * The worker sees the end of the archive (read returns 0) only after the
 * GET ended with a 2xx answer, and an error (-1) when it failed: the
 * caller checks the size and hash of what was read before anything is
 * kept (snap_archive.h: unpacking into a folder of its own).
 *
 * Life: store_download_new() on the loop starts the GET; the worker reads
 * with store_download_read() until 0 or -1; then the loop reads the GET's
 * result (store_download_result()) and frees the object with
 * store_download_free(). The worker must read to the end (0 or -1)
 * before the free, so the GET is over when the object goes.
 *
 * Context: new, result and free on the loop; read on one worker thread.
 */
#ifndef STORE_SNAP_DOWNLOAD_H
#define STORE_SNAP_DOWNLOAD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "base/err.h"
#include "store/s3.h"

struct store_download;

/** The GET of @key (at most @max bytes) starts. Returns 0, or an error. */
int store_download_new(uv_loop_t *loop, struct store_s3 *s3, const char *key, uint64_t max,
                       size_t cap, struct store_download **out, struct cp_err *err);

/** Worker: the next bytes (*@buf valid until the next call): their count,
 * 0 at the end, -1 when the download failed. Waits for bytes. */
ssize_t store_download_read(void *d, const void **buf);

/** Loop, after the worker's end: the GET's result (rc 0, or the store's
 * error as s3.h tells it, with its message in @err); @bytes received. */
int store_download_result(const struct store_download *d, struct cp_err *err, uint64_t *bytes);

/** Loop: frees (after the worker's end; see above). NULL ok. */
void store_download_free(struct store_download *d);

#endif
