/*
 * utf8.h - turn arbitrary bytes into valid UTF-8.
 *
 * Program output is arbitrary bytes, but it ends up in JSON strings, which
 * must be valid UTF-8. cp_utf8_sanitize() copies the input, replacing every
 * ill-formed sequence with U+FFFD (EF BF BD): one U+FFFD per "maximal
 * subpart" (Unicode 15, section 3.9, U+FFFD substitution of maximal
 * subparts; what WHATWG's decoder and ICU do). Overlong forms (C0, C1, E0
 * 80..9F, F0 80..8F), UTF-16 surrogates (ED A0..BF) and code points over
 * U+10FFFF (F4 90.., F5..FF) are ill-formed.
 *
 * NUL bytes are replaced with U+FFFD too: the result is a C string that can
 * be handed to json_string() or printed without being cut short, and no
 * consumer has to handle embedded NULs.
 *
 * Ownership: the result is new (malloc'd); the caller frees it with free().
 * The input is borrowed for the duration of the call.
 *
 * Context: pure, any thread.
 */
#ifndef CP_UTF8_H
#define CP_UTF8_H

#include <stddef.h>

/**
 * cp_utf8_sanitize() - a valid UTF-8 copy of @s.
 * @s: @len bytes (may be NULL when @len is 0).
 * @out_len: if not NULL, receives the result's length (without its NUL).
 *
 * The result is at most 3 * @len bytes (+ NUL): every replaced byte costs
 * at most 3 bytes. Valid UTF-8 without NUL comes back byte for byte.
 *
 * Return: a new NUL-terminated string (free with free()), or NULL on
 * allocation failure.
 */
char *cp_utf8_sanitize(const char *s, size_t len, size_t *out_len);

#endif
