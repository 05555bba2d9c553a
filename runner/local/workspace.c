/*
 * workspace.c - workspaces bounded by the kernel and handed to their users
 * (workspace.h): the state of each conversation's workspace and the jobs
 * that change it, one at a time, each a chain of steps on the loop, on
 * libuv's thread pool and in child processes. How to attach, mount,
 * unmount and sweep is workspace_disk.h's; when, and in what order, is
 * this file's.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "runner/local/workspace.h"
#include "runner/local/workspace_disk.h"

#define MIB (1ull << 20)
/* ext4's own records besides the inode tables (journal 4 MiB, bitmaps,
 * group descriptors and their backups, the tree of a full disk's extents),
 * measured with mkfs.ext4 from 1 MiB to 1 TiB: the files hold at least the
 * bytes asked for */
#define EXT4_FIXED (12 * MIB)
#define EXT4_PER_FILE 272ull
#define ERRBUF 512
/* Without CAP_SYS_RESOURCE an image grows unmounted: a spawn that asks for
 * more waits this long for the processes that hold it to end (a waiting
 * runner of the conversation is killed once the spawn is made). */
#define GROW_WAIT_MS 3000
#define PATH_CAP LOCAL_DISK_PATH_CAP
#define DEV_CAP LOCAL_DISK_DEV_CAP

/* ---- sizes ---------------------------------------------------------------- */

uint64_t local_ws_image_size(uint64_t bytes, uint64_t files)
{
	if (bytes < MIB)
		bytes = MIB;
	uint64_t s = bytes + (bytes >> 6) + files * EXT4_PER_FILE + EXT4_FIXED;
	return (s + MIB - 1) / MIB * MIB;
}

/* The bytes an image of @size with @files inodes was made for (the inverse
 * of local_ws_image_size, to a MiB or so). */
static uint64_t bytes_of(uint64_t size, uint64_t files)
{
	uint64_t fixed = files * EXT4_PER_FILE + EXT4_FIXED;
	return size > fixed ? (size - fixed) / 65 * 64 : 0;
}

/* ---- the workspaces ---------------------------------------------------------- */

enum ent_state {
	E_IDLE,  /* nothing running: mounted or not (see mounted) */
	E_JOB,   /* a job is running (e->job) */
};

struct waiter {
	struct waiter *next;
	uint64_t bytes, files;
	uid_t uid;
	gid_t gid;
	uid_t move_from;
	int tried;            /* a job ran for it: it takes what there is */
	local_ws_ready_fn done;
	void (*deleted)(void *ud, int rc, const struct cp_err *err); /* a delete's */
	void *ud;
};

struct job;

struct ent {
	struct ent *next;
	struct local_ws *w;
	char hash[33];
	char *ws, *img, *src; /* the folder, its image, a plain folder on its way in */
	enum ent_state state;
	struct job *job;
	int mounted;          /* the image is mounted on ws */
	int plain;            /* a folder that could not be moved into an image */
	char dev[DEV_CAP];    /* its loop device, once mounted here */
	uint64_t size;        /* the image's bytes, while mounted */
	uint64_t inodes;      /* its inodes */
	uid_t moved_to;       /* the owner its entries were handed to, (uid_t)-1 */
	unsigned users;       /* holders (local_ws_drop) */
	uint64_t idle_since;  /* uv_now of the last drop */
	struct waiter *waiters;  /* acquisitions waiting for the job */
	struct waiter *deletes;  /* deletions waiting for it */
	uint64_t grow_until;     /* waiting for its holders to grow it, until then */
};

enum job_kind { J_ACQUIRE, J_UNMOUNT, J_DELETE };

struct job {
	struct ent *e;
	enum job_kind kind;
	/* what it makes true (J_ACQUIRE) */
	uint64_t bytes, files;
	uid_t uid;
	gid_t gid;
	uid_t move_from;
	int lazy;               /* J_UNMOUNT: at close, detach if busy */
	/* found and done by the thread steps */
	int need_mkfs, need_copy, need_resize, need_chown, undo;
	int is_mounted;         /* the image is mounted (examine found or made it so) */
	unsigned users;         /* the workspace's holders when the job started */
	int need_offline;       /* grown unmounted: resize2fs on the file, then mounted */
	int new_image;          /* made by this job (a failure removes it) */
	int grow_errno;         /* the image could not grow (logged on the loop) */
	int left_errno;         /* a moved folder could not be removed */
	uint64_t size, inodes;
	char dev[DEV_CAP];
	int rc;
	struct cp_err err;
	/* the child process running */
	uv_work_t work;
	uv_process_t proc;
	uv_pipe_t errp;
	int open_handles;
	int64_t status;
	int term;
	char errbuf[ERRBUF];
	size_t errlen;
	const char *what;       /* the command's name, for messages */
	void (*after_child)(struct job *j);
};

struct local_ws {
	uv_loop_t *loop;
	char *root;
	int disk;
	uint64_t idle_ms;
	int (*busy)(void *ud, const char *hash);
	void *busy_ud;
	char mkfs[PATH_CAP], resize[PATH_CAP], cp[PATH_CAP], chown[PATH_CAP];
	int online_resize;        /* CAP_SYS_RESOURCE: a mounted filesystem can grow */
	uv_timer_t grow_timer;    /* wakes the entries waiting to grow */
	int root_bound;           /* root is our bind mount of itself */
	int lock_fd;              /* root's LOCAL_DISK_LOCK_FILE, held shared while we live */
	struct ent *ents;
	unsigned jobs;            /* running */
	uv_timer_t idle;
	int closing;
	void (*closed)(void *ud);
	void *closed_ud;
};

