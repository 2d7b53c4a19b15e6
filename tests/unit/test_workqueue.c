/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/workqueue: every rule of docs/api-contract.md
 * section 10, with a fake clock. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "base/memtrim.h"
#include "base/clock.h"

#include "workqueue_testutil.h"

static void expect_empty(kc_workqueue *wq) {
  const char *k = NULL;
  assert_int_equal(kc_workqueue_get(wq, &k), KC_WQ_EMPTY);
}

static void test_fifo_and_dedup(void **state) {
  (void)state;
  kc_workqueue *wq = new_queue();
  assert_int_equal(kc_workqueue_add(wq, "default/a"), 0);
  assert_int_equal(kc_workqueue_add(wq, "default/b"), 0);
  assert_int_equal(kc_workqueue_add(wq, "default/a"), 0); /* dedup */
  assert_int_equal(kc_workqueue_add(wq, "kube-system/c"), 0);
  assert_int_equal(kc_workqueue_len(wq), 3);
  const kc_wq_metrics *m = kc_workqueue_metrics(wq);
  assert_int_equal(m->adds_total, 3);
  assert_int_equal(m->depth, 3);
  assert_int_equal(m->deduped_total, 1);
  expect_get(wq, "default/a");
  expect_get(wq, "default/b");
  expect_get(wq, "kube-system/c");
  expect_empty(wq);
  assert_int_equal(m->depth, 0);
  assert_int_equal(kc_workqueue_processing(wq), 3);
  assert_int_equal(kc_workqueue_add(wq, ""), -EINVAL);
  assert_int_equal(kc_workqueue_add(wq, NULL), -EINVAL);
  kc_workqueue_free(wq);
}

/* A key added while processing is only marked dirty; it comes back after
 * Done, never while still processing. */
static void test_dirty_while_processing(void **state) {
  (void)state;
  kc_workqueue *wq = new_queue();
  kc_workqueue_add(wq, "ns/x");
  expect_get(wq, "ns/x");
  kc_workqueue_add(wq, "ns/x");
  kc_workqueue_add(wq, "ns/x"); /* still one pending */
  assert_int_equal(kc_workqueue_len(wq), 0);
  assert_int_equal(kc_workqueue_metrics(wq)->depth, 1);
  expect_empty(wq); /* never concurrently */
  assert_int_equal(kc_workqueue_done(wq, "ns/x"), 0);
  assert_int_equal(kc_workqueue_len(wq), 1);
  expect_get(wq, "ns/x");
  expect_empty(wq);
  assert_int_equal(kc_workqueue_done(wq, "ns/x"), 0);
  expect_empty(wq);
  assert_int_equal(kc_workqueue_done(wq, "ns/x"), -ENOENT); /* Done without Get */
  assert_int_equal(kc_workqueue_done(wq, "ns/unknown"), -ENOENT);
  assert_int_equal(kc_workqueue_metrics(wq)->adds_total, 2);
  kc_workqueue_free(wq);
}

/* AddRateLimited follows 5, 10, 20, 40 ms ... (the bucket has burst 100)
 * and Forget resets the sequence. */
static void test_rate_limited_backoff_and_forget(void **state) {
  (void)state;
  kc_workqueue *wq = new_queue();
  uint64_t expect = 5 * MS;
  for (int i = 1; i <= 6; i++) {
    assert_int_equal(kc_workqueue_add_rate_limited(wq, "ns/fail"), 0);
    uint64_t when = 0;
    assert_true(kc_workqueue_next_ready(wq, &when));
    assert_int_equal(when - kc_clock_now_ns(), expect);
    assert_int_equal(kc_workqueue_num_requeues(wq, "ns/fail"), (uint32_t)i);
    kc_clock_advance(expect - 1);
    assert_int_equal(kc_workqueue_tick(wq), 0);
    expect_empty(wq);
    kc_clock_advance(1);
    assert_int_equal(kc_workqueue_tick(wq), 1);
    expect_get(wq, "ns/fail");
    kc_workqueue_done(wq, "ns/fail");
    expect *= 2;
  }
  assert_int_equal(kc_workqueue_metrics(wq)->retries_total, 6);
  kc_workqueue_forget(wq, "ns/fail");
  assert_int_equal(kc_workqueue_num_requeues(wq, "ns/fail"), 0);
  kc_workqueue_add_rate_limited(wq, "ns/fail");
  uint64_t when = 0;
  assert_true(kc_workqueue_next_ready(wq, &when));
  assert_int_equal(when - kc_clock_now_ns(), 5 * MS);
  assert_int_equal(kc_workqueue_num_requeues(wq, "ns/unknown"), 0);
  kc_workqueue_forget(wq, "ns/unknown"); /* no-op */
  kc_workqueue_free(wq);
}

