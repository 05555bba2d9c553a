/*
 * local_sandbox.c - the local backend's confinement: bubblewrap command
 * line, seccomp hand-over, sandbox user, hard limits, start-up probe.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runner/local/capture.h"
#include "runner/local/host_root.h"
#include "runner/local/local_sandbox.h"
#include "runner/local/sandbox_uids.h"
#include "runner/local/syscall_filter.h"

static int parse_id(const char *s, unsigned long *out)
{
	char *end = NULL;
	if (!*s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end || v >= 0xFFFFFFFFul)
		return -1;
	*out = v;
	return 0;
}

int local_sandbox_user_parse(const char *spec, uid_t *uid, gid_t *gid, struct cp_err *err)
{
	char user[256];
	const char *colon = strchr(spec, ':');
	size_t ulen = colon ? (size_t)(colon - spec) : strlen(spec);
	if (ulen == 0 || ulen >= sizeof user)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "--sandbox-user: give USER, UID or UID:GID");
	memcpy(user, spec, ulen);
	user[ulen] = '\0';
	unsigned long n;
	int have_gid = 0;
	if (parse_id(user, &n) == 0) {
		*uid = (uid_t)n;
	} else {
		struct passwd *pw = getpwnam(user);
		if (!pw)
			return cp_err_set(err, CP_E_INVALID_REQUEST, "--sandbox-user: no user named %s", user);
		*uid = pw->pw_uid;
		*gid = pw->pw_gid;
		have_gid = 1;
	}
	if (colon) {
		if (parse_id(colon + 1, &n) == 0) {
			*gid = (gid_t)n;
		} else {
			struct group *gr = getgrnam(colon + 1);
			if (!gr)
				return cp_err_set(err, CP_E_INVALID_REQUEST,
				                  "--sandbox-user: no group named %.64s", colon + 1);
			*gid = gr->gr_gid;
		}
	} else if (!have_gid) {
		*gid = (gid_t)*uid;
	}
	if (*uid == 0 || *gid == 0)
		return cp_err_set(err, CP_E_INVALID_REQUEST,
		                  "--sandbox-user: the sandbox user and group must not be root");
	return 0;
}

/* An executable on PATH (the sandbox's root has the host's top-level
 * entries, read-only, so the same path works inside; host_root.h). */
static char *find_tool(const char *name)
{
	const char *path = getenv("PATH");
	char *copy = strdup(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
	char *found = NULL;
	for (char *save = NULL, *dir = copy ? strtok_r(copy, ":", &save) : NULL; dir && !found;
	     dir = strtok_r(NULL, ":", &save)) {
		char buf[4096];
		int w = snprintf(buf, sizeof buf, "%s/%s", dir, name);
		if (dir[0] == '/' && w > 0 && (size_t)w < sizeof buf && access(buf, X_OK) == 0)
			found = strdup(buf);
	}
	free(copy);
	return found;
}

/* Is @path /tmp or under it? The sandbox's /tmp is a private tmpfs, so the
 * host's files there are out of sight already. */
static int under_tmp(const char *path)
{
	return strncmp(path, "/tmp", 4) == 0 && (path[4] == '\0' || path[4] == '/');
}

static void add_hide(struct local_sandbox *s, const char *path)
{
	struct stat st;
	/* A path under /tmp is left alone: nothing of the host is there to
	 * hide, and covering it would make bubblewrap create the folders on the
	 * way, 0700 root, inside the tmpfs, cutting the sandbox user off Node
	 * or its workspace when they share one (a serve token file next to a
	 * checkout under /tmp: Node would not start). */
	if (!path || path[0] != '/' || strcmp(path, "/") == 0 || under_tmp(path) ||
	    s->nhide >= LOCAL_SANDBOX_MAX_HIDE || stat(path, &st) != 0)
		return;
	for (size_t i = 0; i < s->nhide; i++)
		if (strcmp(s->hide[i], path) == 0)
			return;
	char *copy = strdup(path);
	if (!copy)
		return;
	s->hide_is_dir[s->nhide] = S_ISDIR(st.st_mode);
	s->hide[s->nhide++] = copy;
}

/* Without a fixed user, the program's user (from the range) owns nothing on
 * the way: only the bits for others count. */
static int may_search(const struct local_sandbox *s, const struct stat *st)
{
	if (!s->fixed_user)
		return (st->st_mode & S_IXOTH) != 0;
	uid_t uid = s->uid;
	gid_t gid = s->gid;
	if (st->st_uid == uid)
		return (st->st_mode & S_IXUSR) != 0;
	if (st->st_gid == gid)
		return (st->st_mode & S_IXGRP) != 0;
	return (st->st_mode & S_IXOTH) != 0;
}

void local_sandbox_reach(struct local_sandbox *s, const char *path)
{
	if (!s->as_root || !path || path[0] != '/')
		return;
	char buf[4096];
	size_t n = strlen(path);
	if (n >= sizeof buf)
		return;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;
		*p = '\0';
		struct stat st;
		if (stat(buf, &st) == 0 && S_ISDIR(st.st_mode) && !may_search(s, &st)) {
			add_hide(s, buf);
			return;
		}
		*p = c;
		if (c == '\0')
			return;
	}
}

