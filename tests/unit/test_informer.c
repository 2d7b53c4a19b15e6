/* SPDX-License-Identifier: Apache-2.0 */
/* Specification of daemon/cache/informer.{c,h}: a real kc_informer (reflectors,
 * stores) on a uv loop, fed LIST/WATCH by the in-memory API server of
 * tests/unit/fakeapi.h. What it pins down:
 *  - fan-out: every handler sees every event, in registration order, after
 *    the store holds it; a removed handler sees nothing more;
 *  - late-subscriber replay: kc_informer_add_handler on a filled cache
 *    delivers every cached object as on_add before it returns;
 *  - resync: every resync period each cached object goes to on_update with
 *    old == new (the same object); no period, no resync; kc_informer_rebind
 *    applies a changed period;
 *  - namespaces: one part (reflector + store) per namespace of the spec,
 *    each listing and watching only its namespace; reads span the parts;
 *  - kc_informer_on_synced runs once, when the last part synced, never
 *    again on a relist;
 *  - kc_informer_cause inside a handler: LIST for the first list and the
 *    replay, EVENT for watch events, RELIST for a later list, RESYNC;
 *  - stats: sums over the parts, the resourceVersion of the first part.
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
#include "fakeapi.h"
#include "cache/informer.h"
#include "base/log.h"
#include "testutil.h"

#define WAIT_MS 8000

static const fakeapi_resource RESOURCES[] = {{"/api/v1", "configmaps", "v1", "ConfigMap"}};
static const kc_resource_ref CONFIGMAPS = {"/api/v1", "configmaps", true};

/* ---- fixture: loop, server, API client --------------------------------- */

static struct {
  uv_loop_t loop;
  uv_timer_t tick; /* keeps uv_run(UV_RUN_ONCE) from blocking */
  fakeapi *srv;
  kc_api *api;
  kc_kube_creds creds;
  char url[64];
  kc_informer *inf;
} F;

static void on_tick(uv_timer_t *t) {}

static int setup(void **state) {
  memset(&F, 0, sizeof F);
  if (uv_loop_init(&F.loop) != 0 || uv_timer_init(&F.loop, &F.tick) != 0) return -1;
  uv_timer_start(&F.tick, on_tick, 5, 5);
  F.srv = fakeapi_start(RESOURCES, 1);
  if (!F.srv) return -1;
  snprintf(F.url, sizeof F.url, "%s", fakeapi_url(F.srv));
  F.creds = (kc_kube_creds){.server = F.url, .token = "t"};
  return kc_api_new(&F.loop, &F.creds, &F.api) == 0 ? 0 : -1;
}

static int teardown(void **state) {
  kc_informer_close(F.inf);
  kc_api_close(F.api);
  fakeapi_stop(F.srv);
  uv_close((uv_handle_t *)&F.tick, NULL);
  uv_run(&F.loop, UV_RUN_DEFAULT);
  return uv_loop_close(&F.loop) == 0 ? 0 : -1;
}

/* Runs the loop until cond(ud) holds; fails the test after WAIT_MS. */
static void run_until(bool (*cond)(void *), void *ud, const char *what) {
  uint64_t end = tu_mono_ms() + WAIT_MS;
  while (!cond(ud)) {
    if (tu_mono_ms() > end) fail_msg("timed out waiting for %s", what);
    uv_run(&F.loop, UV_RUN_ONCE);
  }
}

static kc_informer_spec spec_of(const char *const *namespaces, size_t n) {
  return (kc_informer_spec){.api_version = "v1", .kind = "ConfigMap", .group = "",
                            .namespaces = namespaces, .nnamespaces = n, .label_selector = "",
                            .field_selector = "", .page_size = 500, .watch_timeout_ms = 300000,
                            .streaming_list = KC_STREAMING_OFF, .identity = "test"};
}

