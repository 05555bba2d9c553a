/*
 * webhook_sign.c - HMAC-SHA256 signatures of webhook requests (OpenSSL 3
 * EVP_MAC: the HMAC_CTX functions are deprecated).
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "base/fileio.h"
#include "base/hex.h"
#include "broker/webhook_sign.h"

int broker_webhook_sign(const unsigned char *key, size_t keylen, const char *timestamp,
                        const char *body, size_t len, char out[BROKER_SIG_LEN])
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	size_t maclen = 0;
	int ok = 0;
	out[0] = '\0';
	char digest[] = "SHA256";
	OSSL_PARAM params[] = { OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
		                OSSL_PARAM_construct_end() };
	EVP_MAC *hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	EVP_MAC_CTX *ctx = hmac ? EVP_MAC_CTX_new(hmac) : NULL;
	if (ctx && EVP_MAC_init(ctx, key, keylen, params) == 1 &&
	    EVP_MAC_update(ctx, (const unsigned char *)timestamp, strlen(timestamp)) == 1 &&
	    EVP_MAC_update(ctx, (const unsigned char *)".", 1) == 1 &&
	    EVP_MAC_update(ctx, (const unsigned char *)body, len) == 1 &&
	    EVP_MAC_final(ctx, mac, &maclen, sizeof mac) == 1 && maclen == 32)
		ok = 1;
	EVP_MAC_CTX_free(ctx);
	EVP_MAC_free(hmac);
	if (!ok)
		return CP_E_INTERNAL;
	memcpy(out, "v1=", 3);
	cp_hex_encode(mac, 32, out + 3);
	return 0;
}

unsigned char *broker_webhook_secret_load(const char *path, size_t *len, struct cp_err *err)
{
	struct cp_err ferr;
	size_t n = 0;
	/* 4096 bytes of secret and a CRLF; anything longer is refused below. */
	unsigned char *buf = (unsigned char *)cp_read_file(path, 4098, &n, &ferr);
	if (!buf && ferr.code != CP_E_TOO_BIG) {
		cp_err_set(err, ferr.code == CP_E_NOMEM ? CP_E_NOMEM : CP_E_IO,
		           "--webhook-secret-file %s", ferr.msg);
		return NULL;
	}
	while (buf && n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	if (!buf || n < 16 || n > 4096) {
		free(buf);
		cp_err_set(err, CP_E_INVALID_REQUEST, "--webhook-secret-file %s: the secret must be "
		           "16 to 4096 bytes (e.g. openssl rand -hex 32)", path);
		return NULL;
	}
	*len = n;
	return buf;
}
