/*
 * otlp.h - exports the engine's spans over OTLP/HTTP JSON: POST
 * ENDPOINT/v1/traces, in batches, from a bounded queue, on the loop.
 *
 * A span that finds the queue full, or whose batch the collector refused
 * or never took after its retries, is dropped and counted (never waited
 * for): tracing costs the executions nothing when the collector is down or
 * hangs. Queued spans go out within flush_ms (at most 5 s after they end)
 * and at shutdown, which waits at most shutdown_ms for them.
 *
 * Ownership: broker_otlp_new() returns a new exporter; broker_otlp_close()
 * frees it once its last transfer and timer are gone. The spans given to
 * broker_otlp_span are copied (as their JSON).
 * Loop context: every function on the loop's thread.
 */
#ifndef BROKER_OTLP_H
#define BROKER_OTLP_H

#include <curl/curl.h>
#include <uv.h>

#include "base/err.h"
#include "runner/codepod.h"

struct broker_otlp;

struct broker_otlp_config {
	uv_loop_t *loop;
	const char *endpoint;        /* http(s)://HOST[:PORT][/PATH]; /v1/traces is added */
	int endpoint_is_traces_url;  /* 1: endpoint is the whole URL, nothing added
	                                (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT's meaning) */
	const struct curl_slist *headers; /* sent with every request (otlp_headers.h);
	                                     copied; may be NULL */
	const char *service_version; /* the resource's service.version */
	unsigned max_queue;          /* spans waiting; 0: 2048 */
	unsigned batch;              /* spans per request; 0: 512 */
	unsigned flush_ms;           /* a queued span waits at most this; 0: 1000 */
	unsigned shutdown_ms;        /* broker_otlp_close waits at most this; 0: 1800 */
};

int broker_otlp_new(const struct broker_otlp_config *cfg, struct broker_otlp **out,
                    struct cp_err *err);

/* The engine's span callback (codepod_config.span, with the exporter as
 * span_ud): queues the span or counts it dropped. */
void broker_otlp_span(void *ud, const struct codepod_span *sp);

/* Spans dropped so far (queue full, collector down or refusing), and
 * spans the collector took. NULL: 0. */
unsigned long long broker_otlp_dropped(const struct broker_otlp *o);
unsigned long long broker_otlp_exported(const struct broker_otlp *o);

/* Sends what is queued, waits at most shutdown_ms, then frees the
 * exporter (what is still unsent counts as dropped); NULL is ignored. The
 * loop must run for it to finish. */
void broker_otlp_close(struct broker_otlp *o);

#endif
