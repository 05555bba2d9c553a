/*
 * http_server_metrics.c - counters kept from the outcomes the sessions
 * deliver (status, error.code, usage.startupMs/runMs/cpuMs/maxRssBytes and
 * the tool bytes, calls[].status), the Prometheus text exposition format
 * 0.0.4, and the audit line.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/http_server_int.h"
#include "base/buf.h"
#include "base/log.h"

#define MAX_SERIES 64
#define NBUCKETS 13

static const double bucket_s[NBUCKETS] = { 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                           2.5, 5, 10, 30, 60, 300 };

struct series {
	char a[40], b[40]; /* label values */
	unsigned long long n;
};

struct histo {
	unsigned long long buckets[NBUCKETS], count;
	double sum;
};

/* A histogram by labels (status, backend, ...), with buckets of its own.
 * Label values come from codepod's own outcome (status, usage.sandbox, a
 * fixed direction): a handful of series, never one per conversation. */
#define MAX_LBUCKETS 16
#define MAX_LSERIES 16

struct lseries {
	char labels[128]; /* `status="succeeded",backend="local"` */
	unsigned long long buckets[MAX_LBUCKETS], count;
	double sum;
};

struct lhisto {
	const char *name, *help;
	const double *bounds;
	int nbounds;
	struct lseries s[MAX_LSERIES];
	size_t n;
};

static const double cpu_s[] = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
                                30, 60, 300 };
static const double rss_bytes[] = { 16777216, 33554432, 67108864, 134217728, 268435456,
                                    536870912, 1073741824, 2147483648.0, 4294967296.0,
                                    8589934592.0 };
static const double tool_bytes[] = { 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576,
                                     4194304, 16777216, 67108864 };

struct broker_http_metrics {
	struct series execs[MAX_SERIES]; /* status, code */
	size_t nexecs;
	struct series ops[MAX_SERIES]; /* kind (command, file_read, ...), code */
	size_t nops;
	struct series file_bytes[MAX_SERIES]; /* kind: bytes moved */
	size_t nfile_bytes;
	struct series calls[MAX_SERIES]; /* status */
	size_t ncalls;
	struct series rejected[MAX_SERIES]; /* reason */
	size_t nrejected;
	struct histo startup, run;
	struct lhisto cpu, rss, tool;
	const struct broker_otlp *otlp;
};

#define LHISTO(h, n, text, b) \
	((h)->name = (n), (h)->help = (text), (h)->bounds = (b), \
	 (h)->nbounds = (int)(sizeof(b) / sizeof((b)[0])))

struct broker_http_metrics *broker_http_metrics_new(void)
{
	struct broker_http_metrics *m = calloc(1, sizeof(struct broker_http_metrics));
	if (!m)
		return NULL;
	_Static_assert(sizeof cpu_s / sizeof cpu_s[0] <= MAX_LBUCKETS, "cpu buckets");
	_Static_assert(sizeof tool_bytes / sizeof tool_bytes[0] <= MAX_LBUCKETS, "tool buckets");
	LHISTO(&m->cpu, "codepod_execution_cpu_seconds",
	       "CPU time of an execution's processes (usage.cpuMs), by status and backend.", cpu_s);
	LHISTO(&m->rss, "codepod_execution_max_rss_bytes",
	       "Peak resident set of an execution's largest process (usage.maxRssBytes), by "
	       "status and backend.", rss_bytes);
	LHISTO(&m->tool, "codepod_tool_bytes",
	       "JSON bytes of an execution's tool inputs and outputs (usage.toolInputBytes, "
	       "toolOutputBytes), for executions that called a tool.", tool_bytes);
	return m;
}

void broker_http_metrics_set_otlp(struct broker_http_metrics *m, const struct broker_otlp *otlp)
{
	if (m)
		m->otlp = otlp;
}

void broker_http_metrics_free(struct broker_http_metrics *m)
{
	free(m);
}

/* Label values come from codepod's own outcome: still, keep them to a
 * label-safe alphabet so the exposition stays valid whatever they hold. */
