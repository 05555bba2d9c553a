/* s3.c - the S3 client's requests and its simple operations (s3.h). */
#include "store/s3.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "base/hex.h"
#include "store/gcp_token.h"
#include "store/s3_creds.h"
#include "store/s3_int.h"
#include "store/s3_xml.h"

#define STALL_S 30L           /* a store that sends nothing for this long is down */
#define CONNECT_MS 10000L
#define GCS_ENDPOINT "https://storage.googleapis.com"

struct store_s3 {
	struct cp_curl *curl;
	char *bucket, *base, *region, *sigv4;
	int virtual_host;          /* AWS: BUCKET.s3.REGION.amazonaws.com/KEY */
	struct store_creds creds;
	struct store_gcp_token *gcp; /* gcp_metadata: bearer tokens, else NULL */
	struct store_req *reqs;    /* running */
	struct store_req *waiting; /* for a token (gcp), in order */
	int in_ready, dead;        /* freed while handing a token out */
};

static int launch(struct store_req *r, struct cp_err *err);

int store_key_ok(const char *key)
{
	size_t n = key ? strlen(key) : 0;
	if (n == 0 || n > 1024 || key[0] == '/')
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = key[i];
		int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		         c == '/' || c == '.' || c == '_' || c == '-';
		if (!ok || (c == '/' && key[i + 1] == '/'))
			return 0;
	}
	return 1;
}

/* S3's bucket names; GCS's may also hold '_' and, dotted, be up to 222 long. */
static int bucket_ok(const char *b, int gcs)
{
	size_t n = b ? strlen(b) : 0;
	if (n < 3 || n > (gcs ? 222u : 63u))
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = b[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
		      (gcs && c == '_')))
			return 0;
	}
	return 1;
}

static int region_ok(const char *r)
{
	size_t n = strlen(r);
	if (n == 0 || n > 64)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((r[i] >= 'a' && r[i] <= 'z') || (r[i] >= '0' && r[i] <= '9') || r[i] == '-'))
			return 0;
	return 1;
}

int store_sha256_hex(const void *p, size_t len, char out[65], struct cp_err *err)
{
	unsigned char md[32];
	unsigned int n = 0;
	if (!EVP_Digest(p, len, md, &n, EVP_sha256(), NULL) || n != 32)
		return cp_err_set(err, CP_E_INTERNAL, "sha256 failed");
	cp_hex_encode(md, sizeof md, out);
	return 0;
}

int store_query_escape(struct cp_buf *b, const char *v, struct cp_err *err)
{
	for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
		int unreserved = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		                 (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' ||
		                 *p == '~';
		int rc = unreserved ? cp_buf_add(b, p, 1, err) : cp_buf_addf(b, err, "%%%02X", *p);
		if (rc)
			return rc;
	}
	return 0;
}

static void token_ready(void *ud, int rc, const struct cp_err *e);

static char *dup_or(const char *s, const char *dflt)
{
	return strdup(s ? s : dflt);
}

