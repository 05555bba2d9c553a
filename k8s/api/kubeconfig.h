/*
 * kubeconfig.h - kubeconfig files (YAML, via libyaml) and in-cluster
 * service-account config, resolved to one struct k8s_config.
 *
 * Loading follows client-go: every file of a KUBECONFIG list is merged in
 * order and "the first file to set a particular value or map key wins":
 * a cluster, user or context defined by an earlier file is kept whole and
 * later definitions of the same name are discarded; the first non-empty
 * current-context wins. Missing files of a list are ignored; a file that
 * does not parse is an error. Paths (certificate-authority,
 * client-certificate, client-key, tokenFile, and an exec command that
 * contains a '/') are resolved against the folder of the file that named
 * them. Files are refused over K8S_KUBECONFIG_MAX_FILE. Errors name the
 * file, the entry and the problem:
 *   kubeconfig /x/y: user "bob": client-key-data is not valid base64
 *
 * Pure apart from reading the named files; no sockets, no loop. Reads are
 * blocking and meant for start-up (and token re-reads).
 *
 * Ownership: k8s_kubeconfig_new() returns a new object freed with
 * k8s_kubeconfig_free(); its entries are owned by it and *borrowed* by
 * readers until it is freed. Loaded buffers are borrowed for the call.
 * struct k8s_config is caller-allocated; k8s_kubeconfig_resolve() and
 * k8s_config_in_cluster() fill it with new allocations (independent of the
 * kubeconfig object, which may be freed afterwards), all released by
 * k8s_config_release(); its exec_cluster_config is a *new* reference.
 * k8s_config_exec_cluster() fills a struct whose pointers *borrow* from the
 * config. k8s_read_token_file() returns a new buffer (free()); whole files
 * are read with cp_read_file() (base/fileio.h).
 */
#ifndef K8S_KUBECONFIG_H
#define K8S_KUBECONFIG_H

#include <stddef.h>

#include <jansson.h>

#include "base/err.h"
#include "k8s/api/execcred.h"

#define K8S_KUBECONFIG_MAX_FILE (4u * 1024u * 1024u)
#define K8S_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

struct k8s_kc_cluster {
	char *name;
	const char *origin;     /* file that defined it (borrowed from the kubeconfig) */
	char *server;
	char *ca_file;          /* resolved path, or NULL */
	unsigned char *ca_data; /* decoded certificate-authority-data, or NULL */
	size_t ca_len;
	int insecure;
	int disable_compression;
	char *tls_server_name;
	char *proxy_url;
	json_t *exec_config;    /* extensions[client.authentication.k8s.io/exec] */
};

struct k8s_kc_user {
	char *name;
	const char *origin;
	char *cert_file;
	unsigned char *cert_data;
	size_t cert_len;
	char *key_file;
	unsigned char *key_data;
	size_t key_len;
	char *token;
	char *token_file;
	char *username;
	char *password;
	struct k8s_exec_plugin *exec;
};

struct k8s_kc_context {
	char *name;
	const char *origin;
	char *cluster;
	char *user;
	char *ns;
};

struct k8s_kubeconfig {
	struct k8s_kc_cluster **clusters;
	size_t n_clusters;
	struct k8s_kc_user **users;
	size_t n_users;
	struct k8s_kc_context **contexts;
	size_t n_contexts;
	char *current_context;
	char **files;           /* origins, owned */
	size_t n_files;
	/* Room of the four arrays (cp_array_grow), kubeconfig.c's own. */
	size_t cap_clusters, cap_users, cap_contexts, cap_files;
};

/* Everything a client needs to reach one API server. */
struct k8s_config {
	char *server;           /* "https://host[:port]" */
	char *context;          /* the context used, or NULL (in-cluster) */
	char *ns;               /* never NULL after success ("default") */
	unsigned char *ca_pem;  /* NULL: system roots */
	size_t ca_pem_len;
	unsigned char *cert_pem;
	size_t cert_pem_len;
	unsigned char *key_pem;
	size_t key_pem_len;
	char *token;            /* token, or the content of token_file */
	char *token_file;       /* re-read it (every minute, on 401), or NULL */
	char *username, *password;
	struct k8s_exec_plugin *exec; /* or NULL */
	json_t *exec_cluster_config;  /* new reference or NULL */
	char *tls_server_name;
	char *proxy_url;
	int insecure;
	int disable_compression;
};

struct k8s_kubeconfig *k8s_kubeconfig_new(void);
void k8s_kubeconfig_free(struct k8s_kubeconfig *kc);

/**
 * k8s_kubeconfig_load_buffer() - parse one kubeconfig and merge it in.
 * @origin: its path, for relative paths and error texts (NULL: "<buffer>",
 *          relative paths kept as written).
 * Returns 0, CP_E_PARSE (bad YAML, wrong shapes, bad base64, duplicate
 * names in one file), CP_E_TOO_BIG, CP_E_NOMEM. On error @kc is unchanged.
 */
int k8s_kubeconfig_load_buffer(struct k8s_kubeconfig *kc, const char *data,
                               size_t len, const char *origin, struct cp_err *err);

/* Load one file and merge it in. A missing file is CP_E_NOT_FOUND. */
int k8s_kubeconfig_load_file(struct k8s_kubeconfig *kc, const char *path,
                             struct cp_err *err);

/**
 * k8s_kubeconfig_load_list() - a KUBECONFIG value: ':'-separated paths,
 * empty entries and repeats skipped, missing files ignored.
 * Returns 0 or the first error of a file that exists.
 */
int k8s_kubeconfig_load_list(struct k8s_kubeconfig *kc, const char *list,
                             struct cp_err *err);

/* Lookups by name; borrowed results, NULL when absent. */
const struct k8s_kc_cluster *k8s_kubeconfig_cluster(const struct k8s_kubeconfig *kc, const char *name);
const struct k8s_kc_user *k8s_kubeconfig_user(const struct k8s_kubeconfig *kc, const char *name);
const struct k8s_kc_context *k8s_kubeconfig_context(const struct k8s_kubeconfig *kc, const char *name);

/**
 * k8s_kubeconfig_resolve() - the config of one context.
 * @context: the --context override, or NULL for current-context.
 * Reads the referenced CA, certificate, key and token files.
 * Returns 0, CP_E_NOT_FOUND (no such context/cluster/user, unreadable file),
 * CP_E_INVALID_REQUEST (no server, conflicting auth, cert without key),
 * CP_E_TOO_BIG, CP_E_NOMEM. @out is zeroed first.
 */
int k8s_kubeconfig_resolve(const struct k8s_kubeconfig *kc, const char *context,
                           struct k8s_config *out, struct cp_err *err);

/**
 * k8s_config_in_cluster() - config from KUBERNETES_SERVICE_HOST/PORT (host
 * bracketed when IPv6) and the service-account files under
 * @root K8S_SA_DIR (@root NULL or "" for the real one): token (required),
 * ca.crt (required), namespace (POD_NAMESPACE env first, then the file,
 * then "default"). Returns 0, CP_E_NOT_FOUND, CP_E_INVALID_REQUEST,
 * CP_E_NOMEM.
 */
int k8s_config_in_cluster(const char *root, struct k8s_config *out,
                          struct cp_err *err);

/* Cluster info for an exec plugin, borrowing from @cfg. */
void k8s_config_exec_cluster(const struct k8s_config *cfg, struct k8s_exec_cluster *out);

void k8s_config_release(struct k8s_config *cfg);

/* Read a bearer token file, whitespace-trimmed; empty is CP_E_AUTH. */
int k8s_read_token_file(const char *path, char **token, struct cp_err *err);

#endif
