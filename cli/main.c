/*
 * main.c - the codepod command: `serve --stdio`, `serve --listen`, `run FILE`,
 * `declarations TOOLS.json`, `--version`. Each subcommand's options are the
 * tables below (serve --listen's are in serve_cmd.c), read in one pass.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <linux/close_range.h>
#include <openssl/crypto.h>

#include "broker/cmdtool.h"
#include "broker/decl.h"
#include "broker/otlp.h"
#include "cli/otlp_setup.h"
#include "runner/codepod.h"
#include "runner/continuation.h"
#include "runner/spent.h"
#include "cli/decl_cli.h"
#include "base/fileio.h"
#include "base/idset.h"
#include "base/version.h"
#include "k8s/backend/kube_backend.h"
#include "k8s/backend/kube_snap.h"
#include "runner/local/local_backend.h"
#include "base/log.h"
#include "cli/serve_cmd.h"
#include "cli/options.h"
#include "runner/prestart.h"
#include "broker/stdio_serve.h"

/* The execution ids a server refuses to reuse: the running ones and the
 * last finished ones. No fewer than --max-executions allows at most. */
#define RECENT_IDS 100000

struct opts {
	/* the backend (serve and run) */
	const char *backend;
	struct kube_backend_options kube;
	const char *state_dir;
	const char *node;
	const char *sandbox_user;
	const char *sandbox_uids;
	int no_isolation;
	int no_memory_bound;
	int no_disk_bound;
	unsigned workspace_idle_s;
	unsigned max_sandbox_pids;
	/* snapshots (store/snapshots.h) */
	const char *snapshot_url, *s3_endpoint, *s3_region, *s3_credentials_file;
	const char *snapshot_key_file;
	unsigned snapshot_ttl_s;
	unsigned snapshot_delay_s;   /* --snapshot-delay */
	uint64_t snapshot_max_bytes; /* --snapshot-max-bytes */
	/* the engine (serve and run) */
	const char *policy_defaults, *policy_ceiling; /* the deployment's */
	unsigned prestart_max;    /* --prestart N */
	unsigned prestart_idle_s; /* --prestart-idle SECONDS */
	const char *continuation_key_file;
	unsigned continuation_ttl_s;
	/* serve */
	int stdio;
	unsigned max_executions;       /* both forms */
	const char *otlp_endpoint;     /* both forms; NULL: the environment's, or none */
	const char *otlp_headers_file; /* both forms */
	struct cli_listen_opts listen; /* serve --listen's own */
	/* run */
	const char *tools;
	const char *conversation;
	const char *policy;
	const char *file;
};

static int set_log_level(void *base, const char *arg)
{
	(void)base;
	int lvl = cp_log_parse_level(arg);
	if (lvl < 0) {
		fprintf(stderr, "codepod: --log-level must be debug, info, warn or error\n");
		return -1;
	}
	cp_log_set_level((enum cp_log_level)lvl);
	return 0;
}

/* The packages programs can require, for the declarations to name. */
static int set_sandbox_packages(void *base, const char *arg)
{
	(void)base;
	struct cp_err err;
	if (broker_decl_set_packages(arg, &err) == 0)
		return 0;
	fprintf(stderr, "codepod: --sandbox-packages: %s\n", err.msg);
	return -1;
}

static const struct cli_opt decl_opts[] = {
	{ "sandbox-packages", "LIST", CLI_CALL, .call = set_sandbox_packages,
	  .help = "the npm packages programs can require (comma-separated, such as "
	          "lodash,zod), named in the declarations (default: Node's built-ins only)" },
	CLI_END,
};

#define O struct opts
static const struct cli_opt stdio_opts[] = {
	{ "stdio", NULL, CLI_SET_AT(O, stdio, 1),
	  .help = "the session protocol as JSON lines on stdin and stdout" },
	CLI_END,
};

