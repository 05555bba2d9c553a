/*
 * jsondepth.h - nesting depth of JSON, as text or as a jansson value.
 *
 * Depth counts arrays and objects: `1` and `"s"` are 0, `[]` and `{}` are
 * 1, `[[1]]` and `{"a":[]}` are 2. Both functions stop as soon as the depth
 * exceeds the limit and return limit + 1, so the cost of a deep input is
 * bounded by the limit, not by the input. Used to refuse deep tool inputs
 * and results before (text) or after (value) parsing.
 *
 * Ownership: inputs are borrowed for the duration of the call; nothing is
 * allocated.
 *
 * Context: pure, any thread.
 */
#ifndef CP_JSONDEPTH_H
#define CP_JSONDEPTH_H

#include <stddef.h>

#include <jansson.h>

/**
 * cp_json_text_depth() - maximum nesting depth of JSON text.
 * @text: @len bytes (NUL bytes are ordinary bytes; NULL if @len is 0).
 * @limit: stop once the depth exceeds this (negative counts as 0; values
 *         over INT_MAX - 1 count as INT_MAX - 1).
 *
 * Brackets inside strings are ignored (backslash escapes are honoured).
 * The text is not validated otherwise: unbalanced closers never take the
 * depth below 0, and an unterminated string simply ends the scan.
 *
 * Return: the depth, or limit + 1 as soon as the depth exceeds @limit.
 */
int cp_json_text_depth(const char *text, size_t len, int limit);

/**
 * cp_json_value_depth() - maximum nesting depth of a jansson value.
 * @v: the value (NULL counts as depth 0).
 * @limit: as for cp_json_text_depth().
 *
 * Recursive, with the recursion bounded by limit + 1 frames.
 *
 * Return: the depth, or limit + 1 as soon as the depth exceeds @limit.
 */
int cp_json_value_depth(const json_t *v, int limit);

#endif
