/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for daemon/base/clock.c: the real clock moves with CLOCK_MONOTONIC
 * and its timers are uv timers; the manual clock stands still until
 * advanced, and its timers fire in the loop's next iteration after an
 * advance reaches them, in due order, never inside kc_clock_advance. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "base/clock.h"

#define MS 1000000ull

static char fired[64];
static size_t nfired;

static void on_fire(uv_timer_t *t) {
  if (nfired + 1 < sizeof fired) fired[nfired++] = *(const char *)t->data;
  fired[nfired] = 0;
}

static int reset(void **state) {
  nfired = 0;
  fired[0] = 0;
  return 0;
}

static int back_to_real(void **state) {
  kc_clock_set_real();
  return 0;
}

static void test_real_clock_is_monotonic(void **state) {
  assert_false(kc_clock_is_manual());
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t before = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  uint64_t a = kc_clock_now_ns();
  uint64_t b = kc_clock_now_ns();
  assert_true(a >= before && b >= a);
  assert_true(kc_clock_now_ms() >= a / MS);
  uint64_t due;
  assert_false(kc_clock_next_due(&due));
  kc_clock_advance(5 * MS); /* no-op */
  assert_true(kc_clock_now_ns() - b < 1000 * MS);
}

static void test_real_timer_is_a_uv_timer(void **state) {
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  kc_timer t;
  assert_int_equal(kc_timer_init(&loop, &t), 0);
  t.uv.data = "r";
  kc_timer_start(&t, on_fire, 1, 0);
  assert_true(kc_timer_active(&t));
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_string_equal(fired, "r");
  assert_false(kc_timer_active(&t));
  kc_timer_close(&t, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_manual_clock_stands_still(void **state) {
  kc_clock_set_manual(1000 * MS);
  assert_true(kc_clock_is_manual());
  assert_int_equal(kc_clock_now_ns(), 1000 * MS);
  assert_int_equal(kc_clock_now_ms(), 1000);
  kc_clock_advance(7 * MS + 3);
  assert_int_equal(kc_clock_now_ns(), 1007 * MS + 3);
  assert_int_equal(kc_clock_now_ms(), 1007);
  kc_clock_set_real();
  assert_false(kc_clock_is_manual());
}

static void test_manual_timers_fire_in_due_order(void **state) {
  kc_clock_set_manual(0);
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  kc_timer a, b, c;
  assert_int_equal(kc_timer_init(&loop, &a), 0);
  assert_int_equal(kc_timer_init(&loop, &b), 0);
  assert_int_equal(kc_timer_init(&loop, &c), 0);
  a.uv.data = "a", b.uv.data = "b", c.uv.data = "c";
  kc_timer_start(&a, on_fire, 300, 0);
  kc_timer_start(&b, on_fire, 100, 0);
  kc_timer_start(&c, on_fire, 200, 0);
  uint64_t due = 0;
  assert_true(kc_clock_next_due(&due));
  assert_int_equal(due, 100 * MS);

  /* Nothing is due yet: the loop has nothing to run. */
  uv_run(&loop, UV_RUN_NOWAIT);
  assert_string_equal(fired, "");
  kc_clock_advance(99 * MS);
  uv_run(&loop, UV_RUN_NOWAIT);
  assert_string_equal(fired, "");

  /* Due, but the callbacks wait for the loop. */
  kc_clock_advance(250 * MS - 99 * MS);
  assert_string_equal(fired, "");
  assert_true(kc_timer_active(&b));
  uv_run(&loop, UV_RUN_NOWAIT);
  assert_string_equal(fired, "bc");
  assert_false(kc_timer_active(&b));
  assert_true(kc_clock_next_due(&due));
  assert_int_equal(due, 300 * MS);

  /* Re-arming replaces the due time; stopping unlinks. */
  kc_timer_start(&a, on_fire, 10, 0);
  assert_true(kc_clock_next_due(&due));
  assert_int_equal(due, 260 * MS);
  kc_timer_stop(&a);
  assert_false(kc_clock_next_due(&due));
  assert_false(kc_timer_active(&a));

  /* Due now: the loop's next iteration, without an advance. */
  kc_timer_start(&a, on_fire, 0, 0);
  assert_false(kc_clock_next_due(&due) && due < 300 * MS);
  uv_run(&loop, UV_RUN_NOWAIT);
  assert_string_equal(fired, "bca");

  /* A timer stopped after its due time passed but before the loop ran it
   * does not fire. */
  kc_timer_start(&a, on_fire, 5, 0);
  kc_clock_advance(5 * MS);
  kc_timer_stop(&a);
  uv_run(&loop, UV_RUN_NOWAIT);
  assert_string_equal(fired, "bca");

  kc_timer_close(&a, NULL);
  kc_timer_close(&b, NULL);
  kc_timer_close(&c, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_manual_repeat(void **state) {
  kc_clock_set_manual(0);
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  kc_timer r;
  assert_int_equal(kc_timer_init(&loop, &r), 0);
  r.uv.data = "r";
  kc_timer_start(&r, on_fire, 10, 10);
  kc_clock_advance(10 * MS);
  uv_run(&loop, UV_RUN_NOWAIT);
  assert_string_equal(fired, "r");
  /* Five periods in one advance: one firing, the next a period later. */
  kc_clock_advance(50 * MS);
  uv_run(&loop, UV_RUN_NOWAIT);
  assert_string_equal(fired, "rr");
  uint64_t due = 0;
  assert_true(kc_clock_next_due(&due));
  assert_int_equal(due, 70 * MS);
  kc_timer_close(&r, NULL);
  assert_false(kc_clock_next_due(&due));
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* Civil UTC time to Unix seconds, across leap days, centuries and the
 * epoch (values from Python's calendar.timegm). */
static void test_civil_to_unix(void **state) {
  (void)state;
  assert_true(kc_clock_civil_to_unix(1970, 1, 1, 0, 0, 0) == 0);
  assert_true(kc_clock_civil_to_unix(1969, 12, 31, 23, 59, 59) == -1);
  assert_true(kc_clock_civil_to_unix(2000, 3, 1, 0, 0, 0) == 951868800);
  assert_true(kc_clock_civil_to_unix(2024, 2, 29, 12, 34, 56) == 1709210096);
  assert_true(kc_clock_civil_to_unix(1600, 1, 1, 0, 0, 0) == -11676096000);
  assert_true(kc_clock_civil_to_unix(2100, 3, 1, 0, 0, 0) == 4107542400);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_civil_to_unix),
      cmocka_unit_test_setup_teardown(test_real_clock_is_monotonic, reset, back_to_real),
      cmocka_unit_test_setup_teardown(test_real_timer_is_a_uv_timer, reset, back_to_real),
      cmocka_unit_test_setup_teardown(test_manual_clock_stands_still, reset, back_to_real),
      cmocka_unit_test_setup_teardown(test_manual_timers_fire_in_due_order, reset, back_to_real),
      cmocka_unit_test_setup_teardown(test_manual_repeat, reset, back_to_real),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
