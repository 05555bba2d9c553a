/*
 * main.c - the codepod command: `serve --stdio`, `run FILE`, `--version`.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/cmdtool.h"
#include "runner/codepod.h"
#include "cli/decl_cli.h"
#include "base/idset.h"
#include "k8s/backend/kube_backend.h"
#include "runner/local/local_backend.h"
#include "base/log.h"
#include "cli/serve_cmd.h"
#include "runner/prestart.h"
#include "broker/stdio_serve.h"

/* long options without a short letter */
enum { OPT_PRESTART = 1000, OPT_PRESTART_IDLE, OPT_NO_SUPERVISOR, OPT_SUPERVISOR, OPT_SANDBOX_UIDS };

#define CODEPOD_VERSION "0.1.0"
#define RECENT_IDS 100000

struct opts {
	const char *backend;
	struct kube_backend_options kube;
	const char *state_dir;
	const char *node;
	const char *sandbox_user;
	const char *sandbox_uids;
	const char *token_file; /* serve --listen's token and audit files: hidden from programs */
	const char *audit_file;
	int no_isolation;
	int stdio;
	unsigned max_executions; /* serve --stdio */
	int listen; /* serve --listen: cli/serve_cmd.c parses its own options */
	const char *tools;
	const char *conversation;
	const char *policy;
	const char *policy_defaults, *policy_ceiling; /* the deployment's */
	const char *file;
	unsigned prestart_max;    /* --prestart N */
	unsigned prestart_idle_s; /* --prestart-idle SECONDS */
};

static void usage(FILE *f)
{
	fputs("usage:\n"
	      "  codepod serve --stdio [--backend local] [--state-dir DIR] [--node PATH]\n"
	      "                [--sandbox-uids FIRST-LAST | --sandbox-user USER|UID[:GID]]\n"
	      "                [--no-isolation]\n"
	      "                [--log-level debug|info|warn|error] [--max-executions N]\n"
	      "  (serve and run) [--policy-defaults JSON] [--policy-ceiling JSON]\n"
	      "                [--prestart N] [--prestart-idle SECONDS]\n"
	      "  codepod serve --listen HOST:PORT [--listen ...] --token-file FILE\n"
	      "                [--drain-seconds N] [--max-sessions N] [--max-executions N]\n"
	      "                [--audit-file FILE] [--header-timeout S] [--idle-timeout S]\n"
	      "                [--webhook-timeout-ms N] [--reattach-grace S]\n"
	      "                [--outcome-retention S] [--webhook-secret-file FILE]\n"
	      "                (and the backend options above)\n"
	      "  codepod run FILE --tools TOOLS.json [--conversation KEY] [--policy JSON]\n"
	      "                [--state-dir DIR] [--node PATH] [--no-isolation]\n"
	      "  codepod declarations TOOLS.json\n"
	      "  codepod --version\n"
	      "backends: --backend local (default: --state-dir, --node, --no-isolation,\n"
	      "                as root, each conversation's programs run as a user of their own\n"
	      "                from --sandbox-uids, default 1879048192-1879113727; --sandbox-user:\n"
	      "                every program as this one user instead)\n"
	      "          --backend kubernetes [--kubeconfig FILES] [--context NAME]\n"
	      "                [--namespace NS] [--pod-template FILE] [--warm-pool N]\n"
	      "                [--idle-ttl SECONDS] [--no-supervisor|--supervisor]\n"
	      "                (no kubeconfig: in-cluster)\n", f);
}

