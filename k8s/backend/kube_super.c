/*
 * kube_super.c - the supervisor's exec stream and its channels (see
 * kube_super.h).
 */
#include <jansson.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/codepod.h"
#include "k8s/backend/kube_super.h"
#include "base/log.h"
#include "k8s/backend/super_frame.h"
#include "runner/local/syscall_filter.h"

/* The pod helper's images (build/gen/pod_helper_img.c, Makefile): gzipped,
 * and the SHA-256 of each as it is executed. */
extern const unsigned char kube_pod_helper_x86_64_gz[], kube_pod_helper_aarch64_gz[];
extern const unsigned long kube_pod_helper_x86_64_gz_len, kube_pod_helper_aarch64_gz_len;
extern const char kube_pod_helper_x86_64_sha256[], kube_pod_helper_aarch64_sha256[];

struct kchan {
	struct kchan *next;
	uint32_t id;
	const struct codepod_proc_cbs *cbs;
	void *ud;
	int killed; /* its killed() went out (a forged second D must not repeat it) */
};

struct kube_super {
	struct k8s_exec *ex;
	struct kube_super_cbs cbs;
	void *ud;
	char *pod;
	int ready, dead, closed;
	int helper; /* its runners under the pod helper (a P frame after its hello) */
	uint32_t next_chan;
	struct kchan *chans;
	struct kube_sframe_parser parser; /* the frame being read */
};

static struct kchan *find(struct kube_super *s, uint32_t id)
{
	for (struct kchan *c = s->chans; c; c = c->next)
		if (c->id == id)
			return c;
	return NULL;
}

static void unlink_chan(struct kube_super *s, struct kchan *ch)
{
	for (struct kchan **pp = &s->chans; *pp; pp = &(*pp)->next) {
		if (*pp == ch) {
			*pp = ch->next;
			break;
		}
	}
}

static void broken(struct kube_super *s, const char *why)
{
	if (s->dead)
		return;
	cp_log(CP_LOG_WARN, "kube.supervisor_protocol", "pod", json_string(s->pod),
	       "detail", json_string(why), NULL);
	s->dead = 1;
	k8s_exec_abort(s->ex);
}

/* The USAGE fields of a D, X or R frame (supervisor.js): none when absent.
 * They come from the pod, where a program could write such a frame: they
 * only ever raise the engine's figures (it keeps the largest). */
static void usage_of(const json_t *v, struct codepod_usage *u)
{
	memset(u, 0, sizeof *u);
	json_t *cpu = json_object_get(v, "cpuUs"), *rss = json_object_get(v, "maxRssBytes");
	if (!json_is_integer(cpu) || !json_is_integer(rss))
		return;
	u->known = 1;
	u->cpu_us = json_integer_value(cpu) > 0 ? (uint64_t)json_integer_value(cpu) : 0;
	u->max_rss_bytes = json_integer_value(rss) > 0 ? (uint64_t)json_integer_value(rss) : 0;
}

/* The text of a start failure, at most @max bytes of @e cut where no UTF-8
 * sequence is split (jansson gave valid UTF-8). */
static int text_cut(const char *e, int max)
{
	size_t n = strlen(e);
	if (n <= (size_t)max)
		return (int)n;
	n = (size_t)max;
	while (n > 0 && ((unsigned char)e[n] & 0xc0) == 0x80)
		n--;
	return (int)n;
}

/* X: {"code":N|null,"signal":N}: a signal (1..127) or else an exit code (0..255). */
static int exit_said(const json_t *v, struct codepod_proc_exit *ex)
{
	const json_t *code = json_object_get(v, "code");
	const json_t *sig = json_object_get(v, "signal");
	if (!json_is_object(v) || (sig && !json_is_integer(sig)) ||
	    (code && !json_is_null(code) && !json_is_integer(code)))
		return -1;
	json_int_t s = sig ? json_integer_value(sig) : 0;
	if (s < 0 || s > 127)
		return -1;
	if (s > 0) {
		ex->signal = (int)s;
		ex->code = -1;
		return 0;
	}
	json_int_t c = json_is_integer(code) ? json_integer_value(code) : -1;
	if (c < 0 || c > 255)
		return -1;
	ex->code = (int)c;
	return 0;
}