int store_s3_new(struct cp_curl *curl, const struct store_s3_config *cfg,
                 struct store_s3 **out, struct cp_err *err)
{
	*out = NULL;
	if (!bucket_ok(cfg->bucket, cfg->gcp_metadata))
		return cp_err_set(err, CP_E_INVALID_REQUEST, cfg->gcp_metadata
		                  ? "bucket name must be 3 to 222 of [a-z0-9._-]"
		                  : "bucket name must be 3 to 63 of [a-z0-9.-]");
	const char *region = cfg->region ? cfg->region : "us-east-1";
	if (!region_ok(region))
		return cp_err_set(err, CP_E_INVALID_REQUEST, "region must be of [a-z0-9-]");
	if (cfg->endpoint && strncmp(cfg->endpoint, "http://", 7) != 0 &&
	    strncmp(cfg->endpoint, "https://", 8) != 0)
		return cp_err_set(err, CP_E_INVALID_REQUEST,
		                  "store endpoint must be an http:// or https:// URL");
	struct store_s3 *s = calloc(1, sizeof *s);
	if (!s)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	s->curl = curl;
	int rc = cfg->gcp_metadata ? store_gcp_token_new(curl, cfg->loop, token_ready, s, &s->gcp, err)
	                           : store_creds_init(&s->creds, cfg->credentials_file, err);
	if (rc) {
		free(s);
		return rc;
	}
	char base[600];
	const char *endpoint = cfg->endpoint ? cfg->endpoint
	                       : cfg->gcp_metadata ? GCS_ENDPOINT : NULL;
	if (endpoint) {
		size_t n = strlen(endpoint);
		while (n && endpoint[n - 1] == '/')
			n--;
		if (n >= sizeof base - 80) {
			store_gcp_token_free(s->gcp);
			free(s);
			return cp_err_set(err, CP_E_INVALID_REQUEST, "store endpoint too long");
		}
		snprintf(base, sizeof base, "%.*s", (int)n, endpoint);
	} else {
		snprintf(base, sizeof base, "https://%s.s3.%s.amazonaws.com", cfg->bucket, region);
		s->virtual_host = 1;
	}
	char sig[128];
	snprintf(sig, sizeof sig, "aws:amz:%s:s3", region);
	s->bucket = dup_or(cfg->bucket, "");
	s->base = dup_or(base, "");
	s->region = dup_or(region, "");
	s->sigv4 = dup_or(sig, "");
	if (!s->bucket || !s->base || !s->region || !s->sigv4) {
		store_s3_free(s);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	*out = s;
	return 0;
}

int store_s3_bearer(const struct store_s3 *s)
{
	return s->gcp != NULL;
}

int store_s3_hashes_payload(const struct store_s3 *s)
{
	return s->gcp == NULL && strncmp(s->base, "https://", 8) != 0;
}

unsigned long store_s3_token_fetches(const struct store_s3 *s)
{
	return s->gcp ? store_gcp_token_fetches(s->gcp) : 0;
}

void store_s3_free(struct store_s3 *s)
{
	if (!s)
		return;
	if (s->in_ready) { /* token_ready() frees it when it is done */
		s->dead = 1;
		return;
	}
	while (s->reqs) {
		struct store_req *r = s->reqs;
		cp_curl_cancel(s->curl, &r->x);
		store_req_free(r);
	}
	while (s->waiting) {
		struct store_req *r = s->waiting;
		s->waiting = r->next;
		store_req_free(r);
	}
	store_gcp_token_free(s->gcp);
	free(s->bucket);
	free(s->base);
	free(s->region);
	free(s->sigv4);
	memset(&s->creds, 0, sizeof s->creds);
	free(s);
}

/* -- one request --------------------------------------------------------- */

struct store_req *store_req_new(struct store_s3 *s, const char *method, const char *key,
                                const char *query, size_t body_max, struct cp_err *err)
{
	if (key && !store_key_ok(key)) {
		cp_err_set(err, CP_E_INVALID_REQUEST, "invalid object key");
		return NULL;
	}
	struct store_req *r = calloc(1, sizeof *r);
	if (!r) {
		cp_err_set(err, CP_E_NOMEM, "out of memory");
		return NULL;
	}
	r->s = s;
	r->in_fd = r->out_fd = -1;
	snprintf(r->method, sizeof r->method, "%s", method);
	cp_buf_init(&r->body, body_max);
	struct cp_buf u;
	cp_buf_init(&u, 8192);
	int rc = cp_buf_addf(&u, err, "%s/", s->base);
	if (!rc && !s->virtual_host)
		rc = cp_buf_addf(&u, err, "%s%s", s->bucket, key ? "/" : "");
	if (!rc && key)
		rc = cp_buf_addf(&u, err, "%s", key);
	if (!rc && query && *query)
		rc = cp_buf_addf(&u, err, "?%s", query);
	if (!rc)
		r->url = cp_buf_take(&u, NULL, err);
	cp_buf_free(&u);
	if (!r->url) {
		store_req_free(r);
		return NULL;
	}
	return r;
}

void store_req_free(struct store_req *r)
{
	if (!r)
		return;
	if (r->running) {
		struct store_s3 *s = r->s;
		if (r->prev)
			r->prev->next = r->next;
		else
			s->reqs = r->next;
		if (r->next)
			r->next->prev = r->prev;
	}
	if (r->easy)
		curl_easy_cleanup(r->easy);
	curl_slist_free_all(r->hdrs);
	free(r->url);
	free(r->mem);
	cp_buf_free(&r->body);
	free(r);
}

static size_t on_read(char *buf, size_t size, size_t n, void *ud)
{
	struct store_req *r = ud;
	size_t want = size * n;
	if (r->in_fd < 0) {
		size_t left = r->mem_len - (size_t)r->in_pos;
		size_t k = left < want ? left : want;
		memcpy(buf, r->mem + r->in_pos, k);
		r->in_pos += k;
		return k;
	}
	uint64_t left = r->in_len - r->in_pos;
	if ((uint64_t)want > left)
		want = (size_t)left;
	if (want == 0)
		return 0;
	ssize_t k;
	do
		k = pread(r->in_fd, buf, want, (off_t)(r->in_off + r->in_pos));
	while (k < 0 && errno == EINTR);
	if (k <= 0) {
		r->write_errno = k < 0 ? errno : EIO;
		return CURL_READFUNC_ABORT;
	}
	r->in_pos += (uint64_t)k;
	return (size_t)k;
}

static size_t on_write(char *buf, size_t size, size_t n, void *ud)
{
	struct store_req *r = ud;
	size_t len = size * n;
	long st = 0;
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &st);
	if (r->sink && st >= 200 && st < 300) {
		if (r->out_n + len > r->out_max) {
			r->too_big = 1;
			return 0;
		}
		int k = r->sink(r->sink_ud, buf, len);
		if (k == STORE_SINK_PAUSE)
			return CURL_WRITEFUNC_PAUSE;
		if (k < 0) {
			r->write_errno = EIO;
			return 0;
		}
		r->out_n += len;
		return len;
	}
	if (r->out_fd >= 0 && st >= 200 && st < 300) {
		if (r->out_n + len > r->out_max) {
			r->too_big = 1;
			return 0;
		}
		size_t done = 0;
		while (done < len) {
			ssize_t k = write(r->out_fd, buf + done, len - done);
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0) {
				r->write_errno = k < 0 ? errno : EIO;
				return 0;
			}
			done += (size_t)k;
		}
		r->out_n += len;
		return len;
	}
	if (cp_buf_add(&r->body, buf, len, NULL)) {
		r->too_big = 1;
		return 0;
	}
	return len;
}

