/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/events: the correlator with an injected clock
 * (spam filter: a burst of 25, then one per 5 minutes; aggregation at the
 * 10th distinct message of one reason within 10 minutes, as client-go;
 * dedup counting; the LRU bound), and the recorder against the build's
 * kube-apisim: 30 identical events make one Event with count 25, many
 * messages make a combined Event, a PATCH of a deleted Event re-creates it,
 * a full queue drops (counted), and 4 threads recording at once (the TSan
 * build checks the worker -> loop hand-off). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <yajl/yajl_tree.h>

#include "apisim_child.h"
#include "client/events.h"
#include "watch/decode.h"
#include "testutil.h"

#define SEC 1000000000ull
#define WALL0 ((int64_t)1700000000 * 1000000000)

static kc_event_in ev_in(const char *name, const char *reason, const char *msg) {
  return (kc_event_in){kc_str_c("apps/v1"), kc_str_c("Deployment"), kc_str_c("icx"),
                       kc_str_c(name),      kc_str_c("uid-1"),      KC_EVENT_TYPE_WARNING,
                       kc_str_c(reason),    kc_str_c(msg),          kc_str_c("kctrld.io/web")};
}

/* ---- correlator ---- */

static void test_spam_filter(void **state) {
  kc_event_correlator *c;
  assert_int_equal(kc_event_correlator_new(0, &c), 0);
  kc_event_out o;
  /* Different reasons: no aggregation, no dedup; only the object's bucket. */
  char reason[32];
  uint64_t t = 1000 * SEC;
  for (int i = 0; i < 25; i++) {
    snprintf(reason, sizeof reason, "R%d", i);
    kc_event_in in = ev_in("web", reason, "m");
    if (kc_event_correlate(c, &in, t, WALL0, &o) != KC_EVENT_CREATE) fail_msg("event %d dropped", i);
  }
  kc_event_in in = ev_in("web", "R99", "m");
  assert_int_equal(kc_event_correlate(c, &in, t, WALL0, &o), KC_EVENT_DROP);
  /* One token every 300 s, not earlier. */
  in = ev_in("web", "R100", "m");
  assert_int_equal(kc_event_correlate(c, &in, t + 300 * SEC - 1, WALL0, &o), KC_EVENT_DROP);
  in = ev_in("web", "R101", "m");
  assert_int_equal(kc_event_correlate(c, &in, t + 300 * SEC, WALL0, &o), KC_EVENT_CREATE);
  in = ev_in("web", "R102", "m");
  assert_int_equal(kc_event_correlate(c, &in, t + 300 * SEC + 1, WALL0, &o), KC_EVENT_DROP);
  /* 600 s later: two tokens. */
  t += 900 * SEC;
  in = ev_in("web", "R103", "m");
  assert_int_equal(kc_event_correlate(c, &in, t, WALL0, &o), KC_EVENT_CREATE);
  in = ev_in("web", "R104", "m");
  assert_int_equal(kc_event_correlate(c, &in, t, WALL0, &o), KC_EVENT_CREATE);
  in = ev_in("web", "R105", "m");
  assert_int_equal(kc_event_correlate(c, &in, t, WALL0, &o), KC_EVENT_DROP);
  /* Another object has its own bucket; a day refills to 25, not more. */
  in = ev_in("db", "R0", "m");
  assert_int_equal(kc_event_correlate(c, &in, t, WALL0, &o), KC_EVENT_CREATE);
  t += 86400 * SEC;
  int ok = 0;
  for (int i = 0; i < 40; i++) {
    snprintf(reason, sizeof reason, "S%d", i);
    in = ev_in("web", reason, "m");
    ok += kc_event_correlate(c, &in, t, WALL0, &o) != KC_EVENT_DROP;
  }
  assert_int_equal(ok, 25);
  kc_event_correlator_free(c);
}