static void job_start(struct ent *e);
static void job_end(struct job *j);
static void step_offline_done(struct job *j);
static void step_examine(struct job *j);
static void maybe_closed(struct local_ws *w);

int local_ws_bounded(const struct local_ws *w)
{
	return w->disk;
}

/* ---- the start: the root's mount, the sweep ------------------------------------- */

static void on_idle_timer(uv_timer_t *t);

int local_ws_new(const struct local_ws_conf *c, struct local_ws **out, struct cp_err *err)
{
	struct local_ws *w = calloc(1, sizeof *w);
	if (!w || !(w->root = strdup(c->ws_root))) {
		free(w);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	w->loop = c->loop;
	w->disk = c->disk;
	w->idle_ms = (uint64_t)(c->idle_s ? c->idle_s : LOCAL_WS_IDLE_S) * 1000u;
	w->busy = c->busy;
	w->busy_ud = c->busy_ud;
	w->lock_fd = -1;
	local_disk_find_tool("mkfs.ext4", w->mkfs);
	local_disk_find_tool("resize2fs", w->resize);
	local_disk_find_tool("cp", w->cp);
	local_disk_find_tool("chown", w->chown);
	w->online_resize = local_disk_has_cap(24 /* CAP_SYS_RESOURCE */);
	uv_timer_init(w->loop, &w->idle); /* closed last, so @closed comes from the loop */
	w->idle.data = w;
	uv_timer_init(w->loop, &w->grow_timer);
	w->grow_timer.data = w;
	if (w->disk) {
		int root_is_mount = local_disk_sweep(w->root);
		/* shared, so the unmount of a workspace reaches the copies the
		 * sandboxes' namespaces hold (out of their sight) */
		if (!root_is_mount && mount(w->root, w->root, NULL, MS_BIND, NULL) != 0) {
			int e = errno;
			w->disk = 0;
			local_ws_close(w, NULL, NULL);
			return cp_err_errno(err, CP_E_UNSUPPORTED, e, "binding %s on itself", c->ws_root);
		}
		w->root_bound = 1;
		if (mount(NULL, w->root, NULL, MS_SHARED, NULL) != 0) {
			int e = errno;
			w->disk = 0;
			local_ws_close(w, NULL, NULL);
			return cp_err_errno(err, CP_E_UNSUPPORTED, e, "making %s shared", c->ws_root);
		}
		char lock[PATH_CAP];
		snprintf(lock, sizeof lock, "%s/" LOCAL_DISK_LOCK_FILE, w->root);
		w->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (w->lock_fd >= 0 && flock(w->lock_fd, LOCK_SH) != 0) {
			close(w->lock_fd);
			w->lock_fd = -1;
		}
		uint64_t every = w->idle_ms / 4 ? w->idle_ms / 4 : 1;
		uv_timer_start(&w->idle, on_idle_timer, every, every);
		uv_unref((uv_handle_t *)&w->idle);
	}
	*out = w;
	return 0;
}

/* ---- entries -------------------------------------------------------------------- */

static struct ent *ent_find(struct local_ws *w, const char *hash)
{
	for (struct ent *e = w->ents; e; e = e->next)
		if (!strcmp(e->hash, hash))
			return e;
	return NULL;
}

static char *path_of(const char *root, const char *pre, const char *hash, const char *post)
{
	size_t n = strlen(root) + strlen(pre) + strlen(hash) + strlen(post) + 2;
	char *p = malloc(n);
	if (p)
		snprintf(p, n, "%s/%s%s%s", root, pre, hash, post);
	return p;
}

static struct ent *ent_get(struct local_ws *w, const char *hash)
{
	struct ent *e = ent_find(w, hash);
	if (e || strlen(hash) != 32)
		return e;
	e = calloc(1, sizeof *e);
	if (!e)
		return NULL;
	e->w = w;
	memcpy(e->hash, hash, 33);
	e->ws = path_of(w->root, "", hash, "");
	e->img = path_of(w->root, "", hash, ".img");
	e->src = path_of(w->root, ".migrate-", hash, "");
	e->moved_to = (uid_t)-1;
	if (!e->ws || !e->img || !e->src) {
		free(e->ws);
		free(e->img);
		free(e->src);
		free(e);
		return NULL;
	}
	e->next = w->ents;
	w->ents = e;
	return e;
}

static void ent_free(struct ent *e)
{
	struct local_ws *w = e->w;
	for (struct ent **pp = &w->ents; *pp; pp = &(*pp)->next)
		if (*pp == e) {
			*pp = e->next;
			break;
		}
	free(e->ws);
	free(e->img);
	free(e->src);
	free(e);
}

/* Whether the workspace as it is serves @wt. */
static int serves(const struct ent *e, const struct waiter *wt)
{
	if (wt->move_from != (uid_t)-1 && e->moved_to != wt->uid)
		return 0;
	if (!e->w->disk || e->plain)
		return 1;
	if (!e->mounted)
		return 0;
	uint64_t want = wt->bytes ? wt->bytes : LOCAL_WS_DEFAULT_BYTES;
	return want <= bytes_of(e->size, e->inodes) + 2 * MIB;
}

/* The job's mount (found or made) recorded as the workspace's. */
static void ent_mounted(struct ent *e, const struct job *j)
{
	e->mounted = 1;
	snprintf(e->dev, sizeof e->dev, "%s", j->dev);
	e->size = j->size;
	e->inodes = j->inodes;
}

/* Its image no longer mounted here. */
static void ent_unmounted(struct ent *e)
{
	e->mounted = 0;
	e->dev[0] = '\0';
}

/* ---- child processes ------------------------------------------------------------ */

static void child_closed(uv_handle_t *h)
{
	struct job *j = h->data;
	if (--j->open_handles)
		return;
	j->after_child(j);
}

static void child_exited(uv_process_t *p, int64_t status, int term)
{
	struct job *j = p->data;
	j->status = status;
	j->term = term;
	uv_close((uv_handle_t *)p, child_closed);
}

static void err_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct job *j = h->data;
	(void)hint;
	size_t room = sizeof j->errbuf - 1 - j->errlen;
	static char sink[256];
	*buf = room ? uv_buf_init(j->errbuf + j->errlen, (unsigned)room)
	            : uv_buf_init(sink, sizeof sink);
}

