/* snap_archive.c - a workspace into a tar.zst archive, and its fingerprint
 * (snap_archive.h). */
#include "store/snap_archive.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>

#include "base/buf.h"
#include "base/hex.h"

#define DEPTH_MAX 64
#define CHUNK (256 * 1024)

struct packer {
	struct archive *a;           /* NULL: fingerprint only */
	store_sink_write_fn out;     /* where the archive goes */
	void *out_ud;
	EVP_MD_CTX *whole, *part, *fp;
	uint64_t part_size, written, part_left;
	char (*part_sha)[65];
	size_t nparts, cap;
	uint64_t files, bytes, max_bytes;
	char *chunk;
	EVP_CIPHER_CTX *enc;         /* NULL: plain */
	unsigned char *ebuf;
	struct cp_err *err;
	int rc;
};

static int end_part(struct packer *p)
{
	if (!p->part_size) /* no part hashes asked for */
		return 0;
	unsigned char md[32];
	if (!EVP_DigestFinal_ex(p->part, md, NULL))
		return -1;
	void *grown = cp_array_grow(p->part_sha, &p->cap, p->nparts + 1, 65, NULL);
	if (!grown)
		return -1;
	p->part_sha = grown;
	cp_hex_encode(md, sizeof md, p->part_sha[p->nparts++]);
	p->part_left = p->part_size;
	return EVP_DigestInit_ex(p->part, EVP_sha256(), NULL) ? 0 : -1;
}

/* What goes to the file: written, hashed whole and in parts. */
static int emit(struct packer *p, struct archive *a, const char *b, size_t len)
{
	if (p->out(p->out_ud, b, len)) {
		if (a)
			archive_set_error(a, errno ? errno : EIO, "archive write failed");
		return -1;
	}
	EVP_DigestUpdate(p->whole, b, len);
	size_t off = 0;
	while (p->part_size && off < len) {
		size_t n = len - off < p->part_left ? len - off : (size_t)p->part_left;
		EVP_DigestUpdate(p->part, b + off, n);
		off += n;
		p->part_left -= n;
		if (p->part_left == 0 && end_part(p)) {
			if (a)
				archive_set_error(a, ENOMEM, "out of memory");
			return -1;
		}
	}
	p->written += len;
	return 0;
}

#define EBUF (2u << 20)

static la_ssize_t on_write(struct archive *a, void *ud, const void *buf, size_t len)
{
	struct packer *p = ud;
	const char *b = buf;
	if (!p->enc)
		return emit(p, a, b, len) ? -1 : (la_ssize_t)len;
	for (size_t off = 0; off < len;) {
		int n = (int)(len - off < EBUF ? len - off : EBUF), outl = 0;
		if (!EVP_EncryptUpdate(p->enc, p->ebuf, &outl, (const unsigned char *)b + off, n) ||
		    emit(p, a, (const char *)p->ebuf, (size_t)outl)) {
			archive_set_error(a, EIO, "archive encryption failed");
			return -1;
		}
		off += (size_t)n;
	}
	return (la_ssize_t)len;
}

static int fail_archive(struct packer *p)
{
	return cp_err_set(p->err, CP_E_INTERNAL, "snapshot archive: %s",
	                  archive_error_string(p->a) ? archive_error_string(p->a) : "failed");
}

static int cmp_names(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* The names in @dfd, sorted (new array of new strings). */
static int list_dir(int dfd, char ***out, size_t *n, struct cp_err *err)
{
	int dup_fd = dup(dfd);
	DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		return cp_err_errno(err, CP_E_IO, errno, "snapshot: cannot read a folder");
	}
	char **v = NULL;
	size_t cap = 0, k = 0;
	struct dirent *de;
	int rc = 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		void *g = cp_array_grow(v, &cap, k + 1, sizeof *v, err);
		if (!g) {
			rc = CP_E_NOMEM;
			break;
		}
		v = g;
		if (!(v[k] = strdup(de->d_name))) {
			rc = cp_err_set(err, CP_E_NOMEM, "out of memory");
			break;
		}
		k++;
	}
	closedir(d);
	if (rc) {
		for (size_t i = 0; i < k; i++)
			free(v[i]);
		free(v);
		return rc;
	}
	if (k)
		qsort(v, k, sizeof *v, cmp_names);
	*out = v;
	*n = k;
	return 0;
}

