/*
 * otlp_setup.h - where serve's spans go: --otlp-endpoint and
 * --otlp-headers-file, else the OpenTelemetry environment variables an
 * operator (or the OpenTelemetry Operator's injection) sets for every
 * process of a pod: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the whole URL),
 * OTEL_EXPORTER_OTLP_ENDPOINT (/v1/traces added),
 * OTEL_EXPORTER_OTLP_TRACES_HEADERS or OTEL_EXPORTER_OTLP_HEADERS, with
 * OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turning the
 * variables' endpoint off. codepod sends OTLP/HTTP JSON: a protocol
 * variable asking for grpc is refused at start (that endpoint would take
 * none of it).
 *
 * Ownership: *out is a new exporter (broker_otlp_close), or NULL when
 * spans go nowhere. Context: start-up, before the loop runs.
 */
#ifndef CLI_OTLP_SETUP_H
#define CLI_OTLP_SETUP_H

#include <uv.h>

#include "broker/otlp.h"

/* @endpoint, @headers_file: the flags' arguments, or NULL.
 * Return: 0, or 2 (the exit status) once the reason is on stderr. */
int cli_otlp_start(uv_loop_t *loop, const char *endpoint, const char *headers_file,
                   struct broker_otlp **out);

#endif
