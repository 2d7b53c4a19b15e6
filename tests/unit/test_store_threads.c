/* SPDX-License-Identifier: Apache-2.0 */
/* Concurrency test for daemon/cache/store.c: one writer thread (the loop's role)
 * upserts, deletes and relists while reader threads (workers) get, list by
 * namespace + selector, query a field index and read fields of the objects
 * they received. Every result must be consistent with its query. Meant to
 * run under ThreadSanitizer too (make SAN=thread). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kube/selector.h"
#include "cache/store.h"
#include "store_podgen.h"

#define NNS 3
#define NNAMES 60
#define POOL 600
#define WRITES 3000
#define READERS 3

static const char *const NSS[NNS] = {"default", "team-a", "team-b"};
static const char *const NODES[] = {"node-0", "node-1", "node-2", "node-3"};

typedef struct shared {
  kc_store *s;
  kc_obj *pool[POOL];
  atomic_bool done;
  atomic_long errors;
  atomic_long reads;
  kc_label_selector *sel;
} shared;

static void *writer(void *arg) {
  shared *sh = arg;
  uint64_t rng = 12345;
  for (int i = 0; i < WRITES; i++) {
    kc_obj *o = sh->pool[pg_rand(&rng) % POOL];
    uint64_t r = pg_rand(&rng) % 100;
    if (r < 25) {
      kc_obj *old = NULL;
      if (kc_store_delete(sh->s, kc_obj_namespace(o), kc_obj_name(o), &old) == 0) kc_obj_unref(old);
    } else if (r == 99) {
      kc_obj *list[POOL / 4];
      for (size_t k = 0; k < POOL / 4; k++) list[k] = sh->pool[(pg_rand(&rng) % (POOL / 4)) * 4 + k % 4];
      /* duplicates in the list are fine: later items win */
      if (kc_store_replace(sh->s, list, POOL / 4, NULL, NULL) != 0) atomic_fetch_add(&sh->errors, 1);
    } else {
      if (kc_store_upsert(sh->s, o, NULL) != 0) atomic_fetch_add(&sh->errors, 1);
    }
  }
  atomic_store(&sh->done, true);
  return NULL;
}

static void *reader(void *arg) {
  shared *sh = arg;
  uint64_t rng = (uint64_t)(uintptr_t)&rng;
  kc_obj_vec v = {0};
  char buf[128], name[32];
  while (!atomic_load(&sh->done)) {
    const char *ns = NSS[pg_rand(&rng) % NNS];
    snprintf(name, sizeof name, "pod-%d", (int)(pg_rand(&rng) % NNAMES));
    kc_obj *o = kc_store_get(sh->s, kc_str_c(ns), kc_str_c(name));
    if (o) {
      if (!kc_str_eq_c(kc_obj_name(o), name) || !kc_str_eq_c(kc_obj_namespace(o), ns))
        atomic_fetch_add(&sh->errors, 1);
      kc_json_value jv;
      if (kc_obj_get(o, "spec.containers[0].name", &jv) != 0 || jv.type != KC_JSON_STRING)
        atomic_fetch_add(&sh->errors, 1);
      kc_obj_unref(o);
    }
    kc_obj_vec_clear(&v);
    int n = kc_store_list(sh->s, kc_str_c(ns), sh->sel, &v);
    if (n < 0 || (size_t)n != v.n) atomic_fetch_add(&sh->errors, 1);
    for (size_t i = 0; i < v.n; i++)
      if (!kc_str_eq_c(kc_obj_namespace(v.v[i]), ns) ||
          !kc_label_selector_matches_obj(sh->sel, v.v[i]))
        atomic_fetch_add(&sh->errors, 1);
    const char *node = NODES[pg_rand(&rng) % 4];
    kc_obj_vec_clear(&v);
    n = kc_store_by_index(sh->s, "node", kc_str_c(node), &v);
    if (n < 0) atomic_fetch_add(&sh->errors, 1);
    for (size_t i = 0; i < v.n; i++) {
      kc_json_value jv;
      if (kc_obj_get(v.v[i], "spec.nodeName", &jv) != 0 ||
          kc_json_scalar_text(&jv, buf, sizeof buf) < 0 || strcmp(buf, node) != 0)
        atomic_fetch_add(&sh->errors, 1);
    }
    (void)kc_store_count(sh->s);
    (void)kc_store_bytes(sh->s);
    atomic_fetch_add(&sh->reads, 1);
  }
  kc_obj_vec_release(&v);
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  podgen pg;
  assert_int_equal(podgen_init(&pg), 0);
  static shared sh;
  memset(&sh, 0, sizeof sh);
  kc_store_index_spec specs[] = {{.name = "node", .path = "spec.nodeName"}, {.name = "owner", .path = "metadata.ownerReferences[].uid"}};
  sh.s = kc_store_new(specs, 2);
  assert_non_null(sh.s);
  const char *seltext = "app in (web,db),tier!=back";
  assert_int_equal(kc_label_selector_parse(seltext, strlen(seltext), &sh.sel, NULL), 0);
  uint64_t rng = 42;
  for (int i = 0; i < POOL; i++) {
    char name[32], rv[16];
    snprintf(name, sizeof name, "pod-%d", i % NNAMES);
    snprintf(rv, sizeof rv, "%d", i + 1);
    podspec p = {.tmpl = i % PODGEN_NTMPL, .ns = NSS[(i / NNAMES) % NNS], .name = name,
                 .uid = "u", .rv = rv, .node = NODES[pg_rand(&rng) % 4]};
    p.lk[p.nlabels] = "app", p.lv[p.nlabels++] = pg_rand(&rng) % 2 ? "web" : "db";
    if (pg_rand(&rng) % 2) p.lk[p.nlabels] = "tier", p.lv[p.nlabels++] = pg_rand(&rng) % 2 ? "front" : "back";
    p.owners[p.nowners++] = pg_rand(&rng) % 2 ? "o1" : "o2";
    sh.pool[i] = podgen_make(&pg, &p);
    assert_non_null(sh.pool[i]);
  }
  podgen_free(&pg);

  pthread_t w, r[READERS];
  for (int i = 0; i < READERS; i++) assert_int_equal(pthread_create(&r[i], NULL, reader, &sh), 0);
  assert_int_equal(pthread_create(&w, NULL, writer, &sh), 0);
  pthread_join(w, NULL);
  for (int i = 0; i < READERS; i++) pthread_join(r[i], NULL);

  assert_int_equal(atomic_load(&sh.errors), 0);
  assert_true(atomic_load(&sh.reads) > 0);
  char msg[256];
  if (kc_store_verify(sh.s, msg, sizeof msg) != 0) fail_msg("%s", msg);
  kc_store_free(sh.s);
  kc_label_selector_free(sh.sel);
  for (int i = 0; i < POOL; i++) kc_obj_unref(sh.pool[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
