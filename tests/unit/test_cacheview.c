/* SPDX-License-Identifier: Apache-2.0 */
/* Specification of daemon/cache/cacheview.{c,h}: the plugins' read view of a kind
 * cached by several informers is their union. Real kc_informers on a uv
 * loop, fed by the in-memory API server of tests/unit/fakeapi.h:
 *  - A watches namespace team-a, B team-b (with index byApp), ALL every
 *    namespace (with index byApp), over team-a/x, team-b/y, team-c/z, all
 *    labelled app=web;
 *  - get finds an object in whichever informer holds it (the bug: a
 *    controller bound to the second informer of a kind found nothing),
 *    the first one in order where several do; -ENOENT when none does,
 *    -ENOTSUP when no informer is started;
 *  - list and by_index hold each object once, the copy of the first
 *    informer that answered; by_index asks only informers with the index
 *    (-ENOENT when none has it).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "client/apiclient.h"
#include "cache/cacheview.h"
#include "fakeapi.h"
#include "cache/informer.h"
#include "base/log.h"
#include "testutil.h"

#define WAIT_MS 8000

static const fakeapi_resource RESOURCES[] = {{"/api/v1", "configmaps", "v1", "ConfigMap"}};
static const kc_resource_ref CONFIGMAPS = {"/api/v1", "configmaps", true};
static const char *const NS_A[] = {"team-a"}, *const NS_B[] = {"team-b"};
static const kc_index_spec BYAPP = {.name = "byApp", .path = "metadata.labels.app"};

static struct {
  uv_loop_t loop;
  uv_timer_t tick; /* keeps uv_run(UV_RUN_ONCE) from blocking */
  fakeapi *srv;
  kc_api *api;
  kc_kube_creds creds;
  char url[64];
  kc_informer *a, *b, *all;
} F;

static void on_tick(uv_timer_t *t) {}

static kc_informer_spec spec_of(const char *const *namespaces, size_t n, bool index) {
  return (kc_informer_spec){.api_version = "v1",
                            .kind = "ConfigMap",
                            .group = "",
                            .namespaces = namespaces,
                            .nnamespaces = n,
                            .label_selector = "",
                            .field_selector = "",
                            .indexes = index ? &BYAPP : NULL,
                            .nindexes = index ? 1 : 0,
                            .page_size = 500,
                            .watch_timeout_ms = 300000,
                            .streaming_list = KC_STREAMING_OFF,
                            .identity = "test"};
}

static kc_informer_spec SPEC_A, SPEC_B, SPEC_ALL;

static int setup(void **state) {
  memset(&F, 0, sizeof F);
  if (uv_loop_init(&F.loop) != 0 || uv_timer_init(&F.loop, &F.tick) != 0) return -1;
  uv_timer_start(&F.tick, on_tick, 5, 5);
  F.srv = fakeapi_start(RESOURCES, 1);
  if (!F.srv) return -1;
  snprintf(F.url, sizeof F.url, "%s", fakeapi_url(F.srv));
  F.creds = (kc_kube_creds){.server = F.url, .token = "t"};
  if (kc_api_new(&F.loop, &F.creds, &F.api) != 0) return -1;
  fakeapi_put(F.srv, "configmaps", "team-a", "x", "\"labels\":{\"app\":\"web\"}", NULL);
  fakeapi_put(F.srv, "configmaps", "team-b", "y", "\"labels\":{\"app\":\"web\"}", NULL);
  fakeapi_put(F.srv, "configmaps", "team-c", "z", "\"labels\":{\"app\":\"web\"}", NULL);
  SPEC_A = spec_of(NS_A, 1, false);
  SPEC_B = spec_of(NS_B, 1, true);
  SPEC_ALL = spec_of(NULL, 0, true);
  if (kc_informer_new(&F.loop, F.api, NULL, &SPEC_A, &CONFIGMAPS, &F.a) != 0 ||
      kc_informer_new(&F.loop, F.api, NULL, &SPEC_B, &CONFIGMAPS, &F.b) != 0 ||
      kc_informer_new(&F.loop, F.api, NULL, &SPEC_ALL, &CONFIGMAPS, &F.all) != 0 ||
      kc_informer_start(F.a) != 0 || kc_informer_start(F.b) != 0 || kc_informer_start(F.all) != 0)
    return -1;
  uint64_t end = tu_mono_ms() + WAIT_MS;
  while (!kc_informer_synced(F.a) || !kc_informer_synced(F.b) || !kc_informer_synced(F.all)) {
    if (tu_mono_ms() > end) return -1;
    uv_run(&F.loop, UV_RUN_ONCE);
  }
  return 0;
}

