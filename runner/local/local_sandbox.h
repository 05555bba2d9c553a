/*
 * local_sandbox.h - how the local backend confines a program (SECURITY.md):
 * the bubblewrap command line, the seccomp filter handed to it, the host
 * user the program runs as, its resource limits, and the start-up probe
 * that proves all of it on this machine before any program runs.
 *
 * The chain for one execution is
 *   bwrap [namespaces, mounts, --cap-drop, --seccomp 3] --
 *     prlimit [hard limits] -- [setpriv [host user, no capabilities] --] node ...
 * setpriv appears only when codepod runs as root: bubblewrap then keeps just
 * the capabilities setpriv needs to switch to the sandbox user, and setpriv
 * drops those too. Unprivileged, bubblewrap puts the program in a user
 * namespace of its own and drops every capability itself. Either way the
 * program ends with no capability in any set, no_new_privs and the filter.
 *
 * Ownership: local_sandbox_init() fills a caller-owned struct whose strings
 * and buffers it allocates; local_sandbox_free() releases them. Argument
 * vectors point into the struct and into the caller's strings: valid while
 * both are.
 *
 * Context: local_sandbox_init() and local_sandbox_probe() block (they run once,
 * before the loop). local_sandbox_argv() reads the host's / (host_root.h);
 * the rest never blocks.
 */
#ifndef LOCAL_SANDBOX_H
#define LOCAL_SANDBOX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"
#include "runner/local/host_root.h"

/* Where the conversation's workspace is inside the sandbox (its host
 * folder is bound there), the working folder of programs and commands. */
#define LOCAL_SANDBOX_WORKSPACE "/workspace"

/* Room for the chain up to the command (host_root.h's entries, the hidden
 * paths, the ancestors of Node's folder): callers size their vectors so. */
#define LOCAL_SANDBOX_MAX_ARGS 768

/* Processes (threads included) one sandbox user may have at once, host-wide:
 * bounds a fork bomb. As root each conversation has a user of its own
 * (sandbox_uids.h), so this is a conversation's budget; with one
 * --sandbox-user, or unprivileged, every conversation shares it. A Node
 * process uses about a dozen. */
#define LOCAL_SANDBOX_NPROC 4096

/* the secret files, $HOME, /run and
 * the folders local_sandbox_reach() covers */
#define LOCAL_SANDBOX_MAX_HIDE 48

struct local_sandbox {
	int as_root;          /* codepod is root: switch users with setpriv */
	int fixed_user;       /* --sandbox-user: every program runs as uid/gid */
	uid_t uid;            /* fixed_user only */
	gid_t gid;
	uint32_t uid_first;   /* as root without fixed_user: a user per */
	uint32_t uid_count;   /* conversation from this range (sandbox_uids.h) */
	char *setpriv;        /* resolved paths, NULL when not needed */
	char *prlimit;
	unsigned char *bpf;   /* the compiled seccomp filter */
	size_t bpf_len;
	char *hide[LOCAL_SANDBOX_MAX_HIDE]; /* host paths covered in the sandbox */
	int hide_is_dir[LOCAL_SANDBOX_MAX_HIDE];
	size_t nhide;
};

/**
 * local_sandbox_user_parse() - parse --sandbox-user: a user name, a UID, or
 * UID:GID / NAME:GROUP. Without a group, the user's primary group (for a
 * name) or the same number (for a UID). Root (0) is refused.
 */
int local_sandbox_user_parse(const char *spec, uid_t *uid, gid_t *gid, struct cp_err *err);

/**
 * local_sandbox_init() - everything the sandbox needs, checked.
 * @user: --sandbox-user (one user for every program), or NULL.
 * @uids: --sandbox-uids FIRST-LAST (a user per conversation), or NULL for
 *        the default range; with @user, refused. Either, given while codepod
 *        is not root, is refused (only root can switch users).
 * @hide: files to make unreadable inside (every file an option names that
 *        holds a secret), NULL-terminated, or NULL. Each is covered at its
 *        real path (a symlink's target; a relative path made absolute).
 *
 * Return: 0, or CP_E_UNSUPPORTED naming what is missing (setpriv, prlimit,
 * a seccomp filter), or CP_E_INVALID_REQUEST for a bad --sandbox-user.
 */
int local_sandbox_init(struct local_sandbox *s, const char *user, const char *uids,
                     const char *const *hide, struct cp_err *err);

void local_sandbox_free(struct local_sandbox *s);

/**
 * local_sandbox_reach() - make @path reachable for the sandbox user: the
 * topmost folder on the way to it that the user may not search (a 0700
 * home, say) is covered with an empty tmpfs inside the sandbox, so the
 * binds made after it (state folder, Node, workspace) can be walked to,
 * while the rest of that folder stays out of sight. A no-op unprivileged.
 */
void local_sandbox_reach(struct local_sandbox *s, const char *path);

/* What local_sandbox_argv() needs to know about one execution. */
struct local_sandbox_run {
	const char *state_dir; /* hidden but for ws */
	const char *node_root; /* bound read-only (it may live under a hidden folder) */
	const char *ws;        /* the workspace's host folder: bound read-write at
	                        * LOCAL_SANDBOX_WORKSPACE, the working folder */
	unsigned long memory_mb; /* sizes the data limit and /tmp; 0: unlimited */
	uid_t uid;             /* as root: the program's host user and group */
	gid_t gid;             /* (the workspace's owner) */
};

/* Room the caller keeps for numbers formatted into the argv. */
struct local_sandbox_buf {
	char tmp_size[32], data[64], uid[16], gid[16];
	/* the ancestors of the state folder and Node's, NUL-separated */
	char dirs[16384];
	size_t dirs_used;
	struct local_root root; /* the host's top-level entries, scanned */
	struct cp_err why;      /* when local_sandbox_argv() failed other than on room */
};

/**
 * local_sandbox_argv() - write the chain up to (not including) the command
 * into @argv, which has @cap slots; the command follows at the returned
 * index. Seccomp is read from fd 3 (see local_sandbox_seccomp_fd). Reads
 * the host's / (host_root.h: synchronous, metadata only).
 *
 * Return: the number of slots used, or -1 when @cap is too small or the
 * host's / could not be scanned (then @buf->why says why).
 */
int local_sandbox_argv(const struct local_sandbox *s, const struct local_sandbox_run *run,
                     struct local_sandbox_buf *buf, const char **argv, size_t cap);

/**
 * local_sandbox_seccomp_fd() - a new pipe's read end holding the filter, for
 * one bubblewrap to read as fd 3 (the caller closes it once the child runs).
 * Return: the fd, or a negative cp_code with err filled.
 */
int local_sandbox_seccomp_fd(const struct local_sandbox *s, struct cp_err *err);

/**
 * local_sandbox_probe() - run the whole chain once, with @ws as its
 * workspace: `cat /proc/self/status`, then `NODE --version` (so Node is
 * known to run there as the sandbox user). The status must show
 * no capability in any set, NoNewPrivs 1, Seccomp 2 (filter mode) and, when
 * codepod is root, a user other than root.
 *
 * Return: 0, or CP_E_UNSUPPORTED naming the first guarantee missing.
 */
int local_sandbox_probe(const struct local_sandbox *s, const struct local_sandbox_run *run,
                      const char *node, struct cp_err *err);

#endif