static const struct cli_opt serve_opts[] = {
	{ "max-executions", "N", CLI_UINT_AT(O, max_executions, 1, 100000),
	  .help = "executions running at once; over it, TOO_MANY_EXECUTIONS" },
	{ "otlp-endpoint", "URL", CLI_STR_AT(O, otlp_endpoint),
	  .help = "export spans over OTLP/HTTP JSON to URL/v1/traces (default: "
	          "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT when set, "
	          "else none)" },
	{ "otlp-headers-file", "FILE", CLI_STR_AT(O, otlp_headers_file), CLI_SECRET,
	  .help = "headers sent with every span export, one \"Name: value\" per line (a "
	          "collector's API key), besides OTEL_EXPORTER_OTLP_HEADERS" },
	CLI_END,
};

static const struct cli_opt run_opts[] = {
	{ "tools", "TOOLS.json", CLI_STR_AT(O, tools),
	  .help = "the tools the program may call, each a command codepod runs" },
	{ "conversation", "KEY", CLI_STR_AT(O, conversation),
	  .help = "the conversation, whose workspace the program runs in (default: default)" },
	{ "policy", "JSON", CLI_STR_AT(O, policy),
	  .help = "the execution's policy, such as '{\"timeoutMs\":60000}'" },
	CLI_END,
};

static const struct cli_opt engine_opts[] = {
	{ "backend", "local|kubernetes", CLI_STR_AT(O, backend),
	  .help = "where programs run (default: local)" },
	{ "policy-defaults", "JSON", CLI_STR_AT(O, policy_defaults),
	  .help = "the deployment's policy defaults, a JSON object such as '{\"timeoutMs\":60000}'" },
	{ "policy-ceiling", "JSON", CLI_STR_AT(O, policy_ceiling),
	  .help = "lowers the deployment's policy ceilings, a JSON object" },
	{ "prestart", "N", CLI_UINT_AT(O, prestart_max, 0, 100000),
	  .help = "runners started ahead of their execution, in all; 0: none; "
	          "$CODEPOD_PRESTART sets the default" },
	{ "prestart-idle", "SECONDS", CLI_UINT_AT(O, prestart_idle_s, 1, 100000),
	  .help = "how long a started runner waits after its conversation's last execution" },
	{ "continuation-key-file", "FILE", CLI_STR_AT(O, continuation_key_file), CLI_SECRET,
	  .help = "keys of suspended executions' continuations, a KEYID:HEX line each; the "
	          "first signs, all verify (default: a random key, lost at exit)" },
	{ "continuation-ttl", "SECONDS", CLI_UINT_AT(O, continuation_ttl_s, 1, 31536000),
	  .help = "how long a continuation can be resumed (default 86400)" },
	{ "log-level", "debug|info|warn|error", CLI_CALL, .call = set_log_level,
	  .help = "log lines (on stderr) of this level and above (default: info)" },
	CLI_END,
};

static const struct cli_opt local_opts[] = {
	{ "state-dir", "DIR", CLI_STR_AT(O, state_dir),
	  .help = "the conversations' workspaces (on Kubernetes with --snapshot-url: the "
	          "snapshots on their way) (default: $CODEPOD_STATE_DIR, else "
	          "$HOME/.local/state/codepod)" },
	{ "node", "PATH", CLI_STR_AT(O, node),
	  .help = "the Node.js binary (default: $CODEPOD_NODE, the project's own, then PATH)" },
	{ "sandbox-uids", "FIRST-LAST", CLI_STR_AT(O, sandbox_uids),
	  .help = "as root, each conversation's programs run as a user of their own from "
	          "this range (default 1879048192-1879113727)" },
	{ "sandbox-user", "USER|UID[:GID]", CLI_STR_AT(O, sandbox_user),
	  .help = "as root, every program as this one user instead" },
	{ "no-memory-bound", NULL, CLI_SET_AT(O, no_memory_bound, 1),
	  .help = "run even where no cgroup can bound the sandboxes' memory and processes" },
	{ "no-disk-bound", NULL, CLI_SET_AT(O, no_disk_bound, 1),
	  .help = "run even where no image can bound the workspaces' disk (maxWorkspaceBytes, "
	          "maxWorkspaceFiles: needs root, loop devices and e2fsprogs)" },
	{ "workspace-idle-s", "S", CLI_UINT_AT(O, workspace_idle_s, 1, 86400),
	  .help = "a bounded workspace unused S seconds is unmounted until its next use "
	          "(default 300)" },
	{ "max-sandbox-pids", "N", CLI_UINT_AT(O, max_sandbox_pids, 1, 4194304),
	  .help = "processes of all sandboxes together (default: three quarters of kernel.pid_max)" },
	{ "no-isolation", NULL, CLI_SET_AT(O, no_isolation, 1),
	  .help = "programs run without isolation: they can reach the network and write "
	          "anywhere this user can" },
	CLI_END,
};

