/*
 * calls.c - tool calls of one execution: validation against the allowlist
 * and the limits of docs/contract.md §3, the in-flight cap with a FIFO queue,
 * answers from the host, cancellation at the end.
 *
 * Every check here is authoritative: the runner checks sizes too, but only to
 * save work; a program can bypass it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/continuation.h"
#include "runner/exec_int.h"
#include "base/assert.h"
#include "base/buf.h"
#include "base/jsondepth.h"
#include "base/jsonutil.h"
#include "base/log.h"
#include "base/state.h"

#define MAX_TOOL_NAME 128

static const char *const call_state_names[] = {
	[CODEPOD_CALL_QUEUED] = "queued", [CODEPOD_CALL_IN_FLIGHT] = "in_flight", [CODEPOD_CALL_OK] = "ok",
	[CODEPOD_CALL_ERROR] = "error", [CODEPOD_CALL_DENIED] = "denied", [CODEPOD_CALL_CANCELLED] = "cancelled",
	[CODEPOD_CALL_PENDING] = "pending", [CODEPOD_CALL_HOLDING] = "holding",
};

/* legal[from][to]: the transitions of exec_int.h. */
#define N_CALL_STATES (CODEPOD_CALL_HOLDING + 1)
static const unsigned char call_legal[N_CALL_STATES][N_CALL_STATES] = {
	[CODEPOD_CALL_QUEUED] = { [CODEPOD_CALL_IN_FLIGHT] = 1, [CODEPOD_CALL_DENIED] = 1, [CODEPOD_CALL_CANCELLED] = 1,
	                          [CODEPOD_CALL_PENDING] = 1, [CODEPOD_CALL_OK] = 1, [CODEPOD_CALL_ERROR] = 1,
	                          [CODEPOD_CALL_HOLDING] = 1 },
	[CODEPOD_CALL_IN_FLIGHT] = { [CODEPOD_CALL_OK] = 1, [CODEPOD_CALL_ERROR] = 1, [CODEPOD_CALL_DENIED] = 1,
	                        [CODEPOD_CALL_CANCELLED] = 1, [CODEPOD_CALL_PENDING] = 1 },
	[CODEPOD_CALL_PENDING] = { [CODEPOD_CALL_CANCELLED] = 1 },
	[CODEPOD_CALL_HOLDING] = { [CODEPOD_CALL_QUEUED] = 1, [CODEPOD_CALL_DENIED] = 1,
	                           [CODEPOD_CALL_CANCELLED] = 1 },
};

/* add_call zeroes a new call: it starts QUEUED. */
_Static_assert(CODEPOD_CALL_QUEUED == 0, "a new call is CODEPOD_CALL_QUEUED");

static const struct cp_state_machine call_machine = {
	"exec.call_state", "id", call_state_names, &call_legal[0][0], N_CALL_STATES,
};

/* The one place a call's state changes (@idx: its index in e->calls). */
static void call_set_state(struct codepod_exec *e, size_t idx, enum codepod_call_state to)
{
	struct codepod_call *c = &e->calls[idx];
	cp_state_change(&call_machine, e->id, (int64_t)idx + 1, (unsigned)c->state, (unsigned)to);
	c->state = to;
}

const char *codepod_call_state_name(enum codepod_call_state s)
{
	switch (s) {
	case CODEPOD_CALL_OK: return "ok";
	case CODEPOD_CALL_ERROR: return "error";
	case CODEPOD_CALL_DENIED: return "denied";
	case CODEPOD_CALL_PENDING: return "pending";
	default: return "cancelled";
	}
}

/* Decimal digits of v into out (at least 20 bytes); returns their count. */
static size_t put_uint(char *out, uint64_t v)
{
	char tmp[20];
	size_t n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (size_t i = 0; i < n; i++)
		out[i] = tmp[n - 1 - i];
	return n;
}

/*
 * Writes {"k":KIND,"c":N,"KEY":VALUE}\n to the runner in one write, the text
 * built around one dump of the value (json_pack + json_dumps cost three
 * times as much per call, and a second write wakes the runner twice).
 * A value whose dump is over @max is not sent: its size is returned and
 * nothing is written. Return: the size of the value's dump; 0 when it could
 * not be built (the execution is then finished).
 */
