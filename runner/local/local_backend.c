/*
 * local.c - the local backend: processes started with posix_spawn and
 * reaped here with wait4() (for their resource usage: libuv's uv_spawn
 * reaps its children itself and keeps no usage), their pipes on the loop.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fileio.h"
#include "runner/local/cgroup.h"
#include "runner/local/local_backend.h"
#include "runner/local/local_sandbox.h"
#include "runner/local/sandbox_uids.h"
#include "runner/local/workspace.h"
#include "base/buf.h"
#include "base/hex.h"
#include "base/log.h"
#include "store/snapshots.h"

/* After the process exits, how long its pipes may stay open (a child that
 * escaped the kill still holds them) before we stop waiting for EOF. */
#define DRAIN_MS 2000
#define MAX_ARGS (LOCAL_SANDBOX_MAX_ARGS + 64)

struct local {
	struct codepod_backend base;
	uv_loop_t *loop;
	char *state_dir;
	char *ws_root;
	char *node;      /* resolved path of the Node binary */
	char *node_root; /* its install folder, bound into the sandbox */
	int isolate;
	struct local_sandbox sb; /* isolate only */
	struct local_uids uids;   /* as root without --sandbox-user: owners of workspaces */
	unsigned live;    /* process handles not closed yet */
	int closing;      /* destroy was asked: free once live reaches 0 */
	uv_signal_t sigchld;      /* reaps the processes of `running` (wait4) */
	int watching;             /* sigchld is started (until local_free) */
	int subreaper;            /* orphans below us come to us (PR_SET_CHILD_SUBREAPER) */
	struct codepod_proc *running; /* spawned and not reaped yet */
	long clk_tck;     /* /proc's clock ticks per second */
	struct local_cg_root cg;  /* isolated: the sandboxes' cgroups (kind NONE: none) */
	unsigned long cg_seq;     /* names the execution folders */
	uv_timer_t cg_retry;      /* removes the folders still busy at their reaping */
	int cg_timer;             /* cg_retry is initialised */
	struct store_snaps *snaps; /* --snapshot-url: owned, or NULL */
	int snaps_closing;
	struct local_ws *wsm;     /* the workspaces that are more than folders */
	int wsm_closing;
};

/* A spawn waiting for its workspace's restore: the request, copied. */
struct deferred {
	char **argv;
	char *input;
	size_t input_len;
	unsigned long memory_mb;
	uint64_t ws_bytes, ws_files;
	char *exec_id;
	char *conversation;
	struct cp_buf stdin_q; /* what write() was given meanwhile */
	int kill_asked;
	uid_t uid;             /* the workspace's owner to be, (uid_t)-1: ours */
	gid_t gid;
};

struct codepod_proc {
	struct local *b;
	struct codepod_proc *next_running; /* in b->running until reaped */
	const struct codepod_proc_cbs *cbs;
	void *ud;
	uv_pipe_t in, out, err;
	uv_timer_t drain;
	int pid;         /* the process spawned (bubblewrap's, isolated); 0 once reaped */
	int exited, out_eof, err_eof, reported;
	int killed_told; /* cbs->killed() was called */
	int handles_open;
	uint64_t wrap_us;    /* CPU bubblewrap's own two processes had used at the hello */
	struct codepod_usage seen; /* the largest of every reading so far */
	int outer_reaped;    /* the process spawned was reaped: */
	int wait_status;     /* wait4()'s, -1: not known */
	int have_rusage;
	struct rusage rusage;
	pid_t init_pid;      /* isolated: bubblewrap's PID-namespace init, once seen */
	int have_init_rusage; /* it was reaped here (this process is its subreaper) */
	struct rusage init_rusage;
	struct local_cg *cg;  /* its cgroup (NULL: none), until reaped */
	uv_poll_t oom_poll;   /* cgroup v1: the OOM event of cg */
	int polling;          /* oom_poll is initialised and not closed */
	int oom_killed;       /* the OOM event came: the group was killed */
	struct codepod_proc_exit ex;
	struct deferred *def; /* waiting for a restore or its workspace, or NULL */
	int restoring;        /* its workspace waits for a restore, into it once ready */
	int regrown;          /* ... which was made larger for a snapshot once */
	struct store_restore_need need; /* what a snapshot too large needs */
	int waiting_ws;       /* waiting for its workspace (workspace.h) */
	int ws_held;          /* it holds its workspace: dropped when freed */
	char ws_hash[33];     /* the workspace's folder name, for snapshots */
	char *ws;
};

struct write_req {
	uv_write_t req;
	char data[];
};

static int mkdir_p(const char *path, struct cp_err *err)
{
	char buf[4096];
	size_t n = strlen(path);
	if (n == 0 || n >= sizeof buf)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "path too long: %s", path);
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0700) && errno != EEXIST)
			return cp_err_errno(err, CP_E_IO, errno, "mkdir %s", buf);
		*p = '/';
	}
	if (mkdir(buf, 0700) && errno != EEXIST)
		return cp_err_errno(err, CP_E_IO, errno, "mkdir %s", buf);
	return 0;
}

/* As root, the workspace belongs to its conversation's sandbox user, the one
 * writer the program can be; the program runs as its owner. Everything above
 * it stays root's (0700). A new workspace (still root's, from mkdir_p) gets
 * the fixed --sandbox-user or a user of its own from the range
 * (sandbox_uids.h); one made before keeps its owner, unless that is not the
 * user it would get now (made under --sandbox-user and now with a user per
 * conversation, or the other way): then it gets one, and *move_from says
 * whose entries are handed over before the program starts (workspace.h).
 * Until that is done, the folder keeps its old owner, so a codepod that
 * dies meanwhile starts the move again. */
static int own_workspace(struct local *b, const char *conversation, const char *ws,
                         uid_t *uid, gid_t *gid, uid_t *move_from, struct cp_err *err)
{
	struct stat st;
	*uid = 0;
	*gid = 0;
	*move_from = (uid_t)-1;
	if (!b->isolate || !b->sb.as_root)
		return 0;
	if (lstat(ws, &st) || !S_ISDIR(st.st_mode))
		return cp_err_set(err, CP_E_IO, "workspace %s is not a folder", ws);
	uid_t want_u = b->sb.uid;
	gid_t want_g = b->sb.gid;
	if (!b->sb.fixed_user) {
		if (st.st_uid != 0 && local_uids_in_range(&b->uids, st.st_uid)) {
			/* the program's own, from this range */
			*uid = st.st_uid;
			*gid = st.st_gid;
			return 0;
		}
		const char *slash = strrchr(ws, '/');
		if (st.st_uid != 0 && b->wsm &&
		    local_ws_moving(b->wsm, slash ? slash + 1 : ws, uid, gid, move_from))
			return 0; /* its move is under way: to the user taken for it */
		int rc = local_uids_take(&b->uids, conversation, &want_u, err);
		if (rc)
			return rc;
		want_g = (gid_t)want_u;
	}
	*uid = want_u;
	*gid = want_g;
	if (st.st_uid == want_u && st.st_gid == want_g)
		return 0;
	if (st.st_uid != 0 && st.st_uid != want_u) {
		*move_from = st.st_uid;
		return 0;
	}
	if (lchown(ws, want_u, want_g))
		return cp_err_errno(err, CP_E_IO, errno, "chown %s", ws);
	return 0;
}

/* The workspace folder name is a hash of the scope key: the raw key can
 * hold user data and any byte. */
static int workspace_path(struct local *b, const char *conversation, char *out,
                          size_t cap, uid_t *uid, gid_t *gid, uid_t *move_from,
                          struct cp_err *err)
{
	unsigned char md[32];
	unsigned int mdlen = 0;
	if (!EVP_Digest(conversation, strlen(conversation), md, &mdlen, EVP_sha256(), NULL))
		return cp_err_set(err, CP_E_INTERNAL, "sha256 failed");
	char hex[33];
	cp_hex_encode(md, 16, hex);
	int n = snprintf(out, cap, "%s/%s", b->ws_root, hex);
	if (n < 0 || (size_t)n >= cap)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "state folder path too long");
	if (!uid)
		return 0; /* the path alone */
	int rc = mkdir_p(out, err);
	return rc ? rc : own_workspace(b, conversation, out, uid, gid, move_from, err);
}

/* The file beside workspace @ws that says it waits for its restore
 * (snapshots.h, store_snaps_restore_into). */
static void restore_mark_of(const char *ws, char out[4300])
{
	snprintf(out, 4300, "%s.restoring", ws);
}

static void report_if_done(struct codepod_proc *p);

static void local_free(struct local *b);
static void local_closed(struct local *b);

static void deferred_free(struct deferred *d)
{
	if (!d)
		return;
	for (size_t i = 0; d->argv && d->argv[i]; i++)
		free(d->argv[i]);
	free(d->argv);
	free(d->input);
	free(d->exec_id);
	free(d->conversation);
	cp_buf_free(&d->stdin_q);
	free(d);
}

static void on_handle_closed(uv_handle_t *h)
{
	struct codepod_proc *p = h->data;
	if (--p->handles_open == 0) {
		struct local *b = p->b;
		if (p->ws_held && b->wsm)
			local_ws_drop(b->wsm, p->ws_hash);
		deferred_free(p->def);
		free(p->ws);
		free(p);
		if (--b->live == 0 && b->closing)
			local_closed(b);
	}
}

static void stop_oom_poll(struct codepod_proc *p)
{
	if (p->polling) {
		p->polling = 0;
		uv_close((uv_handle_t *)&p->oom_poll, on_handle_closed);
	}
}

static void close_all(struct codepod_proc *p)
{
	stop_oom_poll(p);
	uv_handle_t *hs[] = { (uv_handle_t *)&p->in, (uv_handle_t *)&p->out,
	                      (uv_handle_t *)&p->err, (uv_handle_t *)&p->drain };
	for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
		if (!uv_is_closing(hs[i]))
			uv_close(hs[i], on_handle_closed);
}

static void report_if_done(struct codepod_proc *p)
{
	if (p->reported || !p->exited || !p->out_eof || !p->err_eof)
		return;
	p->reported = 1;
	uv_timer_stop(&p->drain);
	/* The workspace may have changed: a snapshot follows (debounced),
	 * the outcome does not wait for it. Not of one whose restore did not
	 * end: that would replace the conversation's snapshot with nothing. */
	if (p->b->snaps && p->ws && p->ws_hash[0] && !p->restoring)
		store_snaps_touch(p->b->snaps, p->ws_hash, p->ws);
	p->cbs->exited(p->ud, &p->ex);
	close_all(p);
}

