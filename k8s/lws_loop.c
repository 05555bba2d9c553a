/* lws_loop.c - an lws client context on the foreign libuv loop, with TLS. */
#include "lws_loop.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#define MAX_HOST 256
#define MAX_WATCH 8
#define MAX_FDS 4096 /* open fds compared around lws_create_context() */

struct k8s_lws {
	struct lws_context *ctx; /* lws writes NULL here once destroyed (pcontext) */
	uv_loop_t *loop;
	uv_timer_t timer;        /* drives the second phase of the destroy */
	int ticks;
	void (*done)(void *ud);
	void *ud;
	int watch[MAX_WATCH];    /* fds lws opened at context creation */
	int n_watch;
	int plug[MAX_WATCH];     /* placeholders dup2()ed over closed ones */
	ino_t plug_ino[MAX_WATCH];
	int n_plug;
	SSL_CTX *ssl;
	char host[MAX_HOST];
	char *base_path; /* URL path prefix without the trailing '/', or "" */
	int port;
	int tls;
	int insecure;
};

/*
 * Split "https://host[:port][/prefix]" ("[v6]" bracketed). Without a port
 * the scheme's default applies, as client-go does (GKE writes no port).
 */
static int parse_server(struct k8s_lws *l, const char *url, struct cp_err *err)
{
	const char *p = url, *h, *hend, *rest;
	if (!url)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "exec: no server URL");
	if (strncmp(p, "https://", 8) == 0) {
		l->tls = 1;
		l->port = 443;
		p += 8;
	} else if (strncmp(p, "http://", 7) == 0) {
		l->port = 80;
		p += 7;
	} else {
		return cp_err_set(err, CP_E_INVALID_REQUEST, "exec: server URL %.80s is not http(s)://", url);
	}
	if (*p == '[') {
		h = p + 1;
		hend = strchr(h, ']');
		if (!hend)
			return cp_err_set(err, CP_E_INVALID_REQUEST, "exec: unclosed '[' in server URL");
		rest = hend + 1;
	} else {
		h = p;
		hend = h + strcspn(h, ":/");
		rest = hend;
	}
	if (hend == h || (size_t)(hend - h) >= MAX_HOST)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "exec: bad host in server URL");
	memcpy(l->host, h, (size_t)(hend - h));
	l->host[hend - h] = '\0';
	if (*rest == ':') {
		char *e = NULL;
		long port = strtol(rest + 1, &e, 10);
		if (e == rest + 1 || port <= 0 || port > 65535 || (*e && *e != '/'))
			return cp_err_set(err, CP_E_INVALID_REQUEST, "exec: bad port in server URL");
		l->port = (int)port;
		rest = e;
	}
	size_t n = strlen(rest);
	while (n && rest[n - 1] == '/')
		n--;
	l->base_path = strndup(rest, n);
	if (!l->base_path)
		return cp_err_set(err, CP_E_NOMEM, "exec: out of memory");
	return 0;
}

/* Every certificate of a PEM bundle into the store (lws loads only one). */
static int load_ca(SSL_CTX *ssl, const unsigned char *pem, size_t len, struct cp_err *err)
{
	X509_STORE *store = SSL_CTX_get_cert_store(ssl);
	BIO *bio = BIO_new_mem_buf(pem, (int)len);
	X509 *x = NULL;
	int n = 0;
	if (!bio)
		return cp_err_set(err, CP_E_NOMEM, "exec: out of memory");
	while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
		X509_STORE_add_cert(store, x);
		X509_free(x);
		n++;
	}
	BIO_free(bio);
	ERR_clear_error();
	if (n == 0)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "exec: certificate-authority has no PEM certificate");
	return 0;
}

static int load_cert_key(SSL_CTX *ssl, const struct k8s_config *cfg, struct cp_err *err)
{
	BIO *bio = NULL;
	X509 *x = NULL;
	EVP_PKEY *key = NULL;
	int rc = CP_E_INVALID_REQUEST;

	bio = BIO_new_mem_buf(cfg->cert_pem, (int)cfg->cert_pem_len);
	x = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
	if (!x || SSL_CTX_use_certificate(ssl, x) != 1) {
		cp_err_set(err, rc, "exec: client certificate does not load");
		goto out;
	}
	/* The rest of the PEM is the chain. */
	for (;;) {
		X509 *c = PEM_read_bio_X509(bio, NULL, NULL, NULL);
		if (!c)
			break;
		if (SSL_CTX_add0_chain_cert(ssl, c) != 1)
			X509_free(c);
	}
	BIO_free(bio);
	bio = BIO_new_mem_buf(cfg->key_pem, (int)cfg->key_pem_len);
	key = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
	if (!key || SSL_CTX_use_PrivateKey(ssl, key) != 1 || SSL_CTX_check_private_key(ssl) != 1) {
		cp_err_set(err, rc, "exec: client key does not load or does not match the certificate");
		goto out;
	}
	rc = 0;
out:
	ERR_clear_error();
	EVP_PKEY_free(key);
	X509_free(x);
	BIO_free(bio);
	return rc;
}

