/* creds.c - bearer token sources: static, token file, exec plugin (uv_spawn). */
#include "k8s/api/creds.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/buf.h"

extern char **environ;

enum kind { SRC_NONE, SRC_STATIC, SRC_FILE, SRC_PLUGIN };

struct run;

struct k8s_creds {
	uv_loop_t *loop;
	enum kind kind;
	char *token;
	char *token_file;
	char *cert_pem, *key_pem;      /* current: the config's or the plugin's */
	size_t cert_len, key_len;
	struct k8s_exec_plugin *plugin;
	char *exec_info;               /* KUBERNETES_EXEC_INFO */
	uint64_t gen;
	uint64_t read_at;              /* uv_now of the last token-file read */
	int stale;                     /* refresh on the next get */
	int has_expiry;
	time_t expiry;
	struct run *run;               /* running plugin, or NULL */
	struct k8s_creds_wait waiters; /* list head */
	unsigned runs;
	int delivering, closing;
};

/* One plugin run. It frees itself once its four handles are closed, so the
 * source may go away (src = NULL) while the child is still being reaped. */
struct run {
	struct k8s_creds *src;
	uv_process_t proc;
	uv_pipe_t out, errp;
	uv_timer_t timer;
	struct cp_buf obuf; /* stdout: the ExecCredential, K8S_EXECCRED_MAX_OUTPUT at most */
	struct cp_buf ebuf; /* the first K8S_CREDS_PLUGIN_MAX_STDERR bytes of stderr */
	int64_t status;
	int term_signal;
	int exited, out_eof, err_eof, too_big, timed_out, finished;
	int open_handles;
	char slab[16384];              /* read buffer of both pipes */
};

static void list_init(struct k8s_creds_wait *h) { h->next = h->prev = h; }

static void list_del(struct k8s_creds_wait *w)
{
	if (w->next) {
		w->prev->next = w->next;
		w->next->prev = w->prev;
	}
	w->next = w->prev = NULL;
}

static char *mdup0(const void *p, size_t n)
{
	char *s = malloc(n + 1);
	if (s) {
		memcpy(s, p, n);
		s[n] = '\0';
	}
	return s;
}

static void fill_cred(const struct k8s_creds *src, struct k8s_cred *c)
{
	c->token = src->token;
	c->cert_pem = src->cert_pem;
	c->cert_len = src->cert_len;
	c->key_pem = src->key_pem;
	c->key_len = src->key_len;
	c->generation = src->gen;
}

static void src_free(struct k8s_creds *src)
{
	if (src->run)
		src->run->src = NULL;
	free(src->token);
	free(src->token_file);
	free(src->cert_pem);
	free(src->key_pem);
	k8s_exec_plugin_free(src->plugin);
	free(src->exec_info);
	free(src);
}

static int copy_cert(struct k8s_creds *src, const struct k8s_config *cfg)
{
	if (cfg->cert_pem) {
		src->cert_pem = mdup0(cfg->cert_pem, cfg->cert_pem_len);
		src->cert_len = cfg->cert_pem_len;
		if (!src->cert_pem)
			return -1;
	}
	if (cfg->key_pem) {
		src->key_pem = mdup0(cfg->key_pem, cfg->key_pem_len);
		src->key_len = cfg->key_pem_len;
		if (!src->key_pem)
			return -1;
	}
	return 0;
}

struct k8s_creds *k8s_creds_new(uv_loop_t *loop, const struct k8s_config *cfg,
                                struct cp_err *err)
{
	struct k8s_creds *src = calloc(1, sizeof *src);
	if (!src) {
		cp_err_set(err, CP_E_NOMEM, "credentials: out of memory");
		return NULL;
	}
	src->loop = loop;
	src->gen = 1;
	list_init(&src->waiters);
	int oom = copy_cert(src, cfg);
	if (cfg->exec) {
		src->kind = SRC_PLUGIN;
		struct k8s_exec_cluster cl;
		k8s_config_exec_cluster(cfg, &cl);
		src->plugin = k8s_exec_plugin_dup(cfg->exec);
		if (!src->plugin) {
			oom = 1;
		} else {
			int rc = k8s_execcred_input(src->plugin, &cl, 0, &src->exec_info, err);
			if (rc) {
				src_free(src);
				return NULL;
			}
		}
	} else if (cfg->token_file && *cfg->token_file) {
		src->kind = SRC_FILE;
		src->token_file = strdup(cfg->token_file);
		oom |= !src->token_file;
		src->stale = 1;
	} else if (cfg->token && *cfg->token) {
		src->kind = SRC_STATIC;
		src->token = strdup(cfg->token);
		oom |= !src->token;
	}
	if (oom) {
		src_free(src);
		cp_err_set(err, CP_E_NOMEM, "credentials: out of memory");
		return NULL;
	}
	return src;
}