static void test_dedup(void **state) {
  kc_event_correlator *c;
  assert_int_equal(kc_event_correlator_new(0, &c), 0);
  kc_event_out o, first;
  kc_event_in in = ev_in("web", "BackOff", "same");
  uint64_t t = 5 * SEC;
  assert_int_equal(kc_event_correlate(c, &in, t, WALL0, &first), KC_EVENT_CREATE);
  assert_int_equal(first.count, 1);
  assert_false(first.combined);
  assert_true(first.first_ns == WALL0);
  for (int n = 2; n <= 30; n++) {
    kc_event_action a = kc_event_correlate(c, &in, t + (uint64_t)n, WALL0 + n * (int64_t)SEC, &o);
    /* Occurrences 26..30 are over the spam budget; they still count. */
    assert_int_equal(a, n <= 25 ? KC_EVENT_PATCH : KC_EVENT_DROP);
    assert_int_equal(o.count, n);
    assert_true(o.name_suffix == first.name_suffix);
    assert_true(o.first_ns == WALL0);
  }
  assert_int_equal(kc_event_correlate(c, &in, t + 300 * SEC, WALL0, &o), KC_EVENT_PATCH);
  assert_int_equal(o.count, 31);
  /* Another type is another Event (and two Events never share a name). */
  in.type = KC_EVENT_TYPE_NORMAL;
  in.name = kc_str_c("other");
  assert_int_equal(kc_event_correlate(c, &in, t, WALL0, &o), KC_EVENT_CREATE);
  assert_int_equal(o.count, 1);
  assert_true(o.name_suffix != first.name_suffix);
  kc_event_correlator_free(c);
}

static void test_aggregation(void **state) {
  kc_event_correlator *c;
  assert_int_equal(kc_event_correlator_new(0, &c), 0);
  kc_event_out o, comb;
  char msg[32];
  uint64_t t = 10 * SEC;
  /* Messages 1..9 are Events of their own. */
  for (int i = 1; i <= 9; i++) {
    snprintf(msg, sizeof msg, "pod %d failed", i);
    kc_event_in in = ev_in("web", "FailedCreate", msg);
    assert_int_equal(kc_event_correlate(c, &in, t += SEC, WALL0, &o), KC_EVENT_CREATE);
    assert_false(o.combined);
  }
  /* The 10th distinct message within 10 minutes is combined (client-go
   * aggregates once the set of messages reaches maxEvents = 10). */
  kc_event_in in = ev_in("web", "FailedCreate", "pod 10 failed");
  assert_int_equal(kc_event_correlate(c, &in, t += SEC, WALL0, &comb), KC_EVENT_CREATE);
  assert_true(comb.combined);
  assert_int_equal(comb.count, 1);
  /* Further new messages patch that one combined Event. */
  for (int i = 11; i <= 14; i++) {
    snprintf(msg, sizeof msg, "pod %d failed", i);
    in = ev_in("web", "FailedCreate", msg);
    assert_int_equal(kc_event_correlate(c, &in, t += SEC, WALL0, &o), KC_EVENT_PATCH);
    assert_true(o.combined);
    assert_int_equal(o.count, i - 9);
    assert_true(o.name_suffix == comb.name_suffix);
  }
  /* A message already in the set stays its own Event (count 2). */
  in = ev_in("web", "FailedCreate", "pod 1 failed");
  assert_int_equal(kc_event_correlate(c, &in, t += SEC, WALL0, &o), KC_EVENT_PATCH);
  assert_false(o.combined);
  assert_int_equal(o.count, 2);
  /* Another reason is another group. */
  in = ev_in("web", "Other", "pod 99 failed");
  assert_int_equal(kc_event_correlate(c, &in, t += SEC, WALL0, &o), KC_EVENT_CREATE);
  assert_false(o.combined);
  /* Quiet for more than 10 minutes: the group starts over. */
  t += 601 * SEC;
  in = ev_in("web", "FailedCreate", "pod 50 failed");
  assert_int_equal(kc_event_correlate(c, &in, t, WALL0, &o), KC_EVENT_CREATE);
  assert_false(o.combined);
  kc_event_correlator_free(c);
}