/* The name to verify: tls-server-name, else the URL host (IP or DNS). */
static int set_verify_name(SSL_CTX *ssl, const char *name)
{
	X509_VERIFY_PARAM *param = SSL_CTX_get0_param(ssl);
	unsigned char buf[16];
	if (inet_pton(AF_INET, name, buf) == 1 || inet_pton(AF_INET6, name, buf) == 1)
		return X509_VERIFY_PARAM_set1_ip_asc(param, name) == 1 ? 0 : -1;
	X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	return X509_VERIFY_PARAM_set1_host(param, name, 0) == 1 ? 0 : -1;
}

static int make_ssl(struct k8s_lws *l, const struct k8s_config *cfg, struct cp_err *err)
{
	int rc;
	l->ssl = SSL_CTX_new(TLS_client_method());
	if (!l->ssl)
		return cp_err_set(err, CP_E_NOMEM, "exec: SSL_CTX_new failed");
	SSL_CTX_set_min_proto_version(l->ssl, TLS1_2_VERSION);
	if (cfg->ca_pem && cfg->ca_pem_len) {
		rc = load_ca(l->ssl, cfg->ca_pem, cfg->ca_pem_len, err);
		if (rc)
			return rc;
	} else {
		SSL_CTX_set_default_verify_paths(l->ssl);
	}
	if (cfg->cert_pem && cfg->key_pem) {
		rc = load_cert_key(l->ssl, cfg, err);
		if (rc)
			return rc;
	}
	if (cfg->insecure) {
		SSL_CTX_set_verify(l->ssl, SSL_VERIFY_NONE, NULL);
		return 0;
	}
	SSL_CTX_set_verify(l->ssl, SSL_VERIFY_PEER, NULL);
	if (set_verify_name(l->ssl, cfg->tls_server_name ? cfg->tls_server_name : l->host))
		return cp_err_set(err, CP_E_INVALID_REQUEST, "exec: bad TLS server name");
	return 0;
}

/*
 * Work-around for lws 4.1.6 + libuv: destroying a context closes its event
 * pipe twice. lws_destroy_event_pipe() closes both pipe fds at once (phase
 * 1), and the uv close callback of the pipe's wsi closes wsi->desc.sockfd
 * (the read end) again on a later loop turn. If anything opened a file in
 * between, it got that number and loses it: we saw a new exec socket
 * closed under libuv (epoll_ctl EBADF -> abort). So the fds lws opened at
 * creation are remembered, and those phase 1 closed are occupied by a
 * placeholder (a memfd, unique inode) until the context is gone; a
 * placeholder still in place then is closed by us.
 */
static int open_fds(int *out, int max)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de = NULL;
	int n = 0;
	if (!d)
		return 0;
	while ((de = readdir(d)) != NULL && n < max) {
		char *end = NULL;
		long fd = strtol(de->d_name, &end, 10);
		if (*end || end == de->d_name || fd == dirfd(d))
			continue;
		out[n++] = (int)fd;
	}
	closedir(d);
	return n;
}

static void watch_new_fds(struct k8s_lws *l, const int *before, int n_before)
{
	int after[MAX_FDS];
	int n_after = open_fds(after, MAX_FDS);
	for (int i = 0; i < n_after && l->n_watch < MAX_WATCH; i++) {
		int seen = 0;
		for (int j = 0; j < n_before && !seen; j++)
			seen = before[j] == after[i];
		if (!seen)
			l->watch[l->n_watch++] = after[i];
	}
}

static void plug_closed_fds(struct k8s_lws *l)
{
	for (int i = 0; i < l->n_watch; i++) {
		struct stat st;
		int fd = l->watch[i];
		if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
			continue;
		int m = memfd_create("k8s-lws-fd-plug", MFD_CLOEXEC);
		if (m < 0)
			continue;
		if (m != fd && dup2(m, fd) < 0) {
			close(m);
			continue;
		}
		if (m != fd)
			close(m);
		if (fstat(fd, &st) == 0) {
			l->plug[l->n_plug] = fd;
			l->plug_ino[l->n_plug++] = st.st_ino;
		}
	}
}

static void unplug_fds(struct k8s_lws *l)
{
	for (int i = 0; i < l->n_plug; i++) {
		struct stat st;
		if (fstat(l->plug[i], &st) == 0 && st.st_ino == l->plug_ino[i])
			close(l->plug[i]);
	}
	l->n_plug = 0;
}

/* Free what k8s_lws_new() made, once lws no longer uses any of it. */
static void release(struct k8s_lws *l)
{
	unplug_fds(l);
	/* lws does not free an SSL_CTX it was given. */
	SSL_CTX_free(l->ssl);
	free(l->base_path);
	free(l);
}

int k8s_lws_new(uv_loop_t *loop, const struct k8s_config *cfg,
                const struct lws_protocols *protocols, void *user,
                struct k8s_lws **out, struct cp_err *err)
{
	struct lws_context_creation_info info;
	void *loops[1] = {loop};
	struct k8s_lws *l = calloc(1, sizeof *l);
	int rc;

