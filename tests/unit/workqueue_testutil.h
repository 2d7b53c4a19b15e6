/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers the workqueue tests share (test_workqueue.c,
 * test_workqueue_priority.c): a queue on the manual clock and a checked
 * get. Include after <cmocka.h>. Test thread only. */
#ifndef KC_WORKQUEUE_TESTUTIL_H
#define KC_WORKQUEUE_TESTUTIL_H

#include "base/clock.h"
#include "runtime/workqueue.h"

#define MS KC_NS_PER_MS
#define SEC KC_NS_PER_SEC

/* A queue named "test", the manual clock set to 1000 s. */
static inline kc_workqueue *new_queue(void) {
  kc_clock_set_manual(1000 * SEC);
  kc_workqueue *wq = kc_workqueue_new("test", NULL);
  assert_non_null(wq);
  return wq;
}

/* Gets one key and checks it is `want`. */
static inline void expect_get(kc_workqueue *wq, const char *want) {
  const char *k = NULL;
  assert_int_equal(kc_workqueue_get(wq, &k), KC_WQ_KEY);
  assert_string_equal(k, want);
}

#endif
