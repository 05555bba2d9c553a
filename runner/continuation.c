#include "base/hex.h"
#include "runner/continuation.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "base/jsondepth.h"
#include "base/jsonutil.h"

#define MAX_KEYS 16
#define MAC_LEN 32
#define MAC_B64_LEN 43 /* 32 bytes in base64url without padding */
/* The object nests the tool outputs it logs: their depth limit, and a few
 * levels of the object's own. */
#define MAX_DEPTH 72

struct key {
	char id[CODEPOD_KEY_ID_MAX + 1];
	unsigned char secret[CODEPOD_KEY_MAX_BYTES];
	size_t len;
};

struct codepod_keyring {
	struct key keys[MAX_KEYS];
	size_t n;
};

static int id_char(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '-';
}

static int parse_line(struct codepod_keyring *kr, const char *p, size_t n, size_t line,
                      struct cp_err *err)
{
	while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r'))
		n--;
	if (n == 0 || p[0] == '#')
		return 0;
	const char *colon = memchr(p, ':', n);
	size_t idlen = colon ? (size_t)(colon - p) : 0;
	if (!colon || idlen == 0 || idlen > CODEPOD_KEY_ID_MAX)
		return cp_err_set(err, CP_E_PARSE, "line %zu: not KEYID:HEX (KEYID 1 to %d characters)",
		                  line, CODEPOD_KEY_ID_MAX);
	for (size_t i = 0; i < idlen; i++)
		if (!id_char((unsigned char)p[i]))
			return cp_err_set(err, CP_E_PARSE, "line %zu: a key id is letters, digits, "
			                  "'_' and '-'", line);
	const char *hex = colon + 1;
	size_t hlen = n - idlen - 1;
	if (hlen % 2 || hlen < 2 * CODEPOD_KEY_MIN_BYTES || hlen > 2 * CODEPOD_KEY_MAX_BYTES)
		return cp_err_set(err, CP_E_PARSE, "line %zu: the key must be %d to %d bytes as an "
		                  "even number of hex digits", line, CODEPOD_KEY_MIN_BYTES,
		                  CODEPOD_KEY_MAX_BYTES);
	if (kr->n == MAX_KEYS)
		return cp_err_set(err, CP_E_PARSE, "line %zu: at most %d keys", line, MAX_KEYS);
	struct key *k = &kr->keys[kr->n];
	for (size_t i = 0; i < hlen; i += 2) {
		int hi = cp_hex_digit((unsigned char)hex[i]), lo = cp_hex_digit((unsigned char)hex[i + 1]);
		if (hi < 0 || lo < 0) {
			OPENSSL_cleanse(k->secret, sizeof k->secret);
			return cp_err_set(err, CP_E_PARSE, "line %zu: the key is not hex", line);
		}
		k->secret[i / 2] = (unsigned char)(hi << 4 | lo);
	}
	memcpy(k->id, p, idlen);
	k->id[idlen] = '\0';
	k->len = hlen / 2;
	for (size_t j = 0; j < kr->n; j++)
		if (strcmp(kr->keys[j].id, k->id) == 0) {
			OPENSSL_cleanse(k, sizeof *k);
			return cp_err_set(err, CP_E_PARSE, "line %zu: key id %s is used twice", line,
			                  kr->keys[j].id);
		}
	kr->n++;
	return 0;
}

int codepod_keyring_parse(const char *text, size_t len, struct codepod_keyring **out,
                          struct cp_err *err)
{
	struct codepod_keyring *kr = calloc(1, sizeof *kr);
	if (!kr)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	size_t line = 0;
	for (size_t i = 0; i < len;) {
		const char *nl = memchr(text + i, '\n', len - i);
		size_t n = nl ? (size_t)(nl - (text + i)) : len - i;
		int rc = parse_line(kr, text + i, n, ++line, err);
		if (rc) {
			codepod_keyring_free(kr);
			return rc;
		}
		i += n + 1;
	}
	if (kr->n == 0) {
		codepod_keyring_free(kr);
		return cp_err_set(err, CP_E_PARSE, "no key in it (one per line, KEYID:HEX)");
	}
	*out = kr;
	return 0;
}

int codepod_keyring_random(struct codepod_keyring **out, struct cp_err *err)
{
	struct codepod_keyring *kr = calloc(1, sizeof *kr);
	if (!kr)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	if (RAND_bytes(kr->keys[0].secret, CODEPOD_KEY_MIN_BYTES) != 1) {
		free(kr);
		return cp_err_set(err, CP_E_INTERNAL, "no randomness for a continuation key");
	}
	snprintf(kr->keys[0].id, sizeof kr->keys[0].id, "ephemeral");
	kr->keys[0].len = CODEPOD_KEY_MIN_BYTES;
	kr->n = 1;
	*out = kr;
	return 0;
}