int kube_super_ctl_parse(char kind, uint32_t chan, const char *buf, size_t len, int ready,
                         struct kube_ctl *out, struct cp_err *err)
{
	memset(out, 0, sizeof *out);
	if (kube_sframe_from_pod(kind) != KUBE_SFRAME_CTL)
		return cp_err_set(err, CP_E_PARSE, "a control frame of unknown kind 0x%02x",
		                  (unsigned char)kind);
	if (len > KUBE_SFRAME_MAX_CTL)
		return cp_err_set(err, CP_E_PARSE, "a control frame over its size limit");
	if (kind != KUBE_SFRAME_HELLO && chan == 0)
		return cp_err_set(err, CP_E_PARSE, "a %c frame on channel 0, the supervisor's own", kind);
	if (kind == KUBE_SFRAME_HELLO && chan != 0)
		return cp_err_set(err, CP_E_PARSE, "a ready frame on channel %u", (unsigned)chan);
	if (kind == KUBE_SFRAME_HELLO && ready)
		return cp_err_set(err, CP_E_PARSE, "a second ready frame");
	json_t *v = len ? json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL) : NULL;
	int rc = 0;
	if (kind == KUBE_SFRAME_DONE) {
		out->act = KUBE_CTL_KILLED;
		if (len && !json_is_object(v))
			rc = cp_err_set(err, CP_E_PARSE, "a malformed killed frame");
		else
			usage_of(v, &out->usage);
	} else if (kind == KUBE_SFRAME_READING) {
		out->act = KUBE_CTL_USAGE;
		if (!json_is_object(v))
			rc = cp_err_set(err, CP_E_PARSE, "a malformed usage frame");
		else
			usage_of(v, &out->usage);
	} else if (kind == KUBE_SFRAME_HELLO) {
		if (json_is_object(v)) {
			out->act = KUBE_CTL_READY;
			const char *a = json_string_value(json_object_get(v, "arch"));
			if (a && strlen(a) < sizeof out->arch && strspn(a, "abcdefghijklmnopqrstuvwxyz0123456789_") == strlen(a))
				memcpy(out->arch, a, strlen(a) + 1);
		} else
			rc = cp_err_set(err, CP_E_PARSE, "a malformed ready frame");
	} else if (kind == KUBE_SFRAME_EXIT) {
		out->act = KUBE_CTL_EXITED;
		const json_t *ws = json_object_get(v, "ws");
		const json_t *oom = json_object_get(v, "oom");
		if (exit_said(v, &out->exit) < 0 || (ws && !json_is_string(ws)) ||
		    (oom && !json_is_boolean(oom)))
			rc = cp_err_set(err, CP_E_PARSE, "a malformed exit frame");
		else
			usage_of(v, &out->exit.usage);
		/* The container's memory cgroup counted an OOM kill as the runner
		 * died of SIGKILL: kube_oom.c names the pod and its limit. */
		if (!rc && json_is_true(oom) && out->exit.signal == 9)
			out->exit.oom = 1;
		if (!rc && ws) { /* ended for taking the workspace past its bound */
			out->exit.disk_full = 1;
			snprintf(out->exit.detail, sizeof out->exit.detail, "%.*s",
			         text_cut(json_string_value(ws), 200), json_string_value(ws));
		}
	} else {
		const char *e = json_string_value(json_object_get(v, "error"));
		out->act = KUBE_CTL_EXITED;
		if (!json_is_object(v) || !e) {
			rc = cp_err_set(err, CP_E_PARSE, "a malformed start-failure frame");
		} else {
			out->exit.code = -1;
			out->exit.unavailable = 1;
			snprintf(out->exit.detail, sizeof out->exit.detail,
			         "the supervisor could not start it: %.*s", text_cut(e, 120), e);
		}
	}
	json_decref(v);
	if (rc)
		memset(out, 0, sizeof *out);
	return rc;
}

/* The P frame for a supervisor on @arch (Node's process.arch): the helper
 * image's SHA-256 in hex, the runner's filter for that architecture (the
 * local sandbox's rules, runner/local/syscall_filter.h) as its length
 * (uint32 BE) and bytes, then the gzipped image. Built once per
 * architecture and kept; NULL with @why set for an architecture codepod
 * has no helper for. */
