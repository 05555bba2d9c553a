/* kubeconfig_resolve.c - one context of a kubeconfig, or the in-cluster
 * service account, into struct k8s_config (reads the referenced files). */
#include "k8s/api/kubeconfig.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"

int k8s_read_token_file(const char *path, char **token, struct cp_err *err)
{
	size_t len = 0;
	struct cp_err ferr;
	*token = NULL;
	char *buf = cp_read_file(path, 1024 * 1024, &len, &ferr);
	if (!buf) {
		if (err)
			*err = ferr;
		return ferr.code;
	}
	size_t a = 0;
	while (a < len && isspace((unsigned char)buf[a]))
		a++;
	while (len > a && isspace((unsigned char)buf[len - 1]))
		len--;
	if (len == a || memchr(buf + a, '\0', len - a)) {
		free(buf);
		return cp_err_set(err, CP_E_AUTH, "%s: token file is empty or binary", path);
	}
	memmove(buf, buf + a, len - a);
	buf[len - a] = '\0';
	*token = buf;
	return 0;
}

void k8s_config_release(struct k8s_config *cfg)
{
	if (!cfg)
		return;
	free(cfg->server);
	free(cfg->context);
	free(cfg->ns);
	free(cfg->ca_pem);
	free(cfg->cert_pem);
	free(cfg->key_pem);
	free(cfg->token);
	free(cfg->token_file);
	free(cfg->username);
	free(cfg->password);
	k8s_exec_plugin_free(cfg->exec);
	json_decref(cfg->exec_cluster_config);
	free(cfg->tls_server_name);
	free(cfg->proxy_url);
	memset(cfg, 0, sizeof *cfg);
}

void k8s_config_exec_cluster(const struct k8s_config *cfg, struct k8s_exec_cluster *out)
{
	memset(out, 0, sizeof *out);
	out->server = cfg->server;
	out->tls_server_name = cfg->tls_server_name;
	out->insecure_skip_tls_verify = cfg->insecure;
	out->ca_data = cfg->ca_pem;
	out->ca_len = cfg->ca_pem_len;
	out->proxy_url = cfg->proxy_url;
	out->disable_compression = cfg->disable_compression;
	out->config = cfg->exec_cluster_config;
}

static int sdup(const char *s, char **dst)
{
	*dst = NULL;
	if (!s)
		return 0;
	*dst = strdup(s);
	return *dst ? 0 : CP_E_NOMEM;
}

static int mdup(const unsigned char *s, size_t n, unsigned char **dst, size_t *dn)
{
	*dst = malloc(n + 1);
	if (!*dst)
		return CP_E_NOMEM;
	memcpy(*dst, s, n);
	(*dst)[n] = '\0';
	*dn = n;
	return 0;
}

/* PEM bytes: inline data wins over the file ("data overrides path"). */
static int load_pem(const char *origin, const char *entry, const char *what,
                    const unsigned char *data, size_t data_len, const char *file,
                    unsigned char **out, size_t *out_len, struct cp_err *err)
{
	if (data)
		return mdup(data, data_len, out, out_len) ?
		       cp_err_set(err, CP_E_NOMEM, "kubeconfig: out of memory") : 0;
	if (!file || !*file)
		return 0;
	struct cp_err ferr;
	char *buf = cp_read_file(file, K8S_KUBECONFIG_MAX_FILE, out_len, &ferr);
	if (!buf)
		return cp_err_set(err, ferr.code, "kubeconfig %s: %s: %s: %s", origin, entry, what,
		                  ferr.msg);
	*out = (unsigned char *)buf;
	return 0;
}