static int teardown(void **state) {
  kc_informer_close(F.a);
  kc_informer_close(F.b);
  kc_informer_close(F.all);
  kc_api_close(F.api);
  fakeapi_stop(F.srv);
  uv_close((uv_handle_t *)&F.tick, NULL);
  uv_run(&F.loop, UV_RUN_DEFAULT);
  return uv_loop_close(&F.loop) == 0 ? 0 : -1;
}

/* "ns/name;" of every object of v, sorted. */
static int cmp_key(const void *p, const void *q) {
  const kc_obj *x = *(kc_obj *const *)p, *y = *(kc_obj *const *)q;
  int c = kc_str_cmp(kc_obj_namespace(x), kc_obj_namespace(y));
  return c ? c : kc_str_cmp(kc_obj_name(x), kc_obj_name(y));
}

static const char *keys(kc_obj_vec *v) {
  static char out[256];
  out[0] = 0;
  qsort(v->v, v->n, sizeof *v->v, cmp_key);
  for (size_t i = 0; i < v->n; i++) {
    size_t len = strlen(out);
    snprintf(out + len, sizeof out - len, "%.*s/%.*s;", (int)kc_obj_namespace(v->v[i]).len,
             kc_obj_namespace(v->v[i]).ptr, (int)kc_obj_name(v->v[i]).len,
             kc_obj_name(v->v[i]).ptr);
  }
  return out;
}

/* True when v holds inf's own copy of ns/name. */
static bool holds_copy_of(const kc_obj_vec *v, kc_informer *inf, const char *ns, const char *name) {
  kc_obj *o = kc_informer_get(inf, kc_str_c(ns), kc_str_c(name));
  bool found = false;
  for (size_t i = 0; o && i < v->n; i++)
    found |= v->v[i] == o;
  kc_obj_unref(o);
  return found;
}

static void test_get_from_the_informer_that_holds_it(void **state) {
  kc_informer *ab[] = {F.a, F.b};
  kc_obj *o = NULL;
  /* The second informer's object: what a controller bound to it reads. */
  assert_int_equal(kc_cacheview_get(ab, 2, kc_str_c("team-b"), kc_str_c("y"), &o), 0);
  assert_non_null(o);
  assert_true(kc_str_eq_c(kc_obj_name(o), "y"));
  kc_obj_unref(o);
  assert_int_equal(kc_cacheview_get(ab, 2, kc_str_c("team-a"), kc_str_c("x"), &o), 0);
  kc_obj_unref(o);
  assert_int_equal(kc_cacheview_get(ab, 2, kc_str_c("team-c"), kc_str_c("z"), &o), -ENOENT);
  assert_null(o);
  assert_int_equal(kc_cacheview_get(ab, 2, kc_str_c("team-a"), kc_str_c("y"), &o), -ENOENT);
  /* Informers not started yet are skipped; none at all: not cached. */
  kc_informer *late[] = {NULL, F.b};
  assert_int_equal(kc_cacheview_get(late, 2, kc_str_c("team-b"), kc_str_c("y"), &o), 0);
  kc_obj_unref(o);
  kc_informer *none[] = {NULL, NULL};
  assert_int_equal(kc_cacheview_get(none, 2, kc_str_c("team-b"), kc_str_c("y"), &o), -ENOTSUP);
  assert_int_equal(kc_cacheview_get(none, 0, kc_str_c("team-b"), kc_str_c("y"), &o), -ENOTSUP);
  /* Overlapping scopes: the first informer in order answers. */
  kc_informer *over[] = {F.all, F.b};
  assert_int_equal(kc_cacheview_get(over, 2, kc_str_c("team-b"), kc_str_c("y"), &o), 0);
  kc_obj *mine = kc_informer_get(F.all, kc_str_c("team-b"), kc_str_c("y"));
  assert_ptr_equal(o, mine);
  kc_obj_unref(mine);
  kc_obj_unref(o);
}