static void test_lru_bound(void **state) {
  kc_event_correlator *c;
  assert_int_equal(kc_event_correlator_new(8, &c), 0);
  kc_event_out o;
  char name[32];
  for (int i = 0; i < 20; i++) {
    snprintf(name, sizeof name, "obj-%d", i);
    kc_event_in in = ev_in(name, "R", "m");
    assert_int_equal(kc_event_correlate(c, &in, SEC, WALL0, &o), KC_EVENT_CREATE);
    size_t s, a, d;
    kc_event_correlator_sizes(c, &s, &a, &d);
    assert_true(s <= 8 && a <= 8 && d <= 8);
  }
  size_t s, a, d;
  kc_event_correlator_sizes(c, &s, &a, &d);
  assert_true(s == 8 && a == 8 && d == 8);
  /* obj-19 is remembered, obj-0 was evicted. */
  kc_event_in in = ev_in("obj-19", "R", "m");
  assert_int_equal(kc_event_correlate(c, &in, SEC, WALL0, &o), KC_EVENT_PATCH);
  in = ev_in("obj-0", "R", "m");
  assert_int_equal(kc_event_correlate(c, &in, SEC, WALL0, &o), KC_EVENT_CREATE);
  /* Use keeps an entry: touch obj-13 (the oldest now), add 7 more, it stays. */
  in = ev_in("obj-13", "R", "m");
  assert_int_equal(kc_event_correlate(c, &in, SEC, WALL0, &o), KC_EVENT_PATCH);
  for (int i = 100; i < 107; i++) {
    snprintf(name, sizeof name, "obj-%d", i);
    in = ev_in(name, "R", "m");
    assert_int_equal(kc_event_correlate(c, &in, SEC, WALL0, &o), KC_EVENT_CREATE);
  }
  in = ev_in("obj-13", "R", "m");
  assert_int_equal(kc_event_correlate(c, &in, SEC, WALL0, &o), KC_EVENT_PATCH);
  assert_int_equal(o.count, 3);
  in = ev_in("obj-14", "R", "m");
  assert_int_equal(kc_event_correlate(c, &in, SEC, WALL0, &o), KC_EVENT_CREATE);
  kc_event_correlator_free(c);
}

/* ---- recorder against kube-apisim ---- */

static struct {
  uv_loop_t loop;
  kc_api *api;
  kc_events *ev;
  bool sim;
} R;

static void on_flushed(void *ud) { uv_stop(ud); }

static void flush(void) {
  kc_events_flush(R.ev, 10000, on_flushed, &R.loop);
  uv_run(&R.loop, UV_RUN_DEFAULT);
}

static int sim_setup(void **state) {
  if (sim_paths_init() < 0 || sim_start() < 0) return -1;
  R.sim = true;
  /* The API server refuses Events in a namespace that does not exist. */
  if (sim_call("POST", "/api/v1/namespaces",
               "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"icx\"}}",
               NULL, NULL) != 201)
    return -1;
  if (uv_loop_init(&R.loop) != 0) return -1;
  kc_kube_creds creds = {.server = sim_url, .token = "t"};
  if (kc_api_new(&R.loop, &creds, &R.api) < 0) return -1;
  kc_events_options eo = {.api = R.api, .queue_capacity = 64, .retry_delay_ms = 50};
  return kc_events_new(&R.loop, &eo, &R.ev);
}

static int sim_teardown(void **state) {
  kc_events_close(R.ev);
  kc_api_close(R.api);
  uv_run(&R.loop, UV_RUN_DEFAULT);
  uv_loop_close(&R.loop);
  if (R.sim) sim_stop();
  sim_paths_free();
  return 0;
}

typedef struct sim_event {
  char name[256], message[1200], component[160], reporting[160];
  long long count;
} sim_event;

