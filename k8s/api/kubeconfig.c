/* kubeconfig.c - kubeconfig YAML into structs, and client-go's merge. */
#include "k8s/api/kubeconfig.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "base/buf.h"
#include "base/fileio.h"
#include "k8s/api/b64.h"

#define EXEC_EXT_NAME "client.authentication.k8s.io/exec"
#define MAX_JSON_NODES 10000
#define MAX_JSON_DEPTH 32

/* Parse state of one file: where errors point. */
struct pctx {
	yaml_document_t *doc;
	const char *file;  /* shown in errors */
	const char *dir;   /* folder for relative paths, or NULL */
	char entry[160];   /* "user \"bob\"" or "" */
	struct cp_err *err;
	int json_nodes;
};

__attribute__((format(printf, 3, 4)))
static int perr(struct pctx *c, int code, const char *fmt, ...)
{
	char msg[CP_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return cp_err_set(c->err, code, "kubeconfig %s: %s%s%s", c->file, c->entry,
	                  c->entry[0] ? ": " : "", msg);
}

static int nomem(struct pctx *c)
{
	return perr(c, CP_E_NOMEM, "out of memory");
}

static yaml_node_t *node(struct pctx *c, int id)
{
	return yaml_document_get_node(c->doc, id);
}

static int is_null(const yaml_node_t *n)
{
	if (!n)
		return 1;
	if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return 0;
	const char *v = (const char *)n->data.scalar.value;
	return !*v || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL") || !strcmp(v, "~");
}

/* Value of @key in mapping @map, NULL when absent or null. */
static yaml_node_t *map_get(struct pctx *c, const yaml_node_t *map, const char *key)
{
	if (!map || map->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
	     p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = node(c, p->key);
		if (k && k->type == YAML_SCALAR_NODE && !strcmp((char *)k->data.scalar.value, key)) {
			yaml_node_t *v = node(c, p->value);
			return is_null(v) ? NULL : v;
		}
	}
	return NULL;
}

/* A string field: absent -> *out stays NULL. */
static int get_str(struct pctx *c, const yaml_node_t *map, const char *key, char **out)
{
	yaml_node_t *v = map_get(c, map, key);
	if (!v)
		return 0;
	if (v->type != YAML_SCALAR_NODE)
		return perr(c, CP_E_PARSE, "%s is not a string", key);
	if (strlen((char *)v->data.scalar.value) != v->data.scalar.length)
		return perr(c, CP_E_PARSE, "%s contains a NUL byte", key);
	free(*out);
	*out = strdup((char *)v->data.scalar.value);
	return *out ? 0 : nomem(c);
}

static int get_bool(struct pctx *c, const yaml_node_t *map, const char *key, int *out)
{
	static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"};
	static const char *const no[] = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"};
	yaml_node_t *v = map_get(c, map, key);
	if (!v)
		return 0;
	if (v->type == YAML_SCALAR_NODE) {
		const char *s = (const char *)v->data.scalar.value;
		for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
			if (!strcmp(s, yes[i]))
				return *out = 1, 0;
			if (!strcmp(s, no[i]))
				return *out = 0, 0;
		}
	}
	return perr(c, CP_E_PARSE, "%s is not a boolean", key);
}

/* A *-data field: base64 text decoded to bytes. */
static int get_b64(struct pctx *c, const yaml_node_t *map, const char *key,
                   unsigned char **out, size_t *out_len)
{
	char *s = NULL;
	int rc = get_str(c, map, key, &s);
	if (rc || !s)
		return rc;
	rc = k8s_b64_decode(s, strlen(s), out, out_len, NULL);
	free(s);
	if (rc == CP_E_NOMEM)
		return nomem(c);
	if (rc)
		return perr(c, CP_E_PARSE, "%s is not valid base64", key);
	return 0;
}