static void new_informer(const kc_informer_spec *sp) {
  assert_int_equal(kc_informer_new(&F.loop, F.api, NULL, sp, &CONFIGMAPS, &F.inf), 0);
}

static bool is_synced(void *ud) { return kc_informer_synced(F.inf); }

static void start_and_sync(void) {
  assert_int_equal(kc_informer_start(F.inf), 0);
  run_until(is_synced, NULL, "the informer to sync");
}

/* ---- a recording handler ------------------------------------------------ */

/* Every event of every recorder, in delivery order:
 *   "T+ns/name;"  on_add       "T~ns/name;" on_update of a changed object
 *   "T=ns/name;"  on_update with old == new (resync)
 *   "T-ns/name;"  on_delete
 * where T is the recorder's tag. */
static char LOG[8192];

typedef struct recorder {
  char tag;
  unsigned adds, updates, resyncs, deletes;
  bool resync_changed_rv; /* a resync whose old and new differed in resourceVersion */
} recorder;

static void log_event(const recorder *r, char what, const kc_obj *o) {
  size_t n = strlen(LOG);
  snprintf(LOG + n, sizeof LOG - n, "%c%c%.*s/%.*s;", r->tag, what, (int)kc_obj_namespace(o).len,
           kc_obj_namespace(o).ptr, (int)kc_obj_name(o).len, kc_obj_name(o).ptr);
}

static void rec_add(void *ud, kc_informer *inf, kc_obj *obj) {
  recorder *r = ud;
  r->adds++;
  log_event(r, '+', obj);
}

static void rec_update(void *ud, kc_informer *inf, kc_obj *old, kc_obj *obj) {
  recorder *r = ud;
  if (old == obj) {
    r->resyncs++;
    if (!kc_str_eq(kc_obj_resource_version(old), kc_obj_resource_version(obj)))
      r->resync_changed_rv = true;
    log_event(r, '=', obj);
    return;
  }
  r->updates++;
  log_event(r, '~', obj);
}

static void rec_delete(void *ud, kc_informer *inf, kc_obj *obj) {
  recorder *r = ud;
  r->deletes++;
  log_event(r, '-', obj);
}

static int subscribe(recorder *r) {
  kc_informer_handler h = {rec_add, rec_update, rec_delete, r, NULL};
  int id = kc_informer_add_handler(F.inf, &h);
  assert_true(id > 0);
  return id;
}

static bool log_has(void *text) { return strstr(LOG, text) != NULL; }

static void wait_log(const char *text) { run_until(log_has, (void *)text, text); }

/* ---- fan-out -------------------------------------------------------------- */

/* Handlers run in registration order, one event at a time: every handler
 * has seen an event before any handler sees the next. Adds, updates and
 * deletes go to their own callbacks; a removed handler gets nothing more
 * and the others keep their order. */
static void test_fanout_in_registration_order(void **state) {
  LOG[0] = 0;
  kc_informer_spec sp = spec_of(NULL, 0);
  new_informer(&sp);
  recorder a = {.tag = 'A'}, b = {.tag = 'B'}, c = {.tag = 'C'};
  int ida = subscribe(&a);
  subscribe(&b);
  assert_string_equal(LOG, ""); /* nothing cached yet: nothing replayed */
  fakeapi_put(F.srv, "configmaps", "ns", "one", NULL, NULL);
  start_and_sync();
  fakeapi_put(F.srv, "configmaps", "ns", "two", NULL, NULL);
  fakeapi_put(F.srv, "configmaps", "ns", "one", NULL, "\"data\":{\"k\":\"v\"}");
  fakeapi_delete(F.srv, "configmaps", "ns", "two");
  wait_log("B-ns/two;");
  assert_string_equal(LOG, "A+ns/one;B+ns/one;"   /* from the LIST */
                           "A+ns/two;B+ns/two;"   /* watch ADDED */
                           "A~ns/one;B~ns/one;"   /* watch MODIFIED */
                           "A-ns/two;B-ns/two;"); /* watch DELETED */

  /* The handler sees the store already written: the object is cached. */
  kc_obj *one = kc_informer_get(F.inf, kc_str_c("ns"), kc_str_c("one"));
  assert_non_null(one);
  kc_obj_unref(one);

  kc_informer_remove_handler(F.inf, ida);
  subscribe(&c); /* replays "one" to C only */
  assert_string_equal(LOG + strlen(LOG) - strlen("C+ns/one;"), "C+ns/one;");
  LOG[0] = 0;
  fakeapi_put(F.srv, "configmaps", "ns", "three", NULL, NULL);
  wait_log("C+ns/three;");
  assert_string_equal(LOG, "B+ns/three;C+ns/three;");
  assert_int_equal(a.adds, 2);
}