static void err_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct job *j = s->data;
	if (n > 0 && buf->base == j->errbuf + j->errlen) {
		j->errlen += (size_t)n;
		j->errbuf[j->errlen] = '\0';
	}
	if (n < 0)
		uv_close((uv_handle_t *)s, child_closed);
}

/* Runs @argv; @after(j) once it ended (j->status, j->term, j->errbuf). */
static void run_child(struct job *j, const char *what, const char *const *argv,
                      void (*after)(struct job *j))
{
	static char env_path[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
	static char env_lang[] = "LANG=C";
	static char *env[] = { env_path, env_lang, NULL };
	j->what = what;
	j->after_child = after;
	j->errlen = 0;
	j->errbuf[0] = '\0';
	j->status = -1;
	j->term = 0;
	uv_pipe_init(j->e->w->loop, &j->errp, 0);
	j->errp.data = j;
	uv_stdio_container_t io[3];
	io[0].flags = UV_IGNORE;
	io[1].flags = UV_IGNORE;
	io[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
	io[2].data.stream = (uv_stream_t *)&j->errp;
	uv_process_options_t o;
	memset(&o, 0, sizeof o);
	o.file = argv[0];
	o.args = (char **)argv;
	o.env = env;
	o.exit_cb = child_exited;
	o.stdio = io;
	o.stdio_count = 3;
	j->proc.data = j;
	int rc = uv_spawn(j->e->w->loop, &j->proc, &o);
	if (rc) {
		snprintf(j->errbuf, sizeof j->errbuf, "cannot run %s: %s", argv[0], uv_strerror(rc));
		j->errlen = strlen(j->errbuf);
		j->open_handles = 2;
		uv_close((uv_handle_t *)&j->proc, child_closed);
		uv_close((uv_handle_t *)&j->errp, child_closed);
		return;
	}
	j->open_handles = 2;
	uv_read_start((uv_stream_t *)&j->errp, err_alloc, err_read);
}

static int child_failed(const struct job *j)
{
	return j->status != 0 || j->term != 0;
}

/* The child's failure as the job's error. */
static void child_error(struct job *j, const char *doing)
{
	char *nl;
	while ((nl = strchr(j->errbuf, '\n')) && nl[1] == '\0')
		*nl = '\0';
	cp_err_set(&j->err, CP_E_SANDBOX_UNAVAILABLE, "%s: %s %s (%s)", doing, j->what,
	           j->term ? "was killed" : "failed", j->errbuf[0] ? j->errbuf : "no message");
	j->rc = j->err.code;
}

/* ---- thread steps ---------------------------------------------------------------- */

static void queue(struct job *j, uv_work_cb work, uv_after_work_cb after)
{
	j->work.data = j;
	if (uv_queue_work(j->e->w->loop, &j->work, work, after)) {
		j->rc = cp_err_set(&j->err, CP_E_INTERNAL, "cannot queue the workspace's work");
		job_end(j);
	}
}

/* The mounted image's size and inodes. */
static void read_bounds(struct job *j)
{
	struct stat st;
	struct statfs sf;
	if (stat(j->e->img, &st) == 0)
		j->size = (uint64_t)st.st_size;
	if (statfs(j->e->ws, &sf) == 0)
		j->inodes = (uint64_t)sf.f_files;
}

/* The image mounted again as it is, its growth given up. */
static void remount(struct job *j)
{
	if (local_disk_mount(j->e->img, j->e->ws, j->dev, &j->err) == 0)
		j->is_mounted = 1;
	else
		j->rc = j->err.code;
}

/* Without CAP_SYS_RESOURCE: with no process holding it, the image
 * unmounted and its file grown to @size; resize2fs grows the filesystem
 * later (need_offline), then it is mounted again. */
static void grow_unmounted(struct job *j, uint64_t size)
{
	char dev[DEV_CAP];
	if (j->users) {
		j->grow_errno = EBUSY; /* in use: it grows when it is not */
		return;
	}
	/* detached: the namespace of the sandbox that ended last may
	 * hold it a moment more (its teardown follows its reaping) */
	if (local_disk_unmount(j->e->ws, 1) != 0) {
		j->grow_errno = errno;
		return;
	}
	j->is_mounted = 0;
	for (int i = 0; i < 50 && local_disk_loop_holding(j->e->img, dev); i++) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	if (local_disk_loop_holding(j->e->img, dev)) {
		/* still held (a sandbox on its way out): mounted again as it is */
		j->grow_errno = EBUSY;
		remount(j);
		return;
	}
	int fd = open(j->e->img, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || ftruncate(fd, (off_t)size) != 0)
		j->grow_errno = errno ? errno : EIO;
	else
		j->need_offline = 1;
	if (fd >= 0)
		close(fd);
	if (!j->need_offline) /* as it was */
		remount(j);
}

/* A mounted image that must hold more: the file and the loop device grown,
 * then resize2fs grows the filesystem, mounted (it takes CAP_SYS_RESOURCE);
 * without that, and with no process holding it, unmounted first. */
static void grow(struct job *j)
{
	uint64_t have = bytes_of(j->size, j->inodes);
	if (j->bytes <= have + 2 * MIB || !have)
		return;
	uint64_t inodes = (uint64_t)((double)j->inodes * ((double)j->bytes / (double)have));
	uint64_t size = local_ws_image_size(j->bytes, inodes);
	if (!j->e->w->online_resize) {
		grow_unmounted(j, size);
		return;
	}
	int fd = open(j->e->img, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	int lfd = open(j->dev, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && lfd >= 0 && ftruncate(fd, (off_t)size) == 0 &&
	    ioctl(lfd, LOOP_SET_CAPACITY, 0) == 0)
		j->need_resize = 1;
	else
		j->grow_errno = errno ? errno : EIO;
	if (fd >= 0)
		close(fd);
	if (lfd >= 0)
		close(lfd);
}

static void examine_work(uv_work_t *w)
{
	struct job *j = w->data;
	struct ent *e = j->e;
	struct cp_err *err = &j->err;
	/* the folder (a deletion may have taken it meanwhile), its owner */
	if (mkdir(e->ws, 0700) == 0 && j->uid != (uid_t)-1)
		lchown(e->ws, j->uid, j->gid);
	j->need_chown = j->move_from != (uid_t)-1;
	if (!e->w->disk || e->plain)
		return;
	int mounted = local_disk_is_mounted(e->ws);
	if (!mounted) {
		struct stat st;
		if (j->uid != (uid_t)-1)
			lchown(e->ws, j->uid, j->gid); /* the mount point: the owner's record */
		if (lstat(e->src, &st) == 0) {
			/* a move into an image cut short: the folder aside has every
			 * file, the image and what reached it go */
			unlink(e->img);
			local_disk_rm_tree(e->ws);
			if (mkdir(e->ws, 0700) || (j->uid != (uid_t)-1 && lchown(e->ws, j->uid, j->gid))) {
				j->rc = cp_err_errno(err, CP_E_SANDBOX_UNAVAILABLE, errno,
				                     "the workspace's mount point");
				return;
			}
			j->need_copy = 1;
		} else if (lstat(e->img, &st) == 0) {
			j->rc = local_disk_mount(e->img, e->ws, j->dev, err);
			if (j->rc)
				return;
			mounted = 1;
		} else if (!local_disk_folder_empty(e->ws)) {
			/* a plain folder with files goes into an image */
			if (lstat(e->ws, &st) || rename(e->ws, e->src) || mkdir(e->ws, 0700) ||
			    lchown(e->ws, j->uid != (uid_t)-1 ? j->uid : st.st_uid,
			           j->uid != (uid_t)-1 ? j->gid : st.st_gid)) {
				j->rc = cp_err_errno(err, CP_E_SANDBOX_UNAVAILABLE, errno,
				                     "moving the workspace aside");
				return;
			}
			j->need_copy = 1;
		}
		if (!mounted) {
			uint64_t bytes = j->bytes, files = j->files;
			if (j->need_copy) {
				uint64_t du_bytes, du_files;
				local_disk_du(e->src, &du_bytes, &du_files);
				if (du_bytes + du_bytes / 4 > bytes)
					bytes = du_bytes + du_bytes / 4;
				if (du_files + du_files / 4 + 64 > files)
					files = du_files + du_files / 4 + 64;
			}
			j->files = files;
			j->size = local_ws_image_size(bytes, files);
			int fd = open(e->img, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
			if (fd < 0 || ftruncate(fd, (off_t)j->size) != 0) {
				j->rc = cp_err_errno(err, CP_E_SANDBOX_UNAVAILABLE, errno,
				                     "making the workspace image");
				if (fd >= 0) {
					close(fd);
					unlink(e->img);
				}
				j->undo = j->need_copy;
				j->need_copy = 0;
				return;
			}
			close(fd);
			j->need_mkfs = 1;
			j->new_image = 1;
			return;
		}
	}
	j->is_mounted = 1;
	if (!j->dev[0] && e->dev[0])
		snprintf(j->dev, sizeof j->dev, "%s", e->dev);
	if (!j->dev[0])
		local_disk_loop_holding(e->img, j->dev); /* mounted by an earlier codepod */
	read_bounds(j);
	if (j->dev[0])
		grow(j);
}

static void mount_work(uv_work_t *w)
{
	struct job *j = w->data;
	struct ent *e = j->e;
	j->rc = local_disk_mount(e->img, e->ws, j->dev, &j->err);
	if (j->rc)
		return;
	if (j->new_image) {
		char lf[PATH_CAP + 16];
		snprintf(lf, sizeof lf, "%s/lost+found", e->ws);
		rmdir(lf); /* e2fsck makes it again when it needs it */
		chmod(e->ws, 0700);
	}
	read_bounds(j);
}

/* A plain folder that could not go into an image is put back as it was. */
static void undo_work(uv_work_t *w)
{
	struct job *j = w->data;
	struct ent *e = j->e;
	if (local_disk_is_mounted(e->ws))
		local_disk_unmount(e->ws, 1);
	unlink(e->img);
	if (j->undo) {
		local_disk_rm_tree(e->ws);
		if (rename(e->src, e->ws) != 0)
			j->rc = cp_err_errno(&j->err, CP_E_SANDBOX_UNAVAILABLE, errno,
			                     "putting the workspace back");
	}
}

static void migrated_work(uv_work_t *w)
{
	struct job *j = w->data;
	if (local_disk_rm_tree(j->e->src) != 0)
		j->left_errno = errno ? errno : EIO;
}

static void unmount_work(uv_work_t *w)
{
	struct job *j = w->data;
	if (local_disk_unmount(j->e->ws, j->lazy) != 0)
		j->rc = cp_err_errno(&j->err, CP_E_IO, errno, "unmounting");
}

static void delete_work(uv_work_t *w)
{
	struct job *j = w->data;
	struct ent *e = j->e;
	if (local_disk_is_mounted(e->ws))
		local_disk_unmount(e->ws, 1);
	if (unlink(e->img) && errno != ENOENT)
		j->rc = cp_err_errno(&j->err, CP_E_IO, errno, "removing the workspace image");
	local_disk_rm_tree(e->src);
}

/* ---- the steps, on the loop -------------------------------------------------------- */

static void step_chown_done(struct job *j)
{
	if (child_failed(j)) {
		child_error(j, "handing the workspace to its user");
	} else {
		j->e->moved_to = j->uid;
		cp_log(CP_LOG_INFO, "local.workspace_moved", "conversation", json_string(j->e->hash),
		       "from", json_integer((json_int_t)j->move_from),
		       "to", json_integer((json_int_t)j->uid), NULL);
	}
	job_end(j);
}

/* The last steps: the entries handed over, if asked. */
static void step_chown(struct job *j)
{
	if (!j->need_chown) {
		job_end(j);
		return;
	}
	char from[32], to[64];
	snprintf(from, sizeof from, "--from=%lu", (unsigned long)j->move_from);
	snprintf(to, sizeof to, "%lu:%lu", (unsigned long)j->uid, (unsigned long)j->gid);
	const char *const argv[] = { j->e->w->chown, "-R", "-P", from, to, "--", j->e->ws, NULL };
	run_child(j, "chown", argv, step_chown_done);
}

/* resize2fs ended, the image grown mounted or unmounted: logged. A
 * failure is no error: the workspace serves at the size it has. */
static void log_resized(const struct job *j)
{
	if (child_failed(j))
		cp_log(CP_LOG_WARN, "local.workspace_not_grown", "conversation", json_string(j->e->hash),
		       "reason", json_string(j->errbuf), NULL);
	else
		cp_log(CP_LOG_INFO, "local.workspace_grown", "conversation", json_string(j->e->hash),
		       "bytes", json_integer((json_int_t)j->bytes), NULL);
}

static void step_resize_done(struct job *j)
{
	log_resized(j);
	j->need_resize = 0;
	read_bounds(j); /* two small reads */
	step_chown(j);
}

static void step_resize(struct job *j)
{
	if (j->grow_errno)
		cp_log(CP_LOG_WARN, "local.workspace_not_grown", "conversation", json_string(j->e->hash),
		       "reason", json_string(strerror(j->grow_errno)), NULL);
	if (!j->need_resize) {
		step_chown(j);
		return;
	}
	const char *const argv[] = { j->e->w->resize, j->dev, NULL };
	run_child(j, "resize2fs", argv, step_resize_done);
}

static void undone(uv_work_t *w, int status)
{
	struct job *j = w->data;
	(void)status;
	if (!j->rc && j->undo) {
		/* kept as a folder: unbounded, but nothing lost */
		j->e->plain = 1;
		cp_log(CP_LOG_WARN, "local.workspace_unbounded", "conversation", json_string(j->e->hash),
		       "reason", json_string(j->err.msg[0] ? j->err.msg : j->errbuf), NULL);
		cp_err_clear(&j->err);
		j->rc = 0;
		j->undo = 0;
		step_chown(j);
		return;
	}
	if (!j->rc)
		j->rc = cp_err_set(&j->err, CP_E_SANDBOX_UNAVAILABLE, "the workspace image failed");
	job_end(j);
}

/* A failure making or filling a new image: it goes; a folder on its way in
 * comes back (and stays a folder). */
static void fail_new_image(struct job *j)
{
	if (j->need_copy || j->undo) {
		j->undo = 1;
		j->rc = 0;
	}
	queue(j, undo_work, undone);
}

static void migrated(uv_work_t *w, int status)
{
	struct job *j = w->data;
	(void)status;
	if (j->left_errno)
		cp_log(CP_LOG_WARN, "local.workspace_left", "path", json_string(j->e->src),
		       "reason", json_string(strerror(j->left_errno)), NULL);
	cp_log(CP_LOG_INFO, "local.workspace_bounded", "conversation", json_string(j->e->hash),
	       "imageBytes", json_integer((json_int_t)j->size), "files",
	       json_integer((json_int_t)j->inodes), "from", json_string("folder"), NULL);
	step_resize(j);
}

/* A child process that made or filled a new image ended: on its failure
 * the image goes (fail_new_image), the error saying what it was @doing;
 * else the next step, @work on the pool and then @after. */
static void new_image_child_done(struct job *j, const char *doing, uv_work_cb work,
                                 uv_after_work_cb after)
{
	if (child_failed(j)) {
		child_error(j, doing);
		fail_new_image(j);
		return;
	}
	queue(j, work, after);
}

static void step_copy_done(struct job *j)
{
	new_image_child_done(j, "moving the workspace into its image", migrated_work, migrated);
}

static void mounted(uv_work_t *w, int status)
{
	struct job *j = w->data;
	(void)status;
	if (j->rc && j->new_image) {
		fail_new_image(j);
		return;
	}
	if (j->rc) { /* an image of before, mounted again after it grew: kept */
		j->e->mounted = 0;
		job_end(j);
		return;
	}
	ent_mounted(j->e, j);
	if (j->need_copy) {
		const char *const argv[] = { j->e->w->cp, "-a", "-T", "--one-file-system", "--",
		                             j->e->src, j->e->ws, NULL };
		run_child(j, "cp", argv, step_copy_done);
		return;
	}
	cp_log(CP_LOG_DEBUG, "local.workspace_bounded", "conversation", json_string(j->e->hash),
	       "imageBytes", json_integer((json_int_t)j->size), "files",
	       json_integer((json_int_t)j->inodes), NULL);
	step_resize(j);
}

/* Grown unmounted (or not): mounted again either way. */
static void step_offline_done(struct job *j)
{
	log_resized(j);
	j->need_offline = 0;
	queue(j, mount_work, mounted);
}

static void step_mkfs_done(struct job *j)
{
	new_image_child_done(j, "making the workspace's filesystem", mount_work, mounted);
}

static void examined(uv_work_t *w, int status)
{
	struct job *j = w->data;
	struct ent *e = j->e;
	(void)status;
	if (e->w->disk && !e->plain && !j->is_mounted)
		ent_unmounted(e);
	if (j->rc) {
		if (j->undo)
			fail_new_image(j);
		else
			job_end(j);
		return;
	}
	if (j->need_offline) {
		ent_unmounted(e);
		const char *const argv[] = { e->w->resize, "-f", e->img, NULL };
		run_child(j, "resize2fs", argv, step_offline_done);
		return;
	}
	if (j->need_mkfs) {
		char inodes[32], owner[96];
		snprintf(inodes, sizeof inodes, "%llu", (unsigned long long)(j->files + 16));
		if (j->uid != (uid_t)-1)
			snprintf(owner, sizeof owner,
			         "lazy_itable_init=1,lazy_journal_init=1,root_owner=%lu:%lu",
			         (unsigned long)j->uid, (unsigned long)j->gid);
		else
			snprintf(owner, sizeof owner, "lazy_itable_init=1,lazy_journal_init=1");
		const char *const argv[] = { e->w->mkfs, "-q", "-F", "-t", "ext4", "-b", "4096",
		                             "-m", "0", "-N", inodes, "-J", "size=4", "-E", owner,
		                             "-L", "codepod", "--", e->img, NULL };
		run_child(j, "mkfs.ext4", argv, step_mkfs_done);
		return;
	}
	if (e->w->disk && !e->plain && j->is_mounted)
		ent_mounted(e, j);
	step_resize(j);
}

static void step_examine(struct job *j)
{
	queue(j, examine_work, examined);
}

static void unmounted(uv_work_t *w, int status)
{
	struct job *j = w->data;
	(void)status;
	if (!j->rc) {
		ent_unmounted(j->e);
		cp_log(CP_LOG_DEBUG, "local.workspace_unmounted", "conversation",
		       json_string(j->e->hash), NULL);
	} else {
		j->e->idle_since = uv_now(j->e->w->loop); /* in use: later */
	}
	j->rc = 0; /* nobody waits for it */
	job_end(j);
}

static void deleted(uv_work_t *w, int status)
{
	struct job *j = w->data;
	(void)status;
	ent_unmounted(j->e);
	j->e->plain = 0;
	j->e->moved_to = (uid_t)-1;
	job_end(j);
}

/* ---- jobs ------------------------------------------------------------------------- */

static struct job *job_new(struct ent *e, enum job_kind kind)
{
	struct job *j = calloc(1, sizeof *j);
	if (!j)
		return NULL;
	j->e = e;
	j->kind = kind;
	j->uid = (uid_t)-1;
	j->gid = (gid_t)-1;
	j->move_from = (uid_t)-1;
	e->job = j;
	e->state = E_JOB;
	e->w->jobs++;
	return j;
}

static void on_grow_timer(uv_timer_t *t)
{
	struct local_ws *w = t->data;
	int waiting = 0;
	for (struct ent *e = w->ents, *next; e; e = next) {
		next = e->next;
		if (!e->grow_until)
			continue;
		waiting = 1;
		job_start(e); /* may free e: next was read before */
	}
	if (!waiting)
		uv_timer_stop(&w->grow_timer);
}

/* A spawn asks for more bytes than the mounted image has, it can grow only
 * unmounted, and processes still hold it: 1 while it waits for them (up
 * to GROW_WAIT_MS, then it takes the workspace as it is). */
static int wait_to_grow(struct ent *e)
{
	struct local_ws *w = e->w;
	int more = 0;
	for (struct waiter *wt = e->waiters; wt && !more; wt = wt->next)
		more = !wt->tried && (wt->bytes ? wt->bytes : LOCAL_WS_DEFAULT_BYTES) >
		                     bytes_of(e->size, e->inodes) + 2 * MIB;
	if (w->online_resize || w->closing || !e->mounted || !e->users || !more) {
		e->grow_until = 0;
		return 0;
	}
	uint64_t now = uv_now(w->loop);
	if (!e->grow_until)
		e->grow_until = now + GROW_WAIT_MS;
	if (now >= e->grow_until) {
		e->grow_until = 0;
		return 0;
	}
	if (!uv_is_active((uv_handle_t *)&w->grow_timer))
		uv_timer_start(&w->grow_timer, on_grow_timer, 100, 100);
	return 1;
}

/* What to do next for @e, if anything: deletions first, then the
 * acquisitions the workspace does not serve yet, then (closing) the
 * unmount. */
static void job_start(struct ent *e)
{
	struct local_ws *w = e->w;
	if (e->state != E_IDLE)
		return;
	if (e->deletes) {
		struct job *j = job_new(e, J_DELETE);
		if (!j)
			goto nomem;
		queue(j, delete_work, deleted);
		return;
	}
	/* the ones it serves are done */
	for (struct waiter **pp = &e->waiters; *pp;) {
		struct waiter *wt = *pp;
		if (!w->closing && !wt->tried && !serves(e, wt)) {
			pp = &wt->next;
			continue;
		}
		*pp = wt->next;
		struct cp_err err = { 0 };
		int rc = 0;
		if (w->closing)
			rc = cp_err_set(&err, CP_E_SANDBOX_UNAVAILABLE, "codepod is shutting down");
		else
			e->users++;
		wt->done(wt->ud, rc, &err);
		free(wt);
	}
	if (e->waiters && wait_to_grow(e))
		return;
	if (e->waiters) {
		struct job *j = job_new(e, J_ACQUIRE);
		if (!j)
			goto nomem;
		j->users = e->users;
		/* one job for all of them: the most asked for */
		for (struct waiter *wt = e->waiters; wt; wt = wt->next) {
			uint64_t b = wt->bytes ? wt->bytes : LOCAL_WS_DEFAULT_BYTES;
			uint64_t f = wt->files ? wt->files : LOCAL_WS_DEFAULT_FILES;
			if (b > j->bytes)
				j->bytes = b;
			if (f > j->files)
				j->files = f;
			j->uid = wt->uid;
			j->gid = wt->gid;
			if (wt->move_from != (uid_t)-1)
				j->move_from = wt->move_from;
			wt->tried = 1;
		}
		step_examine(j);
		return;
	}
	if (w->closing && e->mounted) {
		struct job *j = job_new(e, J_UNMOUNT);
		if (!j)
			goto nomem;
		j->lazy = 1;
		queue(j, unmount_work, unmounted);
		return;
	}
	if (w->closing || (!e->mounted && !e->users && !e->plain && e->moved_to == (uid_t)-1))
		ent_free(e); /* nothing to remember */
	maybe_closed(w);
	return;
nomem:
	for (struct waiter *wt = e->waiters, *n; wt; wt = n) {
		n = wt->next;
		struct cp_err err = { 0 };
		cp_err_set(&err, CP_E_NOMEM, "out of memory");
		wt->done(wt->ud, CP_E_NOMEM, &err);
		free(wt);
	}
	e->waiters = NULL;
}

static void job_end(struct job *j)
{
	struct ent *e = j->e;
	struct local_ws *w = e->w;
	e->job = NULL;
	e->state = E_IDLE;
	w->jobs--;
	if (j->kind == J_DELETE) {
		struct waiter *d = e->deletes;
		e->deletes = NULL;
		while (d) {
			struct waiter *n = d->next;
			d->deleted(d->ud, j->rc, &j->err);
			free(d);
			d = n;
		}
	} else if (j->kind == J_ACQUIRE && !j->rc && e->mounted && j->size) {
		e->size = j->size; /* grown, perhaps */
		if (j->inodes)
			e->inodes = j->inodes;
	} else if (j->kind == J_ACQUIRE && j->rc) {
		/* the ones that asked for it: each told why */
		cp_log(CP_LOG_WARN, "local.workspace_failed", "conversation", json_string(e->hash),
		       "reason", json_string(j->err.msg), NULL);
		for (struct waiter *wt = e->waiters, *n; wt; wt = n) {
			n = wt->next;
			wt->done(wt->ud, j->rc, &j->err);
			free(wt);
		}
		e->waiters = NULL;
	}
	free(j);
	job_start(e);
}

/* ---- the calls ---------------------------------------------------------------------- */

int local_ws_acquire(struct local_ws *w, const struct local_ws_req *req, local_ws_ready_fn done,
                     void *ud, struct cp_err *err)
{
	if (w->closing)
		return cp_err_set(err, CP_E_SANDBOX_UNAVAILABLE, "codepod is shutting down");
	struct waiter probe = { NULL, req->bytes, req->files, req->uid, req->gid, req->move_from,
	                        0, done, NULL, ud };
	struct ent *e = ent_find(w, req->hash);
	if (!w->disk && req->move_from == (uid_t)-1 && !e)
		return 0; /* a folder: nothing to do */
	if (!e && !(e = ent_get(w, req->hash)))
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	if (e->state == E_IDLE && !e->deletes && !e->waiters && serves(e, &probe)) {
		e->users++;
		return 0;
	}
	struct waiter *wt = malloc(sizeof *wt);
	if (!wt)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	*wt = probe;
	struct waiter **pp = &e->waiters;
	while (*pp)
		pp = &(*pp)->next;
	*pp = wt;
	job_start(e);
	return 1;
}

int local_ws_moving(const struct local_ws *w, const char *hash, uid_t *uid, gid_t *gid,
                    uid_t *move_from)
{
	for (const struct ent *e = w->ents; e; e = e->next) {
		if (strcmp(e->hash, hash) != 0)
			continue;
		if (e->job && e->job->kind == J_ACQUIRE && e->job->move_from != (uid_t)-1) {
			*uid = e->job->uid;
			*gid = e->job->gid;
			*move_from = e->job->move_from;
			return 1;
		}
		for (const struct waiter *wt = e->waiters; wt; wt = wt->next)
			if (wt->move_from != (uid_t)-1) {
				*uid = wt->uid;
				*gid = wt->gid;
				*move_from = wt->move_from;
				return 1;
			}
		return 0;
	}
	return 0;
}

void local_ws_drop(struct local_ws *w, const char *hash)
{
	struct ent *e = ent_find(w, hash);
	if (!e || !e->users)
		return;
	e->users--;
	e->idle_since = uv_now(w->loop);
	if (!e->users && e->grow_until && e->state == E_IDLE)
		job_start(e); /* it was waiting for that to grow */
}

int local_ws_delete(struct local_ws *w, const char *hash,
                    void (*done)(void *ud, int rc, const struct cp_err *err), void *ud,
                    struct cp_err *err)
{
	struct ent *e = ent_get(w, hash);
	struct waiter *d = e ? calloc(1, sizeof *d) : NULL;
	if (!d)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	d->deleted = done;
	d->ud = ud;
	d->next = e->deletes;
	e->deletes = d;
	e->users = 0; /* its processes were killed: none holds it */
	job_start(e);
	return 0;
}

/* Every so often: workspaces unused for idle_ms are unmounted. */
static void on_idle_timer(uv_timer_t *t)
{
	struct local_ws *w = t->data;
	uint64_t now = uv_now(w->loop);
	for (struct ent *e = w->ents, *next; e; e = next) {
		next = e->next;
		if (e->state != E_IDLE || !e->mounted || e->users || e->waiters || e->deletes ||
		    now - e->idle_since < w->idle_ms || (w->busy && w->busy(w->busy_ud, e->hash)))
			continue;
		struct job *j = job_new(e, J_UNMOUNT);
		if (j)
			queue(j, unmount_work, unmounted);
	}
}

static void idle_closed(uv_handle_t *h)
{
	struct local_ws *w = h->data;
	void (*closed)(void *ud) = w->closed;
	void *ud = w->closed_ud;
	free(w->root);
	free(w);
	if (closed)
		closed(ud);
}

static void maybe_closed(struct local_ws *w)
{
	if (!w->closing || w->jobs || w->closing > 1)
		return;
	for (struct ent *e = w->ents; e; e = e->next)
		if (e->state != E_IDLE || e->mounted)
			return;
	w->closing = 2;
	while (w->ents)
		ent_free(w->ents);
	if (w->lock_fd >= 0)
		close(w->lock_fd);
	if (w->root_bound && umount2(w->root, MNT_DETACH | UMOUNT_NOFOLLOW) != 0)
		cp_log(CP_LOG_WARN, "local.workspace_root_mounted", "path", json_string(w->root),
		       "reason", json_string(strerror(errno)), NULL);
	uv_close((uv_handle_t *)&w->grow_timer, NULL);
	uv_close((uv_handle_t *)&w->idle, idle_closed);
}

void local_ws_close(struct local_ws *w, void (*closed)(void *ud), void *ud)
{
	w->closing = 1;
	w->closed = closed;
	w->closed_ud = ud;
	uv_timer_stop(&w->idle);
	uv_timer_stop(&w->grow_timer);
	/* each one's unmount, after the job it may have running */
	for (struct ent *e = w->ents, *next; e; e = next) {
		next = e->next;
		job_start(e);
	}
	if (w->closing == 1)
		maybe_closed(w);
}
