/* fuzz_tools_file.c - a `codepod run --tools` file (broker_cmdtools_parse,
 * broker/cmdtool.h) on arbitrary bytes: byte 0 picks the folder relative
 * commands are taken from (a long one too, so command paths reach
 * PATH_MAX), the rest is TOOLS.json. A file is refused with a message and
 * nothing handed out, or gives one declaration per tool, each the tool
 * without its "command", and a command for each name: 1 to 31 words, none
 * cut, a relative word with a slash taken from the folder. */
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "broker/cmdtool.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char long_dir[PATH_MAX - 8];

/* @got, the set's copy of command word @word, for the folder @dir. */
static void check_word(const char *dir, const char *word, const char *got)
{
	size_t dl = strlen(dir);
	if (!got || strlen(got) >= PATH_MAX)
		abort();
	if (word[0] != '/' && strchr(word, '/')) {
		if (strncmp(got, dir, dl) != 0 || got[dl] != '/' || strcmp(got + dl + 1, word) != 0)
			abort();
	} else if (strcmp(got, word) != 0) {
		abort();
	}
}

static void check(const char *dir, const json_t *root, const struct broker_cmdtools *set,
                  const json_t *decls)
{
	const json_t *tools = json_is_array(root) ? root : json_object_get(root, "tools");
	if (!json_is_array(decls) || json_array_size(decls) != json_array_size(tools))
		abort();
	size_t i;
	const json_t *t;
	json_array_foreach(tools, i, t) {
		const json_t *d = json_array_get(decls, i);
		const char *name = json_string_value(json_object_get(t, "name"));
		const json_t *cmd = json_object_get(t, "command");
		if (!name || !json_is_object(d) || json_object_get(d, "command") ||
		    json_object_size(d) + 1 != json_object_size(t))
			abort();
		json_t *want = json_deep_copy(t);
		json_object_del(want, "command");
		int same = json_equal(want, d);
		json_decref(want);
		if (!same)
			abort();
		const char *const *argv = broker_cmdtools_command(set, name);
		if (!argv)
			abort();
		/* The first tool of this name is the one the set runs. */
		size_t first = 0;
		while (strcmp(json_string_value(json_object_get(json_array_get(tools, first), "name")), name))
			first++;
		if (first != i)
			continue;
		size_t k;
		const json_t *w;
		json_array_foreach(cmd, k, w)
			check_word(dir, json_string_value(w), argv[k]);
		if (k == 0 || k > 31 || argv[k] != NULL)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (!long_dir[0]) {
		memset(long_dir, 'd', sizeof long_dir - 1);
		long_dir[0] = '/';
	}
	static const char *const dirs[] = { ".", "/srv/tools", "", long_dir };
	const char *dir = dirs[data[0] & 3];
	const char *buf = (const char *)data + 1;
	size_t len = size - 1;
	struct broker_cmdtools *set = (struct broker_cmdtools *)&set;
	json_t *decls = (json_t *)&decls;
	struct cp_err err;
	memset(&err, 0, sizeof err);
	int rc = broker_cmdtools_parse(buf, len, "TOOLS.json", dir, &set, &decls, &err);
	if (rc != 0) {
		if ((rc != CP_E_PARSE && rc != CP_E_INVALID_REQUEST && rc != CP_E_NOMEM) || err.code != rc ||
		    !err.msg[0] || strnlen(err.msg, sizeof err.msg) >= sizeof err.msg)
			abort();
		if (set != (struct broker_cmdtools *)&set || decls != (json_t *)&decls)
			abort(); /* nothing handed out on failure */
		return 0;
	}
	json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
	if (!root || !set || !decls)
		abort();
	check(dir, root, set, decls);
	json_decref(root);
	json_decref(decls);
	broker_cmdtools_free(set);
	return 0;
}
