/*
 * exec_int.h - the execution engine's private state, shared by its files:
 * exec.c (lifecycle and the control channel), calls.c (tool-call
 * bookkeeping, queueing and limits), outcome.c (the outcome JSON).
 *
 * Ownership: a struct codepod_exec owns every pointer in it. It is freed only from
 * the close callback of its timer, after done() was delivered and the runner
 * process has exited, so no callback can reach freed memory.
 */
#ifndef CODEPOD_EXEC_INT_H
#define CODEPOD_EXEC_INT_H

#include <stdint.h>

#include "runner/codepod.h"
#include "runner/frame.h"
#include "runner/logwin.h"

/*
 * An execution. Changed only by exec.c's exec_set_state, which logs the
 * change (debug, exec.state) and asserts it is one of:
 *   STARTING -> RUNNING     the runner's Y frame
 *   STARTING -> FINISHING   ended before it ran (refused, failed, stopped)
 *   RUNNING -> FINISHING    ended (codepod_exec_finish, once)
 *   FINISHING -> DONE       done() delivered (once)
 */
enum codepod_exec_state {
	CODEPOD_ST_STARTING,  /* waiting for the runner's Y frame */
	CODEPOD_ST_RUNNING,   /* the program runs; its deadline is armed */
	CODEPOD_ST_FINISHING, /* ended; waiting for the process tree to go */
	CODEPOD_ST_DONE       /* done() delivered */
};

/*
 * A tool call, QUEUED from the moment it is recorded (add_call). Changed
 * only by calls.c's call_set_state, which logs the change (debug,
 * exec.call_state) and asserts it is one of:
 *   QUEUED -> IN_FLIGHT         handed to the host
 *   QUEUED -> DENIED            refused before the host saw it
 *   IN_FLIGHT -> OK | ERROR     answered
 *   IN_FLIGHT -> DENIED         answered with an output over the limits
 *   QUEUED | IN_FLIGHT -> CANCELLED   the execution ended first
 *   QUEUED -> PENDING           a tool that needs approval (approval.c)
 *   IN_FLIGHT -> PENDING        the host answered "suspend"
 *   PENDING -> CANCELLED        the execution ended other than suspended
 *   QUEUED -> OK | ERROR        answered from a resumed continuation's log
 *   QUEUED -> HOLDING           a tool held for approval ("approval":"hold")
 *   HOLDING -> QUEUED           approved
 *   HOLDING -> DENIED | CANCELLED   refused or not answered in time; ended
 */
enum codepod_call_state {
	CODEPOD_CALL_QUEUED,
	CODEPOD_CALL_IN_FLIGHT,
	CODEPOD_CALL_OK,
	CODEPOD_CALL_ERROR,
	CODEPOD_CALL_DENIED,
	CODEPOD_CALL_CANCELLED,
	CODEPOD_CALL_PENDING,
	CODEPOD_CALL_HOLDING
};

/* Chunks of a file read the runner may send ahead of codepod's acks, and
 * codepod holds ahead of the host (runner/fileop.c; runner.js FILE_AHEAD). */
#define CODEPOD_FILE_WINDOW 4

struct codepod_call {
	char *tool;              /* as the program named it (bounded) */
	json_t *input;           /* held until answered (a pending call lists it) */
	enum codepod_call_state state; /* call_set_state only */
	uint64_t t_start_ms, t_end_ms;
	const char *broker_reason; /* static; set when the broker, not the tool, failed */
	long http_status;          /* with broker_reason "http_status" */
	size_t input_bytes;        /* its input's JSON text as the runner sent it */
	unsigned char hash[32];    /* SHA-256 of its input's canonical text (approval.c) */
	json_t *output;            /* OK: its output, for a continuation's log */
	char *message;             /* ERROR, DENIED: what the program was told */
	char *idem_key;            /* approved on resume: the tool_call's idempotencyKey */
	int approved;              /* approved (on resume, or held): not gated again */
	uint64_t hold_until_ms;    /* HOLDING: denied when no approval came by then */
	size_t output_bytes;       /* the answer's JSON text as the runner was sent it */
	unsigned char span_id[8];  /* its codepod.tool_call span (when traced) */
	char traceparent[56];      /* that span's traceparent, "" when not traced */
	int span_sent;             /* that span went to the exporter (trace.c) */
};

/* The execution's trace (runner/trace.c). Spans: execution (child of the
 * caller's span), and under it acquire, runner.start, program; tool calls
 * under program. */
enum { CODEPOD_SPAN_EXEC, CODEPOD_SPAN_ACQUIRE, CODEPOD_SPAN_START, CODEPOD_SPAN_PROGRAM,
       CODEPOD_SPANS };
struct codepod_trace {
	int on;                    /* the execution is traced */
	int has_parent;            /* the execute had a traceparent */
	unsigned char trace_id[16], parent_id[8], flags;
	unsigned char span[CODEPOD_SPANS][8];
	char *tracestate;          /* the execute's, NULL: none */
	uint64_t anchor_unix_ns;   /* the wall clock at t_submit_ms */
	uint64_t t_acquired_ms;    /* the backend handed over a runner */
};

