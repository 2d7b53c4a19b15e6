/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the key states daemon/runtime/workqueue reports to
 * `kctrld ctl` (kc_workqueue_each, kc_workqueue_key_state): queued (with
 * its level and first add time), processing (with its start), waiting in
 * the delay heap (with its ready time and failures); idle keys are not
 * reported, and the walk sees every key across a table growth. Time is the
 * manual clock. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "base/clock.h"
#include "runtime/workqueue.h"

#define MS KC_NS_PER_MS
#define SEC KC_NS_PER_SEC

typedef struct seen {
  size_t n, queued, processing, waiting;
} seen;

static void count(const kc_wq_key_state *st, void *ud) {
  seen *s = ud;
  s->n++;
  s->queued += st->queued;
  s->processing += st->processing;
  s->waiting += st->waiting;
}

static void test_states(void **state) {
  (void)state;
  kc_clock_set_manual(1000 * SEC);
  kc_workqueue *wq = kc_workqueue_new("test", NULL);
  assert_non_null(wq);
  kc_wq_key_state st;
  assert_false(kc_workqueue_key_state(wq, "ns/none", &st));
  assert_int_equal(kc_workqueue_add(wq, "ns/run"), 0);
  kc_clock_advance(1 * SEC);
  assert_int_equal(kc_workqueue_add_at(wq, "ns/low", KC_WQ_LOW), 0);
  assert_int_equal(kc_workqueue_add(wq, "ns/fail"), 0);
  const char *k;
  assert_int_equal(kc_workqueue_get(wq, &k), KC_WQ_KEY);
  assert_string_equal(k, "ns/run");
  assert_int_equal(kc_workqueue_get(wq, &k), KC_WQ_KEY);
  assert_string_equal(k, "ns/fail");
  /* ns/fail fails: back in the heap for 5 ms (the default base delay). */
  assert_int_equal(kc_workqueue_add_rate_limited(wq, "ns/fail"), 0);
  assert_int_equal(kc_workqueue_done(wq, "ns/fail"), 0);

  assert_true(kc_workqueue_key_state(wq, "ns/run", &st));
  assert_true(st.processing && !st.queued && !st.waiting);
  assert_int_equal(st.started_ns, 1001 * SEC);
  assert_true(kc_workqueue_key_state(wq, "ns/low", &st));
  assert_true(st.queued && !st.processing && !st.waiting);
  assert_int_equal(st.level, KC_WQ_LOW);
  assert_int_equal(st.added_ns, 1001 * SEC);
  assert_string_equal(st.key, "ns/low");
  assert_true(kc_workqueue_key_state(wq, "ns/fail", &st));
  assert_true(st.waiting && !st.queued && !st.processing);
  assert_int_equal(st.failures, 1);
  assert_int_equal(st.ready_ns, 1001 * SEC + 5 * MS);

  seen s = {0};
  kc_workqueue_each(wq, count, &s);
  assert_int_equal(s.n, 3);
  assert_int_equal(s.queued, 1);
  assert_int_equal(s.processing, 1);
  assert_int_equal(s.waiting, 1);

  /* Done and forgotten: idle, no longer reported. */
  assert_int_equal(kc_workqueue_done(wq, "ns/run"), 0);
  kc_workqueue_forget(wq, "ns/run");
  assert_false(kc_workqueue_key_state(wq, "ns/run", &st));
  memset(&s, 0, sizeof s);
  kc_workqueue_each(wq, count, &s);
  assert_int_equal(s.n, 2);
  kc_workqueue_free(wq);
}

static void test_walk_across_growth(void **state) {
  (void)state;
  kc_clock_set_manual(1000 * SEC);
  kc_workqueue *wq = kc_workqueue_new("test", NULL);
  char key[32];
  /* Enough keys to grow the table several times; some growth is still
   * moving chains when the walk runs. */
  for (int i = 0; i < 5000; i++) {
    snprintf(key, sizeof key, "ns/k%d", i);
    assert_int_equal(kc_workqueue_add(wq, key), 0);
  }
  seen s = {0};
  kc_workqueue_each(wq, count, &s);
  assert_int_equal(s.n, 5000);
  assert_int_equal(s.queued, 5000);
  kc_wq_key_state st;
  assert_true(kc_workqueue_key_state(wq, "ns/k4999", &st));
  assert_true(st.queued);
  kc_workqueue_free(wq);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_states),
      cmocka_unit_test(test_walk_across_growth),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
