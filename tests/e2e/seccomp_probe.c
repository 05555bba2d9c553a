/*
 * seccomp_probe.c - makes each system call the local sandbox's seccomp filter
 * refuses (runner/local/syscall_filter.c) and prints, as one JSON object, the
 * errno each one answered (0: it succeeded). Compiled by
 * tests/e2e/test_syscall_filter.py with cc, run inside the sandbox and on the
 * host. x86_64 only.
 *
 * "marked": the calls are made under a filter of the probe's own that answers
 * each of them SECCOMP_RET_TRACE, which with no tracer attached skips the call
 * and answers ENOSYS. Of two filters the kernel keeps the stricter verdict, so
 * the sandbox's ERRNO(EPERM) wins where it refuses, ENOSYS means the call went
 * past it, and no call reaches the kernel's own checks: an EPERM here is the
 * filter's and never the kernel's answer to missing privileges or bad
 * arguments. On the host (no sandbox filter) every one answers ENOSYS.
 *
 * "real": calls the kernel itself allows an unprivileged process (ptrace on
 * itself and on its own child), and clone3 with a size the kernel answers
 * EINVAL, made for real: the sandbox's answer there differs from the kernel's.
 *
 * "signal": getpid through the i386 and x32 entry points, each in a child:
 * the signal that ended it (0: none).
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

struct probe {
	const char *name;
	long nr;
	long a0, a1, a2;
};

#define P(n) { #n, SYS_##n, 0, 0, 0 }

/* Every call the filter refuses whatever its arguments (x86_64 has no
 * umount or stime), then the ones it refuses for some arguments only, then
 * the same calls with arguments it lets through. */
static const struct probe probes[] = {
	P(mount), P(umount2), P(pivot_root), P(chroot), P(move_mount), P(open_tree),
	P(fsopen), P(fsconfig), P(fsmount), P(fspick), P(mount_setattr),
	P(unshare), P(setns),
	P(keyctl), P(add_key), P(request_key), P(bpf), P(ptrace), P(process_vm_readv),
	P(process_vm_writev), P(kcmp), P(pidfd_getfd),
	P(kexec_load), P(kexec_file_load), P(init_module), P(finit_module), P(delete_module),
	P(create_module), P(get_kernel_syms), P(query_module), P(uselib), P(lookup_dcookie),
	P(nfsservctl), P(_sysctl), P(iopl), P(ioperm), P(reboot), P(swapon), P(swapoff),
	P(acct), P(quotactl), P(quotactl_fd), P(syslog), P(vhangup),
	P(open_by_handle_at), P(name_to_handle_at),
	P(perf_event_open), P(userfaultfd), P(fanotify_init), P(io_uring_setup),
	P(io_uring_enter), P(io_uring_register),
	P(settimeofday), P(clock_settime), P(clock_adjtime), P(adjtimex),
	P(sethostname), P(setdomainname), P(modify_ldt),
	{ "clone_newns", SYS_clone, CLONE_NEWNS | SIGCHLD, 0, 0 },
	{ "clone_newcgroup", SYS_clone, CLONE_NEWCGROUP | SIGCHLD, 0, 0 },
	{ "clone_newuts", SYS_clone, CLONE_NEWUTS | SIGCHLD, 0, 0 },
	{ "clone_newipc", SYS_clone, CLONE_NEWIPC | SIGCHLD, 0, 0 },
	{ "clone_newuser", SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0 },
	{ "clone_newpid", SYS_clone, CLONE_NEWPID | SIGCHLD, 0, 0 },
	{ "clone_newnet", SYS_clone, CLONE_NEWNET | SIGCHLD, 0, 0 },
	{ "clone_newtime", SYS_clone, CLONE_NEWTIME | SIGCHLD, 0, 0 },
	{ "socket_unix", SYS_socket, AF_UNIX, SOCK_STREAM, 0 },
	{ "ioctl_tiocsti", SYS_ioctl, 0, TIOCSTI, 0 },
	/* the kernel reads the request as 32 bits, so must the filter */
	{ "ioctl_tiocsti_high_bits", SYS_ioctl, 0, (long)(0xffffffff00000000ul | TIOCSTI), 0 },
	{ "ioctl_tioclinux", SYS_ioctl, 0, TIOCLINUX, 0 },
	/* socket families but IPv4, IPv6 and NETLINK_ROUTE (AF_PACKET would be
	 * the kernel's EPERM without CAP_NET_RAW: marked, it is the filter's) */
	{ "socket_vsock", SYS_socket, AF_VSOCK, SOCK_STREAM, 0 },
	{ "socket_packet", SYS_socket, AF_PACKET, SOCK_RAW, 0 },
	{ "socket_netlink_audit", SYS_socket, AF_NETLINK, SOCK_RAW, 9 },
	{ "socket_netlink_uevent", SYS_socket, AF_NETLINK, SOCK_DGRAM, 15 },
	{ "socket_netlink_sock_diag", SYS_socket, AF_NETLINK, SOCK_DGRAM, 4 },
	{ "socket_bluetooth", SYS_socket, AF_BLUETOOTH, SOCK_STREAM, 0 },
	{ "socket_alg", SYS_socket, AF_ALG, SOCK_SEQPACKET, 0 },
	{ "socket_family_1000", SYS_socket, 1000, SOCK_STREAM, 0 },
	{ "personality_addr_no_randomize", SYS_personality, 0x0040000, 0, 0 },
	{ "personality_read_implies_exec", SYS_personality, 0x0400000, 0, 0 },
	{ "personality_query", SYS_personality, 0xffffffffl, 0, 0 },
	/* allowed: what fork(), libuv and Node themselves call */
	{ "allowed_clone_fork", SYS_clone, SIGCHLD, 0, 0 },
	{ "allowed_clone_thread", SYS_clone,
	  CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM, 0, 0 },
	{ "allowed_socket_inet", SYS_socket, AF_INET, SOCK_STREAM, 0 },
	{ "allowed_socket_inet6", SYS_socket, AF_INET6, SOCK_DGRAM, 0 },
	{ "allowed_socket_netlink_route", SYS_socket, AF_NETLINK, SOCK_RAW, 0 },
	{ "allowed_personality_linux", SYS_personality, 0, 0, 0 },
	{ "allowed_personality_linux32", SYS_personality, 0x0008, 0, 0 },
	{ "allowed_socketpair_unix", SYS_socketpair, AF_UNIX, SOCK_STREAM, 0 },
	{ "allowed_ioctl_tcgets", SYS_ioctl, 0, TCGETS, 0 },
};
#define NPROBES (sizeof probes / sizeof probes[0])

