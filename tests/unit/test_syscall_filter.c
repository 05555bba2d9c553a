/* Unit tests for runner/local/syscall_filter.c, the filter as data: built for
 * aarch64 (and x86_64) through local_seccomp_bpf_arch(), its BPF program is run
 * here on the seccomp_data the kernel would hand it for each call, and the
 * verdict compared with what syscall_filter.h says: EPERM for every refused
 * call, ENOSYS for clone3, the process killed for another architecture's
 * entry points, everything else allowed. The syscall numbers come from
 * libseccomp's tables of that architecture, not from the filter. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <termios.h>

#include <cmocka.h>

#include "runner/local/syscall_filter.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

#define EPERM_VERDICT (SECCOMP_RET_ERRNO | EPERM)
#define ENOSYS_VERDICT (SECCOMP_RET_ERRNO | ENOSYS)

/* What syscall_filter.h says the filter refuses with EPERM, whatever the
 * arguments. */
static const char *const refused[] = {
	"mount", "umount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree",
	"fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	"unshare", "setns",
	"keyctl", "add_key", "request_key", "bpf", "ptrace", "process_vm_readv",
	"process_vm_writev", "kcmp", "pidfd_getfd",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"create_module", "get_kernel_syms", "query_module", "uselib", "lookup_dcookie",
	"nfsservctl", "_sysctl", "iopl", "ioperm", "reboot", "swapon", "swapoff", "acct",
	"quotactl", "quotactl_fd", "syslog", "vhangup",
	"open_by_handle_at", "name_to_handle_at",
	"perf_event_open", "userfaultfd", "fanotify_init", "io_uring_setup",
	"io_uring_enter", "io_uring_register",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "stime",
	"sethostname", "setdomainname",
	"modify_ldt",
};

/* Calls a program makes all the time: allowed. */
static const char *const ordinary[] = {
	"read", "write", "openat", "close", "mmap", "execve", "getpid", "futex", "epoll_pwait",
	"socketpair", "wait4", "kill", "prctl", "seccomp",
};

static const unsigned long long new_ns_flags[] = {
	CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER,
	CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWTIME,
};

struct arch_case {
	uint32_t token;         /* SCMP_ARCH_* */
	uint32_t audit;         /* the seccomp_data.arch the kernel reports */
	uint32_t foreign[2];    /* other entry points of such a machine */
	const char *absent[16]; /* refused names this architecture has no call for */
};

static const struct arch_case aarch64 = {
	SCMP_ARCH_AARCH64, AUDIT_ARCH_AARCH64, { AUDIT_ARCH_ARM, AUDIT_ARCH_X86_64 },
	{ "umount", "create_module", "get_kernel_syms", "query_module", "uselib", "_sysctl",
	  "iopl", "ioperm", "stime", "modify_ldt", NULL },
};

static const struct arch_case x86_64 = {
	SCMP_ARCH_X86_64, AUDIT_ARCH_X86_64, { AUDIT_ARCH_I386, AUDIT_ARCH_AARCH64 },
	{ "umount", "stime", NULL },
};

struct filter {
	struct sock_filter *insn;
	size_t n;
	const struct arch_case *arch;
};

static struct filter build(const struct arch_case *arch)
{
	unsigned char *bpf = NULL;
	size_t len = 0;
	struct cp_err err = { 0 };
	struct filter f = { 0 };

	assert_int_equal(local_seccomp_bpf_arch(arch->token, &bpf, &len, &err), 0);
	assert_true(len > 0 && len % sizeof(struct sock_filter) == 0);
	f.insn = (struct sock_filter *)bpf;
	f.n = len / sizeof(struct sock_filter);
	f.arch = arch;
	return f;
}

static void put_le32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* Runs the program on struct seccomp_data as a little-endian machine (both
 * architectures here are) lays it out: nr, arch, instruction_pointer, args. */