/* The 19th consecutive failure hits the 1000 s cap. */
static void test_backoff_cap_through_queue(void **state) {
  (void)state;
  kc_workqueue *wq = new_queue();
  uint64_t last = 0;
  for (int i = 1; i <= 19; i++) {
    kc_workqueue_add_rate_limited(wq, "ns/k");
    uint64_t when = 0;
    assert_true(kc_workqueue_next_ready(wq, &when));
    last = when - kc_clock_now_ns();
    kc_clock_set_manual(when);
    assert_int_equal(kc_workqueue_tick(wq), 1);
    expect_get(wq, "ns/k");
    kc_workqueue_done(wq, "ns/k");
    if (i == 18) assert_int_equal(last, 655360 * MS);
  }
  assert_int_equal(last, 1000 * SEC);
  kc_workqueue_free(wq);
}

/* With the bucket exhausted, retries of distinct keys come 100 ms apart. */
static void test_bucket_spacing_through_queue(void **state) {
  (void)state;
  kc_workqueue *wq = new_queue();
  char key[32];
  for (int i = 0; i < 100; i++) {
    snprintf(key, sizeof key, "ns/k%d", i);
    kc_workqueue_add_rate_limited(wq, key);
  }
  uint64_t when = 0;
  assert_true(kc_workqueue_next_ready(wq, &when));
  assert_int_equal(when - kc_clock_now_ns(), 5 * MS); /* burst: backoff dominates */
  kc_workqueue_add_rate_limited(wq, "ns/late1");
  kc_workqueue_add_rate_limited(wq, "ns/late2");
  kc_clock_advance(5 * MS);
  assert_int_equal(kc_workqueue_tick(wq), 100);
  assert_int_equal(kc_workqueue_next_ready(wq, &when), true);
  assert_int_equal(when - (kc_clock_now_ns() - 5 * MS), 100 * MS);
  kc_clock_advance(95 * MS);
  assert_int_equal(kc_workqueue_tick(wq), 1);
  kc_clock_advance(100 * MS);
  assert_int_equal(kc_workqueue_tick(wq), 1);
  assert_int_equal(kc_workqueue_len(wq), 102);
  kc_workqueue_free(wq);
}

/* AddAfter keeps the earlier ready time; a real Add during the delay
 * processes the key at once. */
static void test_add_after_earlier_wins(void **state) {
  (void)state;
  kc_workqueue *wq = new_queue();
  uint64_t t0 = kc_clock_now_ns(), when = 0;
  kc_workqueue_add_after(wq, "ns/a", 10 * SEC);
  kc_workqueue_add_after(wq, "ns/a", 2 * SEC); /* earlier: replaces */
  kc_workqueue_add_after(wq, "ns/a", 5 * SEC); /* later: ignored */
  kc_workqueue_add_after(wq, "ns/b", 1 * SEC);
  kc_workqueue_add_after(wq, "ns/c", 3 * SEC);
  assert_int_equal(kc_workqueue_waiting(wq), 3);
  assert_int_equal(kc_workqueue_metrics(wq)->retries_total, 5);
  assert_true(kc_workqueue_next_ready(wq, &when));
  assert_int_equal(when, t0 + 1 * SEC);
  kc_clock_set_manual(t0 + 2 * SEC);
  assert_int_equal(kc_workqueue_tick(wq), 2);
  expect_get(wq, "ns/b");
  expect_get(wq, "ns/a");
  expect_empty(wq);
  /* A real event for c during its delay is processed immediately. */
  kc_workqueue_add(wq, "ns/c");
  expect_get(wq, "ns/c");
  kc_workqueue_add_after(wq, "ns/d", 0); /* zero delay = Add now */
  expect_get(wq, "ns/d");
  assert_true(kc_workqueue_next_ready(wq, &when));
  assert_int_equal(when, t0 + 3 * SEC);
  kc_workqueue_free(wq);
}

