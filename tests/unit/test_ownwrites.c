/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for daemon/host/ownwrites.c, the record table of read your own
 * writes: which writes are recorded (by URL path, for which source, with
 * what uid and resourceVersion; deletes as tombstones), that a key is ready
 * only once its records are observed, the bounds (one record per key and
 * source, the cap, oldest first), the drops (observed, object or key
 * deleted, relist) and the timeout on the manual clock. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/clock.h"
#include "host/ownwrites.h"

#define SEC 1000000000ull

/* Sources: namespaced ConfigMaps (slot 0), cluster-scoped Namespaces (slot 1). */
static const kc_ownwrites_source SOURCES[] = {
    {"/api/v1", "configmaps", true},
    {"/api/v1", "namespaces", false},
};

/* What the fake informers have observed: per slot a resourceVersion, and
 * whether the deleted object is still cached. */
struct world {
  uint64_t seen[2];
  bool still_cached;
  unsigned calls;
  kc_ownwrite last;
};

static enum kc_ownwrite_state observe(void *ud, const kc_ownwrite *w) {
  struct world *x = ud;
  x->calls++;
  x->last = *w;
  if (w->tombstone) return x->still_cached ? KC_OWNWRITE_PENDING : KC_OWNWRITE_OBSERVED;
  return x->seen[w->slot] >= w->rv ? KC_OWNWRITE_OBSERVED : KC_OWNWRITE_PENDING;
}

static char released[8][64];
static size_t nreleased;

static void on_ready(void *ud, const char *key) {
  (void)ud;
  if (nreleased < 8) snprintf(released[nreleased++], sizeof released[0], "%s", key);
}

static char body[512];

static const char *cm(const char *name, const char *rv) {
  snprintf(body, sizeof body,
           "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\","
           "\"namespace\":\"ns\",\"uid\":\"uid-%s\",\"resourceVersion\":\"%s\"}}",
           name, name, rv);
  return body;
}

static void record(kc_ownwrites *w, const char *key, const char *method, const char *path,
                   const char *b) {
  kc_ownwrites_record(w, key, method, path, b, b ? strlen(b) : 0);
}

static int setup(void **state) {
  kc_clock_set_manual(1000 * SEC);
  nreleased = 0;
  *state = kc_ownwrites_new(SOURCES, 2, 4, 0);
  return *state ? 0 : -1;
}

static int teardown(void **state) {
  kc_ownwrites_unref(*state);
  kc_clock_set_real();
  return 0;
}

static void test_paths_name_source_and_object(void **state) {
  kc_ownwrites *w = *state;
  unsigned slot = 9;
  char ns[64], name[64];
  assert_int_equal(kc_ownwrites_match(w, "/api/v1/namespaces/ns/configmaps/a/status", &slot, ns,
                                      sizeof ns, name, sizeof name), 1);
  assert_int_equal(slot, 0);
  assert_string_equal(ns, "ns");
  assert_string_equal(name, "a");
  assert_int_equal(kc_ownwrites_match(w, "/api/v1/namespaces/ns/configmaps?fieldManager=x", &slot,
                                      ns, sizeof ns, name, sizeof name), 1);
  assert_string_equal(name, "");
  assert_int_equal(kc_ownwrites_match(w, "/api/v1/namespaces/team", &slot, ns, sizeof ns, name,
                                      sizeof name), 1);
  assert_int_equal(slot, 1);
  assert_string_equal(ns, "");
  assert_string_equal(name, "team");
  assert_int_equal(kc_ownwrites_match(w, "/api/v1/namespaces/ns/secrets/a", &slot, ns, sizeof ns,
                                      name, sizeof name), 0);
  assert_int_equal(kc_ownwrites_match(w, "/apis/apps/v1/namespaces/ns/deployments/a", &slot, ns,
                                      sizeof ns, name, sizeof name), 0);
}

