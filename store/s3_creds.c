/* s3_creds.c - the store's credentials, from the environment or a file that
 * is read again when it changes (s3_creds.h). */
#include "store/s3_creds.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "base/fileio.h"
#include "base/log.h"

#define CREDS_FILE_MAX (64 * 1024)

static int put(char *dst, size_t cap, const char *v, size_t n, const char *what,
               struct cp_err *err)
{
	if (n >= cap)
		return cp_err_set(err, CP_E_PARSE, "credentials: %s is too long", what);
	memcpy(dst, v, n);
	dst[n] = '\0';
	return 0;
}

static int from_env(struct store_creds *c, struct cp_err *err)
{
	const char *a = getenv("AWS_ACCESS_KEY_ID");
	const char *s = getenv("AWS_SECRET_ACCESS_KEY");
	const char *t = getenv("AWS_SESSION_TOKEN");
	if (!a || !*a || !s || !*s)
		return cp_err_set(err, CP_E_AUTH, "no store credentials: set AWS_ACCESS_KEY_ID and "
		                  "AWS_SECRET_ACCESS_KEY, or --s3-credentials-file");
	int rc = put(c->access, sizeof c->access, a, strlen(a), "AWS_ACCESS_KEY_ID", err);
	if (!rc)
		rc = put(c->secret, sizeof c->secret, s, strlen(s), "AWS_SECRET_ACCESS_KEY", err);
	if (!rc)
		rc = put(c->token, sizeof c->token, t ? t : "", t ? strlen(t) : 0,
		         "AWS_SESSION_TOKEN", err);
	if (!rc)
		c->loaded = 1;
	return rc;
}

static const char *trim(const char *p, const char *e, const char **ep)
{
	while (p < e && (*p == ' ' || *p == '\t'))
		p++;
	while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		e--;
	*ep = e;
	return p;
}

int store_creds_parse(struct store_creds *c, const char *text, size_t len, struct cp_err *err)
{
	char a[STORE_CRED_MAX] = "", s[STORE_CRED_MAX] = "", t[STORE_TOKEN_MAX] = "";
	const char *p = text, *end = text + len;
	int in_default = 1; /* lines before any section count as [default] */
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		const char *ve;
		const char *l = trim(p, le, &ve);
		p = nl ? nl + 1 : end;
		if (l == ve || *l == '#' || *l == ';')
			continue;
		if (*l == '[') {
			const char *se;
			const char *sn = trim(l + 1, ve[-1] == ']' ? ve - 1 : ve, &se);
			in_default = (size_t)(se - sn) == 7 && memcmp(sn, "default", 7) == 0;
			continue;
		}
		if (!in_default)
			continue;
		const char *eq = memchr(l, '=', (size_t)(ve - l));
		if (!eq)
			continue;
		const char *ke, *vend;
		const char *k = trim(l, eq, &ke);
		const char *v = trim(eq + 1, ve, &vend);
		size_t kl = (size_t)(ke - k), vl = (size_t)(vend - v);
		int rc = 0;
		if (kl == 17 && memcmp(k, "aws_access_key_id", kl) == 0)
			rc = put(a, sizeof a, v, vl, "aws_access_key_id", err);
		else if (kl == 21 && memcmp(k, "aws_secret_access_key", kl) == 0)
			rc = put(s, sizeof s, v, vl, "aws_secret_access_key", err);
		else if (kl == 17 && memcmp(k, "aws_session_token", kl) == 0)
			rc = put(t, sizeof t, v, vl, "aws_session_token", err);
		if (rc)
			return rc;
	}
	if (!*a || !*s)
		return cp_err_set(err, CP_E_AUTH, "credentials: aws_access_key_id or "
		                  "aws_secret_access_key missing");
	memcpy(c->access, a, sizeof a);
	memcpy(c->secret, s, sizeof s);
	memcpy(c->token, t, sizeof t);
	c->loaded = 1;
	return 0;
}

static int from_file(struct store_creds *c, const struct stat *st, struct cp_err *err)
{
	size_t len = 0;
	char *text = cp_read_file(c->file, CREDS_FILE_MAX, &len, err);
	if (!text)
		return err ? err->code : CP_E_IO;
	int rc = store_creds_parse(c, text, len, err);
	memset(text, 0, len);
	free(text);
	if (rc)
		return rc;
	c->ino = (uint64_t)st->st_ino;
	c->size = (uint64_t)st->st_size;
	c->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
	c->warned = 0;
	return 0;
}

int store_creds_init(struct store_creds *c, const char *file, struct cp_err *err)
{
	memset(c, 0, sizeof *c);
	if (!file)
		return from_env(c, err);
	if (put(c->file, sizeof c->file, file, strlen(file), "the file name", err))
		return CP_E_INVALID_REQUEST;
	return store_creds_fresh(c, err);
}

int store_creds_fresh(struct store_creds *c, struct cp_err *err)
{
	if (!c->file[0])
		return c->loaded ? 0 : from_env(c, err);
	struct stat st;
	struct cp_err e = { 0 };
	int rc;
	if (stat(c->file, &st) != 0) {
		rc = cp_err_errno(&e, errno == ENOENT ? CP_E_NOT_FOUND : CP_E_IO, errno,
		                  "credentials file %s", c->file);
	} else {
		int64_t m = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
		if (c->loaded && (uint64_t)st.st_ino == c->ino && (uint64_t)st.st_size == c->size &&
		    m == c->mtime_ns)
			return 0;
		rc = from_file(c, &st, &e);
		if (!rc)
			return 0;
	}
	if (!c->loaded) {
		if (err)
			*err = e;
		return rc;
	}
	if (!c->warned) {
		c->warned = 1;
		cp_log(CP_LOG_WARN, "store.credentials_unreadable", "reason", json_string(e.msg),
		       "kept", json_string("the last credentials read"), NULL);
	}
	return 0;
}