/* Many delayed keys come out in ready-time order (heap correctness). */
static void test_heap_order(void **state) {
  (void)state;
  kc_workqueue *wq = new_queue();
  char key[32];
  uint64_t t0 = kc_clock_now_ns();
  for (int i = 0; i < 1000; i++) {
    int d = (i * 7919) % 1000 + 1; /* a permutation of 1..1000 */
    snprintf(key, sizeof key, "ns/d%04d", d);
    kc_workqueue_add_after(wq, key, (uint64_t)d * MS);
  }
  for (int d = 1; d <= 1000; d++) {
    kc_clock_set_manual(t0 + (uint64_t)d * MS);
    assert_int_equal(kc_workqueue_tick(wq), 1);
    snprintf(key, sizeof key, "ns/d%04d", d);
    expect_get(wq, key);
  }
  assert_false(kc_workqueue_next_ready(wq, &t0));
  kc_workqueue_free(wq);
}

/* ShutDown: adds ignored, queued keys still handed out, then SHUTDOWN;
 * dirty keys still come back after Done; processing count drains. */
static void test_shutdown(void **state) {
  (void)state;
  kc_workqueue *wq = new_queue();
  kc_workqueue_add(wq, "ns/p");
  expect_get(wq, "ns/p");
  kc_workqueue_add(wq, "ns/a");
  kc_workqueue_add(wq, "ns/b");
  kc_workqueue_add(wq, "ns/p"); /* dirty while processing */
  kc_workqueue_add_after(wq, "ns/later", SEC);
  kc_workqueue_shutdown(wq);
  assert_true(kc_workqueue_shutting_down(wq));
  assert_int_equal(kc_workqueue_waiting(wq), 0);
  kc_workqueue_add(wq, "ns/new");
  kc_workqueue_add_after(wq, "ns/new2", SEC);
  kc_workqueue_add_rate_limited(wq, "ns/new3");
  assert_int_equal(kc_workqueue_len(wq), 2);
  expect_get(wq, "ns/a");
  expect_get(wq, "ns/b");
  assert_int_equal(kc_workqueue_processing(wq), 3);
  kc_workqueue_done(wq, "ns/a");
  kc_workqueue_done(wq, "ns/p");
  expect_get(wq, "ns/p");
  const char *k = NULL;
  kc_workqueue_done(wq, "ns/b");
  kc_workqueue_done(wq, "ns/p");
  assert_int_equal(kc_workqueue_processing(wq), 0);
  assert_int_equal(kc_workqueue_get(wq, &k), KC_WQ_SHUTDOWN);
  kc_workqueue_free(wq);
}

static void test_metrics(void **state) {
  (void)state;
  kc_workqueue *wq = new_queue();
  const kc_wq_metrics *m = kc_workqueue_metrics(wq);
  kc_workqueue_add(wq, "ns/a");
  kc_clock_advance(3 * MS);
  kc_workqueue_add(wq, "ns/a"); /* dedup: the first add time counts */
  kc_clock_advance(2 * MS);
  expect_get(wq, "ns/a"); /* queued 5 ms */
  assert_int_equal(m->queue_duration.count, 1);
  assert_int_equal(m->queue_duration.sum_ns, 5 * MS);
  assert_int_equal(m->queue_duration.counts[6], 1); /* 1e-3 < 5e-3 <= 1e-2 */
  kc_clock_advance(1 * SEC);
  kc_workqueue_add(wq, "ns/b");
  expect_get(wq, "ns/b");
  kc_clock_advance(1 * SEC);
  assert_int_equal(kc_workqueue_longest_running_ns(wq), 2 * SEC);
  assert_int_equal(kc_workqueue_unfinished_work_ns(wq), 3 * SEC);
  kc_workqueue_done(wq, "ns/a");
  assert_int_equal(m->work_duration.count, 1);
  assert_int_equal(m->work_duration.sum_ns, 2 * SEC);
  assert_int_equal(m->work_duration.counts[9], 1); /* 1 < 2 <= 10 s */
  assert_int_equal(kc_workqueue_longest_running_ns(wq), 1 * SEC);
  kc_workqueue_done(wq, "ns/b");
  assert_int_equal(kc_workqueue_unfinished_work_ns(wq), 0);
  assert_int_equal(kc_wq_histogram_bound_ns(0), 10);
  assert_int_equal(kc_wq_histogram_bound_ns(11), 1000 * SEC);
  kc_wq_histogram h = {0};
  kc_wq_histogram_observe(&h, 2000 * SEC);
  assert_int_equal(h.counts[KC_WQ_HIST_BUCKETS], 1);
  kc_wq_histogram_observe(&h, 10);
  assert_int_equal(h.counts[0], 1);
  kc_workqueue_free(wq);
}