static void test_a_write_waits_until_observed(void **state) {
  kc_ownwrites *w = *state;
  struct world x = {.calls = 0};
  assert_true(kc_ownwrites_ready(w, "ns/a", observe, &x)); /* nothing written yet */
  record(w, "ns/a", "PATCH", "/api/v1/namespaces/ns/configmaps/a", cm("a", "42"));
  kc_ownwrites_stats st;
  kc_ownwrites_stats_get(w, &st);
  assert_int_equal(st.records, 1);
  x.seen[0] = 41;
  assert_false(kc_ownwrites_ready(w, "ns/a", observe, &x));
  assert_int_equal(x.last.slot, 0);
  assert_string_equal(x.last.ns, "ns");
  assert_string_equal(x.last.name, "a");
  assert_string_equal(x.last.uid, "uid-a");
  assert_int_equal(x.last.rv, 42);
  assert_false(x.last.tombstone);
  assert_true(kc_ownwrites_ready(w, "ns/b", observe, &x)); /* another key: not held */
  assert_int_equal(kc_ownwrites_park(w, "ns/a"), 0);
  assert_int_equal(kc_ownwrites_park(w, "ns/a"), -EALREADY);
  kc_ownwrites_recheck(w, observe, &x, on_ready, NULL);
  assert_int_equal(nreleased, 0);
  kc_clock_advance(SEC / 5);
  x.seen[0] = 42; /* the watch event (or a bookmark) arrived */
  kc_ownwrites_recheck(w, observe, &x, on_ready, NULL);
  assert_int_equal(nreleased, 1);
  assert_string_equal(released[0], "ns/a");
  kc_ownwrites_stats_get(w, &st);
  assert_int_equal(st.records, 0); /* dropped when observed */
  assert_int_equal(st.parked, 0);
  assert_int_equal(st.waits, 1);
  assert_int_equal(st.timeouts, 0);
  assert_int_equal(st.wait_time.counts[KC_RECONCILE_BUCKETS], 0);
  assert_true(st.wait_time.sum_seconds > 0.19 && st.wait_time.sum_seconds < 0.21);
}

static void test_create_is_named_by_the_answer(void **state) {
  kc_ownwrites *w = *state;
  struct world x = {.calls = 0};
  record(w, "ns/owner", "POST", "/api/v1/namespaces/ns/configmaps", cm("child-x7", "7"));
  assert_false(kc_ownwrites_ready(w, "ns/owner", observe, &x));
  assert_string_equal(x.last.name, "child-x7");
  /* a create without an answer names nothing: not recorded */
  kc_ownwrites_drop_key(w, "ns/owner");
  record(w, "ns/owner", "POST", "/api/v1/namespaces/ns/configmaps", NULL);
  kc_ownwrites_stats st;
  kc_ownwrites_stats_get(w, &st);
  assert_int_equal(st.records, 0);
  /* writes to a kind no informer of the controller reads: ignored */
  record(w, "ns/owner", "PUT", "/api/v1/namespaces/ns/secrets/s", cm("s", "9"));
  kc_ownwrites_stats_get(w, &st);
  assert_int_equal(st.records, 0);
}

static void test_delete_is_a_tombstone(void **state) {
  kc_ownwrites *w = *state;
  struct world x = {{0}, .still_cached = true};
  record(w, "ns/a", "DELETE", "/api/v1/namespaces/ns/configmaps/a",
         "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Success\"}");
  assert_false(kc_ownwrites_ready(w, "ns/a", observe, &x));
  assert_true(x.last.tombstone);
  assert_string_equal(x.last.uid, "");
  x.still_cached = false;
  assert_true(kc_ownwrites_ready(w, "ns/a", observe, &x));
  /* the object as it was deleted: a tombstone with its uid */
  record(w, "ns/a", "DELETE", "/api/v1/namespaces/ns/configmaps/a", cm("a", "50"));
  x.still_cached = true;
  assert_false(kc_ownwrites_ready(w, "ns/a", observe, &x));
  assert_true(x.last.tombstone);
  assert_string_equal(x.last.uid, "uid-a");
  kc_ownwrites_drop_key(w, "ns/a");
  /* still there with a deletionTimestamp (finalizers): an update at its version */
  record(w, "ns/a", "DELETE", "/api/v1/namespaces/ns/configmaps/a",
         "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\",\"namespace\":"
         "\"ns\",\"uid\":\"u\",\"resourceVersion\":\"60\",\"deletionTimestamp\":"
         "\"2026-01-01T00:00:00Z\",\"finalizers\":[\"x/y\"]}}");
  assert_false(kc_ownwrites_ready(w, "ns/a", observe, &x));
  assert_false(x.last.tombstone);
  assert_int_equal(x.last.rv, 60);
}