static const char *default_state_dir(char *buf, size_t cap)
{
	const char *env = getenv("CODEPOD_STATE_DIR");
	if (env && *env)
		return env;
	const char *home = getenv("HOME");
	snprintf(buf, cap, "%s/.local/state/codepod", home && *home ? home : "/tmp");
	return buf;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "backend", required_argument, NULL, 'b' },
		{ "state-dir", required_argument, NULL, 's' },
		{ "node", required_argument, NULL, 'n' },
		{ "no-isolation", no_argument, NULL, 'I' },
		{ "sandbox-user", required_argument, NULL, 'U' },
		{ "sandbox-uids", required_argument, NULL, OPT_SANDBOX_UIDS },
		{ "stdio", no_argument, NULL, 'S' },
		{ "tools", required_argument, NULL, 't' },
		{ "conversation", required_argument, NULL, 'c' },
		{ "policy", required_argument, NULL, 'p' },
		{ "policy-defaults", required_argument, NULL, 'P' },
		{ "policy-ceiling", required_argument, NULL, 'Q' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ "kubeconfig", required_argument, NULL, 'K' },
		{ "context", required_argument, NULL, 'C' },
		{ "namespace", required_argument, NULL, 'N' },
		{ "pod-template", required_argument, NULL, 'T' },
		{ "warm-pool", required_argument, NULL, 'W' },
		{ "idle-ttl", required_argument, NULL, 'D' },
		{ "prestart", required_argument, NULL, OPT_PRESTART },
		{ "no-supervisor", no_argument, NULL, OPT_NO_SUPERVISOR },
		{ "supervisor", no_argument, NULL, OPT_SUPERVISOR },
		{ "prestart-idle", required_argument, NULL, OPT_PRESTART_IDLE },
		/* serve --listen: given to broker_serve_main, which reads them */
		{ "listen", required_argument, NULL, 'L' },
		{ "token-file", required_argument, NULL, 'k' },
		{ "audit-file", required_argument, NULL, 'a' },
		{ "drain-seconds", required_argument, NULL, 'x' },
		{ "max-sessions", required_argument, NULL, 'x' },
		{ "max-executions", required_argument, NULL, 'E' },
		{ "header-timeout", required_argument, NULL, 'x' },
		{ "idle-timeout", required_argument, NULL, 'x' },
		{ "webhook-timeout-ms", required_argument, NULL, 'x' },
		{ "reattach-grace", required_argument, NULL, 'x' },
		{ "outcome-retention", required_argument, NULL, 'x' },
		{ "webhook-secret-file", required_argument, NULL, 'x' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	optind = 1;
	/* $CODEPOD_PRESTART is the default of --prestart (test harnesses switch
	 * the pre-started runner off for a whole run with it). */
	const char *ps = getenv("CODEPOD_PRESTART");
	char *ps_end = NULL;
	unsigned long psv = ps && *ps ? strtoul(ps, &ps_end, 10) : CP_PRESTART_DEFAULT_MAX;
	o->prestart_max = ps && *ps && (*ps_end || psv > 100000) ? CP_PRESTART_DEFAULT_MAX
	                                                          : (unsigned)psv;
	o->prestart_idle_s = CP_PRESTART_DEFAULT_IDLE_S;
	/* $CODEPOD_SUPERVISOR=0 is the default of --no-supervisor, the same way. */
	const char *sup = getenv("CODEPOD_SUPERVISOR");
	o->kube.no_supervisor = sup && strcmp(sup, "0") == 0;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'b': o->backend = optarg; break;
		case 's': o->state_dir = optarg; break;
		case 'n': o->node = optarg; break;
		case 'I': o->no_isolation = 1; break;
		case 'U': o->sandbox_user = optarg; break;
		case OPT_SANDBOX_UIDS: o->sandbox_uids = optarg; break;
		case 'k': o->token_file = optarg; break;
		case 'a': o->audit_file = optarg; break;
		case OPT_NO_SUPERVISOR: o->kube.no_supervisor = 1; break;
		case OPT_SUPERVISOR: o->kube.no_supervisor = 0; break;
		case 'S': o->stdio = 1; break;
		case 't': o->tools = optarg; break;
		case 'c': o->conversation = optarg; break;
		case 'p': o->policy = optarg; break;
		case 'P': o->policy_defaults = optarg; break;
		case 'Q': o->policy_ceiling = optarg; break;
		case 'l': {
			int lvl = cp_log_parse_level(optarg);
			if (lvl < 0) {
				fprintf(stderr, "codepod: --log-level must be debug, info, warn or error\n");
				return -1;
			}
			cp_log_set_level((enum cp_log_level)lvl);
			break;
		}
		case 'L': o->listen = 1; break;
		case 'K': o->kube.kubeconfig = optarg; break;
		case 'C': o->kube.context = optarg; break;
		case 'N': o->kube.ns = optarg; break;
		case 'T': o->kube.pod_template = optarg; break;
		case 'W':
		case 'D':
		case OPT_PRESTART:
		case OPT_PRESTART_IDLE: {
			char *end = NULL;
			unsigned long v = strtoul(optarg, &end, 10);
			if (!*optarg || *end || v > 100000 || (c == OPT_PRESTART_IDLE && v == 0)) {
				fprintf(stderr, "codepod: --%s must be a number from %d to 100000\n",
				        c == 'W' ? "warm-pool" : c == 'D' ? "idle-ttl"
				        : c == OPT_PRESTART ? "prestart" : "prestart-idle",
				        c == OPT_PRESTART_IDLE);
				return -1;
			}
			if (c == 'W')
				o->kube.warm_pool = (unsigned)v;
			else if (c == 'D')
				o->kube.idle_ttl_s = (unsigned)v;
			else if (c == OPT_PRESTART)
				o->prestart_max = (unsigned)v;
			else
				o->prestart_idle_s = (unsigned)v;
			break;
		}
		case 'E': { /* serve --stdio reads it here; serve --listen in serve_cmd.c */
			char *end = NULL;
			unsigned long v = strtoul(optarg, &end, 10);
			if (!*optarg || *end || v == 0 || v > 100000) {
				fprintf(stderr, "codepod: --max-executions must be a number from 1 to 100000\n");
				return -1;
			}
			o->max_executions = (unsigned)v;
			break;
		}
		case 'x': break;
		case 'h': usage(stdout); return 1;
		default: usage(stderr); return -1;
		}
	}
	if (optind < argc)
		o->file = argv[optind++];
	if (optind < argc) {
		fprintf(stderr, "codepod: unexpected argument: %s\n", argv[optind]);
		return -1;
	}
	return 0;
}