static uint32_t verdict_for(const struct filter *f, uint32_t audit_arch, int nr,
                            const uint64_t args[6])
{
	unsigned char data[64] = { 0 };
	uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = { 0 };

	put_le32(data, (uint32_t)nr);
	put_le32(data + 4, audit_arch);
	for (int i = 0; i < 6; i++) {
		put_le32(data + 16 + 8 * i, (uint32_t)args[i]);
		put_le32(data + 20 + 8 * i, (uint32_t)(args[i] >> 32));
	}
	for (size_t pc = 0, steps = 0; steps < 100000; steps++) {
		assert_true(pc < f->n);
		const struct sock_filter *in = &f->insn[pc++];
		uint32_t k = in->k;
		switch (in->code) {
		case BPF_LD | BPF_W | BPF_ABS:
			assert_true(k % 4 == 0 && k + 4 <= sizeof data);
			a = (uint32_t)data[k] | (uint32_t)data[k + 1] << 8 |
			    (uint32_t)data[k + 2] << 16 | (uint32_t)data[k + 3] << 24;
			break;
		case BPF_LD | BPF_IMM: a = k; break;
		case BPF_LDX | BPF_IMM: x = k; break;
		case BPF_LD | BPF_MEM: assert_true(k < BPF_MEMWORDS); a = mem[k]; break;
		case BPF_LDX | BPF_MEM: assert_true(k < BPF_MEMWORDS); x = mem[k]; break;
		case BPF_ST: assert_true(k < BPF_MEMWORDS); mem[k] = a; break;
		case BPF_STX: assert_true(k < BPF_MEMWORDS); mem[k] = x; break;
		case BPF_ALU | BPF_AND | BPF_K: a &= k; break;
		case BPF_ALU | BPF_OR | BPF_K: a |= k; break;
		case BPF_ALU | BPF_AND | BPF_X: a &= x; break;
		case BPF_MISC | BPF_TAX: x = a; break;
		case BPF_MISC | BPF_TXA: a = x; break;
		case BPF_JMP | BPF_JA: pc += k; break;
		case BPF_JMP | BPF_JEQ | BPF_K: pc += a == k ? in->jt : in->jf; break;
		case BPF_JMP | BPF_JGT | BPF_K: pc += a > k ? in->jt : in->jf; break;
		case BPF_JMP | BPF_JGE | BPF_K: pc += a >= k ? in->jt : in->jf; break;
		case BPF_JMP | BPF_JSET | BPF_K: pc += (a & k) ? in->jt : in->jf; break;
		case BPF_JMP | BPF_JEQ | BPF_X: pc += a == x ? in->jt : in->jf; break;
		case BPF_JMP | BPF_JGT | BPF_X: pc += a > x ? in->jt : in->jf; break;
		case BPF_JMP | BPF_JGE | BPF_X: pc += a >= x ? in->jt : in->jf; break;
		case BPF_JMP | BPF_JSET | BPF_X: pc += (a & x) ? in->jt : in->jf; break;
		case BPF_RET | BPF_K: return k;
		case BPF_RET | BPF_A: return a;
		default:
			fail_msg("BPF instruction 0x%04x at %zu is not simulated here", in->code, pc - 1);
		}
	}
	fail_msg("the BPF program did not return");
	return 0;
}

static int nr_of(const struct filter *f, const char *name)
{
	return seccomp_syscall_resolve_name_arch(f->arch->token, name);
}

static uint32_t verdict(const struct filter *f, const char *name, uint64_t a0, uint64_t a1)
{
	int nr = nr_of(f, name);
	if (nr < 0)
		fail_msg("libseccomp knows no %s for this architecture", name);
	const uint64_t args[6] = { a0, a1, 0, 0, 0, 0 };
	return verdict_for(f, f->arch->audit, nr, args);
}

static int is_absent(const struct arch_case *arch, const char *name)
{
	for (size_t i = 0; arch->absent[i]; i++)
		if (strcmp(arch->absent[i], name) == 0)
			return 1;
	return 0;
}

static void check_refused_calls(const struct arch_case *arch)
{
	struct filter f = build(arch);
	size_t checked = 0;

	for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
		int nr = nr_of(&f, refused[i]);
		if (is_absent(arch, refused[i])) {
			assert_true(nr < 0); /* the list of absent names stays exact */
			continue;
		}
		if (nr < 0)
			fail_msg("libseccomp knows no %s here", refused[i]);
		/* whatever the arguments */
		const uint64_t zero[6] = { 0 }, ones[6] = { ~0ull, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull };
		uint32_t v0 = verdict_for(&f, arch->audit, nr, zero);
		uint32_t v1 = verdict_for(&f, arch->audit, nr, ones);
		if (v0 != EPERM_VERDICT || v1 != EPERM_VERDICT)
			fail_msg("%s: verdict 0x%08x / 0x%08x, want ERRNO(EPERM) 0x%08x", refused[i],
			         v0, v1, EPERM_VERDICT);
		checked++;
	}
	assert_true(checked >= 45);
	for (size_t i = 0; i < sizeof ordinary / sizeof ordinary[0]; i++) {
		uint32_t v = verdict(&f, ordinary[i], 0, 0);
		if (v != SECCOMP_RET_ALLOW)
			fail_msg("%s: verdict 0x%08x, want ALLOW", ordinary[i], v);
	}
	free(f.insn);
}

