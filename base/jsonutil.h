/*
 * jsonutil.h - jansson helpers shared across modules.
 *
 * Ownership: cp_json_load returns a new reference (json_decref it) or NULL
 * with the reason in err.
 */
#ifndef CP_JSONUTIL_H
#define CP_JSONUTIL_H

#include <jansson.h>
#include <stddef.h>

#include "base/err.h"

/* Parses any JSON value (NUL inside strings allowed). Integers beyond 64
 * bits, which JavaScript writes freely, are read as reals rather than
 * refused. */
json_t *cp_json_load(const char *buf, size_t len, struct cp_err *err);

#endif