void codepod_keyring_free(struct codepod_keyring *kr)
{
	if (!kr)
		return;
	OPENSSL_cleanse(kr, sizeof *kr);
	free(kr);
}

const char *codepod_keyring_signer(const struct codepod_keyring *kr)
{
	return kr->keys[0].id;
}

/* ---- base64url without padding ---- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static size_t b64_len(size_t n)
{
	return n / 3 * 4 + (n % 3 ? n % 3 + 1 : 0);
}

static void b64_encode(const unsigned char *in, size_t n, char *out)
{
	size_t o = 0, i = 0;
	for (; i + 2 < n; i += 3) {
		unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8 | in[i + 2];
		out[o++] = b64[v >> 18 & 63];
		out[o++] = b64[v >> 12 & 63];
		out[o++] = b64[v >> 6 & 63];
		out[o++] = b64[v & 63];
	}
	if (n - i == 1) {
		unsigned v = (unsigned)in[i] << 16;
		out[o++] = b64[v >> 18 & 63];
		out[o++] = b64[v >> 12 & 63];
	} else if (n - i == 2) {
		unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8;
		out[o++] = b64[v >> 18 & 63];
		out[o++] = b64[v >> 12 & 63];
		out[o++] = b64[v >> 6 & 63];
	}
	out[o] = '\0';
}

static int b64_val(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '-')
		return 62;
	if (c == '_')
		return 63;
	return -1;
}

/* Strict: only the alphabet, no padding, no leftover bits set. Returns the
 * decoded length, or (size_t)-1. @out has room for n * 3 / 4 bytes. */
static size_t b64_decode(const char *in, size_t n, unsigned char *out)
{
	if (n % 4 == 1)
		return (size_t)-1;
	size_t o = 0;
	unsigned acc = 0;
	int bits = 0;
	for (size_t i = 0; i < n; i++) {
		int v = b64_val((unsigned char)in[i]);
		if (v < 0)
			return (size_t)-1;
		acc = (acc << 6 | (unsigned)v) & 0xFFFFFF;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
		}
	}
	if (bits && (acc & ((1u << bits) - 1)))
		return (size_t)-1;
	return o;
}

/* ---- seal and open ---- */

static int mac(const struct key *k, const char *text, size_t len, unsigned char out[MAC_LEN])
{
	unsigned int n = 0;
	if (!HMAC(EVP_sha256(), k->secret, (int)k->len, (const unsigned char *)text, len, out, &n) ||
	    n != MAC_LEN)
		return CP_E_INTERNAL;
	return 0;
}