static void on_drain_timeout(uv_timer_t *t)
{
	struct codepod_proc *p = t->data;
	cp_log(CP_LOG_WARN, "local.drain_timeout", "pid", json_integer(p->pid), NULL);
	p->out_eof = p->err_eof = 1;
	report_if_done(p);
}

static void kill_tree(struct codepod_proc *p)
{
	/* bubblewrap's own process is the group leader (setsid at the
	 * spawn); with --die-with-parent its PID-namespace init
	 * dies with it, and the kernel then kills every process inside. Without
	 * bubblewrap the group kill reaches every child that did not leave it. */
	if (p->pid > 0) {
		kill(-p->pid, SIGKILL);
		kill(p->pid, SIGKILL);
	}
}

static void merge_usage(struct codepod_usage *into, const struct codepod_usage *u)
{
	if (!u->known)
		return;
	into->known = 1;
	if (u->cpu_us > into->cpu_us)
		into->cpu_us = u->cpu_us;
	if (u->max_rss_bytes > into->max_rss_bytes)
		into->max_rss_bytes = u->max_rss_bytes;
}

static uint64_t ticks_us(const struct local *b, uint64_t ticks)
{
	return ticks * 1000000u / (uint64_t)b->clk_tck;
}

static uint64_t rusage_us(const struct rusage *ru)
{
	return (uint64_t)ru->ru_utime.tv_sec * 1000000u + (uint64_t)ru->ru_utime.tv_usec +
	       (uint64_t)ru->ru_stime.tv_sec * 1000000u + (uint64_t)ru->ru_stime.tv_usec;
}

/*
 * wait4()'s figures: each process's own and those of every descendant it
 * reaped. Isolated, bubblewrap's process leaves as soon as its child, the
 * PID-namespace init, reports the runner's exit, without waiting for it;
 * the init goes on to reap the runner and every process of the namespace
 * (orphans, and the ones the kernel kills when the namespace ends). As
 * the subreaper, this process inherits the init and reaps it too: the two
 * together hold everything that ran in the sandbox, so a runner that ended
 * by itself is counted whole. ru_maxrss is the peak of the largest single
 * process.
 */
static void usage_of_rusage(const struct codepod_proc *p, struct codepod_usage *u)
{
	uint64_t us = 0, kb = 0;
	if (p->have_rusage) {
		us += rusage_us(&p->rusage);
		kb = (uint64_t)p->rusage.ru_maxrss;
	}
	if (p->have_init_rusage) {
		us += rusage_us(&p->init_rusage);
		if ((uint64_t)p->init_rusage.ru_maxrss > kb)
			kb = (uint64_t)p->init_rusage.ru_maxrss;
	}
	u->known = p->have_rusage || p->have_init_rusage;
	u->cpu_us = us > p->wrap_us ? us - p->wrap_us : 0;
	u->max_rss_bytes = kb * 1024u;
}

/* A folder still busy is tried again until it goes (processes the
 * namespace's end killed are still being freed), with SIGKILL for anything
 * listed in it. */
static void cg_retry_now(struct local *b)
{
	int left = 0;
	for (struct local_cg *cg = b->cg.live, *next; cg; cg = next) {
		next = cg->next;
		if (!cg->orphan)
			continue;
		local_cg_kill_all(cg);
		if (local_cg_remove(&b->cg, cg) == 0)
			free(cg);
		else
			left = 1;
	}
	if (!left && b->cg_timer)
		uv_timer_stop(&b->cg_retry);
}

static void on_cg_retry(uv_timer_t *t)
{
	cg_retry_now(t->data);
}

/* The execution's processes are all reaped: was it killed for memory, and
 * its cgroup goes. */
static void cg_reaped(struct codepod_proc *p)
{
	struct local *b = p->b;
	struct local_cg *cg = p->cg;
	if (!cg)
		return;
	p->cg = NULL;
	stop_oom_poll(p);
	if (!p->ex.unavailable && cg->limit_mb &&
	    (p->oom_killed || local_cg_oom_kills(&b->cg, cg) > 0)) {
		p->ex.oom = 1;
		snprintf(p->ex.detail, sizeof p->ex.detail,
		         "killed for memory (OOM) at the sandbox's limit of %lu MiB (maxMemoryMb %lu "
		         "plus %lu MiB for Node itself)", cg->limit_mb, cg->limit_mb - LOCAL_CG_SLACK_MB,
		         LOCAL_CG_SLACK_MB);
	}
	local_cg_kill_all(cg);
	if (local_cg_remove(&b->cg, cg) == 0) {
		free(cg);
		return;
	}
	cg->orphan = 1;
	if (b->cg_timer && !uv_is_active((uv_handle_t *)&b->cg_retry))
		uv_timer_start(&b->cg_retry, on_cg_retry, 100, 100);
}

/* Everything spawned was reaped (p->wait_status, the rusages). */
static void proc_reaped(struct codepod_proc *p)
{
	int st = p->wait_status;
	int64_t status = -1;
	int sig = 0;
	if (st >= 0 && WIFEXITED(st))
		status = WEXITSTATUS(st);
	else if (st >= 0 && WIFSIGNALED(st))
		sig = WTERMSIG(st);
	struct codepod_usage u;
	usage_of_rusage(p, &u);
	merge_usage(&p->seen, &u);
	p->ex.usage = p->seen;
	p->exited = 1;
	/* bubblewrap's init reports a child killed by signal N as exit status
	 * 128 + N, as a shell does. (A program calling process.exit(137) is
	 * reported as killed by SIGKILL too: the two cannot be told apart.) */
	if (!sig && p->b->isolate && status > 128 && status <= 128 + 64)
		sig = (int)status - 128;
	p->ex.code = sig ? -1 : (int)status;
	p->ex.signal = sig;
	kill_tree(p); /* leftovers of a program that exited by itself */
	p->pid = 0;
	cg_reaped(p);
	if (!p->out_eof || !p->err_eof)
		uv_timer_start(&p->drain, on_drain_timeout, DRAIN_MS, 0);
	report_if_done(p);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	(void)h;
	/* Loop thread only; consumed before the next read. Room for a whole
	 * file chunk's frame (256 KiB) and more: the frame parser then hands
	 * it on from here, not collected from pieces. */
	static char slab[1 << 19];
	(void)hint;
	*buf = uv_buf_init(slab, sizeof slab);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct codepod_proc *p = s->data;
	int is_out = s == (uv_stream_t *)&p->out;
	if (n > 0) {
		if (!p->reported)
			(is_out ? p->cbs->out : p->cbs->err)(p->ud, buf->base, (size_t)n);
		return;
	}
	if (n == 0)
		return;
	uv_read_stop(s);
	if (is_out)
		p->out_eof = 1;
	else
		p->err_eof = 1;
	report_if_done(p);
}

/* Slots kept in front of the sandbox's command line for the cgroup join:
 * sh -c SCRIPT NAME FILE... -- */
#define JOIN_ARGS (5 + LOCAL_CG_NCTL)

/* The shell moves itself into the execution's cgroup (one write per
 * hierarchy: its own migration, in the child, not on codepod's loop),
 * then becomes bubblewrap: everything of the sandbox starts inside, and a
 * write that fails ends it before anything runs. */
static const char join_script[] =
	"while [ \"$1\" != -- ]; do echo $$ > \"$1\" || "
	"{ echo 'codepod: cannot join the execution cgroup' >&2; exit 125; }; shift; done; "
	"shift; exec \"$@\"";

/* @argv with the join in front (its room was kept by build_argv). */
static void prepend_join(const struct local_cg *cg, const char **argv)
{
	const char *files[LOCAL_CG_NCTL];
	size_t nf = local_cg_procs(cg, files, LOCAL_CG_NCTL), len = 0, k = 0;
	while (argv[len])
		len++;
	size_t shift = 4 + nf + 1;
	memmove(argv + shift, argv, (len + 1) * sizeof *argv);
	argv[k++] = "/bin/sh";
	argv[k++] = "-c";
	argv[k++] = join_script;
	argv[k++] = "codepod-join";
	for (size_t i = 0; i < nf; i++)
		argv[k++] = files[i];
	argv[k++] = "--";
}

static int build_argv(struct local *b, const struct codepod_spawn_req *req, const char *ws,
                      uid_t uid, gid_t gid, struct local_sandbox_buf *buf, const char **argv,
                      struct cp_err *err)
{
	size_t n = 0;
	if (b->isolate) {
		struct local_sandbox_run run = { b->state_dir, b->node_root, ws, req->memory_mb, uid, gid };
		int used = local_sandbox_argv(&b->sb, &run, buf, argv, MAX_ARGS - 2 - JOIN_ARGS);
		if (used < 0 && buf->why.code)
			return cp_err_set(err, buf->why.code, "%s", buf->why.msg);
		if (used < 0)
			return cp_err_set(err, CP_E_INTERNAL, "sandbox command line too long");
		n = (size_t)used;
	}
	argv[n++] = b->node;
	for (size_t i = 1; req->argv[i]; i++) {
		if (n + 2 + JOIN_ARGS > MAX_ARGS)
			return cp_err_set(err, CP_E_INVALID_REQUEST, "too many runner arguments");
		argv[n++] = req->argv[i];
	}
	argv[n] = NULL;
	return 0;
}

/* Whether any process is left to reap: only then does the SIGCHLD
 * watcher keep the loop running (a process's pipes may reach EOF before
 * its exit is seen). */
static void running_changed(struct local *b)
{
	if (b->running)
		uv_ref((uv_handle_t *)&b->sigchld);
	else
		uv_unref((uv_handle_t *)&b->sigchld);
}

static pid_t wait4_now(pid_t pid, int *st, struct rusage *ru)
{
	pid_t r;
	do
		r = wait4(pid, st, WNOHANG, ru);
	while (r < 0 && errno == EINTR);
	return r;
}

static void is_uv_child(uv_handle_t *h, void *arg)
{
	int *pid = arg;
	if (h->type == UV_PROCESS && ((uv_process_t *)h)->pid == *pid)
		*pid = 0;
}

/* As the subreaper, a process left by another command codepod ran (a tool
 * of `codepod run` that started a daemon) comes to this process when it
 * ends: reap it, unless it is one of ours (reaped above, or soon) or one
 * libuv started and waits for itself. The children waited for are only
 * looked at (WNOWAIT) first. */
