#include "runner/policy.h"

#include <stddef.h>
#include <string.h>
#include <strings.h>

struct field {
	const char *name;
	size_t offset;
	int may_be_none; /* 0 in the struct means no limit (CODEPOD_POLICY_NONE) */
	int not_digested; /* a limit of file operations or of the conversation's
	                   * workspace: not part of a program's digest */
};

#define F(json, member) { json, offsetof(struct codepod_policy, member), 0, 0 }
#define F_NONE(json, member) { json, offsetof(struct codepod_policy, member), 1, 0 }
#define F_FILES(json, member) { json, offsetof(struct codepod_policy, member), 0, 1 }
static const struct field fields[] = {
	F("timeoutMs", timeout_ms),
	F("startupTimeoutMs", startup_timeout_ms),
	F("maxSourceBytes", max_source_bytes),
	F("maxResultBytes", max_result_bytes),
	F("maxBridgeRequests", max_bridge_requests),
	F("maxInFlightBridgeRequests", max_in_flight),
	F("maxToolInputBytes", max_tool_input_bytes),
	F("maxToolOutputBytes", max_tool_output_bytes),
	F("maxMemoryMb", max_memory_mb),
	F_NONE("maxCpuMs", max_cpu_ms),
	F_FILES("maxFileBytes", max_file_bytes),
	F_FILES("maxWorkspaceBytes", max_workspace_bytes),
	F_FILES("maxWorkspaceFiles", max_workspace_files),
};
#undef F
#undef F_NONE
#undef F_FILES
#define NFIELDS (sizeof fields / sizeof fields[0])

static uint64_t *slot(struct codepod_policy *p, size_t i)
{
	return (uint64_t *)(void *)((char *)p + fields[i].offset);
}

/* The value to compare with: a limit that is none is above every number. */
static uint64_t bound(struct codepod_policy *p, size_t i)
{
	uint64_t v = *slot(p, i);
	return fields[i].may_be_none && v == CODEPOD_POLICY_NONE ? UINT64_MAX : v;
}

void codepod_policy_defaults(struct codepod_policy *p)
{
	p->timeout_ms = 30000;
	p->startup_timeout_ms = 120000;
	p->max_source_bytes = 131072;
	p->max_result_bytes = 32768;
	p->max_bridge_requests = 256;
	p->max_in_flight = 32;
	p->max_tool_input_bytes = 65536;
	p->max_tool_output_bytes = 1048576;
	p->max_memory_mb = 512;
	p->max_cpu_ms = CODEPOD_POLICY_NONE;
	p->max_file_bytes = 1ull << 30;
	/* 1 GiB: the pod template's emptyDir, and one file of maxFileBytes;
	 * 100000 files: a large node_modules, 25 MiB of inode tables */
	p->max_workspace_bytes = 1ull << 30;
	p->max_workspace_files = 100000;
}

void codepod_policy_ceiling_defaults(struct codepod_policy *p)
{
	p->timeout_ms = 15 * 60 * 1000;
	p->startup_timeout_ms = 15 * 60 * 1000;
	p->max_source_bytes = 1 << 20;
	p->max_result_bytes = 4 << 20;
	p->max_bridge_requests = 10000;
	p->max_in_flight = 256;
	p->max_tool_input_bytes = 4 << 20;
	p->max_tool_output_bytes = 16 << 20;
	p->max_memory_mb = 8192;
	p->max_cpu_ms = CODEPOD_POLICY_NONE;
	p->max_file_bytes = 64ull << 30;
	p->max_workspace_bytes = 1ull << 40;
	p->max_workspace_files = 10000000;
}

int codepod_policy_apply(struct codepod_policy *out, const json_t *obj,
                    const struct codepod_policy *ceiling, struct cp_err *err)
{
	if (!obj || json_is_null(obj))
		return 0;
	if (!json_is_object(obj))
		return cp_err_set(err, CP_E_INVALID_REQUEST, "policy must be an object");
	const char *key;
	const json_t *val;
	json_object_foreach((json_t *)obj, key, val) {
		size_t i = 0;
		while (i < NFIELDS && strcmp(key, fields[i].name) != 0)
			i++;
		if (i == NFIELDS) { /* a misspelling would otherwise run under the default */
			size_t near = 0;
			while (near < NFIELDS && strcasecmp(key, fields[near].name) != 0)
				near++;
			if (near < NFIELDS)
				return cp_err_set(err, CP_E_INVALID_REQUEST,
				                  "policy.%.64s is not a policy field (did you mean %s?)", key,
				                  fields[near].name);
			/* the list, as long as an error's message may be (255) */
			char known[140];
			size_t n = 0;
			for (size_t k = 0; k < NFIELDS; k++) {
				size_t len = strlen(fields[k].name);
				if (n + len + 8 > sizeof known) {
					memcpy(known + n, ", ...", 6);
					n += 5;
					break;
				}
				n += (size_t)snprintf(known + n, sizeof known - n, "%s%s", k ? ", " : "",
				                      fields[k].name);
			}
			known[n] = '\0';
			return cp_err_set(err, CP_E_INVALID_REQUEST,
			                  "policy.%.64s is not a policy field (known: %s)", key, known);
		}
	}
	struct codepod_policy c = *ceiling;
	for (size_t i = 0; i < NFIELDS; i++) {
		const json_t *v = json_object_get(obj, fields[i].name);
		if (!v)
			continue;
		if (!json_is_integer(v) || json_integer_value(v) <= 0)
			return cp_err_set(err, CP_E_INVALID_REQUEST,
			                  "policy.%s must be a positive integer", fields[i].name);
		uint64_t n = (uint64_t)json_integer_value(v);
		uint64_t max = bound(&c, i);
		if (n > max)
			return cp_err_set(err, CP_E_INVALID_REQUEST,
			                  "policy.%s is %llu, over this deployment's ceiling of %llu",
			                  fields[i].name, (unsigned long long)n,
			                  (unsigned long long)max);
		*slot(out, i) = n;
	}
	return 0;
}

json_t *codepod_policy_to_json(const struct codepod_policy *p)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	struct codepod_policy copy = *p;
	for (size_t i = 0; i < NFIELDS; i++)
		if (!fields[i].not_digested &&
		    (!fields[i].may_be_none || *slot(&copy, i) != CODEPOD_POLICY_NONE))
			json_object_set_new(o, fields[i].name,
			                    json_integer((json_int_t)*slot(&copy, i)));
	return o;
}

int codepod_policy_deployment(struct codepod_policy *defaults, struct codepod_policy *ceiling,
                         const json_t *def, const json_t *ceil, struct cp_err *err)
{
	struct codepod_policy built_in, c, d;
	codepod_policy_ceiling_defaults(&built_in);
	codepod_policy_defaults(&d);
	c = built_in;
	int rc = codepod_policy_apply(&c, ceil, &built_in, err);
	if (rc)
		return rc;
	for (size_t i = 0; i < NFIELDS; i++) /* a lowered ceiling lowers its default */
		if (bound(&d, i) > bound(&c, i))
			*slot(&d, i) = *slot(&c, i);
	rc = codepod_policy_apply(&d, def, &c, err);
	if (rc)
		return rc;
	*defaults = d;
	*ceiling = c;
	return 0;
}
