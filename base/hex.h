/*
 * hex.h - hexadecimal digits: the value of one, and bytes written as them.
 *
 * No allocation, no state.
 */
#ifndef CP_HEX_H
#define CP_HEX_H

#include <stddef.h>

/* 0..15 for '0'-'9', 'a'-'f', 'A'-'F'; -1 for any other character. */
int cp_hex_digit(int c);

/* @n bytes as 2 * @n lowercase digits and a NUL in @out (2 * @n + 1). */
void cp_hex_encode(const unsigned char *in, size_t n, char *out);

#endif