/* A path field, made relative to the file's folder. */
static int get_path(struct pctx *c, const yaml_node_t *map, const char *key, char **out)
{
	int rc = get_str(c, map, key, out);
	if (rc || !*out || !**out || (*out)[0] == '/' || !c->dir)
		return rc;
	char *abs = NULL;
	if (asprintf(&abs, "%s/%s", c->dir, *out) < 0)
		return nomem(c);
	free(*out);
	*out = abs;
	return 0;
}

/* Arbitrary YAML (an extension) into JSON, bounded in size and depth. */
static json_t *to_json(struct pctx *c, yaml_node_t *n, int depth)
{
	if (!n || depth > MAX_JSON_DEPTH || ++c->json_nodes > MAX_JSON_NODES)
		return NULL;
	if (n->type == YAML_SCALAR_NODE) {
		const char *s = (const char *)n->data.scalar.value;
		if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
			if (is_null(n))
				return json_null();
			if (!strcmp(s, "true"))
				return json_true();
			if (!strcmp(s, "false"))
				return json_false();
			json_t *num = json_loads(s, JSON_DECODE_ANY, NULL);
			if (json_is_number(num))
				return num;
			json_decref(num);
		}
		return json_stringn(s, n->data.scalar.length);
	}
	json_t *out = n->type == YAML_MAPPING_NODE ? json_object() : json_array();
	if (n->type == YAML_SEQUENCE_NODE) {
		for (yaml_node_item_t *i = n->data.sequence.items.start; out && i < n->data.sequence.items.top; i++)
			if (json_array_append_new(out, to_json(c, node(c, *i), depth + 1))) {
				json_decref(out);
				out = NULL;
			}
		return out;
	}
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start; out && p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = node(c, p->key);
		if (!k || k->type != YAML_SCALAR_NODE ||
		    json_object_set_new(out, (char *)k->data.scalar.value, to_json(c, node(c, p->value), depth + 1))) {
			json_decref(out);
			out = NULL;
		}
	}
	return out;
}

static int parse_exec_config(struct pctx *c, const yaml_node_t *cl, json_t **out)
{
	yaml_node_t *exts = map_get(c, cl, "extensions");
	if (!exts)
		return 0;
	if (exts->type != YAML_SEQUENCE_NODE)
		return perr(c, CP_E_PARSE, "extensions is not a list");
	for (yaml_node_item_t *i = exts->data.sequence.items.start; i < exts->data.sequence.items.top; i++) {
		yaml_node_t *e = node(c, *i);
		yaml_node_t *name = map_get(c, e, "name");
		if (!name || name->type != YAML_SCALAR_NODE ||
		    strcmp((char *)name->data.scalar.value, EXEC_EXT_NAME))
			continue;
		yaml_node_t *ext = map_get(c, e, "extension");
		if (!ext)
			return 0;
		json_decref(*out);
		*out = to_json(c, ext, 0);
		if (!*out)
			return perr(c, CP_E_PARSE, "extension %s is too large or too deep", EXEC_EXT_NAME);
	}
	return 0;
}

static int parse_cluster(struct pctx *c, const yaml_node_t *m, struct k8s_kc_cluster *cl)
{
	int rc;
	if ((rc = get_str(c, m, "server", &cl->server)) ||
	    (rc = get_path(c, m, "certificate-authority", &cl->ca_file)) ||
	    (rc = get_b64(c, m, "certificate-authority-data", &cl->ca_data, &cl->ca_len)) ||
	    (rc = get_bool(c, m, "insecure-skip-tls-verify", &cl->insecure)) ||
	    (rc = get_bool(c, m, "disable-compression", &cl->disable_compression)) ||
	    (rc = get_str(c, m, "tls-server-name", &cl->tls_server_name)) ||
	    (rc = get_str(c, m, "proxy-url", &cl->proxy_url)))
		return rc;
	return parse_exec_config(c, m, &cl->exec_config);
}

