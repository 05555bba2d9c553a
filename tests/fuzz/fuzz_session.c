/*
 * fuzz_session.c - the session protocol (broker/session.c) on arbitrary
 * message lines, with the real engine (runner/exec.c, calls.c, outcome.c)
 * over a fake backend whose "runner" speaks the control channel.
 *
 * The input is split at '\n'; each line (at most MAX_LINES) goes to
 * broker_session_message as one message, and the loop then runs once
 * without blocking. A few lines are directives instead of messages:
 *   "#oversize" - broker_session_oversize(s, 1 << 20, 65536)
 *   "#close"    - broker_session_close(s, 0): the transport is gone
 *   "#run"      - run the loop once more
 *   "#new"      - once the session is closed, open a new one on the same hub
 *                 (attach takes the detached executions over)
 *   "#sweep"    - the hub's sweep (grace and retention are 0 s when
 *                 FUZZ_SESSION_GRACE0 is set, else 30 s / 300 s)
 * FUZZ_SESSION_TRACE=1 in the environment prints every outgoing message.
 * At the end the session is closed (can_send = 1), every execution left
 * (detached ones too) is stopped, and the loop runs until each delivered
 * its result; everything is then freed, so LSan
 * sees any leak.
 *
 * The fake backend picks its behaviour from the execution's conversation:
 *   "fail..."        spawn() fails (SANDBOX_UNAVAILABLE at once)
 *   "unavailable..." the handle reports exited() with unavailable set
 *   "exit..."        the process exits with code 1 before it is ready
 *   anything else    a runner: on the hello it sends Y, raw bytes, an O
 *                    frame, tool call 1 (the first declared tool, or
 *                    "noTool") and tool call 2 ("nope", unknown: denied by
 *                    the engine). When call 1 is answered it returns
 *                    {"done":true} (a result) or throws (an error answer).
 *
 * Invariants checked (abort() on failure): every outgoing message is a JSON
 * object with a string "type" that serializes; error messages carry
 * error.code and error.message strings and inReplyTo (a string or null);
 * results carry id and status; log messages a stream and a text; hello
 * answers a protocol, a version and a features array;
 * nothing is sent after close(s, 0); drained() comes exactly once, after
 * close; at the end no execution, process or libuv handle is left.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <uv.h>

#include "runner/codepod.h"
#include "fake_runner.h"
#include "base/idset.h"
#include "base/log.h"
#include "broker/session.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_LINES 256

enum mode { M_RUNNER, M_UNAVAILABLE, M_EXIT };

struct fake_backend {
	struct codepod_backend base; /* first: the engine hands back &base */
	uv_loop_t *loop;
	unsigned live;          /* handles not yet freed */
};

struct codepod_proc {
	struct fake_backend *b;
	struct codepod_proc_cbs cbs;
	void *ud;
	uv_timer_t t;
	enum mode mode;
	int killed;
	int stage;     /* 1: send ready + calls; 2: send the end */
	int throw_end; /* call 1 was answered with an error */
	char nonce[33];
	char tool[160];
};

/* ---- the fake runner ---- */

static void emit(struct codepod_proc *p, char kind, const char *payload)
{
	if (p->killed)
		return; /* a killed runner writes nothing more */
	fake_frame(&p->cbs, p->ud, p->nonce, kind, payload, strlen(payload));
}

static void on_proc_closed(uv_handle_t *h)
{
	struct codepod_proc *p = h->data;
	p->b->live--;
	free(p);
}

static void on_exit_timer(uv_timer_t *t)
{
	struct codepod_proc *p = t->data;
	struct codepod_proc_exit ex;
	memset(&ex, 0, sizeof ex);
	if (p->mode == M_UNAVAILABLE) {
		ex.code = -1;
		ex.unavailable = 1;
		snprintf(ex.detail, sizeof ex.detail, "ImagePullBackOff");
	} else if (p->mode == M_EXIT && !p->killed) {
		ex.code = 1;
	} else {
		ex.code = -1;
		ex.signal = 9;
	}
	p->killed = 1;
	p->cbs.exited(p->ud, &ex);
	/* The handle is gone once exited() returned. */
	uv_close((uv_handle_t *)&p->t, on_proc_closed);
}

