/* snap_unpack.c - a snapshot archive checked against its manifest, then
 * unpacked into an empty folder, never outside it (snap_archive.h). */
#include "store/snap_archive.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>

#include "base/buf.h"
#include "base/hex.h"

#define CHUNK (256 * 1024)
#define DEPTH_MAX 64

/* Splits @path into components in place; returns how many, or -1 for an
 * absolute path, an empty, "." or ".." component, or too many. */
static int split(char *path, char *comp[DEPTH_MAX + 1])
{
	if (path[0] == '/' || path[0] == '\0')
		return -1;
	size_t n = strlen(path);
	while (n > 1 && path[n - 1] == '/') /* a folder's "dir/" */
		path[--n] = '\0';
	int k = 0;
	char *save = NULL;
	for (char *c = strtok_r(path, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (!strcmp(c, ".") || !strcmp(c, "..") || k == DEPTH_MAX + 1)
			return -1;
		comp[k++] = c;
	}
	return k ? k : -1;
}

/* A link's target, read from the folder of an entry @depth folders down:
 * relative, and never above the top. */
static int target_inside(const char *target, int depth)
{
	if (!*target || target[0] == '/')
		return 0;
	char buf[4096];
	if (strlen(target) >= sizeof buf)
		return 0;
	memcpy(buf, target, strlen(target) + 1);
	char *save = NULL;
	int d = depth;
	for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (!strcmp(c, ".."))
			d--;
		else if (strcmp(c, "."))
			d++;
		if (d < 0)
			return 0;
	}
	return 1;
}

/* The folder holding the entry, opened from @root one component at a time,
 * never through a link; missing folders are made (0700, owned as asked). */
