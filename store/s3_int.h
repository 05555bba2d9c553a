/*
 * s3_int.h - one request of the S3 client, shared by s3.c (the request and
 * the simple operations) and s3_upload.c (multipart). Not for other layers.
 *
 * Ownership: store_req_new() returns a new request owned by its client
 * until store_req_start() fails (the caller then frees it with
 * store_req_free()) or its @done has returned (the client frees it).
 */
#ifndef STORE_S3_INT_H
#define STORE_S3_INT_H

#include "base/buf.h"
#include "store/s3.h"

#define STORE_BODY_MAX (1u << 20) /* answers kept in memory: errors, XML */

struct store_req {
	struct store_s3 *s;
	struct store_req *prev, *next; /* in the client's running list, or its
	                                  list of those waiting for a token */
	struct cp_curl_xfer x;
	CURL *easy;
	struct curl_slist *hdrs;
	char *url;
	char method[8];
	char sha256[65];       /* the body's hash, or "" for UNSIGNED-PAYLOAD */
	/* upload source: a file range, or bytes of our own */
	int in_fd;
	uint64_t in_off, in_len, in_pos;
	char *mem;
	size_t mem_len;
	const char *content_type;
	/* download sink: a file, else memory (body) */
	int out_fd;
	uint64_t out_max, out_n;
	/* or a sink of the caller's (s3.h store_s3_get_sink) */
	store_sink_fn sink;
	void *sink_ud;
	int too_big, write_errno;
	struct cp_buf body;
	char etag[128];
	char ebuf[CURL_ERROR_SIZE];
	int running;
	int retried;           /* sent again after a 401 (bearer tokens) */
	unsigned long token_gen; /* the bearer token it carries */
	store_done_fn done;
	void *ud;
};

/* A request of @method for @key (NULL: the bucket) with @query (sorted,
 * encoded, or NULL). No body, answer in memory up to @body_max. */
struct store_req *store_req_new(struct store_s3 *s, const char *method, const char *key,
                                const char *query, size_t body_max, struct cp_err *err);
int store_req_start(struct store_req *r, store_done_fn done, void *ud, struct cp_err *err);
void store_req_free(struct store_req *r);
/* 1 when requests carry a bearer token (GCS, gcp_metadata), not a signature. */
int store_s3_bearer(const struct store_s3 *s);
/* The hex SHA-256 of @len bytes at @p into @out (65 bytes). */
int store_sha256_hex(const void *p, size_t len, char out[65], struct cp_err *err);
/* Percent-encodes @v for a query value into @b (RFC 3986 unreserved kept). */
int store_query_escape(struct cp_buf *b, const char *v, struct cp_err *err);

#endif