int local_sandbox_init(struct local_sandbox *s, const char *user, const char *uids,
                     const char *const *hide, struct cp_err *err)
{
	memset(s, 0, sizeof *s);
	s->as_root = geteuid() == 0;
	if ((user || uids) && !s->as_root)
		return cp_err_set(err, CP_E_INVALID_REQUEST,
		                  "%s needs codepod to run as root (unprivileged, programs run as "
		                  "codepod's own user in a user namespace)",
		                  user ? "--sandbox-user" : "--sandbox-uids");
	if (user && uids)
		return cp_err_set(err, CP_E_INVALID_REQUEST,
		                  "give --sandbox-user (one user for all) or --sandbox-uids (a user per "
		                  "conversation), not both");
	if (user) {
		s->fixed_user = 1;
		int rc = local_sandbox_user_parse(user, &s->uid, &s->gid, err);
		if (rc)
			return rc;
	} else {
		s->uid_first = LOCAL_UIDS_DEFAULT_FIRST;
		s->uid_count = LOCAL_UIDS_DEFAULT_COUNT;
		int rc = uids ? local_uids_parse(uids, &s->uid_first, &s->uid_count, err) : 0;
		if (rc)
			return rc;
	}
	s->prlimit = find_tool("prlimit");
	if (!s->prlimit)
		return cp_err_set(err, CP_E_UNSUPPORTED,
		                  "prlimit (util-linux) is not installed: it sets the sandbox's hard limits");
	if (s->as_root) {
		s->setpriv = find_tool("setpriv");
		if (!s->setpriv) {
			local_sandbox_free(s);
			return cp_err_set(err, CP_E_UNSUPPORTED,
			                  "setpriv (util-linux) is not installed: as root, codepod needs it to "
			                  "run programs as the sandbox user");
		}
	}
	int rc = local_seccomp_bpf(&s->bpf, &s->bpf_len, err);
	if (rc) {
		local_sandbox_free(s);
		return rc;
	}
	/* the files holding secrets, codepod's own home, and /run
	 * (the host's daemons listen on unix sockets there, which no network
	 * namespace covers). */
	/* at the real path: a symlink cannot be mounted over, and its target
	 * is what a program would read through it (or by its own path) */
	for (size_t i = 0; hide && hide[i]; i++) {
		char *real = realpath(hide[i], NULL);
		add_hide(s, real);
		free(real);
	}
	add_hide(s, getenv("HOME"));
	add_hide(s, "/run");
	return 0;
}

void local_sandbox_free(struct local_sandbox *s)
{
	free(s->setpriv);
	free(s->prlimit);
	free(s->bpf);
	for (size_t i = 0; i < s->nhide; i++)
		free(s->hide[i]);
	memset(s, 0, sizeof *s);
}

