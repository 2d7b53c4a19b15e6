/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/base/childpool: slot choice, blame per key, the
 * program's backoff after KC_CHILDPOOL_BREAK_KEYS distinct keys in a row
 * lost a child, holds while it runs, and a good answer ending it. Children
 * are stand-in pointers; time is the manual clock. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "base/childpool.h"
#include "base/clock.h"
#include "base/ratelimit.h"

#define MS KC_NS_PER_MS

static int children[8]; /* stand-ins: the pool never looks inside */

/* Takes a slot, which must start or have a child, for a reconcile of key
 * that loses it. Returns the backoff the loss started. */
static uint64_t lose(kc_childpool *p, const char *key) {
  uint64_t hold = 0;
  int i = kc_childpool_take(p, &hold, NULL, 0);
  assert_true(i >= 0);
  *kc_childpool_child(p, (size_t)i) = NULL; /* the caller killed it */
  return kc_childpool_release(p, (size_t)i, KC_CHILDPOOL_LOST, key, "it died");
}

static void answer(kc_childpool *p) {
  uint64_t hold = 0;
  int i = kc_childpool_take(p, &hold, NULL, 0);
  assert_true(i >= 0);
  void **c = kc_childpool_child(p, (size_t)i);
  if (!*c) *c = &children[i];
  kc_childpool_release(p, (size_t)i, KC_CHILDPOOL_ANSWERED, "ns/ok", NULL);
}

/* A running child is preferred; every slot taken is -EBUSY. */
static void test_slot_choice(void **state) {
  (void)state;
  kc_childpool *p = kc_childpool_new(3, 250, 10000);
  assert_non_null(p);
  assert_int_equal(kc_childpool_nslots(p), 3);
  *kc_childpool_child(p, 2) = &children[2];
  uint64_t hold = 0;
  assert_int_equal(kc_childpool_take(p, &hold, NULL, 0), 2);
  assert_int_equal(kc_childpool_take(p, &hold, NULL, 0), 0);
  assert_int_equal(kc_childpool_take(p, &hold, NULL, 0), 1);
  assert_int_equal(kc_childpool_take(p, &hold, NULL, 0), -EBUSY);
  kc_childpool_release(p, 0, KC_CHILDPOOL_UNUSED, "ns/a", NULL);
  kc_childpool_release(p, 1, KC_CHILDPOOL_UNUSED, "ns/b", NULL);
  kc_childpool_release(p, 2, KC_CHILDPOOL_ANSWERED, "ns/c", NULL);
  assert_int_equal(kc_childpool_take(p, &hold, NULL, 0), 2);
  kc_childpool_release(p, 2, KC_CHILDPOOL_ANSWERED, "ns/c", NULL);
  *kc_childpool_child(p, 2) = NULL;
  kc_childpool_free(p);
  kc_childpool_free(NULL);
}

/* Poison keys, however often they come back, never make the program back
 * off while they are fewer than the threshold: each loss is its key's. */
static void test_poison_keys_pay_alone(void **state) {
  (void)state;
  kc_clock_set_manual(1000 * MS);
  kc_childpool *p = kc_childpool_new(2, 250, 10000);
  assert_non_null(p);
  char key[32];
  for (int round = 0; round < 20; round++) {
    for (int k = 0; k < KC_CHILDPOOL_BREAK_KEYS - 1; k++) {
      snprintf(key, sizeof key, "ns/poison%d", k);
      assert_int_equal(lose(p, key), 0);
    }
  }
  answer(p); /* a healthy key: at once */
  kc_childpool_free(p);
  kc_clock_set_real();
}

/* A program failing for every key: the threshold of distinct keys in a row
 * starts a backoff; keys find no child meanwhile (held, with the time left
 * and the last loss); a running child still serves; once it passed, the
 * next loss doubles it; a good answer ends it. */
