/*
 * sandbox_uids.c - one host user per conversation (see sandbox_uids.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/buf.h"
#include "runner/local/sandbox_uids.h"

int local_uids_parse(const char *spec, uint32_t *first, uint32_t *count, struct cp_err *err)
{
	char *end;
	errno = 0;
	unsigned long long lo = strtoull(spec, &end, 10);
	if (errno || end == spec || *end != '-' || spec[0] == '-')
		return cp_err_set(err, CP_E_INVALID_REQUEST, "--sandbox-uids: give FIRST-LAST");
	const char *hi_s = end + 1;
	unsigned long long hi = strtoull(hi_s, &end, 10);
	if (errno || end == hi_s || *end || hi_s[0] == '-')
		return cp_err_set(err, CP_E_INVALID_REQUEST, "--sandbox-uids: give FIRST-LAST");
	/* 2^32-1 is (uid_t)-1, "no change" to setuid(2) */
	if (lo == 0 || hi < lo || hi >= UINT32_MAX)
		return cp_err_set(err, CP_E_INVALID_REQUEST,
		                  "--sandbox-uids: FIRST must be over 0 (root), LAST at least FIRST and "
		                  "below 4294967295");
	*first = (uint32_t)lo;
	*count = (uint32_t)(hi - lo + 1);
	return 0;
}

int local_uids_in_range(const struct local_uids *u, uid_t uid)
{
	return uid >= u->first && uid - u->first < u->count;
}

/* Index of the first element >= @uid. */
static size_t lower_bound(const struct local_uids *u, uint32_t uid)
{
	size_t lo = 0, hi = u->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (u->owned[mid] < uid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int owned(const struct local_uids *u, uint32_t uid)
{
	size_t i = lower_bound(u, uid);
	return i < u->n && u->owned[i] == uid;
}

static int add(struct local_uids *u, uint32_t uid)
{
	size_t i = lower_bound(u, uid);
	if (i < u->n && u->owned[i] == uid)
		return 0;
	uint32_t *p = cp_array_grow(u->owned, &u->cap, u->n + 1, sizeof *p, NULL);
	if (!p)
		return CP_E_NOMEM;
	u->owned = p;
	memmove(u->owned + i + 1, u->owned + i, (u->n - i) * sizeof *u->owned);
	u->owned[i] = uid;
	u->n++;
	return 0;
}

int local_uids_init(struct local_uids *u, uint32_t first, uint32_t count, const char *ws_root,
                 struct cp_err *err)
{
	memset(u, 0, sizeof *u);
	u->first = first;
	u->count = count;
	if (RAND_bytes(u->key, sizeof u->key) != 1)
		return cp_err_set(err, CP_E_INTERNAL, "no random bytes for the sandbox user hash");
	DIR *d = opendir(ws_root);
	if (!d)
		return cp_err_errno(err, CP_E_IO, errno, "workspaces folder %s", ws_root);
	int fd = dirfd(d);
	struct dirent *e;
	while ((e = readdir(d))) {
		struct stat st;
		if (e->d_name[0] == '.' || fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISDIR(st.st_mode) || !local_uids_in_range(u, st.st_uid))
			continue;
		if (add(u, (uint32_t)st.st_uid)) {
			closedir(d);
			local_uids_free(u);
			return cp_err_set(err, CP_E_NOMEM, "out of memory");
		}
	}
	closedir(d);
	return 0;
}

void local_uids_free(struct local_uids *u)
{
	free(u->owned);
	memset(u, 0, sizeof *u);
}

int local_uids_take(struct local_uids *u, const char *conversation, uid_t *out, struct cp_err *err)
{
	if (u->n >= u->count)
		return cp_err_set(err, CP_E_DENIED,
		                  "every sandbox user of --sandbox-uids owns a workspace: widen the range");
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	if (!HMAC(EVP_sha256(), u->key, (int)sizeof u->key, (const unsigned char *)conversation,
	          strlen(conversation), md, &mdlen) || mdlen < 4)
		return cp_err_set(err, CP_E_INTERNAL, "sha256 failed");
	uint32_t h = (uint32_t)md[0] << 24 | (uint32_t)md[1] << 16 | (uint32_t)md[2] << 8 | md[3];
	uint32_t slot = h % u->count;
	/* the range is not full (checked above): this ends */
	while (owned(u, u->first + slot))
		slot = slot + 1 == u->count ? 0 : slot + 1;
	if (add(u, u->first + slot))
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	*out = (uid_t)(u->first + slot);
	return 0;
}
