/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the priority levels of daemon/runtime/workqueue: level
 * order, raising a queued key, the level a requeue keeps, the per-level
 * depth, and aging (docs/design.md "Workqueue priorities"): under a steady
 * stream of high-priority keys a low and a normal key are still handed out
 * within their documented bound. Time is the manual clock. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "base/clock.h"

#include "workqueue_testutil.h"

/* Gets one key, Done at once; returns a copy in buf. */
static const char *get_done(kc_workqueue *wq, char *buf, size_t cap) {
  const char *k = NULL;
  assert_int_equal(kc_workqueue_get(wq, &k), KC_WQ_KEY);
  snprintf(buf, cap, "%s", k);
  assert_int_equal(kc_workqueue_done(wq, buf), 0);
  return buf;
}

static void expect_depths(kc_workqueue *wq, uint64_t low, uint64_t normal, uint64_t high) {
  const kc_wq_metrics *m = kc_workqueue_metrics(wq);
  assert_int_equal(m->depth_by_priority[KC_WQ_LOW], low);
  assert_int_equal(m->depth_by_priority[KC_WQ_NORMAL], normal);
  assert_int_equal(m->depth_by_priority[KC_WQ_HIGH], high);
  assert_int_equal(m->depth, low + normal + high);
}

static void test_levels_then_fifo(void **state) {
  (void)state;
  kc_workqueue *wq = new_queue();
  assert_int_equal(kc_workqueue_add_at(wq, "ns/low-1", KC_WQ_LOW), 0);
  assert_int_equal(kc_workqueue_add(wq, "ns/normal-1"), 0); /* NORMAL */
  assert_int_equal(kc_workqueue_add_at(wq, "ns/high-1", KC_WQ_HIGH), 0);
  assert_int_equal(kc_workqueue_add_at(wq, "ns/normal-2", KC_WQ_NORMAL), 0);
  assert_int_equal(kc_workqueue_add_at(wq, "ns/low-2", KC_WQ_LOW), 0);
  expect_depths(wq, 2, 2, 1);
  assert_int_equal(kc_workqueue_len_at(wq, KC_WQ_LOW), 2);
  assert_int_equal(kc_workqueue_len(wq), 5);
  assert_int_equal(kc_workqueue_priority(wq, "ns/low-2"), KC_WQ_LOW);
  assert_int_equal(kc_workqueue_priority(wq, "ns/none"), -ENOENT);
  expect_get(wq, "ns/high-1");
  expect_get(wq, "ns/normal-1");
  expect_get(wq, "ns/normal-2");
  expect_get(wq, "ns/low-1");
  expect_get(wq, "ns/low-2");
  expect_depths(wq, 0, 0, 0);
  assert_int_equal(kc_workqueue_metrics(wq)->aged_total, 0);
  assert_int_equal(kc_workqueue_add_at(wq, "ns/x", KC_WQ_LEVELS), -EINVAL);
  assert_int_equal(kc_workqueue_add_at(wq, "ns/x", -2), -EINVAL);
  assert_int_equal(kc_workqueue_add_after_at(wq, "ns/x", MS, 7), -EINVAL);
  assert_int_equal(kc_workqueue_add_rate_limited_at(wq, "ns/x", 7), -EINVAL);
  assert_string_equal(kc_wq_priority_name(KC_WQ_LOW), "low");
  assert_string_equal(kc_wq_priority_name(KC_WQ_HIGH), "high");
  kc_workqueue_free(wq);
}

/* A queued key asked for at a higher level moves up (still one entry, the
 * add deduplicated); a lower level never lowers it. */