static int parse_str_list(struct pctx *c, const yaml_node_t *m, const char *key,
                          char ***out, size_t *n)
{
	yaml_node_t *seq = map_get(c, m, key);
	if (!seq)
		return 0;
	if (seq->type != YAML_SEQUENCE_NODE)
		return perr(c, CP_E_PARSE, "exec %s is not a list", key);
	size_t cnt = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
	*out = calloc(cnt ? cnt : 1, sizeof **out);
	if (!*out)
		return nomem(c);
	for (size_t i = 0; i < cnt; i++) {
		yaml_node_t *v = node(c, seq->data.sequence.items.start[i]);
		if (!v || v->type != YAML_SCALAR_NODE)
			return perr(c, CP_E_PARSE, "exec %s[%zu] is not a string", key, i);
		(*out)[i] = strdup((char *)v->data.scalar.value);
		if (!(*out)[i])
			return nomem(c);
		(*n)++;
	}
	return 0;
}

static int parse_env(struct pctx *c, const yaml_node_t *m, struct k8s_exec_plugin *p)
{
	yaml_node_t *seq = map_get(c, m, "env");
	if (!seq)
		return 0;
	if (seq->type != YAML_SEQUENCE_NODE)
		return perr(c, CP_E_PARSE, "exec env is not a list");
	size_t cnt = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
	p->env = calloc(cnt ? cnt : 1, sizeof *p->env);
	if (!p->env)
		return nomem(c);
	for (size_t i = 0; i < cnt; i++) {
		yaml_node_t *e = node(c, seq->data.sequence.items.start[i]);
		struct k8s_exec_env *ev = &p->env[p->n_env++];
		int rc;
		if (!e || e->type != YAML_MAPPING_NODE)
			return perr(c, CP_E_PARSE, "exec env[%zu] is not a mapping", i);
		if ((rc = get_str(c, e, "name", &ev->name)) || (rc = get_str(c, e, "value", &ev->value)))
			return rc;
		if (!ev->name || !*ev->name)
			return perr(c, CP_E_PARSE, "exec env[%zu] has no name", i);
		if (!ev->value && !(ev->value = strdup("")))
			return nomem(c);
	}
	return 0;
}

static int parse_exec(struct pctx *c, const yaml_node_t *m, struct k8s_exec_plugin *p)
{
	char *mode = NULL;
	int rc;
	if ((rc = get_str(c, m, "apiVersion", &p->api_version)) ||
	    (rc = get_str(c, m, "command", &p->command)) ||
	    (rc = get_str(c, m, "installHint", &p->install_hint)) ||
	    (rc = get_bool(c, m, "provideClusterInfo", &p->provide_cluster_info)) ||
	    (rc = parse_str_list(c, m, "args", &p->args, &p->n_args)) ||
	    (rc = parse_env(c, m, p)) || (rc = get_str(c, m, "interactiveMode", &mode)))
		goto done;
	if (!p->command || !*p->command) {
		rc = perr(c, CP_E_PARSE, "exec has no command");
	} else if (!p->api_version || (strcmp(p->api_version, K8S_EXECCRED_V1) &&
	                               strcmp(p->api_version, K8S_EXECCRED_V1BETA1))) {
		rc = perr(c, CP_E_PARSE, "exec apiVersion \"%s\" is not supported",
		          p->api_version ? p->api_version : "");
	} else if (!mode) {
		/* "interactiveMode is required for v1" (client-go). */
		if (!strcmp(p->api_version, K8S_EXECCRED_V1))
			rc = perr(c, CP_E_PARSE, "exec interactiveMode is required for %s", K8S_EXECCRED_V1);
	} else if (!strcmp(mode, "Never")) {
		p->interactive_mode = K8S_EXEC_INTERACTIVE_NEVER;
	} else if (!strcmp(mode, "IfAvailable")) {
		p->interactive_mode = K8S_EXEC_INTERACTIVE_IF_AVAILABLE;
	} else if (!strcmp(mode, "Always")) {
		p->interactive_mode = K8S_EXEC_INTERACTIVE_ALWAYS;
	} else {
		rc = perr(c, CP_E_PARSE, "exec interactiveMode \"%s\" is not Never, IfAvailable or Always", mode);
	}
	/* "Only resolve exec command if it isn't PATH based." */
	if (!rc && strchr(p->command, '/') && p->command[0] != '/' && c->dir) {
		char *abs = NULL;
		if (asprintf(&abs, "%s/%s", c->dir, p->command) < 0) {
			rc = nomem(c);
		} else {
			free(p->command);
			p->command = abs;
		}
	}
done:
	free(mode);
	return rc;
}