static void reap_strays(struct local *b)
{
	for (int i = 0; i < 64; i++) {
		siginfo_t si;
		memset(&si, 0, sizeof si);
		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) || si.si_pid <= 0)
			return;
		for (struct codepod_proc *p = b->running; p; p = p->next_running)
			if (si.si_pid == p->pid || si.si_pid == p->init_pid)
				return; /* ended after its turn above: its SIGCHLD follows */
		int pid = si.si_pid;
		uv_walk(b->loop, is_uv_child, &pid);
		if (!pid)
			return; /* libuv's: the ones behind it wait for the next SIGCHLD */
		int st;
		waitpid(si.si_pid, &st, WNOHANG);
	}
}

/* SIGCHLD: reap what ended of ours, with its usage. Signals merge, so every
 * process not reaped yet is asked; libuv's own child watcher waits only
 * for the processes uv_spawn started (other modules' commands). */
static void on_sigchld(uv_signal_t *h, int signum)
{
	(void)signum;
	struct local *b = h->data;
	struct codepod_proc *done = NULL;
	for (struct codepod_proc **pp = &b->running; *pp;) {
		struct codepod_proc *p = *pp;
		int st = 0;
		if (!p->outer_reaped) {
			pid_t r = wait4_now(p->pid, &st, &p->rusage);
			if (r == 0) {
				pp = &p->next_running;
				continue;
			}
			/* r < 0 (ECHILD): not ours to wait for after all; it ended */
			p->outer_reaped = 1;
			p->wait_status = r == p->pid ? st : -1;
			p->have_rusage = r == p->pid;
		}
		/* Once bubblewrap's process is gone its init is ours (or was
		 * reaped by it already: ECHILD); the exit is told when it is gone too. */
		if (p->init_pid > 0 && b->subreaper) {
			pid_t r = wait4_now(p->init_pid, &st, &p->init_rusage);
			if (r == 0) {
				/* It outlives bubblewrap's process: a kill that came
				 * before it had asked to die with its parent (a runner
				 * killed just after its start) missed it. Not reaped,
				 * it is ours and its pid its own: the signal reaches it. */
				kill(p->init_pid, SIGKILL);
				pp = &p->next_running;
				continue;
			}
			p->have_init_rusage = r == p->init_pid;
			p->init_pid = 0;
		}
		*pp = p->next_running;
		p->next_running = done;
		done = p;
	}
	if (b->subreaper)
		reap_strays(b);
	running_changed(b);
	/* Reported after the walk: an exit report may start another process. */
	while (done) {
		struct codepod_proc *p = done;
		done = p->next_running;
		p->next_running = NULL;
		proc_reaped(p);
	}
}

/* The processes started get this PATH; a bare command name is looked up
 * in it, as execvp would in their environment. */
#define CHILD_PATH "/usr/local/bin:/usr/bin:/bin"

static int resolve_exe(const char *name, char *out, size_t cap)
{
	if (strchr(name, '/'))
		return snprintf(out, cap, "%s", name) < (int)cap ? 0 : -1;
	const char *dir = CHILD_PATH;
	while (*dir) {
		size_t n = strcspn(dir, ":");
		int w = snprintf(out, cap, "%.*s/%s", (int)n, dir, name);
		if (w > 0 && (size_t)w < cap && access(out, X_OK) == 0)
			return 0;
		dir += n + (dir[n] == ':');
	}
	return -1;
}

/* A copy of @fd numbered 10 or more (close-on-exec), so that placing the
 * child's descriptors on 0 to 3 never overwrites one still to be placed
 * (codepod's own 0-2 may have been closed when it started). */
static int lift_fd(int fd)
{
	int hi = fcntl(fd, F_DUPFD_CLOEXEC, 10);
	close(fd);
	return hi;
}

/*
 * Start @argv as a new session (so its group can be killed as one), its
 * stdin/stdout/stderr on socket pairs (what uv_spawn's pipes are) whose
 * other ends become p->in/out/err, and @sfd on fd 3 (the seccomp filter for
 * bubblewrap; -1: none). @plain_mb: the soft data limit for a process
 * without the sandbox, set on the child with prlimit() right after the
 * spawn (posix_spawn has no pre-exec hook, and lowering codepod's own limit
 * around it made the spawn's own stack allocation fail once codepod used
 * more than the limit); 0: none.
 */
/* Bubblewrap is PID 1 of the sandbox, and a program reads its command
 * line in /proc/1/cmdline: its options (the hidden paths, the state folder,
 * the workspaces' folders) go through a memfd it reads as --args 4 instead,
 * and @argv becomes `bwrap --args 4 -- COMMAND...`. bubblewrap closes the
 * descriptor once read. Return: the memfd, or -1 with @err filled. */
static int bwrap_args_fd(const char **argv, struct cp_err *err)
{
	size_t dd = 1;
	while (argv[dd] && strcmp(argv[dd], "--"))
		dd++;
	if (!argv[dd] || dd < 2) {
		cp_err_set(err, CP_E_INTERNAL, "the sandbox command line has no --");
		return -1;
	}
	int fd = memfd_create("codepod-bwrap-args", MFD_CLOEXEC);
	if (fd < 0) {
		cp_err_errno(err, CP_E_SANDBOX_UNAVAILABLE, errno, "memfd_create");
		return -1;
	}
	/* One write, not one per option: a sandbox has hundreds of them, and
	 * every execution's start paid a system call for each on the loop. */
	struct cp_buf all;
	cp_buf_init(&all, SIZE_MAX);
	for (size_t i = 1; i < dd; i++) {
		if (cp_buf_add(&all, argv[i], strlen(argv[i]) + 1, err)) {
			cp_buf_free(&all);
			close(fd);
			return -1;
		}
	}
	ssize_t wrote = write(fd, all.bytes, all.len);
	int werr = errno;
	size_t want = all.len;
	cp_buf_free(&all);
	if (wrote != (ssize_t)want) {
		close(fd);
		cp_err_errno(err, CP_E_SANDBOX_UNAVAILABLE, wrote < 0 ? werr : EIO,
		             "writing bubblewrap's options");
		return -1;
	}
	if (lseek(fd, 0, SEEK_SET) != 0) {
		close(fd);
		cp_err_errno(err, CP_E_SANDBOX_UNAVAILABLE, errno, "lseek");
		return -1;
	}
	argv[1] = "--args";
	argv[2] = "4";
	size_t to = 3;
	for (size_t i = dd; argv[i]; i++)
		argv[to++] = argv[i];
	argv[to] = NULL;
	return fd;
}

static int spawn_child(struct codepod_proc *p, const char *const *argv, char *const *env,
                       const char *cwd, int sfd, int afd, unsigned long plain_mb, pid_t *pid,
                       struct cp_err *err)
{
	char exe[4096];
	if (resolve_exe(argv[0], exe, sizeof exe))
		return cp_err_set(err, CP_E_SANDBOX_UNAVAILABLE, "cannot start %s: not found in %s",
		                  argv[0], CHILD_PATH);
	uv_os_sock_t pair[3][2]; /* [i][0] the child's end (blocking), [i][1] ours */
	int made = 0, rc = 0;
	for (; made < 3; made++) {
		rc = uv_socketpair(SOCK_STREAM, 0, pair[made], 0, UV_NONBLOCK_PIPE);
		if (rc)
			break;
		pair[made][0] = lift_fd(pair[made][0]);
		if (pair[made][0] < 0) {
			rc = UV_EMFILE;
			close(pair[made][1]);
			break;
		}
	}
	/* Our ends go on the loop first: once the child runs, nothing fails. */
	uv_pipe_t *ours[3] = { &p->in, &p->out, &p->err };
	for (int i = 0; i < made; i++) {
		if (rc == 0)
			rc = uv_pipe_open(ours[i], pair[i][1]);
		else /* (an opened one closes with its handle) */
			close(pair[i][1]);
	}
	int child3 = sfd >= 0 && rc == 0 ? fcntl(sfd, F_DUPFD_CLOEXEC, 10) : -1;
	if (rc == 0 && sfd >= 0 && child3 < 0)
		rc = UV_EMFILE;
	int child4 = afd >= 0 && rc == 0 ? fcntl(afd, F_DUPFD_CLOEXEC, 10) : -1;
	if (rc == 0 && afd >= 0 && child4 < 0)
		rc = UV_EMFILE;
	if (rc == 0) {
		posix_spawn_file_actions_t fa;
		posix_spawnattr_t at;
		sigset_t none, all;
		sigemptyset(&none);
		sigfillset(&all);
		posix_spawn_file_actions_init(&fa);
		posix_spawnattr_init(&at);
		for (int i = 0; i < 3; i++)
			posix_spawn_file_actions_adddup2(&fa, pair[i][0], i);
		if (child3 >= 0)
			posix_spawn_file_actions_adddup2(&fa, child3, 3);
		if (child4 >= 0)
			posix_spawn_file_actions_adddup2(&fa, child4, 4);
		posix_spawn_file_actions_addchdir_np(&fa, cwd);
		/* as uv_spawn leaves them: every signal default, none blocked */
		posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
		                                   POSIX_SPAWN_SETSIGDEF);
		posix_spawnattr_setsigmask(&at, &none);
		posix_spawnattr_setsigdefault(&at, &all);
		int e = posix_spawn(pid, exe, &fa, &at, (char *const *)argv, env);
		struct rlimit old, lim;
		if (e == 0 && plain_mb && getrlimit(RLIMIT_DATA, &old) == 0) {
			lim = old;
			rlim_t want = (rlim_t)(plain_mb * 2 + 1024) << 20;
			lim.rlim_cur = old.rlim_max == RLIM_INFINITY || want < old.rlim_max ? want : old.rlim_max;
			prlimit(*pid, RLIMIT_DATA, &lim, NULL);
		}
		posix_spawn_file_actions_destroy(&fa);
		posix_spawnattr_destroy(&at);
		if (e)
			rc = uv_translate_sys_error(e);
	}
	if (child3 >= 0)
		close(child3);
	if (child4 >= 0)
		close(child4);
	for (int i = 0; i < made; i++)
		close(pair[i][0]);
	if (rc)
		return cp_err_set(err, CP_E_SANDBOX_UNAVAILABLE, "cannot start %s: %s", argv[0],
		                  uv_strerror(rc));
	return 0;
}

