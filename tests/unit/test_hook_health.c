/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/hooks/hook_health: "not answering" after an
 * exchange without an answer, cleared by any answer; an exchange
 * outstanding past the timeout (manual clock); two instances of one
 * controller (a reload); other controllers unaffected; an abandoned
 * exchange changes nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "base/clock.h"
#include "hooks/hook_health.h"

static void test_answers(void **state) {
  (void)state;
  char why[256] = "";
  kc_hook_health_entry *e = kc_hook_health_register("teams", 1000);
  assert_non_null(e);
  assert_true(kc_hook_health("teams", why, sizeof why)); /* nothing asked yet */
  int t = kc_hook_health_begin(e);
  kc_hook_health_end(e, t, false, "hook pid=7 timed out after 1000ms; killed");
  assert_false(kc_hook_health("teams", why, sizeof why));
  assert_string_equal(why, "hook not answering: hook pid=7 timed out after 1000ms; killed");
  assert_true(kc_hook_health("other", why, sizeof why));
  /* A reload's second instance answers; the old one still says no. */
  kc_hook_health_entry *e2 = kc_hook_health_register("teams", 1000);
  kc_hook_health_end(e2, kc_hook_health_begin(e2), true, NULL);
  assert_false(kc_hook_health("teams", why, sizeof why));
  kc_hook_health_unregister(e);
  assert_true(kc_hook_health("teams", why, sizeof why));
  /* Failing to start counts; any answer clears it. */
  kc_hook_health_end(e2, -1, false, "cannot start hook: No such file or directory");
  assert_false(kc_hook_health("teams", why, sizeof why));
  kc_hook_health_end(e2, kc_hook_health_begin(e2), true, NULL);
  assert_true(kc_hook_health("teams", why, sizeof why));
  kc_hook_health_unregister(e2);
  kc_hook_health_unregister(NULL);
  kc_hook_health_end(NULL, kc_hook_health_begin(NULL), false, NULL);
}

static void test_outstanding(void **state) {
  (void)state;
  kc_clock_set_manual(5000000000ull);
  char why[256] = "";
  kc_hook_health_entry *e = kc_hook_health_register("slow", 2000);
  int t = kc_hook_health_begin(e);
  assert_true(t >= 0);
  kc_clock_advance(2500000000ull); /* within timeout + the kill's grace */
  assert_true(kc_hook_health("slow", why, sizeof why));
  kc_clock_advance(1000000000ull);
  assert_false(kc_hook_health("slow", why, sizeof why));
  assert_string_equal(why, "hook not answering: a request outstanding for 3500 ms (timeout 2000 ms)");
  kc_hook_health_end(e, t, true, NULL);
  assert_true(kc_hook_health("slow", why, sizeof why));
  kc_hook_health_unregister(e);
  kc_clock_set_real();
}

/* An abandoned exchange (a child lost on one poison key) leaves the
 * verdict as it was, either way, and is no longer outstanding. */
static void test_abandon(void **state) {
  (void)state;
  kc_clock_set_manual(5000000000ull);
  char why[256] = "";
  kc_hook_health_entry *e = kc_hook_health_register("poison", 1000);
  int t = kc_hook_health_begin(e);
  kc_hook_health_abandon(e, t);
  kc_clock_advance(10000000000ull);
  assert_true(kc_hook_health("poison", why, sizeof why));
  kc_hook_health_end(e, kc_hook_health_begin(e), false, "10 keys in a row lost their hook child");
  kc_hook_health_abandon(e, kc_hook_health_begin(e));
  assert_false(kc_hook_health("poison", why, sizeof why));
  assert_string_equal(why, "hook not answering: 10 keys in a row lost their hook child");
  kc_hook_health_abandon(NULL, 0);
  kc_hook_health_unregister(e);
  kc_clock_set_real();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_answers),
      cmocka_unit_test(test_outstanding),
      cmocka_unit_test(test_abandon),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
