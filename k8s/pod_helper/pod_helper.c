/*
 * pod_helper.c - the parent of one runner in a pod (docs: SECURITY.md, "The
 * Kubernetes backend"; the supervisor's side: k8s/backend/supervisor.js).
 *
 * A small static program, built for x86_64 and aarch64 (Makefile), embedded
 * in codepod and sent to the pod's supervisor over its exec stream, which
 * writes it once into a fresh folder, opens it, removes it and checks the
 * SHA-256 of what it reads through that descriptor; each runner then starts
 * as this program exec'd from that descriptor (/proc/self/fd/3), so nothing
 * a program can write is ever executed in its place. Node can do none of
 * what follows itself: it has no prctl, seccomp or Landlock, and execve
 * resets what a parent sets, so this program is the runner's parent, alive
 * until every process of the execution is gone.
 *
 *   pod_helper NODE ARG...    fd 0-2: the runner's stdio, passed on
 *                             fd 3: this program's own image (closed at once)
 *                             fd 4: the control socket to the supervisor
 *
 * Not dumpable (PR_SET_DUMPABLE 0: no ptrace, /proc/PID/mem or fd of it for
 * anyone without CAP_SYS_PTRACE) and a child subreaper, so every orphan of
 * the execution (a fork-and-exit chain, a setsid daemon) comes back to it
 * rather than to the pod's PID 1. The child it forks, before it execs Node:
 * unblocks signals, starts a session of its own, sets no_new_privs, enters a
 * new Landlock domain where the kernel has Landlock (a process in a domain
 * cannot ptrace, read /proc/PID/mem, /proc/PID/fd or pidfd_getfd a process
 * outside it: the supervisor, this helper, another execution's runner; with
 * Landlock ABI 6 it cannot signal them either), installs this helper's own
 * filter (no signal to this helper or the supervisor, none to -1, no
 * pidfd_send_signal, no F_SETSIG of SIGKILL or SIGSTOP: a helper killed
 * would hand the orphans to PID 1) and then codepod's filter, the local
 * sandbox's rule list compiled for the pod's architecture
 * (runner/local/syscall_filter.h), read from the control socket.
 *
 * Control socket, supervisor -> helper: the filter (uint32 BE length, then
 * struct sock_filter[]) first, then the byte 'k': kill the execution.
 * Helper -> supervisor: "r PID LANDLOCK\n" once Node runs (LANDLOCK: the
 * domain's ABI, 0 without), "e ERRNO\n" when it could not be started,
 * "d CPUUS MAXRSSKB\n" once every process of the execution has SIGKILL
 * pending (after a 'k', or after the runner ended by itself), with what
 * those reaped so far used; the helper exits once all are reaped. The
 * helper ends when the runner has ended and every other process of the
 * execution is gone, with the runner's exit status (a signal re-raised); the
 * end of the control socket kills the execution too.
 *
 * Killing: SIGKILL to every process whose parent chain leads here (in
 * /proc's order, each as it is seen, so a child forked meanwhile, which has a
 * higher PID, is seen in the same pass), reaping, again, until the helper
 * has no child left. A subreaper with no child has no descendant: nothing
 * of the execution is left.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <linux/audit.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#define HELPER_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define HELPER_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "pod_helper: x86_64 and aarch64 only"
#endif

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_restrict_self 446
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_ACCESS_FS_MAKE_BLOCK (1ULL << 11)
#define LL_SCOPE_SIGNAL (1ULL << 1)

#define CTL_FD 4
#define IMAGE_FD 3
#define FILTER_MAX_BYTES (4096 * 8) /* BPF_MAXINSNS instructions */

static pid_t runner;
static int runner_status = -1; /* its wait status once reaped */

/* ---- small I/O -------------------------------------------------------- */

