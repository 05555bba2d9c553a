/*
 * workspace_disk.c - loop devices, mounts, the sweep of dead codepods'
 * mounts, tree chores and the start-up probe, all blocking
 * (workspace_disk.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <linux/loop.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/log.h"
#include "runner/local/workspace.h"
#include "runner/local/workspace_disk.h"

#define MIB (1ull << 20)
#define MOUNT_FLAGS (MS_NOSUID | MS_NODEV | MS_NOATIME)
/* noauto_da_alloc: a file replaced by rename (every write through the
 * file API) is not pushed to disk at the rename; ext4's default allocated
 * and flushed a 64 MiB upload's blocks there, a sixth of its time. Given
 * up: after a crash of the host (not of codepod: the page cache outlives
 * that), a file replaced just before may come back empty, as any file
 * written without fsync. codepod never syncs a workspace; a snapshot is
 * what outlives the machine. */
#define MOUNT_DATA "discard,noauto_da_alloc,errors=remount-ro"
#define PATH_CAP LOCAL_DISK_PATH_CAP
#define DEV_CAP LOCAL_DISK_DEV_CAP

extern char **environ;

/* ---- mounts and loop devices ------------------------------------------------------ */

int local_disk_is_mounted(const char *path)
{
	char parent[PATH_CAP];
	struct stat a, b;
	if (snprintf(parent, sizeof parent, "%s/..", path) >= (int)sizeof parent)
		return 0;
	return lstat(path, &a) == 0 && stat(parent, &b) == 0 &&
	       (a.st_dev != b.st_dev || a.st_ino == b.st_ino);
}

static unsigned long own_pidns(void)
{
	struct stat st;
	return stat("/proc/self/ns/pid", &st) == 0 ? (unsigned long)st.st_ino : 0;
}

/* The loop device's name: the codepod that made it (as cgroup.h names its folder). */
static void loop_tag(char out[LO_NAME_SIZE])
{
	snprintf(out, LO_NAME_SIZE, "codepod-%lu-%ld", own_pidns(), (long)getpid());
}

/* 1 when @dev is a loop device named by a codepod of this PID namespace that is gone. */
static int loop_of_dead_codepod(const char *dev)
{
	int fd = open(dev, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	struct loop_info64 info;
	memset(&info, 0, sizeof info);
	int rc = ioctl(fd, LOOP_GET_STATUS64, &info);
	close(fd);
	if (rc)
		return 0;
	unsigned long ns = 0;
	long pid = 0;
	char tail;
	info.lo_file_name[LO_NAME_SIZE - 1] = '\0';
	if (sscanf((const char *)info.lo_file_name, "codepod-%lu-%ld%c", &ns, &pid, &tail) != 2)
		return 0;
	return ns == own_pidns() && pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

int local_disk_loop_holding(const char *img, char dev[DEV_CAP])
{
	DIR *d = opendir("/sys/block");
	if (!d)
		return 0;
	struct dirent *de;
	int found = 0;
	size_t il = strlen(img);
	while (!found && (de = readdir(d))) {
		if (strncmp(de->d_name, "loop", 4) != 0)
			continue;
		char p[300], back[PATH_CAP];
		snprintf(p, sizeof p, "/sys/block/%s/loop/backing_file", de->d_name);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, back, sizeof back - 1);
		close(fd);
		if (n <= 0)
			continue;
		back[n] = '\0';
		if ((size_t)n >= il && !strncmp(back, img, il) && (back[il] == '\n' || back[il] == '\0') &&
		    strlen(de->d_name) < 24) {
			snprintf(dev, DEV_CAP, "/dev/%.24s", de->d_name);
			found = 1;
		}
	}
	closedir(d);
	return found;
}

/* @img on a new loop device, into @dev; its descriptor (kept open until the
 * mount holds the device: closing it last detaches it), or -1 with errno. */
static int loop_attach(const char *img, char dev[DEV_CAP], struct cp_err *err)
{
	int ifd = open(img, O_RDWR | O_CLOEXEC);
	if (ifd < 0)
		return cp_err_errno(err, CP_E_IO, errno, "opening the workspace image"), -1;
	int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0) {
		cp_err_errno(err, CP_E_IO, errno, "/dev/loop-control");
		close(ifd);
		return -1;
	}
	int lfd = -1;
	for (int tries = 0; lfd < 0 && tries < 64; tries++) {
		int nr = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (nr < 0) {
			cp_err_errno(err, CP_E_IO, errno, "no free loop device");
			break;
		}
		snprintf(dev, DEV_CAP, "/dev/loop%d", nr);
		int fd = open(dev, O_RDWR | O_CLOEXEC);
		if (fd < 0) {
			cp_err_errno(err, CP_E_IO, errno, "opening %s", dev);
			break;
		}
		struct loop_config cfg;
		memset(&cfg, 0, sizeof cfg);
		cfg.fd = (__u32)ifd;
		cfg.block_size = 4096;
		cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO;
		loop_tag((char *)cfg.info.lo_file_name);
		int rc = ioctl(fd, LOOP_CONFIGURE, &cfg);
		if (rc && errno == EINVAL) { /* no direct I/O on the file's filesystem */
			cfg.block_size = 0;
			cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
			rc = ioctl(fd, LOOP_CONFIGURE, &cfg);
		}
		if (rc && (errno == ENOTTY || errno == EINVAL)) { /* before Linux 5.8 */
			rc = ioctl(fd, LOOP_SET_FD, ifd);
			if (rc == 0 && ioctl(fd, LOOP_SET_STATUS64, &cfg.info) != 0) {
				int e = errno;
				ioctl(fd, LOOP_CLR_FD, 0);
				errno = e;
				rc = -1;
			}
		}
		if (rc == 0) {
			lfd = fd;
			break;
		}
		int e = errno;
		close(fd);
		if (e != EBUSY) { /* EBUSY: another took it first */
			cp_err_errno(err, CP_E_IO, e, "attaching the workspace image to %s", dev);
			break;
		}
	}
	if (lfd < 0 && !err->code)
		cp_err_set(err, CP_E_IO, "no free loop device");
	close(ctl);
	close(ifd);
	return lfd;
}

