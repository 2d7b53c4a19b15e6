/* SPDX-License-Identifier: Apache-2.0 */
/* crc32c: see crc32c.h. */
#include "base/crc32c.h"

#include <pthread.h>

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    table[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; i++)
    for (int t = 1; t < 8; t++) table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
}

uint32_t kc_crc32c(uint32_t crc, const void *p, size_t n) {
  pthread_once(&table_once, build_table);
  const unsigned char *b = p;
  uint32_t c = ~crc;
  while (n && ((uintptr_t)b & 7)) {
    c = (c >> 8) ^ table[0][(c ^ *b++) & 0xff];
    n--;
  }
  while (n >= 8) {
    /* Byte by byte assembly keeps it independent of the host's byte order. */
    uint32_t lo = c ^ ((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
    uint32_t hi = (uint32_t)b[4] | (uint32_t)b[5] << 8 | (uint32_t)b[6] << 16 | (uint32_t)b[7] << 24;
    c = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^ table[5][(lo >> 16) & 0xff] ^
        table[4][lo >> 24] ^ table[3][hi & 0xff] ^ table[2][(hi >> 8) & 0xff] ^
        table[1][(hi >> 16) & 0xff] ^ table[0][hi >> 24];
    b += 8;
    n -= 8;
  }
  while (n--) c = (c >> 8) ^ table[0][(c ^ *b++) & 0xff];
  return ~c;
}