/* Memory is bounded by distinct live keys: idle keys are reclaimed, and a
 * key with failure history is kept until Forget. */
static void test_memory_bounded(void **state) {
  (void)state;
  kc_workqueue *wq = new_queue();
  char key[48];
  for (int round = 0; round < 20; round++) {
    for (int i = 0; i < 1000; i++) {
      snprintf(key, sizeof key, "ns/churn-%d-%d", round, i);
      kc_workqueue_add(wq, key);
    }
    const char *k;
    while (kc_workqueue_get(wq, &k) == KC_WQ_KEY) kc_workqueue_done(wq, k);
  }
  assert_true(kc_workqueue_keys(wq) <= 3000);
  kc_workqueue_add_rate_limited(wq, "ns/failing");
  for (int i = 0; i < 5000; i++) {
    snprintf(key, sizeof key, "ns/more-%d", i);
    kc_workqueue_add(wq, key);
    const char *k;
    while (kc_workqueue_get(wq, &k) == KC_WQ_KEY) kc_workqueue_done(wq, k);
  }
  assert_int_equal(kc_workqueue_num_requeues(wq, "ns/failing"), 1);
  assert_true(kc_workqueue_keys(wq) <= 3000);
  kc_workqueue_free(wq);
}

/* A queue of 20k keys grows its table and frees its idle records a few
 * per call: re-adds during the growth find their record (no duplicate),
 * and no Done frees more than a sixteenth of the keys (one call used to
 * free half of them). */
static void test_large_queue_grows_and_sweeps_in_steps(void **state) {
  (void)state;
  enum { N = 20000 };
  kc_workqueue *wq = new_queue();
  char key[48];
  for (unsigned i = 0; i < N; i++) {
    snprintf(key, sizeof key, "ns/big-%u", i);
    assert_int_equal(kc_workqueue_add(wq, key), 0);
    snprintf(key, sizeof key, "ns/big-%u", i / 2); /* maybe in the old table */
    assert_int_equal(kc_workqueue_add(wq, key), 0);
    assert_int_equal(kc_workqueue_len(wq), i + 1);
    assert_int_equal(kc_workqueue_keys(wq), i + 1);
  }
  size_t most = 0;
  const char *k;
  while (kc_workqueue_get(wq, &k) == KC_WQ_KEY) {
    snprintf(key, sizeof key, "%s", k);
    size_t before = kc_workqueue_keys(wq);
    assert_int_equal(kc_workqueue_done(wq, key), 0);
    size_t freed = before - kc_workqueue_keys(wq);
    if (freed > most) most = freed;
  }
  assert_true(most > 0);
  assert_true(most <= N / 16);
  /* Further calls finish the sweep: memory back within the bound. */
  for (int j = 0; j < 600; j++) {
    snprintf(key, sizeof key, "ns/after-%d", j);
    kc_workqueue_add(wq, key);
    while (kc_workqueue_get(wq, &k) == KC_WQ_KEY) {
      snprintf(key, sizeof key, "%s", k);
      kc_workqueue_done(wq, key);
    }
  }
  assert_true(kc_workqueue_keys(wq) <= 3000);
  kc_workqueue_free(wq);
}

/* Adds n keys "ns/<tag>-<i>", all queued at once. */
static void add_burst(kc_workqueue *wq, const char *tag, unsigned n) {
  char key[48];
  for (unsigned i = 0; i < n; i++) {
    snprintf(key, sizeof key, "ns/%s-%u", tag, i);
    assert_int_equal(kc_workqueue_add(wq, key), 0);
  }
}