static void test_raise_while_queued(void **state) {
  (void)state;
  kc_workqueue *wq = new_queue();
  const kc_wq_metrics *m = kc_workqueue_metrics(wq);
  kc_workqueue_add_at(wq, "ns/a", KC_WQ_LOW);
  kc_workqueue_add_at(wq, "ns/b", KC_WQ_LOW);
  kc_workqueue_add_at(wq, "ns/c", KC_WQ_NORMAL);
  kc_workqueue_add(wq, "ns/b");                 /* raised to NORMAL, behind c */
  kc_workqueue_add_at(wq, "ns/c", KC_WQ_LOW);   /* not lowered */
  assert_int_equal(m->adds_total, 3);
  assert_int_equal(m->deduped_total, 2);
  expect_depths(wq, 1, 2, 0);
  assert_int_equal(kc_workqueue_len(wq), 3);
  kc_workqueue_add_at(wq, "ns/a", KC_WQ_HIGH);  /* from the middle of nowhere to the top */
  expect_depths(wq, 0, 2, 1);
  expect_get(wq, "ns/a");
  expect_get(wq, "ns/c");
  expect_get(wq, "ns/b");
  assert_int_equal(kc_workqueue_len(wq), 0);
  /* While processing: the highest level asked for meanwhile counts at Done. */
  kc_workqueue_add_at(wq, "ns/a", KC_WQ_LOW);
  kc_workqueue_add_at(wq, "ns/a", KC_WQ_HIGH);
  kc_workqueue_add_at(wq, "ns/b", KC_WQ_LOW);
  expect_depths(wq, 1, 0, 1);
  kc_workqueue_add(wq, "ns/d");
  kc_workqueue_done(wq, "ns/b");
  kc_workqueue_done(wq, "ns/a");
  expect_get(wq, "ns/a");
  expect_get(wq, "ns/d");
  expect_get(wq, "ns/b");
  kc_workqueue_free(wq);
}

/* A key that fails comes back at the level it ran at; a delayed add keeps
 * the higher level as it keeps the earlier time. */
static void test_requeue_keeps_level(void **state) {
  (void)state;
  kc_workqueue *wq = new_queue();
  kc_workqueue_add_at(wq, "ns/listed", KC_WQ_LOW);
  expect_get(wq, "ns/listed");
  assert_int_equal(kc_workqueue_priority(wq, "ns/listed"), KC_WQ_LOW);
  kc_workqueue_add_rate_limited(wq, "ns/listed"); /* 5 ms backoff, at LOW */
  kc_workqueue_done(wq, "ns/listed");
  kc_workqueue_add(wq, "ns/event");
  kc_clock_advance(5 * MS);
  assert_int_equal(kc_workqueue_tick(wq), 1);
  expect_depths(wq, 1, 1, 0);
  expect_get(wq, "ns/event");
  expect_get(wq, "ns/listed");
  kc_workqueue_done(wq, "ns/event");
  kc_workqueue_done(wq, "ns/listed");

  /* Waiting twice: the earlier time and the higher level win. */
  kc_workqueue_add_after_at(wq, "ns/w", 50 * MS, KC_WQ_HIGH);
  kc_workqueue_add_after_at(wq, "ns/w", 20 * MS, KC_WQ_LOW);
  kc_workqueue_add_after(wq, "ns/z", 10 * MS); /* a key never queued: NORMAL */
  kc_clock_advance(20 * MS);
  assert_int_equal(kc_workqueue_tick(wq), 2);
  expect_depths(wq, 0, 1, 1);
  expect_get(wq, "ns/w");
  expect_get(wq, "ns/z");
  /* AddAfter 0 is an add now, at the key's own level. */
  kc_workqueue_add_after(wq, "ns/w", 0);
  expect_depths(wq, 0, 0, 1);
  kc_workqueue_free(wq);
}

/* The starvation bound: one worker, 10 ms per reconcile, and two new HIGH
 * keys per reconcile (the high stream outruns the worker, so without aging
 * nothing below HIGH would ever run). A NORMAL key is handed out within
 * KC_WQ_NORMAL_MAX_WAIT_NS plus two turns, a LOW key within
 * KC_WQ_LOW_MAX_WAIT_NS plus two turns, and neither earlier than its max
 * wait. */
