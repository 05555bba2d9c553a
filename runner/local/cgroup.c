/*
 * cgroup.c - one cgroup per execution under one folder of codepod's own,
 * on cgroup v1 or v2 (cgroup.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fileio.h"
#include "runner/local/cgroup.h"

static const char *const v1_names[LOCAL_CG_NCTL] = { "memory", "pids", "cpu" };

/* Writes @text to @dir/@file. A control file exists on a real cgroup
 * filesystem; O_CREAT lets a plain folder stand in for one in tests. */
static int put(const char *dir, const char *file, const char *text)
{
	char path[4096];
	if (snprintf(path, sizeof path, "%s/%s", dir, file) >= (int)sizeof path) {
		errno = ENAMETOOLONG;
		return -1;
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	size_t len = strlen(text);
	/* memory.limit_in_bytes (v1) gives EINTR when a signal came during the
	 * write (SIGCHLD of a runner, here all the time), even on a new group:
	 * the signal is handled on the way out, so the next try goes through */
	ssize_t w;
	int tries = 0;
	do
		w = write(fd, text, len);
	while (w < 0 && errno == EINTR && ++tries < 100);
	int e = errno;
	close(fd);
	if (w != (ssize_t)len) {
		errno = w < 0 ? e : EIO;
		return -1;
	}
	return 0;
}

static int put_ul(const char *dir, const char *file, unsigned long v)
{
	char buf[32];
	snprintf(buf, sizeof buf, "%lu", v);
	return put(dir, file, buf);
}

static int has(const char *dir, const char *file)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	return access(path, F_OK) == 0;
}

/* @dir/@file into @buf (NUL-terminated); its length, or -1. */
static ssize_t get(const char *dir, const char *file, char *buf, size_t cap)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	return cp_read_small(path, buf, cap);
}

/* The value of "KEY N" lines (memory.events, memory.oom_control). */
static unsigned long keyed(const char *text, const char *key)
{
	size_t k = strlen(key);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, key, k) == 0 && p[k] == ' ')
			return strtoul(p + k + 1, NULL, 10);
	return 0;
}

static char *join_path(const char *a, const char *b, const char *c)
{
	size_t n = strlen(a) + strlen(b) + strlen(c) + 3;
	char *s = malloc(n);
	if (s)
		snprintf(s, n, "%s%s%s%s%s", a, *b ? "/" : "", b, *c ? "/" : "", c);
	return s;
}

/* The path of codepod's own cgroup in the hierarchy with controller @ctl
 * ("" for v2's line "0::/path") from /proc/self/cgroup's text, and the
 * hierarchy's controller list (v1: the mount's folder name may be it, as
 * "cpu,cpuacct"). 0, or -1 when there is no such line. */
static int own_path(const char *self, const char *ctl, char *path, size_t cap, char *list,
                    size_t lcap)
{
	for (const char *line = self; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		const char *c1 = memchr(line, ':', len);
		const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
		if (c2) {
			size_t cl = (size_t)(c2 - c1 - 1);
			int match = 0;
			if (!*ctl)
				match = cl == 0;
			for (const char *t = c1 + 1; *ctl && t < c2;) {
				const char *comma = memchr(t, ',', (size_t)(c2 - t));
				size_t tl = comma ? (size_t)(comma - t) : (size_t)(c2 - t);
				if (tl == strlen(ctl) && strncmp(t, ctl, tl) == 0)
					match = 1;
				t += tl + 1;
			}
			size_t pl = len - (size_t)(c2 + 1 - line);
			if (match && pl < cap && cl < lcap) {
				memcpy(path, c2 + 1, pl);
				path[pl] = '\0';
				/* the root is "/": no trailing slash in what is joined */
				if (pl == 1)
					path[0] = '\0';
				memcpy(list, c1 + 1, cl);
				list[cl] = '\0';
				return 0;
			}
		}
		line = end ? end + 1 : NULL;
	}
	return -1;
}