static void test_list_is_the_union_each_object_once(void **state) {
  kc_informer *ab[] = {F.a, F.b};
  kc_obj_vec v = {0};
  assert_int_equal(kc_cacheview_list(ab, 2, (kc_str){0}, NULL, &v), 2);
  assert_string_equal(keys(&v), "team-a/x;team-b/y;");
  kc_obj_vec_clear(&v);
  assert_int_equal(kc_cacheview_list(ab, 2, kc_str_c("team-b"), NULL, &v), 1);
  assert_string_equal(keys(&v), "team-b/y;");
  kc_obj_vec_clear(&v);
  assert_int_equal(kc_cacheview_list(ab, 2, kc_str_c("team-c"), NULL, &v), 0);
  /* ALL overlaps A and B: each object once, the first informer's copy. */
  kc_informer *over[] = {F.a, F.b, F.all};
  assert_int_equal(kc_cacheview_list(over, 3, (kc_str){0}, NULL, &v), 3);
  assert_string_equal(keys(&v), "team-a/x;team-b/y;team-c/z;");
  assert_true(holds_copy_of(&v, F.a, "team-a", "x"));
  assert_true(holds_copy_of(&v, F.b, "team-b", "y"));
  assert_true(holds_copy_of(&v, F.all, "team-c", "z"));
  kc_obj_vec_clear(&v);
  kc_informer *none[] = {NULL};
  assert_int_equal(kc_cacheview_list(none, 1, (kc_str){0}, NULL, &v), -ENOTSUP);
  assert_int_equal(v.n, 0);
  kc_obj_vec_release(&v);
}

static void test_by_index_asks_informers_with_the_index(void **state) {
  kc_obj_vec v = {0};
  kc_informer *ab[] = {F.a, F.b}; /* only B has byApp */
  assert_int_equal(kc_cacheview_by_index(ab, 2, "byApp", kc_str_c("web"), &v), 1);
  assert_string_equal(keys(&v), "team-b/y;");
  kc_obj_vec_clear(&v);
  kc_informer *a[] = {F.a};
  assert_int_equal(kc_cacheview_by_index(a, 1, "byApp", kc_str_c("web"), &v), -ENOENT);
  assert_int_equal(kc_cacheview_by_index(ab, 2, "noSuchIndex", kc_str_c("web"), &v), -ENOENT);
  assert_int_equal(v.n, 0);
  /* A has no index: x comes from ALL; y once, B's copy (B answered first). */
  kc_informer *over[] = {F.a, F.b, F.all};
  assert_int_equal(kc_cacheview_by_index(over, 3, "byApp", kc_str_c("web"), &v), 3);
  assert_string_equal(keys(&v), "team-a/x;team-b/y;team-c/z;");
  assert_true(holds_copy_of(&v, F.b, "team-b", "y"));
  assert_true(holds_copy_of(&v, F.all, "team-a", "x"));
  kc_obj_vec_clear(&v);
  kc_informer *none[] = {NULL, NULL};
  assert_int_equal(kc_cacheview_by_index(none, 2, "byApp", kc_str_c("web"), &v), -ENOTSUP);
  kc_obj_vec_release(&v);
}

int main(void) {
  kc_log_set_level(KC_LOG_ERROR);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_get_from_the_informer_that_holds_it, setup, teardown),
      cmocka_unit_test_setup_teardown(test_list_is_the_union_each_object_once, setup, teardown),
      cmocka_unit_test_setup_teardown(test_by_index_asks_informers_with_the_index, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