static uint32_t socket_verdict(const struct filter *f, uint64_t family, uint64_t protocol)
{
	const uint64_t args[6] = { family, SOCK_RAW, protocol, 0, 0, 0 };
	return verdict_for(f, f->arch->audit, nr_of(f, "socket"), args);
}

/* IPv4, IPv6 and NETLINK_ROUTE only (syscall_filter.c says why). */
static void check_socket_families(const struct filter *f)
{
	for (uint64_t fam = 0; fam < 128; fam++) {
		uint32_t want = fam == AF_INET || fam == AF_INET6 || fam == AF_NETLINK
		                        ? SECCOMP_RET_ALLOW : EPERM_VERDICT;
		if (socket_verdict(f, fam, 0) != want)
			fail_msg("socket family %llu: verdict 0x%08x, want 0x%08x",
			         (unsigned long long)fam, socket_verdict(f, fam, 0), want);
	}
	assert_int_equal(socket_verdict(f, AF_VSOCK, 0), EPERM_VERDICT);
	assert_int_equal(socket_verdict(f, AF_PACKET, 0), EPERM_VERDICT);
	assert_int_equal(socket_verdict(f, 0x7fffffff, 0), EPERM_VERDICT);
	assert_int_equal(socket_verdict(f, 0xffffffff00000000ull | AF_VSOCK, 0), EPERM_VERDICT);
	/* netlink: every protocol but NETLINK_ROUTE (0) */
	for (uint64_t proto = 1; proto < 32; proto++)
		if (socket_verdict(f, AF_NETLINK, proto) != EPERM_VERDICT)
			fail_msg("netlink protocol %llu is not refused", (unsigned long long)proto);
	assert_int_equal(socket_verdict(f, AF_NETLINK, 0xffffffffull), EPERM_VERDICT);
	assert_int_equal(socket_verdict(f, AF_INET, IPPROTO_TCP), SECCOMP_RET_ALLOW);
}

/* PER_LINUX, PER_LINUX32 and UNAME26 and their combinations only. */
static void check_personality(const struct filter *f)
{
	const uint64_t allowed[] = { 0, 0x0008, 0x20000, 0x20008 };
	for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
		assert_int_equal(verdict(f, "personality", allowed[i], 0), SECCOMP_RET_ALLOW);
	for (unsigned bit = 0; bit < 32; bit++) {
		uint64_t v = 1ull << bit;
		if (v == 0x0008 || v == 0x20000)
			continue;
		if (verdict(f, "personality", v, 0) != EPERM_VERDICT)
			fail_msg("personality 0x%llx is not refused", (unsigned long long)v);
	}
	assert_int_equal(verdict(f, "personality", 0xffffffffull, 0), EPERM_VERDICT);
	assert_int_equal(verdict(f, "personality", 0x0040000, 0), EPERM_VERDICT); /* ADDR_NO_RANDOMIZE */
}

