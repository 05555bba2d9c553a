/*
 * execcred.h - client-go exec credential plugins (ExecCredential,
 * client.authentication.k8s.io/v1 and v1beta1): the plugin spec from a
 * kubeconfig user, the KUBERNETES_EXEC_INFO input JSON given to the plugin,
 * and the parse of the plugin's stdout into a token or a client
 * certificate with an optional expiry.
 *
 * Running the plugin (fork/exec, pipes, caching until expiry, re-run on 401)
 * belongs elsewhere; this module is pure and thread-safe.
 *
 * Ownership: struct k8s_exec_plugin owns all its strings and arrays (new
 * allocations), freed by k8s_exec_plugin_free(); k8s_exec_plugin_dup()
 * returns a new deep copy. struct k8s_exec_cluster only *borrows* its
 * fields for the duration of k8s_execcred_input(). k8s_execcred_input()
 * returns a *new* string (free()). struct k8s_exec_credential is
 * caller-allocated; k8s_execcred_parse() fills it with new strings released
 * by k8s_exec_credential_release().
 */
#ifndef K8S_EXECCRED_H
#define K8S_EXECCRED_H

#include <stddef.h>
#include <time.h>

#include <jansson.h>

#include "base/err.h"

#define K8S_EXECCRED_V1 "client.authentication.k8s.io/v1"
#define K8S_EXECCRED_V1BETA1 "client.authentication.k8s.io/v1beta1"

/* Plugin output larger than this is refused. */
#define K8S_EXECCRED_MAX_OUTPUT (1024u * 1024u)

enum k8s_exec_interactive {
	K8S_EXEC_INTERACTIVE_UNSET = 0, /* v1beta1 default: IfAvailable */
	K8S_EXEC_INTERACTIVE_NEVER,
	K8S_EXEC_INTERACTIVE_IF_AVAILABLE,
	K8S_EXEC_INTERACTIVE_ALWAYS
};

struct k8s_exec_env {
	char *name;
	char *value;
};

struct k8s_exec_plugin {
	char *api_version;  /* K8S_EXECCRED_V1 or K8S_EXECCRED_V1BETA1 */
	char *command;      /* resolved against the kubeconfig's folder when it
	                       contains a '/', else left for a PATH lookup */
	char **args;        /* n_args strings */
	size_t n_args;
	struct k8s_exec_env *env; /* added to the plugin's environment only */
	size_t n_env;
	enum k8s_exec_interactive interactive_mode;
	int provide_cluster_info;
	char *install_hint; /* or NULL */
};

/* Cluster info for spec.cluster (provideClusterInfo), all borrowed. */
struct k8s_exec_cluster {
	const char *server;
	const char *tls_server_name;  /* or NULL */
	int insecure_skip_tls_verify;
	const unsigned char *ca_data; /* raw PEM bytes (base64-encoded here), or NULL */
	size_t ca_len;
	const char *proxy_url;        /* or NULL */
	int disable_compression;
	const json_t *config;         /* extension client.authentication.k8s.io/exec, or NULL */
};

struct k8s_exec_credential {
	char *token;        /* bearer token, or NULL */
	char *client_cert;  /* PEM text, or NULL */
	char *client_key;   /* PEM text, or NULL */
	int has_expiry;
	time_t expiry;      /* expirationTimestamp, when has_expiry */
};

/**
 * k8s_execcred_input() - the KUBERNETES_EXEC_INFO value for @p.
 * @cluster: used when @p->provide_cluster_info; may be NULL otherwise.
 * @interactive: whether the plugin gets a terminal on stdin (a daemon: 0).
 * @out: receives a new compact JSON string.
 * Returns 0, CP_E_INVALID_REQUEST (unknown apiVersion, cluster info wanted
 * but @cluster NULL, interactiveMode Always without @interactive),
 * CP_E_NOMEM.
 */
int k8s_execcred_input(const struct k8s_exec_plugin *p,
                       const struct k8s_exec_cluster *cluster, int interactive,
                       char **out, struct cp_err *err);

/**
 * k8s_execcred_parse() - parse a plugin's stdout.
 * @api_version: the configured apiVersion; the output must echo it.
 * Returns 0, CP_E_AUTH for an output client-go would reject (wrong
 * kind/apiVersion, no status, neither token nor certificate, only one of
 * clientCertificateData/clientKeyData, bad expirationTimestamp),
 * CP_E_PARSE for non-JSON, CP_E_TOO_BIG, CP_E_NOMEM. @out is zeroed first.
 */
int k8s_execcred_parse(const char *api_version, const void *buf, size_t len,
                       struct k8s_exec_credential *out, struct cp_err *err);

void k8s_exec_credential_release(struct k8s_exec_credential *c);

/**
 * k8s_rfc3339_parse() - "2018-03-05T17:30:20-08:00", "...Z", with optional
 * fractional seconds, into seconds since the epoch (UTC).
 * Returns 0 or CP_E_PARSE.
 */
int k8s_rfc3339_parse(const char *s, time_t *out);

struct k8s_exec_plugin *k8s_exec_plugin_dup(const struct k8s_exec_plugin *p);
void k8s_exec_plugin_free(struct k8s_exec_plugin *p);

#endif