/* --snapshot-max-bytes: bytes, or with a K, M, G or T suffix (powers of 1024). */
static int set_snapshot_max_bytes(void *base, const char *arg)
{
	struct opts *o = base;
	char *end = NULL;
	errno = 0;
	unsigned long long v = strtoull(arg, &end, 10);
	unsigned shift = 0;
	if (end && *end && !end[1]) {
		const char *u = strchr("KMGT", *end);
		shift = u ? 10u * (unsigned)(u - "KMGT" + 1) : 99u;
		end++;
	}
	if (!*arg || *arg == '-' || errno || !end || *end || shift == 99u || v == 0 ||
	    v > (1ull << 50) >> shift) {
		fprintf(stderr, "codepod: --snapshot-max-bytes must be a number of bytes from 1 to "
		        "1P, with an optional K, M, G or T suffix (such as 4G)\n");
		return -1;
	}
	o->snapshot_max_bytes = (uint64_t)v << shift;
	return 0;
}

static const struct cli_opt snapshot_opts[] = {
	{ "snapshot-url", "s3://BUCKET/PREFIX|gs://BUCKET/PREFIX", CLI_STR_AT(O, snapshot_url),
	  .help = "keep each conversation's workspace in this bucket: snapshotted after it "
	          "changed, before its pod is reaped and at drain; restored when it (or its pod) "
	          "is new; s3:// signs with AWS keys, gs:// is Google Cloud Storage with a token "
	          "from the GCP metadata server (GKE Workload Identity; $GCE_METADATA_HOST "
	          "overrides its host)" },
	{ "s3-endpoint", "URL", CLI_STR_AT(O, s3_endpoint),
	  .help = "the store, for one other than AWS (MinIO, Ceph, GCS with HMAC keys: "
	          "https://storage.googleapis.com, which gs:// uses by default)" },
	{ "s3-region", "REGION", CLI_STR_AT(O, s3_region),
	  .help = "the store's region, signed into each request (default: us-east-1)" },
	{ "s3-credentials-file", "FILE", CLI_STR_AT(O, s3_credentials_file), CLI_SECRET,
	  .help = "the store's keys, AWS credentials-file format, read again when it changes "
	          "(default: $AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY, $AWS_SESSION_TOKEN)" },
	{ "snapshot-key-file", "FILE", CLI_STR_AT(O, snapshot_key_file), CLI_SECRET,
	  .help = "encrypt snapshots (AES-256-GCM) with the first key of FILE, lines "
	          "'KEYID HEX64'; every key listed decrypts (rotation)" },
	{ "snapshot-ttl", "SECONDS", CLI_UINT_AT(O, snapshot_ttl_s, 0, 1000000000),
	  .help = "snapshots last written longer ago are deleted; 0: kept until the "
	          "conversation is deleted" },
	{ "snapshot-delay", "SECONDS", CLI_UINT_AT(O, snapshot_delay_s, 1, 30),
	  .help = "a changed workspace is snapshotted this long after the execution that "
	          "changed it (later changes within it are in the same snapshot)" },
	{ "snapshot-max-bytes", "BYTES", CLI_CALL, .call = set_snapshot_max_bytes,
	  .help = "the workspace ceiling: a workspace whose files hold more is not "
	          "snapshotted (warning snapshot.failed, \"workspace over the snapshot "
	          "ceiling\"); K, M, G, T suffixes (default 4G)" },
	CLI_END,
};