#define STR_(x) #x
#define STR(x) STR_(x)
#define PUSH(x)                      \
	do {                             \
		if (n >= cap)                \
			return -1;               \
		argv[n++] = (x);             \
	} while (0)

/* `--perms 0755 --dir A` for each proper ancestor A of @path longer than
 * @skip bytes, the strings kept in @buf. Return: 0, or -1 when out of room. */
static int push_ancestors(struct local_sandbox_buf *buf, const char *path, size_t skip,
                          const char **argv, size_t *n, size_t cap)
{
	for (const char *p = strchr(path + 1, '/'); p; p = strchr(p + 1, '/')) {
		size_t len = (size_t)(p - path);
		if (len <= skip)
			continue;
		if (buf->dirs_used + len + 1 > sizeof buf->dirs || *n + 4 > cap)
			return -1;
		char *dir = buf->dirs + buf->dirs_used;
		memcpy(dir, path, len);
		dir[len] = '\0';
		buf->dirs_used += len + 1;
		argv[(*n)++] = "--perms";
		argv[(*n)++] = "0755";
		argv[(*n)++] = "--dir";
		argv[(*n)++] = dir;
	}
	return 0;
}

int local_sandbox_argv(const struct local_sandbox *s, const struct local_sandbox_run *run,
                     struct local_sandbox_buf *buf, const char **argv, size_t cap)
{
	size_t n = 0;
	memset(&buf->why, 0, sizeof buf->why);
	PUSH("bwrap");
	if (s->as_root) {
		/* No user namespace: one would map the program back to host root. */
		PUSH("--unshare-pid"); PUSH("--unshare-net"); PUSH("--unshare-ipc");
		PUSH("--unshare-uts"); PUSH("--unshare-cgroup-try");
		PUSH("--cap-drop"); PUSH("ALL");
		/* Only what the chain needs until setpriv drops them all: entering
		 * the workspace (the sandbox user's, 0700) and becoming that user. */
		PUSH("--cap-add"); PUSH("CAP_DAC_READ_SEARCH");
		PUSH("--cap-add"); PUSH("CAP_SETUID"); PUSH("--cap-add"); PUSH("CAP_SETGID");
		PUSH("--cap-add"); PUSH("CAP_SETPCAP");
	} else {
		PUSH("--unshare-all"); PUSH("--cap-drop"); PUSH("ALL");
	}
	PUSH("--die-with-parent"); PUSH("--new-session"); PUSH("--seccomp"); PUSH("3");
	/* The root is bubblewrap's tmpfs with the host's top-level entries put
	 * back read-only (host_root.h), so /workspace can be a mount point of
	 * its own; the tmpfs is made read-only once every mount is in place. */
	if (local_root_scan(&buf->root, "/", &buf->why))
		return -1;
	for (size_t i = 0; i < buf->root.n; i++) {
		const struct local_root_entry *e = &buf->root.e[i];
		if (e->kind == LOCAL_ROOT_SYMLINK) {
			PUSH("--symlink"); PUSH(e->target); PUSH(e->path);
		} else {
			/* -try: an entry removed since the scan is no reason to fail */
			PUSH("--ro-bind-try"); PUSH(e->path); PUSH(e->path);
		}
	}
	PUSH("--dev"); PUSH("/dev");
	PUSH("--proc"); PUSH("/proc");
	/* bubblewrap covers irq and bus, but skips sys and sysrq-trigger when its
	 * own access() test finds them read-only at that point: cover them here
	 * (the sysctl tree a process sees follows its namespaces, not the mount) */
	PUSH("--ro-bind"); PUSH("/proc/sys"); PUSH("/proc/sys");
	PUSH("--ro-bind-try"); PUSH("/proc/sysrq-trigger"); PUSH("/proc/sysrq-trigger");
	snprintf(buf->tmp_size, sizeof buf->tmp_size, "%lu",
	         (run->memory_mb ? run->memory_mb : 512ul) << 20);
	PUSH("--perms"); PUSH("1777"); PUSH("--size"); PUSH(buf->tmp_size); PUSH("--tmpfs"); PUSH("/tmp");
	/* none under /tmp (add_hide): the folders on the way exist, nothing
	 * is created */
	for (size_t i = 0; i < s->nhide; i++) {
		if (s->hide_is_dir[i]) {
			PUSH("--tmpfs"); PUSH(s->hide[i]);
		} else {
			PUSH("--ro-bind"); PUSH("/dev/null"); PUSH(s->hide[i]);
		}
	}
	/* bubblewrap makes the folders it creates on the way to a mount point
	 * 0700 root: the sandbox user could not reach Node (a checkout under
	 * /tmp) by path. So each ancestor is made 0755 before the mount that
	 * would create it; one that exists is left as it is (--dir on a folder
	 * is a no-op). */
	buf->dirs_used = 0;
	if (push_ancestors(buf, run->state_dir, 0, argv, &n, cap))
		return -1;
	/* every workspace out of sight at its host path, the program's own too:
	 * that one is /workspace */
	PUSH("--tmpfs"); PUSH(run->state_dir);
	if (push_ancestors(buf, run->node_root, 0, argv, &n, cap))
		return -1;
	PUSH("--ro-bind"); PUSH(run->node_root); PUSH(run->node_root);
	/* last of the mounts, so nothing else lands inside the conversation's
	 * folder (bubblewrap would create a mount point's folders there) */
	PUSH("--perms"); PUSH("0755"); PUSH("--dir"); PUSH(LOCAL_SANDBOX_WORKSPACE);
	PUSH("--bind"); PUSH(run->ws); PUSH(LOCAL_SANDBOX_WORKSPACE);
	PUSH("--remount-ro"); PUSH("/");
	PUSH("--chdir"); PUSH(LOCAL_SANDBOX_WORKSPACE);
	PUSH("--");
	PUSH(s->prlimit);
	if (run->memory_mb) {
		unsigned long long data = ((unsigned long long)run->memory_mb * 2 + 1024) << 20;
		snprintf(buf->data, sizeof buf->data, "--data=%llu:%llu", data, data);
		PUSH(buf->data);
	}
	PUSH("--nproc=" STR(LOCAL_SANDBOX_NPROC) ":" STR(LOCAL_SANDBOX_NPROC));
	PUSH("--core=0:0");
	PUSH("--");
	if (s->as_root) {
		snprintf(buf->uid, sizeof buf->uid, "%lu", (unsigned long)run->uid);
		snprintf(buf->gid, sizeof buf->gid, "%lu", (unsigned long)run->gid);
		PUSH(s->setpriv);
		PUSH("--reuid"); PUSH(buf->uid); PUSH("--regid"); PUSH(buf->gid);
		PUSH("--clear-groups"); PUSH("--inh-caps=-all"); PUSH("--ambient-caps=-all");
		PUSH("--bounding-set=-all"); PUSH("--no-new-privs"); PUSH("--pdeathsig"); PUSH("keep");
		PUSH("--");
	}
	return (int)n;
}

