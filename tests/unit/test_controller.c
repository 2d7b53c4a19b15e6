/* SPDX-License-Identifier: Apache-2.0 */
/* Specification of daemon/runtime/controller.{c,h}: real informers on a uv loop fed
 * by the in-memory API server of tests/unit/fakeapi.h, a controller on
 * them running the sample plugin (tests/unit/plugins/sample.c, built at
 * set-up like an out-of-tree plugin), observed through its workqueue. What
 * it pins down (docs/config.md "controllers", "predicates", "watches"):
 *  - `for` events (add, update, delete) enqueue the object's own key;
 *  - `owns` events enqueue the owner named by the ownerReference with
 *    controller: true whose kind and API group are the `for` kind's (only
 *    that one); an update that changed the owner also wakes the former one;
 *    adds and deletes of owned objects are observed in the owner's
 *    expectations; a cluster-scoped `for` kind (discovery's scope) is named
 *    "name" by owned and watched objects of any namespace;
 *  - `watches` mappings label, annotation (name or namespace/name), field
 *    (every value at the path) and index (the `for` objects whose index
 *    holds the watched object's name, in its namespace);
 *  - predicates filter updates only (adds and deletes pass), any listed one
 *    passing is enough; a resync (on_update with old == new) meets them
 *    like any update, as in controller-runtime, so with predicates it is
 *    dropped (nothing changed) and without predicates it passes;
 *  - result to queue (kc_controller_apply_result, also tested alone):
 *    done forgets the key, requeue and error go back rate-limited (errors
 *    counted), requeue-after waits its delay with the failure history
 *    forgotten;
 *  - priorities: the cache replayed to a new controller is queued LOW,
 *    watch events NORMAL, an operator's requeue at its level; results
 *    requeue at their priority or at the level the key ran at;
 *  - while paused nothing is dispatched and keys accumulate, deduplicated;
 *    activation dispatches each once; a controller made on a synced
 *    informer starts with every cached `for` object queued.
 * Queue contents are read while the controller is paused (it never
 * dispatches then): each step writes its objects, then a marker that maps to
 * "ns/markerN" through the same watch, and compares the keys queued until
 * the marker arrived (events of one watch arrive in order).
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/clock.h"
#include "client/apiclient.h"
#include "apisim_child.h"
#include "runtime/controller.h"
#include "fakeapi.h"
#include "cache/informer.h"
#include "base/log.h"
#include "host/plugin_host.h"
#include "lease/sharding.h"
#include "lease/shardsel.h"
#include "testutil.h"

#define WAIT_MS 8000
#define MAXCTL 4

/* ---- the cluster: PodSets (the `for` kind), Pods, ConfigMaps ------------ */

static const fakeapi_resource RESOURCES[] = {
    {"/apis/demo.kctrld.io/v1", "podsets", "demo.kctrld.io/v1", "PodSet"},
    {"/api/v1", "pods", "v1", "Pod"},
    {"/api/v1", "configmaps", "v1", "ConfigMap"},
};
enum { INF_PODSETS, INF_PODS, INF_CONFIGMAPS, NINF };
static const kc_resource_ref REFS[NINF] = {
    {"/apis/demo.kctrld.io/v1", "podsets", true},
    {"/api/v1", "pods", true},
    {"/api/v1", "configmaps", true},
};
static const kc_index_spec BY_CONFIGMAP = {.name = "byConfigMap", .path = "spec.configMap"};

static kc_informer_spec informer_spec(int which) {
  static const char *const kinds[NINF][2] = {
      {"demo.kctrld.io/v1", "PodSet"}, {"v1", "Pod"}, {"v1", "ConfigMap"}};
  kc_informer_spec s = {.api_version = kinds[which][0], .kind = kinds[which][1],
                        .group = which == INF_PODSETS ? "demo.kctrld.io" : "",
                        .label_selector = "", .field_selector = "", .page_size = 500,
                        .watch_timeout_ms = 300000, .streaming_list = KC_STREAMING_OFF,
                        .identity = kinds[which][1]};
  if (which == INF_PODSETS) s.indexes = &BY_CONFIGMAP, s.nindexes = 1;
  return s;
}

static kc_controller_spec controller_spec(const char *name) {
  return (kc_controller_spec){
      .name = name,
      .plugin = "sample.so",
      .for_ = {.api_version = "demo.kctrld.io/v1", .kind = "PodSet", .informer = INF_PODSETS},
      .workers = 4,
      .reconcile_timeout_ms = 60000,
      /* Rate-limited keys wait a minute: they stay visible in the heap. */
      .rate_limit = {.base_delay_ms = 60000, .max_delay_ms = 60000, .qps = 1000, .burst = 1000},
  };
}

/* ---- fixture ----------------------------------------------------------------- */

static char plugin_dir[64], plugin_path[128];
static kc_plugin *plugin;

static int setup_group(void **state) {
  snprintf(plugin_dir, sizeof plugin_dir, "/tmp/kc-test-controller-XXXXXX");
  if (!mkdtemp(plugin_dir)) return -1;
  snprintf(plugin_path, sizeof plugin_path, "%s/sample.so", plugin_dir);
  char cmd[512];
  const char *cc = getenv("CC") ? getenv("CC") : "cc";
  snprintf(cmd, sizeof cmd,
           "%s -std=c11 -shared -fPIC -fvisibility=hidden -Wall -Wextra -Werror -Iinclude "
           "-o %s tests/unit/plugins/sample.c",
           cc, plugin_path);
  if (system(cmd) != 0 || chmod(plugin_path, 0755) != 0) return -1;
  char err[512];
  if (kc_plugin_load(plugin_path, &plugin, err, sizeof err) != 0) {
    fprintf(stderr, "# %s\n", err);
    return -1;
  }
  return 0;
}

static int teardown_group(void **state) {
  kc_plugin_host_unload_all();
  unlink(plugin_path);
  rmdir(plugin_dir);
  return 0;
}

/* One controller and the keys read from its queue. */
typedef struct slot {
  kc_controller *c;
  kc_controller_spec spec;
  kc_expectations *exp; /* its plugin instance's */
  char seen[64][64];    /* keys queued since the last step, sorted */
  size_t nseen;
} slot;

static struct {
  uv_loop_t loop;
  uv_timer_t tick; /* keeps uv_run(UV_RUN_ONCE) from blocking */
  fakeapi *srv;
  kc_api *api;
  kc_kube_creds creds;
  char url[64];
  kc_informer_spec ispec[NINF];
  kc_resource_ref refs[NINF]; /* REFS; a test may make PodSets cluster-scoped */
  kc_informer *inf[NINF];
  slot ctl[MAXCTL];
  size_t nctl;
  unsigned stopped;
  unsigned marker;
} F;

static void on_tick(uv_timer_t *t) {}

static int setup(void **state) {
  memset(&F, 0, sizeof F);
  if (uv_loop_init(&F.loop) != 0 || uv_timer_init(&F.loop, &F.tick) != 0) return -1;
  uv_timer_start(&F.tick, on_tick, 5, 5);
  F.srv = fakeapi_start(RESOURCES, NINF);
  if (!F.srv) return -1;
  snprintf(F.url, sizeof F.url, "%s", fakeapi_url(F.srv));
  F.creds = (kc_kube_creds){.server = F.url, .token = "t"};
  if (kc_api_new(&F.loop, &F.creds, &F.api) != 0) return -1;
  for (int i = 0; i < NINF; i++) F.ispec[i] = informer_spec(i), F.refs[i] = REFS[i];
  return 0;
}

static void on_stopped(void *ud) { F.stopped++; }

static int teardown(void **state) {
  for (size_t i = 0; i < F.nctl; i++) kc_controller_stop(F.ctl[i].c, 1000, on_stopped, NULL);
  uint64_t end = tu_mono_ms() + WAIT_MS;
  while (F.stopped < F.nctl && tu_mono_ms() < end) uv_run(&F.loop, UV_RUN_ONCE);
  for (int i = 0; i < NINF; i++) kc_informer_close(F.inf[i]);
  kc_api_close(F.api);
  fakeapi_stop(F.srv);
  uv_close((uv_handle_t *)&F.tick, NULL);
  uv_run(&F.loop, UV_RUN_DEFAULT);
  return F.stopped == F.nctl && uv_loop_close(&F.loop) == 0 ? 0 : -1;
}

/* Runs the loop until cond(ud) holds; fails the test after WAIT_MS. */
static void run_until(bool (*cond)(void *), void *ud, const char *what) {
  uint64_t end = tu_mono_ms() + WAIT_MS;
  while (!cond(ud)) {
    if (tu_mono_ms() > end) fail_msg("timed out waiting for %s", what);
    uv_run(&F.loop, UV_RUN_ONCE);
  }
}