struct codepod {
	struct codepod_config cfg;
	struct codepod_keyring *own_keys;  /* the config's, or a random one */
	struct codepod_spent *own_spent;   /* the config's, or one in memory */
	unsigned running;
	struct codepod_prestart *prestart; /* NULL: every runner starts on demand */
	struct codepod_etags *etags;       /* NULL: every read hashes its file (etags.h) */
};

struct codepod_exec {
	struct codepod *cp;
	const struct codepod_host *host;
	void *ud;
	char *id;
	char *conversation;
	char *src;
	size_t src_len;
	json_t *tools;           /* the request's tools array (own copy) */
	json_t *tool_index;      /* tool name -> its object in tools (a lookup per call) */
	struct codepod_policy pol;
	char digest[65];
	char nonce[33];
	char tag[33];            /* marks the execution's processes (sandbox.h) */

	enum codepod_exec_state state; /* exec_set_state only; CODEPOD_ST_DONE: done() was called */
	struct codepod_proc *proc;    /* NULL once exited() came */
	int prestarted;          /* the runner was waiting when this began */
	int prestart_noted;      /* the pool was told it started: tell it the end */
	uv_timer_t timer;        /* startup, then deadline, then grace */
	uv_timer_t cpu_timer;    /* maxCpuMs: readings of the tree while it runs */
	int handles_open;        /* timer and cpu_timer, until both are closed */
	uint64_t t_submit_ms, t_ready_ms, t_end_ms;
	struct codepod_trace trace;

	/* usage (docs/contract.md §4) */
	struct codepod_usage usage;  /* the largest of every reading of the backend */
	uint64_t hello_cpu_us;   /* the runner's own CPU time when it read the hello */
	long runner_pid;         /* the runner's PID as it sees it (its ready frame), 0: not known */
	uint64_t tool_calls;     /* calls handed to the host */
	uint64_t tool_input_bytes, tool_output_bytes;
	uint64_t result_bytes;   /* the result's JSON text (or its reported size) */

	struct codepod_frame_parser *frames;
	struct codepod_logwin logs;
	char err_tail[64];       /* last bytes of stderr: OOM notes across chunks */
	size_t err_tail_len;
	int oom_seen;
	int exit_said;           /* code of the runner's X frame, -1: none */

	struct codepod_call *calls;   /* index = call number - 1; at most maxBridgeRequests */
	size_t ncalls, calls_cap;
	size_t *queue;           /* FIFO of call indexes waiting for a slot */
	size_t q_head, q_len, q_cap;
	uint64_t in_flight;
	uint64_t requests;       /* tool requests counted toward the limit */
	uint64_t calls_omitted;  /* requests over the limit: denied, not in calls[] */
	int pumping, pump_again;

	/* a command (runner/command.h): NULL for a program */
	json_t *cmd;             /* the hello's "cmd" object */
	int cmd_stdin;           /* started with stdin: true */
	int cmd_stdin_closed;    /* its eof was sent */
	int cmd_exit;            /* its exit code from the P frame, -1: none */
	char cmd_signal[16];     /* the signal that ended it ("SIGKILL"), "" if none */
	int cmd_ahead;           /* 1: it was the runner's shell started ahead (P's "ahead") */
	struct codepod_logwin errlogs; /* its stderr (logs holds its stdout) */

	/* a file operation (runner/fileop.h): NULL otherwise */
	json_t *fop;             /* the hello's "fop" object; the result is e->result */
	int fop_await_ack;       /* read: a chunk went to the host, its ack not back */
	int fop_await_chunk;     /* write: the host may send the next chunk */
	int fop_w_opened;        /* write: the runner's first A (the file is open) came */
	int fop_w_last;          /* write: the last chunk went to the runner */
	unsigned fop_w_inflight; /* write: chunks sent to the runner, its A not back */
	uint64_t fop_bytes;      /* file bytes moved either way */
	json_t *fop_info;        /* read: {"size","etag"} of the whole file, before its data */
	/* read: chunks the runner sent ahead of the host's acks (fileop.c's
	 * window): the head is with the host when fop_await_ack */
	char *fop_q[CODEPOD_FILE_WINDOW];
	size_t fop_q_len[CODEPOD_FILE_WINDOW];
	unsigned fop_q_head, fop_q_count;
	size_t fop_q_cap[CODEPOD_FILE_WINDOW]; /* each slot's buffer is kept for the next chunk */
	char *fop_wbuf;          /* write: a chunk's line and bytes on their way to the runner */
	void *fop_sha;           /* write: EVP_MD_CTX, the SHA-256 of the bytes sent (the etag) */
	struct codepod_fop_sink *fop_sink; /* write: the file written by codepod itself, NULL when
	                          * the runner writes the bytes (runner/fileop.c) */
	int fop_w_offered;       /* write: the runner's descriptor came and was not taken */
	struct codepod_fop_pump *fop_pump; /* read: the file read by codepod itself, NULL when
	                          * the runner sends the bytes (runner/fileop.c) */
	char *fop_done;          /* its F frame, held until the queue is delivered */
	size_t fop_done_len;