static int file_refresh(struct k8s_creds *src, struct cp_err *err)
{
	uint64_t now = uv_now(src->loop);
	if (!src->stale && now - src->read_at < K8S_CREDS_FILE_PERIOD_MS)
		return 0;
	char *tok = NULL;
	int rc = k8s_read_token_file(src->token_file, &tok, err);
	if (rc)
		return rc;
	if (!src->token || strcmp(tok, src->token) != 0)
		src->gen++;
	free(src->token);
	src->token = tok;
	src->read_at = now;
	src->stale = 0;
	return 0;
}

static int plugin_valid(const struct k8s_creds *src)
{
	if (src->stale || (!src->token && !src->cert_pem))
		return 0;
	return !src->has_expiry || time(NULL) < src->expiry;
}

static int plugin_start(struct k8s_creds *src, struct cp_err *err);

int k8s_creds_get(struct k8s_creds *src, struct k8s_creds_wait *w,
                  k8s_creds_fn cb, void *arg, struct k8s_cred *now,
                  struct cp_err *err)
{
	if (src->closing)
		return cp_err_set(err, CP_E_STATE, "credentials: source is closing");
	if (src->kind == SRC_FILE) {
		int rc = file_refresh(src, err);
		if (rc)
			return rc;
	}
	if (src->kind != SRC_PLUGIN || plugin_valid(src)) {
		fill_cred(src, now);
		return 1;
	}
	if (!src->run) {
		int rc = plugin_start(src, err);
		if (rc)
			return rc;
	}
	w->src = src;
	w->cb = cb;
	w->arg = arg;
	w->prev = src->waiters.prev;
	w->next = &src->waiters;
	src->waiters.prev->next = w;
	src->waiters.prev = w;
	return 0;
}

void k8s_creds_cancel(struct k8s_creds_wait *w)
{
	if (!w->next)
		return;
	list_del(w);
	struct cp_err e;
	cp_err_set(&e, CP_E_CANCELLED, "credentials: cancelled");
	w->cb(w->arg, NULL, &e);
}

int k8s_creds_invalidate(struct k8s_creds *src, uint64_t generation)
{
	if (src->kind != SRC_FILE && src->kind != SRC_PLUGIN)
		return 0;
	if (generation == src->gen)
		src->stale = 1;
	return 1;
}

unsigned k8s_creds_plugin_runs(const struct k8s_creds *src)
{
	return src->runs;
}

/* Call every waiter with @cred or @e, tolerating callbacks that add waiters
 * (they wait for the next run) or close the source. */
static void deliver(struct k8s_creds *src, const struct k8s_cred *cred,
                    const struct cp_err *e)
{
	struct k8s_creds_wait batch;
	list_init(&batch);
	if (src->waiters.next != &src->waiters) {
		batch.next = src->waiters.next;
		batch.prev = src->waiters.prev;
		batch.next->prev = &batch;
		batch.prev->next = &batch;
		list_init(&src->waiters);
	}
	src->delivering++;
	while (batch.next != &batch) {
		struct k8s_creds_wait *w = batch.next;
		list_del(w);
		w->cb(w->arg, cred, e);
	}
	src->delivering--;
	if (src->closing && !src->delivering)
		src_free(src);
}

void k8s_creds_close(struct k8s_creds *src)
{
	if (!src || src->closing)
		return;
	src->closing = 1;
	if (src->run && !src->run->exited)
		uv_process_kill(&src->run->proc, SIGKILL);
	struct cp_err e;
	cp_err_set(&e, CP_E_CANCELLED, "credentials: source closed");
	deliver(src, NULL, &e); /* frees src unless inside a delivery */
}

/* ---- the plugin run ---------------------------------------------------- */

static void run_closed(uv_handle_t *h)
{
	struct run *r = h->data;
	if (--r->open_handles > 0)
		return;
	cp_buf_free(&r->obuf);
	cp_buf_free(&r->ebuf);
	free(r);
}

static void run_close_all(struct run *r)
{
	uv_close((uv_handle_t *)&r->proc, run_closed);
	uv_close((uv_handle_t *)&r->out, run_closed);
	uv_close((uv_handle_t *)&r->errp, run_closed);
	uv_close((uv_handle_t *)&r->timer, run_closed);
}

