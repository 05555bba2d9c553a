/* execcred.c - ExecCredential input and output (client-go exec plugins). */
#include "k8s/api/execcred.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "k8s/api/b64.h"

static int known_version(const char *v)
{
	return v && (strcmp(v, K8S_EXECCRED_V1) == 0 || strcmp(v, K8S_EXECCRED_V1BETA1) == 0);
}

/* spec.cluster as client-go writes it: omitempty on every field but server. */
static json_t *cluster_json(const struct k8s_exec_cluster *c)
{
	json_t *o = json_object();
	if (!o || json_object_set_new(o, "server", json_string(c->server ? c->server : "")))
		goto fail;
	if (c->tls_server_name && *c->tls_server_name &&
	    json_object_set_new(o, "tls-server-name", json_string(c->tls_server_name)))
		goto fail;
	if (c->insecure_skip_tls_verify &&
	    json_object_set_new(o, "insecure-skip-tls-verify", json_true()))
		goto fail;
	if (c->ca_data && c->ca_len) {
		char *b64 = NULL;
		if (k8s_b64_encode(c->ca_data, c->ca_len, &b64, NULL, NULL))
			goto fail;
		int rc = json_object_set_new(o, "certificate-authority-data", json_string(b64));
		free(b64);
		if (rc)
			goto fail;
	}
	if (c->proxy_url && *c->proxy_url &&
	    json_object_set_new(o, "proxy-url", json_string(c->proxy_url)))
		goto fail;
	if (c->disable_compression &&
	    json_object_set_new(o, "disable-compression", json_true()))
		goto fail;
	if (c->config && json_object_set_new(o, "config", json_deep_copy(c->config)))
		goto fail;
	return o;
fail:
	json_decref(o);
	return NULL;
}

int k8s_execcred_input(const struct k8s_exec_plugin *p,
                       const struct k8s_exec_cluster *cluster, int interactive,
                       char **out, struct cp_err *err)
{
	*out = NULL;
	if (!known_version(p->api_version))
		return cp_err_set(err, CP_E_INVALID_REQUEST, "exec plugin: unsupported apiVersion \"%s\"",
		                  p->api_version ? p->api_version : "");
	if (p->interactive_mode == K8S_EXEC_INTERACTIVE_ALWAYS && !interactive)
		return cp_err_set(err, CP_E_INVALID_REQUEST,
		                  "exec plugin %s: interactiveMode Always needs a terminal", p->command);
	if (p->provide_cluster_info && !cluster)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "exec plugin: cluster info missing");
	int inter = interactive && p->interactive_mode != K8S_EXEC_INTERACTIVE_NEVER;
	json_t *spec = json_pack("{s:b}", "interactive", inter);
	json_t *root = json_pack("{s:s, s:s, s:o}", "kind", "ExecCredential",
	                         "apiVersion", p->api_version, "spec", spec);
	if (root && p->provide_cluster_info) {
		json_t *c = cluster_json(cluster);
		if (!c || json_object_set_new(spec, "cluster", c)) {
			json_decref(root);
			root = NULL;
		}
	}
	if (root)
		*out = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	if (!*out)
		return cp_err_set(err, CP_E_NOMEM, "exec plugin: out of memory");
	return 0;
}

void k8s_exec_credential_release(struct k8s_exec_credential *c)
{
	if (!c)
		return;
	free(c->token);
	free(c->client_cert);
	free(c->client_key);
	memset(c, 0, sizeof *c);
}

static int digits(const char **s, int n, int *out)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		if (!isdigit((unsigned char)(*s)[i]))
			return -1;
		v = v * 10 + ((*s)[i] - '0');
	}
	*s += n;
	*out = v;
	return 0;
}

static int expect(const char **s, char c)
{
	if (**s != c && !(c == 'T' && (**s == 't' || **s == ' ')))
		return -1;
	(*s)++;
	return 0;
}

int k8s_rfc3339_parse(const char *s, time_t *out)
{
	int y, mo, d, h, mi, sec, oh = 0, om = 0, sign = 0;
	if (digits(&s, 4, &y) || expect(&s, '-') || digits(&s, 2, &mo) || expect(&s, '-') ||
	    digits(&s, 2, &d) || expect(&s, 'T') || digits(&s, 2, &h) || expect(&s, ':') ||
	    digits(&s, 2, &mi) || expect(&s, ':') || digits(&s, 2, &sec))
		return CP_E_PARSE;
	if (*s == '.') {
		s++;
		if (!isdigit((unsigned char)*s))
			return CP_E_PARSE;
		while (isdigit((unsigned char)*s))
			s++;
	}
	if (*s == 'Z' || *s == 'z') {
		s++;
	} else if (*s == '+' || *s == '-') {
		sign = *s == '-' ? -1 : 1;
		s++;
		if (digits(&s, 2, &oh) || expect(&s, ':') || digits(&s, 2, &om))
			return CP_E_PARSE;
	} else {
		return CP_E_PARSE;
	}
	if (*s || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60 ||
	    oh > 23 || om > 59)
		return CP_E_PARSE;
	struct tm tm = {0};
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	time_t t = timegm(&tm);
	if (t == (time_t)-1 && !(y == 1969 && mo == 12 && d == 31))
		return CP_E_PARSE;
	*out = t - sign * (time_t)(oh * 3600 + om * 60);
	return 0;
}

