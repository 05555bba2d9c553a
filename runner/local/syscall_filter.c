/*
 * syscall_filter.c - the local sandbox's seccomp filter (see syscall_filter.h for what it
 * refuses and why).
 */
#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <linux/netlink.h>
#include <unistd.h>

#include "base/fileio.h"
#include "runner/local/syscall_filter.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

/* Refused with EPERM. Names this libseccomp does not know for the native
 * architecture (e.g. i386-only calls) are skipped. */
static const char *const denied[] = {
	/* the mount table: the sandbox's view of the host is fixed */
	"mount", "umount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree",
	"fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	/* namespaces: a new user namespace would hand back every capability */
	"unshare", "setns",
	/* kernel keyrings, eBPF, other processes' memory */
	"keyctl", "add_key", "request_key", "bpf", "ptrace", "process_vm_readv",
	"process_vm_writev", "kcmp", "pidfd_getfd",
	/* the kernel itself */
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"create_module", "get_kernel_syms", "query_module", "uselib", "lookup_dcookie",
	"nfsservctl", "_sysctl", "iopl", "ioperm", "reboot", "swapon", "swapoff", "acct",
	"quotactl", "quotactl_fd", "syslog", "vhangup",
	/* file handles reach files outside the sandbox's mounts */
	"open_by_handle_at", "name_to_handle_at",
	/* side channels and kernel attack surface */
	"perf_event_open", "userfaultfd", "fanotify_init", "io_uring_setup",
	"io_uring_enter", "io_uring_register",
	/* host-wide clocks and names */
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "stime",
	"sethostname", "setdomainname",
	/* x86's local descriptor tables: old exploits' favourite, no use to Node */
	"modify_ldt",
};

/* Socket families a program may create: IPv4 and IPv6 (its own network
 * namespace holds only lo) and netlink for NETLINK_ROUTE alone, which glibc's
 * getifaddrs() (Node's os.networkInterfaces()) and getaddrinfo() with
 * AI_ADDRCONFIG (dns.lookup) open to read the namespace's addresses. Every
 * other family up to SOCKET_FAMILY_LIMIT, and any number past it, is refused:
 * AF_UNIX (below), AF_VSOCK (a VM's host, which no network namespace
 * covers), AF_PACKET, every other netlink protocol, and the rest. */
#define SOCKET_FAMILY_LIMIT 64 /* past AF_MAX (46 in Linux 6.x) */

/* personality(2) values left alone: PER_LINUX, PER_LINUX32 and UNAME26, as
 * in Docker's profile; every other bit (ADDR_NO_RANDOMIZE,
 * READ_IMPLIES_EXEC, ...) is refused, and so is the query 0xffffffff, which
 * neither Node nor the C library makes. The kernel reads 32 bits. */
#define PERSONALITY_ALLOWED_BITS 0x00020008u

static const unsigned long long new_ns_flags[] = {
	CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER,
	CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWTIME,
};

static int add_rules(scmp_filter_ctx ctx)
{
	int rc = 0;
	for (size_t i = 0; i < sizeof denied / sizeof denied[0] && rc == 0; i++) {
		int nr = seccomp_syscall_resolve_name(denied[i]);
		if (nr != __NR_SCMP_ERROR)
			rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
	}
	/* One rule per flag: libseccomp compares "masked equal", not "any bit set". */
	for (size_t i = 0; i < sizeof new_ns_flags / sizeof new_ns_flags[0] && rc == 0; i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
		                      SCMP_A0(SCMP_CMP_MASKED_EQ, new_ns_flags[i], new_ns_flags[i]));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	/* A unix socket at a host path answers a connect() even from another
	 * network namespace and through a read-only mount: no AF_UNIX sockets
	 * of the program's own (socketpair(2), which libuv uses for child
	 * stdio, stays allowed: it reaches nothing outside the process tree). */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
		                      SCMP_A0(SCMP_CMP_EQ, AF_UNIX, 0));
	/* The kernel reads the family as an int: compare 32 bits, and refuse
	 * any value with upper bits set (none is a family a program needs). */
	for (unsigned fam = 0; fam < SOCKET_FAMILY_LIMIT && rc == 0; fam++)
		if (fam != AF_UNIX && fam != AF_INET && fam != AF_INET6 && fam != AF_NETLINK)
			rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
			                      SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, fam));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
		                      SCMP_A0(SCMP_CMP_GE, SOCKET_FAMILY_LIMIT, 0));
	/* netlink but NETLINK_ROUTE (the C library passes the int protocol
	 * sign-extended, so 64 bits compare) */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 2,
		                      SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, AF_NETLINK),
		                      SCMP_A2(SCMP_CMP_NE, NETLINK_ROUTE, 0));
	/* One rule per refused bit, as for clone's flags. */
	for (unsigned bit = 0; bit < 32 && rc == 0; bit++)
		if (!(PERSONALITY_ALLOWED_BITS & (1u << bit)))
			rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
			                      SCMP_A0(SCMP_CMP_MASKED_EQ, 1ull << bit, 1ull << bit));
	/* The kernel reads an ioctl request as 32 bits: compare only those. */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
		                      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
		                      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX));
	return rc;
}

/* libseccomp 2.5 exports to a file descriptor only: go through a memfd. */
static int export_bpf(scmp_filter_ctx ctx, unsigned char **out, size_t *len, struct cp_err *err)
{
	int fd = memfd_create("codepod-seccomp", MFD_CLOEXEC);
	if (fd < 0)
		return cp_err_errno(err, CP_E_IO, errno, "memfd_create");
	int rc = seccomp_export_bpf(ctx, fd);
	off_t size = rc == 0 ? lseek(fd, 0, SEEK_END) : -1;
	if (rc || size <= 0 || lseek(fd, 0, SEEK_SET) != 0) {
		close(fd);
		return cp_err_set(err, CP_E_UNSUPPORTED, "libseccomp could not export the filter");
	}
	struct cp_err ferr;
	size_t got = 0;
	unsigned char *buf = (unsigned char *)cp_read_fd(fd, "the exported seccomp filter",
	                                                 (size_t)size, &got, &ferr);
	close(fd);
	if (!buf)
		return cp_err_set(err, ferr.code == CP_E_NOMEM ? CP_E_NOMEM : CP_E_IO, "reading %s",
		                  ferr.msg);
	if (got != (size_t)size) {
		free(buf);
		return cp_err_set(err, CP_E_IO, "reading the exported seccomp filter failed");
	}
	*out = buf;
	*len = got;
	return 0;
}

int local_seccomp_bpf_arch(uint32_t arch, unsigned char **out, size_t *len, struct cp_err *err)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return cp_err_set(err, CP_E_UNSUPPORTED, "libseccomp cannot build a filter here");
	int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	/* Another architecture replaces the native one; libseccomp carries each
	 * rule over by the syscall's name. */
	if (rc == 0 && arch != SCMP_ARCH_NATIVE && arch != seccomp_arch_native()) {
		rc = seccomp_arch_add(ctx, arch);
		if (rc == 0)
			rc = seccomp_arch_remove(ctx, SCMP_ARCH_NATIVE);
	}
	if (rc == 0)
		rc = add_rules(ctx);
	if (rc) {
		seccomp_release(ctx);
		return cp_err_set(err, CP_E_UNSUPPORTED, "libseccomp refused a rule: %s", strerror(-rc));
	}
	rc = export_bpf(ctx, out, len, err);
	seccomp_release(ctx);
	return rc;
}

int local_seccomp_bpf(unsigned char **out, size_t *len, struct cp_err *err)
{
	return local_seccomp_bpf_arch(SCMP_ARCH_NATIVE, out, len, err);
}