static bool all_synced(void *ud) {
  for (int i = 0; i < NINF; i++)
    if (!kc_informer_synced(F.inf[i])) return false;
  return true;
}

/* Starts the three informers (with the objects the server holds) and waits
 * until they synced. */
static void start_informers(void) {
  for (int i = 0; i < NINF; i++) {
    assert_int_equal(kc_informer_new(&F.loop, F.api, NULL, &F.ispec[i], &F.refs[i], &F.inf[i]), 0);
    assert_int_equal(kc_informer_start(F.inf[i]), 0);
  }
  run_until(all_synced, NULL, "the informers to sync");
}

/* A paused controller on the informers; its spec is *spec with owns and
 * watches (borrowed: static or alive for the test). */
static slot *new_controller(const kc_controller_spec *spec) {
  assert_true(F.nctl < MAXCTL);
  slot *s = &F.ctl[F.nctl];
  s->spec = *spec;
  kc_plugin_instance *inst = NULL;
  char err[512];
  assert_int_equal(kc_plugin_instance_new(plugin, spec->name, NULL, &inst, err, sizeof err), 0);
  s->exp = kc_plugin_instance_expectations(inst);
  assert_int_equal(kc_controller_new(&F.loop, &s->spec, F.inf, inst, &s->c), 0);
  F.nctl++;
  return s;
}

/* ---- reading the queue of a paused controller ------------------------------ */

static int cmp_key(const void *a, const void *b) { return strcmp(a, b); }

static void drain(slot *s) {
  kc_workqueue *q = kc_controller_queue(s->c);
  const char *key;
  while (kc_workqueue_get(q, &key) == KC_WQ_KEY) {
    char copy[64];
    snprintf(copy, sizeof copy, "%s", key);
    kc_workqueue_forget(q, copy);
    assert_int_equal(kc_workqueue_done(q, copy), 0);
    bool dup = false;
    for (size_t i = 0; i < s->nseen; i++) dup = dup || strcmp(s->seen[i], copy) == 0;
    if (!dup && s->nseen < 64) snprintf(s->seen[s->nseen++], sizeof s->seen[0], "%s", copy);
  }
  qsort(s->seen, s->nseen, sizeof s->seen[0], cmp_key);
}

typedef struct key_wait {
  slot *s;
  const char *key;
} key_wait;

static bool key_seen(void *ud) {
  key_wait *w = ud;
  drain(w->s);
  for (size_t i = 0; i < w->s->nseen; i++)
    if (strcmp(w->s->seen[i], w->key) == 0) return true;
  return false;
}

/* "k1,k2" of the keys seen (sorted), without the marker; then forgets them. */
static const char *take(slot *s, const char *marker) {
  static char out[2048];
  out[0] = 0;
  for (size_t i = 0; i < s->nseen; i++) {
    if (marker && strcmp(s->seen[i], marker) == 0) continue;
    size_t n = strlen(out);
    snprintf(out + n, sizeof out - n, "%s%s", n ? "," : "", s->seen[i]);
  }
  s->nseen = 0;
  return out;
}

/* Writes a marker on informer `via` that maps to ns/markerN (markerN when
 * PodSets are cluster-scoped) for every controller, waits until every
 * controller queued it and returns the keys queued by controller s before
 * it. */
static const char *settle_on(int via, slot *s) {
  char marker_key[32], name[32], meta[160];
  unsigned n = ++F.marker;
  bool namespaced = F.refs[INF_PODSETS].namespaced;
  snprintf(marker_key, sizeof marker_key, "%smarker%u", namespaced ? "ns/" : "", n);
  snprintf(name, sizeof name, "marker%u", n);
  switch (via) {
  case INF_PODSETS: fakeapi_put(F.srv, "podsets", namespaced ? "ns" : "", name, NULL, NULL); break;
  case INF_PODS: {
    char pod[48];
    snprintf(pod, sizeof pod, "%s-pod", name);
    snprintf(meta, sizeof meta,
             "\"ownerReferences\":[{\"apiVersion\":\"demo.kctrld.io/v1\",\"kind\":\"PodSet\","
             "\"name\":\"%s\",\"uid\":\"u\",\"controller\":true}]",
             name);
    fakeapi_put(F.srv, "pods", "ns", pod, meta, NULL);
    break;
  }
  case INF_CONFIGMAPS: {
    char cm[48];
    snprintf(cm, sizeof cm, "%s-cm", name);
    snprintf(meta, sizeof meta, "\"labels\":{\"podset\":\"%s\"}", name);
    fakeapi_put(F.srv, "configmaps", "ns", cm, meta, NULL);
    break;
  }
  }
  for (size_t i = 0; i < F.nctl; i++) {
    key_wait w = {&F.ctl[i], marker_key};
    run_until(key_seen, &w, marker_key);
  }
  return take(s, marker_key);
}

#define OWNER_REF(api_version, kind, name, controller)                                            \
  "{\"apiVersion\":\"" api_version "\",\"kind\":\"" kind "\",\"name\":\"" name                    \
  "\",\"uid\":\"u-" name "\"" controller "}"
#define CONTROLLER ",\"controller\":true"
#define NOT_CONTROLLER ",\"controller\":false"

/* ---- for ----------------------------------------------------------------------- */

/* `for` events enqueue the object's own key namespace/name: each object
 * cached when the controller starts, then adds, updates and deletes. */
static void test_for_events_enqueue_own_key(void **state) {
  fakeapi_put(F.srv, "podsets", "ns", "cached", NULL, NULL);
  fakeapi_put(F.srv, "podsets", "other", "cached", NULL, NULL);
  start_informers();
  kc_controller_spec sp = controller_spec("for");
  slot *s = new_controller(&sp);
  assert_string_equal(settle_on(INF_PODSETS, s), "ns/cached,other/cached");
  fakeapi_put(F.srv, "podsets", "ns", "b", NULL, NULL);
  assert_string_equal(settle_on(INF_PODSETS, s), "ns/b");
  fakeapi_put(F.srv, "podsets", "other", "cached", NULL, "\"spec\":{\"replicas\":2}");
  assert_string_equal(settle_on(INF_PODSETS, s), "other/cached");
  fakeapi_delete(F.srv, "podsets", "ns", "b");
  assert_string_equal(settle_on(INF_PODSETS, s), "ns/b");
  assert_string_equal(kc_controller_name(s->c), "for");
  assert_ptr_equal(kc_controller_spec_get(s->c), &s->spec);
}

/* ---- owns ------------------------------------------------------------------------ */

static const kc_owns_spec OWNS_PODS[] = {{.ref = {.api_version = "v1", .kind = "Pod", .informer = INF_PODS}}};

static void put_pod(const char *name, const char *refs) {
  char meta[1024];
  snprintf(meta, sizeof meta, "\"ownerReferences\":[%s]", refs);
  fakeapi_put(F.srv, "pods", "ns", name, meta, NULL);
}

/* An owned object enqueues its controller owner: the ownerReference with
 * controller: true whose kind and API group (any version) are the `for`
 * kind's, in the object's namespace. Other references are ignored. */
static void test_owns_enqueue_controller_owner(void **state) {
  start_informers();
  kc_controller_spec sp = controller_spec("owns");
  sp.owns = OWNS_PODS;
  sp.nowns = 1;
  slot *s = new_controller(&sp);
  assert_string_equal(settle_on(INF_PODS, s), "");

  put_pod("p1", OWNER_REF("demo.kctrld.io/v1", "PodSet", "web", CONTROLLER));
  assert_string_equal(settle_on(INF_PODS, s), "ns/web");
  put_pod("p2", OWNER_REF("demo.kctrld.io/v1", "PodSet", "web2", NOT_CONTROLLER));
  put_pod("p3", OWNER_REF("demo.kctrld.io/v1", "PodSet", "web3", ""));
  put_pod("p4", OWNER_REF("apps/v1", "ReplicaSet", "rs", CONTROLLER));
  put_pod("p5", OWNER_REF("other.io/v1", "PodSet", "foreign", CONTROLLER));
  assert_string_equal(settle_on(INF_PODS, s), "");
  /* Another version of the same group is the same kind. */
  put_pod("p6", OWNER_REF("demo.kctrld.io/v2", "PodSet", "v2", CONTROLLER));
  /* Only the controller reference counts, wherever it is in the list. */
  put_pod("p7", OWNER_REF("demo.kctrld.io/v1", "PodSet", "plain", "") ","
                OWNER_REF("demo.kctrld.io/v1", "PodSet", "boss", CONTROLLER));
  assert_string_equal(settle_on(INF_PODS, s), "ns/boss,ns/v2");

  /* An owner change wakes the new and the former owner. */
  put_pod("p1", OWNER_REF("demo.kctrld.io/v1", "PodSet", "db", CONTROLLER));
  assert_string_equal(settle_on(INF_PODS, s), "ns/db,ns/web");
  fakeapi_delete(F.srv, "pods", "ns", "p1");
  assert_string_equal(settle_on(INF_PODS, s), "ns/db");
}

