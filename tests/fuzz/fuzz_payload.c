/*
 * fuzz_payload.c - the runner's frame payloads (runner/PROTOCOL.md: Y, O,
 * E, C, R, Z, T, N and unknown kinds) through the real engine
 * (runner/exec.c, calls.c, outcome.c) over a fake backend.
 *
 * The fake runner answers the engine's hello by sending the input as
 * frames: records [kind][len high][len low][payload], each framed with the
 * execution's nonce (a record whose length runs past the end takes the
 * rest). Then it exits with code 0. Byte 0 sets the policy: bit 0 a small
 * maxResultBytes, bit 1 a small maxBridgeRequests, bit 2 answers tool calls
 * with an error instead of their input. The host answers every tool call at
 * once.
 *
 * Invariants (abort() on failure): exactly one outcome, a JSON object with
 * status "succeeded" or "failed" (then error.code and error.message, the
 * message shorter than CP_ERR_MSG_MAX), calls an array, logs a string; at
 * the end no execution or libuv handle is left (LSan sees any leak).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <uv.h>

#include "codepod.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fake_backend {
	struct cp_backend base; /* first: the engine hands back &base */
	uv_loop_t *loop;
	const uint8_t *frames;
	size_t nframes;
	unsigned live;
};

struct cp_proc {
	struct fake_backend *b;
	struct cp_proc_cbs cbs;
	void *ud;
	uv_timer_t t;
	int killed, sent;
	char nonce[33];
};

static void emit(struct cp_proc *p, char kind, const uint8_t *payload, size_t len)
{
	char hdr[96];
	int n = snprintf(hdr, sizeof hdr, "\x1e" "cp1 %s %c %zu\n", p->nonce, kind, len);
	char *buf = malloc((size_t)n + len + 1);
	if (!buf)
		abort();
	memcpy(buf, hdr, (size_t)n);
	if (len)
		memcpy(buf + n, payload, len);
	p->cbs.out(p->ud, buf, (size_t)n + len);
	free(buf);
}

static void on_closed(uv_handle_t *h)
{
	struct cp_proc *p = h->data;
	p->b->live--;
	free(p);
}

static void on_timer(uv_timer_t *t)
{
	struct cp_proc *p = t->data;
	if (!p->killed && !p->sent) {
		p->sent = 1;
		const uint8_t *d = p->b->frames;
		size_t left = p->b->nframes;
		while (left >= 3 && !p->killed) {
			size_t len = (size_t)d[1] << 8 | d[2];
			if (len > left - 3)
				len = left - 3;
			emit(p, (char)d[0], d + 3, len);
			d += 3 + len;
			left -= 3 + len;
		}
		uv_timer_start(&p->t, on_timer, 0, 0); /* then exit */
		return;
	}
	struct cp_proc_exit ex;
	memset(&ex, 0, sizeof ex);
	ex.code = p->killed ? -1 : 0;
	ex.signal = p->killed ? 9 : 0;
	p->killed = 1;
	p->cbs.exited(p->ud, &ex);
	uv_close((uv_handle_t *)&p->t, on_closed);
}

static int fake_spawn(struct cp_backend *base, const struct cp_spawn_req *req,
                      const struct cp_proc_cbs *cbs, void *ud, struct cp_proc **out,
                      struct cp_err *err)
{
	struct fake_backend *b = (struct fake_backend *)(void *)base;
	(void)req;
	struct cp_proc *p = calloc(1, sizeof *p);
	if (!p)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	p->b = b;
	p->cbs = *cbs;
	p->ud = ud;
	uv_timer_init(b->loop, &p->t);
	p->t.data = p;
	b->live++;
	*out = p;
	return 0;
}

static int fake_write(struct cp_proc *p, const char *buf, size_t len, struct cp_err *err)
{
	if (p->killed)
		return cp_err_set(err, CP_E_STATE, "fake: the process is gone");
	if (!p->nonce[0] && len > 12 && memcmp(buf, "{\"k\":\"hello\"", 12) == 0) {
		json_t *h = json_loadb(buf, len, JSON_ALLOW_NUL, NULL);
		const char *nonce = json_string_value(json_object_get(h, "nonce"));
		if (!nonce || strlen(nonce) != 32)
			abort();
		memcpy(p->nonce, nonce, 33);
		json_decref(h);
		uv_timer_start(&p->t, on_timer, 0, 0);
	}
	return 0;
}