/* First non-empty stderr line, for the error text. */
static void first_line(const struct run *r, char *out, size_t cap)
{
	out[0] = '\0';
	const char *p = cp_buf_ptr(&r->ebuf), *end = p + cp_buf_len(&r->ebuf);
	while (p < end && (*p == '\n' || *p == '\r' || *p == ' '))
		p++;
	size_t n = 0;
	while (p + n < end && p[n] != '\n' && p[n] != '\r')
		n++;
	if (n)
		snprintf(out, cap, ": %.*s", (int)n, p);
}

static int run_result(struct k8s_creds *src, struct run *r, struct cp_err *e)
{
	const char *cmd = src->plugin->command;
	char line[160];
	first_line(r, line, sizeof line);
	if (r->timed_out)
		return cp_err_set(e, CP_E_AUTH, "exec plugin \"%s\": no answer within %u s", cmd,
		                  K8S_CREDS_PLUGIN_TIMEOUT_MS / 1000);
	if (r->too_big)
		return cp_err_set(e, CP_E_AUTH, "exec plugin \"%s\": output larger than %u bytes", cmd,
		                  K8S_EXECCRED_MAX_OUTPUT);
	if (r->term_signal)
		return cp_err_set(e, CP_E_AUTH, "exec plugin \"%s\": killed by signal %d%s", cmd,
		                  r->term_signal, line);
	if (r->status != 0)
		return cp_err_set(e, CP_E_AUTH, "exec plugin \"%s\": exited with status %lld%s", cmd,
		                  (long long)r->status, line);
	struct k8s_exec_credential c;
	struct cp_err pe;
	cp_err_clear(&pe);
	int rc = k8s_execcred_parse(src->plugin->api_version, cp_buf_ptr(&r->obuf),
	                            cp_buf_len(&r->obuf), &c, &pe);
	if (rc)
		return cp_err_set(e, rc == CP_E_NOMEM ? CP_E_NOMEM : CP_E_AUTH,
		                  "exec plugin \"%s\": %s", cmd, pe.msg);
	free(src->token);
	src->token = c.token;
	c.token = NULL;
	if (c.client_cert) {
		free(src->cert_pem);
		free(src->key_pem);
		src->cert_pem = c.client_cert;
		src->cert_len = strlen(c.client_cert);
		src->key_pem = c.client_key;
		src->key_len = c.client_key ? strlen(c.client_key) : 0;
		c.client_cert = c.client_key = NULL;
	}
	src->has_expiry = c.has_expiry;
	src->expiry = c.expiry;
	src->stale = 0;
	src->gen++;
	k8s_exec_credential_release(&c);
	return 0;
}

static void run_maybe_finish(struct run *r)
{
	if (r->finished || !r->exited || !r->out_eof || !r->err_eof)
		return;
	r->finished = 1;
	struct k8s_creds *src = r->src;
	if (src) {
		src->run = NULL;
		struct cp_err e;
		cp_err_clear(&e);
		if (run_result(src, r, &e)) {
			deliver(src, NULL, &e);
		} else {
			struct k8s_cred c;
			fill_cred(src, &c);
			deliver(src, &c, NULL);
		}
	}
	run_close_all(r);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int term_signal)
{
	struct run *r = p->data;
	r->exited = 1;
	r->status = status;
	r->term_signal = term_signal;
	uv_timer_stop(&r->timer);
	run_maybe_finish(r);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)suggested;
	struct run *r = h->data;
	*buf = uv_buf_init(r->slab, sizeof r->slab); /* reads are handled before the next alloc */
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct run *r = s->data;
	int is_out = s == (uv_stream_t *)&r->out;
	if (n < 0) {
		uv_read_stop(s);
		if (is_out)
			r->out_eof = 1;
		else
			r->err_eof = 1;
		run_maybe_finish(r);
		return;
	}
	if (n == 0)
		return;
	/* Out of memory counts as too big: the answer cannot be held. */
	if (is_out && !r->too_big && cp_buf_add(&r->obuf, buf->base, (size_t)n, NULL)) {
		r->too_big = 1;
		if (!r->exited)
			uv_process_kill(&r->proc, SIGKILL);
	} else if (!is_out) {
		/* Only the first bytes are kept, for the message; the rest is dropped. */
		size_t room = K8S_CREDS_PLUGIN_MAX_STDERR - cp_buf_len(&r->ebuf);
		(void)cp_buf_add(&r->ebuf, buf->base, (size_t)n < room ? (size_t)n : room, NULL);
	}
}

