/*
 * hex.c - the value of one hexadecimal digit, for every parser of hex text
 * (percent-encoding, JSON pointers, key files).
 */
#include "base/hex.h"

int cp_hex_digit(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}
