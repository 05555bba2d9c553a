/*
 * yamljson.h - one YAML document (or JSON, which is YAML) into a jansson
 * value, as Kubernetes tools read manifests: plain scalars that look like
 * null, booleans or numbers become those; everything else is a string.
 *
 * Bounded: at most K8S_YAML_MAX_NODES values and K8S_YAML_MAX_DEPTH levels,
 * so an alias bomb or a hostile nesting fails with a clear error.
 *
 * Ownership: returns a new reference (json_decref) or NULL with err set.
 */
#ifndef K8S_YAMLJSON_H
#define K8S_YAMLJSON_H

#include <jansson.h>
#include <stddef.h>

#include "base/err.h"

#define K8S_YAML_MAX_NODES 100000
#define K8S_YAML_MAX_DEPTH 64

json_t *k8s_yaml_to_json(const char *buf, size_t len, const char *what,
                         struct cp_err *err);

#endif
