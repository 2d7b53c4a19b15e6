/* testutil: small helpers shared by the unit tests (linked into each).
 *
 * Threads: any. Errors: NULL (errno set) when the file cannot be read.
 * Ownership: returned buffers are malloc'ed; the caller frees them.
 */
#ifndef TEST_TESTUTIL_H
#define TEST_TESTUTIL_H

#include <stddef.h>

/* The whole file at path, NUL-terminated (binary-safe: *len, if not NULL,
 * is its length without the NUL). */
char *tu_read_file(const char *path, size_t *len);

#endif