static const struct cli_opt kube_opts[] = {
	{ "kubeconfig", "FILES", CLI_STR_AT(O, kube.kubeconfig),
	  .help = "a KUBECONFIG-style list (default: $KUBECONFIG, else ~/.kube/config; "
	          "no kubeconfig: in-cluster)" },
	{ "context", "NAME", CLI_STR_AT(O, kube.context),
	  .help = "the kubeconfig's context (default: its current one)" },
	{ "namespace", "NS", CLI_STR_AT(O, kube.ns),
	  .help = "the sandbox pods' namespace (default: the context's)" },
	{ "pod-template", "FILE", CLI_STR_AT(O, kube.pod_template),
	  .help = "the sandbox pod, YAML or JSON (default: the built-in one)" },
	{ "warm-pool", "N", CLI_UINT_AT(O, kube.warm_pool, 0, 100000),
	  .help = "ready unclaimed pods to keep" },
	{ "idle-ttl", "SECONDS", CLI_UINT_AT(O, kube.idle_ttl_s, 0, 100000),
	  .help = "a conversation's pod idle longer is removed; 0: never" },
	{ "template-drift-idle", "SECONDS", CLI_UINT_AT(O, kube.drift_idle_s, 0, 100000),
	  .help = "a conversation's pod made by an older replica from another pod template, "
	          "idle this long, is snapshotted, deleted and restored into a pod of this "
	          "replica's template (needs --snapshot-url; without it such pods are kept and "
	          "reported); 0: never" },
	{ "no-supervisor", NULL, CLI_SET_AT(O, kube.no_supervisor, 1),
	  .help = "one exec per program, no supervisor in the pod ($CODEPOD_SUPERVISOR=0 "
	          "makes it the default)" },
	{ "supervisor", NULL, CLI_SET_AT(O, kube.no_supervisor, 0),
	  .help = "one exec per pod: a supervisor starts its programs" },
	{ "no-pod-helper", NULL, CLI_SET_AT(O, kube.no_pod_helper, 1),
	  .help = "the supervisor starts runners without the pod helper (no syscall filter, "
	          "subreaper or Landlock domain: see SECURITY.md)" },
	{ "pod-helper", NULL, CLI_SET_AT(O, kube.no_pod_helper, 0),
	  .help = "each runner's parent is the pod helper (the default)" },
	CLI_END,
};
#undef O

static const struct cli_group stdio_group = { "serve --stdio", stdio_opts };
static const struct cli_group serve_group = { "serve --stdio and serve --listen", serve_opts };
static const struct cli_group run_group = { "run", run_opts };
static const struct cli_group engine_group = { "serve and run", engine_opts };
static const struct cli_group local_group = { "serve and run, --backend local", local_opts };
static const struct cli_group kube_group = { "serve and run, --backend kubernetes", kube_opts };
static const struct cli_group snapshot_group = { "serve and run, snapshots", snapshot_opts };
static const struct cli_group decl_group = { "serve and declarations", decl_opts };

/* Each subcommand's groups; --help lists help_groups, in that order. */
static const struct cli_group *const serve_groups[] = {
	&stdio_group, &cli_listen_group, &serve_group, &engine_group, &local_group, &kube_group,
	&snapshot_group, &decl_group, &cli_help_group,
};
static const struct cli_group *const run_groups[] = {
	&run_group, &engine_group, &local_group, &kube_group, &snapshot_group, &cli_help_group,
};
static const struct cli_group *const decl_groups[] = { &decl_group, &cli_help_group };
static const struct cli_group *const help_groups[] = {
	&stdio_group, &cli_listen_group, &serve_group, &run_group, &engine_group, &local_group,
	&kube_group, &snapshot_group, &decl_group, &cli_help_group,
};
#define COUNT_OF(a) (sizeof(a) / sizeof *(a))
#define MAX_GROUPS COUNT_OF(help_groups) /* every subcommand's are among them */
_Static_assert(COUNT_OF(serve_groups) <= MAX_GROUPS && COUNT_OF(run_groups) <= MAX_GROUPS,
               "--help lists every group");