/* A handler may leave callbacks NULL: it gets only the others. */
static void test_null_callbacks_skipped(void **state) {
  LOG[0] = 0;
  kc_informer_spec sp = spec_of(NULL, 0);
  new_informer(&sp);
  recorder deletes_only = {.tag = 'D'}, all = {.tag = 'A'};
  kc_informer_handler h = {NULL, NULL, rec_delete, &deletes_only, NULL};
  assert_true(kc_informer_add_handler(F.inf, &h) > 0);
  subscribe(&all);
  start_and_sync();
  fakeapi_put(F.srv, "configmaps", "ns", "x", NULL, NULL);
  fakeapi_put(F.srv, "configmaps", "ns", "x", "\"labels\":{\"a\":\"b\"}", NULL);
  fakeapi_delete(F.srv, "configmaps", "ns", "x");
  wait_log("A-ns/x;");
  assert_string_equal(LOG, "A+ns/x;A~ns/x;D-ns/x;A-ns/x;");
}

/* ---- late-subscriber replay ---------------------------------------------- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The recorder entries of LOG sorted (the store's order is its own). */
static void sorted_log(char *out, size_t cap) {
  char copy[sizeof LOG], *items[256];
  size_t n = 0;
  snprintf(copy, sizeof copy, "%s", LOG);
  for (char *save = NULL, *t = strtok_r(copy, ";", &save); t && n < 256; t = strtok_r(NULL, ";", &save))
    items[n++] = t;
  qsort(items, n, sizeof *items, cmp_str);
  out[0] = 0;
  for (size_t i = 0; i < n; i++) {
    size_t len = strlen(out);
    snprintf(out + len, cap - len, "%s;", items[i]);
  }
}

/* kc_informer_add_handler on a synced informer hands the newcomer every
 * cached object as on_add, synchronously (before it returns), in every
 * part; the handlers registered before see nothing again. Afterwards the
 * newcomer gets events like everyone else. */
static void test_late_subscriber_replay(void **state) {
  LOG[0] = 0;
  static const char *const nss[] = {"a", "b"};
  kc_informer_spec sp = spec_of(nss, 2);
  new_informer(&sp);
  recorder early = {.tag = 'E'}, late = {.tag = 'L'};
  subscribe(&early);
  fakeapi_put(F.srv, "configmaps", "a", "x", NULL, NULL);
  fakeapi_put(F.srv, "configmaps", "a", "y", NULL, NULL);
  fakeapi_put(F.srv, "configmaps", "b", "z", NULL, NULL);
  start_and_sync();
  assert_int_equal(early.adds, 3);
  LOG[0] = 0;

  subscribe(&late); /* no loop turn in between */
  char got[512];
  sorted_log(got, sizeof got);
  assert_string_equal(got, "L+a/x;L+a/y;L+b/z;");
  assert_int_equal(late.adds, 3);
  assert_int_equal(early.adds, 3);
  assert_int_equal(late.updates + late.resyncs + late.deletes, 0);

  LOG[0] = 0;
  fakeapi_put(F.srv, "configmaps", "b", "z", NULL, "\"data\":{}");
  wait_log("L~b/z;");
  assert_string_equal(LOG, "E~b/z;L~b/z;");
}