static void fake_kill(struct cp_proc *p)
{
	if (p->killed)
		return;
	p->killed = 1;
	uv_timer_stop(&p->t);
	uv_timer_start(&p->t, on_timer, 0, 0);
}

static void fake_note_pid(struct cp_proc *p, long pid, unsigned long long start)
{
	(void)p;
	if (pid <= 1)
		abort(); /* the engine passes on only a real pid */
	(void)start;
}

static void fake_destroy(struct cp_backend *b)
{
	(void)b;
}

static const struct cp_backend_ops fake_ops = {
	.spawn = fake_spawn, .write = fake_write, .kill = fake_kill,
	.note_pid = fake_note_pid, .destroy = fake_destroy,
};

/* ---- the host ---- */

struct host {
	int outcomes;
	int tool_error;
};

static void on_tool_call(void *ud, struct codepod_exec *e, const char *call_id,
                         const char *tool, const json_t *input)
{
	struct host *h = ud;
	if (!call_id || !tool || !input)
		abort();
	if (h->tool_error)
		codepod_tool_error(e, call_id, "no", NULL);
	else
		codepod_tool_result(e, call_id, input, NULL);
}

static void on_cancel_call(void *ud, struct codepod_exec *e, const char *call_id)
{
	(void)ud;
	(void)e;
	if (!call_id)
		abort();
}

static int is_str(const json_t *o, const char *key)
{
	return json_is_string(json_object_get(o, key));
}

static void on_done(void *ud, struct codepod_exec *e, const json_t *o)
{
	struct host *h = ud;
	(void)e;
	const char *st = json_string_value(json_object_get(o, "status"));
	if (!st || !is_str(o, "logs") || !json_is_array(json_object_get(o, "calls")))
		abort();
	if (strcmp(st, "failed") == 0) {
		const json_t *err = json_object_get(o, "error");
		if (!is_str(err, "code") || !is_str(err, "message") ||
		    strlen(json_string_value(json_object_get(err, "message"))) >= CP_ERR_MSG_MAX)
			abort();
	} else if (strcmp(st, "succeeded") != 0) {
		abort();
	}
	char *text = json_dumps(o, JSON_COMPACT);
	if (!text)
		abort();
	free(text);
	h->outcomes++;
}

static const struct codepod_host host_ops = { on_tool_call, on_cancel_call, on_done, NULL };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int once;
	if (!once) {
		once = 1;
		cp_log_set_level(CP_LOG_ERROR);
	}
	if (size == 0)
		return 0;
	uv_loop_t loop;
	if (uv_loop_init(&loop))
		abort();
	struct fake_backend fb;
	memset(&fb, 0, sizeof fb);
	fb.base.ops = &fake_ops;
	fb.base.name = "local";
	fb.loop = &loop;
	fb.frames = data + 1;
	fb.nframes = size - 1;

	struct codepod_config cfg;
	memset(&cfg, 0, sizeof cfg);
	cfg.loop = &loop;
	cfg.backend = &fb.base;
	cp_policy_defaults(&cfg.defaults);
	cp_policy_ceiling_defaults(&cfg.ceiling);
	struct codepod *cp = NULL;
	if (codepod_new(&cfg, &cp, NULL))
		abort();
	json_t *req = json_pack("{s:s,s:s,s:s,s:[{s:s},{s:s,s:b}],s:{s:i,s:i,s:i}}",
	                        "id", "e1", "conversation", "c", "js", "return 1",
	                        "tools", "name", "t", "name", "off", "enabled", 0,
	                        "policy", "maxResultBytes", data[0] & 1 ? 64 : 32768,
	                        "maxBridgeRequests", data[0] & 2 ? 2 : 256,
	                        "maxToolOutputBytes", 4096);
	struct host h = { 0, data[0] & 4 };
	struct codepod_exec *e = NULL;
	if (!req || codepod_submit(cp, req, &host_ops, &h, &e, NULL))
		abort();
	json_decref(req);
	uv_run(&loop, UV_RUN_DEFAULT);
	if (h.outcomes != 1 || codepod_running(cp) || fb.live)
		abort();
	codepod_free(cp);
	if (uv_loop_close(&loop))
		abort();
	return 0;
}