static int parse_user(struct pctx *c, const yaml_node_t *m, struct k8s_kc_user *u)
{
	int rc;
	if ((rc = get_path(c, m, "client-certificate", &u->cert_file)) ||
	    (rc = get_b64(c, m, "client-certificate-data", &u->cert_data, &u->cert_len)) ||
	    (rc = get_path(c, m, "client-key", &u->key_file)) ||
	    (rc = get_b64(c, m, "client-key-data", &u->key_data, &u->key_len)) ||
	    (rc = get_str(c, m, "token", &u->token)) ||
	    (rc = get_path(c, m, "tokenFile", &u->token_file)) ||
	    (rc = get_str(c, m, "username", &u->username)) ||
	    (rc = get_str(c, m, "password", &u->password)))
		return rc;
	yaml_node_t *ex = map_get(c, m, "exec");
	if (!ex)
		return 0;
	if (ex->type != YAML_MAPPING_NODE)
		return perr(c, CP_E_PARSE, "exec is not a mapping");
	u->exec = calloc(1, sizeof *u->exec);
	if (!u->exec)
		return nomem(c);
	return parse_exec(c, ex, u->exec);
}

static int parse_context(struct pctx *c, const yaml_node_t *m, struct k8s_kc_context *x)
{
	int rc;
	if ((rc = get_str(c, m, "cluster", &x->cluster)) || (rc = get_str(c, m, "user", &x->user)) ||
	    (rc = get_str(c, m, "namespace", &x->ns)))
		return rc;
	return 0;
}

static void free_cluster(struct k8s_kc_cluster *cl)
{
	if (!cl)
		return;
	free(cl->name);
	free(cl->server);
	free(cl->ca_file);
	free(cl->ca_data);
	free(cl->tls_server_name);
	free(cl->proxy_url);
	json_decref(cl->exec_config);
	free(cl);
}

static void free_user(struct k8s_kc_user *u)
{
	if (!u)
		return;
	free(u->name);
	free(u->cert_file);
	free(u->cert_data);
	free(u->key_file);
	free(u->key_data);
	free(u->token);
	free(u->token_file);
	free(u->username);
	free(u->password);
	k8s_exec_plugin_free(u->exec);
	free(u);
}

static void free_context(struct k8s_kc_context *x)
{
	if (!x)
		return;
	free(x->name);
	free(x->cluster);
	free(x->user);
	free(x->ns);
	free(x);
}

/* The three lists share one walker; the kind picks the parser. */
enum kind { K_CLUSTER, K_USER, K_CONTEXT };
static const char *const list_key[] = {"clusters", "users", "contexts"};
static const char *const item_key[] = {"cluster", "user", "context"};

static const char *entry_name(enum kind k, void *e)
{
	switch (k) {
	case K_CLUSTER: return ((struct k8s_kc_cluster *)e)->name;
	case K_USER: return ((struct k8s_kc_user *)e)->name;
	default: return ((struct k8s_kc_context *)e)->name;
	}
}

static void free_entry(enum kind k, void *e)
{
	switch (k) {
	case K_CLUSTER: free_cluster(e); break;
	case K_USER: free_user(e); break;
	default: free_context(e); break;
	}
}

