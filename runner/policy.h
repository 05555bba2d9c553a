/*
 * policy.h - the execution policy of docs/contract.md §3.
 *
 * Every limit has a default and may be lowered or raised per execution up to
 * a deployment-wide ceiling. A request over the ceiling is refused (never
 * silently clamped), so a backend always knows which limits its program ran
 * under.
 *
 * Ownership: struct codepod_policy is a plain value; codepod_policy_to_json returns a
 * new reference the caller releases with json_decref.
 */
#ifndef CODEPOD_POLICY_H
#define CODEPOD_POLICY_H

#include <jansson.h>
#include <stdint.h>

#include "base/err.h"

/* JSON crossing the boundary (tool input, tool output, result) nests at most
 * this deep (docs/contract.md §3). */
#define CODEPOD_MAX_JSON_DEPTH 32

struct codepod_policy {
	uint64_t timeout_ms;            /* program deadline, tools included */
	uint64_t startup_timeout_ms;    /* sandbox + runner start */
	uint64_t max_source_bytes;
	uint64_t max_result_bytes;      /* the result; also the log window */
	uint64_t max_bridge_requests;   /* tool requests per execution */
	uint64_t max_in_flight;         /* tool calls outstanding at once */
	uint64_t max_tool_input_bytes;
	uint64_t max_tool_output_bytes;
	uint64_t max_memory_mb;         /* V8 heap and address-space rlimit */
	uint64_t max_cpu_ms;            /* CPU time of the process tree; 0: none */
	uint64_t max_file_bytes;        /* one file written through the file API */
	uint64_t max_workspace_bytes;   /* the conversation's workspace: its bytes */
	uint64_t max_workspace_files;   /* and its files (folders and links count) */
};

/* A limit that may be "none": max_cpu_ms, where 0 means no limit. Its
 * default and its built-in ceiling are none; a request's value is a
 * positive integer like any other, and a deployment's ceiling brings a
 * default of none down to it. */
#define CODEPOD_POLICY_NONE 0

/* The defaults of docs/contract.md §3 (memory: 512 MiB). */
void codepod_policy_defaults(struct codepod_policy *p);

/* The built-in deployment ceiling. */
void codepod_policy_ceiling_defaults(struct codepod_policy *p);

/*
 * codepod_policy_apply - overlay the fields of a request's "policy" object.
 * @out: starts as the base (usually defaults); fields present in @obj replace it.
 * @obj: the policy object (borrowed; NULL means no overrides). An unknown
 *       field (a misspelling such as "timeoutMS"), a field that is not a
 *       positive integer, or one over @ceiling fails with
 *       CP_E_INVALID_REQUEST naming the field.
 */
int codepod_policy_apply(struct codepod_policy *out, const json_t *obj,
                    const struct codepod_policy *ceiling, struct cp_err *err);

/*
 * codepod_policy_deployment - a deployment's defaults and ceiling (serve/run
 * --policy-defaults and --policy-ceiling): @ceil (NULL: none) lowers the
 * built-in ceiling field by field (a value over it is refused: transports and
 * buffers are sized for it), a default over the resulting ceiling comes down
 * to it, then @def (NULL: none) sets defaults within that ceiling. Unknown
 * keys and non-positive values are refused as in codepod_policy_apply. On error
 * nothing is written.
 */
int codepod_policy_deployment(struct codepod_policy *defaults, struct codepod_policy *ceiling,
                         const json_t *def, const json_t *ceil, struct cp_err *err);

/* The policy as a JSON object with the contract's field names (new ref).
 * maxFileBytes (a limit of file operations) and the workspace's bounds
 * (maxWorkspaceBytes, maxWorkspaceFiles: the conversation's, not the
 * program's) are left out too. A limit that
 * is none (maxCpuMs 0) is left out, so the digest of an
 * execution that sets none is the one it had before the key existed. */
json_t *codepod_policy_to_json(const struct codepod_policy *p);

#endif
