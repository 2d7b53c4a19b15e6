/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of daemon/host/applymemo.c: what is remembered answers
 * unchanged only for the same resourceVersion, hash and length; a full
 * memo drops its oldest; forget and an unkeepable resourceVersion drop an
 * entry; the skip counts per controller. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/hash.h"
#include "host/applymemo.h"

#define S(s) (s), strlen(s)

static void test_remember_and_compare(void **state) {
  (void)state;
  kc_applymemo *m = kc_applymemo_new(0);
  assert_non_null(m);
  uint64_t h = kc_hash_bytes(S("{\"a\":1}"));
  assert_int_not_equal(h, kc_hash_bytes(S("{\"a\":2}")));
  assert_false(kc_applymemo_unchanged(m, S("u1"), S("10"), h, 7));
  kc_applymemo_remember(m, S("u1"), S("10"), h, 7);
  assert_true(kc_applymemo_unchanged(m, S("u1"), S("10"), h, 7));
  assert_false(kc_applymemo_unchanged(m, S("u1"), S("11"), h, 7));
  assert_false(kc_applymemo_unchanged(m, S("u1"), S("1"), h, 7));
  assert_false(kc_applymemo_unchanged(m, S("u1"), S("10"), h + 1, 7));
  assert_false(kc_applymemo_unchanged(m, S("u1"), S("10"), h, 8));
  assert_false(kc_applymemo_unchanged(m, S("u2"), S("10"), h, 7));
  /* Remembered again: replaced, not added. */
  kc_applymemo_remember(m, S("u1"), S("12"), h, 7);
  assert_int_equal(kc_applymemo_size(m), 1);
  assert_true(kc_applymemo_unchanged(m, S("u1"), S("12"), h, 7));
  /* A resourceVersion too long to keep forgets the uid. */
  kc_applymemo_remember(m, S("u1"), S("123456789012345678901234567890"), h, 7);
  assert_int_equal(kc_applymemo_size(m), 0);
  kc_applymemo_remember(m, S("u1"), S("12"), h, 7);
  kc_applymemo_forget(m, S("u1"));
  assert_false(kc_applymemo_unchanged(m, S("u1"), S("12"), h, 7));
  assert_int_equal(kc_applymemo_size(m), 0);
  kc_applymemo_free(m);
}

static void test_full_drops_oldest(void **state) {
  (void)state;
  kc_applymemo *m = kc_applymemo_new(3);
  assert_non_null(m);
  kc_applymemo_remember(m, S("a"), S("1"), 1, 1);
  kc_applymemo_remember(m, S("b"), S("1"), 1, 1);
  kc_applymemo_remember(m, S("c"), S("1"), 1, 1);
  kc_applymemo_remember(m, S("a"), S("2"), 1, 1); /* a is now the newest */
  kc_applymemo_remember(m, S("d"), S("1"), 1, 1); /* drops b */
  assert_int_equal(kc_applymemo_size(m), 3);
  assert_false(kc_applymemo_unchanged(m, S("b"), S("1"), 1, 1));
  assert_true(kc_applymemo_unchanged(m, S("a"), S("2"), 1, 1));
  assert_true(kc_applymemo_unchanged(m, S("c"), S("1"), 1, 1));
  assert_true(kc_applymemo_unchanged(m, S("d"), S("1"), 1, 1));
  kc_applymemo_forget(m, S("c"));
  kc_applymemo_remember(m, S("e"), S("1"), 1, 1); /* room: nothing dropped */
  assert_int_equal(kc_applymemo_size(m), 3);
  assert_true(kc_applymemo_unchanged(m, S("a"), S("2"), 1, 1));
  kc_applymemo_free(m);
}

static void test_skip_counts(void **state) {
  (void)state;
  assert_int_equal(kc_applymemo_skips_of("x"), 0);
  kc_applymemo_count_skip("x");
  kc_applymemo_count_skip("y");
  kc_applymemo_count_skip("x");
  assert_int_equal(kc_applymemo_skips_of("x"), 2);
  assert_int_equal(kc_applymemo_skips_of("y"), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_remember_and_compare),
      cmocka_unit_test(test_full_drops_oldest),
      cmocka_unit_test(test_skip_counts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