static void on_timeout(uv_timer_t *t)
{
	struct run *r = t->data;
	r->timed_out = 1;
	if (!r->exited)
		uv_process_kill(&r->proc, SIGKILL);
}

/* The plugin's environment: ours, minus what exec.env and
 * KUBERNETES_EXEC_INFO override, plus those. */
static char **build_env(const struct k8s_creds *src)
{
	const struct k8s_exec_plugin *p = src->plugin;
	size_t n = 0;
	while (environ && environ[n])
		n++;
	char **env = calloc(n + p->n_env + 2, sizeof *env);
	if (!env)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(environ[i], '=');
		size_t nl = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
		int skip = nl == 20 && !strncmp(environ[i], "KUBERNETES_EXEC_INFO", 20);
		for (size_t j = 0; j < p->n_env && !skip; j++)
			skip = strlen(p->env[j].name) == nl && !strncmp(environ[i], p->env[j].name, nl);
		if (!skip)
			env[k++] = strdup(environ[i]);
		if (!skip && !env[k - 1])
			goto oom;
	}
	for (size_t j = 0; j < p->n_env; j++)
		if (asprintf(&env[k++], "%s=%s", p->env[j].name, p->env[j].value) < 0)
			goto oom;
	if (asprintf(&env[k++], "KUBERNETES_EXEC_INFO=%s", src->exec_info) < 0)
		goto oom;
	return env;
oom:
	env[k - 1] = NULL;
	for (size_t i = 0; env[i]; i++)
		free(env[i]);
	free(env);
	return NULL;
}

static void free_env(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}

static int plugin_spawn(struct k8s_creds *src, struct run *r, char **env, struct cp_err *err)
{
	const struct k8s_exec_plugin *p = src->plugin;
	char **argv = calloc(p->n_args + 2, sizeof *argv);
	if (!argv)
		return cp_err_set(err, CP_E_NOMEM, "exec plugin: out of memory");
	argv[0] = p->command;
	for (size_t i = 0; i < p->n_args; i++)
		argv[i + 1] = p->args[i];
	uv_stdio_container_t stdio[3];
	stdio[0].flags = UV_IGNORE;
	stdio[1].flags = (uv_stdio_flags)(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
	stdio[1].data.stream = (uv_stream_t *)&r->out;
	stdio[2].flags = (uv_stdio_flags)(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
	stdio[2].data.stream = (uv_stream_t *)&r->errp;
	uv_process_options_t o;
	memset(&o, 0, sizeof o);
	o.exit_cb = on_exit_cb;
	o.file = p->command;
	o.args = argv;
	o.env = env;
	o.stdio_count = 3;
	o.stdio = stdio;
	int rc = uv_spawn(src->loop, &r->proc, &o);
	free(argv);
	if (rc)
		return cp_err_set(err, CP_E_AUTH, "exec plugin \"%s\": cannot run: %s%s%s", p->command,
		                  uv_strerror(rc), p->install_hint ? "; " : "",
		                  p->install_hint ? p->install_hint : "");
	return 0;
}

static int plugin_start(struct k8s_creds *src, struct cp_err *err)
{
	struct run *r = calloc(1, sizeof *r);
	char **env = build_env(src);
	if (!r || !env) {
		free(r);
		free_env(env);
		return cp_err_set(err, CP_E_NOMEM, "exec plugin: out of memory");
	}
	r->src = src;
	cp_buf_init(&r->obuf, K8S_EXECCRED_MAX_OUTPUT);
	cp_buf_init(&r->ebuf, K8S_CREDS_PLUGIN_MAX_STDERR);
	r->proc.data = r->out.data = r->errp.data = r->timer.data = r;
	uv_pipe_init(src->loop, &r->out, 0);
	uv_pipe_init(src->loop, &r->errp, 0);
	uv_timer_init(src->loop, &r->timer);
	r->open_handles = 4;
	int rc = plugin_spawn(src, r, env, err);
	free_env(env);
	if (rc) {
		r->src = NULL;
		r->finished = 1;
		run_close_all(r); /* a failed uv_spawn still needs uv_close */
		return rc;
	}
	src->runs++;
	src->run = r;
	uv_read_start((uv_stream_t *)&r->out, on_alloc, on_read);
	uv_read_start((uv_stream_t *)&r->errp, on_alloc, on_read);
	uv_timer_start(&r->timer, on_timeout, K8S_CREDS_PLUGIN_TIMEOUT_MS, 0);
	return 0;
}
