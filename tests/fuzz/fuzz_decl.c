/* fuzz_decl.c - the declarations renderer on arbitrary JSON.
 *
 * The input is parsed as JSON (any value); whatever parses is rendered, as
 * it is and, when it is not already a tool list, as the inputSchema and the
 * outputSchema of one tool. A render either fails with a cp_err message and
 * no output, or succeeds with declarations that start and end as they
 * must (after the approval rules' comment, when a tool needs approval) and
 * stay within the output bound; nothing may crash or leak.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "broker/decl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const json_t *tools)
{
	static const char head[] = BROKER_DECL_PREAMBLE "declare const tools: {\n";
	struct cp_err err = { 0 };
	char *out = NULL;
	size_t n;
	int rc = broker_decl_render(tools, &out, &err);

	if (rc != 0) {
		if (out || err.code != rc || err.msg[0] == '\0')
			abort();
		return;
	}
	n = strlen(out);
	/* When a tool needs approval, the rules for the model come first. */
	const char *start = out;
	if (strncmp(out, "/*\n", 3) == 0) {
		start = strstr(out, "\n */\n");
		if (!start)
			abort();
		start += 5;
	}
	if (n > BROKER_DECL_MAX_OUT || strncmp(start, head, sizeof head - 1) != 0 || n < 3 ||
	    strcmp(out + n - 3, "};\n") != 0)
		abort();
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *v = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
	json_t *tools = NULL;

	if (!v)
		return 0;
	check(v);
	if (!json_is_array(v) && !json_is_array(json_object_get(v, "tools"))) {
		tools = json_pack("[{s:s, s:O, s:O}]", "name", "t", "inputSchema", v, "outputSchema", v);
		if (tools)
			check(tools);
		json_decref(tools);
	}
	json_decref(v);
	return 0;
}
