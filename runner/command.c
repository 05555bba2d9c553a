/*
 * command.c - the command kind of execution (command.h): its request, its
 * end, its outcome, its stdin.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "runner/command.h"
#include "runner/fileop.h"
#include "base/jsonutil.h"
#include "base/log.h"

#define MAX_ARGS 4096
#define MAX_ENV 1024

static int string_ok(const json_t *v)
{
	return json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v);
}

int codepod_command_init(struct codepod_exec *e, const json_t *request, struct cp_err *err)
{
	const json_t *line = json_object_get(request, "command");
	const json_t *argv = json_object_get(request, "argv");
	if ((line != NULL) == (argv != NULL))
		return cp_err_set(err, CP_E_INVALID_REQUEST, "exactly one of command and argv is required");
	json_t *args = json_array();
	json_t *cmd = json_pack("{s:o}", "argv", args);
	if (!cmd)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	e->cmd = cmd;
	if (line) {
		if (!string_ok(line) || json_string_length(line) == 0)
			return cp_err_set(err, CP_E_INVALID_REQUEST,
			                  "command must be a non-empty string without NUL");
		json_array_append_new(args, json_string("/bin/sh"));
		json_array_append_new(args, json_string("-c"));
		json_array_append_new(args, json_incref((json_t *)line));
	} else {
		if (!json_is_array(argv) || json_array_size(argv) == 0 || json_array_size(argv) > MAX_ARGS)
			return cp_err_set(err, CP_E_INVALID_REQUEST,
			                  "argv must be an array of 1 to %d strings", MAX_ARGS);
		size_t i;
		const json_t *a;
		json_array_foreach(argv, i, a) {
			if (!string_ok(a) || (i == 0 && json_string_length(a) == 0))
				return cp_err_set(err, CP_E_INVALID_REQUEST,
				                  "argv[%zu] must be a string without NUL", i);
			json_array_append_new(args, json_incref((json_t *)a));
		}
	}
	const json_t *cwd = json_object_get(request, "cwd");
	if (cwd) {
		int rc = codepod_path_check("cwd", cwd, 1, err);
		if (rc)
			return rc;
		json_object_set(cmd, "cwd", (json_t *)cwd);
	}
	const json_t *env = json_object_get(request, "env");
	if (env) {
		if (!json_is_object(env) || json_object_size(env) > MAX_ENV)
			return cp_err_set(err, CP_E_INVALID_REQUEST,
			                  "env must be an object of at most %d strings", MAX_ENV);
		const char *k;
		const json_t *v;
		json_object_foreach((json_t *)env, k, v) {
			if (!*k || strchr(k, '=') || !string_ok(v))
				return cp_err_set(err, CP_E_INVALID_REQUEST,
				                  "env: every name must be non-empty without '=' and every "
				                  "value a string without NUL");
			if (strcmp(k, "CODEPOD_TAG") == 0)
				return cp_err_set(err, CP_E_INVALID_REQUEST, "env: CODEPOD_TAG is codepod's own");
		}
		json_object_set(cmd, "env", (json_t *)env);
	}
	const json_t *in = json_object_get(request, "stdin");
	if (in && !json_is_boolean(in))
		return cp_err_set(err, CP_E_INVALID_REQUEST, "stdin must be a boolean");
	e->cmd_stdin = json_is_true(in);
	if (e->cmd_stdin)
		json_object_set_new(cmd, "stdin", json_true());
	char *text = json_dumps(cmd, JSON_COMPACT);
	if (!text)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	e->src = text;
	e->src_len = strlen(text);
	e->cmd_exit = -1;
	return 0;
}

void codepod_command_ended(struct codepod_exec *e, const char *payload, size_t len)
{
	json_t *v = cp_json_load(payload, len, NULL);
	json_t *code = json_object_get(v, "code");
	json_t *sig = json_object_get(v, "signal");
	if (!json_is_integer(code) || json_integer_value(code) < 0 || json_integer_value(code) > 255 ||
	    (sig && !json_is_null(sig) && !json_is_string(sig))) {
		json_decref(v);
		codepod_exec_finish(e, CP_E_INTERNAL, "control channel: malformed process-end frame");
		return;
	}
	e->cmd_exit = (int)json_integer_value(code);
	/* Only names of the form SIGXXX: the frame is not trusted. */
	const char *s = json_string_value(sig);
	if (s && strncmp(s, "SIG", 3) == 0 && strlen(s) < sizeof e->cmd_signal &&
	    strspn(s + 3, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+") == strlen(s + 3))
		snprintf(e->cmd_signal, sizeof e->cmd_signal, "%s", s);
	e->cmd_ahead = json_is_true(json_object_get(v, "ahead"));
	json_decref(v);
	cp_log(CP_LOG_DEBUG, "command.ended", "id", json_string(e->id), "exitCode",
	       json_integer(e->cmd_exit), "shellAhead", json_boolean(e->cmd_ahead), NULL);
	codepod_exec_finish(e, CP_OK, "%s", "");
}

int codepod_exec_stdin(struct codepod_exec *e, const char *b64, size_t len, int eof,
                       struct cp_err *err)
{
	if (!e->cmd || !e->cmd_stdin)
		return cp_err_set(err, CP_E_STATE, "it was not started with stdin: true");
	if (e->cmd_stdin_closed)
		return cp_err_set(err, CP_E_STATE, "its stdin was already closed (eof)");
	if (e->state >= CODEPOD_ST_FINISHING || !e->proc)
		return cp_err_set(err, CP_E_STATE, "it has ended");
	if (len % 4 != 0 || strspn(b64, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") != len)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "data must be base64");
	json_t *m = json_pack("{s:s,s:s%}", "k", "in", "d", b64, len);
	if (m && eof)
		json_object_set_new(m, "eof", json_true());
	if (eof)
		e->cmd_stdin_closed = 1;
	int rc = codepod_exec_send(e, m);
	return rc ? cp_err_set(err, (enum cp_code)rc, "writing to the runner failed") : 0;
}

static json_t *window(const struct codepod_logwin *w)
{
	size_t n = 0;
	char *s = codepod_logwin_take(w, &n);
	json_t *v = s ? json_stringn(s, n) : json_string("");
	free(s);
	return v;
}

json_t *codepod_command_outcome(const struct codepod_exec *e, json_t *usage)
{
	int ok = e->code == CP_OK;
	json_t *o = json_pack("{s:s,s:s,s:o,s:o,s:o,s:b,s:b,s:o}", "executionId", e->id,
	                      "status", ok ? "ok" : "error",
	                      "exitCode", ok && e->cmd_exit >= 0 ? json_integer(e->cmd_exit) : json_null(),
	                      "stdout", window(&e->logs), "stderr", window(&e->errlogs),
	                      "stdoutTruncated", e->logs.truncated,
	                      "stderrTruncated", e->errlogs.truncated, "usage", usage);
	if (!o)
		return NULL;
	if (ok && e->cmd_signal[0])
		json_object_set_new(o, "signal", json_string(e->cmd_signal));
	if (!ok)
		json_object_set_new(o, "error", json_pack("{s:s,s:s}", "code", cp_code_name(e->code),
		                                          "message", e->message));
	return o;
}