static void test_one_record_per_key_and_source(void **state) {
  kc_ownwrites *w = *state;
  struct world x = {.calls = 0};
  record(w, "ns/a", "PUT", "/api/v1/namespaces/ns/configmaps/a", cm("a", "10"));
  record(w, "ns/a", "PUT", "/api/v1/namespaces/ns/configmaps/b", cm("b", "12"));
  record(w, "ns/a", "PUT", "/api/v1/namespaces/team", cm("team", "11"));
  kc_ownwrites_stats st;
  kc_ownwrites_stats_get(w, &st);
  assert_int_equal(st.records, 2); /* configmaps: the last write only; namespaces: one */
  assert_int_equal(st.recorded, 3);
  x.seen[0] = 12;
  assert_false(kc_ownwrites_ready(w, "ns/a", observe, &x)); /* the Namespace is not seen yet */
  x.seen[1] = 11;
  assert_true(kc_ownwrites_ready(w, "ns/a", observe, &x));
}

static void test_cap_drops_the_oldest(void **state) {
  kc_ownwrites *w = *state; /* cap 4 */
  struct world x = {.calls = 0};
  char key[16], path[64], rv[16];
  for (int i = 0; i < 6; i++) {
    snprintf(key, sizeof key, "ns/k%d", i);
    snprintf(path, sizeof path, "/api/v1/namespaces/ns/configmaps/k%d", i);
    snprintf(rv, sizeof rv, "%d", 100 + i);
    record(w, key, "PUT", path, cm(key + 3, rv));
  }
  kc_ownwrites_stats st;
  kc_ownwrites_stats_get(w, &st);
  assert_int_equal(st.records, 4);
  assert_int_equal(st.overflow, 2);
  assert_true(kc_ownwrites_ready(w, "ns/k0", observe, &x)); /* dropped */
  assert_true(kc_ownwrites_ready(w, "ns/k1", observe, &x));
  assert_false(kc_ownwrites_ready(w, "ns/k2", observe, &x));
  assert_false(kc_ownwrites_ready(w, "ns/k5", observe, &x));
}

static void test_drops_on_delete_and_relist(void **state) {
  kc_ownwrites *w = *state;
  struct world x = {.calls = 0};
  record(w, "ns/a", "PUT", "/api/v1/namespaces/ns/configmaps/child", cm("child", "10"));
  record(w, "ns/a", "PUT", "/api/v1/namespaces/team", cm("team", "11"));
  kc_ownwrites_drop_object(w, "ns/a", 0, "ns", "other"); /* not that object: kept */
  kc_ownwrites_stats st;
  kc_ownwrites_stats_get(w, &st);
  assert_int_equal(st.records, 2);
  kc_ownwrites_drop_object(w, "ns/a", 0, "ns", "child");
  kc_ownwrites_stats_get(w, &st);
  assert_int_equal(st.records, 1);
  kc_ownwrites_relisted(w, 1);
  kc_ownwrites_stats_get(w, &st);
  assert_int_equal(st.records, 0);
  assert_true(kc_ownwrites_ready(w, "ns/a", observe, &x));
  record(w, "ns/a", "PUT", "/api/v1/namespaces/ns/configmaps/a", cm("a", "12"));
  kc_ownwrites_drop_key(w, "ns/a");
  assert_true(kc_ownwrites_ready(w, "ns/a", observe, &x));
}