static size_t on_header(char *buf, size_t size, size_t n, void *ud)
{
	struct store_req *r = ud;
	size_t len = size * n;
	if (len > 5 && strncasecmp(buf, "etag:", 5) == 0) {
		const char *p = buf + 5, *e = buf + len;
		while (p < e && (*p == ' ' || *p == '\t'))
			p++;
		while (e > p && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' '))
			e--;
		if ((size_t)(e - p) < sizeof r->etag) {
			memcpy(r->etag, p, (size_t)(e - p));
			r->etag[e - p] = '\0';
		}
	}
	return len;
}

static void unlink_running(struct store_req *r)
{
	struct store_s3 *s = r->s;
	if (!r->running)
		return;
	if (r->prev)
		r->prev->next = r->next;
	else
		s->reqs = r->next;
	if (r->next)
		r->next->prev = r->prev;
	r->prev = r->next = NULL;
	r->running = 0;
}

/* Ends a request that got no answer (no token could be had): @done with
 * @rc and @e, then freed. */
static void end_unsent(struct store_req *r, int rc, const struct cp_err *e)
{
	struct store_result out = { .rc = rc ? rc : CP_E_INTERNAL, .mtime = -1, .err = e };
	if (r->done)
		r->done(r->ud, &out);
	store_req_free(r);
}

/* As it was before it was sent: for sending it again. */
static void req_reset(struct store_req *r)
{
	if (r->easy)
		curl_easy_cleanup(r->easy);
	r->easy = NULL;
	curl_slist_free_all(r->hdrs);
	r->hdrs = NULL;
	cp_buf_reset(&r->body);
	r->in_pos = 0;
	r->out_n = 0;
	r->too_big = r->write_errno = 0;
	r->etag[0] = r->ebuf[0] = '\0';
}

