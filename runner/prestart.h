/*
 * prestart.h - runners already started: for each recently active
 * conversation, one fresh runner process is started ahead of time and left
 * waiting for its program (Node booted, boot.js has read runner.js, which
 * is blocked reading the hello from stdin), so the conversation's next
 * execution pays no Node start. Every runner, waiting or not, is started by
 * codepod_runner_spawn() through the backend's ordinary spawn (the same sandbox
 * set-up as any execution) and serves exactly one execution (docs/contract.md §2.11).
 *
 * Bounds: at most max_waiting runners wait in all; past that, the one of
 * the conversation active longest ago is killed, if that was over a second
 * before (in a burst of new conversations, the later ones get none). A conversation's waiting
 * runner is killed idle_s seconds after its last execution started or ended
 * (log event prestart.expired). A runner is taken only when it was started
 * with the execution's heap ceiling (memory_mb) and workspace bounds
 * (ws_bytes, ws_files: a backend may size the workspace at the spawn); any
 * other policy gets a
 * fresh start, and the waiting runner follows the latest policy. A runner
 * that wrote anything while waiting, or exited, is never handed out.
 *
 * When: on a backend whose executions of one conversation share one process
 * namespace (codepod_backend.shared_sandbox: a pod), a runner is started only once
 * no execution of its conversation is running (after the last one's kill),
 * so no program can ever see or tamper with the runner of a later one. On
 * other backends (bubblewrap: a PID namespace per runner) it is started when
 * an execution of the conversation ends, even if others still run (not
 * before: a Node start beside a running program competes with it for the
 * CPU; `make bench` shows the cost on tool calls).
 *
 * Loop context: the loop thread only. Callbacks of a taken runner go to the
 * taker's cbs/ud, with the sandbox.h rules (exited() once, later).
 *
 * Ownership: the pool belongs to the engine (runner/exec.c). codepod_prestart_stop
 * kills the waiting runners and starts no more; the memory goes with
 * codepod_prestart_free once no runner it started is alive (taken ones included).
 */
#ifndef CODEPOD_PRESTART_H
#define CODEPOD_PRESTART_H

#include <uv.h>

#include "runner/sandbox.h"

#define CODEPOD_PRESTART_DEFAULT_MAX 8
#define CODEPOD_PRESTART_DEFAULT_IDLE_S 120

struct codepod_prestart;

/* What a runner is started with (strings borrowed for the call). */
struct codepod_runner_spec {
	const char *conversation;
	const char *exec_id;      /* for the backend's logs */
	unsigned long memory_mb;  /* --max-old-space-size and the process ceiling */
	const char *tag;          /* sandbox.h: 32 hex */
	int standby;              /* sandbox.h: started ahead of its execution */
	uint64_t ws_bytes;        /* sandbox.h: the workspace's bounds */
	uint64_t ws_files;
};

/*
 * codepod_runner_spawn - start one runner now: `node ... -e BOOT` through
 * b->ops->spawn, its stdin starting with "<len>\n<runner.js>" (the request's
 * input: codepod_runner_input). The caller writes the hello. Errors as
 * b->ops->spawn. The runner a spawn request describes is the engine's: a
 * backend gets it whole, argv and input, and needs to know nothing of it.
 */
int codepod_runner_spawn(struct codepod_backend *b, const struct codepod_runner_spec *spec,
                    const struct codepod_proc_cbs *cbs, void *ud, struct codepod_proc **out,
                    struct cp_err *err);

/* Tell @b (b->ops->default_runner, if it has one) the runner an execution
 * of the built-in default policy gets: what a backend may start ahead of
 * time on its own (a warm pod's standby runner). Once, before any spawn. */
void codepod_runner_default(struct codepod_backend *b);

/* max_waiting 0: no pool (codepod_prestart_new sets *out NULL and returns 0). */
int codepod_prestart_new(uv_loop_t *loop, struct codepod_backend *b, unsigned max_waiting,
                    unsigned idle_s, struct codepod_prestart **out, struct cp_err *err);

/*
 * codepod_prestart_take - the waiting runner of @want's conversation started
 * with @want's memory_mb and workspace bounds, if there is one: returns 1, sets *proc (a sandbox.h handle of
 * the pool's backend, its callbacks now @cbs/@ud, adopted by @exec_id) and
 * @tag (the tag it was started with: the hello must carry it). Returns 0 when none fits; NULL
 * @ps is allowed.
 */
int codepod_prestart_take(struct codepod_prestart *ps, const struct codepod_runner_spec *want,
                     const char *exec_id,
                     const struct codepod_proc_cbs *cbs, void *ud,
                     struct codepod_proc **proc, char tag[33]);

/* An execution of @spec's conversation, with its memory and workspace
 * bounds, started (its runner running or taken) / of @conversation ended
 * (its outcome delivered, its process gone). Calls pair up. */
void codepod_prestart_exec_started(struct codepod_prestart *ps, const struct codepod_runner_spec *spec);

/* The execution of @conversation that just started runs no program (a
 * file operation: the runner moves bytes and ends). Where each runner has
 * a sandbox of its own, the next runner starts beside it at once, not
 * when it ends: a file operation right after this one (an upload, then
 * its download) then finds its runner waiting instead of waiting for a
 * Node start. No program shares the CPU with that start. */
void codepod_prestart_no_program(struct codepod_prestart *ps, const char *conversation);
void codepod_prestart_exec_ended(struct codepod_prestart *ps, const char *conversation);

/* The runner of @conversation's running execution said what it needed
 * (its Y frame): @cmd, it runs a command; else a program, @ts whether that
 * program needed the type stripper. The conversation's next waiting runner
 * is told, before its hello, to load the same while it waits
 * (`{"k":"warm","ts":true,"cmd":true}`, runner/PROTOCOL.md): the type
 * stripper, after a program that needed it; Node's child_process (~6 ms,
 * ~2 MiB), once the conversation has run a command (programs and commands
 * often take turns); so neither start is on the next one's critical path,
 * and a plain JavaScript conversation's runner loads neither. The stripper
 * follows the latest program. NULL @ps is ignored. */
void codepod_prestart_note(struct codepod_prestart *ps, const char *conversation, int cmd, int ts);

/* @conversation was deleted: its waiting runner (whose workspace is going)
 * is killed, and none is started when the executions running now end (the
 * delete stops them), only after the next one.
 * NULL @ps is ignored. */
void codepod_prestart_forget(struct codepod_prestart *ps, const char *conversation);

/* Runners waiting right now (for metrics and tests). */
unsigned codepod_prestart_waiting(const struct codepod_prestart *ps);

/* Kill the waiting runners; start no more. Safe twice and on NULL. */
void codepod_prestart_stop(struct codepod_prestart *ps);

/* Stop, and free once no runner of the pool is alive. NULL is ignored. */
void codepod_prestart_free(struct codepod_prestart *ps);

#endif