static const unsigned char *helper_payload(const char *arch, size_t *len, const char **why)
{
	static unsigned char *made[2];
	static size_t made_len[2];
	int i = !strcmp(arch, "x64") ? 0 : !strcmp(arch, "arm64") ? 1 : -1;
	if (i < 0) {
		*why = "codepod has no pod helper for this architecture";
		return NULL;
	}
	if (made[i]) {
		*len = made_len[i];
		return made[i];
	}
	const unsigned char *img = i ? kube_pod_helper_aarch64_gz : kube_pod_helper_x86_64_gz;
	size_t img_len = i ? kube_pod_helper_aarch64_gz_len : kube_pod_helper_x86_64_gz_len;
	const char *sha = i ? kube_pod_helper_aarch64_sha256 : kube_pod_helper_x86_64_sha256;
	unsigned char *bpf = NULL;
	size_t bpf_len = 0;
	struct cp_err err;
	if (local_seccomp_bpf_arch(i ? SCMP_ARCH_AARCH64 : SCMP_ARCH_X86_64, &bpf, &bpf_len, &err)) {
		*why = "the runner's syscall filter could not be built";
		return NULL;
	}
	size_t n = 64 + 4 + bpf_len + img_len;
	unsigned char *b = malloc(n);
	if (!b || strlen(sha) != 64) {
		free(b);
		free(bpf);
		*why = "out of memory";
		return NULL;
	}
	memcpy(b, sha, 64);
	b[64] = (unsigned char)(bpf_len >> 24);
	b[65] = (unsigned char)(bpf_len >> 16);
	b[66] = (unsigned char)(bpf_len >> 8);
	b[67] = (unsigned char)bpf_len;
	memcpy(b + 68, bpf, bpf_len);
	memcpy(b + 68 + bpf_len, img, img_len);
	free(bpf);
	made[i] = b;
	made_len[i] = n;
	*len = n;
	return b;
}

static int send_frame(struct kube_super *s, char kind, uint32_t chan, const char *buf, size_t len,
                      struct cp_err *err);

/* After the hello: the pod helper for the supervisor's architecture, or
 * "!" and why there is none (the supervisor then refuses every start: a
 * runner is never started without it when it was asked for). */
static void send_helper(struct kube_super *s, const char *arch)
{
	const char *why = NULL;
	size_t len = 0;
	const unsigned char *p = helper_payload(arch, &len, &why);
	char msg[128];
	if (!p) {
		int n = snprintf(msg, sizeof msg, "!%s (%.16s)", why, arch[0] ? arch : "unknown");
		p = (const unsigned char *)msg;
		len = (size_t)n;
		cp_log(CP_LOG_WARN, "kube.pod_helper", "pod", json_string(s->pod), "detail",
		       json_string(msg + 1), NULL);
	}
	struct cp_err err;
	send_frame(s, KUBE_SFRAME_HELPER, 0, (const char *)p, len, &err);
}

static int on_ctl(void *ud, char kind, uint32_t chan, const char *buf, size_t len)
{
	struct kube_super *s = ud;
	struct kube_ctl c;
	struct cp_err err;
	if (kube_super_ctl_parse(kind, chan, buf, len, s->ready, &c, &err) < 0) {
		broken(s, err.msg);
		return 1;
	}
	struct kchan *ch = c.act == KUBE_CTL_READY ? NULL : find(s, chan);
	switch (c.act) {
	case KUBE_CTL_READY:
		s->ready = 1;
		if (s->helper)
			send_helper(s, c.arch);
		cp_log(CP_LOG_DEBUG, "kube.supervisor_ready", "pod", json_string(s->pod), NULL);
		s->cbs.ready(s->ud, s);
		break;
	case KUBE_CTL_KILLED: /* the channel's processes can run no more: said once */
		if (ch && !ch->killed && ch->cbs->killed) {
			ch->killed = 1;
			ch->cbs->killed(ch->ud, &c.usage);
		}
		break;
	case KUBE_CTL_USAGE: /* a reading kube_super_sample() asked for */
		if (ch && ch->cbs->usage && c.usage.known)
			ch->cbs->usage(ch->ud, &c.usage);
		break;
	case KUBE_CTL_EXITED:
		if (ch) { /* else detached meanwhile */
			const struct codepod_proc_cbs *cbs = ch->cbs;
			void *cud = ch->ud;
			unlink_chan(s, ch);
			free(ch);
			cbs->exited(cud, &c.exit);
		}
		break;
	}
	return s->dead;
}

