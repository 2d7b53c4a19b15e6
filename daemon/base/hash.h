/* SPDX-License-Identifier: Apache-2.0 */
/* hash: the 64-bit finalizer (MurmurHash3's fmix64) shared by the hash
 * tables of store.c and the Event correlator's keys in events.c, a byte and
 * string hash built on it (hook attempt counters, the keys of
 * base/childpool, snapshot identities, the desired-state apply memo), the
 * xorshift64* generator behind every jitter and sample (reflector, leader,
 * consistency check). Header-only: any thread (each state has one owner). */
#ifndef KC_HASH_H
#define KC_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Spreads every input bit over the whole word (bijective). */
static inline uint64_t kc_mix64(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

/* The hash of n bytes for hash tables and for telling contents apart:
 * 64-bit FNV-1a, mixed (kc_mix64). */
static inline uint64_t kc_hash_bytes(const void *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const unsigned char *c = p, *end = c + n; c < end; c++) h = (h ^ *c) * 0x100000001b3ULL;
  return kc_mix64(h);
}

/* A string's: kc_hash_bytes of its bytes (snapshot file names depend on
 * it staying so). */
static inline uint64_t kc_hash_str(const char *s) { return kc_hash_bytes(s, strlen(s)); }

/* xorshift64*: advances *state (never 0) and returns the next value. For
 * jitter and sampling only, no security meaning. */
static inline uint64_t kc_xorshift64s(uint64_t *state) {
  uint64_t x = *state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return x * 0x2545f4914f6cdd1dULL;
}

#endif
