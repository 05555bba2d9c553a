/*
 * otlp_setup.c - the OTLP exporter from the flags or the OpenTelemetry
 * environment variables (otlp_setup.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/fileio.h"
#include "base/log.h"
#include "base/version.h"
#include "broker/otlp_headers.h"
#include "cli/otlp_setup.h"

/* A headers file is a few lines of credentials. */
#define HEADERS_FILE_MAX 65536

static const char *env(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

/* The first of the two variables that is set (the traces one wins). */
static const char *env2(const char *traces, const char *all, const char **which)
{
	const char *v = env(traces);
	*which = v ? traces : all;
	return v ? v : env(all);
}

static int disabled_by_env(void)
{
	const char *off = env("OTEL_SDK_DISABLED");
	const char *exp = env("OTEL_TRACES_EXPORTER");
	return (off && strcasecmp(off, "true") == 0) || (exp && strcmp(exp, "none") == 0);
}

int cli_otlp_start(uv_loop_t *loop, const char *endpoint, const char *headers_file,
                   struct broker_otlp **out)
{
	*out = NULL;
	struct broker_otlp_config oc = { .loop = loop, .endpoint = endpoint,
	                                 .service_version = CP_VERSION };
	const char *from = "--otlp-endpoint";
	if (!endpoint && !disabled_by_env()) {
		oc.endpoint = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
		oc.endpoint_is_traces_url = oc.endpoint != NULL;
		from = oc.endpoint ? "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" : "OTEL_EXPORTER_OTLP_ENDPOINT";
		if (!oc.endpoint)
			oc.endpoint = env("OTEL_EXPORTER_OTLP_ENDPOINT");
	}
	if (!oc.endpoint) {
		/* Said, not refused: a deployment may keep the file mounted
		 * while its endpoint is switched off. */
		if (headers_file)
			cp_log(CP_LOG_WARN, "otlp.headers_unused", "message",
			       json_string("--otlp-headers-file is given but no endpoint: no spans are "
			                   "exported (--otlp-endpoint or OTEL_EXPORTER_OTLP_ENDPOINT)"),
			       NULL);
		return 0;
	}
	const char *which;
	const char *proto = env2("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL",
	                         &which);
	if (proto && strcmp(proto, "grpc") == 0) {
		fprintf(stderr, "codepod: %s=grpc: codepod exports spans over OTLP/HTTP JSON only; "
		                "point %s at the collector's HTTP port (4318) and unset %s\n",
		        which, from, which);
		return 2;
	}
	struct curl_slist *headers = NULL;
	struct cp_err err = { 0 };
	int rc = 0;
	const char *hv = env2("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS", &which);
	if (hv)
		rc = broker_otlp_headers_env(hv, which, &headers, &err);
	if (!rc && headers_file) {
		size_t len = 0;
		char *text = cp_read_file(headers_file, HEADERS_FILE_MAX, &len, &err);
		rc = text ? broker_otlp_headers_file(text, len, headers_file, &headers, &err) : err.code;
		free(text);
	}
	if (!rc) {
		oc.headers = headers;
		rc = broker_otlp_new(&oc, out, &err);
		if (rc) {
			fprintf(stderr, "codepod: %s: %s\n", from, err.msg);
			curl_slist_free_all(headers);
			return 2;
		}
	}
	size_t n = 0;
	for (const struct curl_slist *l = headers; l; l = l->next)
		n++;
	curl_slist_free_all(headers);
	if (rc) {
		fprintf(stderr, "codepod: %s\n", err.msg);
		return 2;
	}
	/* The endpoint's source and how many headers, never their values. */
	cp_log(CP_LOG_INFO, "otlp.start", "endpointFrom", json_string(from), "headers",
	       json_integer((json_int_t)n), NULL);
	return 0;
}