	/* the outcome, filled by finish() */
	enum cp_code code;
	char message[CP_ERR_MSG_MAX];
	json_t *result;          /* NULL: no result */
	json_t *program_error;   /* {name,message,stack} for SCRIPT_ERROR */

	/* approvals (approval.c) */
	uv_timer_t quiet_timer;  /* a pending call: suspend once the program is quiet */
	uv_timer_t hold_timer;   /* the first held call's approvalWaitMs */
	size_t nholding;         /* calls HOLDING; while any is, the deadline is paused */
	uint64_t deadline_ms;    /* when the program's deadline passes (RUNNING) */
	uint64_t deadline_left_ms; /* what was left of it when paused */
	size_t npending;         /* calls PENDING */
	int suspended;           /* the outcome is "suspended" */
	char *continuation;      /* its continuation */
	size_t log_bytes;        /* outputs kept for a continuation's log */
	int log_over;            /* past CODEPOD_CONTINUATION_MAX_BYTES: no more kept */
	json_t *replay;          /* resumed: the log of the runs before (array) */
	char resume_jti[33];     /* resumed: its continuation's id */
	struct {                 /* resumed: usage of the runs before */
		uint64_t tool_calls, in_bytes, out_bytes, run_ms, cpu_ms, runs, exp_s;
	} prior;
};

/* exec.c */
void codepod_exec_finish(struct codepod_exec *e, enum cp_code code,
                    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Writes one message line to the runner (one backend write: a second would
 * wake the runner twice); a failed write finishes the execution. */
int codepod_exec_send(struct codepod_exec *e, json_t *msg /* steals */);
/* The same for text already encoded: @text ends with its '\n'. */
int codepod_exec_send_line(struct codepod_exec *e, const char *text, size_t len);
uint64_t codepod_exec_now_ms(void);
/* A file operation moved a chunk: its deadline (timeoutMs) starts again, so
 * a long transfer is bounded by its idle time, not its length. */
void codepod_exec_rearm(struct codepod_exec *e);
/* CPU time of the program so far (usage.cpuMs, in microseconds): the
 * backend's reading less what the runner had used at the hello. */
uint64_t codepod_exec_cpu_us(const struct codepod_exec *e);

/* calls.c */
void codepod_calls_on_frame(struct codepod_exec *e, const char *payload, size_t len);
void codepod_calls_cancel_all(struct codepod_exec *e);
int codepod_calls_any_in_flight(const struct codepod_exec *e);
void codepod_calls_free(struct codepod_exec *e);
const char *codepod_call_state_name(enum codepod_call_state s);

/* calls.c: the state name of the outcome's calls; a call's output kept
 * for the log (borrowed, incref'd while within the bound) */
void codepod_calls_keep_output(struct codepod_exec *e, struct codepod_call *c,
                               const json_t *output, size_t size);

/* approval.c */
int codepod_approval_tools(const json_t *tools, struct cp_err *err);
int codepod_approval_gated(const json_t *tool);
void codepod_approval_hash(const json_t *input, unsigned char out[32]);
int codepod_approval_resume(struct codepod_exec *e, const json_t *resume, struct cp_err *err);
int codepod_approval_commit(struct codepod_exec *e, struct cp_err *err);
/* A call became pending, was answered, or a new one came: suspend once
 * nothing else is in flight and the program stayed quiet. */
void codepod_approval_poke(struct codepod_exec *e);
/* End the execution suspended now (the program returned with calls pending). */
void codepod_approval_suspend(struct codepod_exec *e);
void codepod_approval_outcome(const struct codepod_exec *e, json_t *o);
/* The tool's approval wait, in ms, when it is held ("approval":"hold"), else 0. */
uint64_t codepod_approval_hold_ms(const json_t *tool);

/* exec.c: the deadline stops while a call is held for approval. */
void codepod_exec_pause_deadline(struct codepod_exec *e);
void codepod_exec_resume_deadline(struct codepod_exec *e);
/* trace.c: the request's traceparent and tracestate (INVALID_REQUEST when
 * malformed); a call's span id; a call's span as its answer goes to the
 * program (call_end); the rest of the spans, once, as done() is delivered;
 * freeing what init kept. */
int codepod_trace_init(struct codepod_exec *e, const json_t *request, struct cp_err *err);
void codepod_trace_call(struct codepod_exec *e, struct codepod_call *c);
void codepod_trace_call_end(struct codepod_exec *e, size_t idx);
void codepod_trace_emit(struct codepod_exec *e);
void codepod_trace_free(struct codepod_exec *e);

/* outcome.c: a new reference */
json_t *codepod_outcome_build(const struct codepod_exec *e);

#endif