static size_t send_answer_max(struct codepod_exec *e, size_t idx, const char *kind,
                              char key, const json_t *value, size_t max)
{
	enum { FLAGS = JSON_COMPACT | JSON_ENCODE_ANY };
	char stack[2048];
	size_t pre = 0;
	memcpy(stack, "{\"k\":\"", 6);
	pre = 6;
	memcpy(stack + pre, kind, 3);
	pre += 3;
	memcpy(stack + pre, "\",\"c\":", 6);
	pre += 6;
	pre += put_uint(stack + pre, (uint64_t)idx + 1);
	stack[pre++] = ',';
	stack[pre++] = '"';
	stack[pre++] = key;
	stack[pre++] = '"';
	stack[pre++] = ':';
	size_t room = sizeof stack - pre - 2;
	size_t n = json_dumpb(value, stack + pre, room, FLAGS);
	if (n == 0) {
		codepod_exec_finish(e, CP_E_INTERNAL, "cannot encode a tool answer");
		return 0;
	}
	if (n > max)
		return n;
	char *buf = stack;
	if (n > room) {
		buf = malloc(pre + n + 2);
		if (!buf) {
			codepod_exec_finish(e, CP_E_INTERNAL, "out of memory encoding a tool answer");
			return 0;
		}
		memcpy(buf, stack, pre);
		json_dumpb(value, buf + pre, n, FLAGS);
	}
	buf[pre + n] = '}';
	buf[pre + n + 1] = '\n';
	codepod_exec_send_line(e, buf, pre + n + 2);
	if (buf != stack)
		free(buf);
	return n;
}

static void send_answer(struct codepod_exec *e, size_t idx, const char *kind,
                        char key, json_t *value /* steals */)
{
	if (!value)
		codepod_exec_finish(e, CP_E_INTERNAL, "out of memory encoding a tool answer");
	else
		send_answer_max(e, idx, kind, key, value, SIZE_MAX);
	json_decref(value);
}

/* The call is refused with @msg (at most 4096 bytes of it, never cut
 * inside a character: a cut one is not a JSON string). */
static void deny_text(struct codepod_exec *e, size_t idx, const char *msg)
{
	size_t n = strnlen(msg, 4096);
	json_t *text = json_stringn(msg, n);
	for (int k = 0; !text && k < 3 && n > 0; k++)
		text = json_stringn(msg, --n);
	struct codepod_call *c = &e->calls[idx];
	call_set_state(e, idx, CODEPOD_CALL_DENIED);
	c->t_end_ms = codepod_exec_now_ms();
	json_decref(c->input);
	c->input = NULL;
	free(c->message);
	c->message = text ? strdup(json_string_value(text)) : NULL;
	send_answer(e, idx, "err", 'm', text ? text : json_string("The call was refused."));
}