/* Processes listed in @dir/cgroup.procs get SIGKILL; how many were listed. */
static int kill_listed(const char *dir)
{
	char buf[16384];
	if (get(dir, "cgroup.procs", buf, sizeof buf) < 0)
		return 0;
	int n = 0;
	for (char *at = buf, *end;; at = end) {
		long pid = strtol(at, &end, 10);
		if (end == at)
			break;
		if (pid > 1) {
			kill((pid_t)pid, SIGKILL);
			n++;
		}
	}
	return n;
}

/* A folder left by a codepod of this PID namespace that is gone (killed
 * before it could remove it): its execution folders, then itself. */
static void sweep(const char *parent, unsigned long ns)
{
	DIR *d = opendir(parent);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		unsigned long dns = 0;
		long pid = 0;
		char tail;
		if (sscanf(de->d_name, "codepod-%lu-%ld%c", &dns, &pid, &tail) != 2 || dns != ns ||
		    pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		char *top = join_path(parent, de->d_name, "");
		DIR *sub = top ? opendir(top) : NULL;
		struct dirent *se;
		while (sub && (se = readdir(sub))) {
			if (se->d_name[0] == '.')
				continue;
			char *p = join_path(top, se->d_name, "");
			if (p) {
				kill_listed(p);
				rmdir(p);
			}
			free(p);
		}
		if (sub)
			closedir(sub);
		if (top)
			rmdir(top);
		free(top);
	}
	closedir(d);
}

static unsigned long own_pidns(void)
{
	struct stat st;
	return stat("/proc/self/ns/pid", &st) == 0 ? (unsigned long)st.st_ino : 0;
}

unsigned long local_cg_default_max_pids(unsigned long pid_max)
{
	return pid_max / 4 * 3;
}

unsigned long local_cg_share(unsigned long max_pids, unsigned nlive)
{
	if (!max_pids)
		return LOCAL_CG_MAX_PIDS;
	unsigned long headroom = max_pids / 8;
	if (headroom < 2 * LOCAL_CG_MIN_PIDS)
		headroom = 2 * LOCAL_CG_MIN_PIDS;
	/* Halved: the kernel takes a PID for a fork before the pids cgroup
	 * refuses it, so a bomb spinning on refused forks holds up to one
	 * more PID per task it has, for moments at a time, outside its count. */
	unsigned long pool = max_pids > headroom ? (max_pids - headroom) / 2 : 0;
	unsigned long share = pool / (nlive ? nlive : 1);
	if (share < LOCAL_CG_MIN_PIDS)
		share = LOCAL_CG_MIN_PIDS;
	return share > LOCAL_CG_MAX_PIDS ? LOCAL_CG_MAX_PIDS : share;
}

/* v2: the controllers @dir hands to its children. */
static int delegate(const char *dir, int with_pids, int with_cpu)
{
	char want[64];
	snprintf(want, sizeof want, "+memory%s%s", with_pids ? " +pids" : "",
	         with_cpu ? " +cpu" : "");
	return put(dir, "cgroup.subtree_control", want);
}

static int init_v2(struct local_cg_root *r, const struct local_cg_conf *c, const char *mnt,
                   const char *controllers, struct cp_err *err)
{
	char own[2048], list[256];
	if (own_path(c->self, "", own, sizeof own, list, sizeof list))
		return cp_err_set(err, CP_E_UNSUPPORTED, "cgroup v2: no 0:: line in /proc/self/cgroup");
	int with_pids = strstr(controllers, "pids") != NULL;
	int with_cpu = strstr(controllers, "cpu") != NULL;
	char *parent = join_path(mnt, own[0] == '/' ? own + 1 : own, "");
	if (!parent)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	sweep(parent, own_pidns());
	/* codepod's own cgroup hands the controllers down: on the root, or a
	 * delegated folder holding no process (cgroup v2 lets a folder with
	 * processes have no controller-enabled children) */
	if (delegate(parent, with_pids, with_cpu)) {
		int e = errno;
		free(parent);
		return cp_err_errno(err, CP_E_UNSUPPORTED, e,
		                    "cgroup v2: codepod's cgroup cannot hand the memory controller to "
		                    "the sandboxes (it holds processes, or is not delegated)");
	}
	char *top = join_path(parent, c->name, "");
	free(parent);
	if (!top)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	if ((mkdir(top, 0755) && errno != EEXIST) || delegate(top, with_pids, with_cpu)) {
		int e = errno;
		rmdir(top);
		free(top);
		return cp_err_errno(err, CP_E_UNSUPPORTED, e, "cgroup v2: cannot make the sandboxes' cgroup");
	}
	r->kind = LOCAL_CG_V2;
	r->dir[LOCAL_CG_MEMORY] = top;
	r->dir[LOCAL_CG_PIDS] = with_pids ? strdup(top) : NULL;
	r->dir[LOCAL_CG_CPU] = with_cpu ? strdup(top) : NULL;
	if (r->max_pids && r->dir[LOCAL_CG_PIDS])
		put_ul(top, "pids.max", r->max_pids);
	return 0;
}