static void ***list_of(struct k8s_kubeconfig *kc, enum kind k, size_t **n)
{
	switch (k) {
	case K_CLUSTER: *n = &kc->n_clusters; return (void ***)&kc->clusters;
	case K_USER: *n = &kc->n_users; return (void ***)&kc->users;
	default: *n = &kc->n_contexts; return (void ***)&kc->contexts;
	}
}

static size_t *cap_of(struct k8s_kubeconfig *kc, enum kind k)
{
	switch (k) {
	case K_CLUSTER: return &kc->cap_clusters;
	case K_USER: return &kc->cap_users;
	default: return &kc->cap_contexts;
	}
}

static void *find(struct k8s_kubeconfig *kc, enum kind k, const char *name)
{
	size_t *n;
	void **arr = *list_of(kc, k, &n);
	for (size_t i = 0; i < *n; i++)
		if (!strcmp(entry_name(k, arr[i]), name))
			return arr[i];
	return NULL;
}

static int push(struct k8s_kubeconfig *kc, enum kind k, void *e)
{
	size_t *n;
	void ***arr = list_of(kc, k, &n);
	void **na = cp_array_grow(*arr, cap_of(kc, k), *n + 1, sizeof *na, NULL);
	if (!na)
		return CP_E_NOMEM;
	*arr = na;
	na[(*n)++] = e;
	return 0;
}

static void *new_entry(enum kind k, const char *name, const char *origin)
{
	void *e = NULL;
	char *nm = strdup(name);
	if (!nm)
		return NULL;
	switch (k) {
	case K_CLUSTER: {
		struct k8s_kc_cluster *x = calloc(1, sizeof *x);
		if (x) { x->name = nm; x->origin = origin; }
		e = x;
		break;
	}
	case K_USER: {
		struct k8s_kc_user *x = calloc(1, sizeof *x);
		if (x) { x->name = nm; x->origin = origin; }
		e = x;
		break;
	}
	default: {
		struct k8s_kc_context *x = calloc(1, sizeof *x);
		if (x) { x->name = nm; x->origin = origin; }
		e = x;
		break;
	}
	}
	if (!e)
		free(nm);
	return e;
}

static int parse_list(struct pctx *c, const yaml_node_t *root, enum kind k,
                      struct k8s_kubeconfig *kc, const char *origin)
{
	yaml_node_t *seq = map_get(c, root, list_key[k]);
	if (!seq)
		return 0;
	if (seq->type != YAML_SEQUENCE_NODE)
		return perr(c, CP_E_PARSE, "%s is not a list", list_key[k]);
	size_t idx = 0;
	for (yaml_node_item_t *i = seq->data.sequence.items.start; i < seq->data.sequence.items.top; i++, idx++) {
		yaml_node_t *item = node(c, *i);
		yaml_node_t *name = map_get(c, item, "name");
		if (!item || item->type != YAML_MAPPING_NODE)
			return perr(c, CP_E_PARSE, "%s[%zu] is not a mapping", list_key[k], idx);
		if (!name || name->type != YAML_SCALAR_NODE || !*(char *)name->data.scalar.value)
			return perr(c, CP_E_PARSE, "%s[%zu] has no name", list_key[k], idx);
		const char *nm = (const char *)name->data.scalar.value;
		snprintf(c->entry, sizeof c->entry, "%s \"%.100s\"", item_key[k], nm);
		if (find(kc, k, nm))
			return perr(c, CP_E_PARSE, "defined twice in this file");
		yaml_node_t *body = map_get(c, item, item_key[k]);
		if (body && body->type != YAML_MAPPING_NODE)
			return perr(c, CP_E_PARSE, "%s is not a mapping", item_key[k]);
		void *e = new_entry(k, nm, origin);
		if (!e || push(kc, k, e)) {
			free_entry(k, e);
			return nomem(c);
		}
		int rc = k == K_CLUSTER ? parse_cluster(c, body, e)
		       : k == K_USER ? parse_user(c, body, e) : parse_context(c, body, e);
		if (rc)
			return rc;
		c->entry[0] = '\0';
	}
	return 0;
}