static void opts_defaults(struct opts *o)
{
	*o = (struct opts){ 0 };
	cli_listen_defaults(&o->listen);
	o->max_executions = o->listen.http.max_executions; /* one default, both forms */
	/* $CODEPOD_PRESTART is the default of --prestart (test harnesses switch
	 * the pre-started runner off for a whole run with it). */
	const char *ps = getenv("CODEPOD_PRESTART");
	char *ps_end = NULL;
	unsigned long psv = ps && *ps ? strtoul(ps, &ps_end, 10) : CODEPOD_PRESTART_DEFAULT_MAX;
	o->prestart_max = ps && *ps && (*ps_end || psv > 100000) ? CODEPOD_PRESTART_DEFAULT_MAX
	                                                          : (unsigned)psv;
	o->prestart_idle_s = CODEPOD_PRESTART_DEFAULT_IDLE_S;
	/* $CODEPOD_SUPERVISOR=0 is the default of --no-supervisor, the same way. */
	const char *sup = getenv("CODEPOD_SUPERVISOR");
	o->kube.no_supervisor = sup && strcmp(sup, "0") == 0;
	o->snapshot_delay_s = STORE_SNAPS_DEFAULT_DELAY_S;
	o->snapshot_max_bytes = STORE_SNAPS_DEFAULT_MAX_BYTES;
}

/* A group's fields: serve --listen's in its own struct, the others in opts. */
static void *base_of(const struct cli_group *g, struct opts *o)
{
	return g == &cli_listen_group ? (void *)&o->listen : (void *)o;
}