static int init_v1(struct local_cg_root *r, const struct local_cg_conf *c, struct cp_err *err)
{
	unsigned long ns = own_pidns();
	for (int i = 0; i < LOCAL_CG_NCTL; i++) {
		char own[2048], list[256];
		if (own_path(c->self, v1_names[i], own, sizeof own, list, sizeof list))
			continue;
		char *mnt = join_path(c->fs, v1_names[i], "");
		if (mnt && access(mnt, F_OK)) {
			free(mnt);
			mnt = join_path(c->fs, list, "");
		}
		char *parent = mnt ? join_path(mnt, own[0] == '/' ? own + 1 : own, "") : NULL;
		free(mnt);
		char *top = parent ? join_path(parent, c->name, "") : NULL;
		if (parent)
			sweep(parent, ns);
		free(parent);
		if (top && (mkdir(top, 0755) == 0 || errno == EEXIST) && has(top, "cgroup.procs")) {
			r->dir[i] = top;
			continue;
		}
		int e = errno;
		if (top)
			rmdir(top);
		free(top);
		if (i == LOCAL_CG_MEMORY)
			return cp_err_errno(err, CP_E_UNSUPPORTED, e,
			                    "cgroup v1: cannot make a cgroup in the memory hierarchy");
	}
	if (!r->dir[LOCAL_CG_MEMORY])
		return cp_err_set(err, CP_E_UNSUPPORTED, "no memory cgroup hierarchy is mounted");
	r->kind = LOCAL_CG_V1;
	r->have_memsw = has(r->dir[LOCAL_CG_MEMORY], "memory.memsw.limit_in_bytes");
	if (r->max_pids && r->dir[LOCAL_CG_PIDS])
		put_ul(r->dir[LOCAL_CG_PIDS], "pids.max", r->max_pids);
	return 0;
}

int local_cg_root_init(struct local_cg_root *r, const struct local_cg_conf *c,
                       struct cp_err *err)
{
	memset(r, 0, sizeof *r);
	r->max_pids = c->max_pids;
	/* v2, alone at the mount point or beside v1 ("unified"), when it has
	 * the memory controller; else v1's memory hierarchy */
	static const char *const v2_at[] = { "", "unified" };
	for (size_t i = 0; i < sizeof v2_at / sizeof v2_at[0]; i++) {
		char *mnt = join_path(c->fs, v2_at[i], "");
		char ctl[512];
		int rc = -1;
		if (mnt && get(mnt, "cgroup.controllers", ctl, sizeof ctl) >= 0 && strstr(ctl, "memory"))
			rc = init_v2(r, c, mnt, ctl, err);
		free(mnt);
		if (rc == 0)
			goto made;
		if (rc != -1)
			return rc;
	}
	int rc = init_v1(r, c, err);
	if (rc) {
		local_cg_root_free(r);
		return rc;
	}
made:
	r->share = local_cg_share(r->max_pids, 1);
	return 0;
}