static void on_emit_timer(uv_timer_t *t)
{
	struct codepod_proc *p = t->data;
	int stage = p->stage;
	p->stage = 0;
	if (stage == 1) {
		static const char err_bytes[] = "stderr \xff\xfe line\n";
		static const char raw_bytes[] = "raw \xc3(\x1e" "cp1 nope\n";
		json_t *c = json_pack("{s:i,s:s,s:{s:[i,i,{s:n}]}}", "c", 1, "t", p->tool, "i", "q", 1, 2, "x");
		char *call = c ? json_dumps(c, JSON_COMPACT) : NULL;
		json_decref(c);
		if (!call)
			abort();
		emit(p, 'Y', "{\"pid\":4242}");
		if (!p->killed)
			p->cbs.err(p->ud, err_bytes, sizeof err_bytes - 1);
		if (!p->killed)
			p->cbs.out(p->ud, raw_bytes, sizeof raw_bytes - 1);
		emit(p, 'O', "hello \xe2\x82\n");
		emit(p, 'C', call);
		emit(p, 'C', "{\"c\":2,\"t\":\"nope\",\"i\":7}");
		free(call);
	} else if (stage == 2 && p->throw_end) {
		emit(p, 'E', "about to throw\n");
		emit(p, 'T', "{\"name\":\"Error\",\"message\":\"boom\",\"stack\":\"Error: boom\\n    at script.ts:1:7\"}");
	} else if (stage == 2) {
		emit(p, 'O', "bad \xf0\x28\x8c\x28 utf8\n");
		emit(p, 'R', "{\"done\":true}");
	}
}

static void schedule(struct codepod_proc *p, int stage)
{
	if (p->killed)
		return;
	p->stage = stage;
	uv_timer_start(&p->t, on_emit_timer, 0, 0);
}

/* The hello (fake_hello took the nonce) names the tools; the first tool is
 * the one the runner calls (tool names may hold any character: the call is
 * built with jansson). Consumes @h. */
static void on_hello(struct codepod_proc *p, json_t *h)
{
	const char *tool = json_string_value(json_object_get(json_array_get(json_object_get(h, "tools"), 0), "n"));
	/* Tool names are 1 to 128 bytes (the engine checks). */
	if (!tool || strlen(tool) >= sizeof p->tool)
		tool = "noTool";
	snprintf(p->tool, sizeof p->tool, "%s", tool);
	json_decref(h);
	schedule(p, 1);
}

static void on_answer(struct codepod_proc *p, const char *buf, size_t len)
{
	json_t *a = json_loadb(buf, len, JSON_ALLOW_NUL, NULL);
	const char *k = json_string_value(json_object_get(a, "k"));
	json_int_t c = json_integer_value(json_object_get(a, "c"));
	if (!k || (strcmp(k, "res") && strcmp(k, "err")) || c < 1 || c > 2)
		abort(); /* the engine answers only the calls it was given */
	if (c == 1) {
		p->throw_end = strcmp(k, "err") == 0;
		schedule(p, 2);
	}
	json_decref(a);
}

/* ---- the backend ---- */

static int fake_spawn(struct codepod_backend *base, const struct codepod_spawn_req *req,
                      const struct codepod_proc_cbs *cbs, void *ud, struct codepod_proc **out,
                      struct cp_err *err)
{
	struct fake_backend *b = (struct fake_backend *)(void *)base;
	if (!req->conversation || !req->argv || !req->argv[0])
		abort();
	if (strncmp(req->conversation, "fail", 4) == 0)
		return cp_err_set(err, CP_E_SANDBOX_UNAVAILABLE, "fake: no sandbox");
	struct codepod_proc *p = calloc(1, sizeof *p);
	if (!p)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	p->b = b;
	p->cbs = *cbs;
	p->ud = ud;
	uv_timer_init(b->loop, &p->t);
	p->t.data = p;
	b->live++;
	if (strncmp(req->conversation, "unavailable", 11) == 0)
		p->mode = M_UNAVAILABLE;
	else if (strncmp(req->conversation, "exit", 4) == 0)
		p->mode = M_EXIT;
	if (p->mode != M_RUNNER)
		uv_timer_start(&p->t, on_exit_timer, 0, 0);
	*out = p;
	return 0;
}

