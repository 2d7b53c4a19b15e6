/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/ratelimit: exact sequences with an injected clock. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/ratelimit.h"

#define MS KC_NS_PER_MS
#define SEC KC_NS_PER_SEC

/* client-go: 5 ms doubling; the cap of 1000 s is first hit on the 19th call. */
static void test_backoff_exact_sequence(void **state) {
  (void)state;
  kc_backoff b = {KC_BACKOFF_DEFAULT_BASE_NS, KC_BACKOFF_DEFAULT_MAX_NS};
  uint32_t failures = 0;
  uint64_t expect = 5 * MS;
  for (int call = 1; call <= 18; call++) {
    assert_int_equal(kc_backoff_when(&b, &failures), expect);
    assert_int_equal(failures, (uint32_t)call);
    expect *= 2;
  }
  /* 18th call returned 5 ms * 2^17 = 655.36 s; 19th would be 1310.72 s. */
  assert_int_equal(expect / 2, 655360 * MS);
  assert_int_equal(kc_backoff_when(&b, &failures), 1000 * SEC);
  for (int i = 0; i < 100; i++) assert_int_equal(kc_backoff_when(&b, &failures), 1000 * SEC);
  assert_int_equal(failures, 119);
}

static void test_backoff_forget_and_saturation(void **state) {
  (void)state;
  kc_backoff b = {KC_BACKOFF_DEFAULT_BASE_NS, KC_BACKOFF_DEFAULT_MAX_NS};
  uint32_t failures = 0;
  assert_int_equal(kc_backoff_when(&b, &failures), 5 * MS);
  assert_int_equal(kc_backoff_when(&b, &failures), 10 * MS);
  kc_backoff_forget(&failures);
  assert_int_equal(failures, 0);
  assert_int_equal(kc_backoff_when(&b, &failures), 5 * MS);
  /* Huge exponents never overflow into small delays. */
  failures = 63;
  assert_int_equal(kc_backoff_when(&b, &failures), 1000 * SEC);
  failures = UINT32_MAX;
  assert_int_equal(kc_backoff_when(&b, &failures), 1000 * SEC);
  assert_int_equal(failures, UINT32_MAX);
  kc_backoff unlimited = {1, UINT64_MAX};
  failures = 63;
  assert_int_equal(kc_backoff_when(&unlimited, &failures), 1ull << 63);
  assert_int_equal(kc_backoff_when(&unlimited, &failures), UINT64_MAX);
}

/* 10/s burst 100: 100 immediate tokens, then reservations 100 ms apart. */
static void test_bucket_burst_then_spacing(void **state) {
  (void)state;
  kc_bucket bk;
  kc_bucket_init(&bk, 10.0, 100);
  uint64_t now = 123 * SEC;
  for (int i = 0; i < 100; i++) assert_int_equal(kc_bucket_reserve(&bk, now), 0);
  for (int i = 1; i <= 50; i++) assert_int_equal(kc_bucket_reserve(&bk, now), (uint64_t)i * 100 * MS);
  /* 5 s later the 50 owed tokens are paid back: the next one is free again. */
  now += 5 * SEC;
  assert_int_equal(kc_bucket_reserve(&bk, now), 100 * MS);
  now += 100 * MS;
  assert_int_equal(kc_bucket_reserve(&bk, now), 100 * MS);
  /* Refill is capped at the burst. */
  now += 3600 * SEC;
  for (int i = 0; i < 100; i++) assert_int_equal(kc_bucket_reserve(&bk, now), 0);
  assert_int_equal(kc_bucket_reserve(&bk, now), 100 * MS);
  /* Partial refill: 50 ms later half a token has come back. */
  now += 150 * MS; /* owed 1 token, 1.5 back -> 0.5 left */
  assert_int_equal(kc_bucket_reserve(&bk, now), 50 * MS);
}

static void test_bucket_clock_backwards_and_disabled(void **state) {
  (void)state;
  kc_bucket bk;
  kc_bucket_init(&bk, 2.0, 1);
  assert_int_equal(kc_bucket_reserve(&bk, 10 * SEC), 0);
  assert_int_equal(kc_bucket_reserve(&bk, 9 * SEC), 500 * MS); /* no refill going back */
  assert_int_equal(kc_bucket_reserve(&bk, 10 * SEC), 1000 * MS);
  kc_bucket off;
  kc_bucket_init(&off, 0, 5);
  for (int i = 0; i < 1000; i++) assert_int_equal(kc_bucket_reserve(&off, 0), 0);
  kc_bucket zero_burst;
  kc_bucket_init(&zero_burst, 10.0, 0); /* treated as 1 */
  assert_int_equal(kc_bucket_reserve(&zero_burst, SEC), 0);
  assert_int_equal(kc_bucket_reserve(&zero_burst, SEC), 100 * MS);
}

/* Max-of: the bucket dominates early failures, the backoff later ones. */
static void test_max_of(void **state) {
  (void)state;
  kc_ratelimit_config cfg;
  kc_ratelimit_config_default(&cfg);
  kc_ratelimit rl;
  assert_int_equal(kc_ratelimit_init(&rl, &cfg), 0);
  uint64_t now = SEC;
  uint32_t a = 0, b = 0;
  /* 98 other items use up the burst, with one failure each. */
  for (int i = 0; i < 98; i++) {
    uint32_t f = 0;
    assert_int_equal(kc_ratelimit_when(&rl, &f, now), 5 * MS);
  }
  assert_int_equal(kc_ratelimit_when(&rl, &a, now), 5 * MS);  /* token 99 */
  assert_int_equal(kc_ratelimit_when(&rl, &a, now), 10 * MS); /* token 100 */
  assert_int_equal(kc_ratelimit_when(&rl, &b, now), 100 * MS); /* bucket > 5 ms */
  assert_int_equal(kc_ratelimit_when(&rl, &a, now), 200 * MS); /* bucket 200 > 20 */
  assert_int_equal(a, 3);
  assert_int_equal(b, 1);
  now += 3600 * SEC;
  a = 10; /* 5 ms * 2^10 = 5.12 s beats a full bucket */
  assert_int_equal(kc_ratelimit_when(&rl, &a, now), 5120 * MS);
  cfg.max_delay_ns = 1;
  assert_int_equal(kc_ratelimit_init(&rl, &cfg), -EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_backoff_exact_sequence),
      cmocka_unit_test(test_backoff_forget_and_saturation),
      cmocka_unit_test(test_bucket_burst_then_spacing),
      cmocka_unit_test(test_bucket_clock_backwards_and_disabled),
      cmocka_unit_test(test_max_of),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
