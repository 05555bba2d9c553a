/*
 * cmdtool.c - tools implemented by commands (codepod run --tools).
 */
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/fileio.h"
#include "broker/cmdtool.h"
#include "runner/logwin.h"
#include "broker/tool_answer.h"

#define MAX_ARGS 32
#define CMDTOOLS_FILE_MAX (16u << 20) /* TOOLS.json: 1000 tools with their schemas */

struct tool {
	char *name;
	char **argv; /* NULL-terminated */
};

struct run;

struct broker_cmdtools {
	uv_loop_t *loop;
	struct tool *tools;
	size_t ntools;
	size_t max_output;
	struct run *runs; /* calls in progress */
	void (*on_done)(void *ud, const json_t *outcome);
	void *ud;
};

/* One running tool command. */
struct run {
	struct run *next;
	struct broker_cmdtools *set;
	struct codepod_exec *exec;
	char call[24];
	uv_process_t proc;
	uv_pipe_t in, out, err;
	char *input;
	struct cp_buf obuf; /* its stdout, max_output at most */
	struct codepod_logwin etail; /* the last bytes of its stderr */
	int overflow, cancelled, exited, out_eof, err_eof, status, handles;
	uv_write_t wreq;
};

static void free_tools(struct broker_cmdtools *set)
{
	for (size_t i = 0; i < set->ntools; i++) {
		free(set->tools[i].name);
		for (size_t j = 0; set->tools[i].argv && set->tools[i].argv[j]; j++)
			free(set->tools[i].argv[j]);
		free(set->tools[i].argv);
	}
	free(set->tools);
}

void broker_cmdtools_free(struct broker_cmdtools *set)
{
	if (!set)
		return;
	free_tools(set);
	free(set);
}

static int load_tool(struct tool *t, const json_t *j, const char *dir, size_t i,
                     struct cp_err *err)
{
	const char *name = json_string_value(json_object_get(j, "name"));
	const json_t *cmd = json_object_get(j, "command");
	if (!name)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "tools[%zu]: missing name", i);
	if (!json_is_array(cmd) || json_array_size(cmd) == 0 || json_array_size(cmd) >= MAX_ARGS)
		return cp_err_set(err, CP_E_INVALID_REQUEST,
		                  "tool %s: command must be an array of 1 to %d strings", name, MAX_ARGS - 1);
	t->name = strdup(name);
	t->argv = calloc(json_array_size(cmd) + 1, sizeof *t->argv);
	if (!t->name || !t->argv)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	size_t k;
	const json_t *a;
	json_array_foreach(cmd, k, a) {
		const char *s = json_string_value(a);
		if (!s)
			return cp_err_set(err, CP_E_INVALID_REQUEST, "tool %s: command[%zu] is not a string", name, k);
		char path[PATH_MAX];
		/* A relative path with a slash is the tools file's neighbour. A
		 * path too long for the system is refused: cut, it would name
		 * another file. */
		int n = s[0] != '/' && strchr(s, '/') ? snprintf(path, sizeof path, "%s/%s", dir, s)
		                                      : snprintf(path, sizeof path, "%s", s);
		if (n < 0 || (size_t)n >= sizeof path)
			return cp_err_set(err, CP_E_INVALID_REQUEST,
			                  "tool %s: command[%zu] is longer than %d bytes", name, k, PATH_MAX - 1);
		t->argv[k] = strdup(path);
		if (!t->argv[k])
			return cp_err_set(err, CP_E_NOMEM, "out of memory");
	}
	return 0;
}