static int open_parent(int root, char **comp, int k, uid_t uid, gid_t gid, struct cp_err *err)
{
	int fd = dup(root);
	for (int i = 0; fd >= 0 && i < k - 1; i++) {
		int sub = openat(fd, comp[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0 && errno == ENOENT && mkdirat(fd, comp[i], 0700) == 0) {
			if (uid != (uid_t)-1)
				(void)fchownat(fd, comp[i], uid, gid, AT_SYMLINK_NOFOLLOW);
			sub = openat(fd, comp[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		int e = errno;
		close(fd);
		fd = sub;
		if (fd < 0) {
			return cp_err_set(err, e == ELOOP || e == ENOTDIR ? CP_E_DENIED : CP_E_IO,
			                  "snapshot archive: an entry's folder is %s",
			                  e == ELOOP || e == ENOTDIR ? "a link or not a folder"
			                                             : strerror(e));
		}
	}
	if (fd < 0)
		return cp_err_errno(err, CP_E_IO, errno, "snapshot: restore folder");
	return fd;
}

struct dir_fix {
	char *path;
	mode_t mode;
	struct timespec mtime;
};

static int write_file(struct archive *a, int fd, char *buf, struct cp_err *err)
{
	for (;;) {
		la_ssize_t k = archive_read_data(a, buf, CHUNK);
		if (k == 0)
			return 0;
		if (k < 0)
			return cp_err_set(err, CP_E_PARSE, "snapshot archive unreadable: %s",
			                  archive_error_string(a) ? archive_error_string(a) : "data");
		size_t done = 0;
		while (done < (size_t)k) {
			ssize_t w = write(fd, buf + done, (size_t)k - done);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return cp_err_errno(err, CP_E_IO, w < 0 ? errno : EIO,
				                    "snapshot: writing a restored file");
			done += (size_t)w;
		}
	}
}

static int one_entry(struct archive *a, struct archive_entry *e, int root, uid_t uid,
                     gid_t gid, char *buf, struct dir_fix **fixes, size_t *nfix,
                     size_t *capfix, struct cp_err *err)
{
	const char *name = archive_entry_pathname(e);
	if (!name || strlen(name) >= 4096)
		return cp_err_set(err, CP_E_DENIED, "snapshot archive: an entry without a usable path");
	if (archive_entry_hardlink(e))
		return cp_err_set(err, CP_E_DENIED, "snapshot archive holds a hard link");
	mode_t type = archive_entry_filetype(e);
	if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)
		return cp_err_set(err, CP_E_DENIED, "snapshot archive holds a %s",
		                  type == AE_IFCHR || type == AE_IFBLK ? "device node"
		                  : type == AE_IFIFO ? "FIFO" : "special file");
	char path[4096];
	memcpy(path, name, strlen(name) + 1);
	char *comp[DEPTH_MAX + 1];
	int k = split(path, comp);
	if (k < 0)
		return cp_err_set(err, CP_E_DENIED,
		                  "snapshot archive holds an absolute path or a '..' entry");
	const char *target = NULL;
	if (type == AE_IFLNK) {
		target = archive_entry_symlink(e);
		if (!target || !target_inside(target, k - 1))
			return cp_err_set(err, CP_E_DENIED,
			                  "snapshot archive holds a link out of the workspace");
	}
	int dfd = open_parent(root, comp, k, uid, gid, err);
	if (dfd < 0)
		return dfd;
	const char *leaf = comp[k - 1];
	/* No set-id bits on files; a folder keeps its set-group-id (what its
	 * new entries' group is, as a pod's fsGroup volume sets it). */
	mode_t perm = archive_entry_perm(e) & (type == AE_IFDIR ? 03777 : 01777);
	int rc = 0;
	if (type == AE_IFREG) {
		int fd = openat(dfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0) {
			rc = cp_err_set(err, errno == EEXIST ? CP_E_DENIED : CP_E_IO,
			                "snapshot archive: a file cannot be made (%s)", strerror(errno));
		} else {
			rc = write_file(a, fd, buf, err);
			struct timespec ts[2] = { { 0, UTIME_OMIT },
			                          { archive_entry_mtime(e), archive_entry_mtime_nsec(e) } };
			if (!rc && uid != (uid_t)-1 && fchown(fd, uid, gid))
				rc = cp_err_errno(err, CP_E_IO, errno, "snapshot: chown");
			if (!rc && (fchmod(fd, perm) || futimens(fd, ts)))
				rc = cp_err_errno(err, CP_E_IO, errno, "snapshot: file mode");
			close(fd);
		}
	} else if (type == AE_IFLNK) {
		if (symlinkat(target, dfd, leaf))
			rc = cp_err_set(err, errno == EEXIST ? CP_E_DENIED : CP_E_IO,
			                "snapshot archive: a link cannot be made (%s)", strerror(errno));
		else {
			if (uid != (uid_t)-1)
				(void)fchownat(dfd, leaf, uid, gid, AT_SYMLINK_NOFOLLOW);
			/* the link's own time too: a copy of a workspace made anew
			 * (a pod's, kube_snap.h) keeps its fingerprint */
			struct timespec ts[2] = { { 0, UTIME_OMIT },
			                          { archive_entry_mtime(e), archive_entry_mtime_nsec(e) } };
			(void)utimensat(dfd, leaf, ts, AT_SYMLINK_NOFOLLOW);
		}
	} else {
		struct stat st;
		if (mkdirat(dfd, leaf, 0700) && !(errno == EEXIST && !fstatat(dfd, leaf, &st,
		                                   AT_SYMLINK_NOFOLLOW) && S_ISDIR(st.st_mode)))
			rc = cp_err_set(err, errno == EEXIST ? CP_E_DENIED : CP_E_IO,
			                "snapshot archive: a folder cannot be made");
		if (!rc && uid != (uid_t)-1)
			(void)fchownat(dfd, leaf, uid, gid, AT_SYMLINK_NOFOLLOW);
		/* Its mode and time last: a read-only folder still gets its files. */
		struct dir_fix *g = rc ? NULL : cp_array_grow(*fixes, capfix, *nfix + 1, sizeof **fixes, err);
		if (!rc && !g)
			rc = CP_E_NOMEM;
		if (g) {
			*fixes = g;
			struct dir_fix *f = &g[(*nfix)++];
			f->path = strdup(name);
			f->mode = perm;
			f->mtime.tv_sec = archive_entry_mtime(e);
			f->mtime.tv_nsec = archive_entry_mtime_nsec(e);
			if (!f->path)
				rc = cp_err_set(err, CP_E_NOMEM, "out of memory");
		}
	}
	close(dfd);
	return rc;
}

/* The archive read once: hashed as libarchive reads it, so the check
 * against the manifest costs no pass of its own. */
struct hashed_in {
	int fd;                /* the archive's file, or -1: */
	store_source_fn src;   /* its bytes as they come */
	void *src_ud;
	char *buf;
	EVP_MD_CTX *md;
	uint64_t n;
	EVP_CIPHER_CTX *dec;   /* NULL: plain */
	uint64_t size;         /* the file's length: the tag is its last 16 bytes */
	unsigned char *pbuf;   /* plaintext given to libarchive */
	size_t pcap;
	unsigned char tag[16];
	int tag_n, authentic;
};

static la_ssize_t hashed_read(struct archive *a, void *ud, const void **out)
{
	struct hashed_in *h = ud;
	ssize_t k;
	const unsigned char *data = (const unsigned char *)h->buf;
	if (h->src) {
		const void *p = NULL;
		k = h->src(h->src_ud, &p);
		if (k < 0) {
			archive_set_error(a, EIO, "the archive's download failed");
			return -1;
		}
		data = p;
	} else {
		do
			k = read(h->fd, h->buf, CHUNK);
		while (k < 0 && errno == EINTR);
		if (k < 0) {
			archive_set_error(a, errno, "read failed");
			return -1;
		}
	}
	if (k)
		EVP_DigestUpdate(h->md, data, (size_t)k);
	uint64_t at = h->n;
	h->n += (uint64_t)k;
	if (!h->dec) {
		*out = data;
		return k;
	}
	/* [at, at+k): ciphertext up to size-16, the tag after. */
	uint64_t ct_end = h->size >= 16 ? h->size - 16 : 0;
	size_t ct = at >= ct_end ? 0 : (size_t)((uint64_t)k < ct_end - at ? (uint64_t)k : ct_end - at);
	for (size_t i = ct; i < (size_t)k && h->tag_n < 16; i++)
		h->tag[h->tag_n++] = data[i];
	int outl = 0;
	if (ct + 32 > h->pcap) { /* a download's pieces can be larger than ours */
		unsigned char *g = cp_array_grow(h->pbuf, &h->pcap, ct + 32, 1, NULL);
		if (!g) {
			archive_set_error(a, ENOMEM, "out of memory");
			return -1;
		}
		h->pbuf = g;
	}
	if (ct && !EVP_DecryptUpdate(h->dec, h->pbuf, &outl, data, (int)ct)) {
		archive_set_error(a, EIO, "decryption failed");
		return -1;
	}
	if (k == 0 && !h->authentic && h->tag_n == 16) {
		unsigned char fin[32];
		int fl = 0;
		h->authentic = EVP_CIPHER_CTX_ctrl(h->dec, EVP_CTRL_GCM_SET_TAG, 16, h->tag) &&
		               EVP_DecryptFinal_ex(h->dec, fin, &fl) > 0 ? 1 : -1;
	}
	*out = h->pbuf;
	if (outl == 0 && k > 0) { /* only tag bytes: read on */
		return hashed_read(a, ud, out);
	}
	return outl;
}

static int unpack(int fd, store_source_fn src, void *src_ud, const char *dir, uid_t uid,
                  gid_t gid, const char *sha256, const struct store_crypt *dec, uint64_t size,
                  uint64_t *files, struct cp_err *err);

int store_archive_unpack(int fd, const char *dir, uid_t uid, gid_t gid, const char *sha256,
                         const struct store_crypt *dec, uint64_t size, uint64_t *files,
                         struct cp_err *err)
{
	return unpack(fd, NULL, NULL, dir, uid, gid, sha256, dec, size, files, err);
}

int store_archive_unpack_from(store_source_fn src, void *ud, const char *dir, uid_t uid,
                              gid_t gid, const char *sha256, const struct store_crypt *dec,
                              uint64_t size, uint64_t *files, struct cp_err *err)
{
	return unpack(-1, src, ud, dir, uid, gid, sha256, dec, size, files, err);
}

static int unpack(int fd, store_source_fn src, void *src_ud, const char *dir, uid_t uid,
                  gid_t gid, const char *sha256, const struct store_crypt *dec, uint64_t size,
                  uint64_t *files, struct cp_err *err)
{
	*files = 0;
	int root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return cp_err_errno(err, CP_E_IO, errno, "snapshot: restore folder");
	struct archive *a = archive_read_new();
	char *buf = malloc(CHUNK);
	struct hashed_in in = { .fd = fd, .src = src, .src_ud = src_ud, .buf = malloc(CHUNK),
	                        .md = EVP_MD_CTX_new(), .size = size };
	struct dir_fix *fixes = NULL;
	size_t nfix = 0, capfix = 0;
	int rc = 0;
	if (!a || !buf || !in.buf || !in.md || !EVP_DigestInit_ex(in.md, EVP_sha256(), NULL))
		rc = cp_err_set(err, CP_E_NOMEM, "out of memory");
	if (!rc && dec) {
		in.dec = EVP_CIPHER_CTX_new();
		in.pbuf = malloc(CHUNK + 32);
		in.pcap = CHUNK + 32;
		int ol = 0;
		if (!in.dec || !in.pbuf ||
		    !EVP_DecryptInit_ex(in.dec, EVP_aes_256_gcm(), NULL, dec->key->key, dec->iv) ||
		    !EVP_DecryptUpdate(in.dec, NULL, &ol, (const unsigned char *)dec->aad,
		                       (int)strlen(dec->aad)))
			rc = cp_err_set(err, CP_E_INTERNAL, "snapshot decryption could not start");
	}
	if (!rc && fd >= 0 && lseek(fd, 0, SEEK_SET) < 0)
		rc = cp_err_errno(err, CP_E_IO, errno, "snapshot archive");
	if (!rc && (archive_read_support_filter_zstd(a) != ARCHIVE_OK ||
	            archive_read_support_format_tar(a) != ARCHIVE_OK ||
	            archive_read_open(a, &in, NULL, hashed_read, NULL) != ARCHIVE_OK))
		rc = cp_err_set(err, CP_E_PARSE, "snapshot archive unreadable: %s",
		                archive_error_string(a) ? archive_error_string(a) : "open");
	struct archive_entry *e;
	while (!rc) {
		int r = archive_read_next_header(a, &e);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
			rc = cp_err_set(err, CP_E_PARSE, "snapshot archive unreadable: %s",
			                archive_error_string(a) ? archive_error_string(a) : "header");
			break;
		}
		rc = one_entry(a, e, root, uid, gid, buf, &fixes, &nfix, &capfix, err);
		if (!rc)
			(*files)++;
	}
	/* The rest of the file (past the end of the archive, or past where a
	 * damaged one stopped reading) counts too: a damaged archive is told
	 * as what it is, one that does not match its manifest. */
	const void *rest;
	while ((!rc || sha256) && in.buf && hashed_read(a, &in, &rest) > 0)
		;
	unsigned char md[32];
	char hex[65];
	/* Garbage out of a wrong key is told as that, not as a bad archive. */
	if (in.dec && (!rc || rc == CP_E_PARSE || rc == CP_E_DENIED) && in.authentic != 1) {
		const void *last;
		if (in.authentic == 0)
			(void)hashed_read(a, &in, &last); /* the EOF read checks the tag */
		if (in.authentic != 1)
			rc = cp_err_set(err, CP_E_PARSE, "snapshot archive does not decrypt with key %s",
			                dec->key->id);
	}
	if (sha256 && in.md && (!rc || rc == CP_E_PARSE || rc == CP_E_DENIED) &&
	    EVP_DigestFinal_ex(in.md, md, NULL)) {
		cp_hex_encode(md, sizeof md, hex);
		if (strcmp(hex, sha256) != 0)
			rc = cp_err_set(err, CP_E_PARSE,
			                "snapshot archive does not match its manifest's SHA-256");
	}
	/* A truncated or longer archive is told as that (the size is checked
	 * once everything was read: the archive may still be arriving). */
	if (in.n != size && (!rc || rc == CP_E_PARSE || rc == CP_E_DENIED))
		rc = cp_err_set(err, CP_E_PARSE, "snapshot archive is %llu bytes, its manifest says %llu",
		                (unsigned long long)in.n, (unsigned long long)size);
	/* Deepest first, so a folder's own time is not moved by its children. */
	for (size_t i = nfix; i-- > 0;) {
		if (!rc) {
			char path[4096], *comp[DEPTH_MAX + 1];
			memcpy(path, fixes[i].path, strlen(fixes[i].path) + 1);
			int k = split(path, comp);
			int dfd = k > 0 ? open_parent(root, comp, k, (uid_t)-1, (gid_t)-1, NULL) : -1;
			if (dfd >= 0) {
				struct timespec ts[2] = { { 0, UTIME_OMIT }, fixes[i].mtime };
				(void)fchmodat(dfd, comp[k - 1], fixes[i].mode, 0);
				(void)utimensat(dfd, comp[k - 1], ts, AT_SYMLINK_NOFOLLOW);
				close(dfd);
			}
		}
		free(fixes[i].path);
	}
	free(fixes);
	if (a)
		archive_read_free(a);
	free(buf);
	free(in.buf);
	EVP_MD_CTX_free(in.md);
	EVP_CIPHER_CTX_free(in.dec);
	free(in.pbuf);
	close(root);
	return rc;
}
