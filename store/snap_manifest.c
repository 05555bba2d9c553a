/* snap_manifest.c - a snapshot's manifest to JSON and back (snap_manifest.h). */
#include "store/snap_manifest.h"

#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "base/hex.h"
#include "base/jsondepth.h"
#include "store/s3.h"

char *store_manifest_json(const struct store_manifest *m, size_t *len, struct cp_err *err)
{
	json_t *o = json_pack("{s:i,s:s,s:I,s:I,s:I,s:s,s:s,s:I}", "version", 1,
	                      "archive", m->archive, "size", (json_int_t)m->size,
	                      "files", (json_int_t)m->files, "bytes", (json_int_t)m->bytes,
	                      "sha256", m->sha256, "fingerprint", m->fingerprint,
	                      "created", (json_int_t)m->created);
	if (o && m->key_id[0]) {
		char iv[25];
		cp_hex_encode(m->iv, 12, iv);
		json_object_set_new(o, "keyId", json_string(m->key_id));
		json_object_set_new(o, "iv", json_string(iv));
	}
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!s) {
		cp_err_set(err, CP_E_NOMEM, "out of memory");
		return NULL;
	}
	*len = strlen(s);
	return s;
}

static int hex64(const char *s)
{
	if (!s || strlen(s) != 64)
		return 0;
	for (int i = 0; i < 64; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

static int count(json_t *o, const char *name, uint64_t *out)
{
	json_t *v = json_object_get(o, name);
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -1;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

int store_manifest_parse(const char *text, size_t len, const char *dir,
                         struct store_manifest *m, struct cp_err *err)
{
	memset(m, 0, sizeof *m);
	if (len > STORE_MANIFEST_MAX)
		return cp_err_set(err, CP_E_PARSE, "snapshot manifest over %d bytes", STORE_MANIFEST_MAX);
	if (cp_json_text_depth(text, len, 4) > 4)
		return cp_err_set(err, CP_E_PARSE, "snapshot manifest nested too deep");
	json_error_t je;
	json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(o)) {
		json_decref(o);
		return cp_err_set(err, CP_E_PARSE, "snapshot manifest is not a JSON object");
	}
	int rc = 0;
	json_t *v = json_object_get(o, "version");
	const char *archive = json_string_value(json_object_get(o, "archive"));
	const char *sha = json_string_value(json_object_get(o, "sha256"));
	const char *fp = json_string_value(json_object_get(o, "fingerprint"));
	uint64_t created = 0;
	if (!json_is_integer(v) || json_integer_value(v) != 1)
		rc = cp_err_set(err, CP_E_PARSE, "snapshot manifest: version is not 1");
	else if (!archive || !store_key_ok(archive) || strncmp(archive, dir, strlen(dir)) != 0 ||
	         strlen(archive) >= sizeof m->archive || strstr(archive, ".."))
		rc = cp_err_set(err, CP_E_PARSE, "snapshot manifest: archive is not of this conversation");
	else if (!hex64(sha))
		rc = cp_err_set(err, CP_E_PARSE, "snapshot manifest: sha256 is not 64 hex");
	else if (!hex64(fp))
		rc = cp_err_set(err, CP_E_PARSE, "snapshot manifest: fingerprint is not 64 hex");
	else if (count(o, "size", &m->size) || count(o, "files", &m->files) ||
	         count(o, "bytes", &m->bytes) || count(o, "created", &created))
		rc = cp_err_set(err, CP_E_PARSE, "snapshot manifest: a count is not a number");
	const char *kid = json_string_value(json_object_get(o, "keyId"));
	const char *iv = json_string_value(json_object_get(o, "iv"));
	if (!rc && (json_object_get(o, "keyId") || json_object_get(o, "iv"))) {
		int ok = kid && iv && strlen(kid) > 0 && strlen(kid) < sizeof m->key_id &&
		         strlen(iv) == 24;
		for (size_t i = 0; ok && kid[i]; i++)
			ok = (kid[i] >= 'a' && kid[i] <= 'z') || (kid[i] >= 'A' && kid[i] <= 'Z') ||
			     (kid[i] >= '0' && kid[i] <= '9') || kid[i] == '.' || kid[i] == '_' ||
			     kid[i] == '-';
		for (int i = 0; ok && i < 12; i++) {
			unsigned byte = 0;
			ok = sscanf(iv + 2 * i, "%2x", &byte) == 1 &&
			     ((iv[2 * i] >= '0' && iv[2 * i] <= '9') || (iv[2 * i] >= 'a' && iv[2 * i] <= 'f')) &&
			     ((iv[2 * i + 1] >= '0' && iv[2 * i + 1] <= '9') ||
			      (iv[2 * i + 1] >= 'a' && iv[2 * i + 1] <= 'f'));
			m->iv[i] = (unsigned char)byte;
		}
		if (!ok)
			rc = cp_err_set(err, CP_E_PARSE, "snapshot manifest: keyId or iv malformed");
		else
			snprintf(m->key_id, sizeof m->key_id, "%s", kid);
	}
	if (!rc) {
		snprintf(m->archive, sizeof m->archive, "%s", archive);
		memcpy(m->sha256, sha, 65);
		memcpy(m->fingerprint, fp, 65);
		m->created = (int64_t)created;
	}
	json_decref(o);
	return rc;
}