struct k8s_kubeconfig *k8s_kubeconfig_new(void)
{
	return calloc(1, sizeof(struct k8s_kubeconfig));
}

void k8s_kubeconfig_free(struct k8s_kubeconfig *kc)
{
	if (!kc)
		return;
	for (size_t i = 0; i < kc->n_clusters; i++)
		free_cluster(kc->clusters[i]);
	for (size_t i = 0; i < kc->n_users; i++)
		free_user(kc->users[i]);
	for (size_t i = 0; i < kc->n_contexts; i++)
		free_context(kc->contexts[i]);
	free(kc->clusters);
	free(kc->users);
	free(kc->contexts);
	free(kc->current_context);
	for (size_t i = 0; i < kc->n_files; i++)
		free(kc->files[i]);
	free(kc->files);
	free(kc);
}

/* Move the entries of @from that @to lacks; first definition wins. */
static int merge(struct k8s_kubeconfig *to, struct k8s_kubeconfig *from)
{
	for (int k = K_CLUSTER; k <= K_CONTEXT; k++) {
		size_t *n;
		void ***arr = list_of(from, (enum kind)k, &n);
		for (size_t i = 0; i < *n; i++) {
			void *e = (*arr)[i];
			if (find(to, (enum kind)k, entry_name((enum kind)k, e)))
				continue;
			if (push(to, (enum kind)k, e))
				return CP_E_NOMEM;
			(*arr)[i] = NULL;
		}
	}
	if (!to->current_context && from->current_context && *from->current_context) {
		to->current_context = from->current_context;
		from->current_context = NULL;
	}
	return 0;
}

/* Frees a partially moved temporary (NULL slots were moved). */
static void free_tmp(struct k8s_kubeconfig *t)
{
	if (!t)
		return;
	for (int k = K_CLUSTER; k <= K_CONTEXT; k++) {
		size_t *n;
		void ***arr = list_of(t, (enum kind)k, &n);
		for (size_t i = 0; i < *n; i++)
			free_entry((enum kind)k, (*arr)[i]);
		*n = 0;
	}
	k8s_kubeconfig_free(t);
}

static int parse_doc(struct pctx *c, struct k8s_kubeconfig *t, const char *origin)
{
	yaml_node_t *root = yaml_document_get_root_node(c->doc);
	if (!root || is_null(root))
		return 0; /* an empty file is an empty config */
	if (root->type != YAML_MAPPING_NODE)
		return perr(c, CP_E_PARSE, "top level is not a mapping");
	int rc;
	for (int k = K_CLUSTER; k <= K_CONTEXT; k++)
		if ((rc = parse_list(c, root, (enum kind)k, t, origin)))
			return rc;
	return get_str(c, root, "current-context", &t->current_context);
}

static int remember_file(struct k8s_kubeconfig *kc, const char *origin, char **out)
{
	char **nf = cp_array_grow(kc->files, &kc->cap_files, kc->n_files + 1, sizeof *nf, NULL);
	if (!nf)
		return CP_E_NOMEM;
	kc->files = nf;
	*out = strdup(origin);
	if (!*out)
		return CP_E_NOMEM;
	kc->files[kc->n_files++] = *out;
	return 0;
}

