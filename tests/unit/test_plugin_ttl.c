/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the ttl plugin's pure logic (plugins/ttl/ttl.c is compiled
 * into this test): Go duration parsing, RFC 3339 parsing, remaining time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../plugins/ttl/ttl.c"

static void test_durations(void **state) {
  static const struct {
    const char *in;
    int rc;
    int64_t ms;
  } cases[] = {
      {"90s", 0, 90000},       {"10m", 0, 600000},   {"2h", 0, 7200000},    {"1h30m", 0, 5400000},
      {"1.5h", 0, 5400000},    {"500ms", 0, 500},    {"1ns", 0, 1},         {"1500us", 0, 2},
      {"0", 0, 0},             {"0s", 0, 0},         {"1h1m1s1ms", 0, 3661001},
      {"2562047h", 0, 2562047LL * 3600000},
      {"", -EINVAL, 0},        {"10", -EINVAL, 0},   {"-1s", -EINVAL, 0},   {"+1s", -EINVAL, 0},
      {"1x", -EINVAL, 0},      {"s", -EINVAL, 0},    {"1h 2m", -EINVAL, 0}, {"soon", -EINVAL, 0},
      {".s", -EINVAL, 0},      {"9999999999h", -ERANGE, 0}, {"2562048h", -ERANGE, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int64_t ms = -1;
    int rc = ttl_parse_duration_ms(cases[i].in, &ms);
    if (rc != cases[i].rc || (rc == 0 && ms != cases[i].ms))
      fail_msg("%s: rc %d ms %lld, want rc %d ms %lld", cases[i].in, rc, (long long)ms, cases[i].rc,
               (long long)cases[i].ms);
  }
}

static int64_t t(const char *s) {
  int64_t ms = -1;
  if (ttl_parse_time_ms((kctrld_str){s, strlen(s)}, &ms) < 0) return -1;
  return ms;
}

static void test_times(void **state) {
  assert_int_equal(t("1970-01-01T00:00:00Z"), 0);
  assert_int_equal(t("2024-05-01T10:00:00Z"), 1714557600000LL);
  assert_int_equal(t("2024-05-01T10:00:00.5Z"), 1714557600500LL);
  assert_int_equal(t("2024-05-01T10:00:00.123456Z"), 1714557600123LL);
  assert_int_equal(t("2024-05-01T12:00:00+02:00"), 1714557600000LL);
  assert_int_equal(t("2024-05-01T08:30:00-01:30"), 1714557600000LL);
  assert_int_equal(t("2000-02-29T00:00:00Z"), 951782400000LL);
  assert_int_equal(t("2024-09-12T06:20:57Z"), 1726122057000LL); /* the coredns fixture */
  assert_int_equal(t("2024-05-01 10:00:00"), -1);
  assert_int_equal(t("2024-13-01T10:00:00Z"), -1);
  assert_int_equal(t("2024-05-01T10:00:00"), -1);
  assert_int_equal(t("2024-05-01T10:00:00Zjunk"), -1);
  assert_int_equal(t("yesterday"), -1);
  assert_int_equal(ttl_parse_time_ms((kctrld_str){NULL, 0}, &(int64_t){0}), -EINVAL);
}

static void test_remaining(void **state) {
  assert_int_equal(ttl_remaining_ms(1000, 90000, 1000), 90000);
  assert_int_equal(ttl_remaining_ms(1000, 90000, 90999), 1);
  assert_int_equal(ttl_remaining_ms(1000, 90000, 91000), -1);
  assert_int_equal(ttl_remaining_ms(1000, 0, 1000), -1);
  assert_int_equal(ttl_remaining_ms(1000, INT64_MAX, 0), INT64_MAX);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_durations),
      cmocka_unit_test(test_times),
      cmocka_unit_test(test_remaining),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