void local_cg_root_free(struct local_cg_root *r)
{
	/* controllers mounted together share a folder: removed once, and
	 * compared before any is freed */
	for (int i = 0; i < LOCAL_CG_NCTL; i++) {
		int dup = 0;
		for (int j = 0; j < i; j++)
			dup |= r->dir[j] && r->dir[i] && strcmp(r->dir[j], r->dir[i]) == 0;
		if (r->dir[i] && !dup)
			rmdir(r->dir[i]);
	}
	for (int i = 0; i < LOCAL_CG_NCTL; i++)
		free(r->dir[i]);
	memset(r, 0, sizeof *r);
}

static void forget(struct local_cg *cg)
{
	for (int i = 0; i < LOCAL_CG_NCTL; i++) {
		free(cg->dir[i]);
		free(cg->procs[i]);
		cg->dir[i] = NULL;
		cg->procs[i] = NULL;
	}
	if (cg->oom_fd >= 0)
		close(cg->oom_fd);
	cg->oom_fd = -1;
}

/* Every live execution's pids.max to the share of their number now: a
 * write each (lowering one under what it holds stops its forks, kills
 * nothing). */
static void reshare(struct local_cg_root *r)
{
	r->share = local_cg_share(r->max_pids, r->nlive);
	for (struct local_cg *cg = r->live; cg; cg = cg->next)
		if (cg->dir[LOCAL_CG_PIDS])
			put_ul(cg->dir[LOCAL_CG_PIDS], "pids.max", r->share);
}

/* v1: an eventfd the kernel signals when the folder reaches OOM. */
static int oom_eventfd(const char *dir)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/memory.oom_control", dir);
	int cfd = open(path, O_RDONLY | O_CLOEXEC);
	if (cfd < 0)
		return -1;
	int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	char line[64];
	snprintf(line, sizeof line, "%d %d", efd, cfd);
	if (efd >= 0 && put(dir, "cgroup.event_control", line)) {
		close(efd);
		efd = -1;
	}
	/* the kernel holds its own reference to the control file */
	close(cfd);
	return efd;
}

/* cpu.weight 100 (v2) or cpu.shares 1024 (v1), the defaults, times @times. */
static void weigh(const struct local_cg_root *r, const struct local_cg *cg, unsigned long times)
{
	if (cg->dir[LOCAL_CG_CPU])
		put_ul(cg->dir[LOCAL_CG_CPU], r->kind == LOCAL_CG_V2 ? "cpu.weight" : "cpu.shares",
		       (r->kind == LOCAL_CG_V2 ? 100ul : 1024ul) * times);
}

void local_cg_started(const struct local_cg_root *r, const struct local_cg *cg)
{
	weigh(r, cg, 1);
}

static int limits(const struct local_cg_root *r, struct local_cg *cg, unsigned long share)
{
	unsigned long long bytes = ((unsigned long long)cg->limit_mb) << 20;
	char b[32];
	snprintf(b, sizeof b, "%llu", bytes);
	const char *mem = cg->dir[LOCAL_CG_MEMORY];
	if (!cg->limit_mb) {
		/* no ceiling asked for: only the processes and the CPU share */
	} else if (r->kind == LOCAL_CG_V2) {
		/* swap and the OOM group are optional: a kernel without swap
		 * accounting has no memory.swap.max */
		if (put(mem, "memory.max", b))
			return -1;
		if (has(mem, "memory.swap.max"))
			put(mem, "memory.swap.max", "0");
		if (has(mem, "memory.oom.group"))
			put(mem, "memory.oom.group", "1");
	} else {
		/* memsw (memory + swap) cannot be under the memory limit: set after it */
		if (put(mem, "memory.limit_in_bytes", b))
			return -1;
		if (r->have_memsw && put(mem, "memory.memsw.limit_in_bytes", b))
			return -1;
	}
	weigh(r, cg, LOCAL_CG_START_WEIGHT);
	if (cg->dir[LOCAL_CG_PIDS] && put_ul(cg->dir[LOCAL_CG_PIDS], "pids.max", share))
		return -1;
	return 0;
}