int broker_cmdtools_parse(const char *buf, size_t len, const char *name, const char *dir,
                          struct broker_cmdtools **out, json_t **decls, struct cp_err *err)
{
	json_error_t je;
	/* Duplicate keys refused, as `codepod declarations` reads the same file. */
	json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return cp_err_set(err, CP_E_PARSE, "%s:%d: %s", name, je.line, je.text);
	const json_t *tools = json_is_array(root) ? root : json_object_get(root, "tools");
	if (!json_is_array(tools)) {
		json_decref(root);
		return cp_err_set(err, CP_E_INVALID_REQUEST, "%s: expected {\"tools\": [...]}", name);
	}
	struct broker_cmdtools *set = calloc(1, sizeof *set);
	json_t *d = json_array();
	int rc = 0;
	if (!set || !d) {
		rc = cp_err_set(err, CP_E_NOMEM, "out of memory");
		goto done;
	}
	set->max_output = 16u << 20;
	set->tools = calloc(json_array_size(tools) + 1, sizeof *set->tools);
	if (!set->tools) {
		rc = cp_err_set(err, CP_E_NOMEM, "out of memory");
		goto done;
	}
	size_t i;
	const json_t *t;
	json_array_foreach(tools, i, t) {
		set->ntools++;
		rc = load_tool(&set->tools[i], t, dir, i, err);
		if (rc)
			goto done;
		json_t *decl = json_deep_copy(t);
		if (!decl || json_object_del(decl, "command") || json_array_append_new(d, decl)) {
			rc = cp_err_set(err, CP_E_NOMEM, "out of memory");
			goto done;
		}
	}
done:
	json_decref(root);
	if (rc) {
		broker_cmdtools_free(set);
		json_decref(d);
		return rc;
	}
	*out = set;
	*decls = d;
	return 0;
}

int broker_cmdtools_load(uv_loop_t *loop, const char *path, struct broker_cmdtools **out,
                         json_t **decls, struct cp_err *err)
{
	struct cp_err local;
	struct cp_err *e = err ? err : &local;
	size_t len = 0;
	char *text = NULL, *pathcopy = NULL;
	int rc;
	if (!path)
		rc = broker_cmdtools_parse("[]", 2, ".", ".", out, decls, e);
	else if (!(text = cp_read_file(path, CMDTOOLS_FILE_MAX, &len, e)))
		rc = e->code;
	else if (!(pathcopy = strdup(path)))
		rc = cp_err_set(e, CP_E_NOMEM, "out of memory");
	else
		rc = broker_cmdtools_parse(text, len, path, dirname(pathcopy), out, decls, e);
	free(text);
	free(pathcopy);
	if (rc == 0)
		(*out)->loop = loop;
	return rc;
}

void broker_cmdtools_set_max_output(struct broker_cmdtools *set, size_t max)
{
	set->max_output = max;
}

void broker_cmdtools_bind(struct broker_cmdtools *set,
                          void (*on_done)(void *ud, const json_t *outcome), void *ud)
{
	set->on_done = on_done;
	set->ud = ud;
}

static void unlink_run(struct run *r)
{
	for (struct run **pp = &r->set->runs; *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			return;
		}
	}
}

static void on_run_closed(uv_handle_t *h)
{
	struct run *r = h->data;
	if (--r->handles == 0) {
		codepod_logwin_free(&r->etail);
		free(r->input);
		cp_buf_free(&r->obuf);
		free(r);
	}
}

static void finish_run(struct run *r)
{
	if (!r->exited || !r->out_eof || !r->err_eof)
		return;
	unlink_run(r);
	if (!r->cancelled) {
		char msg[300];
		json_t *v = NULL;
		size_t elen = 0;
		char *etail = codepod_logwin_take(&r->etail, &elen);
		if (broker_cmdtool_answer(r->status, r->overflow, r->set->max_output,
		                          cp_buf_ptr(&r->obuf), cp_buf_len(&r->obuf),
		                          etail, elen, &v, msg, sizeof msg) == 0)
			codepod_tool_result(r->exec, r->call, v, NULL);
		else
			codepod_tool_error(r->exec, r->call, msg, NULL);
		free(etail);
		json_decref(v);
	}
	uv_close((uv_handle_t *)&r->proc, on_run_closed);
	uv_close((uv_handle_t *)&r->in, on_run_closed);
	uv_close((uv_handle_t *)&r->out, on_run_closed);
	uv_close((uv_handle_t *)&r->err, on_run_closed);
}

static void on_run_exit(uv_process_t *p, int64_t status, int sig)
{
	struct run *r = p->data;
	r->exited = 1;
	r->status = sig ? 128 + sig : (int)status;
	finish_run(r);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	(void)h;
	(void)hint;
	static char slab[65536];
	*buf = uv_buf_init(slab, sizeof slab);
}

static void on_run_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct run *r = s->data;
	if (n < 0) {
		uv_read_stop(s);
		if (s == (uv_stream_t *)&r->out)
			r->out_eof = 1;
		else
			r->err_eof = 1;
		finish_run(r);
		return;
	}
	size_t len = (size_t)n;
	if (s == (uv_stream_t *)&r->err) {
		codepod_logwin_append(&r->etail, buf->base, len);
		return;
	}
	/* Out of memory counts as an overflow: the output cannot be held. */
	if (!r->overflow && cp_buf_add(&r->obuf, buf->base, len, NULL))
		r->overflow = 1;
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
	(void)status;
	free(req);
}