/* Builds the backend the options name; prints the reason and returns NULL
 * when it cannot run here. */
static struct cp_backend *make_backend(uv_loop_t *loop, const struct opts *o)
{
	struct cp_err err;
	if (o->backend && strcmp(o->backend, "kubernetes") == 0) {
		struct cp_backend *kb = NULL;
		if (kube_backend_from_options(loop, &o->kube, &kb, &err)) {
			fprintf(stderr, "codepod: kubernetes backend: %s\n", err.msg);
			return NULL;
		}
		return kb;
	}
	if (o->backend && strcmp(o->backend, "local") != 0) {
		fprintf(stderr, "codepod: unknown backend \"%s\" (local or kubernetes)\n", o->backend);
		return NULL;
	}
	char node[PATH_MAX];
	if (local_node_find(o->node, node, sizeof node, &err)) {
		fprintf(stderr, "codepod: %s\n", err.msg);
		return NULL;
	}
	int isolate = !o->no_isolation;
	if (isolate && !local_bwrap_usable(&err)) {
		fprintf(stderr, "codepod: %s.\nThe local backend isolates every program with "
		        "bubblewrap. Install it (apt-get install bubblewrap) or, to run programs "
		        "without isolation on this machine, start codepod with --no-isolation.\n",
		        err.msg);
		return NULL;
	}
	if (!isolate)
		cp_log(CP_LOG_WARN, "local.no_isolation", "message",
		       json_string("programs run WITHOUT isolation: they can reach the network "
		                   "and write anywhere this user can"), NULL);
	char buf[PATH_MAX];
	const char *state = o->state_dir ? o->state_dir : default_state_dir(buf, sizeof buf);
	const char *hide[3] = { NULL, NULL, NULL };
	size_t nhide = 0;
	if (o->token_file)
		hide[nhide++] = o->token_file;
	if (o->audit_file)
		hide[nhide++] = o->audit_file;
	struct local_config cfg = { loop, state, node, isolate, o->sandbox_user, o->sandbox_uids,
	                               hide };
	struct cp_backend *b = NULL;
	if (local_new(&cfg, &b, &err)) {
		if (isolate && err.code == CP_E_UNSUPPORTED)
			fprintf(stderr, "codepod: %s.\nThe local backend runs every program without "
			        "privileges (no capabilities, no_new_privs, a seccomp filter%s) and "
			        "refuses to start without them. To run programs without isolation on "
			        "this machine, start codepod with --no-isolation.\n", err.msg,
			        geteuid() == 0 ? ", a non-root user" : "");
		else
			fprintf(stderr, "codepod: %s\n", err.msg);
		return NULL;
	}
	return b;
}

