/*
 * fuzz_payload.c - the runner's frame payloads (runner/PROTOCOL.md: Y, O,
 * E, C, R, Z, T, N and unknown kinds) through the real engine
 * (runner/exec.c, calls.c, outcome.c) over a fake backend.
 *
 * The fake runner (fake_scripted.h) answers the engine's hello by sending
 * the input as frames: records [kind][len high][len low][payload], each
 * framed with the execution's nonce (a record whose length runs past the
 * end takes the rest). Then it exits with code 0. Byte 0 sets the policy: bit 0 a small
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

#include "runner/codepod.h"
#include "fake_scripted.h"
#include "base/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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

static const struct codepod_host host_ops = { .tool_call = on_tool_call, .cancel_call = on_cancel_call, .done = on_done };

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
	fake_backend_init(&fb, &loop, data + 1, size - 1);
	struct codepod *cp = fake_engine_new(&loop, &fb.base);
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
