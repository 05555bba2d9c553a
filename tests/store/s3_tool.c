/*
 * s3_tool.c - the S3 client (store/s3.h) from the command line, for
 * tests/store: one operation per run, its result as one JSON line on
 * stdout. The store comes from the environment: S3_BUCKET, S3_ENDPOINT,
 * S3_REGION, S3_CREDENTIALS_FILE (else the AWS_* variables); S3_AUTH=gcp
 * takes bearer tokens from the GCP metadata server instead (GCE_METADATA_HOST),
 * and a last line {"op":"token","fetches":N} says how many were fetched.
 *
 *   s3_tool put KEY FILE [PART_BYTES [unsigned]]   (multipart above PART_BYTES)
 *   s3_tool get KEY FILE | head KEY | delete KEY | list PREFIX
 *   s3_tool put-each KEY FILE   a put for every line read on stdin (until
 *                               EOF): the credentials file may change between
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <uv.h>

#include "base/curl_uv.h"
#include "store/s3.h"

static int pending;
static int failures;

static void print_result(const char *op, const struct store_result *r)
{
	printf("{\"op\":\"%s\",\"rc\":%d,\"status\":%ld,\"size\":%llu,\"mtime\":%lld,\"msg\":\"",
	       op, r->rc, r->status, (unsigned long long)r->size, (long long)r->mtime);
	for (const char *p = r->rc && r->err ? r->err->msg : ""; *p; p++)
		if (*p != '"' && *p != '\\' && (unsigned char)*p >= 0x20)
			putchar(*p);
	printf("\"}\n");
	fflush(stdout);
	if (r->rc)
		failures++;
}

static void done(void *ud, const struct store_result *r)
{
	print_result(ud, r);
	pending--;
}

static int each(void *ud, const char *key, uint64_t size, int64_t mtime)
{
	(void)ud;
	printf("{\"key\":\"%s\",\"size\":%llu,\"mtime\":%lld}\n", key, (unsigned long long)size,
	       (long long)mtime);
	return 0;
}

/* The hashes of each part of @fd: what the snapshot worker computes. */
static char (*part_hashes(int fd, uint64_t len, uint64_t part))[65]
{
	size_t n = len <= part ? 1 : (size_t)((len + part - 1) / part);
	char (*out)[65] = calloc(n, 65);
	char *buf = malloc(1 << 20);
	for (size_t i = 0; i < n; i++) {
		EVP_MD_CTX *c = EVP_MD_CTX_new();
		EVP_DigestInit_ex(c, EVP_sha256(), NULL);
		uint64_t off = len <= part ? 0 : i * part;
		uint64_t left = len <= part ? len : (len - off < part ? len - off : part);
		while (left) {
			size_t k = left < (1 << 20) ? (size_t)left : (1 << 20);
			ssize_t g = pread(fd, buf, k, (off_t)off);
			if (g <= 0)
				exit(3);
			EVP_DigestUpdate(c, buf, (size_t)g);
			off += (uint64_t)g;
			left -= (uint64_t)g;
		}
		unsigned char md[32];
		EVP_DigestFinal_ex(c, md, NULL);
		EVP_MD_CTX_free(c);
		for (int j = 0; j < 32; j++)
			snprintf(out[i] + 2 * j, 3, "%02x", md[j]);
	}
	free(buf);
	return out;
}

static void run(uv_loop_t *loop)
{
	while (pending > 0)
		uv_run(loop, UV_RUN_ONCE);
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	uv_loop_t *loop = uv_default_loop();
	struct cp_err err = { 0 };
	struct cp_curl *curl = NULL;
	struct store_s3 *s = NULL;
	struct store_s3_config cfg = {
		.bucket = getenv("S3_BUCKET"), .endpoint = getenv("S3_ENDPOINT"),
		.region = getenv("S3_REGION"), .credentials_file = getenv("S3_CREDENTIALS_FILE"),
		.gcp_metadata = getenv("S3_AUTH") && !strcmp(getenv("S3_AUTH"), "gcp"),
		.loop = loop,
	};
	if (cp_curl_new(loop, &curl, &err) || store_s3_new(curl, &cfg, &s, &err)) {
		printf("{\"op\":\"new\",\"rc\":%d,\"msg\":\"%s\"}\n", err.code, err.msg);
		return 1;
	}
	const char *op = argv[1], *key = argv[2];
	int rc = 0, fd = -1;
	if (!strcmp(op, "put") || !strcmp(op, "put-each")) {
		if (argc < 4)
			return 2;
		fd = open(argv[3], O_RDONLY | O_CLOEXEC);
		struct stat st;
		if (fd < 0 || fstat(fd, &st))
			return 3;
		uint64_t part = argc > 4 ? strtoull(argv[4], NULL, 10) : (64u << 20);
		if (part < STORE_PART_MIN)
			part = STORE_PART_MIN;
		int unsig = argc > 5 && !strcmp(argv[5], "unsigned");
		char (*h)[65] = unsig ? NULL : part_hashes(fd, (uint64_t)st.st_size, part);
		char line[256];
		do {
			if (!strcmp(op, "put-each") && !fgets(line, sizeof line, stdin))
				break;
			pending++;
			rc = store_s3_put_file(s, key, fd, (uint64_t)st.st_size, part,
			                       (const char (*)[65])h, done, (void *)(uintptr_t)"put", &err);
			if (rc) {
				pending--;
				break;
			}
			run(loop);
		} while (!strcmp(op, "put-each"));
		free(h);
	} else if (!strcmp(op, "get")) {
		if (argc < 4)
			return 2;
		fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0)
			return 3;
		pending++;
		rc = store_s3_get_fd(s, key, fd, UINT64_MAX, done, (void *)(uintptr_t)"get", &err);
	} else if (!strcmp(op, "head")) {
		pending++;
		rc = store_s3_head(s, key, done, (void *)(uintptr_t)"head", &err);
	} else if (!strcmp(op, "delete")) {
		pending++;
		rc = store_s3_delete(s, key, done, (void *)(uintptr_t)"delete", &err);
	} else if (!strcmp(op, "list")) {
		pending++;
		rc = store_s3_list(s, key, each, done, (void *)(uintptr_t)"list", &err);
	} else {
		return 2;
	}
	if (rc) {
		pending = 0;
		printf("{\"op\":\"%s\",\"rc\":%d,\"status\":0,\"msg\":\"%s\"}\n", op, rc, err.msg);
		failures++;
	}
	run(loop);
	if (fd >= 0)
		close(fd);
	if (cfg.gcp_metadata)
		printf("{\"op\":\"token\",\"fetches\":%lu}\n", store_s3_token_fetches(s));
	store_s3_free(s);
	int closed = 0;
	cp_curl_close(curl, NULL, NULL);
	(void)closed;
	uv_run(loop, UV_RUN_DEFAULT);
	return failures ? 1 : 0;
}
