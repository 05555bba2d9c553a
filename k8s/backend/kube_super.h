/*
 * kube_super.h - one exec per pod: a supervisor (k8s/backend/supervisor.js,
 * embedded and shipped at exec time through runner/boot.js, so the image
 * needs nothing but Node 22) runs over one long-lived exec stream per pod and
 * replica. It starts each fresh runner process on a channel, carries its
 * stdin/stdout/stderr inside frames of that channel, and kills the
 * execution's processes itself: after the supervisor is up, an execution
 * costs the API server no exec request at all.
 *
 * Framing (supervisor.js has the list): 0xC5, kind, channel (u32 BE), length
 * (u32 BE), payload. A runner's output only ever travels inside frames of its
 * own channel, and inside them the runner's own nonce-keyed frames
 * (runner/PROTOCOL.md) are parsed per execution as before, so a program can
 * neither forge another execution's frames nor reach its channel. A frame
 * that breaks the rules (bad magic, kind, length; k8s/backend/super_frame.h) ends the
 * stream: every channel on it is reported lost, and the conversation falls
 * back to one exec per script for the life of that pod (the caller's policy).
 *
 * The pod helper (k8s/pod_helper/pod_helper.c): with @helper, codepod sends
 * frame P after the hello (the helper's image for the supervisor's "arch",
 * its SHA-256, and the runner's syscall filter, runner/local/syscall_filter.h,
 * compiled for that architecture) and the supervisor starts every runner as
 * the helper's child: a subreaper that kills and reaps every process of the
 * execution before D, a Landlock domain per runner, the filter (SECURITY.md,
 * "The Kubernetes backend"). Without it (or without Landlock on the node),
 * what a program in the pod can do, as without a supervisor: processes of one
 * pod share a user, so a program can signal the supervisor (its stream ends:
 * the pod's executions are lost, the pod falls back) or open its pipes and
 * memory through /proc (garbage ends the stream the same way; well-formed
 * frames could reach the runners of concurrent executions of the same
 * conversation). Its harm stays inside its own conversation's pod; other
 * conversations are other pods.
 *
 * Loop context: the loop thread only. Callbacks never run from inside a call
 * into this module, except that kube_super_close() may be followed by them on
 * later loop turns.
 *
 * Ownership: kube_super_new() returns a supervisor owned by the caller, which
 * releases it with kube_super_close() (or after its gone() callback). Strings are
 * copied. A channel's callbacks run until its exited(), exactly once; after
 * kube_super_detach() or exited() the channel is gone.
 */
#ifndef K8S_KUBE_SUPER_H
#define K8S_KUBE_SUPER_H

#include <stdint.h>

#include "k8s/api/pod_exec.h"
#include "runner/sandbox.h"

extern const unsigned char kube_supervisor_js[];
extern const unsigned long kube_supervisor_js_len;

struct kube_super;

struct kube_super_cbs {
	/* The supervisor said it is up (once); channels may be opened now. */
	void (*ready)(void *ud, struct kube_super *s);
	/* The stream ended (never ready, or dropped later; detail says why):
	 * every channel has had its exited() (lost) first. The handle is freed
	 * once this returns. */
	void (*gone)(void *ud, struct kube_super *s, const char *detail);
};

/* Start the supervisor in @pod (namespace @ns, container @container, may be
 * NULL) over @execs; @helper: its runners start under the pod helper
 * (k8s/pod_helper/pod_helper.c, sent after its hello, see below). Returns 0 or the error of k8s_exec_start (no callback). */
int kube_super_new(struct k8s_exec_client *execs, const char *ns, const char *pod,
               const char *container, int helper, const struct kube_super_cbs *cbs, void *ud,
               struct kube_super **out, struct cp_err *err);

/* 1 once ready() came and the stream still stands. */
int kube_super_is_ready(const struct kube_super *s);

/* 1 when ready() came at some point (also from inside gone()). */
int kube_super_was_ready(const struct kube_super *s);

/* The pod the supervisor runs in (borrowed). */
const char *kube_super_pod(const struct kube_super *s);