static int local_write(struct codepod_proc *p, const char *buf, size_t len, struct cp_err *err);
static void local_kill(struct codepod_proc *p);

/* cgroup v1's OOM event: the kernel's OOM killer picks one process; the
 * rest of the execution is killed with it, as cgroup v2's memory.oom.group
 * does, and the exit says why. */
static void on_oom_event(uv_poll_t *h, int status, int events)
{
	(void)events;
	struct codepod_proc *p = h->data;
	uint64_t n;
	if (p->cg && read(p->cg->oom_fd, &n, sizeof n) < 0 && status == 0)
		return; /* (EAGAIN: nothing yet) */
	uv_poll_stop(h);
	p->oom_killed = 1;
	cp_log(CP_LOG_INFO, "local.oom_killed", "pid", json_integer(p->pid),
	       "limitMb", json_integer(p->cg ? (json_int_t)p->cg->limit_mb : 0), NULL);
	if (p->cg)
		local_cg_kill_all(p->cg);
	kill_tree(p);
}

/* The execution's cgroup, before its runner is spawned: a few mkdir and
 * writes on the cgroup pseudo-filesystem, synchronous on the loop (kernel
 * memory only; about half a millisecond with the rmdir at the end). */
static int cg_make(struct local *b, struct codepod_proc *p, unsigned long memory_mb,
                   struct cp_err *err)
{
	if (b->cg.kind == LOCAL_CG_NONE)
		return 0;
	struct local_cg *cg = calloc(1, sizeof *cg);
	if (!cg)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	char name[32];
	snprintf(name, sizeof name, "e%lu", ++b->cg_seq);
	struct cp_err why;
	int rc = local_cg_make(&b->cg, cg, name, memory_mb, &why);
	if (rc) {
		free(cg);
		return cp_err_set(err, CP_E_SANDBOX_UNAVAILABLE, "%s", why.msg);
	}
	p->cg = cg;
	return 0;
}

/* The spawned shell joined the execution's cgroup before it became
 * bubblewrap (join_script); on cgroup v1 the OOM event is watched from now. */
static void cg_watch(struct codepod_proc *p)
{
	if (!p->cg || p->cg->oom_fd < 0)
		return;
	if (uv_poll_init(p->b->loop, &p->oom_poll, p->cg->oom_fd) == 0) {
		p->oom_poll.data = p;
		p->polling = 1;
		p->handles_open++;
		uv_poll_start(&p->oom_poll, UV_READABLE, on_oom_event);
	}
}

/* Starts @p's process for @req in @ws (made and owned: workspace_path). */
static int launch(struct codepod_proc *p, const struct codepod_spawn_req *req, const char *ws,
                  uid_t uid, gid_t gid, struct cp_err *err)
{
	struct local *b = p->b;
	const char *argv[MAX_ARGS];
	struct local_sandbox_buf argbuf;
	int rc = build_argv(b, req, ws, uid, gid, &argbuf, argv, err);
	if (rc)
		return rc;
	/* bubblewrap reads its options from fd 4, the seccomp filter from fd 3 */
	int afd = b->isolate ? bwrap_args_fd(argv, err) : -1;
	if (b->isolate && afd < 0)
		return err->code;
	int sfd = b->isolate ? local_sandbox_seccomp_fd(&b->sb, err) : -1;
	if (b->isolate && sfd < 0) {
		close(afd);
		return sfd;
	}
	char home[4200];
	/* isolated, the workspace is LOCAL_SANDBOX_WORKSPACE inside; without a
	 * mount namespace it keeps its host path */
	snprintf(home, sizeof home, "HOME=%s", b->isolate ? LOCAL_SANDBOX_WORKSPACE : ws);
	static char path_env[] = "PATH=/usr/local/bin:/usr/bin:/bin";
	static char tmp_env[] = "TMPDIR=/tmp";
	static char lang_env[] = "LANG=C.UTF-8";
	char *env[] = { path_env, home, tmp_env, lang_env, NULL };
	/* Isolated, prlimit sets hard limits inside the sandbox; plain
	 * processes get the soft data limit around the fork. */
	rc = cg_make(b, p, req->memory_mb, err);
	if (rc) {
		if (sfd >= 0)
			close(sfd);
		if (afd >= 0)
			close(afd);
		return rc;
	}
	if (p->cg)
		prepend_join(p->cg, argv);
	pid_t pid = 0;
	rc = spawn_child(p, argv, env, ws, sfd, afd, b->isolate ? 0 : req->memory_mb, &pid, err);
	if (sfd >= 0)
		close(sfd);
	if (afd >= 0)
		close(afd);
	if (rc) {
		if (p->cg && local_cg_remove(&b->cg, p->cg) == 0)
			free(p->cg);
		else if (p->cg)
			p->cg->orphan = 1;
		p->cg = NULL;
		return rc;
	}
	p->pid = (int)pid;
	p->next_running = b->running;
	b->running = p;
	running_changed(b);
	uv_read_start((uv_stream_t *)&p->out, on_alloc, on_read);
	uv_read_start((uv_stream_t *)&p->err, on_alloc, on_read);
	cp_log(CP_LOG_DEBUG, "local.spawn", "id", json_string(req->exec_id),
	       "pid", json_integer(p->pid), "isolated", json_boolean(b->isolate), NULL);
	struct cp_err werr;
	cg_watch(p);
	if (local_write(p, req->input, req->input_len, &werr))
		local_kill(p); /* exited() follows and tells the story */
	return 0;
}

/* A process that never started: exited() tells why, from the loop. */
static void never_started(struct codepod_proc *p, int unavailable, const char *why)
{
	p->ex.code = -1;
	p->ex.signal = unavailable ? 0 : SIGKILL;
	p->ex.unavailable = unavailable;
	snprintf(p->ex.detail, sizeof p->ex.detail, "%s", why ? why : "");
	p->ex.usage = p->seen;
	p->exited = p->out_eof = p->err_eof = 1;
	report_if_done(p);
}

static struct deferred *defer(const struct codepod_spawn_req *req);
static int restore_start(struct codepod_proc *p, struct cp_err *err);

/* The deferred request starts now in its workspace: what write() queued
 * meanwhile follows the runner's input. */
static void launch_deferred(struct codepod_proc *p)
{
	struct deferred *d = p->def;
	struct codepod_spawn_req req = {
		.conversation = d->conversation, .exec_id = d->exec_id,
		.argv = (const char *const *)d->argv, .input = d->input, .input_len = d->input_len,
		.memory_mb = d->memory_mb, .ws_bytes = d->ws_bytes, .ws_files = d->ws_files,
	};
	struct cp_err err = { 0 };
	p->def = NULL;
	int rc = launch(p, &req, p->ws, d->uid, d->gid, &err);
	if (rc) {
		p->def = d; /* freed with the handle */
		never_started(p, 1, err.msg);
		return;
	}
	if (cp_buf_len(&d->stdin_q) && local_write(p, cp_buf_ptr(&d->stdin_q),
	                                           cp_buf_len(&d->stdin_q), &err))
		local_kill(p);
	deferred_free(d);
}

static void ws_ready(void *ud, int rc, const struct cp_err *rerr)
{
	struct codepod_proc *p = ud;
	p->waiting_ws = 0;
	if (!rc)
		p->ws_held = 1;
	if (rc || !p->def || p->def->kill_asked) {
		never_started(p, rc != 0 || !p->def,
		              rc && rerr ? rerr->msg : !p->def ? "out of memory" : NULL);
		return;
	}
	if (p->restoring) {
		struct cp_err err = { 0 };
		if (restore_start(p, &err))
			never_started(p, 1, err.msg);
		return;
	}
	launch_deferred(p);
}

/* The workspace made ready for @p (workspace.h), then its launch: 0 when
 * it started or waits (deferred), else an error and @p is not started. */
static int ready_then_launch(struct codepod_proc *p, const struct codepod_spawn_req *req,
                             uid_t uid, gid_t gid, uid_t move_from, struct cp_err *err)
{
	struct local *b = p->b;
	int rc = 0;
	if (b->wsm) {
		struct local_ws_req wr = { p->ws_hash, req->ws_bytes, req->ws_files,
		                           b->isolate && b->sb.as_root ? uid : (uid_t)-1,
		                           b->isolate && b->sb.as_root ? gid : (gid_t)-1, move_from };
		rc = local_ws_acquire(b->wsm, &wr, ws_ready, p, err);
		if (rc < 0)
			return rc;
	}
	if (rc == 0) {
		p->ws_held = b->wsm != NULL;
		if (p->restoring && !p->def)
			p->def = defer(req);
		if (p->restoring && !p->def)
			return cp_err_set(err, CP_E_NOMEM, "out of memory");
		if (p->def) {
			p->def->uid = uid;
			p->def->gid = gid;
			if (p->restoring)
				return restore_start(p, err);
			launch_deferred(p); /* made larger for a snapshot */
			return 0;
		}
		return launch(p, req, p->ws, uid, gid, err);
	}
	/* waiting: the request kept until its workspace is ready */
	p->waiting_ws = 1;
	if (!p->def)
		p->def = defer(req);
	if (!p->def) {
		/* ws_ready comes all the same: it finds no request */
		return 0;
	}
	p->def->uid = uid;
	p->def->gid = gid;
	return 0;
}

static void restored(void *ud, int rc, const struct cp_err *rerr, int64_t ms)
{
	struct codepod_proc *p = ud;
	struct deferred *d = p->def;
	struct local *b = p->b;
	if (rc == CP_E_TOO_BIG && !p->regrown && !d->kill_asked) {
		/* a snapshot larger than the workspace's bounds (taken under
		 * other ones): the workspace made as large as its files need and a
		 * quarter more, as a folder moved into an image is, then again */
		p->regrown = 1;
		uint64_t want = p->need.bytes + p->need.bytes / 4;
		uint64_t files = p->need.files + p->need.files / 4 + 64;
		if (want > (d->ws_bytes ? d->ws_bytes : LOCAL_WS_DEFAULT_BYTES))
			d->ws_bytes = want;
		if (files > (d->ws_files ? d->ws_files : LOCAL_WS_DEFAULT_FILES))
			d->ws_files = files;
		cp_log(CP_LOG_INFO, "snapshot.workspace_grown", "conversation",
		       json_string(p->ws_hash), "bytes", json_integer((json_int_t)d->ws_bytes),
		       "files", json_integer((json_int_t)d->ws_files), NULL);
		if (p->ws_held && b->wsm)
			local_ws_drop(b->wsm, p->ws_hash);
		p->ws_held = 0;
		struct codepod_spawn_req req = {
			.conversation = d->conversation, .exec_id = d->exec_id,
			.ws_bytes = d->ws_bytes, .ws_files = d->ws_files,
		};
		struct cp_err err = { 0 };
		if (ready_then_launch(p, &req, d->uid, d->gid, (uid_t)-1, &err))
			never_started(p, 1, err.msg);
		return;
	}
	if (rc || d->kill_asked) {
		never_started(p, rc != 0, rc && rerr ? rerr->msg : NULL);
		return;
	}
	p->restoring = 0;
	if (ms >= 0) {
		p->seen.restored = 1;
		p->seen.restore_ms = (uint64_t)ms;
	}
	launch_deferred(p);
}