/* ---- resync ----------------------------------------------------------------- */

static bool resynced_twice(void *ud) {
  const recorder *r = ud;
  return r->resyncs >= 2 * 2; /* two objects, two periods */
}

/* With a resync period every cached object is handed to on_update with
 * old == new (the very same object, so the same resourceVersion): the
 * "nothing changed, reconcile anyway" event. Resyncs read the cache; they
 * never add or delete, and never ask the server. */
static void test_resync_updates_with_same_object(void **state) {
  LOG[0] = 0;
  kc_informer_spec sp = spec_of(NULL, 0);
  sp.resync_ms = 20;
  new_informer(&sp);
  recorder r = {.tag = 'R'};
  subscribe(&r);
  fakeapi_put(F.srv, "configmaps", "ns", "p", NULL, NULL);
  fakeapi_put(F.srv, "configmaps", "ns", "q", NULL, NULL);
  start_and_sync();
  run_until(resynced_twice, &r, "two resyncs");
  assert_false(r.resync_changed_rv);
  assert_int_equal(r.adds, 2);
  assert_int_equal(r.updates, 0);
  assert_int_equal(r.deletes, 0);
  assert_non_null(strstr(LOG, "R=ns/p;"));
  assert_non_null(strstr(LOG, "R=ns/q;"));
  assert_int_equal(fakeapi_lists(F.srv, ""), 1);
}

static bool has_resynced(void *ud) { return ((const recorder *)ud)->resyncs > 0; }

/* resync 0 means no resync at all; kc_informer_rebind with a new period
 * starts the timer (live reload). */
static void test_no_resync_until_rebind(void **state) {
  LOG[0] = 0;
  kc_informer_spec sp = spec_of(NULL, 0);
  new_informer(&sp);
  recorder r = {.tag = 'R'};
  subscribe(&r);
  fakeapi_put(F.srv, "configmaps", "ns", "p", NULL, NULL);
  start_and_sync();
  /* Several watch round trips later still no resync. */
  for (int i = 0; i < 5; i++) {
    char name[16];
    snprintf(name, sizeof name, "m%d", i);
    fakeapi_put(F.srv, "configmaps", "ns", name, NULL, NULL);
    char want[32];
    snprintf(want, sizeof want, "R+ns/%s;", name);
    wait_log(want);
  }
  assert_int_equal(r.resyncs, 0);

  kc_informer_spec faster = sp;
  faster.resync_ms = 20;
  kc_informer_rebind(F.inf, &faster);
  assert_ptr_equal(kc_informer_spec_get(F.inf), &faster);
  run_until(has_resynced, &r, "a resync after rebind");
  assert_false(r.resync_changed_rv);
}

/* ---- the cause of a delivery ---------------------------------------------- */

/* "<tag><cause><what><name>;" per delivery; cause L(ist) E(vent) R(elist)
 * S(ync), what as in LOG. */
static char CAUSES[1024];

static void note_cause(void *ud, kc_informer *inf, char what, const kc_obj *o) {
  static const char letters[] = {[KC_INFORMER_EVENT] = 'E', [KC_INFORMER_LIST] = 'L',
                                 [KC_INFORMER_RELIST] = 'R', [KC_INFORMER_RESYNC] = 'S'};
  size_t n = strlen(CAUSES);
  snprintf(CAUSES + n, sizeof CAUSES - n, "%c%c%c%.*s;", *(const char *)ud,
           letters[kc_informer_cause(inf)], what, (int)kc_obj_name(o).len, kc_obj_name(o).ptr);
}
static void cause_add(void *ud, kc_informer *inf, kc_obj *obj) { note_cause(ud, inf, '+', obj); }
static void cause_update(void *ud, kc_informer *inf, kc_obj *old, kc_obj *obj) {
  note_cause(ud, inf, old == obj ? '=' : '~', obj);
}
static void cause_delete(void *ud, kc_informer *inf, kc_obj *obj) { note_cause(ud, inf, '-', obj); }

