/* SPDX-License-Identifier: Apache-2.0 */
/* hash: the 64-bit finalizer (MurmurHash3's fmix64) shared by the hash
 * tables of store.c and the Event correlator's keys in events.c.
 * Header-only, pure: any thread. */
#ifndef KC_HASH_H
#define KC_HASH_H

#include <stdint.h>

/* Spreads every input bit over the whole word (bijective). */
static inline uint64_t kc_mix64(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

#endif
