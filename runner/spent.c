#include "runner/spent.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <errno.h>

#include "base/buf.h"
#include "base/fileio.h"
#include "base/log.h"

struct spent_id {
	char jti[CODEPOD_SPENT_ID_LEN + 1];
	uint64_t exp_s;
};

struct codepod_spent {
	uv_loop_t *loop;
	int fd;                /* the file, O_APPEND; -1: in memory only */
	struct spent_id *ids;  /* unordered; linear search (a resume is rare) */
	size_t n, cap;
	char *path;
};

/* An asynchronous append: the request and its line, freed when done. */
struct spent_write {
	uv_fs_t req;
	char line[CODEPOD_SPENT_ID_LEN + 24];
};

static int valid_jti(const char *s, size_t n)
{
	if (n != CODEPOD_SPENT_ID_LEN)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

static int remember(struct codepod_spent *sp, const char *jti, uint64_t exp_s)
{
	if (sp->n == CODEPOD_SPENT_MAX) { /* forget the one that expires first */
		size_t first = 0;
		for (size_t i = 1; i < sp->n; i++)
			if (sp->ids[i].exp_s < sp->ids[first].exp_s)
				first = i;
		sp->ids[first] = sp->ids[--sp->n];
	}
	struct spent_id *g = cp_array_grow(sp->ids, &sp->cap, sp->n + 1, sizeof *g, NULL);
	if (!g)
		return CP_E_NOMEM;
	sp->ids = g;
	memcpy(g[sp->n].jti, jti, CODEPOD_SPENT_ID_LEN);
	g[sp->n].jti[CODEPOD_SPENT_ID_LEN] = '\0';
	g[sp->n].exp_s = exp_s;
	sp->n++;
	return 0;
}

/* The file's live lines, read and written back without the expired ones. */
static int load(struct codepod_spent *sp, uint64_t now_s, struct cp_err *err)
{
	size_t len = 0;
	struct cp_err rerr;
	char *text = cp_read_file(sp->path, 64u << 20, &len, &rerr);
	if (!text && rerr.code != CP_E_NOT_FOUND)
		return cp_err_set(err, CP_E_IO, "the record of resumed continuations: %s", rerr.msg);
	for (size_t i = 0; text && i < len;) {
		char *nl = memchr(text + i, '\n', len - i);
		size_t n = nl ? (size_t)(nl - (text + i)) : len - i;
		char *line = text + i;
		unsigned long long exp = 0;
		if (n > CODEPOD_SPENT_ID_LEN + 1 && line[CODEPOD_SPENT_ID_LEN] == ' ' &&
		    valid_jti(line, CODEPOD_SPENT_ID_LEN) &&
		    sscanf(line + CODEPOD_SPENT_ID_LEN + 1, "%llu", &exp) == 1 && exp > now_s &&
		    remember(sp, line, exp)) {
			free(text);
			return cp_err_set(err, CP_E_NOMEM, "out of memory");
		}
		i += n + 1;
	}
	free(text);
	struct cp_buf b;
	cp_buf_init(&b, SIZE_MAX);
	for (size_t i = 0; i < sp->n; i++)
		if (cp_buf_addf(&b, NULL, "%s %llu\n", sp->ids[i].jti,
		                (unsigned long long)sp->ids[i].exp_s)) {
			cp_buf_free(&b);
			return cp_err_set(err, CP_E_NOMEM, "out of memory");
		}
	/* Written whole to a new file, then renamed over the old one. */
	size_t plen = strlen(sp->path);
	char *tmp = malloc(plen + 5);
	if (!tmp) {
		cp_buf_free(&b);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	memcpy(tmp, sp->path, plen);
	memcpy(tmp + plen, ".new", 5);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int rc = fd < 0 || (b.len && write(fd, b.bytes, b.len) != (ssize_t)b.len) ||
	         fsync(fd) != 0;
	if (fd >= 0)
		close(fd);
	if (!rc)
		rc = rename(tmp, sp->path) != 0;
	if (rc)
		cp_err_errno(err, CP_E_IO, errno, "%s", tmp);
	free(tmp);
	cp_buf_free(&b);
	if (rc)
		return CP_E_IO;
	sp->fd = open(sp->path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (sp->fd < 0)
		return cp_err_errno(err, CP_E_IO, errno, "%s", sp->path);
	return 0;
}

int codepod_spent_open(uv_loop_t *loop, const char *path, uint64_t now_s,
                       struct codepod_spent **out, struct cp_err *err)
{
	struct codepod_spent *sp = calloc(1, sizeof *sp);
	if (!sp)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	sp->loop = loop;
	sp->fd = -1;
	if (path) {
		sp->path = strdup(path);
		int rc = sp->path ? load(sp, now_s, err) : cp_err_set(err, CP_E_NOMEM, "out of memory");
		if (rc) {
			codepod_spent_free(sp);
			return rc;
		}
	}
	*out = sp;
	return 0;
}

int codepod_spent_has(const struct codepod_spent *sp, const char *jti, uint64_t now_s)
{
	for (size_t i = 0; i < sp->n; i++)
		if (sp->ids[i].exp_s > now_s && strcmp(sp->ids[i].jti, jti) == 0)
			return 1;
	return 0;
}

static void on_written(uv_fs_t *req)
{
	struct spent_write *w = (struct spent_write *)req;
	if (req->result < 0)
		cp_log(CP_LOG_WARN, "continuation.record", "message",
		       json_string(uv_strerror((int)req->result)), NULL);
	uv_fs_req_cleanup(req);
	free(w);
}

int codepod_spent_add(struct codepod_spent *sp, const char *jti, uint64_t exp_s,
                      struct cp_err *err)
{
	if (!valid_jti(jti, strlen(jti)))
		return cp_err_set(err, CP_E_INTERNAL, "not a continuation id");
	if (remember(sp, jti, exp_s))
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	if (sp->fd < 0)
		return 0;
	struct spent_write *w = calloc(1, sizeof *w);
	if (!w)
		return 0; /* refused here still; a restart forgets it */
	int n = snprintf(w->line, sizeof w->line, "%s %llu\n", jti, (unsigned long long)exp_s);
	uv_buf_t buf = uv_buf_init(w->line, (unsigned)n);
	if (uv_fs_write(sp->loop, &w->req, sp->fd, &buf, 1, -1, on_written) < 0)
		free(w);
	return 0;
}

void codepod_spent_free(struct codepod_spent *sp)
{
	if (!sp)
		return;
	if (sp->fd >= 0)
		close(sp->fd);
	free(sp->ids);
	free(sp->path);
	free(sp);
}