static int fake_write(struct codepod_proc *p, const char *buf, size_t len, struct cp_err *err)
{
	if (p->killed)
		return cp_err_set(err, CP_E_STATE, "fake: the process is gone");
	if (p->mode != M_RUNNER)
		return 0;
	json_t *h = fake_hello(buf, len, p->nonce);
	if (h)
		on_hello(p, h);
	else if (len > 5 && memcmp(buf, "{\"k\":", 5) == 0)
		on_answer(p, buf, len);
	return 0;
}

static void fake_kill(struct codepod_proc *p)
{
	if (p->killed)
		return;
	p->killed = 1;
	p->stage = 0;
	uv_timer_stop(&p->t);
	uv_timer_start(&p->t, on_exit_timer, 0, 0);
}

static void fake_destroy(struct codepod_backend *b)
{
	(void)b;
}

static const struct codepod_backend_ops fake_ops = {
	.spawn = fake_spawn, .write = fake_write, .kill = fake_kill, .destroy = fake_destroy,
};

/* ---- the transport ---- */

/* FUZZ_SESSION_TRACE=1 prints every outgoing message (first 300 bytes). */
static int trace;

struct transport {
	int closed_nosend;
	int closed;
	int drained;
	unsigned long sent;
};

static int is_str(const json_t *o, const char *key)
{
	return json_is_string(json_object_get(o, key));
}

static void on_send(void *ud, const json_t *msg)
{
	struct transport *t = ud;
	if (t->closed_nosend)
		abort(); /* close(s, 0): nothing may be sent */
	if (!json_is_object(msg) || !is_str(msg, "type"))
		abort();
	char *text = json_dumps(msg, JSON_COMPACT);
	if (!text)
		abort();
	if (trace)
		fprintf(stderr, "> %.300s\n", text);
	free(text);
	const char *type = json_string_value(json_object_get(msg, "type"));
	if (strcmp(type, "error") == 0) {
		const json_t *e = json_object_get(msg, "error");
		if (!is_str(e, "code") || !is_str(e, "message") ||
		    strlen(json_string_value(json_object_get(e, "message"))) >= CP_ERR_MSG_MAX)
			abort();
		if (json_object_get(msg, "id") && !is_str(msg, "id"))
			abort();
		const json_t *r = json_object_get(msg, "inReplyTo");
		if (!r || (!json_is_null(r) && !json_is_string(r)))
			abort();
	} else if (strcmp(type, "result") == 0) {
		const char *st = json_string_value(json_object_get(msg, "status"));
		if (!is_str(msg, "id") || !st || (strcmp(st, "succeeded") && strcmp(st, "failed")) ||
		    !json_is_array(json_object_get(msg, "calls")) || !is_str(msg, "logs") ||
		    !json_is_object(json_object_get(msg, "usage")))
			abort();
		if (strcmp(st, "failed") == 0 && !is_str(json_object_get(msg, "error"), "code"))
			abort();
	} else if (strcmp(type, "tool_call") == 0) {
		if (!is_str(msg, "id") || !is_str(msg, "call") || !is_str(msg, "tool") ||
		    !json_object_get(msg, "input"))
			abort();
	} else if (strcmp(type, "cancel_call") == 0) {
		if (!is_str(msg, "id") || !is_str(msg, "call"))
			abort();
	} else if (strcmp(type, "accepted") == 0) {
		if (!is_str(msg, "id") || !is_str(msg, "inReplyTo"))
			abort();
	} else if (strcmp(type, "log") == 0) {
		const char *st = json_string_value(json_object_get(msg, "stream"));
		if (!is_str(msg, "id") || !is_str(msg, "text") || !st ||
		    (strcmp(st, "stdout") && strcmp(st, "stderr")))
			abort();
	} else if (strcmp(type, "declarations") == 0) {
		if (!is_str(msg, "declarations"))
			abort();
	} else if (strcmp(type, "hello") == 0) {
		if (!is_str(msg, "protocol") || !is_str(msg, "version") ||
		    !json_is_array(json_object_get(msg, "features")))
			abort();
	} else {
		abort(); /* codepod sends no other type */
	}
	t->sent++;
}