static int resolve_cluster(const struct k8s_kc_cluster *cl, struct k8s_config *out,
                           struct cp_err *err)
{
	char entry[140];
	snprintf(entry, sizeof entry, "cluster \"%.100s\"", cl->name);
	if (!cl->server || !*cl->server)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "kubeconfig %s: %s: server is missing",
		                  cl->origin, entry);
	if (strncmp(cl->server, "https://", 8) && strncmp(cl->server, "http://", 7))
		return cp_err_set(err, CP_E_INVALID_REQUEST,
		                  "kubeconfig %s: %s: server \"%.80s\" is not an http(s) URL",
		                  cl->origin, entry, cl->server);
	if (cl->insecure && (cl->ca_data || (cl->ca_file && *cl->ca_file)))
		return cp_err_set(err, CP_E_INVALID_REQUEST,
		                  "kubeconfig %s: %s: certificate-authority with insecure-skip-tls-verify "
		                  "is not allowed", cl->origin, entry);
	int rc = load_pem(cl->origin, entry, "certificate-authority", cl->ca_data, cl->ca_len,
	                  cl->ca_file, &out->ca_pem, &out->ca_pem_len, err);
	if (rc)
		return rc;
	out->insecure = cl->insecure;
	out->disable_compression = cl->disable_compression;
	out->exec_cluster_config = json_incref(cl->exec_config);
	if (sdup(cl->server, &out->server) || sdup(cl->tls_server_name, &out->tls_server_name) ||
	    sdup(cl->proxy_url, &out->proxy_url))
		return cp_err_set(err, CP_E_NOMEM, "kubeconfig: out of memory");
	return 0;
}

static int resolve_user(const struct k8s_kc_user *u, struct k8s_config *out, struct cp_err *err)
{
	char entry[140];
	snprintf(entry, sizeof entry, "user \"%.100s\"", u->name);
	int has_cert = u->cert_data || (u->cert_file && *u->cert_file);
	int has_key = u->key_data || (u->key_file && *u->key_file);
	int has_token = (u->token && *u->token) || (u->token_file && *u->token_file);
	int has_basic = (u->username && *u->username) || (u->password && *u->password);
	if (has_cert != has_key)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "kubeconfig %s: %s: %s without %s",
		                  u->origin, entry, has_cert ? "client-certificate" : "client-key",
		                  has_cert ? "client-key" : "client-certificate");
	/* "allow only one authentication technique per user" */
	if (has_token + has_basic + (u->exec != NULL) > 1)
		return cp_err_set(err, CP_E_INVALID_REQUEST,
		                  "kubeconfig %s: %s: more than one of token, basic auth and exec", u->origin, entry);
	int rc = load_pem(u->origin, entry, "client-certificate", u->cert_data, u->cert_len,
	                  u->cert_file, &out->cert_pem, &out->cert_pem_len, err);
	if (!rc)
		rc = load_pem(u->origin, entry, "client-key", u->key_data, u->key_len, u->key_file,
		              &out->key_pem, &out->key_pem_len, err);
	if (rc)
		return rc;
	if (sdup(u->username, &out->username) || sdup(u->password, &out->password))
		return cp_err_set(err, CP_E_NOMEM, "kubeconfig: out of memory");
	if (u->exec && !(out->exec = k8s_exec_plugin_dup(u->exec)))
		return cp_err_set(err, CP_E_NOMEM, "kubeconfig: out of memory");
	/* "token takes precedence over tokenFile" */
	if (u->token && *u->token)
		return sdup(u->token, &out->token) ? cp_err_set(err, CP_E_NOMEM, "out of memory") : 0;
	if (!u->token_file || !*u->token_file)
		return 0;
	struct cp_err ferr;
	rc = k8s_read_token_file(u->token_file, &out->token, &ferr);
	if (rc)
		return cp_err_set(err, rc, "kubeconfig %s: %s: tokenFile: %s", u->origin, entry, ferr.msg);
	return sdup(u->token_file, &out->token_file) ? cp_err_set(err, CP_E_NOMEM, "out of memory") : 0;
}

