/*
 * decl.h - the TypeScript declarations a model reads: tools with JSON Schemas
 * in, `declare const tools: { ... };` out (docs/contract.md §5,
 * POST /v1/declarations and `codepod declarations TOOLS.json`).
 *
 * The output follows the PAI code-mode rendering, one line per tool, after
 * BROKER_DECL_PREAMBLE (a doc comment on `tools` with what every program of a
 * conversation must know whatever its tools: they share one workspace, have
 * no network, and can require what broker_decl_set_packages() names):
 *
 *   declare const tools: {
 *     (a doc comment with the description: slash, two stars, text, star, slash)
 *     listInvoices: (input: { month: string; }) => Promise<{ firmId: string; ... }[]>;
 *   };
 *
 * What maps to what:
 *  - tool and property "description" -> doc comments (a star followed by
 *    a slash is written `*\/`; whitespace runs fold to one space, and a
 *    property's comment stays on one line; a property with no description
 *    of its own takes that of its local $ref target);
 *  - "required" -> `name: T`, otherwise `name?: T`; names that are not ASCII
 *    JS identifiers are quoted as JSON string literals;
 *  - "const", "enum" -> literal unions (strings JSON-escaped); an object or
 *    array among them -> unknown; an empty enum -> never;
 *  - "type" string or array (a union), integer -> number; no "type" is
 *    inferred from "properties"/"additionalProperties" (object) and
 *    "items"/"prefixItems" (array); "nullable": true adds `| null`;
 *  - arrays -> `T[]` (`(A | B)[]`), "prefixItems" or an "items" array ->
 *    a tuple; objects -> `{ a: T; b?: U; }`, `{}` for no properties;
 *    "additionalProperties" true or a schema -> `[key: string]: T;`, T
 *    widened by the named properties' types (and undefined when one is
 *    optional) as TypeScript requires; an object with neither "properties"
 *    nor "additionalProperties" -> `{ [key: string]: unknown; }`;
 *  - "anyOf"/"oneOf" -> unions, "allOf" -> intersections, intersected with
 *    what the rest of the schema says; unknown members absorb a union and
 *    vanish from an intersection; duplicate members are dropped;
 *  - "$ref": local JSON pointers ("#", "#/$defs/X", "#/definitions/X", with
 *    ~0 ~1 and %XX escapes) are expanded inline, against the document the
 *    reference sits in (the tool's inputSchema or outputSchema); siblings of
 *    "$ref" other than "description" and "nullable" are ignored (draft 7);
 *    a reference already being expanded on the current path (recursion), a
 *    remote one (not starting with '#') or one that does not resolve ->
 *    unknown;
 *  - a missing schema or `true` -> unknown, `false` -> never; a tool without
 *    outputSchema returns `Promise<unknown>`;
 *  - a property's "type": "integer" (or a type list with integer and no
 *    number), its numeric bounds ("minimum", "maximum", "exclusiveMinimum",
 *    "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "minItems",
 *    "maxItems", "minProperties", "maxProperties": numbers only),
 *    "uniqueItems": true, "format", "pattern", "default" and the first three
 *    "examples" (its own, or its local $ref target's) -> JSDoc tags after
 *    its description on the same line (`@integer @minimum 1 @default 1`),
 *    each value cut at 200 bytes with "...";
 *  - a tool whose name is not an identifier (`my-tool`) is declared under
 *    that name and again under the identifier alias the runner gives it
 *    (`my_tool`: every UTF-16 unit but A-Z a-z 0-9 _ $ becomes '_'), when
 *    the alias is an identifier, not a name the runner reserves, not the
 *    name of another tool, and no earlier tool (enabled or not) maps to it;
 *  - tools with "enabled": false are left out.
 *
 * Determinism: tools and properties come out in input order. jansson (2.8
 * and later) keeps object members in insertion order whatever the load
 * flags (JSON_PRESERVE_ORDER is a no-op), so the order is the text's order.
 *
 * Bounds: schemas nested deeper than BROKER_DECL_MAX_DEPTH (counting every
 * schema, $ref and combinator level) render as unknown; more than
 * BROKER_DECL_MAX_NODES schema nodes expanded in one call (a $ref explosion)
 * or an output over BROKER_DECL_MAX_OUT bytes fail with CP_E_TOO_BIG.
 * Recursion in the renderer is bounded by the depth cap.
 *
 * Ownership: @tools is borrowed for the call; *out is new (free()).
 * Context: pure, any thread; no I/O.
 */
#ifndef BROKER_DECL_H
#define BROKER_DECL_H

#include <jansson.h>

#include "base/err.h"

#define BROKER_DECL_MAX_DEPTH 32
#define BROKER_DECL_MAX_NODES 200000L
#define BROKER_DECL_MAX_OUT (1024UL * 1024UL)

/* The first lines of every rendering, before `declare const tools: {`.
 * Programs of one conversation that run at the same time (two `code` calls
 * of one model turn) are not serialised: a model that does not know it
 * writes the same scratch file from both. */
#define BROKER_DECL_PREAMBLE \
	"/**\n" \
	" * The tools a program calls as `await tools.name(input)`. Programs of one\n" \
	" * conversation may run at the same time, and then share its workspace\n" \
	" * (the working directory): give files each program writes names of their\n" \
	" * own. Programs have no network access: fetch and sockets fail.\n" \
	" * require() gives Node's built-in modules only.\n" \
	" */\n"

/* The packages a deployment lets programs require (a comma-separated list
 * of npm names, such as "lodash,zod"), for the preamble to name: at most
 * BROKER_DECL_MAX_PACKAGES of them, each 1 to 214 bytes of A-Z a-z 0-9 and
 * `@ / . _ ~ -`. */
#define BROKER_DECL_MAX_PACKAGES 100

/**
 * broker_decl_set_packages() - the packages the preamble names from now on.
 * @list: comma-separated npm names (spaces around them ignored); NULL or
 *        empty: Node's built-in modules only (BROKER_DECL_PREAMBLE).
 * @err: filled on error; may be NULL.
 *
 * A deployment setting: called once at start-up, before the loop runs and
 * before any rendering (the preamble is process-wide; not thread-safe).
 * @list is copied. Return: 0; CP_E_INVALID_REQUEST for a name outside the
 * set above or too many of them (the preamble is then unchanged); CP_E_NOMEM.
 */
int broker_decl_set_packages(const char *list, struct cp_err *err);

/**
 * broker_decl_render() - the TypeScript declarations of a tool list.
 * @tools: an array of tools ({"name", "description", "inputSchema",
 *         "outputSchema", "enabled"}), or an object holding it as "tools".
 * @out: on success, a new NUL-terminated string (free()); NULL on error.
 * @err: filled on error; may be NULL.
 *
 * Return: 0; CP_E_INVALID_REQUEST when @tools is not a tool list (not an
 * array, a tool that is not an object, a missing or empty name, an
 * "enabled" that is not a boolean, two enabled tools with one name);
 * CP_E_TOO_BIG past the node or output bounds; CP_E_NOMEM.
 */
int broker_decl_render(const json_t *tools, char **out, struct cp_err *err);

#endif