/* The workspace is ready and held: its snapshot into it (snapshots.h),
 * then restored(). The entries' owner is the workspace's, as root. */
static int restore_start(struct codepod_proc *p, struct cp_err *err)
{
	struct local *b = p->b;
	char pending[4300];
	restore_mark_of(p->ws, pending);
	int own = b->isolate && b->sb.as_root;
	int rc = store_snaps_restore_into(b->snaps, p->ws_hash, p->ws, pending,
	                                  own ? p->def->uid : (uid_t)-1,
	                                  own ? p->def->gid : (gid_t)-1, &p->need, restored, p,
	                                  err);
	return rc == CP_E_NOMEM || !rc ? rc : CP_E_SANDBOX_UNAVAILABLE;
}

static char *dup_s(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* The request kept until the restore ends. */
static struct deferred *defer(const struct codepod_spawn_req *req)
{
	struct deferred *d = calloc(1, sizeof *d);
	if (!d)
		return NULL;
	size_t n = 0;
	while (req->argv[n])
		n++;
	d->argv = calloc(n + 1, sizeof *d->argv);
	d->input = malloc(req->input_len ? req->input_len : 1);
	d->exec_id = dup_s(req->exec_id);
	d->conversation = dup_s(req->conversation);
	cp_buf_init(&d->stdin_q, SIZE_MAX);
	int ok = d->argv && d->input && d->conversation && (d->exec_id || !req->exec_id);
	for (size_t i = 0; ok && i < n; i++)
		ok = (d->argv[i] = strdup(req->argv[i])) != NULL;
	if (!ok) {
		deferred_free(d);
		return NULL;
	}
	if (req->input_len)
		memcpy(d->input, req->input, req->input_len);
	d->input_len = req->input_len;
	d->memory_mb = req->memory_mb;
	d->ws_bytes = req->ws_bytes;
	d->ws_files = req->ws_files;
	d->uid = (uid_t)-1;
	d->gid = (gid_t)-1;
	return d;
}

static int local_spawn(struct codepod_backend *base, const struct codepod_spawn_req *req,
                       const struct codepod_proc_cbs *cbs, void *ud, struct codepod_proc **out,
                       struct cp_err *err)
{
	struct local *b = (struct local *)base;
	char ws[4096];
	uid_t uid = 0, move = (uid_t)-1;
	gid_t gid = 0;
	int rc = workspace_path(b, req->conversation, ws, sizeof ws, NULL, NULL, NULL, err);
	if (rc)
		return rc;
	/* A new workspace, or one whose restore was cut short (its mark,
	 * WS.restoring, made before the first try, stays until it is whole):
	 * made ready, then filled from its snapshot before the program
	 * starts, if it has one. */
	char pending[4300];
	restore_mark_of(ws, pending);
	struct stat st;
	int restore = 0;
	if (b->snaps && !b->snaps_closing) {
		restore = lstat(pending, &st) == 0;
		if (!restore && lstat(ws, &st) != 0 && errno == ENOENT) {
			int fd = open(pending, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
			if (fd < 0)
				return cp_err_errno(err, CP_E_SANDBOX_UNAVAILABLE, errno,
				                    "the workspace's restore mark");
			close(fd);
			restore = 1;
		}
	}
	rc = workspace_path(b, req->conversation, ws, sizeof ws, &uid, &gid, &move, err);
	if (rc)
		return rc;
	struct codepod_proc *p = calloc(1, sizeof *p);
	if (!p || !(p->ws = strdup(ws))) {
		free(p);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	const char *slash = strrchr(ws, '/');
	snprintf(p->ws_hash, sizeof p->ws_hash, "%s", slash ? slash + 1 : "");
	p->b = b;
	p->cbs = cbs;
	p->ud = ud;
	p->wait_status = -1;
	p->restoring = restore;
	uv_pipe_init(b->loop, &p->in, 0);
	uv_pipe_init(b->loop, &p->out, 0);
	uv_pipe_init(b->loop, &p->err, 0);
	uv_timer_init(b->loop, &p->drain);
	p->in.data = p->out.data = p->err.data = p->drain.data = p;
	p->handles_open = 4;
	b->live++;
	rc = ready_then_launch(p, req, uid, gid, move, err);
	if (rc) {
		close_all(p);
		return rc;
	}
	*out = p;
	return 0;
}

static void on_written(uv_write_t *req, int status)
{
	(void)status; /* EPIPE: the process is gone; its exit tells the story */
	free(req);
}

static int local_write(struct codepod_proc *p, const char *buf, size_t len, struct cp_err *err)
{
	if (p->exited || len == 0)
		return 0;
	if (p->def)
		return cp_buf_add(&p->def->stdin_q, buf, len, err);
	/* Most messages fit the empty pipe at once: no copy, no request. Only
	 * with nothing queued, so the order of bytes holds. */
	if (p->in.write_queue_size == 0) {
		uv_buf_t now = uv_buf_init((char *)buf, (unsigned)len);
		int n = uv_try_write((uv_stream_t *)&p->in, &now, 1);
		if (n == UV_EPIPE || n == UV_EBADF)
			return 0;
		if (n > 0) {
			buf += n;
			len -= (size_t)n;
			if (len == 0)
				return 0;
		}
	}
	struct write_req *w = malloc(sizeof *w + len);
	if (!w)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	memcpy(w->data, buf, len);
	uv_buf_t b = uv_buf_init(w->data, (unsigned)len);
	int rc = uv_write(&w->req, (uv_stream_t *)&p->in, &b, 1, on_written);
	if (rc) {
		free(w);
		if (rc == UV_EPIPE || rc == UV_EBADF)
			return 0;
		return cp_err_set(err, CP_E_IO, "write to runner: %s", uv_strerror(rc));
	}
	return 0;
}

/* The walk's bounds: past them (a fork bomb) the kernel's PID-namespace
 * teardown does the rest, and the outcome waits for exited(). */
#define KILL_WALK_MAX 256
#define KILL_WALK_DEPTH 32
#define KILL_WALK_PASSES 8
#define KIDS_MAX 64

/* The processes one kill has sent SIGKILL, over all its passes. */
struct kill_walk {
	pid_t seen[KILL_WALK_MAX];
	size_t n;
	int budget; /* visits left in this pass */
	int grew;   /* this pass reached a process no pass before it did */
};

/* The children of every thread of @pid (each thread lists the ones it
 * started) into @out: their number, or -1 when a list could not be read
 * whole or they do not fit. A process gone has none. */
static int children_of(pid_t pid, pid_t out[KIDS_MAX])
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return errno == ENOENT ? 0 : -1;
	int n = 0;
	struct dirent *de;
	while (n >= 0 && (de = readdir(d))) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		char file[96], buf[4096];
		snprintf(file, sizeof file, "/proc/%d/task/%.16s/children", (int)pid, de->d_name);
		int fd = open(file, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue; /* the thread ended */
		ssize_t len = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (len < 0 || (size_t)len == sizeof buf - 1) {
			n = -1;
			break;
		}
		buf[len] = '\0';
		for (char *at = buf, *end;; at = end) {
			long c = strtol(at, &end, 10);
			if (end == at)
				break;
			if (c <= 1 || n == KIDS_MAX) {
				n = -1;
				break;
			}
			out[n++] = (pid_t)c;
		}
	}
	closedir(d);
	return n;
}

/* Records @pid among those @w signalled. -1 when they do not fit. */
static int walk_note(struct kill_walk *w, pid_t pid)
{
	for (size_t i = 0; i < w->n; i++)
		if (w->seen[i] == pid)
			return 0;
	if (w->n == KILL_WALK_MAX)
		return -1;
	w->seen[w->n++] = pid;
	w->grew = 1;
	return 0;
}

/* ---- usage: the process tree read through /proc ---- */

/* A /proc file of @pid into @buf (NUL-terminated); its length, or -1. */
static ssize_t read_proc_file(pid_t pid, const char *name, char *buf, size_t cap)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
	return cp_read_small(path, buf, cap);
}

/* Fields 14 to 17 of /proc/<pid>/stat in clock ticks: @self utime + stime
 * (every thread), @kids cutime + cstime (the children it reaped, with
 * theirs). 0, or -1 when the process is gone. */
static int proc_ticks(pid_t pid, uint64_t *self, uint64_t *kids)
{
	char buf[1024];
	if (read_proc_file(pid, "stat", buf, sizeof buf) <= 0)
		return -1;
	char *at = strrchr(buf, ')'); /* after the command name, which may hold anything */
	if (!at)
		return -1;
	at++;
	uint64_t f[18] = { 0 };
	for (int field = 3; field <= 17; field++) {
		while (*at == ' ')
			at++;
		char *end;
		if (field == 3) { /* the state letter */
			if (!*at)
				return -1;
			at++;
			continue;
		}
		long long v = strtoll(at, &end, 10);
		if (end == at)
			return -1;
		f[field] = v > 0 ? (uint64_t)v : 0;
		at = end;
	}
	*self = f[14] + f[15];
	*kids = f[16] + f[17];
	return 0;
}

/* VmHWM of /proc/<pid>/status in KiB (0: gone, or a zombie with no memory). */
static uint64_t proc_hwm_kb(pid_t pid)
{
	char buf[4096];
	if (read_proc_file(pid, "status", buf, sizeof buf) <= 0)
		return 0;
	const char *at = strstr(buf, "\nVmHWM:");
	return at ? strtoull(at + 7, NULL, 10) : 0;
}

/* Precise CPU time of a single-threaded process (bubblewrap's), in
 * microseconds: /proc/<pid>/schedstat's first figure (nanoseconds), else
 * its ticks. */
static uint64_t proc_self_us(const struct local *b, pid_t pid)
{
	char buf[128];
	if (read_proc_file(pid, "schedstat", buf, sizeof buf) > 0)
		return strtoull(buf, NULL, 10) / 1000u;
	uint64_t self, kids;
	return proc_ticks(pid, &self, &kids) ? 0 : ticks_us(b, self);
}

struct tree_read {
	int wrappers;     /* the top levels that are bubblewrap's own processes */
	int budget, read; /* processes left to read, and read */
	pid_t second;     /* the first process read below the top one */
	uint64_t ticks, hwm_kb;
};

/* @pid and everything under it: CPU of each, its reaped children's, and
 * the largest peak RSS. A process that ends between its parent's reading
 * and its own (microseconds) is missed; past the walk's bounds the rest is. */
static void read_from(pid_t pid, int depth, struct tree_read *t)
{
	uint64_t self, kids;
	if (depth > KILL_WALK_DEPTH || --t->budget < 0 || proc_ticks(pid, &self, &kids))
		return;
	t->read++;
	if (depth == 1 && !t->second)
		t->second = pid;
	/* bubblewrap's own work is not the program's; what they reaped is */
	t->ticks += (depth < t->wrappers ? 0 : self) + kids;
	uint64_t hwm = depth < t->wrappers ? 0 : proc_hwm_kb(pid);
	if (hwm > t->hwm_kb)
		t->hwm_kb = hwm;
	pid_t c[KIDS_MAX];
	int n = children_of(pid, c);
	for (int i = 0; i < n; i++)
		read_from(c[i], depth + 1, t);
}

/* The init is waited for once bubblewrap's process has gone. */
static void note_init(struct codepod_proc *p, pid_t init)
{
	if (p->b->isolate && !p->init_pid && !p->outer_reaped && init > 1)
		p->init_pid = init;
}

/* The tree's usage now, merged into p->seen. 0 when the reading is whole:
 * isolated, the PID-namespace init was read (alive, or ended and not
 * reaped), whose reaped children hold the rest; -1 when it is not (the
 * init gone with its figures: wait4() will have them). */
static int read_tree(struct codepod_proc *p)
{
	if (p->pid <= 0 || p->exited || p->outer_reaped)
		return -1;
	/* isolated: bubblewrap, then its PID-namespace init, then the runner */
	struct tree_read t = { p->b->isolate ? 2 : 0, KILL_WALK_MAX, 0, 0, 0, 0 };
	read_from(p->pid, 0, &t);
	note_init(p, t.second);
	if (!t.read || (p->b->isolate && !t.second))
		return -1;
	struct codepod_usage u = { .known = 1, .cpu_us = ticks_us(p->b, t.ticks),
	                           .max_rss_bytes = t.hwm_kb * 1024u };
	merge_usage(&p->seen, &u);
	/* No memory read: the runner has exited (a zombie has no VmHWM), so
	 * its peak is its parent's to reap: wait4() will have it. Its CPU
	 * time is read all the same (a zombie's stat keeps it, its reaped
	 * children's too), and kept: the kill that follows may end the
	 * namespace before its init reaped the runner, and the init's wait4()
	 * figures then lack the runner's time (seen on a loaded machine). */
	return t.hwm_kb ? 0 : -1;
}

/* The program reached the runner: what bubblewrap's two processes used
 * until now (setting up the sandbox, ~ms) is taken off wait4()'s figure,
 * which counts them. */
static void local_note_pid(struct codepod_proc *p, long pid, unsigned long long start)
{
	(void)pid;
	(void)start;
	if (p->cg)
		local_cg_started(&p->b->cg, p->cg);
	if (!p->b->isolate || p->pid <= 0 || p->exited || p->outer_reaped)
		return;
	pid_t init[KIDS_MAX];
	uint64_t us = proc_self_us(p->b, p->pid);
	if (children_of(p->pid, init) == 1) {
		us += proc_self_us(p->b, init[0]);
		note_init(p, init[0]);
	}
	p->wrap_us = us;
}

static void local_sample(struct codepod_proc *p)
{
	if (read_tree(p) == 0 && p->cbs->usage)
		p->cbs->usage(p->ud, &p->seen);
}

/* SIGKILL @pid, then everything under it, top-down: a process is signalled
 * before its children are listed, so it can start no more (a fork racing
 * the signal fails). A killed process may be gone before its children are
 * listed (a shell exits within microseconds), having handed them to the
 * namespace's init: local_kill walks again for them. 0 when the whole tree
 * was reached, -1 when the walk stopped at a bound. */
static int kill_from(pid_t pid, int depth, struct kill_walk *w)
{
	if (depth > KILL_WALK_DEPTH || --w->budget < 0 || walk_note(w, pid))
		return -1;
	/* Stopped before its children are listed and killed after: a process
	 * killed first can be gone before the listing, its children then
	 * reparented out of the walk's reach. */
	kill(pid, SIGSTOP);
	pid_t kids[KIDS_MAX];
	int n = children_of(pid, kids);
	kill(pid, SIGKILL);
	for (int i = 0; i < n; i++)
		if (kill_from(kids[i], depth + 1, w))
			return -1;
	return n < 0 ? -1 : 0;
}

/* A pidfd of @pid, or -1 (a kernel before 5.3). */
static int pidfd_of(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	(void)pid;
	return -1;
#endif
}

static int pidfd_signal(int fd, int sig)
{
#ifdef SYS_pidfd_send_signal
	return (int)syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0);
#else
	(void)fd;
	(void)sig;
	return -1;
#endif
}