int local_disk_mount(const char *img, const char *ws, char dev[DEV_CAP], struct cp_err *err)
{
	for (int tries = 0; tries < 4; tries++) {
		if (local_disk_loop_holding(img, dev)) {
			if (mount(dev, ws, "ext4", MOUNT_FLAGS, MOUNT_DATA) == 0)
				return 0;
			if (errno != ENXIO && errno != ENODEV && errno != ENOENT)
				return cp_err_errno(err, CP_E_IO, errno, "mounting the workspace");
			continue; /* it detached meanwhile */
		}
		int lfd = loop_attach(img, dev, err);
		if (lfd < 0)
			return err->code;
		int rc = mount(dev, ws, "ext4", MOUNT_FLAGS, MOUNT_DATA);
		int e = errno;
		close(lfd); /* the mount holds it now; without one it detaches */
		if (rc)
			return cp_err_errno(err, CP_E_IO, e, "mounting the workspace");
		/* the filesystem is new here: shared, so copies other sandboxes'
		 * namespaces took follow its unmount (the parent is shared) */
		return 0;
	}
	return cp_err_set(err, CP_E_IO, "mounting the workspace: its loop device kept going away");
}

int local_disk_unmount(const char *ws, int lazy)
{
	if (umount2(ws, UMOUNT_NOFOLLOW) == 0 || errno == EINVAL)
		return 0;
	if (errno == EBUSY && lazy)
		return umount2(ws, MNT_DETACH | UMOUNT_NOFOLLOW) == 0 || errno == EINVAL ? 0 : -1;
	return -1;
}

/* ---- file trees ------------------------------------------------------------------ */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) && errno != ENOENT ? -1 : 0;
}

int local_disk_rm_tree(const char *path)
{
	struct stat st;
	if (lstat(path, &st) && errno == ENOENT)
		return 0;
	return nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/* nftw passes no data to its callback: local_disk_du's sums, one pair a
 * thread (the pool runs several workspaces' steps at once). */
static _Thread_local uint64_t du_bytes, du_files;
static int du_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)path;
	(void)flag;
	if (ftw->level > 0) {
		du_files++;
		du_bytes += (uint64_t)st->st_blocks * 512u;
	}
	return 0;
}

void local_disk_du(const char *path, uint64_t *bytes, uint64_t *files)
{
	du_bytes = du_files = 0;
	nftw(path, du_entry, 16, FTW_PHYS | FTW_MOUNT);
	*bytes = du_bytes;
	*files = du_files;
}

