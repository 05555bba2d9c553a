/*
 * s3.h - an S3 client on the loop: PUT, GET, HEAD, DELETE and list of one
 * bucket's objects, and multipart upload of a large file (s3_upload.c),
 * signed with AWS Signature V4 by libcurl (CURLOPT_AWS_SIGV4), driven by
 * the project's curl multi (base/curl_uv.h). Covers AWS S3, Google Cloud
 * Storage's XML API with HMAC keys, MinIO and Ceph's RADOS Gateway; and
 * Google Cloud Storage's XML API without keys (gcp_metadata): each request
 * then carries `Authorization: Bearer` with a token from the GCP metadata
 * server (store/gcp_token.h), no AWS signature and no x-amz-* header. GCS
 * speaks S3's object calls, ListObjectsV2 and multipart upload (`?uploads`,
 * `partNumber`/`uploadId`, the same complete XML) on that API. A request
 * made while no fresh token is kept waits for one; one answered 401 drops
 * the token it carried and is sent once more with a new one.
 *
 * Every request carries x-amz-content-sha256 set here (libcurl 7.88 signs
 * the hash of an empty body otherwise, and every store refuses it): the
 * body's real SHA-256 when the caller knows it (an archive hashed by the
 * worker that wrote it, a small body hashed here), else UNSIGNED-PAYLOAD.
 *
 * Bodies stream: an upload reads its file a piece at a time as curl asks
 * (pread, on the loop thread), a download writes to the caller's file as
 * bytes come (write, on the loop thread) - for tools and small files;
 * snapshots use the two calls that do no file I/O on the loop instead: an
 * upload fed part by part from memory (store_s3_stream_*) and a download
 * into a sink (store_s3_get_sink). Only small answers (errors, XML, small
 * objects) are kept in memory, bounded.
 *
 * Results: each request ends with one call of its @done with a struct
 * store_result: rc 0 for a 2xx answer; CP_E_NOT_FOUND for 404;
 * CP_E_AUTH for 401/403 (a refusal: wrong key, wrong secret, no right);
 * CP_E_RETRY when the store could not be reached or stalled (connect
 * failure, 30 s without a byte); CP_E_HTTP for any other answer;
 * CP_E_TOO_BIG when a download passed its bound. The message names the
 * status and the store's error code (`403 SignatureDoesNotMatch`), never
 * credentials. With gcp_metadata, a request for which no token could be
 * had ends with the token fetch's error (store/gcp_token.h: CP_E_RETRY
 * when the metadata server did not answer, CP_E_AUTH when it refused).
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
	int gcp_metadata;             /* 1: GCS, a bearer token from the GCP
	                                 metadata server instead of keys; endpoint
	                                 NULL: https://storage.googleapis.com */
	uv_loop_t *loop;              /* gcp_metadata: for the waits between token
	                                 fetch attempts; NULL: one attempt */
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

/* A download's bytes as they come (a 2xx answer's body only): return 0
 * when taken, STORE_SINK_PAUSE when not (the same bytes come again after
 * store_s3_resume()), or -1 to fail the request (CP_E_IO, "store: GET
 * body"). Called on the loop, from inside libcurl: it must not start,
 * resume or free requests. */
typedef int (*store_sink_fn)(void *ud, const void *buf, size_t len);
#define STORE_SINK_PAUSE 1

struct store_req; /* one request, for store_s3_resume() */

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

/** 1 when a body's SHA-256 is worth computing for its signature: AWS
 * Signature V4 over http://. 0 over https:// (TLS authenticates every
 * byte already, and AWS's SDKs send UNSIGNED-PAYLOAD there too) and with
 * bearer tokens (nothing reads it): an uploader may skip hashing then. */
int store_s3_hashes_payload(const struct store_s3 *s);

/** Tokens fetched from the metadata server so far (0 without gcp_metadata). */
unsigned long store_s3_token_fetches(const struct store_s3 *s);

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
/**
 * store_s3_get_sink() - the object handed to @sink as it arrives, at most
 * @max bytes (more: CP_E_TOO_BIG). *@req is the request until @done, for
 * store_s3_resume() after @sink paused it.
 */
int store_s3_get_sink(struct store_s3 *s, const char *key, uint64_t max, store_sink_fn sink,
                      void *sink_ud, struct store_req **req, store_done_fn done, void *ud,
                      struct cp_err *err);
/** Unpause a download whose sink paused (loop thread, outside the sink). */
void store_s3_resume(struct store_req *r);
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

/*
 * An object uploaded as its bytes are made (s3_stream.c): the producer
 * hands parts in order as they fill; the first part that is also the last
 * goes as one PUT, else a multipart upload starts with the first part and
 * up to STORE_STREAM_INFLIGHT parts are sent at once, each signed with its
 * own hash. The object appears only when the upload completes; a failure
 * aborts it (no parts left behind), so a reader sees the previous object.
 */
struct store_s3_stream;
#define STORE_STREAM_INFLIGHT 2

/* A part's PUT succeeded and its buffer was freed (flow control). */
typedef void (*store_sent_fn)(void *ud);

/**
 * store_s3_stream_new() - an upload of @key; nothing is sent yet.
 * @sent: after each part sent (may be NULL); @done: once, when the object
 * is complete or the upload failed (and was aborted), after which the
 * stream is gone. Returns 0, CP_E_INVALID_REQUEST (bad key), CP_E_NOMEM.
 */
int store_s3_stream_new(struct store_s3 *s, const char *key, store_sent_fn sent,
                        store_done_fn done, void *ud, struct store_s3_stream **out,
                        struct cp_err *err);

/**
 * store_s3_stream_part() - the next part: @buf (malloc'ed, stolen, also on
 * error), @len bytes, at least STORE_PART_MIN unless @last, @sha256 its
 * hash (64 hex) or NULL. @last: the object ends with it; then @done follows.
 * Returns 0, or an error (the stream is failed: @done follows).
 */
int store_s3_stream_part(struct store_s3_stream *st, void *buf, size_t len, const char *sha256,
                         int last, struct cp_err *err);

/** store_s3_stream_fail() - give up: parts in flight end, the upload is
 * aborted, @done follows with @why. */
void store_s3_stream_fail(struct store_s3_stream *st, const struct cp_err *why);

#endif
