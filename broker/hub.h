/*
 * hub.h - the executions of every session of one server, and the outcomes
 * kept after they ended (session protocol v1.1, broker/SESSION.md
 * "Reattach").
 *
 * Every execution a session starts is registered here by its id, so that a
 * session that drops can leave its executions running ("detached") for a
 * grace period, and a new session can take one over with `attach`. A
 * detached execution whose grace period passes is abandoned as a dropped
 * session's executions were before v1.1 (OUTCOME_UNKNOWN with a tool call
 * in flight, else CANCELLED).
 *
 * Finished outcomes are kept for the retention period (for `attach` and
 * `GET /v1/executions/{id}`), at most max_outcomes of them and
 * max_outcome_bytes of compact JSON in all: when a new one does not fit,
 * the oldest already delivered are dropped first, then the oldest
 * undelivered. An outcome larger than max_outcome_bytes on its own is not
 * kept. Nothing survives the process.
 *
 * Loop context: the loop thread only. broker_hub_sweep() is called by the
 * owner about once a second (http_server.c's sweep timer).
 *
 * Ownership: broker_hub_new() returns a new hub, freed with
 * broker_hub_free() once no execution is registered (every session's
 * executions delivered their outcome). Outcomes returned by
 * broker_hub_lookup() are borrowed until the next call into the hub.
 */
#ifndef BROKER_HUB_H
#define BROKER_HUB_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

struct broker_hub;

struct broker_hub_config {
	uv_loop_t *loop;           /* for the clock (uv_now) */
	unsigned grace_s;          /* a dropped session's executions wait this long; 0: abandon at once */
	unsigned retention_s;      /* finished outcomes are kept this long; 0: none */
	size_t max_outcomes;       /* kept at once */
	size_t max_outcome_bytes;  /* compact JSON kept at once */
};

/* grace 30 s, retention 300 s, 10000 outcomes, 64 MiB (loop left NULL). */
void broker_hub_config_defaults(struct broker_hub_config *cfg);

struct broker_hub *broker_hub_new(const struct broker_hub_config *cfg);
void broker_hub_free(struct broker_hub *h);

/* Abandon detached executions past their grace period; drop outcomes past
 * their retention. */
void broker_hub_sweep(struct broker_hub *h);

/* Stop every registered execution, attached or not, with @message as its
 * CANCELLED outcome's message (a server's drain deadline). */
void broker_hub_stop_all(struct broker_hub *h, const char *message);

enum broker_hub_state { BROKER_HUB_UNKNOWN, BROKER_HUB_RUNNING, BROKER_HUB_FINISHED };

/* What the hub knows of @id; for FINISHED, *outcome is the kept outcome
 * (borrowed; the docs/contract.md §4 object with executionId). */
enum broker_hub_state broker_hub_lookup(struct broker_hub *h, const char *id,
                                        const json_t **outcome);

/* Executions registered, and of them detached (no session holds them). */
unsigned broker_hub_running(const struct broker_hub *h);
unsigned broker_hub_detached(const struct broker_hub *h);
size_t broker_hub_kept(const struct broker_hub *h, size_t *bytes);

#endif