/* Adds and deletes of owned objects are observed in the owner's
 * expectations (plugin.h expect_creations / expect_deletions). */
static void test_owns_observe_expectations(void **state) {
  start_informers();
  kc_controller_spec sp = controller_spec("owns");
  sp.owns = OWNS_PODS;
  sp.nowns = 1;
  slot *s = new_controller(&sp);
  uint64_t now = 0; /* far within the TTL of records stamped 0 */
  assert_int_equal(kc_expectations_set(s->exp, "ns/web", 1, 1, now), 0);
  assert_false(kc_expectations_satisfied(s->exp, "ns/web", now));
  put_pod("p1", OWNER_REF("demo.kctrld.io/v1", "PodSet", "web", CONTROLLER));
  assert_string_equal(settle_on(INF_PODS, s), "ns/web");
  assert_false(kc_expectations_satisfied(s->exp, "ns/web", now)); /* the deletion is due */
  put_pod("p1", OWNER_REF("demo.kctrld.io/v1", "PodSet", "web", CONTROLLER) ","
                OWNER_REF("v1", "Node", "n", ""));
  assert_string_equal(settle_on(INF_PODS, s), "ns/web");
  assert_false(kc_expectations_satisfied(s->exp, "ns/web", now)); /* an update is neither */
  fakeapi_delete(F.srv, "pods", "ns", "p1");
  assert_string_equal(settle_on(INF_PODS, s), "ns/web");
  assert_true(kc_expectations_satisfied(s->exp, "ns/web", now));
}

/* ---- watches ------------------------------------------------------------------------ */

static const kc_watch_spec WATCH_CONFIGMAPS[] = {
    {.ref = {.api_version = "v1", .kind = "ConfigMap", .informer = INF_CONFIGMAPS},
     .mapping = KC_MAP_LABEL, .key = "podset"},
    {.ref = {.api_version = "v1", .kind = "ConfigMap", .informer = INF_CONFIGMAPS},
     .mapping = KC_MAP_ANNOTATION, .key = "kctrld.io/podset"},
    {.ref = {.api_version = "v1", .kind = "ConfigMap", .informer = INF_CONFIGMAPS},
     .mapping = KC_MAP_FIELD, .key = "targets[]"},
    {.ref = {.api_version = "v1", .kind = "ConfigMap", .informer = INF_CONFIGMAPS},
     .mapping = KC_MAP_INDEX, .key = "byConfigMap"},
};

/* Each mapping of docs/config.md "watches" turns an event on a watched
 * object into `for` keys; an object no mapping names enqueues nothing; an
 * update that changed the mapped value wakes the former key too. */
static void test_watches_mappings(void **state) {
  fakeapi_put(F.srv, "podsets", "ns", "uses-cfg", NULL, "\"spec\":{\"configMap\":\"cfg\"}");
  fakeapi_put(F.srv, "podsets", "other", "uses-cfg-elsewhere", NULL, "\"spec\":{\"configMap\":\"cfg\"}");
  start_informers();
  kc_controller_spec sp = controller_spec("watches");
  sp.watches = WATCH_CONFIGMAPS;
  sp.nwatches = 4;
  slot *s = new_controller(&sp);
  /* its `for` objects, replayed at the start */
  assert_string_equal(settle_on(INF_CONFIGMAPS, s), "ns/uses-cfg,other/uses-cfg-elsewhere");

  /* label KEY: the for object named by the label, same namespace */
  fakeapi_put(F.srv, "configmaps", "ns", "l1", "\"labels\":{\"podset\":\"web\"}", NULL);
  assert_string_equal(settle_on(INF_CONFIGMAPS, s), "ns/web");
  /* annotation KEY: a name (same namespace) or namespace/name */
  fakeapi_put(F.srv, "configmaps", "ns", "a1", "\"annotations\":{\"kctrld.io/podset\":\"db\"}", NULL);
  fakeapi_put(F.srv, "configmaps", "ns", "a2", "\"annotations\":{\"kctrld.io/podset\":\"far/away\"}",
              NULL);
  assert_string_equal(settle_on(INF_CONFIGMAPS, s), "far/away,ns/db");
  /* field PATH: every value at the path */
  fakeapi_put(F.srv, "configmaps", "ns", "f1", NULL, "\"targets\":[\"t1\",\"t2\"]");
  assert_string_equal(settle_on(INF_CONFIGMAPS, s), "ns/t1,ns/t2");
  /* index NAME: the for objects whose index holds this name, this namespace */
  fakeapi_put(F.srv, "configmaps", "ns", "cfg", NULL, NULL);
  assert_string_equal(settle_on(INF_CONFIGMAPS, s), "ns/uses-cfg");
  /* nothing maps */
  fakeapi_put(F.srv, "configmaps", "ns", "plain", "\"labels\":{\"app\":\"web\"}",
              "\"data\":{\"podset\":\"web\"}");
  assert_string_equal(settle_on(INF_CONFIGMAPS, s), "");
  /* moved from web to api: both */
  fakeapi_put(F.srv, "configmaps", "ns", "l1", "\"labels\":{\"podset\":\"api\"}", NULL);
  assert_string_equal(settle_on(INF_CONFIGMAPS, s), "ns/api,ns/web");
  fakeapi_delete(F.srv, "configmaps", "ns", "l1");
  assert_string_equal(settle_on(INF_CONFIGMAPS, s), "ns/api");
}

/* ---- a cluster-scoped `for` kind -------------------------------------------------------- */

/* When discovery says the `for` kind is cluster-scoped (a Namespace owning
 * ConfigMaps), owned and watched objects of any namespace name the owner's
 * key "name", never "namespace/name"; the owner's expectations are observed
 * under that key; a watched annotation "namespace/name" names nothing; an
 * index mapping is not limited to the watched object's namespace. */
static void test_cluster_scoped_owner(void **state) {
  F.refs[INF_PODSETS].namespaced = false;
  fakeapi_put(F.srv, "podsets", "", "uses-cfg", NULL, "\"spec\":{\"configMap\":\"cfg\"}");
  start_informers();
  assert_false(kc_informer_namespaced(F.inf[INF_PODSETS]));
  assert_true(kc_informer_namespaced(F.inf[INF_PODS]));
  kc_controller_spec sp = controller_spec("cluster");
  sp.owns = OWNS_PODS;
  sp.nowns = 1;
  sp.watches = WATCH_CONFIGMAPS;
  sp.nwatches = 4;
  slot *s = new_controller(&sp);
  assert_string_equal(settle_on(INF_PODSETS, s), "uses-cfg");

  /* owns: children in two namespaces, one owner key; creations observed */
  uint64_t now = 0; /* far within the TTL of records stamped 0 */
  assert_int_equal(kc_expectations_set(s->exp, "web", 2, 0, now), 0);
  char meta[512];
  snprintf(meta, sizeof meta, "\"ownerReferences\":[%s]",
           OWNER_REF("demo.kctrld.io/v1", "PodSet", "web", CONTROLLER));
  fakeapi_put(F.srv, "pods", "team-a", "child", meta, NULL);
  fakeapi_put(F.srv, "pods", "team-b", "child", meta, NULL);
  assert_string_equal(settle_on(INF_PODS, s), "web");
  assert_true(kc_expectations_satisfied(s->exp, "web", now));
  /* an update wakes the owner; deletions are observed under its key */
  fakeapi_put(F.srv, "pods", "team-a", "child", meta, "\"spec\":{}");
  assert_string_equal(settle_on(INF_PODS, s), "web");
  assert_int_equal(kc_expectations_set(s->exp, "web", 0, 2, now), 0);
  fakeapi_delete(F.srv, "pods", "team-a", "child");
  assert_string_equal(settle_on(INF_PODS, s), "web");
  assert_false(kc_expectations_satisfied(s->exp, "web", now));
  fakeapi_delete(F.srv, "pods", "team-b", "child");
  assert_string_equal(settle_on(INF_PODS, s), "web");
  assert_true(kc_expectations_satisfied(s->exp, "web", now));
  assert_int_equal(kc_expectations_count(s->exp), 0);

  /* watches: label, annotation (a name only), field, index (any namespace) */
  fakeapi_put(F.srv, "configmaps", "team-a", "l1", "\"labels\":{\"podset\":\"web\"}", NULL);
  assert_string_equal(settle_on(INF_CONFIGMAPS, s), "web");
  fakeapi_put(F.srv, "configmaps", "team-a", "a1", "\"annotations\":{\"kctrld.io/podset\":\"db\"}",
              NULL);
  fakeapi_put(F.srv, "configmaps", "team-a", "a2",
              "\"annotations\":{\"kctrld.io/podset\":\"far/away\"}", NULL);
  assert_string_equal(settle_on(INF_CONFIGMAPS, s), "db");
  fakeapi_put(F.srv, "configmaps", "team-b", "f1", NULL, "\"targets\":[\"t1\",\"t2\"]");
  assert_string_equal(settle_on(INF_CONFIGMAPS, s), "t1,t2");
  fakeapi_put(F.srv, "configmaps", "team-c", "cfg", NULL, NULL);
  assert_string_equal(settle_on(INF_CONFIGMAPS, s), "uses-cfg");
}

