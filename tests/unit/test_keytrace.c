/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/runtime/keytrace: the ring keeps exactly the last
 * `capacity` entries, a key's entries come back oldest first (the newest
 * when more match than asked for), details are cut to the entry, the ring's
 * memory does not grow with traffic; last errors are kept, replaced,
 * cleared, bounded and listed. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "runtime/keytrace.h"

static void test_ring_keeps_the_last_capacity_entries(void **state) {
  (void)state;
  kc_keytrace *t = kc_keytrace_new(8);
  assert_non_null(t);
  assert_int_equal(kc_keytrace_capacity(t), 8);
  size_t mem = kc_keytrace_mem_bytes(t);
  assert_true(mem >= 8 * sizeof(kc_keytrace_entry));
  kc_keytrace_entry e[16];
  assert_int_equal(kc_keytrace_find(t, "ns/a", e, 16), 0);
  /* 5 entries of a, then 10 of b: a's first 2 are overwritten... */
  for (int i = 0; i < 5; i++) kc_keytrace_add(t, "ns/a", KC_TRACE_QUEUED, "a%d", i);
  for (int i = 0; i < 5; i++) kc_keytrace_add(t, "ns/b", KC_TRACE_DEQUEUED, "b%d", i);
  assert_int_equal(kc_keytrace_find(t, "ns/a", e, 16), 3);
  assert_string_equal(e[0].detail, "a2");
  assert_string_equal(e[2].detail, "a4");
  assert_int_equal(e[0].stage, KC_TRACE_QUEUED);
  assert_true(e[0].seq < e[1].seq && e[1].seq < e[2].seq);
  assert_true(e[0].wall_ms > 0);
  /* ...and after 3 more of b, none of a is left. */
  for (int i = 5; i < 8; i++) kc_keytrace_add(t, "ns/b", KC_TRACE_RESULT, "b%d", i);
  assert_int_equal(kc_keytrace_find(t, "ns/a", e, 16), 0);
  assert_int_equal(kc_keytrace_find(t, "ns/b", e, 16), 8);
  assert_string_equal(e[0].detail, "b0");
  assert_string_equal(e[7].detail, "b7");
  /* Fewer asked for than matched: the newest ones, oldest first. */
  assert_int_equal(kc_keytrace_find(t, "ns/b", e, 3), 8);
  assert_string_equal(e[0].detail, "b5");
  assert_string_equal(e[2].detail, "b7");
  /* Traffic does not grow the ring. */
  for (int i = 0; i < 10000; i++) kc_keytrace_add(t, "ns/c", KC_TRACE_WRITE, "w%d", i);
  assert_int_equal(kc_keytrace_mem_bytes(t), mem);
  assert_int_equal(kc_keytrace_recorded(t), 10013);
  assert_int_equal(kc_keytrace_find(t, "ns/c", e, 16), 8);
  assert_string_equal(e[7].detail, "w9999");
  kc_keytrace_free(t);
}

static void test_details_are_cut_to_the_entry(void **state) {
  (void)state;
  kc_keytrace *t = kc_keytrace_new(0);
  assert_non_null(t);
  assert_int_equal(kc_keytrace_capacity(t), KC_KEYTRACE_DEFAULT);
  assert_int_equal(sizeof(kc_keytrace_entry), 256);
  char longer[1000];
  memset(longer, 'x', sizeof longer - 1);
  longer[sizeof longer - 1] = '\0';
  kc_keytrace_add(t, "k", KC_TRACE_RESULT, "error: %s", longer);
  kc_keytrace_entry e;
  assert_int_equal(kc_keytrace_find(t, "k", &e, 1), 1);
  assert_int_equal(strlen(e.detail), KC_KEYTRACE_DETAIL_MAX - 1);
  assert_memory_equal(e.detail, "error: xxx", 10);
  assert_string_equal(kc_keytrace_stage_name(KC_TRACE_REQUEUE), "requeue");
  assert_string_equal(kc_keytrace_stage_name(KC_TRACE_NSTAGES), "unknown");
  /* NULL trace: recording is a no-op. */
  kc_keytrace_add(NULL, "k", KC_TRACE_QUEUED, "x");
  kc_keytrace_free(t);
}

