/* fileio.c - whole-file reads (see fileio.h). */
#include "base/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"

char *cp_read_fd(int fd, const char *name, size_t max, size_t *len, struct cp_err *err)
{
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		cp_err_set(err, CP_E_IO, "%s: is a directory", name);
		return NULL;
	}
	struct cp_buf b;
	cp_buf_init(&b, max);
	for (;;) {
		char chunk[16384];
		ssize_t got = read(fd, chunk, sizeof chunk);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			cp_err_errno(err, CP_E_IO, errno, "%s", name);
			goto fail;
		}
		if (got == 0)
			break;
		int rc = cp_buf_add(&b, chunk, (size_t)got, NULL);
		if (rc == CP_E_TOO_BIG) {
			cp_err_set(err, rc, "%s: larger than %zu bytes", name, max);
			goto fail;
		}
		if (rc) {
			cp_err_set(err, rc, "%s: out of memory", name);
			goto fail;
		}
	}
	size_t n = 0;
	char *out = cp_buf_take(&b, &n, NULL);
	if (!out) {
		cp_err_set(err, CP_E_NOMEM, "%s: out of memory", name);
		return NULL;
	}
	*len = n;
	return out;
fail:
	cp_buf_free(&b);
	return NULL;
}

char *cp_read_file(const char *path, size_t max, size_t *len, struct cp_err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		cp_err_errno(err, e == ENOENT ? CP_E_NOT_FOUND : CP_E_IO, e, "%s", path);
		return NULL;
	}
	char *out = cp_read_fd(fd, path, max, len, err);
	close(fd);
	return out;
}

ssize_t cp_read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, cap - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}