static bool causes_have(void *text) { return strstr(CAUSES, text) != NULL; }
static bool listed_again(void *before) { return fakeapi_lists(F.srv, "") > *(unsigned *)before; }

/* Consumers rank work by why they hear of an object (controller.h
 * "Priorities"): the first list and the replay to a late handler are LIST,
 * watch events EVENT, a list after a 410 RELIST, the periodic resync
 * RESYNC; outside a handler the answer is EVENT. */
static void test_cause_of_each_delivery(void **state) {
  CAUSES[0] = 0;
  kc_informer_spec sp = spec_of(NULL, 0);
  new_informer(&sp);
  static const char early = 'A', late = 'B';
  kc_informer_handler h = {cause_add, cause_update, cause_delete, (void *)&early, NULL};
  assert_true(kc_informer_add_handler(F.inf, &h) > 0);
  fakeapi_put(F.srv, "configmaps", "ns", "one", NULL, NULL);
  start_and_sync();
  assert_string_equal(CAUSES, "AL+one;");
  fakeapi_put(F.srv, "configmaps", "ns", "two", NULL, NULL);
  fakeapi_delete(F.srv, "configmaps", "ns", "two");
  run_until(causes_have, "AE-two;", "the delete event");
  assert_string_equal(CAUSES, "AL+one;AE+two;AE-two;");
  assert_int_equal(kc_informer_cause(F.inf), KC_INFORMER_EVENT);

  /* The change after the 410 reaches the informer through the relist,
   * unless a watch request was already waiting and took it as an event:
   * then try again (the marker shows every earlier delivery is done). */
  CAUSES[0] = 0;
  for (int i = 0; !strstr(CAUSES, "AR~one;"); i++) {
    assert_true(i < 20);
    char data[32], marker[24], want[40];
    snprintf(data, sizeof data, "\"data\":{\"n\":\"%d\"}", i);
    snprintf(marker, sizeof marker, "marker%d", i);
    snprintf(want, sizeof want, "AE+%s;", marker);
    unsigned lists = fakeapi_lists(F.srv, "");
    fakeapi_expire(F.srv);
    fakeapi_put(F.srv, "configmaps", "ns", "one", NULL, data);
    run_until(listed_again, &lists, "a relist");
    fakeapi_put(F.srv, "configmaps", "ns", marker, NULL, NULL);
    run_until(causes_have, want, "an event after the relist");
  }

  CAUSES[0] = 0;
  kc_informer_handler h2 = {cause_add, NULL, NULL, (void *)&late, NULL};
  assert_true(kc_informer_add_handler(F.inf, &h2) > 0);
  assert_true(strstr(CAUSES, "BL+one;") && strstr(CAUSES, "BL+marker0;"));
  assert_int_equal(kc_informer_cause(F.inf), KC_INFORMER_EVENT);

  CAUSES[0] = 0;
  kc_informer_spec resyncing = sp;
  resyncing.resync_ms = 20;
  kc_informer_rebind(F.inf, &resyncing);
  run_until(causes_have, "AS=one;", "a resync");
  fakeapi_put(F.srv, "configmaps", "ns", "four", NULL, NULL);
  run_until(causes_have, "AE+four;", "an event after the resync");
}

/* ---- namespaces: one part each ------------------------------------------- */

static bool saw_events(void *ud) { return ((const recorder *)ud)->adds >= 4; }

static bool support_known(void *ud) {
  return kc_informer_shard_support(F.inf) != KC_SHARD_SUPPORT_UNKNOWN;
}

/* A shardSelector goes to every part; a server that does not know it
 * (fakeapi ignores unknown parameters) answers without shardInfo, so the
 * support is NONE and every part caches its whole namespace. The selector
 * stays readable; "" clears it. */