static void collect(const char *key, const char *message, void *ud) {
  size_t *n = ud;
  (*n)++;
  assert_true(strncmp(key, "ns/k", 4) == 0);
  assert_true(strncmp(message, "boom", 4) == 0);
}

static void test_last_errors(void **state) {
  (void)state;
  kc_keytrace *t = kc_keytrace_new(4);
  char buf[KC_KEYTRACE_ERROR_MAX];
  assert_false(kc_keytrace_last_error(t, "ns/k1", buf, sizeof buf));
  assert_int_equal(kc_keytrace_set_error(t, "ns/k1", "boom 1"), 0);
  assert_int_equal(kc_keytrace_set_error(t, "ns/k2", "boom 2"), 0);
  assert_true(kc_keytrace_last_error(t, "ns/k1", buf, sizeof buf));
  assert_string_equal(buf, "boom 1");
  /* Replaced by the next failure, cleared by a success. */
  assert_int_equal(kc_keytrace_set_error(t, "ns/k1", "boom again"), 0);
  assert_true(kc_keytrace_last_error(t, "ns/k1", buf, sizeof buf));
  assert_string_equal(buf, "boom again");
  assert_true(kc_keytrace_last_error(t, "ns/k1", NULL, 0)); /* a question alone */
  assert_int_equal(kc_keytrace_failing(t), 2);
  size_t n = 0;
  kc_keytrace_each_error(t, collect, &n);
  assert_int_equal(n, 2);
  assert_int_equal(kc_keytrace_set_error(t, "ns/k1", NULL), 0);
  assert_false(kc_keytrace_last_error(t, "ns/k1", buf, sizeof buf));
  assert_int_equal(kc_keytrace_failing(t), 1);
  assert_int_equal(kc_keytrace_set_error(t, "ns/unknown", NULL), 0);
  /* A long message is cut; a small buffer gets a cut copy. */
  char longer[2000];
  memset(longer, 'y', sizeof longer - 1);
  longer[sizeof longer - 1] = '\0';
  memcpy(longer, "boom", 4);
  assert_int_equal(kc_keytrace_set_error(t, "ns/k2", longer), 0);
  assert_true(kc_keytrace_last_error(t, "ns/k2", buf, sizeof buf));
  assert_int_equal(strlen(buf), KC_KEYTRACE_ERROR_MAX - 1);
  char small[5];
  assert_true(kc_keytrace_last_error(t, "ns/k2", small, sizeof small));
  assert_string_equal(small, "boom");
  /* Memory follows the errors kept and is given back. */
  size_t with = kc_keytrace_mem_bytes(t);
  assert_int_equal(kc_keytrace_set_error(t, "ns/k2", NULL), 0);
  assert_true(kc_keytrace_mem_bytes(t) < with);
  kc_keytrace_free(t);
}

static void test_error_table_is_bounded(void **state) {
  (void)state;
  kc_keytrace *t = kc_keytrace_new(4);
  char key[32];
  for (unsigned i = 0; i < KC_KEYTRACE_MAX_ERRORS; i++) {
    snprintf(key, sizeof key, "ns/k%u", i);
    assert_int_equal(kc_keytrace_set_error(t, key, "boom"), 0);
  }
  assert_int_equal(kc_keytrace_set_error(t, "ns/one-more", "boom"), -ENOSPC);
  assert_false(kc_keytrace_last_error(t, "ns/one-more", NULL, 0));
  /* A key kept already is still updated; a success makes room. */
  assert_int_equal(kc_keytrace_set_error(t, "ns/k7", "boom 7"), 0);
  assert_int_equal(kc_keytrace_set_error(t, "ns/k8", NULL), 0);
  assert_int_equal(kc_keytrace_set_error(t, "ns/one-more", "boom"), 0);
  assert_int_equal(kc_keytrace_failing(t), KC_KEYTRACE_MAX_ERRORS);
  kc_keytrace_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ring_keeps_the_last_capacity_entries),
      cmocka_unit_test(test_details_are_cut_to_the_entry),
      cmocka_unit_test(test_last_errors),
      cmocka_unit_test(test_error_table_is_bounded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
