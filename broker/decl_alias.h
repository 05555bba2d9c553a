/*
 * decl_alias.h - the identifier alias of a tool name, as the runner makes it
 * (runner/runner.js makeTools: name.replace(/[^A-Za-z0-9_$]/g, '_'), which
 * replaces every UTF-16 code unit: one '_' per character below U+10000, two
 * above). The declarations (decl.c) name it so the model learns tools.my_tool.
 *
 * Ownership: the name is borrowed; the result is new (free()).
 * Context: pure, any thread.
 */
#ifndef BROKER_DECL_ALIAS_H
#define BROKER_DECL_ALIAS_H

#include <stddef.h>

/* 1 if @s (@n bytes) is an ASCII JavaScript identifier ([A-Za-z_$][A-Za-z0-9_$]*),
 * the names the declarations write bare and the runner needs no alias for. */
int broker_decl_is_identifier(const char *s, size_t n);

/* The alias of @name (@n bytes of UTF-8), or NULL when the name is an ASCII
 * identifier already (no alias needed), when the alias is not an identifier
 * (a leading digit) or is a name the runner reserves ("then", "__proto__",
 * ...), or when out of memory. */
char *broker_decl_alias(const char *name, size_t n);

#endif