static void usage(FILE *f)
{
	struct opts d;
	opts_defaults(&d);
	fputs("usage:\n"
	      "  codepod serve --stdio [options]\n"
	      "  codepod serve --listen HOST:PORT [--listen ...] --token-file FILE [options]\n"
	      "  codepod run FILE --tools TOOLS.json [options]\n"
	      "  codepod declarations TOOLS.json   (- reads stdin)\n"
	      "  codepod --version\n"
	      "options, under the commands that take them:\n", f);
	for (size_t i = 0; i < COUNT_OF(help_groups); i++)
		cli_help(f, help_groups[i], base_of(help_groups[i], &d));
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

/* One pass over @argv (argv[0] the subcommand) with its @groups; the
 * positional arguments end up at argv[*args ..argc). */
static int parse_opts(int argc, char **argv, const struct cli_group *const *groups, size_t n,
                      struct opts *o, const struct cli_opt **given, int *args)
{
	struct cli_use uses[MAX_GROUPS];
	for (size_t i = 0; i < n; i++)
		uses[i] = (struct cli_use){ groups[i], base_of(groups[i], o) };
	return cli_parse(argc, argv, uses, n, given, args);
}

/* Builds the backend the options name; prints the reason and returns NULL
 * when it cannot run here. */
/* --snapshot-url's store (NULL and 0 without it; -1: the reason printed). */
static int make_store(uv_loop_t *loop, const struct opts *o, const char *state,
                      struct store_snaps **out)
{
	*out = NULL;
	if (!o->snapshot_url)
		return 0;
	struct store_snaps_config sc = {
		.loop = loop, .url = o->snapshot_url, .endpoint = o->s3_endpoint,
		.region = o->s3_region, .credentials_file = o->s3_credentials_file,
		.spool_dir = state, .ttl_s = o->snapshot_ttl_s,
		.key_file = o->snapshot_key_file,
		.debounce_ms = o->snapshot_delay_s * 1000u,
		.max_bytes = o->snapshot_max_bytes,
	};
	struct cp_err err;
	mkdir(state, 0700);
	if (store_snaps_new(&sc, out, &err)) {
		fprintf(stderr, "codepod: snapshots: %s\n", err.msg);
		return -1;
	}
	return 0;
}

/* The Kubernetes backend, and with --snapshot-url the coordinator of its
 * snapshots (*ks, attached to it). */
static struct codepod_backend *make_kube(uv_loop_t *loop, const struct opts *o,
                                         struct kube_snaps **ks)
{
	struct cp_err err;
	struct codepod_backend *kb = NULL;
	if (kube_backend_from_options(loop, &o->kube, &kb, &err)) {
		fprintf(stderr, "codepod: kubernetes backend: %s\n", err.msg);
		return NULL;
	}
	char buf[PATH_MAX];
	const char *state = o->state_dir ? o->state_dir : default_state_dir(buf, sizeof buf);
	struct store_snaps *snaps = NULL;
	if (make_store(loop, o, state, &snaps)) {
		kb->ops->destroy(kb);
		return NULL;
	}
	if (snaps) {
		struct kube_snaps_config kc = { .loop = loop, .store = snaps, .spool_dir = state };
		if (kube_snaps_new(kb, &kc, ks, &err)) { /* (the store is closed) */
			fprintf(stderr, "codepod: snapshots: %s\n", err.msg);
			kb->ops->destroy(kb);
			return NULL;
		}
	}
	return kb;
}

static struct codepod_backend *make_backend(uv_loop_t *loop, const struct opts *o,
                                            struct kube_snaps **ks)
{
	struct cp_err err;
	*ks = NULL;
	if (o->backend && strcmp(o->backend, "kubernetes") == 0)
		return make_kube(loop, o, ks);
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
	/* Every file an option marked CLI_SECRET named: one rule, so a file
	 * option added later is hidden by being marked. */
	const char *const *hide = cli_secret_files();
	if (!isolate && hide[0])
		cp_log(CP_LOG_WARN, "local.secrets_visible", "message",
		       json_string("without isolation, programs can read every file this user can, "
		                   "the token, audit and webhook secret files included"), NULL);
	struct store_snaps *snaps = NULL;
	if (make_store(loop, o, state, &snaps))
		return NULL;
	struct local_config cfg = {
		.loop = loop, .state_dir = state, .node = node, .isolate = isolate,
		.sandbox_user = o->sandbox_user, .sandbox_uids = o->sandbox_uids, .hide = hide,
		.no_memory_bound = o->no_memory_bound, .max_sandbox_pids = o->max_sandbox_pids,
		.no_disk_bound = o->no_disk_bound, .workspace_idle_s = o->workspace_idle_s,
		.snaps = snaps,
	};
	struct codepod_backend *b = NULL;
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
	struct codepod_backend *b;
	struct broker_otlp *otlp; /* NULL: no spans exported */
	struct kube_snaps *ks;    /* the Kubernetes backend's snapshots, or NULL */
	int draining;
};

/* The snapshots due were taken (bounded): the backend can go. */
static void snaps_drained(void *ud)
{
	struct held *h = ud;
	h->ks = NULL;
	if (h->b) {
		h->b->ops->destroy(h->b);
		h->b = NULL;
	}
}

/* A backend keeps the loop alive (its timers, its API connections), and so
 * do runners waiting for an execution, until released; called when the work
 * is over, and again (harmlessly) at exit. */
static void release_backend(void *ud)
{
	struct held *h = ud;
	if (h->cp)
		codepod_quiesce(h->cp);
	if (h->ks) {
		/* Through the engine, which stays until the loop is dry. */
		if (!h->draining) {
			h->draining = 1;
			kube_snaps_drain(h->ks, 0, snaps_drained, h);
		}
	} else if (h->b) {
		h->b->ops->destroy(h->b);
		h->b = NULL;
	}
	/* The work is over: what is queued goes out, bounded (otlp.h). */
	broker_otlp_close(h->otlp);
	h->otlp = NULL;
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
	} else if (codepod_policy_deployment(&cfg->defaults, &cfg->ceiling, def, ceil, &err)) {
		fprintf(stderr, "codepod: --policy-defaults/--policy-ceiling: %s\n", err.msg);
		rc = -1;
	}
	json_decref(def);
	json_decref(ceil);
	return rc;
}

/* The continuations' keys and the record of those resumed, kept in the
 * state directory so a restarted codepod refuses them too. */