/* The Events in ns about involved object `obj`, at most cap. */
static int list_events(const char *ns, const char *obj, sim_event *out, int cap) {
  char path[512], *body = NULL;
  snprintf(path, sizeof path, "/api/v1/namespaces/%s/events?fieldSelector=involvedObject.name%%3D%s",
           ns, obj);
  long code = sim_call("GET", path, NULL, NULL, &body);
  if (code != 200 || !body) fail_msg("GET %s: %ld", path, code);
  char err[128];
  yajl_val root = yajl_tree_parse(body, err, sizeof err);
  free(body);
  if (!root) fail_msg("list: %s", err);
  const char *items_path[] = {"items", NULL};
  yajl_val items = yajl_tree_get(root, items_path, yajl_t_array);
  assert_non_null(items);
  int n = 0;
  for (size_t i = 0; i < items->u.array.len && n < cap; i++, n++) {
    yajl_val it = items->u.array.values[i];
    const char *np[] = {"metadata", "name", NULL}, *mp[] = {"message", NULL}, *cp[] = {"count", NULL};
    yajl_val v = yajl_tree_get(it, np, yajl_t_string);
    snprintf(out[n].name, sizeof out[n].name, "%s", v ? YAJL_GET_STRING(v) : "");
    v = yajl_tree_get(it, mp, yajl_t_string);
    snprintf(out[n].message, sizeof out[n].message, "%s", v ? YAJL_GET_STRING(v) : "");
    v = yajl_tree_get(it, cp, yajl_t_number);
    out[n].count = v ? YAJL_GET_INTEGER(v) : -1;
    const char *sp[] = {"source", "component", NULL}, *rp[] = {"reportingComponent", NULL};
    v = yajl_tree_get(it, sp, yajl_t_string);
    snprintf(out[n].component, sizeof out[n].component, "%s", v ? YAJL_GET_STRING(v) : "");
    v = yajl_tree_get(it, rp, yajl_t_string);
    snprintf(out[n].reporting, sizeof out[n].reporting, "%s", v ? YAJL_GET_STRING(v) : "");
  }
  yajl_tree_free(root);
  return n;
}

static void test_sim_dedup_and_spam(void **state) {
  kc_obj *o = tu_fixture_obj("deployment-k9s.json", NULL);
  kc_events_stats st0, st;
  kc_events_get_stats(R.ev, &st0);
  /* Flushed every 10 records: a queue of 64 holds them all anyway. */
  for (int i = 0; i < 30; i++) {
    assert_int_equal(kc_events_record(R.ev, NULL, o, KC_EVENT_TYPE_WARNING, "BackOff", "retrying"), 0);
    if (i % 10 == 9) flush();
  }
  flush();
  sim_event evs[8];
  assert_int_equal(list_events("icx", "icx-db", evs, 8), 1);
  assert_int_equal(evs[0].count, 25);
  assert_string_equal(evs[0].message, "retrying");
  kc_events_get_stats(R.ev, &st);
  assert_int_equal(st.created - st0.created, 1);
  assert_int_equal(st.patched - st0.patched, 24);
  assert_int_equal(st.dropped_spam - st0.dropped_spam, 5);
  assert_int_equal(st.failed - st0.failed, 0);
  kc_obj_unref(o);
}

/* Each controller reports under its own name (kube-controller-manager's
 * way): the same event from two controllers is two Events, counted apart. */
static void test_sim_reporting_controller(void **state) {
  kc_obj *o = tu_fixture_obj("service-kubectl-neat.json", NULL);
  assert_non_null(o);
  for (int i = 0; i < 3; i++)
    assert_int_equal(kc_events_record(R.ev, "teams", o, KC_EVENT_TYPE_NORMAL, "Synced", "ok"), 0);
  assert_int_equal(kc_events_record(R.ev, "billing", o, KC_EVENT_TYPE_NORMAL, "Synced", "ok"), 0);
  assert_int_equal(kc_events_record(R.ev, NULL, o, KC_EVENT_TYPE_NORMAL, "Synced", "ok"), 0);
  flush();
  kc_str ns = kc_obj_namespace(o), name = kc_obj_name(o);
  char nsb[128], nameb[256];
  snprintf(nsb, sizeof nsb, "%.*s", (int)ns.len, ns.ptr);
  snprintf(nameb, sizeof nameb, "%.*s", (int)name.len, name.ptr);
  sim_event evs[8];
  int n = list_events(nsb, nameb, evs, 8);
  assert_int_equal(n, 3);
  int seen = 0;
  for (int i = 0; i < n; i++) {
    assert_string_equal(evs[i].component, evs[i].reporting);
    if (!strcmp(evs[i].component, "kctrld.io/teams") && evs[i].count == 3) seen |= 1;
    if (!strcmp(evs[i].component, "kctrld.io/billing") && evs[i].count == 1) seen |= 2;
    if (!strcmp(evs[i].component, "kctrld") && evs[i].count == 1) seen |= 4;
  }
  assert_int_equal(seen, 7);
  kc_obj_unref(o);
}

