/* SPDX-License-Identifier: Apache-2.0 */
/* clusterid (daemon/client/clusterid.h) against kube-apisim: checks asked
 * at the same time share one GET; another cluster behind the same port
 * (/_apisim/reseed) calls every member's on_change with both uids and no
 * pending done; a refused GET (403) answers UNKNOWN, a 503 RETRY. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include <cmocka.h>

#include "apisim_child.h"
#include "base/log.h"
#include "client/apiclient.h"
#include "client/clusterid.h"

typedef struct member {
  kc_clusterid_member *m;
  int done;
  enum kc_clusterid_verdict verdict;
  int changed;
  char old_uid[64], new_uid[64];
} member;

static void on_done(void *ud, enum kc_clusterid_verdict v, const char *why) {
  member *x = ud;
  x->done++;
  x->verdict = v;
}

static void on_change(void *ud, const char *old_uid, const char *new_uid) {
  member *x = ud;
  x->changed++;
  snprintf(x->old_uid, sizeof x->old_uid, "%s", old_uid);
  snprintf(x->new_uid, sizeof x->new_uid, "%s", new_uid);
}

static struct {
  uv_loop_t loop;
  kc_api *api;
  kc_clusterid *id;
  bool up;
} T;

static int setup(void **state) {
  if (sim_paths_init() < 0 || sim_start() < 0) {
    sim_paths_free();
    return 0; /* each test skips */
  }
  T.up = true;
  assert_int_equal(uv_loop_init(&T.loop), 0);
  kc_kube_creds cr = {.server = sim_url};
  assert_int_equal(kc_api_new(&T.loop, &cr, &T.api), 0);
  assert_int_equal(kc_clusterid_new(&T.loop, T.api, &T.id), 0);
  return 0;
}

static int teardown(void **state) {
  if (!T.up) return 0;
  kc_clusterid_close(T.id);
  kc_api_close(T.api);
  uv_run(&T.loop, UV_RUN_DEFAULT);
  uv_loop_close(&T.loop);
  sim_stop();
  sim_paths_free();
  memset(&T, 0, sizeof T);
  return 0;
}

/* Runs the loop until pred(ud) or 10 s. */
static void run_until(bool (*pred)(member *, size_t), member *m, size_t n) {
  uint64_t end = sim_mono_ms() + 10000;
  while (!pred(m, n) && sim_mono_ms() < end) uv_run(&T.loop, UV_RUN_NOWAIT), sim_sleep_ms(1);
  assert_true(pred(m, n));
}

static bool all_done(member *m, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!m[i].done) return false;
  return true;
}

static bool all_changed(member *m, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!m[i].changed) return false;
  return true;
}

static bool learnt(member *m, size_t n) {
  kc_clusterid_stats st;
  kc_clusterid_stats_get(T.id, &st);
  return st.uid[0] != 0;
}

static void test_shared_get_and_change(void **state) {
  if (!T.up) {
    print_message("# kube-apisim not available: skipped\n");
    return;
  }
  member m[3] = {0};
  for (size_t i = 0; i < 3; i++) assert_non_null(m[i].m = kc_clusterid_join(T.id, on_change, &m[i]));
  run_until(learnt, m, 3); /* joining learns the identity */
  kc_clusterid_stats st;
  kc_clusterid_stats_get(T.id, &st);
  assert_int_equal(st.gets, 1);
  char first[64];
  snprintf(first, sizeof first, "%s", st.uid);

  /* Three members ask at once: one GET answers them all. */
  for (size_t i = 0; i < 3; i++) assert_int_equal(kc_clusterid_check(m[i].m, on_done), 0);
  run_until(all_done, m, 3);
  for (size_t i = 0; i < 3; i++) assert_int_equal(m[i].verdict, KC_CLUSTERID_SAME);
  kc_clusterid_stats_get(T.id, &st);
  assert_int_equal(st.gets, 2);

  /* Another cluster behind the same port: every member hears of it, the
   * pending checks are dropped, the new uid becomes the known one. */
  char *out = NULL;
  assert_int_equal(sim_call("POST", "/_apisim/reseed", "{\"cluster\":\"new\"}", NULL, &out), 200);
  free(out);
  for (size_t i = 0; i < 3; i++) m[i].done = 0;
  assert_int_equal(kc_clusterid_check(m[0].m, on_done), 0);
  assert_int_equal(kc_clusterid_check(m[1].m, on_done), 0);
  run_until(all_changed, m, 3);
  for (size_t i = 0; i < 3; i++) {
    assert_int_equal(m[i].changed, 1);
    assert_int_equal(m[i].done, 0);
    assert_string_equal(m[i].old_uid, first);
    assert_string_not_equal(m[i].new_uid, first);
  }
  kc_clusterid_stats_get(T.id, &st);
  assert_int_equal(st.changes, 1);
  assert_string_equal(st.uid, m[0].new_uid);

  /* The same cluster again: SAME, no change. */
  assert_int_equal(kc_clusterid_check(m[2].m, on_done), 0);
  run_until(all_done, &m[2], 1);
  assert_int_equal(m[2].verdict, KC_CLUSTERID_SAME);
  assert_int_equal(m[2].changed, 1);
  for (size_t i = 0; i < 3; i++) kc_clusterid_leave(m[i].m);
}

static void test_refused_and_busy(void **state) {
  if (!T.up) {
    print_message("# kube-apisim not available: skipped\n");
    return;
  }
  member m = {0};
  char *out = NULL;
  assert_int_equal(sim_call("POST", "/_apisim/faults",
                            "{\"action\":\"status\",\"code\":503,\"count\":1,"
                            "\"pathPrefix\":\"/api/v1/namespaces/kube-system\"}",
                            NULL, &out), 200);
  free(out);
  assert_non_null(m.m = kc_clusterid_join(T.id, on_change, &m)); /* its GET gets the 503 */
  assert_int_equal(kc_clusterid_check(m.m, on_done), 0);
  run_until(all_done, &m, 1);
  assert_int_equal(m.verdict, KC_CLUSTERID_SAME); /* the second GET learnt it */
  assert_int_equal(sim_call("POST", "/_apisim/faults",
                            "{\"action\":\"status\",\"code\":503,\"count\":1,"
                            "\"pathPrefix\":\"/api/v1/namespaces/kube-system\"}",
                            NULL, &out), 200);
  free(out);
  m.done = 0;
  assert_int_equal(kc_clusterid_check(m.m, on_done), 0);
  run_until(all_done, &m, 1);
  assert_int_equal(m.verdict, KC_CLUSTERID_RETRY);
  assert_int_equal(sim_call("POST", "/_apisim/faults",
                            "{\"action\":\"status\",\"code\":403,\"count\":1,"
                            "\"pathPrefix\":\"/api/v1/namespaces/kube-system\"}",
                            NULL, &out), 200);
  free(out);
  m.done = 0;
  assert_int_equal(kc_clusterid_check(m.m, on_done), 0);
  run_until(all_done, &m, 1);
  assert_int_equal(m.verdict, KC_CLUSTERID_UNKNOWN);
  assert_int_equal(m.changed, 0);
  kc_clusterid_leave(m.m);
}

int main(void) {
  kc_log_set_level(KC_LOG_ERROR);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_shared_get_and_change, setup, teardown),
      cmocka_unit_test_setup_teardown(test_refused_and_busy, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