static void test_shard_selector_every_part(void **state) {
  static const char *const nss[] = {"a", "b"};
  kc_informer_spec sp = spec_of(nss, 2);
  new_informer(&sp);
  assert_int_equal(kc_informer_shard_support(F.inf), KC_SHARD_SUPPORT_UNKNOWN);
  assert_null(kc_informer_shard_selector(F.inf));
  const char *sel = "shardRange(object.metadata.namespace, '0x0000000000000000', '0x0000000000000001')";
  assert_int_equal(kc_informer_set_shard_selector(F.inf, sel), 0);
  assert_string_equal(kc_informer_shard_selector(F.inf), sel);
  fakeapi_put(F.srv, "configmaps", "a", "x", NULL, NULL);
  fakeapi_put(F.srv, "configmaps", "b", "y", NULL, NULL);
  start_and_sync();
  run_until(support_known, NULL, "the shard support");
  assert_int_equal(kc_informer_shard_support(F.inf), KC_SHARD_SUPPORT_NONE);
  kc_obj_vec v = {0};
  assert_int_equal(kc_informer_list(F.inf, (kc_str){0}, NULL, &v), 2); /* everything */
  kc_obj_vec_release(&v);
  assert_int_equal(kc_informer_set_shard_selector(F.inf, ""), 0);
  assert_null(kc_informer_shard_selector(F.inf));
}

/* Each namespace of the spec is its own part: the server sees one LIST per
 * namespace (none of all namespaces, none of others), objects of other
 * namespaces never arrive, get/list/by_index read across the parts. */
static void test_one_part_per_namespace(void **state) {
  LOG[0] = 0;
  static const char *const nss[] = {"a", "b"};
  static const kc_index_spec byapp = {.name = "byApp", .path = "metadata.labels.app"};
  kc_informer_spec sp = spec_of(nss, 2);
  sp.indexes = &byapp;
  sp.nindexes = 1;
  new_informer(&sp);
  recorder r = {.tag = 'R'};
  subscribe(&r);
  fakeapi_put(F.srv, "configmaps", "a", "x", "\"labels\":{\"app\":\"web\"}", NULL);
  fakeapi_put(F.srv, "configmaps", "b", "y", "\"labels\":{\"app\":\"web\"}", NULL);
  fakeapi_put(F.srv, "configmaps", "c", "z", "\"labels\":{\"app\":\"web\"}", NULL);
  start_and_sync();
  assert_int_equal(fakeapi_lists(F.srv, "a"), 1);
  assert_int_equal(fakeapi_lists(F.srv, "b"), 1);
  assert_int_equal(fakeapi_lists(F.srv, "c"), 0);
  assert_int_equal(fakeapi_lists(F.srv, ""), 0);

  fakeapi_put(F.srv, "configmaps", "c", "z2", NULL, NULL); /* not watched */
  fakeapi_put(F.srv, "configmaps", "b", "y2", NULL, NULL);
  fakeapi_put(F.srv, "configmaps", "a", "x2", NULL, NULL);
  run_until(saw_events, &r, "the watch events of both parts");
  assert_null(strstr(LOG, "/c"));
  assert_null(strstr(LOG, "R+c/"));

  kc_obj *o = kc_informer_get(F.inf, kc_str_c("a"), kc_str_c("x"));
  assert_non_null(o);
  kc_obj_unref(o);
  assert_null(kc_informer_get(F.inf, kc_str_c("b"), kc_str_c("x")));
  assert_null(kc_informer_get(F.inf, kc_str_c("c"), kc_str_c("z")));

  kc_obj_vec v = {0};
  assert_int_equal(kc_informer_list(F.inf, (kc_str){0}, NULL, &v), 4); /* every part */
  kc_obj_vec_clear(&v);
  assert_int_equal(kc_informer_list(F.inf, kc_str_c("b"), NULL, &v), 2);
  kc_obj_vec_clear(&v);
  assert_int_equal(kc_informer_list(F.inf, kc_str_c("c"), NULL, &v), 0);
  kc_obj_vec_clear(&v);
  assert_int_equal(kc_informer_by_index(F.inf, "byApp", kc_str_c("web"), &v), 2); /* a/x, b/y */
  kc_obj_vec_release(&v);
}