/* An object name is the server's data: the Event name built from it is
 * written by the JSON writer, so a quote in it yields a valid body that the
 * server refuses as an invalid name (422), not a broken document (400). */
static void test_sim_event_name_is_escaped(void **state) {
  static const char doc[] = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
                            "{\"name\":\"q\\\"uote\\\\\",\"namespace\":\"icx\",\"uid\":\"u-1\"}}";
  char err[128];
  kc_obj *o = kc_obj_parse(doc, sizeof doc - 1, NULL, err, sizeof err);
  assert_non_null(o);
  assert_int_equal(sim_call("DELETE", "/_apisim/counters", NULL, NULL, NULL), 200);
  assert_int_equal(kc_events_record(R.ev, "teams", o, KC_EVENT_TYPE_NORMAL, "Odd", "m"), 0);
  flush();
  char *body = NULL;
  assert_int_equal(sim_call("GET", "/_apisim/requests", NULL, NULL, &body), 200);
  assert_non_null(body);
  assert_non_null(strstr(body, "\"method\":\"POST\""));
  assert_non_null(strstr(body, "\"code\":422"));
  assert_null(strstr(body, "\"code\":400"));
  free(body);
  kc_obj_unref(o);
}

static void test_sim_aggregate_and_404(void **state) {
  kc_obj *o = tu_fixture_obj("pod-k9s-sidecar.json", NULL);
  char msg[64];
  for (int i = 1; i <= 12; i++) {
    snprintf(msg, sizeof msg, "container %d crashed", i);
    assert_int_equal(kc_events_record(R.ev, NULL, o, KC_EVENT_TYPE_WARNING, "Crash", msg), 0);
  }
  flush();
  kc_str ns = kc_obj_namespace(o), name = kc_obj_name(o);
  char nsb[128], nameb[256];
  snprintf(nsb, sizeof nsb, "%.*s", (int)ns.len, ns.ptr);
  snprintf(nameb, sizeof nameb, "%.*s", (int)name.len, name.ptr);
  sim_event evs[32];
  int n = list_events(nsb, nameb, evs, 32);
  /* 9 plain Events and one combined Event for messages 10..12 (count 3). */
  assert_int_equal(n, 10);
  int combined = 0;
  const sim_event *first = NULL;
  for (int i = 0; i < n; i++) {
    if (!strncmp(evs[i].message, KC_EVENTS_COMBINED_PREFIX, strlen(KC_EVENTS_COMBINED_PREFIX))) {
      combined++;
      assert_string_equal(evs[i].message, KC_EVENTS_COMBINED_PREFIX "container 12 crashed");
      assert_int_equal(evs[i].count, 3);
    } else {
      assert_int_equal(evs[i].count, 1);
    }
    if (!strcmp(evs[i].message, "container 1 crashed")) first = &evs[i];
  }
  assert_int_equal(combined, 1);
  assert_non_null(first);
  /* The Event of message 1 expires: the next occurrence's PATCH gets 404
   * and the Event is created again under its name with count 2. */
  char path[512];
  snprintf(path, sizeof path, "/api/v1/namespaces/%s/events/%s", nsb, first->name);
  char gone[256];
  snprintf(gone, sizeof gone, "%s", first->name);
  assert_int_equal(sim_call("DELETE", path, NULL, NULL, NULL), 200);
  kc_events_stats st0, st;
  kc_events_get_stats(R.ev, &st0);
  assert_int_equal(kc_events_record(R.ev, NULL, o, KC_EVENT_TYPE_WARNING, "Crash", "container 1 crashed"), 0);
  flush();
  kc_events_get_stats(R.ev, &st);
  assert_int_equal(st.created - st0.created, 1);
  assert_int_equal(st.patched - st0.patched, 0);
  n = list_events(nsb, nameb, evs, 32);
  assert_int_equal(n, 10);
  bool found = false;
  for (int i = 0; i < n; i++) {
    if (strcmp(evs[i].name, gone) != 0) continue;
    found = true;
    assert_int_equal(evs[i].count, 2);
    assert_string_equal(evs[i].message, "container 1 crashed");
  }
  assert_true(found);
  kc_obj_unref(o);
}

