/*
 * host_root.c - which of the host's top-level entries the local sandbox's
 * root gets, and how (host_root.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runner/local/host_root.h"

/* The sandbox makes these itself: its own /proc, /dev and /tmp, and
 * /workspace for the conversation's folder. */
static int made_inside(const char *name)
{
	static const char *const own[] = { "proc", "dev", "tmp", "workspace" };
	for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
		if (strcmp(name, own[i]) == 0)
			return 1;
	return 0;
}

static const char *keep(struct local_root *r, const char *prefix, const char *s, size_t len)
{
	size_t plen = strlen(prefix);
	if (r->used + plen + len + 1 > sizeof r->strings)
		return NULL;
	char *out = r->strings + r->used;
	memcpy(out, prefix, plen);
	memcpy(out + plen, s, len);
	out[plen + len] = '\0';
	r->used += plen + len + 1;
	return out;
}

int local_root_scan(struct local_root *r, const char *top, struct cp_err *err)
{
	r->n = 0;
	r->used = 0;
	int dfd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		int e = errno;
		if (dfd >= 0)
			close(dfd);
		return cp_err_errno(err, CP_E_IO, e, "reading the host's root folder for the sandbox");
	}
	int rc = 0;
	for (struct dirent *de; rc == 0 && (de = readdir(d));) {
		const char *name = de->d_name;
		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || made_inside(name))
			continue;
		struct stat st;
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW))
			continue; /* gone since readdir: nothing to put back */
		struct local_root_entry *e = r->n < LOCAL_ROOT_MAX ? &r->e[r->n] : NULL;
		if (!S_ISLNK(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
			continue;
		if (!e || !(e->path = keep(r, "/", name, strlen(name)))) {
			rc = cp_err_set(err, CP_E_INTERNAL,
			                "the host's root folder has more entries than the sandbox has room for");
			break;
		}
		e->kind = LOCAL_ROOT_BIND;
		e->target = NULL;
		if (S_ISLNK(st.st_mode)) {
			char target[4096];
			ssize_t len = readlinkat(dfd, name, target, sizeof target);
			/* gone, or not a path anything could follow; a bare "--" would
			 * end bubblewrap's options where codepod splits them off
			 * (local_backend.c) */
			if (len <= 0 || (size_t)len >= sizeof target || (len == 2 && !memcmp(target, "--", 2)))
				continue;
			e->kind = LOCAL_ROOT_SYMLINK;
			if (!(e->target = keep(r, "", target, (size_t)len))) {
				rc = cp_err_set(err, CP_E_INTERNAL,
				                "the host's root folder has more entries than the sandbox has "
				                "room for");
				break;
			}
		}
		r->n++;
	}
	closedir(d);
	return rc;
}