/* ---- observed resourceVersion ------------------------------------------------- */

static unsigned progress_calls, progress_lists;

static void count_progress(void *ud, kc_informer *inf, bool relisted) {
  progress_calls++;
  progress_lists += relisted;
}

static uint64_t rv_of(const char *ns, const char *name) {
  kc_obj *o = kc_informer_get(F.inf, kc_str_c(ns), kc_str_c(name));
  assert_non_null(o);
  char buf[32];
  snprintf(buf, sizeof buf, "%.*s", (int)kc_obj_resource_version(o).len, kc_obj_resource_version(o).ptr);
  kc_obj_unref(o);
  return strtoull(buf, NULL, 10);
}

static bool progressed(void *ud) { return progress_calls >= *(unsigned *)ud; }

/* What read your own writes compares with (kc_informer_observed_rv): the
 * part's last list, then each watch event, each one told to on_progress
 * after the handlers ran (relisted for a list); a namespace no part
 * watches has none, also when the informer has a single part. */
static void test_observed_resource_version(void **state) {
  static const char *const nss[] = {"a"};
  kc_informer_spec sp = spec_of(nss, 1);
  new_informer(&sp);
  progress_calls = progress_lists = 0;
  kc_informer_handler h = {.on_progress = count_progress};
  assert_true(kc_informer_add_handler(F.inf, &h) > 0);
  uint64_t rv = 7;
  assert_int_equal(kc_informer_observed_rv(F.inf, kc_str_c("a"), &rv), 0); /* nothing yet */
  fakeapi_put(F.srv, "configmaps", "a", "x", NULL, NULL);
  start_and_sync();
  assert_int_equal(progress_lists, 1);
  assert_int_equal(kc_informer_observed_rv(F.inf, kc_str_c("a"), &rv), 1);
  assert_true(rv >= rv_of("a", "x"));
  unsigned want = progress_calls + 1;
  fakeapi_put(F.srv, "configmaps", "a", "x", NULL, "\"data\":{\"k\":\"v\"}");
  run_until(progressed, &want, "the event's progress");
  assert_int_equal(progress_lists, 1);
  assert_int_equal(kc_informer_observed_rv(F.inf, kc_str_c("a"), &rv), 1);
  assert_int_equal(rv, rv_of("a", "x"));
  assert_int_equal(kc_informer_observed_rv(F.inf, kc_str_c("c"), &rv), -ENOENT);
}

/* ---- synced -------------------------------------------------------------------- */

static unsigned synced_calls;
static void count_synced(void *ud, kc_informer *inf) {
  assert_ptr_equal(ud, &synced_calls);
  assert_true(kc_informer_synced(inf)); /* told only when every part is */
  synced_calls++;
}

static bool saw_a(void *ud) { return ((const recorder *)ud)->adds >= 1; }
static bool told(void *ud) { return synced_calls >= 1; }
static bool relisted(void *ud) {
  return fakeapi_lists(F.srv, "a") + fakeapi_lists(F.srv, "b") >= 3;
}

/* kc_informer_on_synced runs once, when the last part delivered its first
 * complete list: not when the first of two parts did, and not again when a
 * part relists (410 Gone). */