	*out = NULL;
	if (!l)
		return cp_err_set(err, CP_E_NOMEM, "exec: out of memory");
	rc = parse_server(l, cfg->server, err);
	if (rc == 0 && l->tls)
		rc = make_ssl(l, cfg, err);
	if (rc)
		goto fail;
	l->insecure = cfg->insecure;

	l->loop = loop;
	memset(&info, 0, sizeof info);
	info.port = CONTEXT_PORT_NO_LISTEN;
	info.pcontext = &l->ctx;
	info.protocols = protocols;
	info.user = user;
	info.options = LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
	info.foreign_loops = loops;
	info.provided_client_ssl_ctx = l->ssl;
	/* One read per POLLIN into this buffer: 4 KiB (the default) costs
	 * throughput; the request line + headers must also fit (URL <= 8 KiB). */
	info.pt_serv_buf_size = 64 * 1024;
	info.max_http_header_data = 16 * 1024;
	info.timeout_secs = 30;
	/* lws logs are process-wide: errors and warnings only. */
	lws_set_log_level(LLL_ERR | LLL_WARN, NULL);
	int before[MAX_FDS];
	int n_before = open_fds(before, MAX_FDS);
	l->ctx = lws_create_context(&info);
	if (l->ctx)
		watch_new_fds(l, before, n_before);
	if (!l->ctx) {
		rc = cp_err_set(err, CP_E_UNSUPPORTED,
		                "exec: libwebsockets context on the libuv loop failed "
		                "(is libwebsockets-evlib-uv installed?)");
		goto fail;
	}
	*out = l;
	return 0;
fail:
	release(l);
	return rc;
}

struct lws_context *k8s_lws_context(const struct k8s_lws *l)
{
	return l->ctx;
}

struct lws_vhost *k8s_lws_vhost(const struct k8s_lws *l)
{
	return lws_get_vhost_by_name(l->ctx, "default");
}

const char *k8s_lws_host(const struct k8s_lws *l)
{
	return l->host;
}

const char *k8s_lws_base_path(const struct k8s_lws *l)
{
	return l->base_path;
}

int k8s_lws_port(const struct k8s_lws *l)
{
	return l->port;
}

int k8s_lws_ssl_flags(const struct k8s_lws *l)
{
	if (!l->tls)
		return 0;
	/* The name is checked by our SSL_CTX's verify param (see make_ssl). */
	int f = LCCSCF_USE_SSL | LCCSCF_SKIP_SERVER_CERT_HOSTNAME_CHECK;
	if (l->insecure)
		f |= LCCSCF_ALLOW_SELFSIGNED | LCCSCF_ALLOW_EXPIRED | LCCSCF_ALLOW_INSECURE;
	return f;
}

/*
 * With a foreign loop lws 4.1 destroys a context in two calls: the first
 * closes every wsi (uv_close: WSI_DESTROY runs from the close callbacks on
 * the loop) and, once they are down, lws's static uv handles (timers, idle)
 * that live inside the context's own allocation; a second
 * lws_context_destroy() frees the context and writes NULL through
 * info.pcontext. Without the second call the context never goes (observed
 * with 4.1.6); made too early it frees handles libuv still holds (valgrind:
 * uv_run writing into the freed context). So the timer below makes the
 * second call only once no handle on the loop lies inside the context's
 * block (malloc_usable_size bounds it), then waits for the NULL.
 */
struct inside {
	const char *lo, *hi;
	int n;
};

static void count_inside(uv_handle_t *h, void *arg)
{
	struct inside *in = arg;
	const char *p = (const char *)h;
	if (p >= in->lo && p < in->hi)
		in->n++;
}

static int lws_handles_left(struct k8s_lws *l)
{
	struct inside in;
	in.lo = (const char *)l->ctx;
	in.hi = in.lo + malloc_usable_size(l->ctx);
	in.n = 0;
	uv_walk(l->loop, count_inside, &in);
	return in.n;
}

static void on_timer_closed(uv_handle_t *h)
{
	struct k8s_lws *l = h->data;
	void (*done)(void *ud) = l->done;
	void *ud = l->ud;
	release(l);
	if (done)
		done(ud);
}

static void on_destroy_tick(uv_timer_t *t)
{
	struct k8s_lws *l = t->data;
	if (l->ctx && ++l->ticks >= 2 && lws_handles_left(l) == 0)
		lws_context_destroy(l->ctx);
	if (l->ctx)
		return;
	uv_timer_stop(t);
	uv_close((uv_handle_t *)t, on_timer_closed);
}

void k8s_lws_free(struct k8s_lws *l, void (*done)(void *ud), void *ud)
{
	if (!l)
		return;
	l->done = done;
	l->ud = ud;
	lws_context_destroy(l->ctx);
	plug_closed_fds(l);
	uv_timer_init(l->loop, &l->timer);
	l->timer.data = l;
	uv_timer_start(&l->timer, on_destroy_tick, 1, 1);
}