static int add_file(struct packer *p, int dfd, const char *name, struct archive_entry *e,
                    uint64_t size)
{
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return cp_err_errno(p->err, CP_E_IO, errno, "snapshot: cannot open a file");
	if (archive_write_header(p->a, e) != ARCHIVE_OK) {
		close(fd);
		return fail_archive(p);
	}
	uint64_t left = size;
	while (left) {
		size_t want = left < CHUNK ? (size_t)left : CHUNK;
		ssize_t k = read(fd, p->chunk, want);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			close(fd);
			return cp_err_errno(p->err, CP_E_IO, errno, "snapshot: cannot read a file");
		}
		if (k == 0) { /* it shrank while we read: the header said more */
			memset(p->chunk, 0, want);
			k = (ssize_t)want;
		}
		if (archive_write_data(p->a, p->chunk, (size_t)k) < 0) {
			close(fd);
			return fail_archive(p);
		}
		left -= (uint64_t)k;
	}
	close(fd);
	return 0;
}

static int walk(struct packer *p, int dfd, const char *rel, int depth)
{
	if (depth > DEPTH_MAX)
		return cp_err_set(p->err, CP_E_TOO_BIG, "snapshot: folders nested over %d deep",
		                  DEPTH_MAX);
	char **names = NULL;
	size_t n = 0;
	int rc = list_dir(dfd, &names, &n, p->err);
	if (rc)
		return rc;
	struct archive_entry *e = archive_entry_new();
	char path[4096], target[4096];
	for (size_t i = 0; i < n && !rc; i++) {
		struct stat st;
		if (fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW))
			continue; /* gone meanwhile */
		int len = snprintf(path, sizeof path, "%s%s%s", rel, *rel ? "/" : "", names[i]);
		if (len < 0 || (size_t)len >= sizeof path) {
			rc = cp_err_set(p->err, CP_E_TOO_BIG, "snapshot: a path is over 4095 bytes");
			break;
		}
		target[0] = '\0';
		if (S_ISLNK(st.st_mode)) {
			ssize_t k = readlinkat(dfd, names[i], target, sizeof target - 1);
			if (k < 0)
				continue;
			target[k] = '\0';
		} else if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
			continue; /* sockets, FIFOs, devices: not a workspace's files */
		}
		uint64_t size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
		unsigned mode = (unsigned)(st.st_mode & 07777);
		EVP_DigestUpdate(p->fp, path, (size_t)len + 1);
		char meta[160];
		int ml = snprintf(meta, sizeof meta, "%o %llu %lld.%09ld", (unsigned)st.st_mode,
		                  (unsigned long long)size, (long long)st.st_mtim.tv_sec,
		                  st.st_mtim.tv_nsec);
		EVP_DigestUpdate(p->fp, meta, (size_t)ml + 1);
		EVP_DigestUpdate(p->fp, target, strlen(target) + 1);
		p->files++;
		if (S_ISREG(st.st_mode)) {
			p->bytes += size;
			if (p->bytes > p->max_bytes) {
				rc = cp_err_set(p->err, CP_E_TOO_BIG,
				                "workspace over the snapshot ceiling of %llu bytes",
				                (unsigned long long)p->max_bytes);
				break;
			}
		}
		if (p->a) {
			archive_entry_clear(e);
			archive_entry_set_pathname(e, path);
			archive_entry_set_perm(e, (mode_t)mode);
			archive_entry_set_mtime(e, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
			if (S_ISREG(st.st_mode)) {
				archive_entry_set_filetype(e, AE_IFREG);
				archive_entry_set_size(e, (la_int64_t)size);
				rc = add_file(p, dfd, names[i], e, size);
			} else if (S_ISLNK(st.st_mode)) {
				archive_entry_set_filetype(e, AE_IFLNK);
				archive_entry_set_symlink(e, target);
				if (archive_write_header(p->a, e) != ARCHIVE_OK)
					rc = fail_archive(p);
			} else {
				archive_entry_set_filetype(e, AE_IFDIR);
				if (archive_write_header(p->a, e) != ARCHIVE_OK)
					rc = fail_archive(p);
			}
		}
		if (!rc && S_ISDIR(st.st_mode)) {
			int sub = openat(dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0) {
				rc = walk(p, sub, path, depth + 1);
				close(sub);
			}
		}
	}
	archive_entry_free(e);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

