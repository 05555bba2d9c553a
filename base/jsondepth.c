#include "base/jsondepth.h"

#include <limits.h>

static int clamp_limit(int limit)
{
	if (limit < 0)
		return 0;
	if (limit > INT_MAX - 1)
		return INT_MAX - 1;
	return limit;
}

int cp_json_text_depth(const char *text, size_t len, int limit)
{
	int depth = 0, max = 0, in_str = 0;
	size_t i;

	limit = clamp_limit(limit);
	for (i = 0; i < len; i++) {
		char c = text[i];

		if (in_str) {
			if (c == '\\')
				i++; /* skip the escaped character */
			else if (c == '"')
				in_str = 0;
			continue;
		}
		if (c == '"') {
			in_str = 1;
		} else if (c == '[' || c == '{') {
			if (++depth > limit)
				return limit + 1;
			if (depth > max)
				max = depth;
		} else if ((c == ']' || c == '}') && depth > 0) {
			depth--;
		}
	}
	return max;
}

/* Depth of v, knowing it sits at nesting level `level`; stops past limit. */
static int value_depth(const json_t *v, int level, int limit)
{
	int max = 0, d;

	if (!json_is_array(v) && !json_is_object(v))
		return 0;
	if (level + 1 > limit)
		return limit + 1;
	if (json_is_array(v)) {
		size_t i;
		const json_t *e;

		json_array_foreach(v, i, e) {
			d = value_depth(e, level + 1, limit);
			if (d > limit)
				return limit + 1;
			if (d > max)
				max = d;
		}
	} else {
		const char *key;
		const json_t *e;

		/* json_object_foreach wants a non-const object; it does not modify it. */
		json_object_foreach((json_t *)v, key, e) {
			d = value_depth(e, level + 1, limit);
			if (d > limit)
				return limit + 1;
			if (d > max)
				max = d;
		}
	}
	return max + 1;
}

int cp_json_value_depth(const json_t *v, int limit)
{
	int d;

	limit = clamp_limit(limit);
	if (!v)
		return 0;
	d = value_depth(v, 0, limit);
	return d > limit ? limit + 1 : d;
}
