/*
 * hex.h - the value of one hexadecimal digit.
 *
 * No allocation, no state.
 */
#ifndef CP_HEX_H
#define CP_HEX_H

/* 0..15 for '0'-'9', 'a'-'f', 'A'-'F'; -1 for any other character. */
int cp_hex_digit(int c);

#endif