/* ---- predicates ------------------------------------------------------------------------- */

/* The metadata of the object "a" in the predicate tests, with one member
 * replaced by `change` (NULL: none). */
static void meta_with(char *out, size_t cap, const char *change) {
  static const char *const base[] = {
      "\"generation\":1", "\"labels\":{\"x\":\"1\"}", "\"annotations\":{\"n\":\"1\"}",
      "\"ownerReferences\":[]", "\"finalizers\":[\"f\"]", NULL};
  out[0] = 0;
  bool deletion = change && strncmp(change, "\"deletionTimestamp\"", 19) == 0;
  for (size_t i = 0; base[i]; i++) {
    const char *m = base[i];
    size_t key = (size_t)(strchr(m, ':') - m);
    if (change && strncmp(change, m, key + 1) == 0) m = change;
    size_t n = strlen(out);
    snprintf(out + n, cap - n, "%s%s", n ? "," : "", m);
  }
  if (deletion) {
    size_t n = strlen(out);
    snprintf(out + n, cap - n, ",%s", change);
  }
}

typedef struct pred_case {
  const char *name;
  unsigned preds;
  const char *passes[3];  /* metadata changes that pass */
  const char *dropped[3]; /* metadata changes that are dropped */
  bool status_only_passes; /* a change outside metadata (a new resourceVersion only) */
} pred_case;

static const pred_case PRED_CASES[] = {
    {"GenerationChanged", KC_PRED_GENERATION_CHANGED, {"\"generation\":2"},
     {"\"labels\":{\"x\":\"2\"}", "\"annotations\":{\"n\":\"2\"}"}, false},
    {"LabelsChanged", KC_PRED_LABELS_CHANGED, {"\"labels\":{\"x\":\"2\"}", "\"labels\":{}"},
     {"\"generation\":2", "\"annotations\":{\"n\":\"2\"}"}, false},
    {"AnnotationsChanged", KC_PRED_ANNOTATIONS_CHANGED, {"\"annotations\":{\"n\":\"2\"}"},
     {"\"generation\":2", "\"labels\":{\"x\":\"2\"}"}, false},
    {"ResourceVersionChanged", KC_PRED_RESOURCE_VERSION_CHANGED,
     {"\"generation\":2", "\"labels\":{\"x\":\"2\"}"}, {NULL}, true},
    {"DeletionStarted", KC_PRED_DELETION_STARTED, {"\"deletionTimestamp\":\"2024-01-01T00:00:00Z\""},
     {"\"generation\":2", "\"finalizers\":[]"}, false},
    {"OwnerReferencesChanged", KC_PRED_OWNER_REFERENCES_CHANGED,
     {"\"ownerReferences\":[" OWNER_REF("v1", "Node", "n", "") "]"}, {"\"generation\":2"}, false},
    {"FinalizersChanged", KC_PRED_FINALIZERS_CHANGED, {"\"finalizers\":[]"},
     {"\"generation\":2", "\"ownerReferences\":[" OWNER_REF("v1", "Node", "n", "") "]"}, false},
    {"GenerationChanged|LabelsChanged (any one passes)",
     KC_PRED_GENERATION_CHANGED | KC_PRED_LABELS_CHANGED,
     {"\"generation\":2", "\"labels\":{\"x\":\"2\"}"}, {"\"annotations\":{\"n\":\"2\"}"}, false},
};

static void put_a(const char *change, const char *rest) {
  char meta[512];
  meta_with(meta, sizeof meta, change);
  fakeapi_put(F.srv, "podsets", "ns", "a", meta, rest);
}

/* A predicate filters `for` updates: an update passes when a listed
 * predicate sees its change; adds and deletes always pass. */
static void test_predicates_filter_updates(void **state) {
  for (size_t k = 0; k < sizeof PRED_CASES / sizeof PRED_CASES[0]; k++) {
    const pred_case *pc = &PRED_CASES[k];
    /* One fresh cluster per predicate. */
    if (k) {
      assert_int_equal(teardown(state), 0);
      assert_int_equal(setup(state), 0);
    }
    start_informers();
    kc_controller_spec sp = controller_spec(pc->name);
    sp.predicates = pc->preds;
    slot *s = new_controller(&sp);
    put_a(NULL, NULL);
    if (strcmp(settle_on(INF_PODSETS, s), "ns/a") != 0) fail_msg("%s: add dropped", pc->name);
    for (size_t i = 0; i < 3 && pc->passes[i]; i++) {
      put_a(pc->passes[i], NULL);
      if (strcmp(settle_on(INF_PODSETS, s), "ns/a") != 0)
        fail_msg("%s: update %s dropped", pc->name, pc->passes[i]);
      put_a(NULL, NULL); /* back (passes or not: not looked at) */
      settle_on(INF_PODSETS, s);
    }
    for (size_t i = 0; i < 3 && pc->dropped[i]; i++) {
      put_a(pc->dropped[i], NULL);
      if (strcmp(settle_on(INF_PODSETS, s), "") != 0)
        fail_msg("%s: update %s passed", pc->name, pc->dropped[i]);
      put_a(NULL, NULL);
      settle_on(INF_PODSETS, s);
    }
    put_a(NULL, "\"status\":{\"observed\":1}");
    const char *got = settle_on(INF_PODSETS, s);
    if (strcmp(got, pc->status_only_passes ? "ns/a" : "") != 0)
      fail_msg("%s: status-only update: got \"%s\"", pc->name, got);
    fakeapi_delete(F.srv, "podsets", "ns", "a");
    if (strcmp(settle_on(INF_PODSETS, s), "ns/a") != 0) fail_msg("%s: delete dropped", pc->name);
  }
}

/* owns and watches entries have their own predicates. */
static void test_owns_and_watches_predicates(void **state) {
  static const kc_owns_spec owns[] = {{.ref = {.api_version = "v1", .kind = "Pod", .informer = INF_PODS},
                                       .predicates = KC_PRED_GENERATION_CHANGED}};
  static const kc_watch_spec watches[] = {
      {.ref = {.api_version = "v1", .kind = "ConfigMap", .informer = INF_CONFIGMAPS},
       .mapping = KC_MAP_LABEL, .key = "podset", .predicates = KC_PRED_ANNOTATIONS_CHANGED}};
  start_informers();
  kc_controller_spec sp = controller_spec("entries");
  sp.owns = owns, sp.nowns = 1, sp.watches = watches, sp.nwatches = 1;
  slot *s = new_controller(&sp);
  settle_on(INF_PODS, s);
  fakeapi_put(F.srv, "pods", "ns", "p",
              "\"generation\":1,\"ownerReferences\":[" OWNER_REF("demo.kctrld.io/v1", "PodSet", "web", CONTROLLER) "]",
              NULL);
  assert_string_equal(settle_on(INF_PODS, s), "ns/web"); /* add */
  fakeapi_put(F.srv, "pods", "ns", "p",
              "\"generation\":1,\"ownerReferences\":[" OWNER_REF("demo.kctrld.io/v1", "PodSet", "web", CONTROLLER) "]",
              "\"status\":{\"phase\":\"Running\"}");
  assert_string_equal(settle_on(INF_PODS, s), "");
  fakeapi_put(F.srv, "pods", "ns", "p",
              "\"generation\":2,\"ownerReferences\":[" OWNER_REF("demo.kctrld.io/v1", "PodSet", "web", CONTROLLER) "]",
              NULL);
  assert_string_equal(settle_on(INF_PODS, s), "ns/web");

  fakeapi_put(F.srv, "configmaps", "ns", "c", "\"labels\":{\"podset\":\"db\"}", NULL);
  assert_string_equal(settle_on(INF_CONFIGMAPS, s), "ns/db"); /* add */
  fakeapi_put(F.srv, "configmaps", "ns", "c", "\"labels\":{\"podset\":\"db\"}", "\"data\":{\"k\":\"v\"}");
  assert_string_equal(settle_on(INF_CONFIGMAPS, s), "");
  fakeapi_put(F.srv, "configmaps", "ns", "c",
              "\"labels\":{\"podset\":\"db\"},\"annotations\":{\"k\":\"v\"}", NULL);
  assert_string_equal(settle_on(INF_CONFIGMAPS, s), "ns/db");
}

