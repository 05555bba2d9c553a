/*
 * schema_check.h - a tool input against the tool's inputSchema, before a
 * webhook broker is asked (POST /v1/executions), with the words the
 * TypeScript SDK's validator (Ajv) uses, so a program hears the same
 * "input.limit must be <= 50" whichever broker serves it.
 *
 * The subset checked is what the declarations render (broker/decl.h):
 * "type" (a name or a list; integer means a whole number; "nullable": true
 * adds null), "const", "enum", "properties", "required",
 * "additionalProperties" (false or a schema), "items" (a schema),
 * "prefixItems" (with "items" false or a schema for the rest), "minimum",
 * "maximum", "exclusiveMinimum", "exclusiveMaximum" (numbers), "multipleOf",
 * "minLength"/"maxLength" (in code points), "minItems", "maxItems",
 * "uniqueItems", "minProperties", "maxProperties", "pattern", "anyOf",
 * "oneOf", "allOf", "not", boolean schemas and local "$ref"s ("#",
 * "#/$defs/X", "#/definitions/X": JSON pointers with ~0 and ~1). The first
 * failure found is reported, in Ajv's keyword order.
 *
 * What it cannot judge it lets through, for the broker (which sees the
 * input anyway) to judge: "format", keywords outside the subset, remote or
 * unresolvable "$ref"s, a "pattern" that POSIX extended regular expressions
 * cannot read (JavaScript's \d \D \w \W \s \S are translated; anything
 * else with a backslash inside brackets, lookaround and other JavaScript-only
 * syntax is not checked), strings with NUL bytes against a pattern, and
 * schemas nested deeper than BROKER_SCHEMA_MAX_DEPTH. Work is bounded by
 * BROKER_SCHEMA_MAX_WORK steps (past it, the rest passes): the input is the
 * program's, so a hostile one costs at most that.
 *
 * Ownership: everything is borrowed for the call. Context: pure, any
 * thread; no I/O.
 */
#ifndef BROKER_SCHEMA_CHECK_H
#define BROKER_SCHEMA_CHECK_H

#include <stddef.h>

#include <jansson.h>

#define BROKER_SCHEMA_MAX_DEPTH 32
#define BROKER_SCHEMA_MAX_WORK 2000000L

/**
 * broker_schema_check() - does @value match @schema?
 * @schema: a JSON Schema (an object or a boolean); NULL passes everything.
 * @value: the tool's input.
 * @msg: on a mismatch, where and why, such as "input.limit must be <= 50"
 *       or "input must have required property 'query'" (cut to @cap bytes);
 *       untouched otherwise. The text names the input's keys, never its
 *       values.
 *
 * Return: 0 when it matches (or the mismatch cannot be judged, see above),
 * 1 when it does not.
 */
int broker_schema_check(const json_t *schema, const json_t *value, char *msg, size_t cap);

#endif