static int on_data(void *ud, char kind, uint32_t chan, const char *buf, size_t len)
{
	struct kube_super *s = ud;
	struct kchan *ch = find(s, chan);
	if (ch && len)
		(kind == KUBE_SFRAME_OUT ? ch->cbs->out : ch->cbs->err)(ch->ud, buf, len);
	return s->dead;
}

static const struct kube_sframe_sink sink = { on_data, on_ctl };

static void on_out(void *ud, const char *buf, size_t len)
{
	struct kube_super *s = ud;
	const char *why = NULL;
	if (!s->dead && kube_sframe_feed(&s->parser, buf, len, &sink, s, &why) < 0)
		broken(s, why);
}

static void on_err(void *ud, const char *buf, size_t len)
{
	(void)ud;
	(void)buf;
	(void)len; /* Node's own complaints; the exit status tells the story */
}

static void on_exited(void *ud, const struct k8s_exec_exit *x)
{
	struct kube_super *s = ud;
	s->dead = 1;
	s->ex = NULL;
	char detail[200];
	if (x->ex.lost || x->ex.unavailable)
		snprintf(detail, sizeof detail, "the supervisor's exec stream ended: %.150s", x->ex.detail);
	else if (x->ex.code > 128 && x->ex.code < 128 + 65)
		/* the container runtime reports a death by signal N as 128+N, and
		 * the supervisor itself never exits with such a code */
		snprintf(detail, sizeof detail, "the supervisor was killed by signal %d", x->ex.code - 128);
	else
		snprintf(detail, sizeof detail, "the supervisor exited (code %d)", x->ex.code);
	while (s->chans) {
		struct kchan *ch = s->chans;
		s->chans = ch->next;
		struct codepod_proc_exit ex;
		memset(&ex, 0, sizeof ex);
		ex.code = -1;
		ex.lost = 1;
		snprintf(ex.detail, sizeof ex.detail, "%s", detail);
		const struct codepod_proc_cbs *cbs = ch->cbs;
		void *cud = ch->ud;
		free(ch);
		cbs->exited(cud, &ex);
	}
	cp_log(s->ready && !s->closed ? CP_LOG_WARN : CP_LOG_INFO, "kube.supervisor_gone", "pod", json_string(s->pod),
	       "detail", json_string(detail), "wasReady", json_boolean(s->ready), NULL);
	s->cbs.gone(s->ud, s, detail);
	free(s->pod);
	free(s);
}

static const struct k8s_exec_cbs exec_cbs = { on_out, on_err, NULL, on_exited };