/* A fresh process in the pod: @argv as for a direct exec (argv[0] "node":
 * the supervisor's own Node binary runs it), @tag as in sandbox.h, the
 * workspace's bounds @ws_bytes/@ws_files (0: none): the supervisor ends an
 * execution that takes the workspace past them (its exit says disk_full).
 * Output and the exit come through @cbs/@ud (exited() once: code/signal
 * from the supervisor, `lost` when the stream went first). */
int kube_super_open(struct kube_super *s, const char *const *argv, const char *tag,
                uint64_t ws_bytes, uint64_t ws_files,
                const struct codepod_proc_cbs *cbs, void *ud, uint32_t *chan,
                struct cp_err *err);

/* Bytes for the channel's stdin (copied). */
int kube_super_write(struct kube_super *s, uint32_t chan, const char *buf, size_t len,
                 struct cp_err *err);

/* Kill the channel's process tree, the processes carrying @tag and the
 * orphans started after it (its exited() follows). */
void kube_super_kill(struct kube_super *s, uint32_t chan, const char *tag);

/* Ask for a reading of the channel's usage (its usage() callback answers,
 * unless the channel ends first: its D or X carries the figures then). */
void kube_super_sample(struct kube_super *s, uint32_t chan);

/* The channel's callbacks are now @cbs/@ud (a standby runner taken). */
void kube_super_rebind(struct kube_super *s, uint32_t chan, const struct codepod_proc_cbs *cbs, void *ud);

/* ready()/gone() now go to @cbs/@ud (a warm pod claimed). */
void kube_super_set_owner(struct kube_super *s, const struct kube_super_cbs *cbs, void *ud);

/* Forget a channel without its exited() (a kill that never answered). */
void kube_super_detach(struct kube_super *s, uint32_t chan);

/* Drop the stream (the processes in the pod see stdin EOF and the
 * supervisor kills them); channels are reported lost, then gone(). */
void kube_super_close(struct kube_super *s);

/*
 * What one control frame from the pod means (H, X, F, D, R: super_frame.h has
 * the framing, supervisor.js the payloads), decided from its bytes alone:
 * on_ctl acts on the decision, tests/fuzz/fuzz_super_ctl.c holds it to its
 * rules. A program in the pod can write such frames (see above), so a frame
 * that breaks the supervisor's grammar is refused rather than read kindly:
 *   H  channel 0, once, a JSON object                    -> KUBE_CTL_READY
 *   D  a channel (not 0), no payload or a JSON object
 *      {USAGE}                                           -> KUBE_CTL_KILLED
 *   X  a channel, {"code":0..255|null,"signal":0..127,USAGE},
 *      a signal or a code                                -> KUBE_CTL_EXITED
 *   F  a channel, {"error":"..."}                        -> KUBE_CTL_EXITED
 *      (unavailable; the error cut at 120 bytes, never inside a character)
 *   R  a channel, a JSON object {USAGE}, the answer to a U
 *      (kube_super_sample)                               -> KUBE_CTL_USAGE
 * USAGE ("cpuUs":N,"maxRssBytes":N) is optional: known only when both are
 * integers, a negative figure read as 0 (the engine keeps the largest).
 * A decision names a channel; whether it is still open is the caller's.
 */
enum kube_ctl_act { KUBE_CTL_READY, KUBE_CTL_KILLED, KUBE_CTL_EXITED, KUBE_CTL_USAGE };

struct kube_ctl {
	enum kube_ctl_act act;
	struct codepod_proc_exit exit; /* KUBE_CTL_EXITED: how; detail is valid UTF-8 */
	struct codepod_usage usage;    /* KUBE_CTL_KILLED, KUBE_CTL_USAGE: the figures */
	char arch[16];                 /* KUBE_CTL_READY: its "arch" (Node's process.arch), or "" */
};

/* @kind, @chan and the @len bytes of @buf as the frame decoder gave them;
 * @ready: a ready frame came before on this stream. Returns 0 with @out
 * filled, or CP_E_PARSE when the frame breaks the rules (@err says which,
 * with no byte of the payload in it): the stream is unusable from there.
 * Pure: no I/O, nothing left allocated; @buf is borrowed for the call. */
int kube_super_ctl_parse(char kind, uint32_t chan, const char *buf, size_t len, int ready,
                         struct kube_ctl *out, struct cp_err *err);

#endif