/* ---- resync meets the predicates ------------------------------------------------------ */

static unsigned resyncs; /* on_update(obj, obj) seen by the probe */
static void probe_update(void *ud, kc_informer *inf, kc_obj *old, kc_obj *obj) {
  if (old == obj) resyncs++;
}
static bool two_resyncs(void *ud) { return resyncs >= 2 * NINF; } /* one object each */

/* A resync is an update whose old and new object are the same (informer.h).
 * As in controller-runtime, it meets the predicates like any update: each
 * of them compares old and new and finds nothing changed, so a controller
 * (or owns / watches entry) with predicates drops resyncs, e.g.
 * ResourceVersionChanged: same resourceVersion. Without predicates a
 * resync passes and re-runs reconcile. */
static void test_resync_meets_predicates(void **state) {
  static const kc_owns_spec owns_rv[] = {{.ref = {.api_version = "v1", .kind = "Pod", .informer = INF_PODS},
                                          .predicates = KC_PRED_RESOURCE_VERSION_CHANGED}};
  static const kc_owns_spec owns_any[] = {{.ref = {.api_version = "v1", .kind = "Pod", .informer = INF_PODS}}};
  static const kc_watch_spec watch_rv[] = {
      {.ref = {.api_version = "v1", .kind = "ConfigMap", .informer = INF_CONFIGMAPS},
       .mapping = KC_MAP_LABEL, .key = "podset", .predicates = KC_PRED_RESOURCE_VERSION_CHANGED}};
  fakeapi_put(F.srv, "podsets", "ns", "a", "\"generation\":1", NULL);
  fakeapi_put(F.srv, "pods", "ns", "p",
              "\"ownerReferences\":[" OWNER_REF("demo.kctrld.io/v1", "PodSet", "owner", CONTROLLER) "]",
              NULL);
  fakeapi_put(F.srv, "configmaps", "ns", "c", "\"labels\":{\"podset\":\"watcher\"}", NULL);
  for (int i = 0; i < NINF; i++) F.ispec[i].resync_ms = 20;
  start_informers();
  kc_controller_spec none = controller_spec("no-predicates");
  none.owns = owns_any, none.nowns = 1;
  kc_controller_spec rv = controller_spec("resourceVersionChanged");
  rv.predicates = KC_PRED_RESOURCE_VERSION_CHANGED;
  rv.owns = owns_rv, rv.nowns = 1, rv.watches = watch_rv, rv.nwatches = 1;
  kc_controller_spec gen = controller_spec("generationChanged");
  gen.predicates = KC_PRED_GENERATION_CHANGED;
  slot *s_none = new_controller(&none), *s_rv = new_controller(&rv), *s_gen = new_controller(&gen);
  /* The start (late-subscriber replay: adds) queues everything once. */
  for (size_t i = 0; i < F.nctl; i++) drain(&F.ctl[i]);
  assert_string_equal(take(s_none, NULL), "ns/a,ns/owner");
  assert_string_equal(take(s_rv, NULL), "ns/a,ns/owner,ns/watcher");
  assert_string_equal(take(s_gen, NULL), "ns/a");

  /* Handlers run in registration order: once the probe, registered last on
   * every informer, saw two resync rounds of each, the controllers did. */
  resyncs = 0;
  kc_informer_handler probe = {NULL, probe_update, NULL, NULL, NULL};
  for (int i = 0; i < NINF; i++) assert_true(kc_informer_add_handler(F.inf[i], &probe) > 0);
  run_until(two_resyncs, NULL, "two resync rounds");
  for (size_t i = 0; i < F.nctl; i++) drain(&F.ctl[i]);
  assert_string_equal(take(s_none, NULL), "ns/a,ns/owner");
  assert_string_equal(take(s_rv, NULL), "");
  assert_string_equal(take(s_gen, NULL), "");
  /* A real update still passes ResourceVersionChanged. */
  fakeapi_put(F.srv, "podsets", "ns", "a", "\"generation\":1", "\"status\":{}");
  assert_string_equal(settle_on(INF_PODSETS, s_rv), "ns/a");
}

/* ---- results -------------------------------------------------------------------------- */

static bool four_reconciled(void *ud) {
  kc_controller_stats st;
  kc_controller_stats_get(ud, &st);
  return st.reconcile_count >= 4;
}

/* The result-to-queue policy (client-go's processNextWorkItem):
 *   done          -> Forget: no failure history, not queued again;
 *   requeue       -> AddRateLimited: one failure, waiting its backoff;
 *   error         -> AddRateLimited, and counted as an error;
 *   requeue after -> Forget + AddAfter: waiting its delay, no failures.
 * sample.c answers by key: ns/error, ns/requeue, ns/after (1.5 s), others
 * done. */
static void test_results_to_queue(void **state) {
  static const char *const names[] = {"ok", "error", "requeue", "after"};
  for (size_t i = 0; i < 4; i++) fakeapi_put(F.srv, "podsets", "ns", names[i], NULL, NULL);
  start_informers();
  kc_controller_spec sp = controller_spec("results");
  slot *s = new_controller(&sp);
  kc_workqueue *q = kc_controller_queue(s->c);
  assert_int_equal(kc_workqueue_len(q), 4);
  kc_controller_set_active(s->c, true);
  run_until(four_reconciled, s->c, "four reconciles");

  kc_controller_stats st;
  kc_controller_stats_get(s->c, &st);
  assert_int_equal(st.reconcile_count, 4);
  assert_int_equal(st.success, 1);
  assert_int_equal(st.error, 1);
  assert_int_equal(st.requeue, 1);
  assert_int_equal(st.requeue_after, 1);
  assert_int_equal(st.workers, 4);
  assert_int_equal(kc_workqueue_num_requeues(q, "ns/ok"), 0);
  assert_int_equal(kc_workqueue_num_requeues(q, "ns/error"), 1);
  assert_int_equal(kc_workqueue_num_requeues(q, "ns/requeue"), 1);
  assert_int_equal(kc_workqueue_num_requeues(q, "ns/after"), 0);
  assert_int_equal(kc_workqueue_waiting(q), 3); /* error, requeue, after */
  assert_int_equal(kc_workqueue_len(q), 0);
  assert_int_equal(kc_workqueue_processing(q), 0);
  assert_int_equal(kc_workqueue_metrics(q)->retries_total, 3);
  uint64_t h = 0;
  const kc_reconcile_histogram *hist = kc_controller_reconcile_histogram(s->c);
  for (size_t i = 0; i <= KC_RECONCILE_BUCKETS; i++) h += hist->counts[i];
  assert_int_equal(h, 4);
}

static bool n_reconciled(void *ud);

/* A terminal error (sample.c: ns/terminal) is counted as an error and as a
 * terminal one, and not retried: nothing of it waits in the queue while
 * other keys go on; the next event for the key runs it again. */
