/* SPDX-License-Identifier: Apache-2.0 */
/* crc32c: the CRC-32C (Castagnoli) checksum of byte ranges, for files the
 * daemon writes and reads back (watch/snapfile.h). Software slicing-by-8,
 * no CPU feature needed; about 1-2 GB/s per core.
 *
 * Threads: any (the tables are built once, under pthread_once).
 */
#ifndef KC_CRC32C_H
#define KC_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continues `crc` (0 to start) over p[0..n). kc_crc32c(0, "123456789", 9)
 * is 0xe3069283. */
uint32_t kc_crc32c(uint32_t crc, const void *p, size_t n);

#endif
