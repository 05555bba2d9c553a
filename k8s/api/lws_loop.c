/* lws_loop.c - the exec client's lws context: API server URL and TLS. */
#include "k8s/api/lws_loop.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "base/lws_uv.h"

#define MAX_HOST 256

struct k8s_lws {
	struct cp_lws *lws;      /* the context on the loop (base/lws_uv.h) */
	void (*done)(void *ud);  /* k8s_lws_free()'s, after the context */
	void *ud;
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

/* Free what k8s_lws_new() made, once lws no longer uses any of it. */
static void release(struct k8s_lws *l)
{
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
	struct cp_err lerr;
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

	memset(&info, 0, sizeof info);
	info.port = CONTEXT_PORT_NO_LISTEN;
	info.protocols = protocols;
	info.user = user;
	info.options = LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
	info.provided_client_ssl_ctx = l->ssl;
	/* One read per POLLIN into this buffer: 4 KiB (the default) costs
	 * throughput; the request line + headers must also fit (URL <= 8 KiB). */
	info.pt_serv_buf_size = 64 * 1024;
	info.max_http_header_data = 16 * 1024;
	info.timeout_secs = 30;
	/* lws logs are process-wide: errors and warnings only. */
	rc = cp_lws_new(loop, &info, LLL_ERR | LLL_WARN, &l->lws, &lerr);
	if (rc) {
		cp_err_set(err, lerr.code, "exec: %s", lerr.msg);
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
	return cp_lws_context(l->lws);
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

/* The context is gone: the SSL_CTX it borrowed can go too. */
static void on_lws_gone(void *arg)
{
	struct k8s_lws *l = arg;
	void (*done)(void *ud) = l->done;
	void *ud = l->ud;
	release(l);
	if (done)
		done(ud);
}

void k8s_lws_free(struct k8s_lws *l, void (*done)(void *ud), void *ud)
{
	if (!l)
		return;
	l->done = done;
	l->ud = ud;
	cp_lws_destroy(l->lws, on_lws_gone, l);
}
