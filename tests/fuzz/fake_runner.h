/*
 * fake_runner.h - what the fuzz targets that run the real engine over a
 * fake backend share: the engine with default policies, and the two halves
 * of the control channel a fake runner speaks (runner/PROTOCOL.md): reading
 * the engine's hello and framing a record with the execution's nonce.
 *
 * Header-only (static functions): each fuzz target is one translation unit
 * (`make fuzz` builds each from its .c alone).
 *
 * Ownership: fake_engine_new() returns a new engine (codepod_free);
 * fake_hello() returns a new reference (json_decref) or NULL; fake_frame()
 * copies the payload and hands it to cbs->out at once.
 */
#ifndef FUZZ_FAKE_RUNNER_H
#define FUZZ_FAKE_RUNNER_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <uv.h>

#include "runner/codepod.h"

/* The engine on @loop over @backend, default policy and ceiling; abort()s
 * when it cannot be made. */
static struct codepod *fake_engine_new(uv_loop_t *loop, struct codepod_backend *backend)
{
	struct codepod_config cfg;
	memset(&cfg, 0, sizeof cfg);
	cfg.loop = loop;
	cfg.backend = backend;
	codepod_policy_defaults(&cfg.defaults);
	codepod_policy_ceiling_defaults(&cfg.ceiling);
	struct codepod *cp = NULL;
	if (codepod_new(&cfg, &cp, NULL))
		abort();
	return cp;
}

/* Frames @payload (@len bytes) as one record of @kind for the execution of
 * @nonce and hands it to @cbs->out. */
static void fake_frame(const struct codepod_proc_cbs *cbs, void *ud, const char *nonce, char kind,
                       const void *payload, size_t len)
{
	char hdr[96];
	int n = snprintf(hdr, sizeof hdr, "\x1e" "cp1 %s %c %zu\n", nonce, kind, len);
	char *buf = malloc((size_t)n + len + 1);
	if (!buf)
		abort();
	memcpy(buf, hdr, (size_t)n);
	if (len)
		memcpy(buf + n, payload, len);
	cbs->out(ud, buf, (size_t)n + len);
	free(buf);
}

/* When @buf is the engine's hello: its nonce into @nonce and the parsed
 * hello (new reference); else NULL. abort()s on a hello without a 32-hex
 * nonce: the engine always sends one. */
static json_t *fake_hello(const char *buf, size_t len, char nonce[33])
{
	if (len <= 12 || memcmp(buf, "{\"k\":\"hello\"", 12) != 0)
		return NULL;
	json_t *h = json_loadb(buf, len, JSON_ALLOW_NUL, NULL);
	const char *s = json_string_value(json_object_get(h, "nonce"));
	if (!s || strlen(s) != 32)
		abort();
	memcpy(nonce, s, 33);
	return h;
}

#endif
