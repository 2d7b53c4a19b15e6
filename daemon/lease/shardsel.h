/* SPDX-License-Identifier: Apache-2.0 */
/* shardsel: the daemon's shard hash and hash ranges (KEP-5866 sharded list
 * and watch, docs/api-contract.md 5.4).
 *
 * Owns: the hash of a shard key (64-bit FNV-1a over the field's string
 * value, as kube-apiserver computes it for `shardSelector`), the half-open
 * range type over the 2^64 hash space, the even split of that space into N
 * ranges, and the rendering of a set of ranges as a `shardSelector` query
 * value:
 *   shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || ...
 * Bounds are written as 0x and 16 lowercase hex digits; an upper bound of
 * 2^64 (end_is_max) as '0x10000000000000000'. The same hash decides the
 * keys of a shard whether the server filters (the selector) or the daemon
 * does (kc_shard_range_contains), so both paths mean the same keys.
 *
 * Threads: pure functions without state; any thread.
 * Errors: 0 or a negative errno (-EINVAL for a bad field or no ranges; a
 * kc_buf error: -ENOMEM, -E2BIG, -ENOSPC).
 * Ownership: the caller owns every argument; kc_shard_selector_format
 * appends to the caller's buffer.
 */
#ifndef KC_SHARDSEL_H
#define KC_SHARDSEL_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

/* 64-bit FNV-1a of value[0..len) (offset basis 0xcbf29ce484222325, prime
 * 0x100000001b3). */
uint64_t kc_shard_hash(const char *value, size_t len);

/* [start, end); end_is_max: the end is 2^64 (end is then ignored). A range
 * with start >= end (and !end_is_max) is empty. */
typedef struct kc_shard_range {
  uint64_t start;
  uint64_t end;
  int end_is_max;
} kc_shard_range;

/* Cuts the 2^64 space into `shards` equal ranges (boundaries at
 * floor(i * 2^64 / shards)) and writes range `index`; the last one ends at
 * 2^64. The ranges of 0..shards-1 cover the space without overlap. shards
 * == 0 or index >= shards: an empty range {0, 0, 0}. */
void kc_shard_ranges_split(unsigned shards, unsigned index, kc_shard_range *out);

/* Appends the shardSelector of ranges[0..n), joined with " || ", for
 * field "metadata.uid" or "metadata.namespace" ("object." prefix accepted).
 * Returns 0, -EINVAL (other field, n == 0, an empty range) or out's error. */
int kc_shard_selector_format(const char *field, const kc_shard_range *ranges, size_t n, kc_buf *out);

/* --- Test seam: for tests only, not called by the daemon --- */
/* 1 when start <= h < end, else 0. */
int kc_shard_range_contains(const kc_shard_range *r, uint64_t h);

/* 1 when one of ranges[0..n) contains h, else 0 (n == 0: 0). */
int kc_shard_ranges_contain(const kc_shard_range *ranges, size_t n, uint64_t h);

#endif