static int approvals(uv_loop_t *loop, const struct opts *o, struct codepod_config *cfg)
{
	struct cp_err err;
	if (o->continuation_key_file) {
		size_t len = 0;
		char *text = cp_read_file(o->continuation_key_file, 1u << 16, &len, &err);
		int rc = text ? codepod_keyring_parse(text, len, &cfg->continuation_keys, &err) : err.code;
		if (text) {
			OPENSSL_cleanse(text, len);
			free(text);
		}
		if (rc) {
			fprintf(stderr, "codepod: --continuation-key-file %s: %s\n",
			        o->continuation_key_file, err.msg);
			return -1;
		}
	}
	char buf[PATH_MAX], path[PATH_MAX + 32];
	const char *state = o->state_dir ? o->state_dir : default_state_dir(buf, sizeof buf);
	snprintf(path, sizeof path, "%s/resumed-continuations", state);
	mkdir(state, 0700); /* the local backend makes it too; the Kubernetes one does not */
	if (codepod_spent_open(loop, path, (uint64_t)time(NULL), &cfg->spent, &err)) {
		/* Approvals are not worth refusing to serve for: this process still
		 * refuses a continuation twice, a restart forgets. */
		cp_log(CP_LOG_WARN, "continuation.record", "message", json_string(err.msg), NULL);
		if (codepod_spent_open(loop, NULL, 0, &cfg->spent, &err)) {
			fprintf(stderr, "codepod: %s\n", err.msg);
			codepod_keyring_free(cfg->continuation_keys);
			cfg->continuation_keys = NULL;
			return -1;
		}
	}
	cfg->continuation_ttl_s = o->continuation_ttl_s;
	return 0;
}