/* Cluster-scoped objects' Events go to "default". A full queue drops. */
static void test_sim_cluster_scoped_and_full_queue(void **state) {
  kc_obj *o = tu_fixture_obj("node-kubernetes-fieldmanager.json", NULL);
  kc_events_stats st0, st;
  kc_events_get_stats(R.ev, &st0);
  char reason[32];
  /* 70 records without running the loop: the queue holds 64. */
  for (int i = 0; i < 70; i++) {
    snprintf(reason, sizeof reason, "Reason%d", i);
    assert_int_equal(kc_events_record(R.ev, NULL, o, KC_EVENT_TYPE_NORMAL, reason, "m"), 0);
  }
  kc_events_get_stats(R.ev, &st);
  assert_int_equal(st.dropped_queue - st0.dropped_queue, 6);
  assert_int_equal(st.queued, 64);
  flush();
  kc_events_get_stats(R.ev, &st);
  assert_int_equal(st.queued, 0);
  assert_int_equal(st.created - st0.created, 25); /* the spam budget */
  assert_int_equal(st.dropped_spam - st0.dropped_spam, 39);
  char nameb[256];
  snprintf(nameb, sizeof nameb, "%.*s", (int)kc_obj_name(o).len, kc_obj_name(o).ptr);
  sim_event evs[32];
  assert_int_equal(list_events("default", nameb, evs, 32), 25);
  kc_obj_unref(o);
}

/* Workers record concurrently while the loop drains. */
struct thr_arg {
  kc_obj *o;
  int id;
};

static void *recorder_thread(void *p) {
  struct thr_arg *a = p;
  char msg[32];
  for (int i = 0; i < 200; i++) {
    snprintf(msg, sizeof msg, "t%d", a->id);
    if (kc_events_record(R.ev, NULL, a->o, KC_EVENT_TYPE_NORMAL, "Threaded", msg) != 0) return (void *)1;
  }
  return NULL;
}

static void test_sim_threads(void **state) {
  kc_obj *o = tu_fixture_obj("configmap-k9s.json", NULL);
  kc_events_stats st0, st;
  kc_events_get_stats(R.ev, &st0);
  pthread_t t[4];
  struct thr_arg args[4];
  for (int i = 0; i < 4; i++) {
    args[i] = (struct thr_arg){o, i};
    assert_int_equal(pthread_create(&t[i], NULL, recorder_thread, &args[i]), 0);
  }
  /* Run the loop while they record. */
  for (int i = 0; i < 50; i++) uv_run(&R.loop, UV_RUN_NOWAIT);
  for (int i = 0; i < 4; i++) {
    void *r;
    assert_int_equal(pthread_join(t[i], &r), 0);
    assert_null(r);
  }
  flush();
  kc_events_get_stats(R.ev, &st);
  uint64_t seen = (st.created - st0.created) + (st.patched - st0.patched) +
                  (st.dropped_spam - st0.dropped_spam) + (st.dropped_queue - st0.dropped_queue);
  assert_int_equal(seen, 800);
  assert_int_equal(st.created - st0.created + st.patched - st0.patched, 25);
  assert_int_equal(st.failed - st0.failed, 0);
  kc_obj_unref(o);
}

/* A record's own fence (fence_capture) decides instead of may_write:
 * refused when recording, written while the fence admits, dropped when the
 * fence no longer admits at send time; tokens are freed every way. */
static struct fence_fake {
  bool active, refuse; /* the recording thread is fenced; its fence refuses now */
  int gen;             /* the fence's current acquisition */
  int tokens;          /* tokens alive */
} F;

static bool never_write(void *ud) { return false; }

static void *fence_capture(void *ud, bool *refused) {
  *refused = false;
  if (!F.active) return NULL;
  if (F.refuse) {
    *refused = true;
    return NULL;
  }
  int *t = malloc(sizeof *t);
  assert_non_null(t);
  *t = F.gen;
  F.tokens++;
  return t;
}
static bool fence_ok(void *token) { return *(int *)token == F.gen; }
static void fence_free(void *token) {
  F.tokens--;
  free(token);
}