int codepod_continuation_seal(const struct codepod_keyring *kr, json_t *body, char **out,
                              struct cp_err *err)
{
	const struct key *k = &kr->keys[0];
	if (!json_is_string(json_object_get(body, "conv")) ||
	    !json_is_integer(json_object_get(body, "iat")) ||
	    !json_is_integer(json_object_get(body, "exp")) ||
	    !json_is_string(json_object_get(body, "jti")))
		return cp_err_set(err, CP_E_INTERNAL, "a continuation needs conv, iat, exp and jti");
	if (json_object_set_new(body, "v", json_integer(1)) ||
	    json_object_set_new(body, "kid", json_string(k->id)))
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	size_t n = json_dumpb(body, NULL, 0, JSON_COMPACT | JSON_SORT_KEYS);
	if (n == 0)
		return cp_err_set(err, CP_E_NOMEM, "cannot encode the continuation");
	size_t idlen = strlen(k->id);
	size_t total = idlen + 1 + b64_len(n) + 1 + MAC_B64_LEN;
	if (total > CODEPOD_CONTINUATION_MAX_BYTES)
		return cp_err_set(err, CP_E_TOO_BIG, "the continuation would be %zu bytes, over the "
		                  "limit of %u bytes", total, CODEPOD_CONTINUATION_MAX_BYTES);
	char *json = malloc(n);
	char *text = malloc(total + 1);
	if (!json || !text) {
		free(json);
		free(text);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	json_dumpb(body, json, n, JSON_COMPACT | JSON_SORT_KEYS);
	memcpy(text, k->id, idlen);
	text[idlen] = '.';
	b64_encode((const unsigned char *)json, n, text + idlen + 1);
	free(json);
	size_t signed_len = idlen + 1 + b64_len(n);
	unsigned char m[MAC_LEN];
	if (mac(k, text, signed_len, m)) {
		free(text);
		return cp_err_set(err, CP_E_INTERNAL, "HMAC-SHA256 failed in OpenSSL");
	}
	text[signed_len] = '.';
	b64_encode(m, sizeof m, text + signed_len + 1);
	*out = text;
	return 0;
}

#define REFUSE(...) cp_err_set(err, CP_E_INVALID_REQUEST, __VA_ARGS__)

static const struct key *find_key(const struct codepod_keyring *kr, const char *id, size_t n)
{
	for (size_t i = 0; i < kr->n; i++)
		if (strlen(kr->keys[i].id) == n && memcmp(kr->keys[i].id, id, n) == 0)
			return &kr->keys[i];
	return NULL;
}

/* The object's own fields, once its MAC held. */
static int check_body(const json_t *v, const char *kid, size_t kid_len, const char *conversation,
                      uint64_t now_s, struct cp_err *err)
{
	const json_t *ver = json_object_get(v, "v");
	const char *k = json_string_value(json_object_get(v, "kid"));
	const char *conv = json_string_value(json_object_get(v, "conv"));
	const json_t *exp = json_object_get(v, "exp");
	const json_t *jti = json_object_get(v, "jti");
	if (!json_is_integer(ver) || json_integer_value(ver) != 1)
		return REFUSE("resume.continuation: not a continuation of this version of codepod");
	if (!k || strlen(k) != kid_len || memcmp(k, kid, kid_len) != 0 || !json_is_integer(exp) ||
	    !json_is_string(jti) || json_string_length(jti) != 32 ||
	    !json_is_integer(json_object_get(v, "iat")) || !conv)
		return REFUSE("resume.continuation: malformed (its fields are not codepod's)");
	if (strcmp(conv, conversation) != 0)
		return REFUSE("resume.continuation: it was issued for another conversation");
	if (json_integer_value(exp) < 0 || (uint64_t)json_integer_value(exp) <= now_s)
		return REFUSE("resume.continuation: it expired (older than --continuation-ttl)");
	return 0;
}

int codepod_continuation_open(const struct codepod_keyring *kr, const char *text, size_t len,
                              const char *conversation, uint64_t now_s, json_t **out,
                              struct cp_err *err)
{
	if (len > CODEPOD_CONTINUATION_MAX_BYTES)
		return REFUSE("resume.continuation is %zu bytes, over the limit of %u bytes", len,
		              CODEPOD_CONTINUATION_MAX_BYTES);
	const char *dot1 = memchr(text, '.', len);
	const char *dot2 = dot1 ? memchr(dot1 + 1, '.', len - (size_t)(dot1 + 1 - text)) : NULL;
	if (!dot1 || !dot2 || len - (size_t)(dot2 + 1 - text) != MAC_B64_LEN)
		return REFUSE("resume.continuation: malformed (not KEYID.PAYLOAD.MAC) or truncated");
	size_t kid_len = (size_t)(dot1 - text);
	const struct key *k = find_key(kr, text, kid_len);
	if (!k)
		return REFUSE("resume.continuation: signed by a key this codepod does not have");
	unsigned char want[MAC_LEN], got[MAC_LEN + 2];
	size_t signed_len = (size_t)(dot2 - text);
	if (mac(k, text, signed_len, want))
		return cp_err_set(err, CP_E_INTERNAL, "HMAC-SHA256 failed in OpenSSL");
	if (b64_decode(dot2 + 1, MAC_B64_LEN, got) != MAC_LEN || CRYPTO_memcmp(want, got, MAC_LEN) != 0)
		return REFUSE("resume.continuation: its signature does not match (altered or truncated)");
	const char *payload = dot1 + 1;
	size_t plen = (size_t)(dot2 - payload);
	unsigned char *json = malloc(plen / 4 * 3 + 3);
	if (!json)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	size_t n = b64_decode(payload, plen, json);
	json_t *v = NULL;
	if (n != (size_t)-1 && cp_json_text_depth((const char *)json, n, MAX_DEPTH) <= MAX_DEPTH)
		v = cp_json_load((const char *)json, n, NULL);
	free(json);
	if (!json_is_object(v)) {
		json_decref(v);
		return REFUSE("resume.continuation: malformed (its payload is not a JSON object)");
	}
	int rc = check_body(v, text, kid_len, conversation, now_s, err);
	if (rc) {
		json_decref(v);
		return rc;
	}
	*out = v;
	return 0;
}