static void test_aging_bound_under_high_stream(void **state) {
  (void)state;
  kc_workqueue *wq = new_queue();
  const uint64_t t0 = kc_clock_now_ns(), turn = 10 * MS;
  kc_workqueue_add_at(wq, "ns/low", KC_WQ_LOW);
  kc_workqueue_add_at(wq, "ns/normal", KC_WQ_NORMAL);
  uint64_t low_at = 0, normal_at = 0;
  char buf[64], key[64];
  for (unsigned i = 0; !low_at; i++) {
    for (unsigned j = 0; j < 2; j++) {
      snprintf(key, sizeof key, "ns/high-%u-%u", i, j);
      assert_int_equal(kc_workqueue_add_at(wq, key, KC_WQ_HIGH), 0);
    }
    const char *k = get_done(wq, buf, sizeof buf);
    uint64_t waited = kc_clock_now_ns() - t0;
    if (strcmp(k, "ns/normal") == 0) normal_at = waited;
    if (strcmp(k, "ns/low") == 0) low_at = waited;
    assert_true(waited <= KC_WQ_LOW_MAX_WAIT_NS + 2 * turn); /* else: starved */
    kc_clock_advance(turn);
  }
  assert_true(normal_at >= KC_WQ_NORMAL_MAX_WAIT_NS);
  assert_true(normal_at <= KC_WQ_NORMAL_MAX_WAIT_NS + 2 * turn);
  assert_true(low_at >= KC_WQ_LOW_MAX_WAIT_NS);
  assert_true(low_at <= KC_WQ_LOW_MAX_WAIT_NS + 2 * turn);
  assert_int_equal(kc_workqueue_metrics(wq)->aged_total, 2);
  kc_workqueue_free(wq);
}

/* An aged backlog takes every other turn, oldest first; fresh keys of a
 * higher level take the others, so an event still runs within two turns
 * however long the aged backlog is. */
static void test_aged_backlog_shares_turns(void **state) {
  (void)state;
  kc_workqueue *wq = new_queue();
  char key[64], buf[64];
  for (int i = 0; i < 100; i++) {
    snprintf(key, sizeof key, "ns/listed-%03d", i);
    kc_workqueue_add_at(wq, key, KC_WQ_LOW);
  }
  kc_clock_advance(KC_WQ_LOW_MAX_WAIT_NS);
  kc_workqueue_add(wq, "ns/event-1");
  kc_workqueue_add_at(wq, "ns/asked", KC_WQ_HIGH);
  kc_workqueue_add(wq, "ns/event-2");
  assert_string_equal(get_done(wq, buf, sizeof buf), "ns/listed-000"); /* aged turn */
  assert_string_equal(get_done(wq, buf, sizeof buf), "ns/asked");
  assert_string_equal(get_done(wq, buf, sizeof buf), "ns/listed-001");
  assert_string_equal(get_done(wq, buf, sizeof buf), "ns/event-1");
  assert_string_equal(get_done(wq, buf, sizeof buf), "ns/listed-002");
  assert_string_equal(get_done(wq, buf, sizeof buf), "ns/event-2");
  /* Only aged keys left: in order, every turn. */
  assert_string_equal(get_done(wq, buf, sizeof buf), "ns/listed-003");
  assert_string_equal(get_done(wq, buf, sizeof buf), "ns/listed-004");
  assert_int_equal(kc_workqueue_metrics(wq)->aged_total, 3);
  /* NORMAL keys age too, and the older aged head goes first. */
  kc_workqueue_add(wq, "ns/event-3");
  kc_clock_advance(KC_WQ_NORMAL_MAX_WAIT_NS);
  assert_string_equal(get_done(wq, buf, sizeof buf), "ns/listed-005");
  kc_workqueue_free(wq);
}

/* Shutdown still hands out every queued key, in priority order. */
static void test_shutdown_drains_levels(void **state) {
  (void)state;
  kc_workqueue *wq = new_queue();
  kc_workqueue_add_at(wq, "ns/l", KC_WQ_LOW);
  kc_workqueue_add_at(wq, "ns/h", KC_WQ_HIGH);
  kc_workqueue_shutdown(wq);
  assert_int_equal(kc_workqueue_add_at(wq, "ns/late", KC_WQ_HIGH), 0); /* ignored */
  expect_get(wq, "ns/h");
  expect_get(wq, "ns/l");
  const char *k;
  assert_int_equal(kc_workqueue_get(wq, &k), KC_WQ_SHUTDOWN);
  kc_workqueue_free(wq);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_levels_then_fifo),
      cmocka_unit_test(test_raise_while_queued),
      cmocka_unit_test(test_requeue_keeps_level),
      cmocka_unit_test(test_aging_bound_under_high_stream),
      cmocka_unit_test(test_aged_backlog_shares_turns),
      cmocka_unit_test(test_shutdown_drains_levels),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
