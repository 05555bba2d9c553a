/*
 * b64.h - standard base64 (RFC 4648 section 4, with padding) as kubeconfig
 * *-data fields and ExecCredential cluster info use it.
 *
 * Pure, thread-safe.
 *
 * Ownership: both functions return a *new* buffer in *out, NUL-terminated
 * (the NUL is not counted in *out_len), freed by the caller with free().
 * Inputs are borrowed for the call.
 */
#ifndef K8S_B64_H
#define K8S_B64_H

#include <stddef.h>

#include "base/err.h"

/* Decode; CR, LF, space and tab are skipped (as Go's decoder skips CR/LF).
 * Returns 0, CP_E_PARSE on a bad character, bad padding or a length that is
 * not a multiple of 4, CP_E_NOMEM. */
int k8s_b64_decode(const char *in, size_t len, unsigned char **out,
                   size_t *out_len, struct cp_err *err);

/* Encode. Returns 0 or CP_E_NOMEM. */
int k8s_b64_encode(const void *in, size_t len, char **out, size_t *out_len,
                   struct cp_err *err);

#endif
