/* status.c - Kubernetes Status bodies into struct k8s_status + cp_err. */
#include "k8s/api/status.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Copy of a string member, NULL when absent or not a string. */
static int dup_member(const json_t *obj, const char *key, char **out)
{
	const json_t *v = json_object_get(obj, key);
	*out = NULL;
	if (!json_is_string(v))
		return 0;
	*out = strndup(json_string_value(v), json_string_length(v));
	return *out ? 0 : CP_E_NOMEM;
}

int k8s_status_cp_code(int code)
{
	switch (code) {
	case 401: return CP_E_AUTH;
	case 403: return CP_E_DENIED;
	case 404: return CP_E_NOT_FOUND;
	case 409: return CP_E_CONFLICT;
	case 429: case 500: case 502: case 503: case 504: return CP_E_RETRY;
	default: return CP_E_HTTP;
	}
}

void k8s_status_release(struct k8s_status *st)
{
	if (!st)
		return;
	free(st->status);
	free(st->reason);
	free(st->message);
	free(st->name);
	free(st->kind);
	for (size_t i = 0; i < st->n_causes; i++) {
		free(st->causes[i].reason);
		free(st->causes[i].message);
		free(st->causes[i].field);
	}
	free(st->causes);
	memset(st, 0, sizeof *st);
}

static int parse_causes(const json_t *causes, struct k8s_status *st)
{
	size_t n = json_array_size(causes);
	if (n == 0)
		return 0;
	st->causes = calloc(n, sizeof *st->causes);
	if (!st->causes)
		return CP_E_NOMEM;
	for (size_t i = 0; i < n; i++) {
		const json_t *c = json_array_get(causes, i);
		struct k8s_status_cause *sc = &st->causes[st->n_causes++];
		if (!json_is_object(c))
			continue;
		if (dup_member(c, "reason", &sc->reason) ||
		    dup_member(c, "message", &sc->message) ||
		    dup_member(c, "field", &sc->field))
			return CP_E_NOMEM;
	}
	return 0;
}

int k8s_status_from_json(const json_t *obj, int http_code,
                         struct k8s_status *out, struct cp_err *err)
{
	memset(out, 0, sizeof *out);
	out->http_code = http_code;
	out->code = http_code;
	if (!json_is_object(obj))
		return cp_err_set(err, CP_E_PARSE, "Status is not a JSON object");
	const json_t *code = json_object_get(obj, "code");
	if (json_is_integer(code) && json_integer_value(code) > 0 &&
	    json_integer_value(code) < 1000)
		out->code = (int)json_integer_value(code);
	const json_t *details = json_object_get(obj, "details");
	int rc = dup_member(obj, "status", &out->status);
	if (!rc)
		rc = dup_member(obj, "reason", &out->reason);
	if (!rc)
		rc = dup_member(obj, "message", &out->message);
	if (!rc && json_is_object(details)) {
		rc = dup_member(details, "name", &out->name);
		if (!rc)
			rc = dup_member(details, "kind", &out->kind);
		const json_t *ra = json_object_get(details, "retryAfterSeconds");
		if (json_is_integer(ra) && json_integer_value(ra) > 0 &&
		    json_integer_value(ra) < 86400)
			out->retry_after_seconds = (int)json_integer_value(ra);
		if (!rc)
			rc = parse_causes(json_object_get(details, "causes"), out);
	}
	if (rc) {
		k8s_status_release(out);
		return cp_err_set(err, CP_E_NOMEM, "out of memory parsing Status");
	}
	out->is_status = 1;
	return 0;
}

/* A short printable excerpt of a non-Status body for the error text. */
static void excerpt(const unsigned char *b, size_t len, char *dst, size_t cap)
{
	size_t j = 0;
	for (size_t i = 0; i < len && j + 1 < cap && i < 60; i++)
		dst[j++] = isprint(b[i]) ? (char)b[i] : '.';
	dst[j] = '\0';
}