/* The input is written; closing the write side gives the command EOF. */
static void on_input_written(uv_write_t *w, int status)
{
	(void)status;
	struct run *r = w->data;
	uv_shutdown_t *sreq = malloc(sizeof *sreq);
	if (sreq && uv_shutdown(sreq, (uv_stream_t *)&r->in, on_shutdown))
		free(sreq);
}

static const struct tool *find(const struct broker_cmdtools *set, const char *name)
{
	for (size_t i = 0; i < set->ntools; i++)
		if (strcmp(set->tools[i].name, name) == 0)
			return &set->tools[i];
	return NULL;
}

const char *const *broker_cmdtools_command(const struct broker_cmdtools *set, const char *name)
{
	const struct tool *t = find(set, name);
	return t ? (const char *const *)t->argv : NULL;
}

static void on_tool_call(void *ud, struct codepod_exec *e, const char *call,
                         const char *tool, const json_t *input)
{
	struct broker_cmdtools *set = ud;
	const struct tool *t = find(set, tool);
	struct run *r = calloc(1, sizeof *r);
	if (!t || !r) {
		free(r);
		codepod_tool_error(e, call, "The tool has no command.", NULL);
		return;
	}
	r->set = set;
	r->exec = e;
	codepod_logwin_init(&r->etail, 512, NULL);
	cp_buf_init(&r->obuf, set->max_output);
	snprintf(r->call, sizeof r->call, "%s", call);
	r->input = json_dumps(input, JSON_COMPACT | JSON_ENCODE_ANY);
	uv_pipe_init(set->loop, &r->in, 0);
	uv_pipe_init(set->loop, &r->out, 0);
	uv_pipe_init(set->loop, &r->err, 0);
	r->proc.data = r->in.data = r->out.data = r->err.data = r->wreq.data = r;
	uv_stdio_container_t stdio[3] = {
		{ .flags = UV_CREATE_PIPE | UV_READABLE_PIPE, .data.stream = (uv_stream_t *)&r->in },
		{ .flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&r->out },
		{ .flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&r->err },
	};
	uv_process_options_t opt = { .exit_cb = on_run_exit, .file = t->argv[0], .args = t->argv,
	                             .stdio_count = 3, .stdio = stdio };
	r->handles = 4;
	int rc = r->input ? uv_spawn(set->loop, &r->proc, &opt) : UV_ENOMEM;
	if (rc) {
		char msg[200];
		snprintf(msg, sizeof msg, "The tool command could not start: %s", uv_strerror(rc));
		codepod_tool_error(e, call, msg, NULL);
		uv_close((uv_handle_t *)&r->proc, on_run_closed);
		uv_close((uv_handle_t *)&r->in, on_run_closed);
		uv_close((uv_handle_t *)&r->out, on_run_closed);
		uv_close((uv_handle_t *)&r->err, on_run_closed);
		return;
	}
	r->next = set->runs;
	set->runs = r;
	uv_read_start((uv_stream_t *)&r->out, on_alloc, on_run_read);
	uv_read_start((uv_stream_t *)&r->err, on_alloc, on_run_read);
	uv_buf_t b = uv_buf_init(r->input, (unsigned)strlen(r->input));
	uv_write(&r->wreq, (uv_stream_t *)&r->in, &b, 1, on_input_written);
}

static void on_cancel_call(void *ud, struct codepod_exec *e, const char *call)
{
	struct broker_cmdtools *set = ud;
	for (struct run *r = set->runs; r; r = r->next) {
		if (r->exec == e && strcmp(r->call, call) == 0) {
			r->cancelled = 1;
			uv_process_kill(&r->proc, SIGKILL);
		}
	}
}

static void on_done(void *ud, struct codepod_exec *e, const json_t *outcome)
{
	(void)e;
	struct broker_cmdtools *set = ud;
	set->on_done(set->ud, outcome);
}

const struct codepod_host broker_cmdtools_host = {
	.tool_call = on_tool_call, .cancel_call = on_cancel_call, .done = on_done,
};