static void on_drained(void *ud)
{
	struct transport *t = ud;
	if (!t->closed || t->drained)
		abort();
	t->drained = 1;
}

static const struct broker_session_io io = { on_send, on_drained, NULL };

#define MAX_SESSIONS 8

struct fuzz_state {
	struct codepod *cp;
	struct cp_idset *ids;
	struct broker_hub *hub;
	struct broker_session *s[MAX_SESSIONS];
	struct transport t[MAX_SESSIONS];
	size_t n; /* sessions opened; the current one is s[n - 1] */
};

static void open_session(struct fuzz_state *f)
{
	memset(&f->t[f->n], 0, sizeof f->t[f->n]);
	f->s[f->n] = broker_session_new(f->cp, f->ids, f->hub, &io, &f->t[f->n]);
	if (!f->s[f->n])
		abort();
	f->n++;
}

static void feed_line(struct fuzz_state *f, uv_loop_t *loop, const uint8_t *line, size_t len)
{
	struct broker_session *s = f->s[f->n - 1];
	struct transport *t = &f->t[f->n - 1];
	if (len == 9 && memcmp(line, "#oversize", 9) == 0) {
		broker_session_oversize(s, 1ULL << 20, 65536);
	} else if (len == 6 && memcmp(line, "#close", 6) == 0) {
		if (!t->closed) { /* a second close is a no-op for the session */
			t->closed = 1;
			t->closed_nosend = 1;
		}
		broker_session_close(s, 0);
	} else if (len == 4 && memcmp(line, "#new", 4) == 0) {
		if (t->closed && f->n < MAX_SESSIONS)
			open_session(f);
	} else if (len == 6 && memcmp(line, "#sweep", 6) == 0) {
		broker_hub_sweep(f->hub);
	} else if (len == 4 && memcmp(line, "#run", 4) == 0) {
		uv_run(loop, UV_RUN_NOWAIT);
	} else {
		/* An exact-size copy, so ASan sees any read past the line. */
		char *copy = malloc(len ? len : 1);
		if (!copy)
			abort();
		memcpy(copy, line, len);
		broker_session_message(s, copy, len);
		free(copy);
	}
	uv_run(loop, UV_RUN_NOWAIT);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int once;
	if (!once) {
		once = 1;
		cp_log_set_level(CP_LOG_ERROR);
		trace = getenv("FUZZ_SESSION_TRACE") != NULL;
	}
	uv_loop_t loop;
	if (uv_loop_init(&loop))
		abort();
	struct fake_backend fb;
	memset(&fb, 0, sizeof fb);
	fb.base.ops = &fake_ops;
	fb.base.name = "local";
	fb.loop = &loop;

	struct fuzz_state f;
	memset(&f, 0, sizeof f);
	struct broker_hub_config hc;
	broker_hub_config_defaults(&hc);
	hc.loop = &loop;
	if (getenv("FUZZ_SESSION_GRACE0")) {
		hc.grace_s = 0;
		hc.retention_s = 0;
	}
	f.ids = cp_idset_new(64);
	f.hub = broker_hub_new(&hc);
	f.cp = fake_engine_new(&loop, &fb.base);
	if (!f.ids || !f.hub)
		abort();
	open_session(&f);

	size_t start = 0, lines = 0;
	for (size_t i = 0; i <= size && lines < MAX_LINES; i++) {
		if (i == size || data[i] == '\n') {
			if (i > start || i < size)
				feed_line(&f, &loop, data + start, i - start);
			lines++;
			start = i + 1;
		}
	}

	f.t[f.n - 1].closed = 1;
	broker_session_close(f.s[f.n - 1], 1);
	broker_hub_stop_all(f.hub, "the fuzzer ends");
	uv_run(&loop, UV_RUN_DEFAULT);
	if (broker_hub_running(f.hub) || codepod_running(f.cp) || fb.live)
		abort();
	for (size_t i = 0; i < f.n; i++) {
		if (!f.t[i].drained || broker_session_running(f.s[i]))
			abort();
		broker_session_free(f.s[i]);
	}
	broker_hub_free(f.hub);
	codepod_free(f.cp);
	cp_idset_free(f.ids);
	if (uv_loop_close(&loop))
		abort();
	return 0;
}