/* The engine and its backend, released together. */
struct held {
	struct codepod *cp;
	struct cp_backend *b;
};

/* A backend keeps the loop alive (its timers, its API connections), and so
 * do runners waiting for an execution, until released; called when the work
 * is over, and again (harmlessly) at exit. */
static void release_backend(void *ud)
{
	struct held *h = ud;
	if (h->cp)
		codepod_quiesce(h->cp);
	if (h->b) {
		h->b->ops->destroy(h->b);
		h->b = NULL;
	}
}

/* --policy-defaults / --policy-ceiling: JSON objects with the policy keys. */
static int deployment_policy(const struct opts *o, struct codepod_config *cfg)
{
	json_error_t je;
	json_t *def = o->policy_defaults ? json_loads(o->policy_defaults, 0, &je) : NULL;
	json_t *ceil = o->policy_ceiling ? json_loads(o->policy_ceiling, 0, &je) : NULL;
	struct cp_err err;
	int rc = 0;
	if ((o->policy_defaults && !json_is_object(def)) || (o->policy_ceiling && !json_is_object(ceil))) {
		fprintf(stderr, "codepod: --policy-defaults and --policy-ceiling take a JSON object "
		        "such as '{\"timeoutMs\":60000}'\n");
		rc = -1;
	} else if (cp_policy_deployment(&cfg->defaults, &cfg->ceiling, def, ceil, &err)) {
		fprintf(stderr, "codepod: --policy-defaults/--policy-ceiling: %s\n", err.msg);
		rc = -1;
	}
	json_decref(def);
	json_decref(ceil);
	return rc;
}

static int make_engine(uv_loop_t *loop, struct cp_backend *b, const struct opts *o,
                       struct codepod **cp)
{
	struct codepod_config cfg = { .loop = loop, .backend = b,
	                              .prestart_max = o->prestart_max,
	                              .prestart_idle_s = o->prestart_idle_s };
	if (deployment_policy(o, &cfg))
		return -1;
	struct cp_err err;
	if (codepod_new(&cfg, cp, &err)) {
		fprintf(stderr, "codepod: %s\n", err.msg);
		return -1;
	}
	return 0;
}

/* ---- serve --stdio ---- */

struct serve_state {
	struct broker_stdio *stdio;
	struct held *held;
	uv_signal_t sigterm, sigint;
};

static void on_serve_done(void *ud)
{
	struct serve_state *st = ud;
	uv_close((uv_handle_t *)&st->sigterm, NULL);
	uv_close((uv_handle_t *)&st->sigint, NULL);
	release_backend(st->held);
}

static void on_signal(uv_signal_t *h, int sig)
{
	struct serve_state *st = h->data;
	cp_log(CP_LOG_INFO, "serve.signal", "signal", json_integer(sig), NULL);
	broker_stdio_shutdown(st->stdio);
}