static int dup_str(const json_t *o, const char *key, char **dst)
{
	const json_t *v = json_object_get(o, key);
	if (!json_is_string(v) || json_string_length(v) == 0)
		return 0;
	*dst = strndup(json_string_value(v), json_string_length(v));
	return *dst ? 0 : CP_E_NOMEM;
}

int k8s_execcred_parse(const char *api_version, const void *buf, size_t len,
                       struct k8s_exec_credential *out, struct cp_err *err)
{
	memset(out, 0, sizeof *out);
	if (len > K8S_EXECCRED_MAX_OUTPUT)
		return cp_err_set(err, CP_E_TOO_BIG, "exec plugin: output over %u bytes",
		                  K8S_EXECCRED_MAX_OUTPUT);
	json_error_t jerr;
	json_t *root = json_loadb(buf, len, 0, &jerr);
	int rc = 0;
	if (!json_is_object(root)) {
		rc = cp_err_set(err, CP_E_PARSE, "exec plugin: output is not a JSON object: %s",
		                root ? "wrong type" : jerr.text);
		goto done;
	}
	const char *kind = json_string_value(json_object_get(root, "kind"));
	const char *ver = json_string_value(json_object_get(root, "apiVersion"));
	if (!kind || strcmp(kind, "ExecCredential") != 0) {
		rc = cp_err_set(err, CP_E_AUTH, "exec plugin: output kind is \"%s\", not ExecCredential",
		                kind ? kind : "");
		goto done;
	}
	if (!ver || !api_version || strcmp(ver, api_version) != 0) {
		rc = cp_err_set(err, CP_E_AUTH, "exec plugin: output apiVersion \"%s\" does not match \"%s\"",
		                ver ? ver : "", api_version ? api_version : "");
		goto done;
	}
	const json_t *st = json_object_get(root, "status");
	if (!json_is_object(st)) {
		rc = cp_err_set(err, CP_E_AUTH, "exec plugin: output has no status");
		goto done;
	}
	if (dup_str(st, "token", &out->token) || dup_str(st, "clientCertificateData", &out->client_cert) ||
	    dup_str(st, "clientKeyData", &out->client_key)) {
		rc = cp_err_set(err, CP_E_NOMEM, "exec plugin: out of memory");
		goto done;
	}
	if (!out->client_cert != !out->client_key) {
		rc = cp_err_set(err, CP_E_AUTH, "exec plugin: clientCertificateData and clientKeyData "
		                "must both be set or both be empty");
		goto done;
	}
	if (!out->token && !out->client_cert) {
		rc = cp_err_set(err, CP_E_AUTH, "exec plugin: status has neither token nor client certificate");
		goto done;
	}
	const json_t *exp = json_object_get(st, "expirationTimestamp");
	if (exp && !json_is_null(exp)) {
		if (!json_is_string(exp) || k8s_rfc3339_parse(json_string_value(exp), &out->expiry)) {
			rc = cp_err_set(err, CP_E_AUTH, "exec plugin: expirationTimestamp is not RFC 3339");
			goto done;
		}
		out->has_expiry = 1;
	}
done:
	json_decref(root);
	if (rc)
		k8s_exec_credential_release(out);
	return rc;
}

void k8s_exec_plugin_free(struct k8s_exec_plugin *p)
{
	if (!p)
		return;
	free(p->api_version);
	free(p->command);
	for (size_t i = 0; i < p->n_args; i++)
		free(p->args[i]);
	free(p->args);
	for (size_t i = 0; i < p->n_env; i++) {
		free(p->env[i].name);
		free(p->env[i].value);
	}
	free(p->env);
	free(p->install_hint);
	free(p);
}

static int sdup(const char *s, char **dst)
{
	*dst = NULL;
	if (!s)
		return 0;
	*dst = strdup(s);
	return *dst ? 0 : -1;
}

struct k8s_exec_plugin *k8s_exec_plugin_dup(const struct k8s_exec_plugin *p)
{
	struct k8s_exec_plugin *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->interactive_mode = p->interactive_mode;
	c->provide_cluster_info = p->provide_cluster_info;
	if (sdup(p->api_version, &c->api_version) || sdup(p->command, &c->command) ||
	    sdup(p->install_hint, &c->install_hint))
		goto fail;
	if (p->n_args) {
		c->args = calloc(p->n_args, sizeof *c->args);
		if (!c->args)
			goto fail;
		for (; c->n_args < p->n_args; c->n_args++)
			if (sdup(p->args[c->n_args], &c->args[c->n_args]))
				goto fail;
	}
	if (p->n_env) {
		c->env = calloc(p->n_env, sizeof *c->env);
		if (!c->env)
			goto fail;
		for (; c->n_env < p->n_env; c->n_env++)
			if (sdup(p->env[c->n_env].name, &c->env[c->n_env].name) ||
			    sdup(p->env[c->n_env].value, &c->env[c->n_env].value)) {
				c->n_env++;
				goto fail;
			}
	}
	return c;
fail:
	if (c->args && c->n_args < p->n_args)
		c->n_args++; /* free the slot that may hold a partial copy */
	k8s_exec_plugin_free(c);
	return NULL;
}