static void finish(void *ud, CURLcode res)
{
	struct store_req *r = ud;
	struct cp_err e = { 0 };
	struct store_result out = { .rc = 0, .mtime = -1, .err = &e };
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &out.status);
	/* A bearer token refused (revoked, or expired early): once more with
	 * a new one. Nothing of a 401's body reached a file or a sink. */
	if (r->s->gcp && res == CURLE_OK && out.status == 401 && !r->retried) {
		r->retried = 1;
		store_gcp_token_drop(r->s->gcp, r->token_gen);
		unlink_running(r);
		req_reset(r);
		int rc = launch(r, &e);
		if (rc)
			end_unsent(r, rc, &e);
		return;
	}
	const char *body = cp_buf_ptr(&r->body);
	size_t blen = cp_buf_len(&r->body);
	char code[128] = "";
	store_xml_first(body, blen, "Code", code, sizeof code);
	if (r->too_big) {
		out.rc = cp_err_set(&e, CP_E_TOO_BIG, "store: %s answer over its bound", r->method);
	} else if (r->write_errno) {
		errno = r->write_errno;
		out.rc = cp_err_errno(&e, CP_E_IO, r->write_errno, "store: %s body", r->method);
	} else if (res != CURLE_OK) {
		out.rc = cp_err_set(&e, CP_E_RETRY, "store unreachable: %s",
		                    r->ebuf[0] ? r->ebuf : curl_easy_strerror(res));
	} else if (out.status == 404) {
		out.rc = cp_err_set(&e, CP_E_NOT_FOUND, "store: 404 %s", code[0] ? code : "NoSuchKey");
	} else if (out.status == 401 || out.status == 403) {
		out.rc = cp_err_set(&e, CP_E_AUTH, "store refused the request: %ld %s", out.status,
		                    code[0] ? code : "AccessDenied");
	} else if (out.status < 200 || out.status > 299) {
		out.rc = cp_err_set(&e, CP_E_HTTP, "store answered %ld %s", out.status,
		                    code[0] ? code : "");
	}
	out.body = body;
	out.body_len = blen;
	out.size = r->out_n;
	if (!strcmp(r->method, "HEAD")) {
		curl_off_t cl = -1;
		curl_easy_getinfo(r->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
		out.size = cl > 0 ? (uint64_t)cl : 0;
		curl_off_t ft = -1;
		curl_easy_getinfo(r->easy, CURLINFO_FILETIME_T, &ft);
		out.mtime = (int64_t)ft;
	}
	/* Out of the running list before @done, which may free the client. */
	unlink_running(r);
	if (r->done)
		r->done(r->ud, &out);
	store_req_free(r);
}

static int add_header(struct store_req *r, struct cp_err *err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int add_header(struct store_req *r, struct cp_err *err, const char *fmt, ...)
{
	char line[STORE_TOKEN_MAX + 64];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof line)
		return cp_err_set(err, CP_E_INTERNAL, "header too long");
	struct curl_slist *l = curl_slist_append(r->hdrs, line);
	if (!l)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	r->hdrs = l;
	return 0;
}

