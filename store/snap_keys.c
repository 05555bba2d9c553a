/* snap_keys.c - the snapshot encryption keys of --snapshot-key-file
 * (snap_keys.h). */
#include "base/hex.h"
#include "store/snap_keys.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "base/fileio.h"

static int id_ok(const char *p, size_t n)
{
	if (n == 0 || n >= STORE_KEY_ID_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

int store_keys_parse(struct store_keys *ks, const char *text, size_t len, struct cp_err *err)
{
	memset(ks, 0, sizeof *ks);
	const char *p = text, *end = text + len;
	int line = 0;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		line++;
		while (p < le && (*p == ' ' || *p == '\t'))
			p++;
		const char *e = le;
		while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
			e--;
		if (p == e || *p == '#') {
			p = nl ? nl + 1 : end;
			continue;
		}
		const char *sp = p;
		while (sp < e && *sp != ' ' && *sp != '\t')
			sp++;
		const char *h = sp;
		while (h < e && (*h == ' ' || *h == '\t'))
			h++;
		if (!id_ok(p, (size_t)(sp - p)) || e - h != 64) {
			store_keys_wipe(ks);
			return cp_err_set(err, CP_E_PARSE, "snapshot key file, line %d: not KEYID "
			                  "and 64 hex digits", line);
		}
		if (ks->n == STORE_KEYS_MAX) {
			store_keys_wipe(ks);
			return cp_err_set(err, CP_E_PARSE, "snapshot key file: more than %d keys",
			                  STORE_KEYS_MAX);
		}
		struct store_key *k = &ks->k[ks->n];
		for (int i = 0; i < 32; i++) {
			int a = cp_hex_digit(h[2 * i]), b = cp_hex_digit(h[2 * i + 1]);
			if (a < 0 || b < 0) {
				store_keys_wipe(ks);
				return cp_err_set(err, CP_E_PARSE, "snapshot key file, line %d: not KEYID "
				                  "and 64 hex digits", line);
			}
			k->key[i] = (unsigned char)(a * 16 + b);
		}
		memcpy(k->id, p, (size_t)(sp - p));
		k->id[sp - p] = '\0';
		if (store_keys_find(ks, k->id)) {
			store_keys_wipe(ks);
			return cp_err_set(err, CP_E_PARSE, "snapshot key file, line %d: key id listed "
			                  "twice", line);
		}
		ks->n++;
		p = nl ? nl + 1 : end;
	}
	if (ks->n == 0)
		return cp_err_set(err, CP_E_PARSE, "snapshot key file holds no key");
	return 0;
}

int store_keys_load(struct store_keys *ks, const char *path, struct cp_err *err)
{
	size_t len = 0;
	char *text = cp_read_file(path, 64 * 1024, &len, err);
	if (!text)
		return err ? err->code : CP_E_IO;
	int rc = store_keys_parse(ks, text, len, err);
	OPENSSL_cleanse(text, len);
	free(text);
	return rc;
}

const struct store_key *store_keys_find(const struct store_keys *ks, const char *id)
{
	for (size_t i = 0; i < ks->n; i++)
		if (!strcmp(ks->k[i].id, id))
			return &ks->k[i];
	return NULL;
}

void store_keys_wipe(struct store_keys *ks)
{
	OPENSSL_cleanse(ks, sizeof *ks);
}