int k8s_kubeconfig_resolve(const struct k8s_kubeconfig *kc, const char *context,
                           struct k8s_config *out, struct cp_err *err)
{
	memset(out, 0, sizeof *out);
	const char *name = context && *context ? context : kc->current_context;
	if (!name || !*name)
		return cp_err_set(err, CP_E_NOT_FOUND, "kubeconfig: no current-context set and no context given");
	const struct k8s_kc_context *x = k8s_kubeconfig_context(kc, name);
	if (!x)
		return cp_err_set(err, CP_E_NOT_FOUND, "kubeconfig: context \"%.100s\" not found", name);
	int rc = 0;
	const struct k8s_kc_cluster *cl = k8s_kubeconfig_cluster(kc, x->cluster);
	const struct k8s_kc_user *u = k8s_kubeconfig_user(kc, x->user);
	if (!cl) {
		rc = cp_err_set(err, CP_E_NOT_FOUND, "kubeconfig %s: context \"%.100s\": cluster \"%.80s\" not found",
		                x->origin, x->name, x->cluster ? x->cluster : "");
		goto done;
	}
	if (x->user && *x->user && !u) {
		rc = cp_err_set(err, CP_E_NOT_FOUND, "kubeconfig %s: context \"%.100s\": user \"%.80s\" not found",
		                x->origin, x->name, x->user);
		goto done;
	}
	rc = resolve_cluster(cl, out, err);
	if (!rc && u)
		rc = resolve_user(u, out, err);
	if (!rc && (sdup(x->name, &out->context) || sdup(x->ns && *x->ns ? x->ns : "default", &out->ns)))
		rc = cp_err_set(err, CP_E_NOMEM, "kubeconfig: out of memory");
done:
	if (rc)
		k8s_config_release(out);
	return rc;
}

/* net.JoinHostPort: bracket an IPv6 literal. */
static int join_host_port(const char *host, const char *port, char **out)
{
	int v6 = strchr(host, ':') != NULL && host[0] != '[';
	return asprintf(out, "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port) < 0 ?
	       CP_E_NOMEM : 0;
}

int k8s_config_in_cluster(const char *root, struct k8s_config *out, struct cp_err *err)
{
	memset(out, 0, sizeof *out);
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	if (!host || !*host || !port || !*port)
		return cp_err_set(err, CP_E_NOT_FOUND,
		                  "in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
	for (const char *p = port; *p; p++)
		if (!isdigit((unsigned char)*p) || p - port > 5)
			return cp_err_set(err, CP_E_INVALID_REQUEST, "in-cluster: KUBERNETES_SERVICE_PORT \"%.20s\" is not a port", port);
	for (const char *p = host; *p; p++)
		if (isspace((unsigned char)*p) || *p == '/' || *p == '@')
			return cp_err_set(err, CP_E_INVALID_REQUEST, "in-cluster: KUBERNETES_SERVICE_HOST \"%.60s\" is not a host", host);
	char *dir = NULL, *path = NULL, *nsbuf = NULL, *ca = NULL;
	int rc = 0;
	struct cp_err ferr;
	if (asprintf(&dir, "%s%s", root ? root : "", K8S_SA_DIR) < 0) {
		dir = NULL;
		rc = CP_E_NOMEM;
		goto nomem;
	}
	if (join_host_port(host, port, &out->server) || asprintf(&out->token_file, "%s/token", dir) < 0) {
		out->token_file = NULL;
		rc = CP_E_NOMEM;
		goto nomem;
	}
	rc = k8s_read_token_file(out->token_file, &out->token, &ferr);
	if (rc) {
		cp_err_set(err, rc, "in-cluster: service account token: %s", ferr.msg);
		goto done;
	}
	if (asprintf(&path, "%s/ca.crt", dir) < 0) {
		path = NULL;
		rc = CP_E_NOMEM;
		goto nomem;
	}
	ca = cp_read_file(path, K8S_KUBECONFIG_MAX_FILE, &out->ca_pem_len, &ferr);
	out->ca_pem = (unsigned char *)ca;
	rc = ca ? 0 : ferr.code;
	if (rc) {
		cp_err_set(err, rc, "in-cluster: service account CA: %s", ferr.msg);
		goto done;
	}
	/* Namespace: POD_NAMESPACE, then the namespace file, then "default". */
	const char *ns = getenv("POD_NAMESPACE");
	if (!ns || !*ns) {
		free(path);
		if (asprintf(&path, "%s/namespace", dir) < 0) {
			path = NULL;
			rc = CP_E_NOMEM;
			goto nomem;
		}
		if (k8s_read_token_file(path, &nsbuf, NULL) == 0)
			ns = nsbuf;
	}
	if (sdup(ns && *ns ? ns : "default", &out->ns))
		rc = CP_E_NOMEM;
nomem:
	if (rc == CP_E_NOMEM)
		cp_err_set(err, rc, "in-cluster: out of memory");
done:
	free(dir);
	free(path);
	free(nsbuf);
	if (rc)
		k8s_config_release(out);
	return rc;
}