/* Sent now: signed with the keys, or with @bearer (gcp). */
static int send_now(struct store_req *r, const char *bearer, struct cp_err *err)
{
	struct store_s3 *s = r->s;
	int rc = 0;
	if (!bearer && (rc = store_creds_fresh(&s->creds, err)))
		return rc;
	CURL *e = curl_easy_init();
	if (!e)
		return cp_err_set(err, CP_E_NOMEM, "curl_easy_init failed");
	r->easy = e;
	int is_put = !strcmp(r->method, "PUT"), is_post = !strcmp(r->method, "POST");
	if (bearer) {
		/* GCS with OAuth: x-amz-* headers would ask for its S3 mode */
		rc = add_header(r, err, "Authorization: Bearer %s", bearer);
		r->token_gen = store_gcp_token_gen(s->gcp);
	} else {
		/* libcurl 7.88 signs the hash of an empty body unless this is given. */
		rc = add_header(r, err, "x-amz-content-sha256: %s",
		                r->sha256[0] ? r->sha256 : "UNSIGNED-PAYLOAD");
		if (!rc && s->creds.token[0])
			rc = add_header(r, err, "x-amz-security-token: %s", s->creds.token);
	}
	if (!rc && r->content_type)
		rc = add_header(r, err, "Content-Type: %s", r->content_type);
	if (rc)
		return rc;
	curl_easy_setopt(e, CURLOPT_URL, r->url);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->ebuf);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	if (!bearer) {
		curl_easy_setopt(e, CURLOPT_AWS_SIGV4, s->sigv4);
		curl_easy_setopt(e, CURLOPT_USERNAME, s->creds.access);
		curl_easy_setopt(e, CURLOPT_PASSWORD, s->creds.secret);
	}
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "codepod/0.1");
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_MS);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, STALL_S);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_FILETIME, 1L);
	/* Archives: bigger pieces, fewer reads and writes of the spool file. */
	curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 512L * 1024);
	curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, 1024L * 1024);
	if (is_put) {
		curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(e, CURLOPT_READDATA, r);
		curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE,
		                 (curl_off_t)(r->in_fd >= 0 ? r->in_len : r->mem_len));
	} else if (is_post) {
		curl_easy_setopt(e, CURLOPT_POST, 1L);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->mem_len);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->mem ? r->mem : "");
	} else if (!strcmp(r->method, "HEAD")) {
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	} else if (strcmp(r->method, "GET") != 0) {
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
	}
	rc = cp_curl_add(s->curl, &r->x, e, finish, r, err);
	if (rc)
		return rc;
	r->running = 1;
	r->prev = NULL;
	r->next = s->reqs;
	if (s->reqs)
		s->reqs->prev = r;
	s->reqs = r;
	return 0;
}

/* Sent now, or (gcp, no fresh token) queued until a token comes. */
static int launch(struct store_req *r, struct cp_err *err)
{
	struct store_s3 *s = r->s;
	if (!s->gcp)
		return send_now(r, NULL, err);
	const char *tok = store_gcp_token_current(s->gcp);
	if (tok)
		return send_now(r, tok, err);
	int rc = store_gcp_token_fetch(s->gcp, err);
	if (rc)
		return rc;
	r->next = NULL;
	struct store_req **tail = &s->waiting;
	while (*tail)
		tail = &(*tail)->next;
	*tail = r;
	return 0;
}

/* A token fetch ended: the requests that waited for it go, or fail with
 * its error. Those queued meanwhile wait for the next fetch. */
static void token_ready(void *ud, int rc, const struct cp_err *e)
{
	struct store_s3 *s = ud;
	struct store_req *list = s->waiting;
	s->waiting = NULL;
	s->in_ready = 1;
	while (list && !s->dead) {
		struct store_req *r = list;
		list = r->next;
		r->next = NULL;
		struct cp_err e2 = { 0 };
		const char *tok = rc ? NULL : store_gcp_token_current(s->gcp);
		int rc2 = rc ? rc : !tok ? cp_err_set(&e2, CP_E_AUTH, "no fresh access token")
		                         : send_now(r, tok, &e2);
		if (rc2) {
			req_reset(r);
			end_unsent(r, rc2, rc ? e : &e2);
		}
	}
	s->in_ready = 0;
	while (list) { /* the client was freed meanwhile: dropped, no @done */
		struct store_req *r = list;
		list = r->next;
		store_req_free(r);
	}
	if (s->dead) {
		s->dead = 0;
		store_s3_free(s);
	}
}

int store_req_start(struct store_req *r, store_done_fn done, void *ud, struct cp_err *err)
{
	r->done = done;
	r->ud = ud;
	return launch(r, err);
}

/* -- the simple operations ----------------------------------------------- */

static int start_or_free(struct store_req *r, store_done_fn done, void *ud, struct cp_err *err)
{
	int rc = store_req_start(r, done, ud, err);
	if (rc)
		store_req_free(r);
	return rc;
}