int kube_super_new(struct k8s_exec_client *execs, const char *ns, const char *pod,
               const char *container, int helper, const struct kube_super_cbs *cbs, void *ud,
               struct kube_super **out, struct cp_err *err)
{
	struct kube_super *s = calloc(1, sizeof *s);
	char *boot = strndup((const char *)codepod_boot_js, codepod_boot_js_len);
	if (!s || !boot || !(s->pod = strdup(pod))) {
		free(boot);
		if (s)
			free(s->pod);
		free(s);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	s->cbs = *cbs;
	s->ud = ud;
	s->helper = helper;
	s->next_chan = 1;
	kube_sframe_init(&s->parser);
	/* --single-threaded-gc: the supervisor's heap is a few MB, and a minor GC
	 * that shares its work with V8's helper threads waits for them to be
	 * woken; on an idle VM that took ms, in the middle of an execution's kill
	 * (its outcome waits for that). On the main thread it takes well under. */
	const char *argv[] = { "node", "--disable-warning=ExperimentalWarning", "--single-threaded-gc",
		               "-e", boot, NULL };
	int rc = k8s_exec_start(execs, ns, pod, container, argv, &exec_cbs, s, &s->ex, err);
	free(boot);
	if (rc) {
		free(s->pod);
		free(s);
		return rc;
	}
	char len[32];
	int n = snprintf(len, sizeof len, "%lu\n", kube_supervisor_js_len);
	struct cp_err werr;
	if (k8s_exec_write(s->ex, len, (size_t)n, &werr) < 0 ||
	    k8s_exec_write(s->ex, kube_supervisor_js, kube_supervisor_js_len, &werr) < 0)
		k8s_exec_abort(s->ex); /* exited() -> gone() */
	*out = s;
	return 0;
}

int kube_super_is_ready(const struct kube_super *s)
{
	return s->ready && !s->dead;
}

int kube_super_was_ready(const struct kube_super *s)
{
	return s->ready;
}

const char *kube_super_pod(const struct kube_super *s)
{
	return s->pod;
}

static int send_frame(struct kube_super *s, char kind, uint32_t chan, const char *buf, size_t len,
                      struct cp_err *err)
{
	if (s->dead || !s->ex)
		return cp_err_set(err, CP_E_STATE, "the supervisor is gone");
	unsigned char h[KUBE_SFRAME_HDR];
	kube_sframe_header(h, kind, chan, (uint32_t)len);
	/* One write: a small frame (an execution's hello, its K) leaves as one message. */
	if (k8s_exec_write2(s->ex, h, KUBE_SFRAME_HDR, buf, len, err) < 0)
		return err ? err->code : CP_E_IO;
	return 0;
}

int kube_super_open(struct kube_super *s, const char *const *argv, const char *tag,
                uint64_t ws_bytes, uint64_t ws_files,
                const struct codepod_proc_cbs *cbs, void *ud, uint32_t *chan,
                struct cp_err *err)
{
	if (!kube_super_is_ready(s))
		return cp_err_set(err, CP_E_STATE, "the supervisor is not ready");
	json_t *a = json_array();
	for (size_t i = 0; a && argv[i]; i++)
		json_array_append_new(a, json_string(argv[i]));
	json_t *msg = json_pack("{s:o,s:s}", "argv", a, "tag", tag ? tag : "");
	if (msg && ws_bytes && ws_files)
		json_object_set_new(msg, "ws", json_pack("{s:I,s:I}", "bytes", (json_int_t)ws_bytes,
		                                         "files", (json_int_t)ws_files));
	char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
	json_decref(msg);
	struct kchan *ch = calloc(1, sizeof *ch);
	if (!text || !ch) {
		free(text);
		free(ch);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	ch->id = s->next_chan++;
	if (s->next_chan == 0)
		s->next_chan = 1;
	/* The parser is the stream's, not the channel's: a frame of another
	 * channel may be half read now. */
	ch->cbs = cbs;
	ch->ud = ud;
	int rc = send_frame(s, KUBE_SFRAME_START, ch->id, text, strlen(text), err);
	free(text);
	if (rc) {
		free(ch);
		return rc;
	}
	ch->next = s->chans;
	s->chans = ch;
	*chan = ch->id;
	return 0;
}

int kube_super_write(struct kube_super *s, uint32_t chan, const char *buf, size_t len,
                 struct cp_err *err)
{
	/* Big writes go as several frames; the supervisor joins them. */
	while (len > 0) {
		size_t n = len < K8S_EXEC_STDIN_CHUNK ? len : K8S_EXEC_STDIN_CHUNK;
		int rc = send_frame(s, KUBE_SFRAME_INPUT, chan, buf, n, err);
		if (rc)
			return rc;
		buf += n;
		len -= n;
	}
	return 0;
}

void kube_super_kill(struct kube_super *s, uint32_t chan, const char *tag)
{
	char body[64];
	int n = snprintf(body, sizeof body, "{\"tag\":\"%.32s\"}", tag ? tag : "");
	struct cp_err err;
	if (!s->dead && find(s, chan))
		send_frame(s, KUBE_SFRAME_KILL, chan, body, (size_t)n, &err);
}

void kube_super_sample(struct kube_super *s, uint32_t chan)
{
	struct cp_err err;
	if (!s->dead && find(s, chan))
		send_frame(s, KUBE_SFRAME_USAGE, chan, "", 0, &err);
}

void kube_super_rebind(struct kube_super *s, uint32_t chan, const struct codepod_proc_cbs *cbs, void *ud)
{
	struct kchan *ch = find(s, chan);
	if (ch) {
		ch->cbs = cbs;
		ch->ud = ud;
	}
}

void kube_super_set_owner(struct kube_super *s, const struct kube_super_cbs *cbs, void *ud)
{
	s->cbs = *cbs;
	s->ud = ud;
}

void kube_super_detach(struct kube_super *s, uint32_t chan)
{
	struct kchan *ch = find(s, chan);
	if (ch) {
		unlink_chan(s, ch);
		free(ch);
	}
}

void kube_super_close(struct kube_super *s)
{
	if (s->ex)
		k8s_exec_abort(s->ex);
	s->dead = 1;
	s->closed = 1;
}