static int run(const char *dir, struct packer *p, char fp_out[65])
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return cp_err_errno(p->err, CP_E_IO, errno, "snapshot: workspace");
	int rc = walk(p, dfd, "", 0);
	close(dfd);
	unsigned char md[32];
	if (!rc && EVP_DigestFinal_ex(p->fp, md, NULL))
		cp_hex_encode(md, sizeof md, fp_out);
	return rc;
}

int store_archive_fingerprint(const char *dir, char out[65], struct cp_err *err)
{
	struct packer p = { .err = err, .max_bytes = UINT64_MAX };
	p.fp = EVP_MD_CTX_new();
	if (!p.fp || !EVP_DigestInit_ex(p.fp, EVP_sha256(), NULL)) {
		EVP_MD_CTX_free(p.fp);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	int rc = run(dir, &p, out);
	EVP_MD_CTX_free(p.fp);
	return rc;
}

static int fd_write(void *ud, const void *buf, size_t len)
{
	int fd = *(int *)ud;
	const char *b = buf;
	size_t done = 0;
	while (done < len) {
		ssize_t k = write(fd, b + done, len - done);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			if (k == 0)
				errno = EIO;
			return -1;
		}
		done += (size_t)k;
	}
	return 0;
}

/* @plain: a tar as it is (what a sandbox's archive_write takes), else
 * pax + zstd, encrypted with @enc when given (a snapshot). */