int k8s_kubeconfig_load_buffer(struct k8s_kubeconfig *kc, const char *data,
                               size_t len, const char *origin, struct cp_err *err)
{
	const char *shown = origin ? origin : "<buffer>";
	if (len > K8S_KUBECONFIG_MAX_FILE)
		return cp_err_set(err, CP_E_TOO_BIG, "kubeconfig %s: larger than %u bytes", shown,
		                  K8S_KUBECONFIG_MAX_FILE);
	yaml_parser_t parser;
	yaml_document_t doc;
	struct k8s_kubeconfig *tmp = k8s_kubeconfig_new();
	char *dir = NULL, *kept = NULL;
	int rc = 0, have_doc = 0;
	if (!tmp || !yaml_parser_initialize(&parser)) {
		k8s_kubeconfig_free(tmp);
		return cp_err_set(err, CP_E_NOMEM, "kubeconfig %s: out of memory", shown);
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
	if (!yaml_parser_load(&parser, &doc)) {
		rc = cp_err_set(err, CP_E_PARSE, "kubeconfig %s: invalid YAML: %s at line %zu column %zu",
		                shown, parser.problem ? parser.problem : "error",
		                parser.problem_mark.line + 1, parser.problem_mark.column + 1);
		goto done;
	}
	have_doc = 1;
	if (origin) {
		if (remember_file(kc, origin, &kept)) {
			rc = cp_err_set(err, CP_E_NOMEM, "kubeconfig %s: out of memory", shown);
			goto done;
		}
		const char *slash = strrchr(origin, '/');
		dir = slash ? strndup(origin, (size_t)(slash - origin)) : strdup(".");
		if (dir && !*dir) {
			free(dir);
			dir = strdup("/");
		}
		if (!dir) {
			rc = cp_err_set(err, CP_E_NOMEM, "kubeconfig %s: out of memory", shown);
			goto done;
		}
	}
	struct pctx c = {.doc = &doc, .file = shown, .dir = dir, .err = err};
	rc = parse_doc(&c, tmp, kept);
	if (!rc && merge(kc, tmp))
		rc = cp_err_set(err, CP_E_NOMEM, "kubeconfig %s: out of memory", shown);
done:
	if (have_doc)
		yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	free_tmp(tmp);
	free(dir);
	return rc;
}

int k8s_kubeconfig_load_file(struct k8s_kubeconfig *kc, const char *path,
                             struct cp_err *err)
{
	size_t len = 0;
	struct cp_err ferr;
	char *buf = cp_read_file(path, K8S_KUBECONFIG_MAX_FILE, &len, &ferr);
	if (!buf)
		return cp_err_set(err, ferr.code, "kubeconfig %s", ferr.msg);
	int rc = k8s_kubeconfig_load_buffer(kc, buf, len, path, err);
	free(buf);
	return rc;
}

int k8s_kubeconfig_load_list(struct k8s_kubeconfig *kc, const char *list,
                             struct cp_err *err)
{
	char *copy = strdup(list ? list : "");
	if (!copy)
		return cp_err_set(err, CP_E_NOMEM, "kubeconfig: out of memory");
	int rc = 0;
	char *next = copy;
	while (next && !rc) {
		char *p = next;
		next = strchr(p, ':');
		if (next)
			*next++ = '\0';
		if (!*p)
			continue; /* empty entries are ignored */
		int seen = 0;
		for (size_t i = 0; i < kc->n_files; i++)
			seen |= !strcmp(kc->files[i], p);
		if (seen)
			continue;
		rc = k8s_kubeconfig_load_file(kc, p, err);
		if (rc == CP_E_NOT_FOUND)
			rc = 0; /* "Missing files are ignored" */
	}
	free(copy);
	return rc;
}

const struct k8s_kc_cluster *k8s_kubeconfig_cluster(const struct k8s_kubeconfig *kc, const char *name)
{
	return name ? find((struct k8s_kubeconfig *)kc, K_CLUSTER, name) : NULL;
}

const struct k8s_kc_user *k8s_kubeconfig_user(const struct k8s_kubeconfig *kc, const char *name)
{
	return name ? find((struct k8s_kubeconfig *)kc, K_USER, name) : NULL;
}

const struct k8s_kc_context *k8s_kubeconfig_context(const struct k8s_kubeconfig *kc, const char *name)
{
	return name ? find((struct k8s_kubeconfig *)kc, K_CONTEXT, name) : NULL;
}
