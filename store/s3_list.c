/* s3_list.c - ListObjectsV2 of a prefix, page after page (s3.h). */
#include "store/s3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/s3_int.h"
#include "store/s3_xml.h"

struct lister {
	struct store_s3 *s;
	char *prefix;
	store_list_fn each;
	store_done_fn done;
	void *ud;
	int stopped;
};

static int64_t parse_time(const char *t)
{
	struct tm tm = { 0 };
	int y, mo, d, h, mi, s;
	if (sscanf(t, "%4d-%2d-%2dT%2d:%2d:%2d", &y, &mo, &d, &h, &mi, &s) != 6)
		return -1;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = s;
	return (int64_t)timegm(&tm);
}

static int one(void *ud, const char *inner, size_t ilen)
{
	struct lister *l = ud;
	char key[1100], size[32], mod[64];
	if (!store_xml_first(inner, ilen, "Key", key, sizeof key) || !store_key_ok(key))
		return 0; /* a key we could not name again is not ours */
	store_xml_first(inner, ilen, "Size", size, sizeof size);
	store_xml_first(inner, ilen, "LastModified", mod, sizeof mod);
	if (l->each(l->ud, key, strtoull(size, NULL, 10), parse_time(mod))) {
		l->stopped = 1;
		return 1;
	}
	return 0;
}

static int page(struct lister *l, const char *token, struct cp_err *err);

static void end(struct lister *l, const struct store_result *r)
{
	l->done(l->ud, r);
	free(l->prefix);
	free(l);
}

static void paged(void *ud, const struct store_result *res)
{
	struct lister *l = ud;
	if (res->rc) {
		end(l, res);
		return;
	}
	store_xml_blocks(res->body, res->body_len, "Contents", one, l);
	char trunc[16], token[1100];
	if (!l->stopped && store_xml_first(res->body, res->body_len, "IsTruncated", trunc, sizeof trunc) &&
	    !strcmp(trunc, "true") &&
	    store_xml_first(res->body, res->body_len, "NextContinuationToken", token, sizeof token)) {
		struct cp_err e = { 0 };
		if (page(l, token, &e) == 0)
			return;
		struct store_result r = { .rc = e.code, .mtime = -1, .err = &e };
		end(l, &r);
		return;
	}
	struct store_result r = *res;
	r.body = NULL;
	r.body_len = 0;
	end(l, &r);
}

static int page(struct lister *l, const char *token, struct cp_err *err)
{
	struct cp_buf q;
	cp_buf_init(&q, 8192);
	int rc = 0;
	if (token) {
		rc = cp_buf_addf(&q, err, "continuation-token=");
		if (!rc)
			rc = store_query_escape(&q, token, err);
		if (!rc)
			rc = cp_buf_addf(&q, err, "&");
	}
	if (!rc)
		rc = cp_buf_addf(&q, err, "list-type=2&prefix=");
	if (!rc)
		rc = store_query_escape(&q, l->prefix, err);
	struct store_req *r = rc ? NULL : store_req_new(l->s, "GET", NULL, cp_buf_ptr(&q),
	                                                STORE_BODY_MAX * 4, err);
	cp_buf_free(&q);
	if (!r)
		return rc ? rc : (err ? err->code : CP_E_NOMEM);
	rc = store_req_start(r, paged, l, err);
	if (rc)
		store_req_free(r);
	return rc;
}

int store_s3_list(struct store_s3 *s, const char *prefix, store_list_fn each,
                  store_done_fn done, void *ud, struct cp_err *err)
{
	struct lister *l = calloc(1, sizeof *l);
	if (!l || !(l->prefix = strdup(prefix))) {
		free(l);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	l->s = s;
	l->each = each;
	l->done = done;
	l->ud = ud;
	int rc = page(l, NULL, err);
	if (rc) {
		free(l->prefix);
		free(l);
	}
	return rc;
}