static void label_copy(char *dst, size_t cap, const char *src)
{
	size_t i = 0;
	for (; src && src[i] && i + 1 < cap; i++) {
		char c = src[i];
		int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		         (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
		dst[i] = ok ? c : '_';
	}
	dst[i] = '\0';
}

static void bump(struct series *s, size_t *n, const char *a, const char *b)
{
	char la[40], lb[40];
	label_copy(la, sizeof la, a);
	label_copy(lb, sizeof lb, b ? b : "");
	for (size_t i = 0; i < *n; i++) {
		if (strcmp(s[i].a, la) == 0 && strcmp(s[i].b, lb) == 0) {
			s[i].n++;
			return;
		}
	}
	if (*n == MAX_SERIES)
		return;
	memcpy(s[*n].a, la, sizeof la);
	memcpy(s[*n].b, lb, sizeof lb);
	s[*n].n = 1;
	(*n)++;
}

static void observe(struct histo *h, double v)
{
	for (int i = 0; i < NBUCKETS; i++)
		if (v <= bucket_s[i])
			h->buckets[i]++;
	h->count++;
	h->sum += v;
}

/* @labels is label-safe already (label_copy'd values). */
static void observe_l(struct lhisto *h, const char *labels, double v)
{
	struct lseries *s = NULL;
	for (size_t i = 0; i < h->n && !s; i++)
		if (strcmp(h->s[i].labels, labels) == 0)
			s = &h->s[i];
	if (!s) {
		if (h->n == MAX_LSERIES)
			return;
		s = &h->s[h->n++];
		snprintf(s->labels, sizeof s->labels, "%s", labels);
	}
	for (int i = 0; i < h->nbounds; i++)
		if (v <= h->bounds[i])
			s->buckets[i]++;
	s->count++;
	s->sum += v;
}

static void observe_usage(struct broker_http_metrics *m, const char *status, const json_t *usage)
{
	char st[40], be[40], labels[128];
	label_copy(st, sizeof st, status);
	label_copy(be, sizeof be, json_string_value(json_object_get(usage, "sandbox")));
	snprintf(labels, sizeof labels, "status=\"%s\",backend=\"%s\"", st, be);
	const json_t *cpu = json_object_get(usage, "cpuMs"), *rss = json_object_get(usage, "maxRssBytes");
	if (json_is_integer(cpu)) /* absent: the backend could not read it */
		observe_l(&m->cpu, labels, (double)json_integer_value(cpu) / 1000.0);
	if (json_is_integer(rss))
		observe_l(&m->rss, labels, (double)json_integer_value(rss));
	if (json_integer_value(json_object_get(usage, "toolCalls")) > 0) {
		static const char *const dirs[2][2] = { { "input", "toolInputBytes" },
			                                { "output", "toolOutputBytes" } };
		for (int i = 0; i < 2; i++) {
			char l2[160];
			snprintf(l2, sizeof l2, "direction=\"%s\",%s", dirs[i][0], labels);
			observe_l(&m->tool, l2, (double)json_integer_value(json_object_get(usage, dirs[i][1])));
		}
	}
}

/* What an outcome ended: "program", "command", or a file operation's
 * request type (a file_result has an op, a command_result an exitCode). */
static const char *outcome_kind(const json_t *outcome, char *buf, size_t cap)
{
	const char *op = json_string_value(json_object_get(outcome, "op"));
	if (op) {
		snprintf(buf, cap, "%s%s", strncmp(op, "archive_", 8) == 0 ? "" : "file_", op);
		return buf;
	}
	return json_object_get(outcome, "exitCode") ? "command" : "program";
}

void broker_http_metrics_outcome(struct broker_http_metrics *m, const json_t *outcome)
{
	const char *status = json_string_value(json_object_get(outcome, "status"));
	const char *code = json_string_value(json_object_get(json_object_get(outcome, "error"), "code"));
	char kbuf[32];
	const char *kind = outcome_kind(outcome, kbuf, sizeof kbuf);
	if (strcmp(kind, "program")) { /* commands and file operations: counted apart */
		bump(m->ops, &m->nops, kind, code ? code : "OK");
		const json_t *fb = json_object_get(json_object_get(outcome, "usage"), "fileBytes");
		if (json_is_integer(fb) && json_integer_value(fb) > 0) {
			bump(m->file_bytes, &m->nfile_bytes, kind, NULL); /* the series, counted once */
			for (size_t i = 0; i < m->nfile_bytes; i++)
				if (!strcmp(m->file_bytes[i].a, kind))
					m->file_bytes[i].n += (unsigned long long)json_integer_value(fb) - 1;
		}
		return;
	}
	bump(m->execs, &m->nexecs, status ? status : "unknown", code ? code : "OK");
	const json_t *usage = json_object_get(outcome, "usage");
	const json_t *su = json_object_get(usage, "startupMs"), *ru = json_object_get(usage, "runMs");
	if (json_is_integer(su))
		observe(&m->startup, (double)json_integer_value(su) / 1000.0);
	if (json_is_integer(ru))
		observe(&m->run, (double)json_integer_value(ru) / 1000.0);
	if (json_is_object(usage))
		observe_usage(m, status ? status : "unknown", usage);
	size_t i;
	const json_t *c;
	json_array_foreach(json_object_get(outcome, "calls"), i, c)
		bump(m->calls, &m->ncalls, json_string_value(json_object_get(c, "status")), NULL);
}

void broker_http_metrics_count(struct broker_http_metrics *m, const char *what)
{
	bump(m->rejected, &m->nrejected, what, NULL);
}

/* The exposition being written. Once a put fails the text is dropped
 * whole (a cut exposition would be read as valid). */
struct out {
	struct cp_buf text;
	int failed;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
	if (o->failed)
		return;
	va_list ap;
	va_start(ap, fmt);
	if (cp_buf_vaddf(&o->text, NULL, fmt, ap))
		o->failed = 1;
	va_end(ap);
}

static void put_histo(struct out *o, const char *name, const char *help, const struct histo *h)
{
	put(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
	for (int i = 0; i < NBUCKETS; i++)
		put(o, "%s_bucket{le=\"%g\"} %llu\n", name, bucket_s[i], h->buckets[i]);
	put(o, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.3f\n%s_count %llu\n", name, h->count, name,
	    h->sum, name, h->count);
}

static void put_le(struct out *o, const char *name, const char *labels, double le,
                   unsigned long long n)
{
	/* whole numbers (byte sizes) as such, not in %g's exponent form */
	if (le == (double)(unsigned long long)le && le >= 1)
		put(o, "%s_bucket{%s,le=\"%.0f\"} %llu\n", name, labels, le, n);
	else
		put(o, "%s_bucket{%s,le=\"%g\"} %llu\n", name, labels, le, n);
}

static void put_lhisto(struct out *o, const struct lhisto *h)
{
	put(o, "# HELP %s %s\n# TYPE %s histogram\n", h->name, h->help, h->name);
	for (size_t i = 0; i < h->n; i++) {
		const struct lseries *s = &h->s[i];
		for (int b = 0; b < h->nbounds; b++)
			put_le(o, h->name, s->labels, h->bounds[b], s->buckets[b]);
		put(o, "%s_bucket{%s,le=\"+Inf\"} %llu\n%s_sum{%s} %.6g\n%s_count{%s} %llu\n",
		    h->name, s->labels, s->count, h->name, s->labels, s->sum, h->name, s->labels,
		    s->count);
	}
}

/* The backend's own counters (codepod_backend_ops.stats), grouped by name. */
static void put_backend(struct out *o, const struct codepod_backend *b)
{
	struct codepod_backend_stat st[32];
	size_t n = b && b->ops->stats ? b->ops->stats(b, st, sizeof st / sizeof st[0]) : 0;
	for (size_t i = 0; i < n; i++) {
		if (i == 0 || strcmp(st[i].name, st[i - 1].name) != 0)
			put(o, "# HELP %s %s\n# TYPE %s counter\n", st[i].name, st[i].help, st[i].name);
		put(o, "%s{%s} %lu\n", st[i].name, st[i].label, st[i].value);
	}
}

char *broker_http_metrics_render(struct broker_http_metrics *m, const struct codepod_backend *backend,
                          unsigned in_flight, unsigned sessions, const struct broker_hub *hub,
                          size_t *len)
{
	struct out o = { .failed = 0 };
	cp_buf_init(&o.text, SIZE_MAX);
	put(&o, "# HELP codepod_executions_total Executions finished, by status and error code.\n"
	        "# TYPE codepod_executions_total counter\n");
	for (size_t i = 0; i < m->nexecs; i++)
		put(&o, "codepod_executions_total{status=\"%s\",code=\"%s\"} %llu\n", m->execs[i].a,
		    m->execs[i].b, m->execs[i].n);
	put(&o, "# HELP codepod_operations_total Commands and file operations finished, by kind "
	        "(command, file_read, ..., archive_write) and error code.\n"
	        "# TYPE codepod_operations_total counter\n");
	for (size_t i = 0; i < m->nops; i++)
		put(&o, "codepod_operations_total{kind=\"%s\",code=\"%s\"} %llu\n", m->ops[i].a,
		    m->ops[i].b, m->ops[i].n);
	put(&o, "# HELP codepod_file_bytes_total File bytes moved by finished file operations, by kind.\n"
	        "# TYPE codepod_file_bytes_total counter\n");
	for (size_t i = 0; i < m->nfile_bytes; i++)
		put(&o, "codepod_file_bytes_total{kind=\"%s\"} %llu\n", m->file_bytes[i].a,
		    m->file_bytes[i].n);
	put_histo(&o, "codepod_execution_startup_seconds",
	          "Time from submission until the program started running.", &m->startup);
	put_histo(&o, "codepod_execution_run_seconds", "Time the program ran.", &m->run);
	put_lhisto(&o, &m->cpu);
	put_lhisto(&o, &m->rss);
	put_lhisto(&o, &m->tool);
	put(&o, "# HELP codepod_tool_calls_total Tool calls of finished executions, by status.\n"
	        "# TYPE codepod_tool_calls_total counter\n");
	for (size_t i = 0; i < m->ncalls; i++)
		put(&o, "codepod_tool_calls_total{status=\"%s\"} %llu\n", m->calls[i].a, m->calls[i].n);
	put(&o, "# HELP codepod_rejected_total Requests and executions refused, by reason.\n"
	        "# TYPE codepod_rejected_total counter\n");
	for (size_t i = 0; i < m->nrejected; i++)
		put(&o, "codepod_rejected_total{reason=\"%s\"} %llu\n", m->rejected[i].a,
		    m->rejected[i].n);
	put(&o, "# HELP codepod_executions_in_flight Executions running now.\n"
	        "# TYPE codepod_executions_in_flight gauge\ncodepod_executions_in_flight %u\n"
	        "# HELP codepod_sessions Open sessions (WebSocket and POST /v1/executions).\n"
	        "# TYPE codepod_sessions gauge\ncodepod_sessions %u\n", in_flight, sessions);
	size_t kept_bytes = 0;
	size_t kept = broker_hub_kept(hub, &kept_bytes);
	put(&o, "# HELP codepod_executions_detached Executions whose session dropped, waiting for "
	        "an attach (--reattach-grace).\n"
	        "# TYPE codepod_executions_detached gauge\ncodepod_executions_detached %u\n"
	        "# HELP codepod_outcomes_kept Finished outcomes kept for attach and GET "
	        "/v1/executions (--outcome-retention).\n"
	        "# TYPE codepod_outcomes_kept gauge\ncodepod_outcomes_kept %zu\n"
	        "# HELP codepod_outcomes_kept_bytes Their JSON, in bytes (at most 64 MiB).\n"
	        "# TYPE codepod_outcomes_kept_bytes gauge\ncodepod_outcomes_kept_bytes %zu\n",
	    broker_hub_detached(hub), kept, kept_bytes);
	put(&o, "# HELP codepod_otlp_spans_dropped_total Spans not exported: the queue was full, "
	        "or the collector (--otlp-endpoint) refused them or could not be reached.\n"
	        "# TYPE codepod_otlp_spans_dropped_total counter\ncodepod_otlp_spans_dropped_total %llu\n",
	    broker_otlp_dropped(m->otlp));
	put_backend(&o, backend);
	if (o.failed) {
		cp_buf_free(&o.text);
		return NULL;
	}
	return cp_buf_take(&o.text, len, NULL);
}

/* The audit line: who ran what (by digest), where (conversation hash, never
 * the key), which tools with which fate, and how it ended. No program text,
 * no tool data. */
void broker_http_audit(struct broker_http *srv, const char *id, const char *conversation,
                const json_t *outcome)
{
	char conv[65];
	broker_http_sha256_hex(conversation, strlen(conversation), conv);
	const json_t *usage = json_object_get(outcome, "usage");
	const char *code = json_string_value(json_object_get(json_object_get(outcome, "error"), "code"));
	json_t *tools = json_array();
	size_t i;
	const json_t *c;
	json_array_foreach(json_object_get(outcome, "calls"), i, c)
		json_array_append_new(tools, json_pack("{s:O?,s:O?,s:O?}", "tool",
		                                       json_object_get(c, "tool"), "status",
		                                       json_object_get(c, "status"), "ms",
		                                       json_object_get(c, "ms")));
	json_t *digest = json_incref(json_object_get(usage, "digest"));
	json_t *startup = json_incref(json_object_get(usage, "startupMs"));
	json_t *run = json_incref(json_object_get(usage, "runMs"));
	/* the outcome's usage object itself: the same figures, one definition */
	json_t *use = json_incref(json_object_get(outcome, "usage"));
	char kbuf[32];
	const char *kind = outcome_kind(outcome, kbuf, sizeof kbuf);
	if (!srv->audit) {
		cp_log(CP_LOG_INFO, "audit", "id", json_string(id), "kind", json_string(kind), "conversationHash",
		       json_string(conv), "digest", digest, "tools", tools, "code",
		       json_string(code ? code : "OK"), "startupMs", startup, "runMs", run,
		       "usage", use, NULL);
		return;
	}
	json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:o?,s:o,s:s,s:o?,s:o?,s:o?}", "event", "audit", "id", id,
	                      "kind", kind, "conversationHash", conv, "digest", digest, "tools", tools, "code",
	                      code ? code : "OK", "startupMs", startup, "runMs", run, "usage", use);
	char *line = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(o);
	if (line) {
		size_t n = strlen(line);
		line[n] = '\n';
		if (fwrite(line, 1, n + 1, srv->audit) != n + 1 || fflush(srv->audit) != 0)
			cp_log(CP_LOG_WARN, "audit.write", "message", json_string("audit file write failed"),
			       NULL);
		free(line);
	}
}