static void test_program_backs_off_as_a_whole(void **state) {
  (void)state;
  kc_clock_set_manual(1000 * MS);
  kc_childpool *p = kc_childpool_new(2, 250, 10000);
  assert_non_null(p);
  char key[32];
  for (int k = 0; k < KC_CHILDPOOL_BREAK_KEYS - 1; k++) {
    snprintf(key, sizeof key, "ns/k%d", k);
    assert_int_equal(lose(p, key), 0);
    assert_int_equal(lose(p, key), 0); /* the same key again is not one more */
  }
  assert_int_equal(lose(p, "ns/last"), 250 * MS);
  uint64_t hold = 0;
  char why[64];
  assert_int_equal(kc_childpool_take(p, &hold, why, sizeof why), -EAGAIN);
  assert_int_equal(hold, 250 * MS);
  assert_string_equal(why, "it died");
  kc_clock_advance(100 * MS);
  assert_int_equal(kc_childpool_take(p, &hold, NULL, 0), -EAGAIN);
  assert_int_equal(hold, 150 * MS);
  /* a child that was running serves meanwhile; losing it does not lengthen
   * the backoff */
  *kc_childpool_child(p, 1) = &children[1];
  assert_int_equal(kc_childpool_take(p, &hold, NULL, 0), 1);
  *kc_childpool_child(p, 1) = NULL;
  assert_int_equal(kc_childpool_release(p, 1, KC_CHILDPOOL_LOST, "ns/x", "again"), 0);
  assert_int_equal(kc_childpool_take(p, &hold, NULL, 0), -EAGAIN);
  assert_int_equal(hold, 150 * MS);
  /* passed: keys run again; the next loss backs off twice as long */
  kc_clock_advance(150 * MS);
  assert_int_equal(lose(p, "ns/k0"), 500 * MS);
  kc_clock_advance(500 * MS);
  assert_int_equal(lose(p, "ns/k1"), 1000 * MS);
  for (int i = 0; i < 10; i++) {
    kc_clock_advance(10000 * MS);
    assert_true(lose(p, "ns/k2") <= 10000 * MS);
  }
  /* a good answer forgets it all */
  kc_clock_advance(10000 * MS);
  answer(p);
  for (int k = 0; k < KC_CHILDPOOL_BREAK_KEYS - 1; k++) {
    snprintf(key, sizeof key, "ns/k%d", k);
    assert_int_equal(lose(p, key), 0);
  }
  assert_int_equal(lose(p, "ns/last"), 250 * MS);
  kc_childpool_free(p);
  kc_clock_set_real();
}

/* A good answer between losses starts the count over. */
static void test_answer_resets_the_count(void **state) {
  (void)state;
  kc_clock_set_manual(1000 * MS);
  kc_childpool *p = kc_childpool_new(1, 250, 10000);
  assert_non_null(p);
  char key[32];
  for (int k = 0; k < 5 * KC_CHILDPOOL_BREAK_KEYS; k++) {
    snprintf(key, sizeof key, "ns/k%d", k);
    assert_int_equal(lose(p, key), 0);
    if (k % (KC_CHILDPOOL_BREAK_KEYS - 1) == KC_CHILDPOOL_BREAK_KEYS - 2) answer(p);
  }
  kc_childpool_free(p);
  kc_clock_set_real();
}

static bool is_dead(const void *child) {
  return child == &children[0];
}

/* A dead child is taken off a free slot only; no key is charged. */
static void test_take_dead(void **state) {
  (void)state;
  kc_childpool *p = kc_childpool_new(2, 250, 10000);
  assert_non_null(p);
  *kc_childpool_child(p, 0) = &children[0];
  *kc_childpool_child(p, 1) = &children[1];
  assert_null(kc_childpool_take_dead(p, 1, is_dead)); /* alive */
  uint64_t hold = 0;
  assert_int_equal(kc_childpool_take(p, &hold, NULL, 0), 0);
  assert_null(kc_childpool_take_dead(p, 0, is_dead)); /* taken: its worker's */
  kc_childpool_release(p, 0, KC_CHILDPOOL_UNUSED, "ns/a", NULL);
  assert_ptr_equal(kc_childpool_take_dead(p, 0, is_dead), &children[0]);
  assert_null(*kc_childpool_child(p, 0));
  *kc_childpool_child(p, 1) = NULL;
  kc_childpool_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_slot_choice),
      cmocka_unit_test(test_poison_keys_pay_alone),
      cmocka_unit_test(test_program_backs_off_as_a_whole),
      cmocka_unit_test(test_answer_resets_the_count),
      cmocka_unit_test(test_take_dead),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