static int pack_any(const char *dir, store_sink_write_fn write_fn, void *ud,
                    uint64_t max_bytes, uint64_t part_size, const struct store_crypt *enc,
                    int plain, struct store_pack *out, struct cp_err *err)
{
	memset(out, 0, sizeof *out);
	struct packer p = { .out = write_fn, .out_ud = ud, .err = err, .max_bytes = max_bytes,
	                    .part_size = part_size };
	p.part_left = p.part_size;
	p.whole = EVP_MD_CTX_new();
	p.part = EVP_MD_CTX_new();
	p.fp = EVP_MD_CTX_new();
	p.chunk = malloc(CHUNK);
	p.a = archive_write_new();
	int rc = 0;
	if (enc) {
		p.enc = EVP_CIPHER_CTX_new();
		p.ebuf = malloc(EBUF + 32);
		int al = (int)strlen(enc->aad), ol = 0;
		if (!p.enc || !p.ebuf ||
		    !EVP_EncryptInit_ex(p.enc, EVP_aes_256_gcm(), NULL, enc->key->key, enc->iv) ||
		    !EVP_EncryptUpdate(p.enc, NULL, &ol, (const unsigned char *)enc->aad, al))
			rc = cp_err_set(err, CP_E_INTERNAL, "snapshot encryption could not start");
	}
	if (!p.whole || !p.part || !p.fp || !p.chunk || !p.a ||
	    !EVP_DigestInit_ex(p.whole, EVP_sha256(), NULL) ||
	    !EVP_DigestInit_ex(p.part, EVP_sha256(), NULL) ||
	    !EVP_DigestInit_ex(p.fp, EVP_sha256(), NULL))
		rc = cp_err_set(err, CP_E_NOMEM, "out of memory");
	/* zstd's fastest level: a snapshot is on its way to a store, where the
	 * link, not the ratio, sets the pace; big blocks, few writes. */
	if (!rc && plain && (archive_write_set_format_pax_restricted(p.a) != ARCHIVE_OK ||
	                     archive_write_set_bytes_in_last_block(p.a, 1) != ARCHIVE_OK ||
	                     archive_write_open2(p.a, &p, NULL, on_write, NULL, NULL) != ARCHIVE_OK))
		rc = fail_archive(&p);
	if (!rc && !plain &&
	    (archive_write_add_filter_zstd(p.a) != ARCHIVE_OK ||
	            archive_write_set_filter_option(p.a, "zstd", "compression-level", "1") !=
	                    ARCHIVE_OK ||
	            archive_write_set_format_pax(p.a) != ARCHIVE_OK ||
	            archive_write_set_bytes_per_block(p.a, 1 << 20) != ARCHIVE_OK ||
	            archive_write_set_bytes_in_last_block(p.a, 1) != ARCHIVE_OK ||
	            archive_write_open2(p.a, &p, NULL, on_write, NULL, NULL) != ARCHIVE_OK))
		rc = fail_archive(&p);
	if (!rc)
		rc = run(dir, &p, out->fingerprint);
	if (p.a) {
		if (archive_write_close(p.a) != ARCHIVE_OK && !rc)
			rc = fail_archive(&p);
		archive_write_free(p.a);
	}
	if (!rc && p.enc) { /* GCM's tag after the ciphertext */
		unsigned char tag[16];
		int ol = 0;
		if (!EVP_EncryptFinal_ex(p.enc, p.ebuf, &ol) ||
		    !EVP_CIPHER_CTX_ctrl(p.enc, EVP_CTRL_GCM_GET_TAG, 16, tag) ||
		    emit(&p, NULL, (const char *)tag, 16))
			rc = cp_err_set(err, CP_E_INTERNAL, "snapshot encryption failed");
	}
	EVP_CIPHER_CTX_free(p.enc);
	free(p.ebuf);
	unsigned char md[32];
	if (!rc && p.part_size && (p.part_left != p.part_size || p.nparts == 0) && end_part(&p))
		rc = cp_err_set(err, CP_E_NOMEM, "out of memory");
	if (!rc && EVP_DigestFinal_ex(p.whole, md, NULL))
		cp_hex_encode(md, sizeof md, out->sha256);
	EVP_MD_CTX_free(p.whole);
	EVP_MD_CTX_free(p.part);
	EVP_MD_CTX_free(p.fp);
	free(p.chunk);
	if (rc) {
		free(p.part_sha);
		return rc;
	}
	out->size = p.written;
	out->files = p.files;
	out->bytes = p.bytes;
	out->part_sha = p.part_sha;
	out->nparts = p.nparts;
	return 0;
}

int store_archive_pack(const char *dir, int out_fd, uint64_t max_bytes, uint64_t part_size,
                       const struct store_crypt *enc, struct store_pack *out,
                       struct cp_err *err)
{
	return pack_any(dir, fd_write, &out_fd, max_bytes, part_size ? part_size : UINT64_MAX, enc, 0,
	                out, err);
}

int store_archive_pack_to(const char *dir, store_sink_write_fn write_fn, void *ud,
                          uint64_t max_bytes, uint64_t part_size,
                          const struct store_crypt *enc, struct store_pack *out,
                          struct cp_err *err)
{
	return pack_any(dir, write_fn, ud, max_bytes, part_size, enc, 0, out, err);
}

int store_archive_pack_tar(const char *dir, int out_fd, uint64_t max_bytes,
                           struct store_pack *out, struct cp_err *err)
{
	return pack_any(dir, fd_write, &out_fd, max_bytes, 0, NULL, 1, out, err);
}