static void check_argument_rules(const struct arch_case *arch)
{
	struct filter f = build(arch);

	for (size_t i = 0; i < sizeof new_ns_flags / sizeof new_ns_flags[0]; i++) {
		if (verdict(&f, "clone", new_ns_flags[i] | SIGCHLD, 0) != EPERM_VERDICT)
			fail_msg("clone with flag 0x%llx is not refused", new_ns_flags[i]);
		/* with other flags besides, and with junk in the upper 32 bits */
		assert_int_equal(verdict(&f, "clone", new_ns_flags[i] | CLONE_VM | CLONE_FILES, 0),
		                 EPERM_VERDICT);
		assert_int_equal(verdict(&f, "clone", 0xffffffff00000000ull | new_ns_flags[i], 0),
		                 EPERM_VERDICT);
	}
	assert_int_equal(verdict(&f, "clone", SIGCHLD, 0), SECCOMP_RET_ALLOW);
	assert_int_equal(verdict(&f, "clone", CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND |
	                                      CLONE_THREAD | CLONE_SYSVSEM | CLONE_SETTLS |
	                                      CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID, 0),
	                 SECCOMP_RET_ALLOW);
	assert_int_equal(verdict(&f, "clone3", 0, 0), ENOSYS_VERDICT);

	assert_int_equal(verdict(&f, "socket", AF_UNIX, SOCK_STREAM), EPERM_VERDICT);
	assert_int_equal(verdict(&f, "socket", AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC), EPERM_VERDICT);
	assert_int_equal(verdict(&f, "socket", AF_INET, SOCK_STREAM), SECCOMP_RET_ALLOW);
	assert_int_equal(verdict(&f, "socket", AF_INET6, SOCK_DGRAM), SECCOMP_RET_ALLOW);
	assert_int_equal(verdict(&f, "socketpair", AF_UNIX, SOCK_STREAM), SECCOMP_RET_ALLOW);
	check_socket_families(&f);
	check_personality(&f);

	/* the kernel reads the request as 32 bits: so does the filter */
	assert_int_equal(verdict(&f, "ioctl", 0, TIOCSTI), EPERM_VERDICT);
	assert_int_equal(verdict(&f, "ioctl", 0, 0xffffffff00000000ull | TIOCSTI), EPERM_VERDICT);
	assert_int_equal(verdict(&f, "ioctl", 0, TIOCLINUX), EPERM_VERDICT);
	assert_int_equal(verdict(&f, "ioctl", 0, TCGETS), SECCOMP_RET_ALLOW);
	assert_int_equal(verdict(&f, "ioctl", 0, TIOCGWINSZ), SECCOMP_RET_ALLOW);
	free(f.insn);
}

static void check_other_architectures_are_killed(const struct arch_case *arch)
{
	struct filter f = build(arch);
	const uint64_t args[6] = { 0 };
	int getpid_nr = nr_of(&f, "getpid");

	for (size_t i = 0; i < 2; i++)
		assert_int_equal(verdict_for(&f, arch->foreign[i], getpid_nr, args),
		                 SECCOMP_RET_KILL_PROCESS);
	if (arch->token == SCMP_ARCH_X86_64) /* x32's calls: x86_64's arch, bit 30 set */
		assert_int_equal(verdict_for(&f, arch->audit, 0x40000000 | getpid_nr, args),
		                 SECCOMP_RET_KILL_PROCESS);
	free(f.insn);
}

static void test_aarch64_refused_calls(void **state)
{
	(void)state;
	check_refused_calls(&aarch64);
}

static void test_aarch64_argument_rules(void **state)
{
	(void)state;
	check_argument_rules(&aarch64);
}

static void test_aarch64_other_architectures_killed(void **state)
{
	(void)state;
	check_other_architectures_are_killed(&aarch64);
}

static void test_x86_64_refused_calls(void **state)
{
	(void)state;
	check_refused_calls(&x86_64);
}

static void test_x86_64_argument_rules(void **state)
{
	(void)state;
	check_argument_rules(&x86_64);
}

static void test_x86_64_other_architectures_killed(void **state)
{
	(void)state;
	check_other_architectures_are_killed(&x86_64);
}

/* The native build is one of the two above on the machines codepod runs on. */
static void test_native_is_local_seccomp_bpf(void **state)
{
	unsigned char *a = NULL, *b = NULL;
	size_t alen = 0, blen = 0;
	struct cp_err err = { 0 };

	(void)state;
	assert_int_equal(local_seccomp_bpf(&a, &alen, &err), 0);
	assert_int_equal(local_seccomp_bpf_arch(seccomp_arch_native(), &b, &blen, &err), 0);
	assert_int_equal(alen, blen);
	assert_memory_equal(a, b, alen);
	free(a);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_aarch64_refused_calls),
		cmocka_unit_test(test_aarch64_argument_rules),
		cmocka_unit_test(test_aarch64_other_architectures_killed),
		cmocka_unit_test(test_x86_64_refused_calls),
		cmocka_unit_test(test_x86_64_argument_rules),
		cmocka_unit_test(test_x86_64_other_architectures_killed),
		cmocka_unit_test(test_native_is_local_seccomp_bpf),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
