/*
 * sandbox.h - the seam between the execution engine and the place a runner
 * process lives: a local child under bubblewrap (local.c) or `node` behind a
 * Kubernetes exec WebSocket (k8s backend). The engine sees only bytes in and
 * out and one exit report; it cannot tell the backends apart.
 *
 * Loop context: everything here runs on the one libuv loop thread.
 *
 * Lifecycle of a process handle:
 *   spawn() -> (out/err callbacks, any number) -> exited() exactly once.
 *   After exited() returns, the handle is gone: the backend frees it and the
 *   engine must not touch it again. kill() and write() are valid until then.
 *   spawn() returning an error means no handle and no callback, ever.
 *   A backend that needs time (acquiring a pod) still returns a handle at
 *   once; failures to acquire come through exited() with `unavailable` set.
 *
 * Ownership: the spawn request, its argv and input are borrowed for the
 * duration of the spawn call (and of the default_runner call). Buffers
 * given to callbacks are borrowed for the call. write() copies what it is
 * given.
 */
#ifndef CODEPOD_SANDBOX_H
#define CODEPOD_SANDBOX_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

struct codepod_proc;
struct codepod_backend;

/* What the processes of one runner used, as the backend reads it
 * (docs/contract.md §4, usage.cpuMs and usage.maxRssBytes): the runner
 * and every process started under it, reaped or killed, from the
 * runner's own start (its boot included: the engine takes off what the
 * runner had used when its program reached it). Processes of the
 * sandbox's own (bubblewrap's) are not counted. Both figures only grow;
 * the engine keeps the largest of each over every reading. */
struct codepod_usage {
	int known;              /* 0: no reading (the figures are 0) */
	uint64_t cpu_us;        /* user + system CPU time, microseconds */
	uint64_t max_rss_bytes; /* the largest peak resident set of one process */
	int restored;           /* the workspace was restored from a snapshot before */
	uint64_t restore_ms;    /* the runner started, taking this long (usage.restoreMs) */
};

struct codepod_proc_exit {
	int code;         /* exit code, or -1 when killed by a signal */
	int signal;       /* terminating signal, or 0 */
	int oom;          /* the sandbox reports an out-of-memory kill (detail, if
	                     set, says what was killed and its limit) */
	int unavailable;  /* the sandbox could not be acquired: see detail */
	int lost;         /* the stream to the process dropped: fate unknown */
	int disk_full;    /* it was ended for taking the workspace past its bound
	                     (a pod's, where no kernel says ENOSPC: detail says
	                     what it held and the bound) */
	char detail[CP_ERR_MSG_MAX]; /* reason for unavailable/lost, e.g. "ImagePullBackOff" */
	struct codepod_usage usage; /* as the backend last read it (known 0: never) */
};

struct codepod_proc_cbs {
	void (*out)(void *ud, const char *buf, size_t len);
	void (*err)(void *ud, const char *buf, size_t len);
	/* Once, after the process ended and its stdout/stderr were drained. */
	void (*exited)(void *ud, const struct codepod_proc_exit *ex);
	/* May be NULL; a backend may never call it. After kill(): every process
	 * of the execution has been sent SIGKILL (none of them runs again) and
	 * everything they wrote before that has been given to out()/err(), so
	 * an outcome need not wait for exited(), which still follows once the
	 * kernel has reaped them (milliseconds of freeing memory, more on a
	 * loaded machine). At most once; may come from inside kill().
	 * @usage: the tree's usage read before any of it got SIGKILL, so
	 * what the killed processes used is in it (known 0: no reading). */
	void (*killed)(void *ud, const struct codepod_usage *usage);
	/* May be NULL: a reading sample() asked for (borrowed for the call).
	 * May come from inside sample(), later, or never (the stream went). */
	void (*usage)(void *ud, const struct codepod_usage *usage);
};

struct codepod_spawn_req {
	const char *conversation;  /* scope key: selects the workspace / pod */
	const char *exec_id;       /* for logs only */
	const char *const *argv;   /* node and its arguments, NULL-terminated;
	                              argv[0] is "node": the backend resolves it */
	const char *input;         /* what the process reads first on stdin (the
	                              runner's source): the backend writes these
	                              @input_len bytes before anything write()
	                              is given; a failure to queue them kills
	                              the process (exited() tells) */
	size_t input_len;
	unsigned long memory_mb;   /* ceiling for the whole runner process */
	uint64_t ws_bytes;         /* the conversation's workspace bounds asked for
	                              (policy maxWorkspaceBytes / maxWorkspaceFiles;
	                              0: the built-in defaults): a backend */
	uint64_t ws_files;         /* that bounds workspaces makes or grows the
	                              workspace to them before the runner starts */
	const char *tag;           /* 32 hex, random per execution: the runner
	                              puts CODEPOD_TAG=<tag> in the environment
	                              of every process it starts, so a backend
	                              can find them all to kill them */
	int standby;               /* 1: a runner started ahead of its execution
	                              (runner/prestart.h): no work yet, so not
	                              "in use" (a pod with only standby runners
	                              is idle), until adopt() */
};