/* A Status must be an object with kind Status, or (exec channel, embedded)
 * at least a "status" string. */
static int looks_like_status(const json_t *root)
{
	const json_t *kind = json_object_get(root, "kind");
	if (json_is_string(kind))
		return strcmp(json_string_value(kind), "Status") == 0;
	return json_is_string(json_object_get(root, "status"));
}

int k8s_status_parse(const void *body, size_t len, int http_code,
                     struct k8s_status *out, struct cp_err *err)
{
	struct k8s_status local;
	struct k8s_status *st = out ? out : &local;
	json_t *root = NULL;
	int rc;

	memset(st, 0, sizeof *st);
	st->http_code = http_code;
	st->code = http_code;
	if (len > 0 && len <= K8S_STATUS_MAX_BODY)
		root = json_loadb(body, len, 0, NULL);
	if (!json_is_object(root) || !looks_like_status(root)) {
		char ex[64];
		excerpt(body, len, ex, sizeof ex);
		rc = k8s_status_cp_code(http_code);
		if (len == 0)
			cp_err_set(err, rc, "HTTP %d with an empty body", http_code);
		else
			cp_err_set(err, rc, "HTTP %d: body is not a Kubernetes Status (%zu bytes: \"%s\")",
			           http_code, len, ex);
		goto done;
	}
	rc = k8s_status_from_json(root, http_code, st, err);
	if (rc)
		goto done;
	rc = k8s_status_cp_code(st->code);
	cp_err_set(err, rc, "HTTP %d %s: %s", st->code,
	           st->reason ? st->reason : "(no reason)",
	           st->message ? st->message : "(no message)");
done:
	json_decref(root);
	if (!out)
		k8s_status_release(&local);
	return rc;
}

/* The exit code travels as a decimal string in causes[reason=ExitCode]. */
static int exit_code_of(const struct k8s_status *st, int *exit_code,
                        struct cp_err *err)
{
	for (size_t i = 0; i < st->n_causes; i++) {
		const struct k8s_status_cause *c = &st->causes[i];
		if (!c->reason || strcmp(c->reason, "ExitCode") != 0)
			continue;
		if (!c->message || !isdigit((unsigned char)c->message[0]))
			break;
		char *end = NULL;
		errno = 0;
		long v = strtol(c->message, &end, 10);
		if (errno || *end || v < 0 || v > 255)
			break;
		*exit_code = (int)v;
		return 0;
	}
	return cp_err_set(err, CP_E_PARSE,
	                  "exec: NonZeroExitCode Status without a valid ExitCode cause");
}

int k8s_status_exec(const void *buf, size_t len, int *exit_code,
                    struct k8s_status *out, struct cp_err *err)
{
	struct k8s_status local;
	struct k8s_status *st = out ? out : &local;
	json_t *root = NULL;
	int rc;

	memset(st, 0, sizeof *st);
	if (len > 0 && len <= K8S_STATUS_MAX_BODY)
		root = json_loadb(buf, len, 0, NULL);
	if (!json_is_object(root)) {
		rc = cp_err_set(err, CP_E_PARSE,
		                "exec: error channel message is not a JSON Status (%zu bytes)", len);
		goto done;
	}
	rc = k8s_status_from_json(root, 0, st, err);
	if (rc)
		goto done;
	if (st->status && strcmp(st->status, "Success") == 0) {
		*exit_code = 0;
	} else if (st->reason && strcmp(st->reason, "NonZeroExitCode") == 0) {
		rc = exit_code_of(st, exit_code, err);
	} else {
		rc = cp_err_set(err, CP_E_HTTP, "exec failed: %s (%d): %s",
		                st->reason ? st->reason : "(no reason)", st->code,
		                st->message ? st->message : "(no message)");
	}
done:
	json_decref(root);
	if (!out)
		k8s_status_release(&local);
	return rc;
}
