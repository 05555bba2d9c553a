/*
 * s3.h - an S3 client on the loop: PUT, GET, HEAD, DELETE and list of one
 * bucket's objects, and multipart upload of a large file (s3_upload.c),
 * signed with AWS Signature V4 by libcurl (CURLOPT_AWS_SIGV4), driven by
 * the project's curl multi (base/curl_uv.h). Covers AWS S3, Google Cloud
 * Storage's XML API with HMAC keys, MinIO and Ceph's RADOS Gateway.
 *
 * Every request carries x-amz-content-sha256 set here (libcurl 7.88 signs
 * the hash of an empty body otherwise, and every store refuses it): the
 * body's real SHA-256 when the caller knows it (an archive hashed by the
 * worker that wrote it, a small body hashed here), else UNSIGNED-PAYLOAD.
 *
 * Bodies stream: an upload reads its file a piece at a time as curl asks
 * (pread of a file codepod's worker has just written, so from the page
 * cache), a download writes to the caller's file as bytes come; only small
 * answers (errors, XML, small objects) are kept in memory, bounded.
 *
 * Results: each request ends with one call of its @done with a struct
 * store_result: rc 0 for a 2xx answer; CP_E_NOT_FOUND for 404;
 * CP_E_AUTH for 401/403 (a refusal: wrong key, wrong secret, no right);
 * CP_E_RETRY when the store could not be reached or stalled (connect
 * failure, 30 s without a byte); CP_E_HTTP for any other answer;
 * CP_E_TOO_BIG when a download passed its bound. The message names the
 * status and the store's error code (`403 SignatureDoesNotMatch`), never
 * credentials.
 *
 * Ownership: store_s3_new() copies its config; the object is freed with
 * store_s3_free(), which drops the requests still running without calling
 * their @done (the owner ends its work first, or does not care). The curl
 * multi is borrowed and must outlive the object. Keys and bodies given to
 * a call are copied or, for file descriptors, borrowed until @done.
 *
 * Context: the loop thread. @done is never called from inside the call
 * that started the request; it may start new requests.
 */
#ifndef STORE_S3_H
#define STORE_S3_H

#include <stddef.h>
#include <stdint.h>

#include "base/curl_uv.h"
#include "base/err.h"

struct store_s3;

struct store_s3_config {
	const char *bucket;           /* required, 3 to 63 characters */
	const char *endpoint;         /* "http://127.0.0.1:7480" (path-style),
	                                 or NULL: AWS, https://s3.REGION.amazonaws.com */
	const char *region;           /* NULL: us-east-1 */
	const char *credentials_file; /* NULL: the AWS_* environment */
};

struct store_result {
	int rc;              /* 0 or a negative enum cp_code (see above) */
	long status;         /* HTTP status, 0 when no answer came */
	const char *body;    /* the answer kept in memory (errors, XML, a
	                        get_mem object): borrowed for the call */
	size_t body_len;
	uint64_t size;       /* HEAD: Content-Length; a file GET: bytes written */
	int64_t mtime;       /* HEAD: Last-Modified, seconds since the epoch, or -1 */
	const struct cp_err *err; /* the reason when rc != 0 */
};

typedef void (*store_done_fn)(void *ud, const struct store_result *r);

/* One object of a listing (borrowed for the call); return non-zero to
 * stop the listing (its @done still comes, rc 0). */
typedef int (*store_list_fn)(void *ud, const char *key, uint64_t size, int64_t mtime);

/**
 * store_s3_new() - a client for one bucket.
 * Returns 0; CP_E_INVALID_REQUEST (bad bucket, endpoint or region);
 * CP_E_AUTH/CP_E_IO/CP_E_NOT_FOUND (no usable credentials: store_creds).
 */
int store_s3_new(struct cp_curl *curl, const struct store_s3_config *cfg,
                 struct store_s3 **out, struct cp_err *err);

/** store_s3_free() - drop running requests (no @done) and free; NULL ok. */
void store_s3_free(struct store_s3 *s);

/**
 * store_key_ok() - 1 when @key may name an object here: 1 to 1024 bytes
 * of [A-Za-z0-9/._-], no "//" and no leading "/" (so no URL escaping is
 * ever needed and a key cannot climb out of its prefix).
 */
int store_key_ok(const char *key);

/** A file's bytes [off, off+len) to upload, @sha256 their hash (64 hex) or NULL. */
int store_s3_put_fd(struct store_s3 *s, const char *key, int fd, uint64_t off, uint64_t len,
                    const char *sha256, store_done_fn done, void *ud, struct cp_err *err);
/** A small body (copied), hashed here. */
int store_s3_put_mem(struct store_s3 *s, const char *key, const void *body, size_t len,
                     store_done_fn done, void *ud, struct cp_err *err);
/** The object written to @fd from its current offset, at most @max bytes. */
int store_s3_get_fd(struct store_s3 *s, const char *key, int fd, uint64_t max,
                    store_done_fn done, void *ud, struct cp_err *err);
/** The object kept in memory (result body), at most @max bytes. */
int store_s3_get_mem(struct store_s3 *s, const char *key, size_t max,
                     store_done_fn done, void *ud, struct cp_err *err);
int store_s3_head(struct store_s3 *s, const char *key, store_done_fn done, void *ud,
                  struct cp_err *err);
/** DELETE; a key that is not there is success (S3 answers 204 too). */
int store_s3_delete(struct store_s3 *s, const char *key, store_done_fn done, void *ud,
                    struct cp_err *err);
/** Every object whose key starts with @prefix, page after page (ListObjectsV2). */
int store_s3_list(struct store_s3 *s, const char *prefix, store_list_fn each,
                  store_done_fn done, void *ud, struct cp_err *err);

/**
 * store_s3_put_file() - upload @len bytes of @fd from offset 0 as @key: one
 * PUT up to @part_size bytes, multipart above (parts of @part_size, at
 * least 5 MiB, the last one shorter), aborted on failure so no parts are
 * left behind. The object appears only when the upload completes (S3
 * makes it atomic): a reader sees the previous object until then.
 * @sha256: NULL, or the hashes of the parts (64 hex each, as many as
 * parts; one for a single PUT), for signed payloads.
 * (s3_upload.c)
 */
int store_s3_put_file(struct store_s3 *s, const char *key, int fd, uint64_t len,
                      uint64_t part_size, const char (*sha256)[65], store_done_fn done,
                      void *ud, struct cp_err *err);

#define STORE_PART_MIN (5u << 20)

#endif
