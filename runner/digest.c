#include "runner/digest.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

static const char domain[] = "codepod-digest-v1"; /* hashed with its NUL */

#define DUMP_FLAGS (JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY)

/* Hashes a NUL separator then the value's canonical dump (NULL -> "null"). */
static int hash_json(EVP_MD_CTX *ctx, const json_t *v)
{
	char *text = NULL;
	int ok;

	if (EVP_DigestUpdate(ctx, "", 1) != 1)
		return CP_E_INTERNAL;
	if (!v)
		return EVP_DigestUpdate(ctx, "null", 4) == 1 ? 0 : CP_E_INTERNAL;
	text = json_dumps(v, DUMP_FLAGS);
	if (!text)
		return CP_E_NOMEM;
	ok = EVP_DigestUpdate(ctx, text, strlen(text));
	free(text);
	return ok == 1 ? 0 : CP_E_INTERNAL;
}

int codepod_digest(const char *src, size_t src_len, const json_t *tools, const json_t *policy,
              char out[65], struct cp_err *err)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int md_len = 0, i;
	EVP_MD_CTX *ctx = NULL;
	int rc = CP_E_INTERNAL;

	out[0] = '\0';
	ctx = EVP_MD_CTX_new();
	if (!ctx)
		return cp_err_set(err, CP_E_NOMEM, "EVP_MD_CTX_new failed");
	if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1 ||
	    EVP_DigestUpdate(ctx, domain, sizeof domain) != 1 ||
	    (src_len > 0 && EVP_DigestUpdate(ctx, src, src_len) != 1))
		goto done;
	rc = hash_json(ctx, tools);
	if (rc == 0)
		rc = hash_json(ctx, policy);
	if (rc < 0)
		goto done;
	rc = CP_E_INTERNAL;
	if (EVP_DigestFinal_ex(ctx, md, &md_len) != 1 || md_len != CODEPOD_DIGEST_HEX_LEN / 2)
		goto done;
	for (i = 0; i < md_len; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[2 * md_len] = '\0';
	rc = 0;
done:
	EVP_MD_CTX_free(ctx);
	if (rc == CP_E_NOMEM)
		return cp_err_set(err, rc, "cannot dump tools or policy JSON: out of memory");
	if (rc < 0)
		return cp_err_set(err, rc, "SHA-256 failed in OpenSSL");
	return 0;
}