int local_cg_make(struct local_cg_root *r, struct local_cg *cg, const char *name,
                  unsigned long memory_mb, struct cp_err *err)
{
	memset(cg, 0, sizeof *cg);
	cg->oom_fd = -1;
	cg->limit_mb = memory_mb ? memory_mb + LOCAL_CG_SLACK_MB : 0;
	int e = 0;
	for (int i = 0; i < LOCAL_CG_NCTL && !e; i++) {
		if (!r->dir[i])
			continue;
		for (int j = 0; j < i && !cg->dir[i]; j++)
			if (r->dir[j] && strcmp(r->dir[i], r->dir[j]) == 0 && cg->dir[j])
				cg->dir[i] = strdup(cg->dir[j]); /* v2: one folder */
		if (cg->dir[i])
			continue;
		cg->dir[i] = join_path(r->dir[i], name, "");
		if (!cg->dir[i])
			e = ENOMEM;
		else if (mkdir(cg->dir[i], 0755) && errno != EEXIST)
			e = errno;
	}
	/* one cgroup.procs per folder (on v2 the three are one) */
	for (int i = 0; i < LOCAL_CG_NCTL && !e; i++) {
		int dup = 0;
		for (int j = 0; j < i; j++)
			dup |= cg->dir[j] && cg->dir[i] && strcmp(cg->dir[j], cg->dir[i]) == 0;
		if (cg->dir[i] && !dup && !(cg->procs[i] = join_path(cg->dir[i], "cgroup.procs", "")))
			e = ENOMEM;
	}
	unsigned long share = local_cg_share(r->max_pids, r->nlive + 1);
	if (!e && limits(r, cg, share))
		e = errno ? errno : EIO;
	if (!e && r->kind == LOCAL_CG_V1)
		cg->oom_fd = oom_eventfd(cg->dir[LOCAL_CG_MEMORY]);
	if (e) {
		for (int i = 0; i < LOCAL_CG_NCTL; i++)
			if (cg->dir[i])
				rmdir(cg->dir[i]);
		forget(cg);
		return cp_err_errno(err, CP_E_IO, e, "cannot make the execution's cgroup");
	}
	cg->next = r->live;
	r->live = cg;
	r->nlive++;
	reshare(r);
	return 0;
}

size_t local_cg_procs(const struct local_cg *cg, const char **out, size_t max)
{
	size_t n = 0;
	for (int i = 0; i < LOCAL_CG_NCTL && n < max; i++)
		if (cg->procs[i])
			out[n++] = cg->procs[i];
	return n;
}

unsigned long local_cg_oom_kills(const struct local_cg_root *r, const struct local_cg *cg)
{
	char buf[1024];
	const char *mem = cg->dir[LOCAL_CG_MEMORY];
	if (!mem)
		return 0;
	if (r->kind == LOCAL_CG_V2) {
		if (get(mem, "memory.events", buf, sizeof buf) < 0)
			return 0;
		unsigned long k = keyed(buf, "oom_kill"), g = keyed(buf, "oom_group_kill");
		return k > g ? k : g;
	}
	if (get(mem, "memory.oom_control", buf, sizeof buf) < 0)
		return 0;
	return keyed(buf, "oom_kill") + keyed(buf, "under_oom");
}

void local_cg_kill_all(const struct local_cg *cg)
{
	for (int i = 0; i < LOCAL_CG_NCTL; i++)
		if (cg->dir[i])
			kill_listed(cg->dir[i]);
}

int local_cg_remove(struct local_cg_root *r, struct local_cg *cg)
{
	int busy = 0;
	for (int i = 0; i < LOCAL_CG_NCTL; i++) {
		if (!cg->dir[i])
			continue;
		if (rmdir(cg->dir[i]) && errno != ENOENT)
			busy = 1;
	}
	if (busy)
		return -1;
	for (struct local_cg **pp = &r->live; *pp; pp = &(*pp)->next) {
		if (*pp == cg) {
			*pp = cg->next;
			r->nlive--;
			break;
		}
	}
	forget(cg);
	reshare(r);
	return 0;
}