/* kill_from for the namespace's init, held by @fd: it is bubblewrap's
 * child (codepod's, as subreaper, only once bubblewrap's process is gone),
 * so once its namespace has ended it may be reaped and its PID reused
 * between passes. Signalled and checked through the pidfd; a list
 * read while it was reaped is dropped (its namespace has ended then: none
 * of its processes is left). */
static int kill_top(pid_t pid, int fd, struct kill_walk *w)
{
	if (--w->budget < 0 || walk_note(w, pid))
		return -1;
	if (pidfd_signal(fd, SIGKILL))
		return errno == ESRCH ? 0 : -1;
	pid_t kids[KIDS_MAX];
	int n = children_of(pid, kids);
	if (pidfd_signal(fd, 0))
		return errno == ESRCH ? 0 : -1;
	for (int i = 0; i < n; i++)
		if (kill_from(kids[i], 1, w))
			return -1;
	return n < 0 ? -1 : 0;
}

/* What the processes wrote to stderr before the kill: the final frame on
 * stdout does not order it (two pipes), so it is read now rather than when
 * the loop gets to it. 0 when the pipe was emptied. */
static int drain_err(struct codepod_proc *p)
{
	static char buf[65536]; /* loop thread only */
	uv_os_fd_t fd;
	if (p->err_eof)
		return 0;
	if (uv_fileno((uv_handle_t *)&p->err, &fd))
		return -1;
	for (int i = 0; i < 64; i++) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n == 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)))
			return 0;
		if (n < 0)
			return -1;
		if (!p->reported)
			p->cbs->err(p->ud, buf, (size_t)n);
	}
	return -1;
}

/* Every process of the execution gets SIGKILL here, synchronously: the
 * group (bubblewrap and its PID-namespace init, or a plain runner's group),
 * then every process below; with its stderr drained, the engine is told
 * (killed()) and may deliver before the kernel has reaped them. */
static void local_kill(struct codepod_proc *p)
{
	if (p->def) { /* not started: it never will be; exited() tells once the
	               * restore or the workspace ends */
		p->def->kill_asked = 1;
		return;
	}
	if (p->waiting_ws)
		return; /* (its request could not be kept): exited() tells */
	if (p->outer_reaped && !p->exited) {
		/* bubblewrap's process is gone, its init (ours now) not yet:
		 * the namespace ends with it; exited() tells */
		if (p->init_pid > 0)
			kill(p->init_pid, SIGKILL);
		return;
	}
	int tell = p->pid > 0 && !p->exited && !p->killed_told && p->cbs->killed;
	/* Before any signal: a killed process's CPU time goes to its parent's
	 * reaped children once reaped, and its parent may be killed too. A
	 * reading that is not whole leaves the outcome to exited(), whose
	 * figures are wait4()'s. */
	if (read_tree(p))
		tell = 0;
	pid_t root = p->pid, tops[KIDS_MAX];
	int ntops = 1;
	tops[0] = root;
	/* Under bubblewrap the walk starts at the PID-namespace init, read
	 * before any signal: bubblewrap's own process exits at once when
	 * killed, and its child then leaves its list. */
	if (tell && p->b->isolate && (ntops = children_of(root, tops)) < 0)
		tell = 0;
	int nfds = 0, fds[KIDS_MAX];
	for (; tell && p->b->isolate && nfds < ntops; nfds++)
		if ((fds[nfds] = pidfd_of(tops[nfds])) < 0)
			tell = 0; /* a kernel without pidfds: exited() tells */
	/* Without bubblewrap the top is the runner, codepod's child, and no
	 * namespace ends what it started: a child that left its group is
	 * reached only through the runner's list of children, so the runner
	 * must not die before the walk has stopped it and read that list (a
	 * killed runner's children go to the host's init, out of reach). The
	 * group kill comes after the walk then, for what it did not reach. */
	int walk = p->pid > 0 && !p->exited && (tell || !p->b->isolate);
	if (p->b->isolate)
		kill_tree(p);
	/* Walked again until a pass reaches no process the ones before did
	 * not: those a killed parent handed to init on its way out. */
	struct kill_walk w = { .n = 0, .grew = 1 };
	int rc = walk ? 0 : -1;
	for (int pass = 0; !rc && w.grew; pass++) {
		if (pass == KILL_WALK_PASSES) {
			rc = -1; /* still growing: the namespace's end does the rest */
			break;
		}
		w.grew = 0;
		w.budget = KILL_WALK_MAX;
		for (int i = 0; !rc && i < ntops; i++)
			rc = p->b->isolate ? kill_top(tops[i], fds[i], &w) : kill_from(tops[i], 0, &w);
	}
	if (!p->b->isolate)
		kill_tree(p);
	for (int i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (rc || !tell)
		return; /* the namespace's end does the rest; exited() tells */
	if (drain_err(p) == 0) {
		p->killed_told = 1;
		p->cbs->killed(p->ud, &p->seen);
	}
}

static void local_release(struct local *b)
{
	/* a last try for the folders still busy; what stays is swept at the
	 * next start (cgroup.h) */
	cg_retry_now(b);
	for (struct local_cg *cg = b->cg.live, *next; cg; cg = next) {
		next = cg->next;
		free(cg);
	}
	b->cg.live = NULL;
	local_cg_root_free(&b->cg);
	if (b->snaps) /* local_new failed: nothing was snapshotted yet */
		store_snaps_close(b->snaps, NULL, NULL);
	local_sandbox_free(&b->sb);
	local_uids_free(&b->uids);
	free(b->state_dir);
	free(b->ws_root);
	free(b->node);
	free(b->node_root);
	free(b);
}

static void on_sigchld_closed(uv_handle_t *h)
{
	struct local *b = h->data;
	if (b->cg_timer) {
		/* the timer next; this runs again once it has closed */
		b->cg_timer = 0;
		uv_close((uv_handle_t *)&b->cg_retry, on_sigchld_closed);
		return;
	}
	local_release(b);
}

/* The SIGCHLD watcher and the cgroup timer close first (on the loop), then
 * the memory goes. */
static void local_free(struct local *b)
{
	if (b->watching)
		uv_close((uv_handle_t *)&b->sigchld, on_sigchld_closed);
	else
		local_release(b);
}

static void local_closed(struct local *b);

/* May be called from inside a process's exited() chain: the memory goes
 * once the last process handle has closed. */
static void snaps_closed(void *ud)
{
	struct local *b = ud;
	b->snaps = NULL;
	if (b->closing && b->live == 0)
		local_closed(b);
}

static void wsm_closed(void *ud)
{
	struct local *b = ud;
	b->wsm = NULL;
	if (b->closing && b->live == 0)
		local_closed(b);
}

/* Every process is gone: the snapshots still waiting (the last
 * executions' changes) are taken, then the workspaces are unmounted, then
 * the memory goes. */
static void local_closed(struct local *b)
{
	if (b->snaps) {
		if (!b->snaps_closing) {
			b->snaps_closing = 1;
			store_snaps_close(b->snaps, snaps_closed, b);
		}
		return;
	}
	if (b->wsm) {
		if (!b->wsm_closing) {
			b->wsm_closing = 1;
			local_ws_close(b->wsm, wsm_closed, b);
		}
		return;
	}
	local_free(b);
}

static void local_destroy(struct codepod_backend *base)
{
	struct local *b = (struct local *)base;
	b->closing = 1;
	if (b->live == 0)
		local_closed(b);
}

/* -- deleting a conversation: its runners killed, its workspace moved
 * aside at once (one rename: a new execution finds none and starts
 * afresh) and removed on libuv's pool, its snapshots deleted. */
struct ws_delete {
	struct local *b;
	uv_work_t work;
	char hash[33];
	char trash[4200];  /* "" when there was no workspace */
	int pending;       /* the removal, the snapshots */
	int rc;
	struct cp_err err;
	void (*done)(void *ud, int rc, const struct cp_err *err);
	void *ud;
};

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) && errno != ENOENT ? -1 : 0;
}