/* The Done that drains a queue which held KC_WQ_TRIM_KEYS keys trims once
 * (kc_mem_give_back), at most once per KC_WQ_TRIM_INTERVAL_NS, and a stream
 * of single events never does. */
static void test_trim_after_large_drain(void **state) {
  (void)state;
  kc_workqueue *wq = new_queue();
  uint64_t g0 = kc_mem_give_backs();
  const char *k;
  /* One key short of the threshold: no trim. */
  add_burst(wq, "small", KC_WQ_TRIM_KEYS - 1);
  while (kc_workqueue_get(wq, &k) == KC_WQ_KEY) kc_workqueue_done(wq, k);
  assert_int_equal(kc_workqueue_trims(wq), 0);
  /* At the threshold, handed out all at once (the keys are processing, not
   * queued): only the last Done trims, exactly once. A key waiting in the
   * delay heap does not keep the queue from counting as drained. */
  assert_int_equal(kc_workqueue_add_after(wq, "ns/later", 3600 * SEC), 0);
  add_burst(wq, "big", KC_WQ_TRIM_KEYS);
  const char *keys[KC_WQ_TRIM_KEYS];
  for (unsigned i = 0; i < KC_WQ_TRIM_KEYS; i++)
    assert_int_equal(kc_workqueue_get(wq, &keys[i]), KC_WQ_KEY);
  expect_empty(wq);
  for (unsigned i = 0; i < KC_WQ_TRIM_KEYS; i++) {
    assert_int_equal(kc_workqueue_trims(wq), 0);
    assert_int_equal(kc_workqueue_done(wq, keys[i]), 0);
  }
  assert_int_equal(kc_workqueue_trims(wq), 1);
  assert_int_equal(kc_mem_give_backs(), g0 + 1);
  /* A second burst 1 s later: too early, no trim; the mark stays, so the
   * first drain after the interval (one single key) trims. */
  kc_clock_advance(SEC);
  add_burst(wq, "again", 2 * KC_WQ_TRIM_KEYS);
  while (kc_workqueue_get(wq, &k) == KC_WQ_KEY) kc_workqueue_done(wq, k);
  assert_int_equal(kc_workqueue_trims(wq), 1);
  kc_clock_advance(KC_WQ_TRIM_INTERVAL_NS - SEC - 1);
  kc_workqueue_add(wq, "ns/one");
  expect_get(wq, "ns/one");
  kc_workqueue_done(wq, "ns/one");
  assert_int_equal(kc_workqueue_trims(wq), 1);
  kc_clock_advance(1);
  kc_workqueue_add(wq, "ns/one");
  expect_get(wq, "ns/one");
  kc_workqueue_done(wq, "ns/one");
  assert_int_equal(kc_workqueue_trims(wq), 2);
  /* A steady stream of single events, a minute apart: never. */
  for (int i = 0; i < 3000; i++) {
    kc_clock_advance(60 * SEC);
    char key[48];
    snprintf(key, sizeof key, "ns/single-%d", i % 7);
    kc_workqueue_add(wq, key);
    expect_get(wq, key);
    kc_workqueue_done(wq, key);
  }
  assert_int_equal(kc_workqueue_trims(wq), 2);
  assert_int_equal(kc_mem_give_backs(), g0 + 2);
  kc_workqueue_free(wq);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fifo_and_dedup),
      cmocka_unit_test(test_dirty_while_processing),
      cmocka_unit_test(test_rate_limited_backoff_and_forget),
      cmocka_unit_test(test_backoff_cap_through_queue),
      cmocka_unit_test(test_bucket_spacing_through_queue),
      cmocka_unit_test(test_add_after_earlier_wins),
      cmocka_unit_test(test_heap_order),
      cmocka_unit_test(test_shutdown),
      cmocka_unit_test(test_metrics),
      cmocka_unit_test(test_memory_bounded),
      cmocka_unit_test(test_large_queue_grows_and_sweeps_in_steps),
      cmocka_unit_test(test_trim_after_large_drain),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