int local_disk_folder_empty(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return 1;
	struct dirent *de;
	int empty = 1;
	while (empty && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			empty = 0;
	closedir(d);
	return empty;
}

/* ---- start-up: commands run and waited for (before the loop) -------------------- */

int local_disk_find_tool(const char *name, char out[PATH_CAP])
{
	static const char *const dirs[] = { "/usr/sbin", "/sbin", "/usr/bin", "/bin",
	                                    "/usr/local/sbin", "/usr/local/bin" };
	for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
		snprintf(out, PATH_CAP, "%s/%s", dirs[i], name);
		if (access(out, X_OK) == 0)
			return 1;
	}
	return 0;
}

static int run_wait(const char *const *argv, struct cp_err *err)
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	pid_t pid;
	int rc = posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc)
		return cp_err_errno(err, CP_E_UNSUPPORTED, rc, "cannot run %s", argv[0]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return cp_err_set(err, CP_E_UNSUPPORTED, "%s failed (status %d)", argv[0], st);
	return 0;
}

int local_ws_probe(const char *ws_root, struct cp_err *err)
{
	char mkfs[PATH_CAP], resize[PATH_CAP], tool[PATH_CAP];
	if (geteuid() != 0)
		return cp_err_set(err, CP_E_UNSUPPORTED, "codepod is not root (mounting an image "
		                  "needs it)");
	if (access("/dev/loop-control", R_OK | W_OK) != 0)
		return cp_err_errno(err, CP_E_UNSUPPORTED, errno, "no loop devices (/dev/loop-control)");
	if (!local_disk_find_tool("mkfs.ext4", mkfs) || !local_disk_find_tool("resize2fs", resize))
		return cp_err_set(err, CP_E_UNSUPPORTED, "no mkfs.ext4 or resize2fs (install e2fsprogs)");
	if (!local_disk_find_tool("cp", tool) || !local_disk_find_tool("chown", tool))
		return cp_err_set(err, CP_E_UNSUPPORTED, "no cp or chown");
	char img[PATH_CAP], mnt[PATH_CAP], dev[DEV_CAP];
	snprintf(img, sizeof img, "%s/.probe-%ld.img", ws_root, (long)getpid());
	snprintf(mnt, sizeof mnt, "%s/.probe-%ld", ws_root, (long)getpid());
	int fd = open(img, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return cp_err_errno(err, CP_E_UNSUPPORTED, errno, "probe image %s", img);
	int rc = ftruncate(fd, (off_t)local_ws_image_size(MIB, 64)) ? errno : 0;
	close(fd);
	if (rc) {
		unlink(img);
		return cp_err_errno(err, CP_E_UNSUPPORTED, rc, "probe image %s", img);
	}
	const char *const argv[] = { mkfs, "-q", "-F", "-t", "ext4", "-b", "4096", "-m", "0",
	                             "-N", "64", "-J", "size=4", "-E",
	                             "lazy_itable_init=1,lazy_journal_init=1", "--", img, NULL };
	rc = run_wait(argv, err);
	if (!rc && mkdir(mnt, 0700) && errno != EEXIST)
		rc = cp_err_errno(err, CP_E_UNSUPPORTED, errno, "probe folder %s", mnt);
	if (!rc) {
		rc = local_disk_mount(img, mnt, dev, err);
		if (rc) {
			err->code = CP_E_UNSUPPORTED;
		} else {
			char f[PATH_CAP + 8];
			snprintf(f, sizeof f, "%s/probe", mnt);
			int wfd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
			if (wfd < 0 || write(wfd, "x", 1) != 1)
				rc = cp_err_errno(err, CP_E_UNSUPPORTED, errno, "writing in a mounted image");
			if (wfd >= 0)
				close(wfd);
			if (local_disk_unmount(mnt, 1))
				rc = rc ? rc : cp_err_errno(err, CP_E_UNSUPPORTED, errno, "unmounting %s", mnt);
		}
	}
	rmdir(mnt);
	unlink(img);
	return rc;
}

/* ---- the sweep of codepods that are gone (before the loop) ---------------------- */

/* /proc/self/mountinfo's escapes (\040 for a space and the like) undone in place. */
static void unescape(char *s)
{
	char *o = s;
	for (char *i = s; *i; i++) {
		if (i[0] == '\\' && i[1] >= '0' && i[1] <= '3' && i[2] >= '0' && i[2] <= '7' &&
		    i[3] >= '0' && i[3] <= '7') {
			*o++ = (char)((i[1] - '0') * 64 + (i[2] - '0') * 8 + (i[3] - '0'));
			i += 3;
		} else {
			*o++ = *i;
		}
	}
	*o = '\0';
}

/* Each mount: its mount point, fstype and source, until @fn returns non-zero. */
static void each_mount(int (*fn)(void *ud, const char *point, const char *type, const char *src,
                                 const char *root),
                       void *ud)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return;
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		char *save = NULL, *fields[10];
		int n = 0;
		for (char *t = strtok_r(line, " \n", &save); t && n < 10; t = strtok_r(NULL, " \n", &save))
			fields[n++] = t;
		/* id parent dev root point opts [optional...] - type source superopts */
		if (n < 7)
			continue;
		int dash = 6;
		while (dash < n && strcmp(fields[dash], "-") != 0)
			dash++;
		if (dash + 2 >= n)
			continue;
		unescape(fields[3]);
		unescape(fields[4]);
		unescape(fields[dash + 2]);
		if (fn(ud, fields[4], fields[dash + 1], fields[dash + 2], fields[3]))
			break;
	}
	free(line);
	fclose(f);
}

