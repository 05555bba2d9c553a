/*
 * stdio_serve.c - JSON lines on stdin/stdout for the session protocol.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/lines.h"
#include "broker/session.h"
#include "broker/stdio_serve.h"

struct broker_stdio {
	uv_loop_t *loop;
	struct broker_session *session;
	struct broker_lines *lines;
	size_t max_message;
	unsigned max_executions;
	struct codepod *cp;
	uv_pipe_t in;
	uv_pipe_t out;
	int in_open, out_is_stream, closing_handles;
	void (*done)(void *ud);
	void *ud;
	int finished;
};

struct out_req {
	uv_write_t req;
	char data[];
};

static void on_written(uv_write_t *req, int status)
{
	(void)status; /* a backend that closed stdout gets nothing more */
	free(req);
}

/* Blocking fallback for a stdout that is a regular file (not the network). */
static void write_all(const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t w = write(STDOUT_FILENO, buf, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		buf += w;
		len -= (size_t)w;
	}
}

/* Messages up to this size are encoded on the stack (one dump, no malloc). */
#define SEND_STACK 16384

static void io_send(void *ud, const json_t *msg)
{
	struct broker_stdio *t = ud;
	char stack[SEND_STACK + 1];
	size_t n = json_dumpb(msg, stack, SEND_STACK, JSON_COMPACT);
	if (n == 0)
		return;
	char *text = stack;
	if (n > SEND_STACK) {
		text = malloc(n + 1);
		if (!text)
			return;
		json_dumpb(msg, text, n, JSON_COMPACT);
	}
	text[n] = '\n';
	size_t len = n + 1, off = 0;
	if (!t->out_is_stream) {
		write_all(text, len);
		len = 0;
	} else if (t->out.write_queue_size == 0) {
		/* Most lines fit the pipe at once: no copy, no request (only with
		 * nothing queued, so lines keep their order). */
		uv_buf_t b = uv_buf_init(text, (unsigned)len);
		int w = uv_try_write((uv_stream_t *)&t->out, &b, 1);
		if (w > 0)
			off = (size_t)w;
		else if (w != UV_EAGAIN)
			len = 0; /* the backend closed stdout: it gets nothing more */
	}
	if (off < len) {
		struct out_req *r = malloc(sizeof *r + len - off);
		if (r) {
			memcpy(r->data, text + off, len - off);
			uv_buf_t b = uv_buf_init(r->data, (unsigned)(len - off));
			if (uv_write(&r->req, (uv_stream_t *)&t->out, &b, 1, on_written))
				free(r);
		}
	}
	if (text != stack)
		free(text);
}

static void io_drained(void *ud)
{
	struct broker_stdio *t = ud;
	if (t->finished)
		return;
	t->finished = 1;
	t->done(t->ud);
}

static const struct broker_session_io session_io = { io_send, io_drained, NULL };

static void on_line(void *ud, const char *line, size_t len)
{
	struct broker_stdio *t = ud;
	broker_session_message(t->session, line, len);
}

static void on_oversize(void *ud, unsigned long long len)
{
	struct broker_stdio *t = ud;
	broker_session_oversize(t->session, len, t->max_message);
}

static const struct broker_lines_sink lines_sink = { on_line, on_oversize };

/* The same cap as serve --listen's (60 executions at once were 60
 * Node processes and 2.7 GB). */
static int admit(void *ud, const json_t *execute, const char **code, char *msg)
{
	(void)execute;
	struct broker_stdio *t = ud;
	if (codepod_running(t->cp) < t->max_executions)
		return 0;
	*code = "TOO_MANY_EXECUTIONS";
	snprintf(msg, CP_ERR_MSG_MAX, "%u executions are running, the most this server takes "
	         "(--max-executions); retry when one has ended", t->max_executions);
	return -1;
}

static const struct broker_session_hooks hooks = { admit, NULL };

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	(void)h;
	(void)hint;
	static char slab[65536];
	*buf = uv_buf_init(slab, sizeof slab);
}

static void stop_input(struct broker_stdio *t)
{
	if (!t->in_open)
		return;
	t->in_open = 0;
	uv_read_stop((uv_stream_t *)&t->in);
	broker_lines_finish(t->lines, &lines_sink, t);
	broker_session_close(t->session, 1);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct broker_stdio *t = s->data;
	if (n > 0)
		broker_lines_feed(t->lines, buf->base, (size_t)n, &lines_sink, t);
	else if (n < 0)
		stop_input(t);
}

int broker_stdio_start(uv_loop_t *loop, struct codepod *cp, struct cp_idset *ids,
                       size_t max_message, unsigned max_executions, void (*done)(void *ud),
                       void *ud,
                       struct broker_stdio **out, struct cp_err *err)
{
	uv_handle_type in_type = uv_guess_handle(STDIN_FILENO);
	if (in_type != UV_NAMED_PIPE && in_type != UV_TTY)
		return cp_err_set(err, CP_E_UNSUPPORTED, "stdin must be a pipe or a terminal");
	struct broker_stdio *t = calloc(1, sizeof *t);
	if (!t)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	t->loop = loop;
	t->done = done;
	t->ud = ud;
	t->max_message = max_message;
	t->max_executions = max_executions;
	t->cp = cp;
	t->lines = broker_lines_new(max_message);
	t->session = broker_session_new(cp, ids, NULL, &session_io, t);
	if (!t->lines || !t->session) {
		broker_stdio_free(t);
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	broker_session_set_hooks(t->session, &hooks, t);
	uv_handle_type out_type = uv_guess_handle(STDOUT_FILENO);
	if (out_type == UV_NAMED_PIPE || out_type == UV_TTY) {
		uv_pipe_init(loop, &t->out, 0);
		if (uv_pipe_open(&t->out, STDOUT_FILENO) == 0)
			t->out_is_stream = 1;
		else
			uv_close((uv_handle_t *)&t->out, NULL);
	}
	uv_pipe_init(loop, &t->in, 0);
	t->in.data = t;
	t->out.data = t;
	int rc = uv_pipe_open(&t->in, STDIN_FILENO);
	if (rc == 0)
		rc = uv_read_start((uv_stream_t *)&t->in, on_alloc, on_read);
	if (rc) {
		broker_stdio_free(t);
		return cp_err_set(err, CP_E_IO, "cannot read stdin: %s", uv_strerror(rc));
	}
	t->in_open = 1;
	*out = t;
	return 0;
}

void broker_stdio_shutdown(struct broker_stdio *t)
{
	stop_input(t);
}

static void on_closed(uv_handle_t *h)
{
	struct broker_stdio *t = h->data;
	if (--t->closing_handles == 0)
		free(t);
}

void broker_stdio_free(struct broker_stdio *t)
{
	if (!t)
		return;
	if (t->lines)
		broker_lines_free(t->lines);
	if (t->session)
		broker_session_free(t->session);
	t->lines = NULL;
	t->session = NULL;
	uv_handle_t *hs[] = { (uv_handle_t *)&t->in, t->out_is_stream ? (uv_handle_t *)&t->out : NULL };
	for (size_t i = 0; i < 2; i++) {
		if (hs[i] && hs[i]->loop && !uv_is_closing(hs[i])) {
			hs[i]->data = t;
			t->closing_handles++;
			uv_close(hs[i], on_closed);
		}
	}
	if (t->closing_handles == 0)
		free(t);
}
