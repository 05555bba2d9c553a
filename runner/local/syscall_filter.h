/*
 * syscall_filter.h - the seccomp filter every local-backend program runs under,
 * built once with libseccomp and handed to bubblewrap (--seccomp FD) as
 * compiled BPF; on the Kubernetes backend the same rules, compiled for the
 * pod's architecture, reach the pod helper (k8s/backend/kube_super.h), which
 * installs them in every runner.
 *
 * The filter allows by default and refuses, with EPERM, what a container
 * runtime's default profile refuses to an unprivileged container (Docker's
 * and containerd's): mounting, new namespaces (unshare, setns, clone with a
 * CLONE_NEW* flag), keyrings, bpf, ptrace and cross-process memory access,
 * kernel modules and kexec, open_by_handle_at, perf events, userfaultfd,
 * swap, reboot, accounting, quotas, the kernel log, clocks, io_uring,
 * terminal injection (TIOCSTI), and unix sockets of its own (socket(AF_UNIX):
 * a host daemon's socket file answers a connect() through any network
 * namespace and read-only mount; socketpair(2) stays allowed), every other
 * socket family but IPv4, IPv6 and netlink's NETLINK_ROUTE (AF_VSOCK,
 * AF_PACKET, the other netlink protocols, ...; Node reads its addresses over
 * NETLINK_ROUTE), personality(2) but PER_LINUX, PER_LINUX32 and UNAME26, and
 * modify_ldt. clone3 answers ENOSYS, as in Docker's profile,
 * because its flags cannot be inspected: the C library then falls back to
 * clone, whose flags can. A syscall of another architecture (i386 or x32
 * entry points on x86_64) kills the process: nothing legitimate uses them
 * and the rules above would not apply to them.
 *
 * Ownership: local_seccomp_bpf() and local_seccomp_bpf_arch() return a new
 * buffer the caller frees with free(). Context: any thread; blocks on nothing
 * (a memfd round trip).
 */
#ifndef LOCAL_SYSCALL_FILTER_H
#define LOCAL_SYSCALL_FILTER_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/**
 * local_seccomp_bpf() - the filter as a BPF program (struct sock_filter[]).
 * @out: set to a new buffer of @len bytes (free with free()).
 *
 * Return: 0, or CP_E_UNSUPPORTED when libseccomp cannot build the filter
 * for this architecture, or CP_E_IO / CP_E_NOMEM.
 */
int local_seccomp_bpf(unsigned char **out, size_t *len, struct cp_err *err);

/**
 * local_seccomp_bpf_arch() - the same filter built for another architecture,
 * so that the filter a machine of that architecture runs can be checked as
 * data on this one (tests/unit/test_syscall_filter.c).
 * @arch: a libseccomp SCMP_ARCH_* token; SCMP_ARCH_NATIVE (0) is
 *        local_seccomp_bpf(). A syscall of any other architecture kills.
 *
 * Return: as local_seccomp_bpf().
 */
int local_seccomp_bpf_arch(uint32_t arch, unsigned char **out, size_t *len, struct cp_err *err);

#endif