static void test_an_unobserved_write_times_out(void **state) {
  kc_ownwrites *w = *state;
  struct world x = {.calls = 0};
  uint64_t when;
  assert_false(kc_ownwrites_next_timeout(w, &when)); /* nobody waits */
  uint64_t t0 = kc_clock_now_ns();
  record(w, "ns/a", "PATCH", "/api/v1/namespaces/ns/configmaps/a", cm("a", "5"));
  kc_clock_advance(2 * SEC);
  assert_false(kc_ownwrites_ready(w, "ns/a", observe, &x));
  assert_int_equal(kc_ownwrites_park(w, "ns/a"), 0);
  assert_true(kc_ownwrites_next_timeout(w, &when));
  assert_int_equal(when, t0 + KC_OWNWRITES_TIMEOUT_NS); /* 10 s after the write */
  kc_clock_advance(KC_OWNWRITES_TIMEOUT_NS - 2 * SEC - 1);
  kc_ownwrites_recheck(w, observe, &x, on_ready, NULL);
  assert_int_equal(nreleased, 0);
  kc_clock_advance(1);
  kc_ownwrites_recheck(w, observe, &x, on_ready, NULL);
  assert_int_equal(nreleased, 1);
  kc_ownwrites_stats st;
  kc_ownwrites_stats_get(w, &st);
  assert_int_equal(st.timeouts, 1);
  assert_int_equal(st.records, 0);
  assert_true(st.wait_time.sum_seconds > 7.9 && st.wait_time.sum_seconds < 8.1);
  /* an expired record no longer holds a key that comes later */
  record(w, "ns/b", "PATCH", "/api/v1/namespaces/ns/configmaps/b", cm("b", "6"));
  kc_clock_advance(KC_OWNWRITES_TIMEOUT_NS);
  assert_true(kc_ownwrites_ready(w, "ns/b", observe, &x));
}

static void test_a_parked_key_ready_when_taken_again_leaves_the_wait(void **state) {
  kc_ownwrites *w = *state;
  struct world x = {.calls = 0};
  record(w, "ns/a", "PATCH", "/api/v1/namespaces/ns/configmaps/a", cm("a", "5"));
  assert_false(kc_ownwrites_ready(w, "ns/a", observe, &x));
  assert_int_equal(kc_ownwrites_park(w, "ns/a"), 0);
  x.seen[0] = 5; /* the event that observes it also queued the key */
  assert_true(kc_ownwrites_ready(w, "ns/a", observe, &x));
  kc_ownwrites_stats st;
  kc_ownwrites_stats_get(w, &st);
  assert_int_equal(st.parked, 0);
  uint64_t waits = 0;
  for (size_t i = 0; i <= KC_RECONCILE_BUCKETS; i++) waits += st.wait_time.counts[i];
  assert_int_equal(waits, 1); /* one wait observed, when it ended */
  kc_ownwrites_recheck(w, observe, &x, on_ready, NULL);
  assert_int_equal(nreleased, 0); /* not queued a second time */
}

static void test_unpark_all_forgets_waiting_keys(void **state) {
  kc_ownwrites *w = *state;
  struct world x = {.calls = 0};
  record(w, "ns/a", "PATCH", "/api/v1/namespaces/ns/configmaps/a", cm("a", "5"));
  assert_false(kc_ownwrites_ready(w, "ns/a", observe, &x));
  assert_int_equal(kc_ownwrites_park(w, "ns/a"), 0);
  kc_ownwrites_unpark_all(w);
  x.seen[0] = 5;
  kc_ownwrites_recheck(w, observe, &x, on_ready, NULL);
  assert_int_equal(nreleased, 0);
  kc_ownwrites_stats st;
  kc_ownwrites_stats_get(w, &st);
  assert_int_equal(st.parked, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_paths_name_source_and_object, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_write_waits_until_observed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_create_is_named_by_the_answer, setup, teardown),
      cmocka_unit_test_setup_teardown(test_delete_is_a_tombstone, setup, teardown),
      cmocka_unit_test_setup_teardown(test_one_record_per_key_and_source, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cap_drops_the_oldest, setup, teardown),
      cmocka_unit_test_setup_teardown(test_drops_on_delete_and_relist, setup, teardown),
      cmocka_unit_test_setup_teardown(test_an_unobserved_write_times_out, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_parked_key_ready_when_taken_again_leaves_the_wait, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_unpark_all_forgets_waiting_keys, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