static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static int read_all(int fd, void *buf, size_t len)
{
	char *p = buf;
	while (len > 0) {
		ssize_t n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void say(const char *fmt, long a, long b)
{
	char line[64];
	int n = snprintf(line, sizeof line, fmt, a, b);
	if (n > 0)
		(void)write_all(CTL_FD, line, (size_t)n);
}

/* ---- the kill ---------------------------------------------------------- */

/* The processes signalled so far: PID and start time (a PID reaped and
 * reused by a new process of the execution is a new process). */
struct seen {
	int pid;
	unsigned long long start;
};
static struct seen *sig_tab;
static size_t sig_n, sig_cap;

static int was_signalled(int pid, unsigned long long start)
{
	for (size_t i = 0; i < sig_n; i++)
		if (sig_tab[i].pid == pid && sig_tab[i].start == start)
			return 1;
	return 0;
}

static void note_signalled(int pid, unsigned long long start)
{
	if (sig_n == sig_cap) {
		size_t cap = sig_cap ? sig_cap * 2 : 256;
		struct seen *t = realloc(sig_tab, cap * sizeof *t);
		if (!t)
			return; /* only costs a repeated kill */
		sig_tab = t;
		sig_cap = cap;
	}
	sig_tab[sig_n].pid = pid;
	sig_tab[sig_n].start = start;
	sig_n++;
}

/* What the processes of the execution used, for the "d" line: the CPU
 * clock ticks of each process a kill pass took, read before its SIGKILL
 * (its own and its reaped children's), the children reaped here before the
 * kill began, and the runner's peak RSS. */
static unsigned long long kill_ticks;
static long base_us, runner_hwm_kb;

/* The parent, start time and CPU ticks (utime, stime, cutime, cstime) of
 * @pid from /proc/PID/stat; -1 when gone. */
static int stat_of(int pid, int *ppid, unsigned long long *start, unsigned long long *ticks)
{
	char path[32], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	if (!p)
		return -1;
	/* after "comm) ": state ppid pgrp session tty tpgid flags minflt cminflt
	 * majflt cmajflt utime stime cutime cstime priority nice threads
	 * itrealvalue starttime */
	char state;
	int pp;
	unsigned long long st, ut, sy;
	long long cut, csy;
	if (sscanf(p + 2, "%c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld %*d %*d %*d %*d %llu",
	           &state, &pp, &ut, &sy, &cut, &csy, &st) != 7)
		return -1;
	*ppid = pp;
	*start = st;
	*ticks = ut + sy + (unsigned long long)(cut > 0 ? cut : 0) + (unsigned long long)(csy > 0 ? csy : 0);
	return 0;
}

struct proc_ent {
	int pid, ppid;
	unsigned long long start, ticks;
	int mine;
};
static struct proc_ent *ents;
static size_t ents_cap;

/* One pass over /proc: every descendant of this process gets SIGKILL.
 * Returns how many had not been signalled before. */
static int sweep(void)
{
	int self = getpid(), fresh = 0;
	size_t n = 0;
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		char *end;
		long p = strtol(e->d_name, &end, 10);
		if (*end || p <= 1 || p == self)
			continue;
		int ppid;
		unsigned long long start, ticks;
		if (stat_of((int)p, &ppid, &start, &ticks) < 0)
			continue;
		if (n == ents_cap) {
			size_t cap = ents_cap ? ents_cap * 2 : 512;
			struct proc_ent *t = realloc(ents, cap * sizeof *t);
			if (!t)
				break;
			ents = t;
			ents_cap = cap;
		}
		int mine = ppid == self;
		for (size_t i = 0; !mine && i < n; i++)
			if (ents[i].mine && ents[i].pid == ppid)
				mine = 1;
		ents[n].pid = (int)p;
		ents[n].ppid = ppid;
		ents[n].start = start;
		ents[n].ticks = ticks;
		ents[n].mine = mine;
		n++;
		if (mine) {
			kill((pid_t)p, SIGKILL);
			if (!was_signalled((int)p, start)) {
				note_signalled((int)p, start);
				kill_ticks += ticks;
				fresh++;
			}
		}
	}
	closedir(d);
	/* Parents listed after their children (PIDs wrapped around): settle. */
	for (int changed = 1; changed;) {
		changed = 0;
		for (size_t i = 0; i < n; i++) {
			if (ents[i].mine)
				continue;
			for (size_t j = 0; j < n; j++) {
				if (ents[j].mine && ents[j].pid == ents[i].ppid) {
					ents[i].mine = changed = 1;
					kill(ents[i].pid, SIGKILL);
					if (!was_signalled(ents[i].pid, ents[i].start)) {
						note_signalled(ents[i].pid, ents[i].start);
						kill_ticks += ents[i].ticks;
						fresh++;
					}
					break;
				}
			}
		}
	}
	return fresh;
}

static void forget_signalled(int pid)
{
	for (size_t i = 0; i < sig_n; i++) {
		if (sig_tab[i].pid == pid) {
			sig_tab[i] = sig_tab[--sig_n];
			return;
		}
	}
}

/* Reaps what has ended; returns 1 once this process has no child left. */
static int reap(void)
{
	for (;;) {
		int st;
		pid_t r = waitpid(-1, &st, WNOHANG | __WALL);
		if (r > 0) {
			if (r == runner)
				runner_status = st;
			forget_signalled(r);
			continue;
		}
		return r < 0 && errno == ECHILD;
	}
}

static void say_done(void);

/* Every process of the execution gets SIGKILL and is reaped. With @tell,
 * "d" goes out as soon as a pass finds no process that had not been
 * signalled: from then on every process of the execution has SIGKILL
 * pending (a fork racing a SIGKILL either made its child before, and the
 * pass after the kill saw it, or fails), so none runs another instruction
 * of the program; the reaping that follows waits only for the kernel to
 * tear them down. */
static long children_us(void)
{
	struct rusage ru;
	memset(&ru, 0, sizeof ru);
	getrusage(RUSAGE_CHILDREN, &ru);
	return (long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000L +
	       (long)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* VmHWM of /proc/PID/status, KiB; 0 when gone. */
static long hwm_of(int pid)
{
	char path[40], buf[4096];
	snprintf(path, sizeof path, "/proc/%d/status", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *p = strstr(buf, "\nVmHWM:");
	return p ? strtol(p + 7, NULL, 10) : 0;
}

static void kill_all(int tell)
{
	base_us = children_us();
	if (runner > 0 && runner_status < 0)
		runner_hwm_kb = hwm_of(runner);
	if (runner > 0)
		kill(runner, SIGKILL);
	for (int told = !tell;;) {
		int fresh = sweep();
		if (!fresh && !told) {
			say_done();
			told = 1;
		}
		if (reap()) {
			if (!told)
				say_done();
			return;
		}
		if (!fresh) {
			/* Everything seen is dying (a process with SIGKILL pending
			 * forks no more): give it a moment. */
			struct timespec ts = { 0, 200 * 1000 };
			nanosleep(&ts, NULL);
		}
	}
}

/* ---- the runner's filters --------------------------------------------- */

#define LD_ABS(off) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (off))
#define JEQ(k, t, f) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (k), (t), (f))
#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))
#define ARG_LO(i) (offsetof(struct seccomp_data, args[i]))
#define DENY (SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA))

/* No signal to this helper (PID @h, its group -@h) or the supervisor (@s),
 * none to every process (-1), no pidfd of either, no pidfd_send_signal (a
 * /proc/PID folder works as a pidfd), no F_SETSIG of SIGKILL or SIGSTOP (a
 * SIGIO owner could be pointed at either). The kernel reads pid_t and int
 * arguments as 32 bits: the low word of each is compared (little-endian on
 * both architectures). Another architecture's calls are left to codepod's
 * filter, which kills them. */
static int own_filter(pid_t h, pid_t s)
{
	uint32_t H = (uint32_t)h, NH = (uint32_t)-h, S = (uint32_t)s, NS = (uint32_t)-s;
	struct sock_filter f[] = {
		/* 0 */ LD_ABS(offsetof(struct seccomp_data, arch)),
		/* 1 */ JEQ(HELPER_AUDIT_ARCH, 0, 23),
		/* 2 */ LD_ABS(offsetof(struct seccomp_data, nr)),
		/* 3 */ JEQ(SYS_kill, 8, 0),
		/* 4 */ JEQ(SYS_tkill, 7, 0),
		/* 5 */ JEQ(SYS_tgkill, 6, 0),
		/* 6 */ JEQ(SYS_rt_sigqueueinfo, 5, 0),
		/* 7 */ JEQ(SYS_rt_tgsigqueueinfo, 4, 0),
		/* 8 */ JEQ(SYS_pidfd_open, 3, 0),
		/* 9 */ JEQ(SYS_pidfd_send_signal, 16, 0),
		/* 10 */ JEQ(SYS_fcntl, 8, 0),
		/* 11 */ RET(SECCOMP_RET_ALLOW),
		/* 12 */ LD_ABS(ARG_LO(0)),
		/* 13 */ JEQ(H, 12, 0),
		/* 14 */ JEQ(NH, 11, 0),
		/* 15 */ JEQ(S, 10, 0),
		/* 16 */ JEQ(NS, 9, 0),
		/* 17 */ JEQ(0xffffffffu, 8, 0),
		/* 18 */ RET(SECCOMP_RET_ALLOW),
		/* 19 */ LD_ABS(ARG_LO(1)),
		/* 20 */ JEQ(F_SETSIG, 0, 3),
		/* 21 */ LD_ABS(ARG_LO(2)),
		/* 22 */ JEQ(SIGKILL, 3, 0),
		/* 23 */ JEQ(SIGSTOP, 2, 0),
		/* 24 */ RET(SECCOMP_RET_ALLOW),
		/* 25 */ RET(SECCOMP_RET_ALLOW),
		/* 26 */ RET(DENY),
	};
	struct sock_fprog prog = { .len = sizeof f / sizeof f[0], .filter = f };
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

/* A Landlock domain of the runner's own; its ABI, or 0 without one. */
static int enter_domain(void)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
	if (abi < 1)
		return 0;
	/* Handled: making block devices (nobody here may anyway). What the
	 * domain is for is its scope: ptrace-class access, and with ABI 6
	 * signals, only inward. */
	struct { uint64_t fs, net, scoped; } attr = { LL_ACCESS_FS_MAKE_BLOCK, 0, 0 };
	size_t size = 8;
	if (abi >= 6) {
		attr.scoped = LL_SCOPE_SIGNAL;
		size = 24;
	}
	int fd = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
	if (fd < 0)
		return 0;
	long rc = syscall(SYS_landlock_restrict_self, fd, 0);
	close(fd);
	return rc == 0 ? (int)abi : 0;
}

/* ---- main --------------------------------------------------------------- */

/* "d CPUUS MAXRSSKB": what the execution used (see kill_ticks). */
static void say_done(void)
{
	long hz = sysconf(_SC_CLK_TCK);
	long us = base_us + (long)kill_ticks * (hz > 0 ? 1000000L / hz : 10000L);
	struct rusage ru;
	memset(&ru, 0, sizeof ru);
	getrusage(RUSAGE_CHILDREN, &ru);
	say("d %ld %ld\n", us, runner_hwm_kb > ru.ru_maxrss ? runner_hwm_kb : ru.ru_maxrss);
}

static void finish(void)
{
	/* The runner's status, as this process's own. */
	if (runner_status >= 0 && WIFSIGNALED(runner_status)) {
		int s = WTERMSIG(runner_status);
		sigset_t one; /* that one only: another pending (SIGPIPE) must not win */
		sigemptyset(&one);
		sigaddset(&one, s);
		signal(s, SIG_DFL);
		sigprocmask(SIG_UNBLOCK, &one, NULL);
		raise(s);
		_exit(128 + s);
	}
	_exit(runner_status >= 0 && WIFEXITED(runner_status) ? WEXITSTATUS(runner_status) : 127);
}

int main(int argc, char **argv)
{
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0 || argc < 2) {
		say("e %ld\n", argc < 2 ? EINVAL : errno, 0);
		return 127;
	}
	close(IMAGE_FD);
	fcntl(CTL_FD, F_SETFD, FD_CLOEXEC);
	sigset_t all;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);

	unsigned char lenb[4];
	if (sfd < 0 || read_all(CTL_FD, lenb, 4) < 0) {
		say("e %ld\n", EPROTO, 0);
		return 127;
	}
	uint32_t flen = (uint32_t)lenb[0] << 24 | (uint32_t)lenb[1] << 16 | (uint32_t)lenb[2] << 8 | lenb[3];
	if (flen == 0 || flen % sizeof(struct sock_filter) || flen > FILTER_MAX_BYTES) {
		say("e %ld\n", EPROTO, 0);
		return 127;
	}
	struct sock_filter *filt = malloc(flen);
	if (!filt || read_all(CTL_FD, filt, flen) < 0) {
		say("e %ld\n", EPROTO, 0);
		return 127;
	}
	struct sock_fprog prog = { .len = (unsigned short)(flen / sizeof *filt), .filter = filt };

	int sync[2];
	if (pipe2(sync, O_CLOEXEC) < 0) {
		say("e %ld\n", errno, 0);
		return 127;
	}
	pid_t self = getpid(), sup = getppid();
	runner = fork();
	if (runner < 0) {
		say("e %ld\n", errno, 0);
		return 127;
	}
	if (runner == 0) {
		close(sync[0]);
		setsid();
		int err = 0, ll = 0;
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
			err = errno;
		else
			ll = enter_domain(); /* (Landlock needs no_new_privs) */
		if (!err && (own_filter(self, sup) < 0 ||
		             syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0))
			err = errno ? errno : EPERM;
		if (!err) {
			sigprocmask(SIG_UNBLOCK, &all, NULL);
			/* The first word says the domain's ABI; a failed exec
			 * writes its errno after it. */
			int word = ll;
			(void)write_all(sync[1], (const char *)&word, sizeof word);
			execv(argv[1], argv + 1);
			err = errno;
		}
		int word = -err;
		(void)write_all(sync[1], (const char *)&word, sizeof word);
		_exit(127);
	}
	close(sync[1]);
	free(filt);
	/* The runner's pipes are the runner's: they end when it and what it
	 * started close them, not when this process does. */
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	for (int fd = 0; nul >= 0 && fd < 3; fd++)
		dup2(nul, fd);
	if (nul > 2)
		close(nul);
	int word = 0, ll = 0, failed = 0;
	if (read_all(sync[0], &word, sizeof word) == 0) {
		if (word < 0)
			failed = -word;
		else
			ll = word;
		if (!failed && read_all(sync[0], &word, sizeof word) == 0 && word < 0)
			failed = -word;
	} else {
		failed = EIO;
	}
	close(sync[0]);
	if (failed) {
		say("e %ld\n", failed, 0);
		kill_all(0);
		return 127;
	}
	say("r %ld %ld\n", runner, ll);

	struct pollfd pf[2] = { { CTL_FD, POLLIN, 0 }, { sfd, POLLIN, 0 } };
	for (;;) {
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pf[1].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof si) > 0) {
			}
			if (reap() || runner_status >= 0) {
				/* The runner ended by itself: what it left goes. */
				kill_all(1);
				finish();
			}
		}
		if (pf[0].revents) {
			char c = 0;
			ssize_t n = read(CTL_FD, &c, 1);
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			kill_all(n == 1 && c == 'k');
			finish();
		}
	}
	kill_all(0);
	finish();
	return 0;
}
