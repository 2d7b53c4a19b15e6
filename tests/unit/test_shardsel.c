/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/shardsel: FNV-1a 64 test vectors, range
 * membership, the even split of the hash space and the shardSelector
 * rendering. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "lease/shardsel.h"

static void test_hash_vectors(void **state) {
  (void)state;
  /* The published FNV-1a 64 vectors (Go's hash/fnv New64a gives the same). */
  assert_true(kc_shard_hash("", 0) == 0xcbf29ce484222325ULL);
  assert_true(kc_shard_hash("a", 1) == 0xaf63dc4c8601ec8cULL);
  assert_true(kc_shard_hash("foobar", 6) == 0x85944171f73967e8ULL);
  /* len counts, not the NUL */
  assert_true(kc_shard_hash("foobarXYZ", 6) == 0x85944171f73967e8ULL);
  /* bytes >= 0x80 are taken unsigned */
  assert_true(kc_shard_hash("\xff", 1) == ((0xcbf29ce484222325ULL ^ 0xffULL) * 0x100000001b3ULL));
}

static void test_contains(void **state) {
  (void)state;
  kc_shard_range r = {10, 20, 0};
  assert_false(kc_shard_range_contains(&r, 9));
  assert_true(kc_shard_range_contains(&r, 10));
  assert_true(kc_shard_range_contains(&r, 19));
  assert_false(kc_shard_range_contains(&r, 20));
  kc_shard_range top = {0x8000000000000000ULL, 0, 1};
  assert_true(kc_shard_range_contains(&top, UINT64_MAX));
  assert_true(kc_shard_range_contains(&top, 0x8000000000000000ULL));
  assert_false(kc_shard_range_contains(&top, 0x7fffffffffffffffULL));
  kc_shard_range empty = {5, 5, 0};
  assert_false(kc_shard_range_contains(&empty, 5));
  kc_shard_range two[2] = {{0, 1, 0}, {100, 0, 1}};
  assert_true(kc_shard_ranges_contain(two, 2, 0));
  assert_false(kc_shard_ranges_contain(two, 2, 50));
  assert_true(kc_shard_ranges_contain(two, 2, UINT64_MAX));
  assert_false(kc_shard_ranges_contain(two, 0, 0));
}

static void test_split(void **state) {
  (void)state;
  kc_shard_range r;
  kc_shard_ranges_split(1, 0, &r);
  assert_true(r.start == 0 && r.end_is_max);
  kc_shard_ranges_split(2, 0, &r);
  assert_true(r.start == 0 && r.end == 0x8000000000000000ULL && !r.end_is_max);
  kc_shard_ranges_split(2, 1, &r);
  assert_true(r.start == 0x8000000000000000ULL && r.end_is_max);
  kc_shard_ranges_split(4, 1, &r);
  assert_true(r.start == 0x4000000000000000ULL && r.end == 0x8000000000000000ULL);
  /* 2^64 = 3 * 0x5555555555555555 + 1: floor(i * 2^64 / 3) */
  kc_shard_ranges_split(3, 1, &r);
  assert_true(r.start == 0x5555555555555555ULL && r.end == 0xaaaaaaaaaaaaaaaaULL);
  kc_shard_ranges_split(3, 3, &r); /* out of range: empty */
  assert_true(r.start == 0 && r.end == 0 && !r.end_is_max);
  kc_shard_ranges_split(0, 0, &r);
  assert_false(kc_shard_range_contains(&r, 0));
  /* every split tiles the space: each range starts where the one before
   * ended, the last ends at 2^64, and all have the width 2^64/n rounded
   * down or up (sampled indexes for the large counts) */
  unsigned counts[] = {1, 2, 3, 5, 7, 16, 100, 255, 1000, 65537, 4000000000u};
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
    unsigned n = counts[c];
    uint64_t width = UINT64_MAX / n; /* floor((2^64 - 1) / n) */
    unsigned idx[] = {0, 1, 2, n / 3, n / 2, n - 2, n - 1};
    for (size_t k = 0; k < sizeof idx / sizeof idx[0]; k++) {
      unsigned i = idx[k];
      if (i >= n) continue;
      kc_shard_ranges_split(n, i, &r);
      if (i == 0) assert_true(r.start == 0);
      if (i > 0) {
        kc_shard_range prev;
        kc_shard_ranges_split(n, i - 1, &prev);
        assert_false(prev.end_is_max);
        assert_true(prev.end == r.start);
      }
      assert_int_equal(r.end_is_max, i + 1 == n);
      if (n > 1) {
        uint64_t len = r.end_is_max ? (uint64_t)0 - r.start : r.end - r.start; /* 2^64 - start */
        assert_true(len == width || len == width + 1);
      }
    }
  }
}

static void test_format(void **state) {
  (void)state;
  kc_buf b = {0};
  kc_shard_range h[2];
  kc_shard_ranges_split(2, 0, &h[0]);
  kc_shard_ranges_split(2, 1, &h[1]);
  assert_int_equal(kc_shard_selector_format("metadata.uid", h, 1, &b), 0);
  assert_string_equal(b.p, "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')");
  kc_buf_reset(&b);
  assert_int_equal(kc_shard_selector_format("object.metadata.namespace", h, 2, &b), 0);
  assert_string_equal(b.p,
                      "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000') || "
                      "shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')");
  kc_buf_reset(&b);
  kc_shard_range odd = {0xabcULL, 0xDEADBEEFULL, 0};
  assert_int_equal(kc_shard_selector_format("metadata.uid", &odd, 1, &b), 0);
  assert_string_equal(b.p, "shardRange(object.metadata.uid, '0x0000000000000abc', '0x00000000deadbeef')");
  kc_buf_reset(&b);
  assert_int_equal(kc_shard_selector_format("metadata.name", h, 1, &b), -EINVAL);
  assert_int_equal(kc_shard_selector_format("metadata.uid", h, 0, &b), -EINVAL);
  kc_shard_range empty = {7, 7, 0};
  assert_int_equal(kc_shard_selector_format("metadata.uid", &empty, 1, &b), -EINVAL);
  assert_int_equal(b.len, 0);
  /* the buffer's error is returned */
  char small[16];
  kc_buf f = kc_buf_fixed(small, sizeof small);
  assert_int_equal(kc_shard_selector_format("metadata.uid", h, 1, &f), -ENOSPC);
  kc_buf_free(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hash_vectors),
      cmocka_unit_test(test_contains),
      cmocka_unit_test(test_split),
      cmocka_unit_test(test_format),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