static void ws_remove_work(uv_work_t *w)
{
	struct ws_delete *d = w->data;
	if (d->trash[0] && nftw(d->trash, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 && !d->rc)
		d->rc = cp_err_errno(&d->err, CP_E_IO, errno, "removing the workspace");
}

static void ws_delete_step(struct ws_delete *d)
{
	if (--d->pending)
		return;
	struct local *b = d->b;
	d->done(d->ud, d->rc, &d->err);
	free(d);
	if (--b->live == 0 && b->closing)
		local_closed(b);
}

static void ws_removed(uv_work_t *w, int status)
{
	struct ws_delete *d = w->data;
	if (status && !d->rc)
		d->rc = cp_err_set(&d->err, CP_E_INTERNAL, "the workspace removal did not run");
	ws_delete_step(d);
}

static void snaps_deleted(void *ud, int rc, const struct cp_err *err)
{
	struct ws_delete *d = ud;
	if (rc && !d->rc) {
		d->rc = rc;
		cp_err_set(&d->err, rc, "deleting the snapshots: %s", err ? err->msg : "failed");
	}
	ws_delete_step(d);
}

/* The workspace is unmounted and its image gone (workspace.h): the folder
 * is moved aside at once (one rename: a new execution finds none and starts
 * afresh) and removed on libuv's pool. */
static void ws_released(void *ud, int rc, const struct cp_err *rerr)
{
	struct ws_delete *d = ud;
	struct local *b = d->b;
	if (rc && !d->rc) {
		d->rc = rc;
		cp_err_set(&d->err, rc, "%s", rerr ? rerr->msg : "unmounting the workspace");
	}
	char ws[4200];
	snprintf(ws, sizeof ws, "%s/%s", b->ws_root, d->hash);
	unsigned char rnd[4];
	RAND_bytes(rnd, sizeof rnd);
	snprintf(d->trash, sizeof d->trash, "%s/.deleted-%s-%02x%02x%02x%02x", b->ws_root, d->hash,
	         rnd[0], rnd[1], rnd[2], rnd[3]);
	if (rename(ws, d->trash) != 0) {
		if (errno != ENOENT && !d->rc)
			d->rc = cp_err_errno(&d->err, CP_E_IO, errno, "moving the workspace aside");
		d->trash[0] = '\0';
	}
	char pending[4300];
	restore_mark_of(ws, pending);
	if (unlink(pending) != 0 && errno != ENOENT && !d->rc)
		d->rc = cp_err_errno(&d->err, CP_E_IO, errno, "removing the restore mark");
	if (uv_queue_work(b->loop, &d->work, ws_remove_work, ws_removed)) {
		if (!d->rc)
			d->rc = cp_err_set(&d->err, CP_E_INTERNAL, "cannot queue the workspace removal");
		ws_delete_step(d);
	}
}

static int local_delete_conversation(struct codepod_backend *base, const char *conversation,
                                     void (*done)(void *ud, int rc, const struct cp_err *err),
                                     void *ud, struct cp_err *err)
{
	struct local *b = (struct local *)base;
	char ws[4096];
	int rc = workspace_path(b, conversation, ws, sizeof ws, NULL, NULL, NULL, err);
	if (rc)
		return rc;
	const char *hash = strrchr(ws, '/') + 1;
	struct ws_delete *d = calloc(1, sizeof *d);
	if (!d)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	snprintf(d->hash, sizeof d->hash, "%s", hash);
	d->b = b;
	d->done = done;
	d->ud = ud;
	d->work.data = d;
	for (struct codepod_proc *p = b->running; p; p = p->next_running)
		if (!strcmp(p->ws_hash, hash))
			local_kill(p);
	/* unmounted and its image removed first (workspace.h), then the folder */
	if (b->wsm && local_ws_delete(b->wsm, hash, ws_released, d, err) != 0) {
		free(d);
		return err->code;
	}
	d->pending = 1;
	b->live++;
	if (b->snaps && !b->snaps_closing) {
		d->pending++;
		if (store_snaps_delete(b->snaps, hash, snaps_deleted, d, &d->err)) {
			d->pending--;
			d->rc = d->err.code;
		}
	}
	if (!b->wsm)
		ws_released(d, 0, NULL);
	return 0;
}

static size_t local_stats(const struct codepod_backend *base, struct codepod_backend_stat *out,
                          size_t max)
{
	const struct local *b = (const struct local *)(const void *)base;
	if (!b->snaps)
		return 0;
	struct store_snaps_stats st;
	store_snaps_get_stats(b->snaps, &st);
	const struct codepod_backend_stat all[] = {
		{ "codepod_snapshots_total", "Workspace snapshots written to the store, and the "
		  "ones skipped because nothing had changed.", "result=\"written\"", st.snapshots },
		{ "codepod_snapshots_total", "Workspace snapshots written to the store, and the "
		  "ones skipped because nothing had changed.", "result=\"unchanged\"", st.skipped },
		{ "codepod_snapshot_failures_total", "Snapshots that failed (logged as "
		  "snapshot.failed with the store's answer); they are tried again.", "store=\"s3\"",
		  st.failures },
		{ "codepod_snapshot_restores_total", "Workspaces restored from a snapshot, and "
		  "restores that failed (the acquisition ended SANDBOX_UNAVAILABLE).",
		  "result=\"restored\"", st.restores },
		{ "codepod_snapshot_restores_total", "Workspaces restored from a snapshot, and "
		  "restores that failed (the acquisition ended SANDBOX_UNAVAILABLE).",
		  "result=\"failed\"", st.restore_failures },
	};
	size_t n = sizeof all / sizeof all[0];
	if (n > max)
		n = max;
	memcpy(out, all, n * sizeof *out);
	return n;
}

/* The last PID in /proc/@pid/status's NSpid line: the process's PID in its
 * own namespace; 0 when unreadable. */
static long ns_pid_of(pid_t pid)
{
	char path[64], buf[2048];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	if (cp_read_small(path, buf, sizeof buf) < 0)
		return 0;
	const char *l = strstr(buf, "\nNSpid:");
	if (!l)
		return 0;
	long last = 0;
	for (char *at = (char *)l + 7, *end;; at = end) {
		long v = strtol(at, &end, 10);
		if (end == at || (*end != ' ' && *end != '\t' && *end != '\n'))
			break;
		last = v;
		if (*end == '\n')
			break;
	}
	return last;
}

/* The runner is bubblewrap's grandchild (its PID-namespace init's child)
 * or, without isolation, the process spawned: the one of those whose own
 * PID is @ns_pid. Its descriptor @fd is opened again through /proc (a new
 * description of the same file); anything but a regular file is refused. */
static int local_open_fd(struct codepod_proc *p, long ns_pid, int fd, int for_write,
                         struct cp_err *err)
{
	if (p->exited || p->pid <= 0 || p->outer_reaped)
		return cp_err_set(err, CP_E_STATE, "the runner is gone"), -1;
	pid_t found = ns_pid_of(p->pid) == ns_pid ? p->pid : 0;
	pid_t kids[KIDS_MAX], grand[KIDS_MAX];
	int n = found ? 0 : children_of(p->pid, kids);
	for (int i = 0; i < n && !found; i++) {
		int m = children_of(kids[i], grand);
		for (int j = 0; j < m && !found; j++)
			if (ns_pid_of(grand[j]) == ns_pid)
				found = grand[j];
	}
	if (!found)
		return cp_err_set(err, CP_E_STATE, "the runner's process was not found"), -1;
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)found, fd);
	/* (O_NONBLOCK: were it ever not a regular file, a FIFO would not hold the loop) */
	int own = open(path, (for_write ? O_WRONLY : O_RDONLY) | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (own < 0)
		return cp_err_errno(err, CP_E_IO, errno, "opening the runner's file"), -1;
	struct stat st;
	if (fstat(own, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(own);
		return cp_err_set(err, CP_E_STATE, "the runner's descriptor is not a regular file"), -1;
	}
	return own;
}

static const struct codepod_backend_ops local_ops = {
	.spawn = local_spawn, .write = local_write, .kill = local_kill,
	.open_fd = local_open_fd, .note_pid = local_note_pid, .sample = local_sample, .stats = local_stats,
	.delete_conversation = local_delete_conversation, .destroy = local_destroy,
};

/* The sandbox's pieces, then one real run through it that proves each
 * guarantee (local_sandbox.h); any of them missing refuses the backend. */
static int sandbox_ready(struct local *b, const struct local_config *cfg, struct cp_err *err)
{
	int rc = local_sandbox_init(&b->sb, cfg->sandbox_user, cfg->sandbox_uids, cfg->hide, err);
	if (rc)
		return rc;
	if (b->sb.as_root && !b->sb.fixed_user) {
		rc = local_uids_init(&b->uids, b->sb.uid_first, b->sb.uid_count, b->ws_root, err);
		if (rc)
			return rc;
	}
	/* Inside, the conversation's folder covers /workspace: what the chain
	 * runs from there would be gone (a checkout under the host's own
	 * /workspace, with its Node in it). */
	const char *const chain[] = { b->node_root, b->sb.prlimit, b->sb.setpriv };
	size_t wl = strlen(LOCAL_SANDBOX_WORKSPACE);
	for (size_t i = 0; i < sizeof chain / sizeof chain[0]; i++)
		if (chain[i] && strncmp(chain[i], LOCAL_SANDBOX_WORKSPACE, wl) == 0 &&
		    (chain[i][wl] == '/' || chain[i][wl] == '\0'))
			return cp_err_set(err, CP_E_UNSUPPORTED,
			                  "%s is under %s, where the sandbox puts the conversation's "
			                  "workspace: install it elsewhere (or give --node a Node 22 "
			                  "outside %s)", chain[i], LOCAL_SANDBOX_WORKSPACE,
			                  LOCAL_SANDBOX_WORKSPACE);
	local_sandbox_reach(&b->sb, b->state_dir);
	local_sandbox_reach(&b->sb, b->node_root);
	char ws[4096];
	uid_t uid;
	gid_t gid;
	uid_t move;
	rc = workspace_path(b, "codepod: start-up probe", ws, sizeof ws, &uid, &gid, &move, err);
	if (rc)
		return rc;
	if (move != (uid_t)-1 && lchown(ws, uid, gid)) /* an empty folder */
		return cp_err_errno(err, CP_E_IO, errno, "chown %s", ws);
	struct local_sandbox_run run = { b->state_dir, b->node_root, ws, 0, uid, gid };
	return local_sandbox_probe(&b->sb, &run, b->node, err);
}

/* The sandboxes' cgroups (cgroup.h); without any, a refusal unless told
 * to run on without the memory bound. */
static int cgroups_ready(struct local *b, const struct local_config *cfg, struct cp_err *err)
{
	char self[8192], pidmax[32];
	int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, self, sizeof self - 1) : -1;
	if (fd >= 0)
		close(fd);
	self[n > 0 ? n : 0] = '\0';
	unsigned long ceiling = cfg->max_sandbox_pids;
	fd = open("/proc/sys/kernel/pid_max", O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, pidmax, sizeof pidmax - 1) : -1;
	if (fd >= 0)
		close(fd);
	pidmax[n > 0 ? n : 0] = '\0';
	if (!ceiling)
		ceiling = local_cg_default_max_pids(strtoul(pidmax, NULL, 10));
	char name[64];
	struct stat st;
	snprintf(name, sizeof name, "codepod-%lu-%ld",
	         stat("/proc/self/ns/pid", &st) == 0 ? (unsigned long)st.st_ino : 0ul,
	         (long)getpid());
	struct local_cg_conf c = { cfg->cgroup_fs ? cfg->cgroup_fs : "/sys/fs/cgroup", self, name,
	                           ceiling };
	struct cp_err why;
	if (local_cg_root_init(&b->cg, &c, &why) == 0) {
		cp_log(CP_LOG_INFO, "local.cgroup", "version",
		       json_string(b->cg.kind == LOCAL_CG_V2 ? "v2" : "v1"), "folder",
		       json_string(b->cg.dir[LOCAL_CG_MEMORY]), "pidsFolder",
		       b->cg.dir[LOCAL_CG_PIDS] ? json_string(b->cg.dir[LOCAL_CG_PIDS]) : json_null(),
		       "maxSandboxPids",
		       json_integer(b->cg.dir[LOCAL_CG_PIDS] ? (json_int_t)ceiling : 0), NULL);
		return 0;
	}
	if (cfg->no_memory_bound) {
		cp_log(CP_LOG_WARN, "local.no_memory_bound", "message",
		       json_string("no cgroup for the sandboxes: a program's memory beyond V8's heap "
		                   "(shared memory, memfd, /tmp) and the processes of all sandboxes "
		                   "together are NOT bounded"), "reason", json_string(why.msg), NULL);
		return 0;
	}
	return cp_err_set(err, CP_E_SANDBOX_UNAVAILABLE,
	                  "no cgroup can bound the sandboxes' memory here (%s). Run codepod as root "
	                  "on a host with the memory controller (cgroup v1 or v2) or in a delegated "
	                  "cgroup v2 subtree, or pass --no-memory-bound to run without that bound",
	                  why.msg);
}