static void test_terminal_not_requeued(void **state) {
  fakeapi_put(F.srv, "podsets", "ns", "terminal", NULL, NULL);
  fakeapi_put(F.srv, "podsets", "ns", "ok", NULL, NULL);
  start_informers();
  kc_controller_spec sp = controller_spec("terminal");
  slot *s = new_controller(&sp);
  kc_workqueue *q = kc_controller_queue(s->c);
  kc_controller_set_active(s->c, true);
  unsigned two = 2;
  void *w2[] = {s->c, &two};
  run_until(n_reconciled, w2, "two reconciles");
  kc_controller_stats st;
  kc_controller_stats_get(s->c, &st);
  assert_int_equal(st.success, 1);
  assert_int_equal(st.error, 1); /* reconcile_errors_total, reconcile_total{result="error"} */
  assert_int_equal(st.terminal, 1);
  assert_int_equal(kc_workqueue_waiting(q), 0);
  assert_int_equal(kc_workqueue_len(q), 0);
  assert_int_equal(kc_workqueue_metrics(q)->retries_total, 0);
  /* Another key's event goes on; the terminal key stays put. */
  fakeapi_put(F.srv, "podsets", "ns", "ok", NULL, "\"spec\":{\"replicas\":2}");
  unsigned three = 3;
  void *w3[] = {s->c, &three};
  run_until(n_reconciled, w3, "the other key again");
  kc_controller_stats_get(s->c, &st);
  assert_int_equal(st.terminal, 1);
  assert_int_equal(st.success, 2);
  /* The object changes: reconciled again (terminal again, sample.c). */
  fakeapi_put(F.srv, "podsets", "ns", "terminal", NULL, "\"spec\":{\"replicas\":2}");
  unsigned four = 4;
  void *w4[] = {s->c, &four};
  run_until(n_reconciled, w4, "the terminal key after its update");
  kc_controller_stats_get(s->c, &st);
  assert_int_equal(st.terminal, 2);
  assert_int_equal(st.error, 2);
  assert_int_equal(kc_workqueue_waiting(q), 0);
}

/* ud: {controller, &n}: n reconciles finished and none running. */
static bool n_reconciled(void *ud) {
  void **w = ud;
  kc_controller_stats st;
  kc_controller_stats_get(w[0], &st);
  return st.reconcile_count >= *(unsigned *)w[1] &&
         kc_workqueue_processing(kc_controller_queue(w[0])) == 0;
}

/* kc_controller_apply_result alone, on a queue with a hand-set clock and
 * backoff only (1 s doubling, no token bucket), so each queue operation
 * shows in the delay the key waits: error and requeue -> AddRateLimited
 * (1 s, then 2 s); done -> Forget (the next failure waits 1 s again);
 * requeue-after -> Forget + AddAfter (its own delay, no failure); an
 * unknown kind backs off like an error; a key not being processed ->
 * -ENOENT from Done. */

/* Gets `key` (after letting its delay pass), settles it with `kind`, and
 * returns the delay it then waits (0: none, not queued). */
static uint64_t settle(kc_workqueue *q, const char *key, enum kc_result_kind kind, uint64_t after_ms) {
  uint64_t when;
  if (kc_workqueue_next_ready(q, &when)) kc_clock_set_manual(when);
  kc_workqueue_tick(q);
  if (!kc_workqueue_len(q)) assert_int_equal(kc_workqueue_add(q, key), 0);
  const char *got;
  assert_int_equal(kc_workqueue_get(q, &got), KC_WQ_KEY);
  assert_string_equal(got, key);
  kc_reconcile_result res = {.kind = kind, .after_ms = after_ms};
  assert_int_equal(kc_controller_apply_result(q, key, &res), 0);
  assert_int_equal(kc_workqueue_processing(q), 0);
  if (!kc_workqueue_next_ready(q, &when)) return 0;
  assert_int_equal(kc_workqueue_waiting(q), 1);
  return when - kc_clock_now_ns();
}

static void test_apply_result_policy(void **state) {
  (void)state;
  kc_ratelimit_config rl = {.base_delay_ns = KC_NS_PER_SEC, .max_delay_ns = 60 * KC_NS_PER_SEC};
  kc_clock_set_manual(1000 * KC_NS_PER_SEC);
  kc_workqueue *q = kc_workqueue_new("policy", &rl);
  assert_non_null(q);
  assert_int_equal(settle(q, "ns/a", KC_RESULT_ERROR, 0), KC_NS_PER_SEC);
  assert_int_equal(kc_workqueue_num_requeues(q, "ns/a"), 1);
  assert_int_equal(settle(q, "ns/a", KC_RESULT_REQUEUE, 0), 2 * KC_NS_PER_SEC);
  assert_int_equal(kc_workqueue_num_requeues(q, "ns/a"), 2);
  assert_int_equal(settle(q, "ns/a", KC_RESULT_DONE, 0), 0);
  assert_int_equal(kc_workqueue_num_requeues(q, "ns/a"), 0);
  assert_int_equal(kc_workqueue_len(q), 0);
  /* Forgotten: the backoff starts over. */
  assert_int_equal(settle(q, "ns/a", KC_RESULT_ERROR, 0), KC_NS_PER_SEC);
  assert_int_equal(settle(q, "ns/a", KC_RESULT_REQUEUE_AFTER, 250), 250 * KC_NS_PER_MS);
  assert_int_equal(kc_workqueue_num_requeues(q, "ns/a"), 0);
  assert_int_equal(settle(q, "ns/a", (enum kc_result_kind)7, 0), KC_NS_PER_SEC);
  assert_int_equal(kc_workqueue_num_requeues(q, "ns/a"), 1);
  assert_int_equal(kc_workqueue_metrics(q)->retries_total, 5);
  /* Held (not run: its program backs off as a whole): back after the wait
   * with its failures kept, so the next error goes on doubling. */
  uint64_t when;
  if (kc_workqueue_next_ready(q, &when)) kc_clock_set_manual(when);
  kc_workqueue_tick(q);
  const char *got;
  assert_int_equal(kc_workqueue_get(q, &got), KC_WQ_KEY);
  kc_reconcile_result held = {.kind = KC_RESULT_REQUEUE_AFTER, .after_ms = 300, .held = true};
  assert_int_equal(kc_controller_apply_result(q, "ns/a", &held), 0);
  assert_true(kc_workqueue_next_ready(q, &when));
  assert_int_equal(when - kc_clock_now_ns(), 300 * KC_NS_PER_MS);
  assert_int_equal(kc_workqueue_num_requeues(q, "ns/a"), 1);
  assert_int_equal(settle(q, "ns/a", KC_RESULT_ERROR, 0), 2 * KC_NS_PER_SEC);
  /* terminal: not queued again, its failures kept (controller-runtime
   * neither requeues nor forgets it); no retry counted. */
  uint64_t retries = kc_workqueue_metrics(q)->retries_total;
  assert_int_equal(settle(q, "ns/a", KC_RESULT_TERMINAL, 0), 0);
  assert_int_equal(kc_workqueue_len(q), 0);
  assert_int_equal(kc_workqueue_num_requeues(q, "ns/a"), 2);
  assert_int_equal(kc_workqueue_metrics(q)->retries_total, retries);
  kc_reconcile_result done = {.kind = KC_RESULT_DONE};
  assert_int_equal(kc_controller_apply_result(q, "ns/idle", &done), -ENOENT);
  kc_workqueue_free(q);
  kc_clock_set_real();
}

/* The controller takes workers and reconcileTimeout as config.c produced
 * them (docs/config.md has the defaults; config.c is the only place that
 * applies them): 3 workers are 3, and 0 (which no loaded config holds:
 * workers is 1..1024) is refused instead of becoming a second default. */
static void test_spec_taken_as_given(void **state) {
  start_informers();
  kc_controller_spec sp = controller_spec("three");
  sp.workers = 3;
  slot *s = new_controller(&sp);
  kc_controller_stats st;
  kc_controller_stats_get(s->c, &st);
  assert_int_equal(st.workers, 3);

  static kc_controller_spec zero;
  zero = controller_spec("zero");
  zero.workers = 0;
  kc_plugin_instance *inst = NULL;
  char err[512];
  assert_int_equal(kc_plugin_instance_new(plugin, zero.name, NULL, &inst, err, sizeof err), 0);
  kc_controller *c = NULL;
  int rc = kc_controller_new(&F.loop, &zero, F.inf, inst, &c);
  if (rc == 0) F.ctl[F.nctl++].c = c; /* stopped by the teardown */
  assert_int_equal(rc, -EINVAL);
}

/* ---- pausing and activation ------------------------------------------------------------- */

static bool queued(void *ud) {
  slot *s = ud;
  return kc_workqueue_len(kc_controller_queue(s->c)) == 3;
}

static unsigned reconciles_of(slot *s) {
  kc_controller_stats st;
  kc_controller_stats_get(s->c, &st);
  return (unsigned)st.reconcile_count;
}

typedef struct count_wait {
  slot *s;
  unsigned n;
} count_wait;

static bool reconciled(void *ud) {
  count_wait *w = ud;
  return reconciles_of(w->s) >= w->n && kc_workqueue_processing(kc_controller_queue(w->s->c)) == 0;
}

/* A controller made on synced informers starts with every cached `for`
 * object queued once; while paused (not leading) events are still mapped
 * and queued, deduplicated, and nothing runs; activation dispatches each
 * key once; pausing again stops dispatching. */