static void test_on_synced_once_all_parts(void **state) {
  LOG[0] = 0;
  synced_calls = 0;
  static const char *const nss[] = {"a", "b"};
  kc_informer_spec sp = spec_of(nss, 2);
  new_informer(&sp);
  kc_informer_on_synced(F.inf, count_synced, &synced_calls);
  recorder r = {.tag = 'R'};
  subscribe(&r);
  fakeapi_put(F.srv, "configmaps", "a", "x", NULL, NULL);
  fakeapi_put(F.srv, "configmaps", "b", "y", NULL, NULL);
  fakeapi_hold(F.srv, "b", true);
  assert_int_equal(kc_informer_start(F.inf), 0);
  run_until(saw_a, &r, "part a's list");
  assert_string_equal(LOG, "R+a/x;");
  assert_false(kc_informer_synced(F.inf));
  assert_int_equal(synced_calls, 0);

  fakeapi_hold(F.srv, "b", false);
  run_until(told, NULL, "on_synced");
  assert_int_equal(synced_calls, 1);
  assert_true(kc_informer_synced(F.inf));

  /* A relist (the next watch gets 410) delivers a complete list again. */
  fakeapi_expire(F.srv);
  fakeapi_put(F.srv, "configmaps", "a", "x", NULL, "\"data\":{}"); /* wakes part a's watch */
  run_until(relisted, NULL, "a relist");
  fakeapi_put(F.srv, "configmaps", "a", "after", NULL, NULL);
  fakeapi_put(F.srv, "configmaps", "b", "after", NULL, NULL);
  wait_log("R+a/after;");
  wait_log("R+b/after;");
  assert_int_equal(synced_calls, 1);
}

/* ---- stats ------------------------------------------------------------------------ */

static bool saw_two_updates(void *ud) { return ((const recorder *)ud)->updates >= 2; }

/* kc_informer_stats_get sums the parts (objects, lists, watch events) and
 * reports the resourceVersion the first part (first namespace) saw last. */
static void test_stats_sum_parts(void **state) {
  LOG[0] = 0;
  static const char *const nss[] = {"a", "b"};
  kc_informer_spec sp = spec_of(nss, 2);
  new_informer(&sp);
  recorder r = {.tag = 'R'};
  subscribe(&r);
  fakeapi_put(F.srv, "configmaps", "a", "x", NULL, NULL);
  fakeapi_put(F.srv, "configmaps", "b", "y", NULL, NULL);
  fakeapi_put(F.srv, "configmaps", "b", "w", NULL, NULL);
  start_and_sync();
  uint64_t rv_a = fakeapi_put(F.srv, "configmaps", "a", "x", NULL, "\"data\":{}");
  uint64_t rv_b = fakeapi_put(F.srv, "configmaps", "b", "y", NULL, "\"data\":{}");
  assert_true(rv_b > rv_a);
  run_until(saw_two_updates, &r, "both updates");

  kc_informer_stats st;
  kc_informer_stats_get(F.inf, &st);
  assert_int_equal(st.objects, 3);
  assert_true(st.bytes > 0);
  assert_int_equal(st.lists, 2);
  assert_int_equal(st.events, 2);
  assert_int_equal(st.relists, 0);
  char want[32];
  snprintf(want, sizeof want, "%llu", (unsigned long long)rv_a);
  assert_string_equal(st.resource_version, want);
  assert_string_equal(kc_informer_resource(F.inf), "configmaps");
}

int main(void) {
  kc_log_set_level(KC_LOG_ERROR);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_fanout_in_registration_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_null_callbacks_skipped, setup, teardown),
      cmocka_unit_test_setup_teardown(test_late_subscriber_replay, setup, teardown),
      cmocka_unit_test_setup_teardown(test_resync_updates_with_same_object, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_resync_until_rebind, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cause_of_each_delivery, setup, teardown),
      cmocka_unit_test_setup_teardown(test_one_part_per_namespace, setup, teardown),
      cmocka_unit_test_setup_teardown(test_observed_resource_version, setup, teardown),
      cmocka_unit_test_setup_teardown(test_shard_selector_every_part, setup, teardown),
      cmocka_unit_test_setup_teardown(test_on_synced_once_all_parts, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stats_sum_parts, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