static int cmd_serve(uv_loop_t *loop, const struct opts *o, int argc, char **argv)
{
	if (o->stdio == o->listen) {
		fprintf(stderr, "codepod: serve needs either --stdio or --listen HOST:PORT\n");
		return 2;
	}
	struct cp_backend *b = make_backend(loop, o);
	struct codepod *cp = NULL;
	if (!b || make_engine(loop, b, o, &cp)) {
		if (b)
			b->ops->destroy(b);
		return 2;
	}
	struct held h = { cp, b };
	if (o->listen) {
		int hrc = broker_serve_main(loop, cp, argc, argv, release_backend, &h);
		release_backend(&h);
		h.cp = NULL;
		codepod_free(cp);
		uv_run(loop, UV_RUN_DEFAULT);
		return hrc;
	}
	struct cp_idset *ids = cp_idset_new(RECENT_IDS);
	struct serve_state st = { .held = &h };
	struct cp_err err;
	size_t max_message = (size_t)(16u << 20) + (1u << 20);
	unsigned max_exec = o->max_executions ? o->max_executions : 256;
	int rc = ids ? broker_stdio_start(loop, cp, ids, max_message, max_exec, on_serve_done, &st,
	                                  &st.stdio, &err)
	             : cp_err_set(&err, CP_E_NOMEM, "out of memory");
	if (rc) {
		fprintf(stderr, "codepod: %s\n", err.msg);
	} else {
		uv_signal_init(loop, &st.sigterm);
		uv_signal_init(loop, &st.sigint);
		st.sigterm.data = st.sigint.data = &st;
		uv_signal_start(&st.sigterm, on_signal, SIGTERM);
		uv_signal_start(&st.sigint, on_signal, SIGINT);
		cp_log(CP_LOG_INFO, "serve.start", "transport", json_string("stdio"),
		       "backend", json_string(b->name), NULL);
		uv_run(loop, UV_RUN_DEFAULT);
		broker_stdio_free(st.stdio);
		uv_run(loop, UV_RUN_DEFAULT);
	}
	cp_idset_free(ids);
	release_backend(&h);
	h.cp = NULL;
	codepod_free(cp);
	uv_run(loop, UV_RUN_DEFAULT);
	return rc ? 2 : 0;
}

/* ---- run FILE ---- */

static char *read_file(const char *path, size_t max, size_t *len, struct cp_err *err)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	if (!f) {
		cp_err_errno(err, CP_E_IO, errno, "%s", path);
		return NULL;
	}
	size_t cap = 65536, n = 0;
	char *buf = malloc(cap);
	while (buf) {
		if (n == cap) {
			if (cap > max) {
				cp_err_set(err, CP_E_TOO_BIG, "%s is larger than %zu bytes", path, max);
				free(buf);
				buf = NULL;
				break;
			}
			char *nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
		size_t r = fread(buf + n, 1, cap - n, f);
		n += r;
		if (r == 0)
			break;
	}
	if (f != stdin)
		fclose(f);
	if (buf) {
		*len = n;
	}
	return buf;
}

struct run_state {
	json_t *outcome;
	struct held *held;
	uv_timer_t later;
};

static void on_run_over(uv_timer_t *t)
{
	struct run_state *st = t->data;
	uv_close((uv_handle_t *)t, NULL);
	release_backend(st->held);
}

static void on_run_done(void *ud, const json_t *outcome)
{
	struct run_state *st = ud;
	st->outcome = json_incref((json_t *)outcome);
	/* Not from inside the engine's callback: on the next loop turn. */
	uv_timer_start(&st->later, on_run_over, 0, 0);
}