static void test_sim_fenced_records(void **state) {
  kc_events *ev = NULL;
  kc_events_options bad = {.api = R.api, .fence_capture = fence_capture};
  assert_int_equal(kc_events_new(&R.loop, &bad, &ev), -EINVAL); /* all three or none */
  kc_events_options eo = {.api = R.api,
                          .may_write = never_write, /* e.g. not the leader */
                          .fence_capture = fence_capture,
                          .fence_ok = fence_ok,
                          .fence_free = fence_free};
  assert_int_equal(kc_events_new(&R.loop, &eo, &ev), 0);
  kc_obj *o = tu_fixture_obj("configmap-k9s.json", NULL);
  kc_events_stats st;
  F = (struct fence_fake){.active = true};
  /* fenced and admitted: written although may_write is false */
  assert_int_equal(kc_events_record(ev, NULL, o, KC_EVENT_TYPE_NORMAL, "Fenced", "admitted"), 0);
  kc_events_flush(ev, 10000, on_flushed, &R.loop);
  uv_run(&R.loop, UV_RUN_DEFAULT);
  kc_events_get_stats(ev, &st);
  assert_int_equal(st.created, 1);
  assert_int_equal(st.skipped, 0);
  /* refused when recorded */
  F.refuse = true;
  assert_int_equal(kc_events_record(ev, NULL, o, KC_EVENT_TYPE_NORMAL, "Fenced", "refused"), 0);
  F.refuse = false;
  kc_events_get_stats(ev, &st);
  assert_int_equal(st.skipped, 1);
  assert_int_equal(st.queued, 0);
  /* admitted when recorded, the range lost (and claimed again) before sending */
  assert_int_equal(kc_events_record(ev, NULL, o, KC_EVENT_TYPE_NORMAL, "Fenced", "lost"), 0);
  assert_int_equal(F.tokens, 1);
  F.gen++;
  /* not fenced: may_write (false) decides */
  F.active = false;
  assert_int_equal(kc_events_record(ev, NULL, o, KC_EVENT_TYPE_NORMAL, "Unfenced", "leader only"), 0);
  kc_events_flush(ev, 10000, on_flushed, &R.loop);
  uv_run(&R.loop, UV_RUN_DEFAULT);
  kc_events_get_stats(ev, &st);
  assert_int_equal(st.created, 1);
  assert_int_equal(st.skipped, 3);
  assert_int_equal(F.tokens, 0);
  /* a token still queued at close is freed too */
  F.active = true;
  assert_int_equal(kc_events_record(ev, NULL, o, KC_EVENT_TYPE_NORMAL, "Fenced", "at close"), 0);
  assert_int_equal(F.tokens, 1);
  kc_events_close(ev);
  uv_run(&R.loop, UV_RUN_NOWAIT);
  assert_int_equal(F.tokens, 0);
  sim_event evs[8];
  char nameb[256];
  snprintf(nameb, sizeof nameb, "%.*s", (int)kc_obj_name(o).len, kc_obj_name(o).ptr);
  char nsb[128];
  snprintf(nsb, sizeof nsb, "%.*s", (int)kc_obj_namespace(o).len, kc_obj_namespace(o).ptr);
  int n = list_events(nsb, nameb, evs, 8), admitted = 0;
  for (int i = 0; i < n; i++) {
    assert_string_not_equal(evs[i].message, "lost");
    assert_string_not_equal(evs[i].message, "refused");
    admitted += strcmp(evs[i].message, "admitted") == 0;
  }
  assert_int_equal(admitted, 1);
  kc_obj_unref(o);
}

int main(void) {
  const struct CMUnitTest unit[] = {
      cmocka_unit_test(test_spam_filter),
      cmocka_unit_test(test_dedup),
      cmocka_unit_test(test_aggregation),
      cmocka_unit_test(test_lru_bound),
  };
  const struct CMUnitTest sim[] = {
      cmocka_unit_test(test_sim_dedup_and_spam),
      cmocka_unit_test(test_sim_aggregate_and_404),
      cmocka_unit_test(test_sim_reporting_controller),
      cmocka_unit_test(test_sim_event_name_is_escaped),
      cmocka_unit_test(test_sim_cluster_scoped_and_full_queue),
      cmocka_unit_test(test_sim_threads),
      cmocka_unit_test(test_sim_fenced_records),
  };
  int rc = cmocka_run_group_tests(unit, NULL, NULL);
  return rc | cmocka_run_group_tests(sim, sim_setup, sim_teardown);
}
