/* SPDX-License-Identifier: Apache-2.0 */
/* shardsel: shard hash, ranges and selector rendering (see shardsel.h). */
#include "lease/shardsel.h"

#include <errno.h>
#include <string.h>

uint64_t kc_shard_hash(const char *value, size_t len) {
  uint64_t h = 0xcbf29ce484222325ULL;
  const unsigned char *p = (const unsigned char *)value;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

int kc_shard_range_contains(const kc_shard_range *r, uint64_t h) {
  if (h < r->start) return 0;
  return r->end_is_max || h < r->end;
}

int kc_shard_ranges_contain(const kc_shard_range *ranges, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; i++)
    if (kc_shard_range_contains(&ranges[i], h)) return 1;
  return 0;
}

/* floor(i * 2^64 / n) for 0 <= i < n, without 128-bit arithmetic:
 * 2^64 = q*n + r with q = floor(2^64 / n), r = 2^64 mod n, so
 * i*2^64/n = i*q + i*r/n, and i*r < n*n fits when n < 2^32. */
static uint64_t boundary(unsigned i, unsigned n) {
  uint64_t q = UINT64_MAX / n, r = UINT64_MAX % n + 1; /* 2^64 = q*n + r */
  if (r == n) { q++; r = 0; }
  return (uint64_t)i * q + ((uint64_t)i * r) / n;
}

void kc_shard_ranges_split(unsigned shards, unsigned index, kc_shard_range *out) {
  if (shards == 0 || index >= shards) {
    *out = (kc_shard_range){0, 0, 0};
    return;
  }
  out->start = boundary(index, shards);
  if (index + 1 == shards) {
    out->end = 0;
    out->end_is_max = 1;
  } else {
    out->end = boundary(index + 1, shards);
    out->end_is_max = 0;
  }
}

int kc_shard_selector_format(const char *field, const kc_shard_range *ranges, size_t n, kc_buf *out) {
  if (!field || !ranges || n == 0) return -EINVAL;
  if (strncmp(field, "object.", 7) == 0) field += 7;
  if (strcmp(field, "metadata.uid") != 0 && strcmp(field, "metadata.namespace") != 0) return -EINVAL;
  for (size_t i = 0; i < n; i++)
    if (!ranges[i].end_is_max && ranges[i].start >= ranges[i].end) return -EINVAL;
  for (size_t i = 0; i < n; i++) {
    if (i) kc_buf_puts(out, " || ");
    kc_buf_printf(out, "shardRange(object.%s, '0x%016llx', ", field, (unsigned long long)ranges[i].start);
    if (ranges[i].end_is_max)
      kc_buf_puts(out, "'0x10000000000000000')");
    else
      kc_buf_printf(out, "'0x%016llx')", (unsigned long long)ranges[i].end);
  }
  return out->err;
}