struct text {
	char s[8192];
	size_t len;
};

static void add(struct text *t, const char *sep, const char *name, int value)
{
	int n = snprintf(t->s + t->len, sizeof t->s - t->len, "%s\"%s\": %d", sep, name, value);
	if (n < 0 || (size_t)n >= sizeof t->s - t->len)
		abort();
	t->len += (size_t)n;
}

static int answer(long r)
{
	return r == -1 ? errno : 0;
}

/* The probe's own filter: SECCOMP_RET_TRACE for every probed number. */
static int install_marker(void)
{
	static struct sock_filter f[4 + 2 * NPROBES + 1];
	size_t n = 0;
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
	                                      offsetof(struct seccomp_data, arch));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
	                                      offsetof(struct seccomp_data, nr));
	for (size_t i = 0; i < NPROBES; i++) {
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
		                                      (unsigned)probes[i].nr, 0, 1);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE);
	}
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	struct sock_fprog prog = { .len = (unsigned short)n, .filter = f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

/* In a child (the marker filter stays there): each probe's errno, as
 * "name": errno pairs, through a pipe into @t. */
static void marked(struct text *t)
{
	int p[2];
	if (pipe(p) != 0)
		abort();
	pid_t pid = fork();
	if (pid < 0)
		abort();
	if (pid == 0) {
		static struct text c;
		close(p[0]);
		if (install_marker() != 0) {
			add(&c, "", "marker_not_installed", errno);
		} else {
			for (size_t i = 0; i < NPROBES; i++)
				add(&c, i ? ", " : "", probes[i].name,
				    answer(syscall(probes[i].nr, probes[i].a0, probes[i].a1,
				                   probes[i].a2, 0, 0, 0)));
		}
		_exit(write(p[1], c.s, c.len) == (ssize_t)c.len ? 0 : 1);
	}
	close(p[1]);
	ssize_t r;
	while (t->len < sizeof t->s - 1 &&
	       (r = read(p[0], t->s + t->len, sizeof t->s - 1 - t->len)) > 0)
		t->len += (size_t)r;
	close(p[0]);
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		abort();
}

static int ptrace_traceme(void)
{
	int p[2];
	if (pipe(p) != 0)
		abort();
	pid_t pid = fork();
	if (pid < 0)
		abort();
	if (pid == 0) {
		int e = answer(ptrace(PTRACE_TRACEME, 0, 0, 0));
		_exit(write(p[1], &e, sizeof e) == sizeof e ? 0 : 1);
	}
	close(p[1]);
	int e = -1;
	if (read(p[0], &e, sizeof e) != sizeof e)
		abort();
	close(p[0]);
	int st;
	waitpid(pid, &st, 0);
	return e;
}

/* PTRACE_ATTACH to a child of its own, same user, dumpable: the kernel allows it. */
static int ptrace_attach_child(void)
{
	pid_t pid = fork();
	if (pid < 0)
		abort();
	if (pid == 0) {
		for (;;)
			pause();
	}
	int e = answer(ptrace(PTRACE_ATTACH, pid, 0, 0));
	int st;
	if (e == 0) {
		waitpid(pid, &st, __WALL);
		ptrace(PTRACE_DETACH, pid, 0, 0);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, __WALL);
	return e;
}

/* A syscall through another architecture's entry point, in a child: the
 * signal that ended the child, 0 when it returned. The filter kills the
 * process (SIGSYS); the kernel alone runs it (or, built without that entry
 * point, answers ENOSYS or SIGSEGV). */
static int foreign_entry(int x32)
{
	pid_t pid = fork();
	if (pid < 0)
		abort();
	if (pid == 0) {
		if (x32) {
			syscall(0x40000000 | SYS_getpid);
		} else {
			long r;
			__asm__ volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory"); /* i386 getpid */
			(void)r;
		}
		_exit(0);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid)
		abort();
	return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

int main(void)
{
	static struct text t;
	printf("{\"marked\": {");
	fflush(stdout);
	marked(&t);
	add(&t, "}, \"real\": {", "ptrace_traceme", ptrace_traceme());
	add(&t, ", ", "ptrace_attach_child", ptrace_attach_child());
	/* a size below the first clone_args: the kernel answers EINVAL */
	add(&t, ", ", "clone3_short_args", answer(syscall(SYS_clone3, NULL, 0)));
	add(&t, "}, \"signal\": {", "i386_getpid", foreign_entry(0));
	add(&t, ", ", "x32_getpid", foreign_entry(1));
	printf("%.*s}}\n", (int)t.len, t.s);
	return 0;
}
