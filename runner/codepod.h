/*
 * codepod.h - the public C API of codepod: run model-written programs in a
 * fresh Node 22 process each, broker their tool calls to the host, and get
 * the outcome of docs/contract.md §4.
 *
 * Loop context: one libuv loop carries everything. Every function here must
 * be called on the loop's thread, and every callback runs on it.
 *
 * Callback rules (the same for every host):
 *  - If codepod_submit returns an error, no callback ever comes for it.
 *  - Otherwise done() comes exactly once, always asynchronously (never from
 *    inside codepod_submit or another codepod_* call).
 *  - tool_call() comes at most once per call id. The host answers it exactly
 *    once with codepod_tool_result or codepod_tool_error, unless cancel_call()
 *    came first; answers after cancel_call are refused with CP_E_NOT_FOUND.
 *    The host may answer from inside tool_call().
 *  - After done() returns, the execution handle is invalid.
 *
 * Ownership: the request given to codepod_submit is borrowed for the call
 * (codepod copies what it keeps). Strings and JSON values passed to callbacks
 * are borrowed for the duration of the callback; keep a copy (json_incref /
 * strdup) to use them later. The backend given in the config is borrowed and
 * must outlive the engine.
 */
#ifndef CODEPOD_H
#define CODEPOD_H

#include <jansson.h>
#include <uv.h>

#include "base/err.h"
#include "runner/policy.h"
#include "runner/sandbox.h"

struct codepod_keyring; /* runner/continuation.h */
struct codepod_spent;   /* runner/spent.h */

struct codepod;
struct codepod_exec;

/* One finished span (runner/trace.c makes them), handed to the config's
 * span() callback; everything in it is borrowed for the callback. Ids are
 * raw bytes (16 for the trace, 8 for spans); parent_id NULL: a root span.
 * Attributes are a JSON object of strings, integers and booleans: sizes,
 * statuses and ids, never program text, tool inputs or outputs, nor the
 * conversation key in clear. */
struct codepod_span {
	const char *name;
	const unsigned char *trace_id, *span_id, *parent_id;
	unsigned long long start_unix_ns, end_unix_ns;
	int error; /* the span's status is ERROR */
	const json_t *attributes;
	const char *tracestate; /* the execute's W3C tracestate, NULL: none */
};

struct codepod_config {
	uv_loop_t *loop;
	struct codepod_backend *backend;
	struct codepod_policy defaults; /* applied when a request names no value */
	struct codepod_policy ceiling;  /* requests over it are INVALID_REQUEST */
	/* Runners already started (runner/prestart.h): at most this many wait,
	 * one per recently active conversation (0: none; every runner starts
	 * on demand), each for prestart_idle_s after its conversation's last
	 * execution (0: CODEPOD_PRESTART_DEFAULT_IDLE_S). */
	unsigned prestart_max;
	unsigned prestart_idle_s;
	/* Approvals: the keys that sign and verify continuations (NULL: a
	 * random key of the engine's, good until it is freed), how long a
	 * continuation lives (0: CODEPOD_CONTINUATION_DEFAULT_TTL_S) and the
	 * record of those already resumed (NULL: in memory only). Both are
	 * handed over: the engine frees them, also when codepod_new fails. */
	struct codepod_keyring *continuation_keys;
	unsigned continuation_ttl_s;
	struct codepod_spent *spent;
	/* Optional (NULL: no spans are made): each execution's spans once its
	 * done() came. An execute without a traceparent starts a trace of its
	 * own only when this is set. The callback may not call into the engine. */
	void (*span)(void *ud, const struct codepod_span *sp);
	void *span_ud;
};