static void test_pause_and_activation(void **state) {
  fakeapi_put(F.srv, "podsets", "ns", "p1", NULL, NULL);
  fakeapi_put(F.srv, "podsets", "ns", "p2", NULL, NULL);
  start_informers();
  kc_controller_spec sp = controller_spec("pausing");
  slot *s = new_controller(&sp);
  kc_workqueue *q = kc_controller_queue(s->c);
  assert_int_equal(kc_workqueue_len(q), 2); /* at once: the replay of the cache */
  fakeapi_put(F.srv, "podsets", "ns", "p1", NULL, "\"spec\":{}");
  fakeapi_put(F.srv, "podsets", "ns", "p1", NULL, "\"spec\":{\"a\":1}");
  fakeapi_put(F.srv, "podsets", "ns", "p3", NULL, NULL);
  run_until(queued, s, "three keys queued");
  assert_int_equal(reconciles_of(s), 0);

  kc_controller_set_active(s->c, true);
  count_wait three = {s, 3};
  run_until(reconciled, &three, "three reconciles");
  assert_int_equal(reconciles_of(s), 3);
  assert_int_equal(kc_workqueue_len(q), 0);

  kc_controller_set_active(s->c, false);
  fakeapi_put(F.srv, "podsets", "ns", "p4", NULL, NULL);
  fakeapi_put(F.srv, "podsets", "ns", "p5", NULL, NULL);
  fakeapi_put(F.srv, "podsets", "ns", "p6", NULL, NULL);
  run_until(queued, s, "three new keys queued");
  assert_int_equal(reconciles_of(s), 3);
  kc_controller_set_active(s->c, true);
  count_wait six = {s, 6};
  run_until(reconciled, &six, "six reconciles");
  assert_int_equal(reconciles_of(s), 6);
}

/* Queue priorities (controller.h "Priorities"): the cache replayed to a new
 * controller is queued LOW, a watch event NORMAL (raising a key queued LOW),
 * an operator's requeue at the level asked for; a requeue-after with a
 * priority comes back at it, one without at the level the key ran at. */
static bool four_queued(void *ud) { return kc_workqueue_len(kc_controller_queue(ud)) == 4; }

static void test_queue_levels(void **state) {
  fakeapi_put(F.srv, "podsets", "ns", "p1", NULL, NULL);
  fakeapi_put(F.srv, "podsets", "ns", "p2", NULL, NULL);
  fakeapi_put(F.srv, "podsets", "ns", "p3", NULL, NULL);
  start_informers();
  kc_controller_spec sp = controller_spec("levels");
  slot *s = new_controller(&sp);
  kc_workqueue *q = kc_controller_queue(s->c);
  assert_int_equal(kc_workqueue_len_at(q, KC_WQ_LOW), 3);
  fakeapi_put(F.srv, "podsets", "ns", "p2", NULL, "\"spec\":{}");
  fakeapi_put(F.srv, "podsets", "ns", "p4", NULL, NULL);
  run_until(four_queued, s->c, "p4 queued");
  assert_int_equal(kc_workqueue_priority(q, "ns/p2"), KC_WQ_NORMAL);
  assert_int_equal(kc_workqueue_priority(q, "ns/p4"), KC_WQ_NORMAL);
  assert_int_equal(kc_controller_requeue(s->c, "ns/p3", KC_WQ_HIGH), 0);
  assert_int_equal(kc_controller_requeue(s->c, "ns/p3", KC_WQ_LEVELS), -EINVAL);
  assert_int_equal(kc_controller_requeue(s->c, "", KC_WQ_HIGH), -EINVAL);
  static const char *const order[] = {"ns/p3", "ns/p2", "ns/p4", "ns/p1"};
  const char *got;
  for (size_t i = 0; i < 4; i++) {
    assert_int_equal(kc_workqueue_get(q, &got), KC_WQ_KEY);
    assert_string_equal(got, order[i]);
  }
  kc_reconcile_result high = {.kind = KC_RESULT_REQUEUE_AFTER, .has_priority = true,
                              .priority = KCTRLD_PRIORITY_HIGH};
  kc_reconcile_result keep = {.kind = KC_RESULT_REQUEUE_AFTER};
  kc_reconcile_result low_error = {.kind = KC_RESULT_ERROR, .has_priority = true, .priority = -1};
  assert_int_equal(kc_controller_apply_result(q, "ns/p1", &high), 0);
  assert_int_equal(kc_controller_apply_result(q, "ns/p2", &keep), 0);
  assert_int_equal(kc_controller_apply_result(q, "ns/p4", &low_error), 0);
  assert_int_equal(kc_workqueue_priority(q, "ns/p1"), KC_WQ_HIGH);  /* queued at once */
  assert_int_equal(kc_workqueue_priority(q, "ns/p2"), KC_WQ_NORMAL); /* ran at NORMAL */
  assert_int_equal(kc_workqueue_len(q), 2);
  assert_int_equal(kc_workqueue_waiting(q), 1); /* p4, rate limited, comes back LOW */
  assert_int_equal(kc_workqueue_get(q, &got), KC_WQ_KEY);
  assert_string_equal(got, "ns/p1");
  kc_workqueue_done(q, "ns/p1");
  kc_workqueue_done(q, "ns/p3");
}

/* ---- read your own writes ---------------------------------------------------- */

static unsigned own_waits(slot *s, uint64_t *timeouts) {
  kc_ownwrites_stats st;
  assert_true(kc_controller_own_writes_stats(s->c, &st));
  if (timeouts) *timeouts = st.timeouts;
  return (unsigned)st.waits;
}

static bool waited(void *ud) {
  count_wait *w = ud;
  return own_waits(w->s, NULL) >= w->n;
}

/* The resourceVersion the PodSet informer holds for ns/name, as a number. */
static uint64_t cached_rv(const char *name) {
  kc_obj *o = kc_informer_get(F.inf[INF_PODSETS], kc_str_c("ns"), kc_str_c(name));
  assert_non_null(o);
  char buf[32];
  snprintf(buf, sizeof buf, "%.*s", (int)kc_obj_resource_version(o).len, kc_obj_resource_version(o).ptr);
  kc_obj_unref(o);
  return strtoull(buf, NULL, 10);
}

/* A write of the key's reconcile answered at resourceVersion rv. */
static void wrote(slot *s, const char *name, uint64_t rv) {
  char path[128], body[256];
  snprintf(path, sizeof path, "/apis/demo.kctrld.io/v1/namespaces/ns/podsets/%s", name);
  int n = snprintf(body, sizeof body,
                   "{\"apiVersion\":\"demo.kctrld.io/v1\",\"kind\":\"PodSet\",\"metadata\":"
                   "{\"name\":\"%s\",\"namespace\":\"ns\",\"uid\":\"u\",\"resourceVersion\":\"%llu\"}}",
                   name, (unsigned long long)rv);
  char key[64];
  snprintf(key, sizeof key, "ns/%s", name);
  kc_ownwrites_record(kc_controller_own_writes(s->c), key, "PUT", path, body, (size_t)n);
}

/* readYourOwnWrites: a key whose last reconcile wrote at a resourceVersion
 * the informer has not observed is taken from the queue but not run (no
 * worker waits); an event that shows the write runs it; a write never
 * observed holds it until the timeout (manual clock), then it runs and the
 * timeout is counted. Off: nothing is recorded, nothing waits. */
