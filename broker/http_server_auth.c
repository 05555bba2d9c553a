/*
 * http_server_auth.c - the bearer token: read from a file, re-read when the
 * file changes (one stat per request), compared in constant time.
 *
 * Only the SHA-256 of the token is kept. Both the presented and the stored
 * token are hashed to 32 bytes before CRYPTO_memcmp, so neither the length
 * nor a common prefix of a wrong token shows in the comparison's time.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "broker/http_server_int.h"
#include "base/hex.h"
#include "base/log.h"

#define MAX_TOKEN_FILE 4096

struct broker_http_auth {
	char *path;
	unsigned char digest[32];
	int have;                 /* a non-empty token is loaded */
	struct timespec mtime;
	ino_t ino;
	off_t size;
};

static void sha256(const void *p, size_t len, unsigned char out[32])
{
	unsigned int n = 32;
	if (!EVP_Digest(p, len, out, &n, EVP_sha256(), NULL))
		memset(out, 0, 32);
}

void broker_http_sha256_hex(const char *s, size_t len, char hex[65])
{
	unsigned char d[32];
	sha256(s, len, d);
	cp_hex_encode(d, sizeof d, hex);
}

/* Reads the file; the token is its content without surrounding white space. */
static int load(struct broker_http_auth *a, const struct stat *st, struct cp_err *err)
{
	char buf[MAX_TOKEN_FILE + 1];
	int fd = open(a->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return cp_err_errno(err, CP_E_IO, errno, "token file %s", a->path);
	ssize_t n = read(fd, buf, MAX_TOKEN_FILE);
	int e = errno;
	close(fd);
	if (n < 0)
		return cp_err_errno(err, CP_E_IO, e, "token file %s", a->path);
	size_t b = 0, end = (size_t)n;
	while (b < end && strchr(" \t\r\n", buf[b]))
		b++;
	while (end > b && strchr(" \t\r\n", buf[end - 1]))
		end--;
	a->mtime = st->st_mtim;
	a->ino = st->st_ino;
	a->size = st->st_size;
	a->have = end > b;
	sha256(buf + b, end - b, a->digest);
	OPENSSL_cleanse(buf, sizeof buf);
	if (!a->have)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "token file %s is empty", a->path);
	return 0;
}

struct broker_http_auth *broker_http_auth_new(const char *path, struct cp_err *err)
{
	struct stat st;
	struct broker_http_auth *a = calloc(1, sizeof *a);
	if (!a || !(a->path = strdup(path))) {
		free(a);
		cp_err_set(err, CP_E_NOMEM, "out of memory");
		return NULL;
	}
	if (stat(path, &st) != 0) {
		cp_err_errno(err, CP_E_IO, errno, "token file %s", path);
		broker_http_auth_free(a);
		return NULL;
	}
	if (load(a, &st, err)) {
		broker_http_auth_free(a);
		return NULL;
	}
	return a;
}

void broker_http_auth_free(struct broker_http_auth *a)
{
	if (!a)
		return;
	OPENSSL_cleanse(a->digest, sizeof a->digest);
	free(a->path);
	free(a);
}

/* Re-reads the file when its inode, size or mtime changed (an atomic
 * rename of a new file, as Kubernetes secret volumes do, or a rewrite). */
static void refresh(struct broker_http_auth *a)
{
	struct stat st;
	struct cp_err err;
	if (stat(a->path, &st) != 0) {
		if (a->have)
			cp_log(CP_LOG_WARN, "auth.token_file", "message",
			       json_string("token file is gone: every request is refused"), NULL);
		a->have = 0;
		memset(&a->mtime, 0, sizeof a->mtime);
		return;
	}
	if (st.st_ino == a->ino && st.st_size == a->size &&
	    st.st_mtim.tv_sec == a->mtime.tv_sec && st.st_mtim.tv_nsec == a->mtime.tv_nsec)
		return;
	if (load(a, &st, &err))
		cp_log(CP_LOG_WARN, "auth.token_file", "message", json_string(err.msg), NULL);
	else
		cp_log(CP_LOG_INFO, "auth.token_reloaded", NULL);
}

int broker_http_auth_check(struct broker_http_auth *a, const char *header)
{
	unsigned char d[32];
	refresh(a);
	if (!header || !a->have || strncasecmp(header, "Bearer ", 7) != 0)
		return 0;
	const char *t = header + 7;
	while (*t == ' ')
		t++;
	size_t n = strlen(t);
	while (n && (t[n - 1] == ' ' || t[n - 1] == '\t'))
		n--;
	sha256(t, n, d);
	return CRYPTO_memcmp(d, a->digest, sizeof d) == 0;
}
