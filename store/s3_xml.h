/*
 * s3_xml.h - the few facts codepod reads from an S3 store's XML answers: the
 * text of an element by its name (<UploadId>, <Code>, <Key>,
 * <IsTruncated>, ...). Not an XML parser: S3's answers are flat documents of
 * simple elements, and nothing here trusts them to be well formed. A value
 * is found only between `<NAME>` and the next `</NAME>`; the five
 * predefined entities are decoded, any other `&` sequence makes the value
 * invalid (skipped), as does a value holding `<` or a NUL byte.
 *
 * Ownership: @body is borrowed for the call; values are copied into the
 * caller's buffer.
 *
 * Context: pure; any thread.
 */
#ifndef STORE_S3_XML_H
#define STORE_S3_XML_H

#include <stddef.h>

/**
 * store_xml_each() - call @each for every valid value of element @name in
 * @body (@len bytes, need not be NUL-terminated), in document order.
 * @each gets the decoded value, NUL-terminated, in a buffer of the call's
 * (a value over 1023 bytes decoded is skipped); returning non-zero stops
 * the walk. Returns how many values were given to @each.
 */
size_t store_xml_each(const char *body, size_t len, const char *name,
                      int (*each)(void *ud, const char *value, size_t vlen), void *ud);

/**
 * store_xml_blocks() - call @each with the raw bytes between every `<NAME>`
 * and its next `</NAME>` (not decoded: for an element of elements, such as
 * a listing's <Contents>, read further with store_xml_first()). Returning
 * non-zero stops the walk. Returns how many blocks were given.
 */
size_t store_xml_blocks(const char *body, size_t len, const char *name,
                        int (*each)(void *ud, const char *inner, size_t ilen), void *ud);

/**
 * store_xml_first() - the first valid value of @name copied into @out
 * (@cap bytes, NUL-terminated). Returns 1 when found, else 0 (@out "").
 */
int store_xml_first(const char *body, size_t len, const char *name, char *out, size_t cap);

#endif