static json_t *run_request(const struct opts *o, const char *src, size_t len, json_t *decls,
                           struct cp_err *err)
{
	json_t *policy = NULL;
	if (o->policy) {
		json_error_t je;
		policy = json_loads(o->policy, 0, &je);
		if (!policy) {
			cp_err_set(err, CP_E_INVALID_REQUEST, "--policy: %s", je.text);
			return NULL;
		}
	}
	json_t *req = json_pack("{s:s,s:s,s:s%,s:O}", "id", "run", "conversation",
	                        o->conversation ? o->conversation : "default", "js", src, len,
	                        "tools", decls);
	if (!req) {
		cp_err_set(err, CP_E_INVALID_REQUEST, "%s is not valid UTF-8 text", o->file);
		json_decref(policy);
		return NULL;
	}
	if (policy)
		json_object_set_new(req, "policy", policy);
	return req;
}

static int cmd_run(uv_loop_t *loop, const struct opts *o)
{
	if (!o->file) {
		usage(stderr);
		return 2;
	}
	struct cp_err err;
	struct broker_cmdtools *tools = NULL;
	json_t *decls = NULL;
	if (broker_cmdtools_load(loop, o->tools, &tools, &decls, &err)) {
		fprintf(stderr, "codepod: %s\n", err.msg);
		return 2;
	}
	size_t len = 0;
	char *src = read_file(o->file, 64u << 20, &len, &err);
	json_t *req = src ? run_request(o, src, len, decls, &err) : NULL;
	free(src);
	if (!req) {
		fprintf(stderr, "codepod: %s\n", err.msg);
		json_decref(decls);
		broker_cmdtools_free(tools);
		return 2;
	}
	int status = 2;
	struct held h = { NULL, make_backend(loop, o) };
	struct opts one = *o;
	one.prestart_max = 0; /* one execution: nothing to start ahead */
	if (h.b && make_engine(loop, h.b, &one, &h.cp) == 0) {
		struct codepod *cp = h.cp;
		struct run_state st = { .held = &h };
		struct codepod_exec *e = NULL;
		uv_timer_init(loop, &st.later);
		st.later.data = &st;
		broker_cmdtools_bind(tools, on_run_done, &st);
		if (codepod_submit(cp, req, &broker_cmdtools_host, tools, &e, &err)) {
			fprintf(stderr, "codepod: %s\n", err.msg);
		} else {
			uv_run(loop, UV_RUN_DEFAULT);
			if (st.outcome) {
				json_dumpf(st.outcome, stdout, JSON_INDENT(2));
				fputc('\n', stdout);
				status = json_is_object(json_object_get(st.outcome, "error")) ? 1 : 0;
				json_decref(st.outcome);
			}
		}
		if (!uv_is_closing((uv_handle_t *)&st.later))
			uv_close((uv_handle_t *)&st.later, NULL);
		release_backend(&h);
		uv_run(loop, UV_RUN_DEFAULT);
		h.cp = NULL;
		codepod_free(cp);
	}
	release_backend(&h);
	json_decref(req);
	json_decref(decls);
	broker_cmdtools_free(tools);
	return status;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
		printf("codepod %s\n", CODEPOD_VERSION);
		return 0;
	}
	if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(cmd, "declarations") == 0)
		return cli_declarations(argc == 3 ? argv[2] : NULL);
	struct opts o = { 0 };
	int prc = parse_opts(argc - 1, argv + 1, &o);
	if (prc)
		return prc > 0 ? 0 : 2;
	uv_loop_t loop;
	uv_loop_init(&loop);
	int rc;
	if (strcmp(cmd, "serve") == 0) {
		rc = cmd_serve(&loop, &o, argc - 1, argv + 1);
	} else if (strcmp(cmd, "run") == 0) {
		rc = cmd_run(&loop, &o);
	} else {
		fprintf(stderr, "codepod: unknown command: %s\n", cmd);
		usage(stderr);
		rc = 2;
	}
	uv_run(&loop, UV_RUN_DEFAULT);
	if (uv_loop_close(&loop) != 0)
		cp_log(CP_LOG_WARN, "loop.close", "message", json_string("handles left open at exit"), NULL);
	return rc;
}