int store_s3_put_fd(struct store_s3 *s, const char *key, int fd, uint64_t off, uint64_t len,
                    const char *sha256, store_done_fn done, void *ud, struct cp_err *err)
{
	struct store_req *r = store_req_new(s, "PUT", key, NULL, STORE_BODY_MAX, err);
	if (!r)
		return err ? err->code : CP_E_NOMEM;
	r->in_fd = fd;
	r->in_off = off;
	r->in_len = len;
	if (sha256)
		snprintf(r->sha256, sizeof r->sha256, "%s", sha256);
	return start_or_free(r, done, ud, err);
}

int store_s3_put_mem(struct store_s3 *s, const char *key, const void *body, size_t len,
                     store_done_fn done, void *ud, struct cp_err *err)
{
	struct store_req *r = store_req_new(s, "PUT", key, NULL, STORE_BODY_MAX, err);
	if (!r)
		return err ? err->code : CP_E_NOMEM;
	r->mem = malloc(len ? len : 1);
	if (!r->mem) {
		store_req_free(r);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	if (len)
		memcpy(r->mem, body, len);
	r->mem_len = len;
	int rc = store_sha256_hex(body, len, r->sha256, err);
	if (rc) {
		store_req_free(r);
		return rc;
	}
	return start_or_free(r, done, ud, err);
}

int store_s3_get_fd(struct store_s3 *s, const char *key, int fd, uint64_t max,
                    store_done_fn done, void *ud, struct cp_err *err)
{
	struct store_req *r = store_req_new(s, "GET", key, NULL, STORE_BODY_MAX, err);
	if (!r)
		return err ? err->code : CP_E_NOMEM;
	r->out_fd = fd;
	r->out_max = max;
	return start_or_free(r, done, ud, err);
}

int store_s3_get_sink(struct store_s3 *s, const char *key, uint64_t max, store_sink_fn sink,
                      void *sink_ud, struct store_req **req, store_done_fn done, void *ud,
                      struct cp_err *err)
{
	struct store_req *r = store_req_new(s, "GET", key, NULL, STORE_BODY_MAX, err);
	if (!r)
		return err ? err->code : CP_E_NOMEM;
	r->sink = sink;
	r->sink_ud = sink_ud;
	r->out_max = max;
	*req = r;
	return start_or_free(r, done, ud, err);
}

void store_s3_resume(struct store_req *r)
{
	if (r && r->easy && r->running)
		curl_easy_pause(r->easy, CURLPAUSE_CONT);
}

int store_s3_get_mem(struct store_s3 *s, const char *key, size_t max,
                     store_done_fn done, void *ud, struct cp_err *err)
{
	struct store_req *r = store_req_new(s, "GET", key, NULL, max, err);
	if (!r)
		return err ? err->code : CP_E_NOMEM;
	return start_or_free(r, done, ud, err);
}

int store_s3_head(struct store_s3 *s, const char *key, store_done_fn done, void *ud,
                  struct cp_err *err)
{
	struct store_req *r = store_req_new(s, "HEAD", key, NULL, STORE_BODY_MAX, err);
	if (!r)
		return err ? err->code : CP_E_NOMEM;
	return start_or_free(r, done, ud, err);
}

struct del {
	store_done_fn done;
	void *ud;
};

static void deleted(void *ud, const struct store_result *res)
{
	struct del *d = ud;
	struct store_result r = *res;
	if (r.rc == CP_E_NOT_FOUND)
		r.rc = 0; /* gone already: what was asked */
	d->done(d->ud, &r);
	free(d);
}

int store_s3_delete(struct store_s3 *s, const char *key, store_done_fn done, void *ud,
                    struct cp_err *err)
{
	struct del *d = malloc(sizeof *d);
	if (!d)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	d->done = done;
	d->ud = ud;
	struct store_req *r = store_req_new(s, "DELETE", key, NULL, STORE_BODY_MAX, err);
	if (!r) {
		free(d);
		return err ? err->code : CP_E_NOMEM;
	}
	int rc = start_or_free(r, deleted, d, err);
	if (rc)
		free(d);
	return rc;
}