/* One counter a backend reports for /metrics: counters of one name come
 * next to each other, each with its own label. */
struct codepod_backend_stat {
	const char *name;  /* e.g. "codepod_pods_total" (static storage) */
	const char *help;  /* one line (static storage) */
	const char *label; /* e.g. "how=\"found\"" (static storage) */
	unsigned long value;
};

struct codepod_backend_ops {
	int (*spawn)(struct codepod_backend *b, const struct codepod_spawn_req *req,
	             const struct codepod_proc_cbs *cbs, void *ud,
	             struct codepod_proc **out, struct cp_err *err);
	/* Queue bytes for the process's stdin (copied). */
	int (*write)(struct codepod_proc *p, const char *buf, size_t len, struct cp_err *err);
	/* Kill the process and every process it started; exited() still follows,
	 * never from inside this call (killed() may). */
	void (*kill)(struct codepod_proc *p);
	/* The runner's PID inside the sandbox and its start time in clock ticks
	 * since boot (0 when unknown), once known: when the program has reached
	 * the runner (its ready frame), the moment usage counts from (may be
	 * NULL; the local backend kills through bubblewrap and needs neither,
	 * but takes its sandbox's own CPU time until then off its figures). */
	void (*note_pid)(struct codepod_proc *p, long pid, unsigned long long start);
	/* A standby runner now serves execution @exec_id (borrowed for the
	 * call; may be NULL: nothing to do). */
	void (*adopt)(struct codepod_proc *p, const char *exec_id);
	/* A descriptor of codepod's own (read-only, or write-only with
	 * @for_write) on the regular file that descriptor @fd of the runner
	 * (its PID @ns_pid as it sees it, from its ready frame) has open: the
	 * caller owns it and closes it. -1 with @err filled when it cannot be
	 * had. For a file read or write: codepod then moves the bytes itself
	 * (runner/fileop.c). May be NULL: the runner moves them. */
	int (*open_fd)(struct codepod_proc *p, long ns_pid, int fd, int for_write, struct cp_err *err);
	/* Read the process tree's usage now; the reading comes through the
	 * usage() callback. Without it (NULL) the engine has the readings of
	 * killed() and exited() only, and cannot hold a program to a CPU
	 * budget (policy maxCpuMs) while it runs. */
	void (*sample)(struct codepod_proc *p);
	/* Fills at most @max counters, returns how many (may be NULL: none). */
	size_t (*stats)(const struct codepod_backend *b, struct codepod_backend_stat *out, size_t max);
	/* The runner the engine starts for an execution of the built-in
	 * default policy, told once before its first spawn (conversation,
	 * exec_id and tag NULL; standby 1). A backend that starts runners of
	 * its own accord, ahead of any spawn (a warm pod's), starts this one,
	 * and may hand it to a later spawn of a runner with the same
	 * memory_mb: the engine's argv and input depend on nothing else. May
	 * be NULL: none does. */
	void (*default_runner)(struct codepod_backend *b, const struct codepod_spawn_req *req);
	/* Delete what the backend keeps of @conversation (borrowed for the
	 * call): its workspace or pod, its snapshots. Its runners are killed
	 * first (their exits follow as ever). @done comes once, from the loop,
	 * never from inside this call, when all of it is gone (rc 0) or could
	 * not be (rc and @err, borrowed for the call). Returns 0, or an error
	 * and no @done. May be NULL: the backend cannot delete. */
	int (*delete_conversation)(struct codepod_backend *b, const char *conversation,
	                           void (*done)(void *ud, int rc, const struct cp_err *err),
	                           void *ud, struct cp_err *err);
	/* Start releasing the backend; handles must all have exited first. */
	void (*destroy)(struct codepod_backend *b);
};

struct codepod_backend {
	const struct codepod_backend_ops *ops;
	const char *name; /* "local" or "kubernetes": usage.sandbox */
	int shared_sandbox; /* 1: the runners of one conversation share one
	                       process namespace (a pod), so one can see and
	                       signal another (runner/prestart.h) */
	int ws_unbounded;   /* 1: no kernel bounds the workspace (a pod's
	                       emptyDir): a file operation's runner is told the
	                       bounds and holds a write to them itself */
};

#endif