static void test_read_your_own_writes(void **state) {
  fakeapi_put(F.srv, "podsets", "ns", "p1", NULL, NULL);
  start_informers();
  kc_controller_spec sp = controller_spec("ryow");
  sp.read_your_own_writes = true;
  slot *s = new_controller(&sp);
  kc_controller_set_active(s->c, true);
  count_wait one = {s, 1};
  run_until(reconciled, &one, "the first reconcile");

  uint64_t rv = cached_rv("p1");
  wrote(s, "p1", rv + 2); /* the server's next write but one */
  fakeapi_put(F.srv, "podsets", "ns", "p1", NULL, "\"spec\":{\"a\":1}"); /* rv + 1: queues p1 */
  count_wait wait1 = {s, 1};
  run_until(waited, &wait1, "p1 to wait");
  assert_int_equal(reconciles_of(s), 1);
  assert_int_equal(kc_workqueue_processing(kc_controller_queue(s->c)), 0); /* no worker held */
  fakeapi_put(F.srv, "podsets", "ns", "p1", NULL, "\"spec\":{\"a\":2}"); /* rv + 2: the write */
  count_wait two = {s, 2};
  run_until(reconciled, &two, "p1 to run once its write is observed");
  uint64_t timeouts = 9;
  assert_int_equal(own_waits(s, &timeouts), 1);
  assert_int_equal(timeouts, 0);

  kc_clock_set_manual(kc_clock_now_ns());
  wrote(s, "p1", rv + 1000); /* never observed */
  fakeapi_put(F.srv, "podsets", "ns", "p1", NULL, "\"spec\":{\"a\":3}");
  count_wait wait2 = {s, 2};
  run_until(waited, &wait2, "p1 to wait again");
  kc_clock_advance(KC_OWNWRITES_TIMEOUT_NS - 1000000);
  for (int i = 0; i < 20; i++) uv_run(&F.loop, UV_RUN_ONCE);
  assert_int_equal(reconciles_of(s), 2);
  kc_clock_advance(1000000);
  count_wait three = {s, 3};
  run_until(reconciled, &three, "p1 to run after the timeout");
  assert_int_equal(own_waits(s, &timeouts), 2);
  assert_int_equal(timeouts, 1);
  kc_clock_set_real();

  kc_controller_spec off = controller_spec("ryow-off");
  slot *o = new_controller(&off);
  assert_null(kc_controller_own_writes(o->c));
  kc_ownwrites_stats st;
  assert_false(kc_controller_own_writes_stats(o->c, &st));
}

/* ---- sharding ------------------------------------------------------------------ */

/* A namespace whose hash (key: metadata.namespace) falls in range `want` of 2. */
static void ns_in_range(unsigned want, char *out, size_t cap) {
  for (int i = 0; i < 10000; i++) {
    snprintf(out, cap, "sh%d", i);
    if ((kc_shard_hash(out, strlen(out)) >> 63) == want) return;
  }
  fail_msg("no namespace found");
}

static bool owns_n(void *ud) {
  kc_shard_range r[2];
  return kc_sharding_owned_ranges(ud, r, 2) == 2;
}

static bool owns_one(void *ud) {
  kc_shard_range r[2];
  return kc_sharding_owned_ranges(ud, r, 2) == 1;
}

/* A sharded controller (2 ranges by namespace; Leases in kube-apisim, the
 * objects in the fake API server): while another live replica holds range
 * 1, only keys of range 0 are queued (the cached ones once when range 0 is
 * acquired, then events), never those of range 1; when the other replica's
 * Lease is released, range 1 is acquired and its cached keys are queued. */
static void test_sharded_controller_filters_keys(void **state) {
  (void)state;
  if (sim_paths_init() < 0 || sim_start() < 0) {
    print_message("# kube-apisim not available: skipped\n");
    sim_paths_free();
    return;
  }
  assert_int_equal(sim_call("POST", "/api/v1/namespaces",
                            "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"shards\"}}",
                            NULL, NULL), 201);
  /* the other replica holds range 1 for an hour */
  assert_int_equal(sim_call("POST", "/apis/coordination.k8s.io/v1/namespaces/shards/leases",
                            "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
                            "\"metadata\":{\"name\":\"t-1\"},\"spec\":{\"holderIdentity\":\"other\","
                            "\"leaseDurationSeconds\":3600,\"renewTime\":\"2024-01-01T00:00:00.000000Z\"}}",
                            NULL, NULL), 201);
  char ns0[16], ns1[16];
  ns_in_range(0, ns0, sizeof ns0);
  ns_in_range(1, ns1, sizeof ns1);
  fakeapi_put(F.srv, "podsets", ns0, "old0", NULL, NULL);
  fakeapi_put(F.srv, "podsets", ns1, "old1", NULL, NULL);
  start_informers();

  kc_api *sim_api = NULL;
  kc_kube_creds cr = {.server = sim_url};
  assert_int_equal(kc_api_new(&F.loop, &cr, &sim_api), 0);
  kc_controller_spec spec = controller_spec("sharded");
  spec.sharding = (kc_sharding_spec){.shards = 2, .key = KC_SHARD_KEY_NAMESPACE,
                                     .lease_namespace = "shards", .lease_prefix = "t",
                                     .lease_duration_ms = 1000, .renew_deadline_ms = 600,
                                     .retry_period_ms = 100};
  slot *s = new_controller(&spec);
  drain(s); /* the keys queued at creation (every cached object) */
  s->nseen = 0;
  assert_int_equal(kc_controller_shard(s->c, sim_api, "me", 1000, false), 0);
  assert_int_equal(kc_controller_shard(s->c, sim_api, "me", 1000, false), -EALREADY);
  kc_sharding *sh = kc_controller_sharding(s->c);
  assert_non_null(sh);
  /* start the claim loop but keep the controller paused: its queue is read here */
  assert_int_equal(kc_sharding_start(sh), 0);
  run_until(owns_one, sh, "range 0 to be owned");
  char k0[64], k1[64], n0[64], n1[64];
  snprintf(k0, sizeof k0, "%s/old0", ns0);
  snprintf(k1, sizeof k1, "%s/old1", ns1);
  snprintf(n0, sizeof n0, "%s/new0", ns0);
  snprintf(n1, sizeof n1, "%s/new1", ns1);
  key_wait w = {s, k0};
  run_until(key_seen, &w, "range 0's cached key");
  fakeapi_put(F.srv, "podsets", ns1, "new1", NULL, NULL);
  fakeapi_put(F.srv, "podsets", ns0, "new0", NULL, NULL);
  w.key = n0;
  run_until(key_seen, &w, "range 0's new key");
  for (size_t i = 0; i < s->nseen; i++) {
    assert_string_not_equal(s->seen[i], k1);
    assert_string_not_equal(s->seen[i], n1);
  }
  /* the other replica releases range 1 */
  char *body = NULL;
  assert_int_equal(sim_call("GET", "/apis/coordination.k8s.io/v1/namespaces/shards/leases/t-1", NULL,
                            NULL, &body), 200);
  char *rv = strstr(body, "\"resourceVersion\":\"");
  assert_non_null(rv);
  rv += strlen("\"resourceVersion\":\"");
  char put[512];
  snprintf(put, sizeof put,
           "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"t-1\","
           "\"namespace\":\"shards\",\"resourceVersion\":\"%.*s\"},\"spec\":{\"holderIdentity\":\"\","
           "\"leaseDurationSeconds\":1,\"renewTime\":\"2024-01-01T00:00:01.000000Z\"}}",
           (int)strcspn(rv, "\""), rv);
  free(body);
  assert_int_equal(sim_call("PUT", "/apis/coordination.k8s.io/v1/namespaces/shards/leases/t-1", put,
                            NULL, NULL), 200);
  run_until(owns_n, sh, "range 1 to be owned");
  w.key = k1;
  run_until(key_seen, &w, "range 1's cached keys");
  w.key = n1;
  run_until(key_seen, &w, "range 1's other cached key");

  kc_controller_stop(s->c, 1000, on_stopped, NULL);
  uint64_t end = tu_mono_ms() + WAIT_MS;
  while (F.stopped < 1 && tu_mono_ms() < end) uv_run(&F.loop, UV_RUN_ONCE);
  assert_int_equal(F.stopped, 1);
  F.nctl = 0;
  F.stopped = 0;
  kc_api_close(sim_api);
  sim_stop();
  sim_paths_free();
}

int main(void) {
  kc_log_set_level(KC_LOG_ERROR);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_for_events_enqueue_own_key, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sharded_controller_filters_keys, setup, teardown),
      cmocka_unit_test_setup_teardown(test_owns_enqueue_controller_owner, setup, teardown),
      cmocka_unit_test_setup_teardown(test_owns_observe_expectations, setup, teardown),
      cmocka_unit_test_setup_teardown(test_watches_mappings, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cluster_scoped_owner, setup, teardown),
      cmocka_unit_test_setup_teardown(test_predicates_filter_updates, setup, teardown),
      cmocka_unit_test_setup_teardown(test_owns_and_watches_predicates, setup, teardown),
      cmocka_unit_test_setup_teardown(test_resync_meets_predicates, setup, teardown),
      cmocka_unit_test_setup_teardown(test_results_to_queue, setup, teardown),
      cmocka_unit_test(test_apply_result_policy),
      cmocka_unit_test_setup_teardown(test_terminal_not_requeued, setup, teardown),
      cmocka_unit_test_setup_teardown(test_spec_taken_as_given, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pause_and_activation, setup, teardown),
      cmocka_unit_test_setup_teardown(test_queue_levels, setup, teardown),
      cmocka_unit_test_setup_teardown(test_read_your_own_writes, setup, teardown),
  };
  return cmocka_run_group_tests(tests, setup_group, teardown_group);
}