#undef PUSH
#undef STR
#undef STR_

int local_sandbox_seccomp_fd(const struct local_sandbox *s, struct cp_err *err)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC))
		return cp_err_errno(err, CP_E_IO, errno, "pipe for the seccomp filter");
	/* A few KiB: well below a pipe's capacity, so this never blocks. */
	size_t off = 0;
	while (off < s->bpf_len) {
		ssize_t w = write(fds[1], s->bpf + off, s->bpf_len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int e = errno;
			close(fds[0]);
			close(fds[1]);
			return cp_err_errno(err, CP_E_IO, e, "writing the seccomp filter");
		}
		off += (size_t)w;
	}
	close(fds[1]);
	return fds[0];
}

static const char *status_field(const char *status, const char *name)
{
	size_t len = strlen(name);
	for (const char *p = status; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, name, len) == 0 && p[len] == ':') {
			p += len + 1;
			while (*p == ' ' || *p == '\t')
				p++;
			return p;
		}
	}
	return NULL;
}

static int field_is(const char *status, const char *name, const char *want)
{
	const char *v = status_field(status, name);
	return v && strncmp(v, want, strlen(want)) == 0 && (v[strlen(want)] == '\n' ||
	                                                    v[strlen(want)] == '\0');
}

int local_sandbox_probe(const struct local_sandbox *s, const struct local_sandbox_run *run,
                      const char *node, struct cp_err *err)
{
	const char *argv[LOCAL_SANDBOX_MAX_ARGS];
	struct local_sandbox_buf buf;
	int n = local_sandbox_argv(s, run, &buf, argv, sizeof argv / sizeof argv[0] - 4);
	if (n < 0)
		return cp_err_set(err, buf.why.code ? buf.why.code : CP_E_INTERNAL, "%s",
		                  buf.why.code ? buf.why.msg : "sandbox command line too long");
	/* the guarantees, then that Node runs there (any Node: --node may be a
	 * stand-in that only knows --version) */
	argv[n++] = "/bin/sh";
	argv[n++] = "-c";
	argv[n++] = "cat /proc/self/status && exec \"$0\" --version";
	argv[n++] = node;
	argv[n] = NULL;
	int sfd = local_sandbox_seccomp_fd(s, err);
	if (sfd < 0)
		return sfd;
	char status[8192];
	/* blocking: the probe runs once, before the loop (local_sandbox.h);
	 * bubblewrap's complaint on stderr ends the output on failure */
	int rc = local_capture_run(argv, sfd, LOCAL_CAPTURE_STDERR, status, sizeof status);
	close(sfd);
	if (rc != 0) {
		status[strcspn(status, "\n")] = '\0';
		return cp_err_set(err, CP_E_UNSUPPORTED,
		                  "the sandbox (bubblewrap with seccomp, prlimit%s) cannot start Node "
		                  "here (exit status %d: %.120s)", s->as_root ? ", setpriv" : "", rc,
		                  strncmp(status, "Name:", 5) == 0 ? "Node does not run as the sandbox user"
		                                                   : status);
	}
	if (!status_field(status, "CapEff") || !status_field(status, "Seccomp"))
		return cp_err_set(err, CP_E_UNSUPPORTED,
		                  "the sandbox probe could not read its own /proc/self/status");
	static const char *const caps[] = { "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb" };
	for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++)
		if (!field_is(status, caps[i], "0000000000000000"))
			return cp_err_set(err, CP_E_UNSUPPORTED,
			                  "the sandbox could not drop every capability (%s is not empty)",
			                  caps[i]);
	if (!field_is(status, "NoNewPrivs", "1"))
		return cp_err_set(err, CP_E_UNSUPPORTED, "the sandbox could not set no_new_privs");
	if (!field_is(status, "Seccomp", "2"))
		return cp_err_set(err, CP_E_UNSUPPORTED,
		                  "the kernel did not apply the seccomp filter (no seccomp support?)");
	const char *uid = status_field(status, "Uid");
	unsigned long ids[4] = { 0, 0, 0, 0 };
	if (s->as_root && (!uid || sscanf(uid, "%lu %lu %lu %lu", &ids[0], &ids[1], &ids[2], &ids[3]) != 4 ||
	                   !ids[0] || !ids[1] || !ids[2] || !ids[3]))
		return cp_err_set(err, CP_E_UNSUPPORTED, "the sandbox could not leave the root user");
	if (s->as_root && (ids[0] != run->uid || ids[1] != run->uid))
		return cp_err_set(err, CP_E_UNSUPPORTED,
		                  "the sandbox ran as uid %lu, not the sandbox user %lu", ids[0],
		                  (unsigned long)run->uid);
	return 0;
}