static int make_engine(uv_loop_t *loop, struct codepod_backend *b, const struct opts *o,
                       struct broker_otlp *otlp, struct codepod **cp)
{
	struct codepod_config cfg = { .loop = loop, .backend = b,
	                              .prestart_max = o->prestart_max,
	                              .prestart_idle_s = o->prestart_idle_s,
	                              .span = otlp ? broker_otlp_span : NULL, .span_ud = otlp };
	if (deployment_policy(o, &cfg) || approvals(loop, o, &cfg))
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

/* @listen_given: the first of serve --listen's own options given, or NULL. */
static int cmd_serve(uv_loop_t *loop, const struct opts *o, const struct cli_opt *listen_given)
{
	int listen = o->listen.http.nlisten > 0;
	if (o->stdio == listen) {
		fprintf(stderr, "codepod: serve needs either --stdio or --listen HOST:PORT\n");
		return 2;
	}
	if (o->stdio && listen_given) {
		fprintf(stderr, "codepod: --%s is an option of serve --listen, not of serve --stdio\n",
		        listen_given->name);
		return 2;
	}
	struct broker_otlp *otlp = NULL;
	if (cli_otlp_start(loop, o->otlp_endpoint, o->otlp_headers_file, &otlp))
		return 2;
	struct kube_snaps *ks = NULL;
	struct codepod_backend *b = make_backend(loop, o, &ks);
	struct codepod *cp = NULL;
	if (!b || make_engine(loop, b, o, otlp, &cp)) {
		struct held fail = { NULL, b, NULL, ks, 0 };
		release_backend(&fail);
		broker_otlp_close(otlp);
		uv_run(loop, UV_RUN_DEFAULT);
		return 2;
	}
	if (ks)
		kube_snaps_set_engine(ks, cp);
	struct held h = { cp, b, otlp, ks, 0 };
	struct cp_idset *ids = cp_idset_new(RECENT_IDS);
	if (listen && ids) {
		struct cli_listen_opts lo = o->listen;
		lo.http.max_executions = o->max_executions;
		lo.http.otlp = otlp;
		int hrc = cli_serve_listen(loop, cp, ids, &lo, release_backend, &h);
		cp_idset_free(ids);
		release_backend(&h);
		h.cp = NULL;
		codepod_free(cp);
		uv_run(loop, UV_RUN_DEFAULT);
		return hrc;
	}
	/* serve --stdio; without an id set, either form ends below (out of memory) */
	struct serve_state st = { .held = &h };
	struct cp_err err;
	size_t max_message = (size_t)(16u << 20) + (1u << 20);
	int rc = ids ? broker_stdio_start(loop, cp, ids, max_message, o->max_executions,
	                                  on_serve_done, &st, &st.stdio, &err)
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
	char *src = strcmp(o->file, "-") == 0 ? cp_read_fd(STDIN_FILENO, "stdin", 64u << 20, &len, &err)
	                                      : cp_read_file(o->file, 64u << 20, &len, &err);
	json_t *req = src ? run_request(o, src, len, decls, &err) : NULL;
	free(src);
	if (!req) {
		fprintf(stderr, "codepod: %s\n", err.msg);
		json_decref(decls);
		broker_cmdtools_free(tools);
		return 2;
	}
	int status = 2;
	struct held h = { NULL, NULL, NULL, NULL, 0 };
	h.b = make_backend(loop, o, &h.ks);
	struct opts one = *o;
	one.prestart_max = 0; /* one execution: nothing to start ahead */
	if (h.b && make_engine(loop, h.b, &one, NULL, &h.cp) == 0) {
		struct codepod *cp = h.cp;
		if (h.ks)
			kube_snaps_set_engine(h.ks, cp);
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

/* Descriptors codepod's own parent left open without close-on-exec would
 * otherwise reach every process codepod starts, programs included: they are
 * marked close-on-exec before anything else runs. codepod itself never
 * relies on an inherited descriptor beyond 0, 1 and 2. */
static void cloexec_inherited(void)
{
	if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
		return;
	for (int fd = 3; fd < 65536; fd++) {
		int fl = fcntl(fd, F_GETFD);
		if (fl >= 0 && !(fl & FD_CLOEXEC))
			(void)fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
	}
}

int main(int argc, char **argv)
{
	cloexec_inherited();
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
		printf("codepod %s\n", CP_VERSION);
		return 0;
	}
	if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
		usage(stdout);
		return 0;
	}
	const struct cli_group *const *groups;
	size_t ngroups;
	if (strcmp(cmd, "serve") == 0) {
		groups = serve_groups;
		ngroups = COUNT_OF(serve_groups);
	} else if (strcmp(cmd, "run") == 0) {
		groups = run_groups;
		ngroups = COUNT_OF(run_groups);
	} else if (strcmp(cmd, "declarations") == 0) {
		groups = decl_groups;
		ngroups = COUNT_OF(decl_groups);
	} else {
		fprintf(stderr, "codepod: unknown command: %s\n", cmd);
		usage(stderr);
		return 2;
	}
	struct opts o;
	opts_defaults(&o);
	const struct cli_opt *given[MAX_GROUPS];
	int first = 1;
	int prc = parse_opts(argc - 1, argv + 1, groups, ngroups, &o, given, &first);
	if (prc == CLI_ASKED_HELP) {
		usage(stdout);
		return 0;
	}
	if (prc == CLI_BAD_USAGE)
		usage(stderr);
	if (prc != CLI_PARSED)
		return 2;
	char **rest = argv + 1 + first; /* the positional arguments */
	int nrest = argc - 1 - first;
	if (groups == decl_groups)
		return cli_declarations(nrest == 1 ? rest[0] : NULL);
	int takes = groups == run_groups; /* run FILE; serve takes none */
	if (takes && nrest > 0)
		o.file = rest[0];
	if (nrest > takes) {
		fprintf(stderr, "codepod: unexpected argument: %s\n", rest[takes]);
		return 2;
	}
	const struct cli_opt *listen_given = NULL;
	for (size_t i = 0; i < ngroups; i++)
		if (groups[i] == &cli_listen_group)
			listen_given = given[i];
	uv_loop_t loop;
	uv_loop_init(&loop);
	int rc;
	if (groups == serve_groups)
		rc = cmd_serve(&loop, &o, listen_given);
	else
		rc = cmd_run(&loop, &o);
	uv_run(&loop, UV_RUN_DEFAULT);
	if (uv_loop_close(&loop) != 0)
		cp_log(CP_LOG_WARN, "loop.close", "message", json_string("handles left open at exit"), NULL);
	return rc;
}