static int snaps_busy(void *ud, const char *hash)
{
	struct local *b = ud;
	return b->snaps && store_snaps_busy(b->snaps, hash);
}

/* The workspaces' disk bound (workspace.h); where it cannot be had, a
 * refusal unless told to run on without it. */
static int workspaces_ready(struct local *b, const struct local_config *cfg, struct cp_err *err)
{
	struct cp_err why = { 0 };
	int disk = b->isolate && !cfg->disk_bound_off;
	if (disk && local_ws_probe(b->ws_root, &why) != 0)
		disk = 0;
	struct local_ws_conf c = { b->loop, b->ws_root, disk, cfg->workspace_idle_s, snaps_busy, b };
	int rc = local_ws_new(&c, &b->wsm, disk ? &why : err);
	if (rc && !disk)
		return rc;
	if (rc) { /* the probe passed, the workspaces' own mount did not */
		disk = 0;
		c.disk = 0;
		rc = local_ws_new(&c, &b->wsm, err);
		if (rc)
			return rc;
	}
	if (disk) {
		cp_log(CP_LOG_INFO, "local.disk_bound", "workspaces", json_string(b->ws_root), NULL);
		return 0;
	}
	if (!b->isolate || cfg->disk_bound_off)
		return 0;
	if (cfg->no_disk_bound) {
		cp_log(CP_LOG_WARN, "local.no_disk_bound", "message",
		       json_string("no image can bound the workspaces here: a program can fill the "
		                   "disk that holds the state folder (maxWorkspaceBytes and "
		                   "maxWorkspaceFiles are NOT enforced)"), "reason",
		       json_string(why.msg), NULL);
		return 0;
	}
	return cp_err_set(err, CP_E_SANDBOX_UNAVAILABLE,
	                  "no image can bound the workspaces' disk here (%s). Run codepod as root "
	                  "on a host with loop devices and e2fsprogs (mkfs.ext4, resize2fs), or pass "
	                  "--no-disk-bound to run without that bound", why.msg);
}

int local_new(const struct local_config *cfg, struct codepod_backend **out,
                 struct cp_err *err)
{
	int rc = mkdir_p(cfg->state_dir, err);
	if (rc)
		return rc;
	char *real = realpath(cfg->state_dir, NULL);
	if (!real)
		return cp_err_errno(err, CP_E_IO, errno, "state folder %s", cfg->state_dir);
	struct local *b = calloc(1, sizeof *b);
	if (!b) {
		free(real);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	b->base.ops = &local_ops;
	b->base.name = "local";
	b->loop = cfg->loop;
	b->snaps = cfg->snaps;
	b->clk_tck = sysconf(_SC_CLK_TCK);
	if (b->clk_tck <= 0)
		b->clk_tck = 100;
	b->state_dir = real;
	b->node = realpath(cfg->node, NULL);
	b->isolate = cfg->isolate;
	if (b->node) {
		/* .../bin/node -> ... : the folder holding bin/ and lib/ */
		b->node_root = strdup(b->node);
		for (int up = 0; b->node_root && up < 2; up++) {
			char *slash = strrchr(b->node_root, '/');
			if (slash && slash != b->node_root)
				*slash = '\0';
		}
	}
	size_t n = strlen(real) + 16;
	b->ws_root = malloc(n);
	if (!b->node || !b->node_root || !b->ws_root) {
		local_free(b);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	snprintf(b->ws_root, n, "%s/workspaces", real);
	rc = mkdir_p(b->ws_root, err);
	if (rc == 0 && b->isolate)
		rc = sandbox_ready(b, cfg, err);
	if (rc == 0 && b->isolate)
		rc = cgroups_ready(b, cfg, err);
	if (rc == 0)
		rc = workspaces_ready(b, cfg, err);
	if (rc) {
		local_free(b);
		return rc;
	}
	/* after the probe, which waits for its own child. Isolated, this
	 * process becomes the subreaper of what it starts, so bubblewrap's
	 * init is reaped here with its figures (usage_of_rusage). */
	if (b->isolate && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
		b->subreaper = 1;
	if (b->cg.kind != LOCAL_CG_NONE) {
		uv_timer_init(b->loop, &b->cg_retry);
		b->cg_retry.data = b;
		uv_unref((uv_handle_t *)&b->cg_retry); /* leftovers never hold codepod */
		b->cg_timer = 1;
	}
	uv_signal_init(b->loop, &b->sigchld);
	b->sigchld.data = b;
	uv_signal_start(&b->sigchld, on_sigchld, SIGCHLD);
	b->watching = 1;
	running_changed(b); /* nothing to reap yet: it keeps no loop running */
	*out = &b->base;
	return 0;
}