static void deny(struct codepod_exec *e, size_t idx, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void deny(struct codepod_exec *e, size_t idx, const char *fmt, ...)
{
	char msg[CP_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	deny_text(e, idx, msg);
}

static int queue_push(struct codepod_exec *e, size_t idx)
{
	if (e->q_len == e->q_cap) {
		size_t old = e->q_cap;
		size_t *q = cp_array_grow(e->queue, &e->q_cap, old + 1, sizeof *q, NULL);
		if (!q)
			return CP_E_NOMEM;
		/* The ring was full, so it wraps at the old end: its front part,
		 * [0, head), moves after that end (the room at least doubled). */
		memcpy(q + old, q, e->q_head * sizeof *q);
		e->queue = q;
	}
	e->queue[(e->q_head + e->q_len) % e->q_cap] = idx;
	e->q_len++;
	return 0;
}

static size_t queue_pop(struct codepod_exec *e)
{
	size_t idx = e->queue[e->q_head];
	e->q_head = (e->q_head + 1) % e->q_cap;
	e->q_len--;
	return idx;
}

/* Hands queued calls to the host while slots are free. The host may answer
 * (or stop the execution) from inside tool_call, which re-enters here: the
 * flag turns that into another turn of this loop instead of recursion. */
static void pump(struct codepod_exec *e)
{
	if (e->pumping) {
		e->pump_again = 1;
		return;
	}
	e->pumping = 1;
	do {
		e->pump_again = 0;
		while (e->state == CODEPOD_ST_RUNNING && e->q_len > 0 &&
		       e->in_flight < e->pol.max_in_flight) {
			size_t idx = queue_pop(e);
			struct codepod_call *c = &e->calls[idx];
			json_t *input = json_incref(c->input); /* the host may answer inside */
			call_set_state(e, idx, CODEPOD_CALL_IN_FLIGHT);
			e->in_flight++;
			e->tool_calls++;
			e->tool_input_bytes += c->input_bytes;
			char id[24];
			id[put_uint(id, (uint64_t)idx + 1)] = '\0';
			e->host->tool_call(e->ud, e, id, c->tool, input);
			json_decref(input);
		}
	} while (e->pump_again);
	e->pumping = 0;
}

static const json_t *find_tool(const struct codepod_exec *e, const char *name)
{
	return json_object_get(e->tool_index, name);
}

/* A tool call frame, read: its number, the tool's name, its input (or the
 * size the runner reported instead). */
struct envelope {
	json_t *env;          /* the whole payload parsed, or NULL (fast path) */
	int has_c;            /* "c" is an integer */
	json_int_t c;
	const char *tool;     /* NULL: missing or not a string */
	char name[MAX_TOOL_NAME + 1];
	const json_t *input;  /* NULL: absent; owned by env, or by own_input */
	json_t *own_input;
	const json_t *big;
	size_t text_len;      /* bytes of text the input was read from (a bound) */
	int text_exact;       /* text_len is the input's own text, exactly */
	int too_deep;
};

/*
 * The runner writes {"c":N,"t":"NAME","i":INPUT}, NAME plain ASCII: read
 * that envelope by hand and give jansson only INPUT (parsing the whole
 * payload costs twice as much per call). Return 1 when the payload has
 * exactly that shape and INPUT parses; 0 leaves it to the full parse,
 * which reads every other form as before (keys in another order, escapes,
 * "big", whitespace, repeated keys).
 */
static int read_envelope_fast(const char *p, size_t len, struct envelope *v)
{
	static const char c_key[] = "{\"c\":", t_key[] = ",\"t\":\"", i_key[] = ",\"i\":";
	size_t i = sizeof c_key - 1;
	if (len < i || memcmp(p, c_key, i) != 0)
		return 0;
	size_t d0 = i;
	json_int_t n = 0;
	while (i < len && p[i] >= '0' && p[i] <= '9' && i - d0 < 18)
		n = n * 10 + (p[i++] - '0');
	if (i == d0 || (p[d0] == '0' && i - d0 > 1))
		return 0;
	if (len - i < sizeof t_key - 1 || memcmp(p + i, t_key, sizeof t_key - 1) != 0)
		return 0;
	i += sizeof t_key - 1;
	size_t name = i;
	for (; i < len && p[i] != '"'; i++)
		if ((unsigned char)p[i] < 0x20 || (unsigned char)p[i] >= 0x80 || p[i] == '\\' ||
		    i - name >= MAX_TOOL_NAME)
			return 0;
	if (i >= len)
		return 0;
	size_t name_len = i - name;
	i++;
	if (len - i < sizeof i_key - 1 || memcmp(p + i, i_key, sizeof i_key - 1) != 0)
		return 0;
	i += sizeof i_key - 1;
	if (i >= len || p[len - 1] != '}')
		return 0;
	json_t *in = cp_json_load(p + i, len - 1 - i, NULL);
	if (!in)
		return 0;
	v->has_c = 1;
	v->c = n;
	memcpy(v->name, p + name, name_len);
	v->name[name_len] = '\0';
	v->tool = v->name;
	v->input = v->own_input = in;
	v->text_len = len - 1 - i;
	v->text_exact = 1;
	return 1;
}

/* For an input too deep to parse safely, read only the envelope before "i". */
static json_t *load_head(const char *payload, size_t len)
{
	const char *i = memmem(payload, len, ",\"i\":", 5);
	if (!i)
		return NULL;
	size_t head = (size_t)(i - payload);
	char *copy = malloc(head + 2);
	if (!copy)
		return NULL;
	memcpy(copy, payload, head);
	copy[head] = '}';
	copy[head + 1] = '\0';
	json_t *v = json_loadb(copy, head + 1, 0, NULL);
	free(copy);
	return v;
}

static void read_envelope(const char *payload, size_t len, struct envelope *v)
{
	memset(v, 0, sizeof *v);
	v->too_deep = cp_json_text_depth(payload, len, CODEPOD_MAX_JSON_DEPTH + 1) > CODEPOD_MAX_JSON_DEPTH + 1;
	if (!v->too_deep && read_envelope_fast(payload, len, v))
		return;
	v->env = v->too_deep ? load_head(payload, len) : cp_json_load(payload, len, NULL);
	if (!json_is_object(v->env))
		return;
	const json_t *n = json_object_get(v->env, "c");
	v->has_c = json_is_integer(n);
	v->c = json_integer_value(n);
	v->tool = json_string_value(json_object_get(v->env, "t"));
	v->input = json_object_get(v->env, "i");
	v->big = json_object_get(v->env, "big");
	v->text_len = len;
}

static void envelope_free(struct envelope *v)
{
	json_decref(v->env);
	json_decref(v->own_input);
}

static int add_call(struct codepod_exec *e, const char *tool)
{
	struct codepod_call *grown = cp_array_grow(e->calls, &e->calls_cap, e->ncalls + 1,
	                                      sizeof *grown, NULL);
	if (!grown)
		return CP_E_NOMEM;
	e->calls = grown;
	struct codepod_call *c = &e->calls[e->ncalls];
	memset(c, 0, sizeof *c);
	size_t n = strnlen(tool, MAX_TOOL_NAME + 1);
	if (n > MAX_TOOL_NAME) /* too long for any declared tool: cut, never inside a character */
		for (n = MAX_TOOL_NAME; n > 0 && ((unsigned char)tool[n] & 0xC0) == 0x80; n--)
			;
	c->tool = strndup(tool, n);
	if (!c->tool)
		return CP_E_NOMEM;
	c->t_start_ms = codepod_exec_now_ms();
	codepod_trace_call(e, c);
	e->ncalls++;
	e->requests++;
	return 0;
}

/* The size of jansson's compact dump of a value parsed from @text_len bytes
 * of JSON is at most 8 times that: only numbers grow (a real of 3 bytes,
 * "1e9" or "0.1", dumps as at most 24: "%.17g" and ".0"); strings, names
 * and literals dump at most as long as they were written. Below that bound
 * the input cannot be over the limit and is not dumped to be measured. */
#define DUMP_GROWTH_MAX 8

/* ---- calls held for approval ("approval":"hold") ---- */

static void on_hold_timer(uv_timer_t *t);

/* The hold timer fires for the first held call's wait. */
static void hold_rearm(struct codepod_exec *e)
{
	uint64_t first = 0;
	for (size_t i = 0; i < e->ncalls && e->nholding; i++)
		if (e->calls[i].state == CODEPOD_CALL_HOLDING &&
		    (!first || e->calls[i].hold_until_ms < first))
			first = e->calls[i].hold_until_ms;
	uv_timer_stop(&e->hold_timer);
	if (first) {
		uint64_t now = codepod_exec_now_ms();
		uv_timer_start(&e->hold_timer, on_hold_timer, first > now ? first - now : 0, 0);
	}
}

static void hold_start(struct codepod_exec *e, size_t idx, uint64_t wait_ms)
{
	struct codepod_call *c = &e->calls[idx];
	call_set_state(e, idx, CODEPOD_CALL_HOLDING);
	c->hold_until_ms = codepod_exec_now_ms() + wait_ms;
	if (e->nholding++ == 0)
		codepod_exec_pause_deadline(e);
	hold_rearm(e);
	char id[24];
	id[put_uint(id, (uint64_t)idx + 1)] = '\0';
	json_t *input = json_incref(c->input); /* the host may answer inside */
	e->host->approval_request(e->ud, e, id, c->tool, input);
	json_decref(input);
}

/* A held call is decided (or timed out): the deadline runs again once none is. */
static void hold_end(struct codepod_exec *e)
{
	if (--e->nholding == 0)
		codepod_exec_resume_deadline(e);
	hold_rearm(e);
}

static void on_hold_timer(uv_timer_t *t)
{
	struct codepod_exec *e = t->data;
	uint64_t now = codepod_exec_now_ms();
	for (size_t i = 0; i < e->ncalls && e->state == CODEPOD_ST_RUNNING; i++) {
		struct codepod_call *c = &e->calls[i];
		if (c->state != CODEPOD_CALL_HOLDING || c->hold_until_ms > now)
			continue;
		uint64_t waited = now - c->t_start_ms;
		char id[24];
		id[put_uint(id, (uint64_t)i + 1)] = '\0';
		e->host->cancel_call(e->ud, e, id);
		deny(e, i, "No approval for the call to %s came within %llu ms (approvalWaitMs).",
		     c->tool, (unsigned long long)waited);
		hold_end(e);
	}
	/* libuv fires a timer by the loop's time, cached when this iteration
	 * began, while hold_until_ms is read from the clock: a timer can fire
	 * a little before the call is due, and then must be armed again. */
	if (e->state == CODEPOD_ST_RUNNING)
		hold_rearm(e);
	codepod_approval_poke(e);
}

int codepod_tool_approval(struct codepod_exec *e, const char *call_id, int approved,
                          const char *message, struct cp_err *err)
{
	char *end = NULL;
	unsigned long long n = call_id ? strtoull(call_id, &end, 10) : 0;
	if (!call_id || !*call_id || *end || n == 0 || n > e->ncalls ||
	    e->calls[n - 1].state != CODEPOD_CALL_HOLDING || e->state != CODEPOD_ST_RUNNING)
		return cp_err_set(err, CP_E_NOT_FOUND, "no tool call %.64s is waiting for approval",
		                  call_id ? call_id : "(null)");
	size_t idx = (size_t)(n - 1);
	struct codepod_call *c = &e->calls[idx];
	if (approved) {
		call_set_state(e, idx, CODEPOD_CALL_QUEUED);
		c->approved = 1;
		if (queue_push(e, idx)) {
			codepod_exec_finish(e, CP_E_INTERNAL, "out of memory queueing a tool call");
			return 0;
		}
	} else if (message) {
		deny_text(e, idx, message);
	} else {
		deny(e, idx, "The call to %s was not approved.", c->tool);
	}
	hold_end(e);
	pump(e);
	codepod_approval_poke(e);
	return 0;
}

/* Decides one call: denied with a safe message, or queued for the host. */
static void admit(struct codepod_exec *e, size_t idx, const struct envelope *v)
{
	struct codepod_call *c = &e->calls[idx];
	const json_t *tool = find_tool(e, c->tool);
	const json_t *input = v->input;
	const json_t *big = v->big;
	if (!tool)
		return deny(e, idx, "Unknown tool: %s", c->tool);
	const json_t *en = json_object_get(tool, "enabled");
	if (en && json_is_false(en))
		return deny(e, idx, "Tool is disabled: %s", c->tool);
	if (v->too_deep)
		return deny(e, idx, "Tool input for %s nests deeper than %d levels of JSON.",
		            c->tool, CODEPOD_MAX_JSON_DEPTH);
	size_t size = 0;
	if (big)
		size = (size_t)json_integer_value(big);
	else if (input && v->text_len > e->pol.max_tool_input_bytes / DUMP_GROWTH_MAX)
		size = json_dumpb(input, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
	if (big || size > e->pol.max_tool_input_bytes)
		return deny(e, idx, "Tool input for %s is %zu bytes, over the limit of %llu "
		            "bytes (maxToolInputBytes).", c->tool, size,
		            (unsigned long long)e->pol.max_tool_input_bytes);
	if (!input)
		return deny(e, idx, "Tool input for %s is missing.", c->tool);
	if (cp_json_value_depth(input, CODEPOD_MAX_JSON_DEPTH) > CODEPOD_MAX_JSON_DEPTH)
		return deny(e, idx, "Tool input for %s nests deeper than %d levels of JSON.",
		            c->tool, CODEPOD_MAX_JSON_DEPTH);
	/* usage.toolInputBytes: the text the runner sent (JSON.stringify's);
	 * for a frame in another form, the compact text of what it held. */
	c->input_bytes = v->text_exact ? v->text_len
	                 : size ? size : json_dumpb(input, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
	c->input = json_incref((json_t *)input); /* QUEUED since add_call */
	uint64_t hold = c->approved ? 0 : codepod_approval_hold_ms(tool);
	if (hold) {
		if (!e->host->approval_request)
			return deny(e, idx, "The call to %s needs a person's approval, and this "
			            "backend cannot ask for one.", c->tool);
		hold_start(e, idx, hold);
		return;
	}
	if (!c->approved && codepod_approval_gated(tool)) {
		call_set_state(e, idx, CODEPOD_CALL_PENDING);
		e->npending++;
		codepod_approval_poke(e);
		return;
	}
	if (queue_push(e, idx)) {
		codepod_exec_finish(e, CP_E_INTERNAL, "out of memory queueing a tool call");
		return;
	}
	pump(e);
}

void codepod_calls_keep_output(struct codepod_exec *e, struct codepod_call *c,
                               const json_t *output, size_t size)
{
	if (e->log_over || e->log_bytes + size > CODEPOD_CONTINUATION_MAX_BYTES) {
		e->log_over = 1;
		return;
	}
	e->log_bytes += size;
	c->output = json_incref((json_t *)output);
}

static void replay_error(struct codepod_exec *e, size_t idx, enum codepod_call_state st,
                         const char *msg)
{
	struct codepod_call *c = &e->calls[idx];
	free(c->message);
	c->message = strdup(msg);
	call_set_state(e, idx, st);
	send_answer(e, idx, "err", 'm', json_string(msg));
}

/*
 * A call of a resumed execution at a position the continuation's log holds:
 * the same tool with the same input, or the execution ends REPLAY_DIVERGED
 * without running it. Answered from the log (1), or left to admit (0): an
 * approved pending call (it goes to the host with its idempotency key), or
 * one the run before never saw answered.
 */
static int replay(struct codepod_exec *e, size_t idx)
{
	const json_t *en = json_array_get(e->replay, idx);
	if (!en)
		return 0;
	struct codepod_call *c = &e->calls[idx];
	char h[65];
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < sizeof c->hash; i++) {
		h[2 * i] = hex[c->hash[i] >> 4];
		h[2 * i + 1] = hex[c->hash[i] & 15];
	}
	h[64] = '\0';
	const char *t = json_string_value(json_object_get(en, "t"));
	if (strcmp(t, c->tool) != 0 || strcmp(json_string_value(json_object_get(en, "h")), h) != 0) {
		int same = strcmp(t, c->tool) == 0;
		codepod_exec_finish(e, CP_E_REPLAY_DIVERGED,
		                    "On resume the program's tool call %zu is %s %s where the suspended "
		                    "run called %s%s; it was not run. A program is run again from the "
		                    "start after an approval and must make the same calls before a "
		                    "gated call (no branching on time or randomness).",
		                    idx + 1, same ? "the tool" : "a call to", c->tool, t,
		                    same ? " with another input" : "");
		return 1;
	}
	const char *s = json_string_value(json_object_get(en, "s"));
	json_int_t ms = json_integer_value(json_object_get(en, "ms"));
	c->t_end_ms = c->t_start_ms + (uint64_t)(ms > 0 ? ms : 0);
	if (strcmp(s, "ok") == 0) {
		const json_t *o = json_object_get(en, "o");
		call_set_state(e, idx, CODEPOD_CALL_OK);
		size_t size = send_answer_max(e, idx, "res", 'o', o, SIZE_MAX);
		codepod_calls_keep_output(e, c, o, size);
		return 1;
	}
	if (strcmp(s, "error") == 0 || strcmp(s, "denied") == 0) {
		replay_error(e, idx, s[0] == 'e' ? CODEPOD_CALL_ERROR : CODEPOD_CALL_DENIED,
		             json_string_value(json_object_get(en, "m")));
		return 1;
	}
	c->t_end_ms = 0;
	if (strcmp(s, "pending") != 0)
		return 0;
	if (json_is_true(json_object_get(en, "dec"))) {
		char key[64];
		snprintf(key, sizeof key, "%s:%zu", e->resume_jti, idx + 1);
		c->idem_key = strdup(key);
		c->approved = 1;
		return 0;
	}
	const char *dm = json_string_value(json_object_get(en, "dm"));
	char msg[CP_ERR_MSG_MAX];
	if (!dm)
		snprintf(msg, sizeof msg, "The call to %s was not approved.", c->tool);
	c->t_end_ms = c->t_start_ms;
	replay_error(e, idx, CODEPOD_CALL_DENIED, dm ? dm : msg);
	return 1;
}

void codepod_calls_on_frame(struct codepod_exec *e, const char *payload, size_t len)
{
	struct envelope v;
	read_envelope(payload, len, &v);
	if (!v.has_c || !v.tool) {
		envelope_free(&v);
		codepod_exec_finish(e, CP_E_INTERNAL, "control channel: malformed tool call frame");
		return;
	}
	if ((uint64_t)v.c != e->requests + 1) {
		envelope_free(&v);
		codepod_exec_finish(e, CP_E_INTERNAL, "control channel: tool call numbered out of order");
		return;
	}
	if (e->requests >= e->pol.max_bridge_requests) {
		/* Over the request limit: denied and counted, not listed, so the
		 * outcome stays within maxBridgeRequests entries (callsOmitted). */
		envelope_free(&v);
		e->requests++;
		e->calls_omitted++;
		char msg[CP_ERR_MSG_MAX];
		snprintf(msg, sizeof msg, "Tool request limit reached: at most %llu tool requests "
		         "per execution (maxBridgeRequests).",
		         (unsigned long long)e->pol.max_bridge_requests);
		send_answer(e, (size_t)(e->requests - 1), "err", 'm', json_string(msg));
		return;
	}
	if (add_call(e, v.tool)) {
		envelope_free(&v);
		codepod_exec_finish(e, CP_E_INTERNAL, "out of memory recording a tool call");
		return;
	}
	struct codepod_call *c = &e->calls[e->ncalls - 1];
	codepod_approval_hash(v.too_deep || v.big ? NULL : v.input, c->hash);
	if (!e->replay || !replay(e, e->ncalls - 1))
		admit(e, e->ncalls - 1, &v);
	envelope_free(&v);
	codepod_approval_poke(e); /* a new call: the program is not quiet yet */
}

/* The call a host answer names, if it is waiting for one. */
static struct codepod_call *waiting_call(struct codepod_exec *e, const char *call_id,
                                    size_t *idx, struct cp_err *err)
{
	char *end = NULL;
	unsigned long long n = call_id ? strtoull(call_id, &end, 10) : 0;
	if (!call_id || !*call_id || *end || n == 0 || n > e->ncalls ||
	    e->calls[n - 1].state != CODEPOD_CALL_IN_FLIGHT || e->state >= CODEPOD_ST_FINISHING) {
		cp_err_set(err, CP_E_NOT_FOUND, "no tool call %.64s is waiting for an answer",
		           call_id ? call_id : "(null)");
		return NULL;
	}
	*idx = (size_t)(n - 1);
	return &e->calls[n - 1];
}

static void answered(struct codepod_exec *e, size_t idx, enum codepod_call_state st)
{
	if (e->state >= CODEPOD_ST_FINISHING)
		return; /* sending the answer failed and ended the execution: the call is cancelled */
	call_set_state(e, idx, st);
	e->calls[idx].t_end_ms = codepod_exec_now_ms();
	codepod_trace_call_end(e, idx);
	json_decref(e->calls[idx].input);
	e->calls[idx].input = NULL;
	e->in_flight--;
	pump(e);
	codepod_approval_poke(e);
}

int codepod_tool_result(struct codepod_exec *e, const char *call_id,
                        const json_t *output, struct cp_err *err)
{
	size_t idx;
	struct codepod_call *c = waiting_call(e, call_id, &idx, err);
	if (!c)
		return CP_E_NOT_FOUND;
	if (!output)
		output = json_null();
	char msg[CP_ERR_MSG_MAX];
	if (cp_json_value_depth(output, CODEPOD_MAX_JSON_DEPTH) > CODEPOD_MAX_JSON_DEPTH) {
		snprintf(msg, sizeof msg, "Tool output of %s nests deeper than %d levels of JSON.",
		         c->tool, CODEPOD_MAX_JSON_DEPTH);
	} else {
		/* The size is that of the dump that is sent: one dump for both. */
		size_t size = send_answer_max(e, idx, "res", 'o', output, e->pol.max_tool_output_bytes);
		if (size == 0 || size <= e->pol.max_tool_output_bytes) {
			e->tool_output_bytes += size; /* the text the runner was sent */
			codepod_calls_keep_output(e, c, output, size);
			c->output_bytes = size;
			answered(e, idx, CODEPOD_CALL_OK);
			return 0;
		}
		snprintf(msg, sizeof msg, "Tool output of %s is %zu bytes, over the limit of "
		         "%llu bytes (maxToolOutputBytes).", c->tool, size,
		         (unsigned long long)e->pol.max_tool_output_bytes);
	}
	c->message = strdup(msg);
	send_answer(e, idx, "err", 'm', json_string(msg));
	answered(e, idx, CODEPOD_CALL_DENIED);
	return 0;
}

int codepod_tool_error(struct codepod_exec *e, const char *call_id,
                       const char *message, struct cp_err *err)
{
	size_t idx;
	struct codepod_call *c = waiting_call(e, call_id, &idx, err);
	if (!c)
		return CP_E_NOT_FOUND;
	const char *m = message ? message : "The tool failed.";
	size_t n = strnlen(m, 4096);
	/* Cut never inside a character: json_stringn refuses a cut one, and the
	 * program would read "The tool failed." instead of the first 4 KiB. */
	if (m[n] != '\0')
		while (n > 0 && ((unsigned char)m[n] & 0xC0) == 0x80)
			n--;
	json_t *text = json_stringn(m, n);
	c->message = text ? strdup(json_string_value(text)) : NULL;
	send_answer(e, idx, "err", 'm', text ? text : json_string("The tool failed."));
	answered(e, idx, CODEPOD_CALL_ERROR);
	return 0;
}

int codepod_tool_unreachable(struct codepod_exec *e, const char *call_id, const char *reason,
                             long http_status, struct cp_err *err)
{
	size_t idx;
	struct codepod_call *c = waiting_call(e, call_id, &idx, err);
	if (!c)
		return CP_E_NOT_FOUND;
	char msg[CP_ERR_MSG_MAX];
	snprintf(msg, sizeof msg, "The tool %s could not be reached.", c->tool);
	c->broker_reason = reason ? reason : "unreachable";
	c->http_status = http_status;
	c->message = strdup(msg);
	send_answer(e, idx, "err", 'm', json_string(msg));
	answered(e, idx, CODEPOD_CALL_ERROR);
	return 0;
}

int codepod_tool_suspend(struct codepod_exec *e, const char *call_id, struct cp_err *err)
{
	size_t idx;
	if (!waiting_call(e, call_id, &idx, err))
		return CP_E_NOT_FOUND;
	call_set_state(e, idx, CODEPOD_CALL_PENDING);
	e->npending++;
	e->in_flight--;
	pump(e);
	codepod_approval_poke(e);
	return 0;
}

const char *codepod_tool_call_key(const struct codepod_exec *e, const char *call_id)
{
	char *end = NULL;
	unsigned long long n = call_id ? strtoull(call_id, &end, 10) : 0;
	if (!call_id || !*call_id || *end || n == 0 || n > e->ncalls)
		return NULL;
	return e->calls[n - 1].idem_key;
}

int codepod_calls_any_in_flight(const struct codepod_exec *e)
{
	return e->in_flight > 0;
}

void codepod_calls_cancel_all(struct codepod_exec *e)
{
	uint64_t now = codepod_exec_now_ms();
	for (size_t i = 0; i < e->ncalls; i++) {
		struct codepod_call *c = &e->calls[i];
		if (c->state == CODEPOD_CALL_HOLDING) {
			char id[24];
			snprintf(id, sizeof id, "%zu", i + 1);
			call_set_state(e, i, CODEPOD_CALL_CANCELLED);
			c->t_end_ms = now;
			e->host->cancel_call(e->ud, e, id);
			continue;
		}
		if (c->state == CODEPOD_CALL_PENDING && !e->suspended) {
			call_set_state(e, i, CODEPOD_CALL_CANCELLED);
			c->t_end_ms = now;
			continue;
		}
		if (c->state != CODEPOD_CALL_QUEUED && c->state != CODEPOD_CALL_IN_FLIGHT)
			continue;
		int was_in_flight = c->state == CODEPOD_CALL_IN_FLIGHT;
		call_set_state(e, i, CODEPOD_CALL_CANCELLED);
		c->t_end_ms = now;
		json_decref(c->input);
		c->input = NULL;
		if (was_in_flight) {
			char id[24];
			snprintf(id, sizeof id, "%zu", i + 1);
			e->host->cancel_call(e->ud, e, id);
		}
	}
	e->q_len = 0;
	e->in_flight = 0;
	e->nholding = 0;
	if (!e->suspended)
		e->npending = 0;
}

void codepod_calls_free(struct codepod_exec *e)
{
	for (size_t i = 0; i < e->ncalls; i++) {
		free(e->calls[i].tool);
		json_decref(e->calls[i].input);
		json_decref(e->calls[i].output);
		free(e->calls[i].message);
		free(e->calls[i].idem_key);
	}
	free(e->calls);
	free(e->queue);
}