struct codepod_host {
	void (*tool_call)(void *ud, struct codepod_exec *e, const char *call_id,
	                  const char *tool, const json_t *input);
	void (*cancel_call)(void *ud, struct codepod_exec *e, const char *call_id);
	void (*done)(void *ud, struct codepod_exec *e, const json_t *outcome);
	/* Optional (may be NULL): live output as it arrives, before done(); the
	 * bytes (borrowed, not NUL-terminated, not necessarily valid UTF-8) are
	 * also kept in the outcome's log window. @is_stderr: 0 stdout, 1 stderr. */
	void (*output)(void *ud, struct codepod_exec *e, int is_stderr, const char *buf,
	               size_t len);
	/* Optional (NULL: such calls are refused): a call of a tool declared
	 * "approval":"hold" waits for a person. The host answers once with
	 * codepod_tool_approval, unless cancel_call() for the call came first
	 * (no answer within the tool's approvalWaitMs, or the end). */
	void (*approval_request)(void *ud, struct codepod_exec *e, const char *call_id,
	                         const char *tool, const json_t *input);
	/* Required for file reads (runner/fileop.h): a chunk of the file (at
	 * most 256 KiB, borrowed); the next comes after codepod_file_ack. */
	void (*file_data)(void *ud, struct codepod_exec *e, const char *buf, size_t len);
	/* Required for file writes: the sandbox is ready for the next chunk
	 * (codepod_file_chunk); the first says the file is open. */
	void (*file_ready)(void *ud, struct codepod_exec *e);
};

/* A new engine (free with codepod_free). */
int codepod_new(const struct codepod_config *cfg, struct codepod **out,
                struct cp_err *err);

/* Frees the engine. Every execution must have delivered done() first.
 * Runners still waiting are killed; the backend must outlive their exit
 * reports (destroy it after this call, then run the loop dry). */
void codepod_free(struct codepod *cp);

/* No more runners are started ahead of time, and the waiting ones are
 * killed: call it when the host drains, so the loop can run dry. */
void codepod_quiesce(struct codepod *cp);

/* Runners started and waiting for an execution right now. */
unsigned codepod_prestarted_waiting(const struct codepod *cp);

/* The backend the engine was configured with (borrowed). */
const struct codepod_backend *codepod_backend_of(const struct codepod *cp);

/* Number of executions that have not delivered done() yet. */
unsigned codepod_running(const struct codepod *cp);

/*
 * codepod_submit - start one execution.
 * @request: the "execute" message of docs/contract.md §5 (fields id,
 *           conversation, js, tools, policy, resume; "type" and unknown
 *           fields are ignored).
 *           With "type": "command" it is the session's "command" message
 *           instead (command, argv, cwd, env, stdin; runner/command.h): the
 *           outcome is then a command_result's fields (broker/SESSION.md).
 *           With "type" file_read, file_write, file_stat, file_list or
 *           file_delete it is that message (runner/fileop.h): the outcome
 *           is then the file_result's fields with executionId, status
 *           ("ok" or "error", then with error) and usage.
 * Returns 0 and sets *out, or CP_E_INVALID_REQUEST (missing or mistyped
 * field, policy over the ceiling, a resume refused) with the reason in err. An oversized source
 * is not an error here: it ends as a SOURCE_TOO_LARGE outcome through done().
 */
int codepod_submit(struct codepod *cp, const json_t *request,
                   const struct codepod_host *host, void *ud,
                   struct codepod_exec **out, struct cp_err *err);

/* Answer a tool call with its output (borrowed; codepod checks its size and
 * depth and denies the call if over a limit). CP_E_NOT_FOUND when the call is
 * not waiting for an answer. */
int codepod_tool_result(struct codepod_exec *e, const char *call_id,
                        const json_t *output, struct cp_err *err);

/* Reject a tool call with a message safe to show the model (copied). */
int codepod_tool_error(struct codepod_exec *e, const char *call_id,
                       const char *message, struct cp_err *err);

/* The host holds the call for a person's approval: the call becomes
 * pending, and once the program has nothing else in flight the execution
 * ends "suspended" with a continuation (SESSION.md, "Approvals").
 * CP_E_NOT_FOUND as codepod_tool_result. */
int codepod_tool_suspend(struct codepod_exec *e, const char *call_id, struct cp_err *err);

/* The answer to approval_request(): approved, the call goes to the host as
 * a tool_call; refused, the program's await throws @message (copied; NULL:
 * "The call to TOOL was not approved."). CP_E_NOT_FOUND when the call is
 * not held. */
int codepod_tool_approval(struct codepod_exec *e, const char *call_id, int approved,
                          const char *message, struct cp_err *err);

/* The idempotency key of a call approved on resume (borrowed, valid while
 * the call waits for its answer), NULL for any other call: a host passes
 * it on with the tool_call. */