struct sweep {
	const char *root;
	int root_is_mount;
	int roots;       /* this pass: the workspaces' folders (after the workspaces) */
};

/* A workspaces' folder bound on itself by a codepod that is gone: no
 * process holds its LOCAL_DISK_LOCK_FILE (each codepod holds its own shared). */
static int root_of_dead_codepod(const char *point)
{
	size_t n = strlen(point), k = strlen("/workspaces");
	if (n < k || strcmp(point + n - k, "/workspaces") != 0)
		return 0;
	char lock[PATH_CAP];
	if (snprintf(lock, sizeof lock, "%s/" LOCAL_DISK_LOCK_FILE, point) >= (int)sizeof lock)
		return 0;
	int fd = open(lock, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return 0;
	int dead = flock(fd, LOCK_EX | LOCK_NB) == 0;
	close(fd);
	return dead;
}

static int sweep_one(void *ud, const char *point, const char *type, const char *src,
                     const char *root)
{
	(void)root;
	struct sweep *s = ud;
	if (s->roots) {
		if (!strcmp(point, s->root))
			s->root_is_mount = 1;
		else if (root_of_dead_codepod(point) && umount2(point, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
			cp_log(CP_LOG_INFO, "local.workspace_swept", "mountPoint", json_string(point), NULL);
		return 0;
	}
	if (strcmp(type, "ext4") != 0 || strncmp(src, "/dev/loop", 9) != 0)
		return 0;
	if (loop_of_dead_codepod(src) && umount2(point, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
		cp_log(CP_LOG_INFO, "local.workspace_swept", "mountPoint", json_string(point),
		       "device", json_string(src), NULL);
	return 0;
}

/* Loop devices of codepods that are gone and mounted nowhere: detached
 * (they would detach themselves once closed; LOOP_CLR_FD says so now). */
static void sweep_loops(void)
{
	DIR *d = opendir("/sys/block");
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "loop", 4) != 0)
			continue;
		char dev[300];
		snprintf(dev, sizeof dev, "/dev/%s", de->d_name);
		if (!loop_of_dead_codepod(dev))
			continue;
		int fd = open(dev, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			ioctl(fd, LOOP_CLR_FD, 0); /* busy (mounted): it detaches when unmounted */
			close(fd);
		}
	}
	closedir(d);
}

int local_disk_sweep(const char *root)
{
	struct sweep s = { root, 0, 0 };
	each_mount(sweep_one, &s);
	s.roots = 1;
	each_mount(sweep_one, &s);
	sweep_loops();
	return s.root_is_mount;
}

/* ---- what this process may do ------------------------------------------------------ */

int local_disk_has_cap(int bit)
{
	FILE *f = fopen("/proc/self/status", "re");
	if (!f)
		return 0;
	char line[256];
	unsigned long long eff = 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	fclose(f);
	return (int)((eff >> bit) & 1u);
}