const char *codepod_tool_call_key(const struct codepod_exec *e, const char *call_id);
/* A command's stdin (runner/command.h): @b64 (borrowed, @len bytes of
 * base64) goes to the command as it is; @eof closes its stdin after it.
 * CP_E_STATE when it was not started with "stdin": true, its stdin is
 * closed or it has ended; CP_E_INVALID_REQUEST when @b64 is not base64. */
int codepod_exec_stdin(struct codepod_exec *e, const char *b64, size_t len, int eof,
                       struct cp_err *err);

/* A file read's chunk was taken: the next may come. CP_E_STATE when no
 * chunk awaits an ack, it is not a read or it has ended. */
int codepod_file_ack(struct codepod_exec *e, struct cp_err *err);

/* A file read's {"size","etag"} (borrowed), known from its first
 * file_data on; NULL before, and for an empty range. */
const json_t *codepod_file_info(const struct codepod_exec *e);

/* A file write's next chunk: @b64 (borrowed, @len bytes of base64, at most
 * 256 KiB decoded); @last ends the file. CP_E_STATE unless file_ready came
 * since the chunk before; CP_E_INVALID_REQUEST for bad base64 or size. */
int codepod_file_chunk(struct codepod_exec *e, const char *b64, size_t len, int last,
                       struct cp_err *err);

/* The same for @len raw bytes (borrowed, at most 256 KiB): a transport
 * inside codepod (the HTTP file routes) has the bytes, not base64. */
int codepod_file_bytes(struct codepod_exec *e, const void *data, size_t len, int last,
                       struct cp_err *err);

/* Stop the execution: it ends CANCELLED (if it has not ended already). */
void codepod_stop(struct codepod_exec *e);

/* The broker that should run the call failed (unreachable, timed out,
 * answered a non-2xx status or something malformed): the program's await
 * throws "The tool NAME could not be reached.", and the call's outcome entry
 * says status "error", broker true, reason @reason (a static string, e.g.
 * "timeout"; NULL: "unreachable") and httpStatus when @http_status > 0.
 * CP_E_NOT_FOUND as codepod_tool_result. */
int codepod_tool_unreachable(struct codepod_exec *e, const char *call_id, const char *reason,
                             long http_status, struct cp_err *err);

/* Stop the execution with @message (copied; codepod's words, never program
 * text) as its CANCELLED outcome's message: e.g. a server's drain. */
void codepod_cancel(struct codepod_exec *e, const char *message);

/* The loop the engine runs on (borrowed). */
uv_loop_t *codepod_loop(const struct codepod *cp);

/* The host is gone: OUTCOME_UNKNOWN when a tool call was in flight (its fate
 * is unknown, so the program's return value is not trusted), else CANCELLED. */
void codepod_abandon(struct codepod_exec *e);

/* The W3C traceparent of a tool call's codepod.tool_call span (borrowed,
 * valid until done() returns), or NULL when the execution is not traced:
 * its execute had no traceparent and no span() callback is configured. */
const char *codepod_call_traceparent(const struct codepod_exec *e, const char *call_id);

/* The execute's tracestate (borrowed, as above), or NULL when it had none. */
const char *codepod_exec_tracestate(const struct codepod_exec *e);
/* The conversation's workspace (or pod) and snapshots deleted by the
 * backend (sandbox.h, delete_conversation); @done as there. The host
 * stops the conversation's executions first. CP_E_UNSUPPORTED when the
 * backend cannot delete. */
int codepod_delete_conversation(struct codepod *cp, const char *conversation,
                                void (*done)(void *ud, int rc, const struct cp_err *err),
                                void *ud, struct cp_err *err);

/* The execution's id (borrowed, valid until done() returns). */
const char *codepod_exec_id(const struct codepod_exec *e);

/* 1 once nothing more can reach its runner (it is ending, or the runner
 * is gone): its outcome is on its way. */
int codepod_exec_ended(const struct codepod_exec *e);

/* The embedded runner program: runner/boot.js, for the command line, and
 * what it reads first on stdin, the built runner/runner.js after its length
 * and a newline (runner/prestart.h). */
extern const unsigned char codepod_runner_input[];
extern const unsigned long codepod_runner_input_len;
extern const unsigned char codepod_boot_js[];
extern const unsigned long codepod_boot_js_len;

#endif
