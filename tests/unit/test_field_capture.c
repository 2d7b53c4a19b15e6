/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for field capture (kobj.h "Field capture") and its use by the
 * store: values captured while an object is built must be exactly the
 * values kc_obj_get_each finds in the built object's text, in every build
 * mode (kc_obj_parse, streaming LIST and WATCH decode, input split
 * anywhere), on the real fixtures, and the store must index the same. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "watch/decode.h"
#include "watch/decode.h"
#include "cache/store.h"
#include "testutil.h"

/* ---- a capture spec: groups of paths ------------------------------------ */

typedef struct group {
  const char *name;
  const char *paths[8];
} group;

/* Exercises: plain paths, list paths, list-of-list, an index, a final "[]",
 * numbers and booleans, null values, paths ending at objects, missing and
 * impossible paths, bracketed keys, and managedFields content. */
static const group kGroups[] = {
    {"byNode", {"spec.nodeName"}},
    {"owners", {"metadata.ownerReferences[].uid", "metadata.ownerReferences[].kind"}},
    {"cfg",
     {"spec.volumes[].configMap.name", "spec.containers[].envFrom[].configMapRef.name",
      "spec.containers[].env[].valueFrom.configMapKeyRef.name", "spec.volumes[].projected.sources[].configMap.name"}},
    {"nums",
     {"spec.priority", "spec.containers[].ports[].containerPort", "spec.enableServiceLinks",
      "spec.terminationGracePeriodSeconds", "spec.containers[].securityContext.privileged"}},
    {"img", {"spec.containers[0].image", "spec.containers[1].image", "spec.containers[9].image"}},
    {"nothing",
     {"status.conditions[].lastProbeTime", "spec.securityContext", "spec.tolerations[]", "spec.nope",
      "spec.nodeName.deeper", "spec.nodeName[]", "metadata[0]"}},
    {"node",
     {"status.addresses[].address", "metadata.labels[\"kubernetes.io/hostname\"]", "spec.podCIDR",
      "status.nodeInfo.kubeletVersion", "status.capacity.pods"}},
    {"mf", {"metadata.managedFields[].manager", "metadata.managedFields[].time"}},
    {"args", {"spec.containers[].args[]", "spec.containers[].command[]", "spec.matrix[][]"}},
    {"annot", {"metadata.annotations[\"node.alpha.kubernetes.io/ttl\"]", "metadata.finalizers[]"}},
};
#define NGROUPS (sizeof kGroups / sizeof kGroups[0])

typedef struct spec {
  const char *paths[KC_CAPTURE_MAX_PATHS];
  uint32_t groups[KC_CAPTURE_MAX_PATHS];
  kc_capture_spec cs;
  uint64_t tag;
} spec;

static void spec_init(spec *s) {
  size_t n = 0;
  for (uint32_t g = 0; g < NGROUPS; g++)
    for (size_t p = 0; p < 8 && kGroups[g].paths[p]; p++) {
      s->paths[n] = kGroups[g].paths[p];
      s->groups[n++] = g;
    }
  s->cs = (kc_capture_spec){s->paths, s->groups, n};
  s->tag = kc_capture_tag(&s->cs);
  assert_true(s->tag != 0);
}

/* ---- value lists (multisets, compared sorted) --------------------------- */

typedef struct vals {
  char *v[512];
  size_t len[512];
  size_t n;
} vals;

static void vals_add(vals *vs, const char *p, size_t n) {
  assert_true(vs->n < 512);
  vs->v[vs->n] = malloc(n + 1);
  assert_non_null(vs->v[vs->n]);
  memcpy(vs->v[vs->n], p, n);
  vs->v[vs->n][n] = '\0';
  vs->len[vs->n++] = n;
}

static void vals_free(vals *vs) {
  for (size_t i = 0; i < vs->n; i++) free(vs->v[i]);
  vs->n = 0;
}

static int bytes_cmp(const char *a, size_t an, const char *b, size_t bn) {
  int c = memcmp(a, b, an < bn ? an : bn);
  return c ? c : (an > bn) - (an < bn);
}

static void vals_sort(vals *vs) {
  for (size_t i = 1; i < vs->n; i++)
    for (size_t j = i; j > 0 && bytes_cmp(vs->v[j - 1], vs->len[j - 1], vs->v[j], vs->len[j]) > 0; j--) {
      char *t = vs->v[j];
      size_t tl = vs->len[j];
      vs->v[j] = vs->v[j - 1], vs->len[j] = vs->len[j - 1];
      vs->v[j - 1] = t, vs->len[j - 1] = tl;
    }
}

static bool vals_has(const vals *vs, const char *s) {
  for (size_t i = 0; i < vs->n; i++)
    if (vs->len[i] == strlen(s) && memcmp(vs->v[i], s, vs->len[i]) == 0) return true;
  return false;
}

static bool scan_cb(const kc_json_value *v, void *ud) {
  if (v->type == KC_JSON_NULL || v->type == KC_JSON_OBJECT || v->type == KC_JSON_ARRAY) return true;
  char buf[4096];
  int n = kc_json_scalar_text(v, buf, sizeof buf);
  assert_true(n >= 0);
  vals_add(ud, buf, (size_t)n);
  return true;
}

/* What the store's fallback finds: kc_obj_get_each over the text. */
static void scan_group(const kc_obj *o, uint32_t g, vals *out) {
  for (size_t p = 0; p < 8 && kGroups[g].paths[p]; p++)
    assert_true(kc_obj_get_each(o, kGroups[g].paths[p], scan_cb, out) >= 0);
  vals_sort(out);
}

static void cap_group(const kc_obj *o, uint64_t tag, uint32_t g, vals *out) {
  kc_capture_cursor c;
  assert_true(kc_obj_capture_open(o, tag, &c));
  for (uint32_t k = 0; k <= g; k++) {
    uint32_t n = kc_capture_next_group(&c);
    for (uint32_t i = 0; i < n; i++) {
      kc_str v = kc_capture_next_value(&c);
      if (k == g) vals_add(out, v.ptr, v.len);
    }
  }
  vals_sort(out);
}

/* Every group: captured multiset == scanned multiset. Returns the total
 * number of values (so callers can check that something was found). */
static size_t check_obj(const kc_obj *o, const spec *s, const char *what) {
  size_t total = 0;
  for (uint32_t g = 0; g < NGROUPS; g++) {
    vals a = {0}, b = {0};
    cap_group(o, s->tag, g, &a);
    scan_group(o, g, &b);
    if (a.n != b.n) fail_msg("%s group %s: %zu captured, %zu in the text", what, kGroups[g].name, a.n, b.n);
    for (size_t i = 0; i < a.n; i++)
      if (bytes_cmp(a.v[i], a.len[i], b.v[i], b.len[i]) != 0)
        fail_msg("%s group %s: captured '%s', text '%s'", what, kGroups[g].name, a.v[i], b.v[i]);
    total += a.n;
    vals_free(&a);
    vals_free(&b);
  }
  return total;
}

/* ---- building in every mode -------------------------------------------- */

typedef struct got {
  kc_obj *objs[16];
  size_t n;
} got;

static int on_item(void *ud, kc_obj *o) {
  got *g = ud;
  assert_true(g->n < 16);
  g->objs[g->n++] = kc_obj_ref(o);
  return 0;
}

static int on_event(void *ud, const kc_watch_event *ev) {
  if (ev->obj) return on_item(ud, ev->obj);
  return 0;
}

static void got_free(got *g) {
  for (size_t i = 0; i < g->n; i++) kc_obj_unref(g->objs[i]);
  g->n = 0;
}

/* Decodes body in chunks of `chunk` bytes. */
static void decode(enum kc_decode_mode mode, const kc_transform *t, const char *body, size_t len,
                   size_t chunk, got *out) {
  kc_decoder_callbacks cbs = {.item = on_item, .event = on_event};
  kc_decoder *d = kc_decoder_new(mode, t, &cbs, out);
  assert_non_null(d);
  for (size_t off = 0; off < len; off += chunk) {
    size_t n = len - off < chunk ? len - off : chunk;
    int rc = kc_decoder_feed(d, body + off, n);
    if (rc) fail_msg("feed: %s", kc_decoder_error(d));
  }
  assert_int_equal(kc_decoder_finish(d), 0);
  kc_decoder_free(d);
}

/* Builds each JSON text in every mode (parse, LIST and WATCH at several
 * chunk sizes) with transform t and checks every object; returns the
 * values found in the first object per build (all builds must agree). */
static size_t check_all_modes(const char *const *texts, size_t ntexts, const kc_transform *t,
                              const spec *s) {
  char what[160];
  size_t expect = SIZE_MAX;
  /* kc_obj_parse (re-emitting mode) */
  for (size_t i = 0; i < ntexts; i++) {
    char err[256];
    kc_obj *o = kc_obj_parse(texts[i], strlen(texts[i]), t, err, sizeof err);
    if (!o) fail_msg("parse: %s", err);
    snprintf(what, sizeof what, "parse #%zu", i);
    size_t n = check_obj(o, s, what);
    if (i == 0) expect = n;
    kc_obj_unref(o);
  }
  /* LIST and WATCH bodies (raw mode) */
  size_t cap = 256;
  for (size_t i = 0; i < ntexts; i++) cap += strlen(texts[i]) + 64;
  char *list = malloc(cap), *watch = malloc(cap);
  assert_non_null(list);
  assert_non_null(watch);
  size_t ll = (size_t)snprintf(list, cap, "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"7\"},\"items\":[");
  size_t wl = 0;
  for (size_t i = 0; i < ntexts; i++) {
    ll += (size_t)snprintf(list + ll, cap - ll, "%s%s", i ? "," : "", texts[i]);
    wl += (size_t)snprintf(watch + wl, cap - wl, "{\"type\":\"ADDED\",\"object\":%s}\n", texts[i]);
  }
  ll += (size_t)snprintf(list + ll, cap - ll, "]}");
  static const size_t chunks[] = {1, 7, 333, 4096, SIZE_MAX / 2};
  for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
    for (int mode = 0; mode < 2; mode++) {
      got g = {0};
      if (mode == 0) decode(KC_DECODE_LIST, t, list, ll, chunks[c], &g);
      else decode(KC_DECODE_WATCH, t, watch, wl, chunks[c], &g);
      assert_int_equal(g.n, ntexts);
      for (size_t i = 0; i < g.n; i++) {
        snprintf(what, sizeof what, "%s chunk %zu #%zu", mode ? "watch" : "list", chunks[c], i);
        size_t n = check_obj(g.objs[i], s, what);
        if (i == 0) assert_int_equal(n, expect);
      }
      got_free(&g);
    }
  }
  free(list);
  free(watch);
  return expect;
}

static char *fixture(const char *name) {
  char path[256];
  snprintf(path, sizeof path, "objects/%s", name);
  return tu_fixture(path, NULL);
}

static const char *const kFixtures[] = {
    "pod-k8s-openapi-coredns.json", "pod-insights-operator-prometheus.json", "pod-k9s-sidecar.json",
    "node-kubernetes-fieldmanager.json", "deployment-k9s.json", "configmap-k9s.json",
    "event-k9s.json", "service-kubectl-neat.json"};
#define NFIX (sizeof kFixtures / sizeof kFixtures[0])

/* Captured == scanned on every fixture, every mode, with and without the
 * transforms that change the stored text (drop, metadata-only, type). */
static void test_fixtures_all_modes(void **state) {
  (void)state;
  spec s;
  spec_init(&s);
  char *texts[NFIX];
  for (size_t i = 0; i < NFIX; i++) texts[i] = fixture(kFixtures[i]);
  static const char *const drop_mf[] = {"metadata.managedFields", "status"};
  static const char *const drop_args[] = {"spec.containers[].args"};
  kc_transform ts[] = {
      {.capture = &s.cs},
      {.capture = &s.cs, .drop = drop_mf, .ndrop = 2},
      {.capture = &s.cs, .drop = drop_args, .ndrop = 1},
      {.capture = &s.cs, .metadata_only = true},
      {.capture = &s.cs, .kind = "Pod", .api_version = "v1"},
  };
  size_t first_vals[sizeof ts / sizeof ts[0]];
  for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) {
    /* one fixture first (its value count is compared across builds), then all */
    for (size_t i = 0; i < NFIX; i++) {
      const char *one[1] = {texts[i]};
      size_t n = check_all_modes(one, 1, &ts[k], &s);
      if (i == 0) first_vals[k] = n;
    }
    check_all_modes((const char *const *)texts, NFIX, &ts[k], &s);
  }
  /* Not vacuous: the coredns pod has values, fewer with managedFields and
   * status dropped, almost none in a metadata-only view. */
  assert_true(first_vals[0] > 10);
  assert_true(first_vals[1] < first_vals[0]);
  assert_true(first_vals[3] < first_vals[0]);
  for (size_t i = 0; i < NFIX; i++) free(texts[i]);
}

/* Known values on the fixtures: what each group must hold. */
static void test_fixture_values(void **state) {
  (void)state;
  spec s;
  spec_init(&s);
  kc_transform t = {.capture = &s.cs};
  char *pod = fixture("pod-k8s-openapi-coredns.json"), *node = fixture("node-kubernetes-fieldmanager.json");
  char err[256];
  kc_obj *p = kc_obj_parse(pod, strlen(pod), &t, err, sizeof err);
  kc_obj *n = kc_obj_parse(node, strlen(node), &t, err, sizeof err);
  assert_non_null(p);
  assert_non_null(n);
  vals v = {0};
  cap_group(p, s.tag, 0, &v);
  assert_int_equal(v.n, 1);
  assert_string_equal(v.v[0], "v1.30-control-plane");
  vals_free(&v);
  cap_group(p, s.tag, 1, &v); /* ownerReferences[].uid and [].kind */
  assert_int_equal(v.n, 2);
  assert_true(vals_has(&v, "c465d9ec-4cd3-4eb5-8745-e7a3e0bee730"));
  assert_true(vals_has(&v, "ReplicaSet"));
  vals_free(&v);
  cap_group(p, s.tag, 2, &v); /* configMap volume */
  assert_true(vals_has(&v, "coredns"));
  vals_free(&v);
  cap_group(p, s.tag, 3, &v); /* numbers and booleans as their text */
  assert_true(vals_has(&v, "2000000000"));
  assert_true(vals_has(&v, "53"));
  assert_true(vals_has(&v, "true"));
  assert_true(vals_has(&v, "30"));
  vals_free(&v);
  cap_group(p, s.tag, 5, &v); /* nulls, objects, arrays, absent: nothing */
  assert_int_equal(v.n, 0);
  vals_free(&v);
  cap_group(p, s.tag, 7, &v); /* managedFields[].manager and .time: 3 each */
  assert_int_equal(v.n, 6);
  vals_free(&v);
  cap_group(n, s.tag, 6, &v); /* node: three addresses, hostname label, pods */
  assert_true(vals_has(&v, "10.0.0.1"));
  assert_true(vals_has(&v, "192.168.0.1"));
  assert_true(vals_has(&v, "node-default-pool-something"));
  assert_true(vals_has(&v, "110"));
  vals_free(&v);
  cap_group(n, s.tag, 9, &v);
  assert_int_equal(v.n, 1);
  assert_string_equal(v.v[0], "0");
  vals_free(&v);
  kc_obj_unref(p);
  kc_obj_unref(n);
  free(pod);
  free(node);
}

/* Inserts `ins` right after the first occurrence of `at` in text. */
static char *insert_after(const char *text, const char *at, const char *ins) {
  const char *p = strstr(text, at);
  assert_non_null(p);
  size_t pre = (size_t)(p - text) + strlen(at), n = strlen(text) + strlen(ins) + 1;
  char *r = malloc(n);
  assert_non_null(r);
  memcpy(r, text, pre);
  strcpy(r + pre, ins);
  strcat(r, text + pre);
  return r;
}

/* An index path spelled inside managedFields strings (and keys of
 * fieldsV1) is not a value of that path. */
static void test_managed_fields_trap(void **state) {
  (void)state;
  spec s;
  spec_init(&s);
  char *pod = fixture("pod-k8s-openapi-coredns.json");
  char *trap = insert_after(
      pod, "\"managedFields\":[",
      "{\"manager\":\"{\\\"spec\\\":{\\\"nodeName\\\":\\\"evil\\\"},\\\"metadata\\\":{\\\"ownerReferences\\\":"
      "[{\\\"uid\\\":\\\"evil\\\"}]}}\",\"operation\":\"Update\",\"fieldsV1\":{\"f:spec\":{\"f:nodeName\":{}},"
      "\"spec\":{\"nodeName\":\"evil2\"}}},");
  const char *texts[1] = {trap};
  kc_transform t = {.capture = &s.cs};
  check_all_modes(texts, 1, &t, &s);
  got g = {0};
  size_t len = strlen(trap);
  char *list = malloc(len + 64);
  assert_non_null(list);
  int ll = snprintf(list, len + 64, "{\"items\":[%s]}", trap);
  decode(KC_DECODE_LIST, &t, list, (size_t)ll, 5, &g);
  assert_int_equal(g.n, 1);
  vals v = {0};
  cap_group(g.objs[0], s.tag, 0, &v);
  assert_int_equal(v.n, 1);
  assert_string_equal(v.v[0], "v1.30-control-plane");
  vals_free(&v);
  cap_group(g.objs[0], s.tag, 1, &v);
  assert_int_equal(v.n, 2);
  assert_false(vals_has(&v, "evil"));
  vals_free(&v);
  cap_group(g.objs[0], s.tag, 7, &v); /* the string itself, unescaped */
  assert_true(vals_has(&v, "{\"spec\":{\"nodeName\":\"evil\"},\"metadata\":{\"ownerReferences\":[{\"uid\":\"evil\"}]}}"));
  vals_free(&v);
  got_free(&g);
  free(list);
  free(trap);
  free(pod);
}

/* JSON corners no fixture has: duplicated keys (the first kept one counts,
 * as for kc_obj_get), escapes, number forms, nested lists, dropped first
 * occurrences. */
static void test_corners(void **state) {
  (void)state;
  spec s;
  spec_init(&s);
  static const char *const texts[] = {
      "{\"metadata\":{\"name\":\"d1\"},\"spec\":{\"nodeName\":\"first\",\"nodeName\":\"second\"}}",
      "{\"metadata\":{\"name\":\"d2\"},\"spec\":\"flat\",\"spec\":{\"nodeName\":\"x\"}}",
      "{\"metadata\":{\"name\":\"d3\"},\"spec\":{\"nodeName\":\"a\\u00e9\\\"b\\\\c\\/d\\ud83d\\ude00\\t\"}}",
      "{\"metadata\":{\"name\":\"d4\"},\"spec\":{\"priority\":-1.5e3,\"enableServiceLinks\":false,"
      "\"terminationGracePeriodSeconds\":null,\"matrix\":[[1,2],[],[\"3\",[4]],5]}}",
      "{\"metadata\":{\"name\":\"d5\",\"ownerReferences\":[{\"uid\":\"u1\",\"uid\":\"u1b\"},{},{\"uid\":7},"
      "{\"uid\":\"u1\"}]},\"spec\":{\"containers\":[{\"image\":\"i0\",\"args\":[\"a\",\"b\"]},{\"image\":\"i1\","
      "\"command\":[\"c\",null,{\"x\":1}]}]}}",
      "{\"metadata\":{\"name\":\"d6\"},\"spec\":{\"nodeName\":\"dropped\"},\"spec\":{\"nodeName\":\"kept\"}}",
      "{ \"metadata\" : { \"name\" : \"d7\" } , \"spec\" : { \"nodeName\" : \"spaced\" , \"priority\" : 3 } }",
  };
  kc_transform plain = {.capture = &s.cs};
  check_all_modes(texts, sizeof texts / sizeof texts[0], &plain, &s);
  static const char *const drop_first[] = {"spec.nodeName"};
  kc_transform dropped = {.capture = &s.cs, .drop = drop_first, .ndrop = 1};
  check_all_modes(texts, sizeof texts / sizeof texts[0], &dropped, &s);

  char err[256];
  static const struct {
    int text;
    uint32_t group;
    const char *want[6];
  } cases[] = {
      {0, 0, {"first"}},
      {1, 0, {NULL}}, /* the first "spec" is a string */
      {2, 0, {"a\xc3\xa9\"b\\c/d\xf0\x9f\x98\x80\t"}},
      {3, 3, {"-1.5e3", "false"}},
      {3, 8, {"1", "2", "3"}}, /* [4] is an array, 5 not a list: skipped */
      {4, 1, {"u1", "7", "u1"}},   /* duplicated uid: the first */
      {4, 4, {"i0", "i1"}},
      {4, 8, {"a", "b", "c"}},
      {5, 0, {"dropped"}},
      {6, 0, {"spaced"}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *tx = texts[cases[i].text];
    kc_obj *o = kc_obj_parse(tx, strlen(tx), &plain, err, sizeof err);
    assert_non_null(o);
    vals v = {0};
    cap_group(o, s.tag, cases[i].group, &v);
    size_t nw = 0;
    while (nw < 6 && cases[i].want[nw]) nw++;
    if (v.n != nw) fail_msg("case %zu: %zu values, want %zu", i, v.n, nw);
    for (size_t k = 0; k < nw; k++)
      if (!vals_has(&v, cases[i].want[k])) fail_msg("case %zu: no '%s'", i, cases[i].want[k]);
    vals_free(&v);
    kc_obj_unref(o);
  }
}

/* Specs that cannot be captured: builders ignore them, objects carry no
 * capture, consumers scan. */
static void test_not_capturable(void **state) {
  (void)state;
  const char *p1[] = {"kind"}, *p2[] = {"spec.a", "spec.b"}, *p3[] = {"spec..x"},
             *p4[] = {"a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q"}, *p5[] = {"[\"apiVersion\"]"};
  uint32_t g0[] = {0, 0}, gbad[] = {0, 2}, g1[] = {1};
  assert_true(kc_capture_tag(NULL) == 0);
  assert_true(kc_capture_tag(&(kc_capture_spec){p1, g0, 1}) == 0);
  assert_true(kc_capture_tag(&(kc_capture_spec){p5, g0, 1}) == 0);
  assert_true(kc_capture_tag(&(kc_capture_spec){p2, gbad, 2}) == 0);
  assert_true(kc_capture_tag(&(kc_capture_spec){p2, g1, 1}) == 0);
  assert_true(kc_capture_tag(&(kc_capture_spec){p3, g0, 1}) == 0);
  assert_true(kc_capture_tag(&(kc_capture_spec){p4, g0, 1}) == 0);
  assert_true(kc_capture_tag(&(kc_capture_spec){p2, g0, 0}) == 0);
  uint64_t a = kc_capture_tag(&(kc_capture_spec){p2, g0, 2});
  uint32_t g01[] = {0, 1};
  uint64_t b = kc_capture_tag(&(kc_capture_spec){p2, g01, 2});
  assert_true(a != 0 && b != 0 && a != b);
  kc_transform t = {.capture = &(kc_capture_spec){p1, g0, 1}};
  char err[128];
  kc_obj *o = kc_obj_parse("{\"kind\":\"Pod\"}", 14, &t, err, sizeof err);
  assert_non_null(o);
  kc_capture_cursor c;
  assert_false(o->captured);
  assert_false(kc_obj_capture_open(o, a, &c));
  kc_obj_unref(o);
  /* a store with more paths than a capture holds: no capture spec */
  const char *many[KC_STORE_MAX_INDEX_PATHS];
  char names[3][16], bufs[KC_STORE_MAX_INDEX_PATHS][24];
  for (int i = 0; i < KC_STORE_MAX_INDEX_PATHS; i++) {
    snprintf(bufs[i], sizeof bufs[i], "spec.f%d", i);
    many[i] = bufs[i];
  }
  kc_store_index_spec idx[3];
  for (int i = 0; i < 3; i++) {
    snprintf(names[i], sizeof names[i], "i%d", i);
    idx[i] = (kc_store_index_spec){.name = names[i], .paths = many, .npaths = KC_STORE_MAX_INDEX_PATHS};
  }
  kc_store *st = kc_store_new(idx, 2);
  assert_non_null(st);
  assert_non_null(kc_store_capture(st)); /* 64 paths */
  kc_store_free(st);
  st = kc_store_new(idx, 3);
  assert_non_null(st);
  assert_null(kc_store_capture(st)); /* 96 paths */
  kc_store_free(st);
  st = kc_store_new(NULL, 0);
  assert_non_null(st);
  assert_null(kc_store_capture(st));
  kc_store_free(st);
}

static void verify(kc_store *st) {
  char msg[256];
  if (kc_store_verify(st, msg, sizeof msg) != 0) fail_msg("verify: %s", msg);
}

static int count_by(kc_store *st, const char *index, const char *value) {
  kc_obj_vec v = {0};
  int n = kc_store_by_index(st, index, kc_str_c(value), &v);
  kc_obj_vec_release(&v);
  return n;
}

/* The store indexes captured objects like scanned ones: decode with the
 * store's capture, replace/upsert/delete, mixed with objects that have no
 * capture or one for another index set. kc_store_verify also compares
 * every captured object's values with a scan of its text. */
static void test_store_uses_capture(void **state) {
  (void)state;
  static const char *const cfg_paths[] = {"spec.volumes[].configMap.name",
                                          "spec.containers[].envFrom[].configMapRef.name"};
  kc_store_index_spec idx[] = {
      {.name = "byNode", .path = "spec.nodeName"},
      {.name = "owners", .path = "metadata.ownerReferences[].uid"},
      {.name = "cfg", .paths = cfg_paths, .npaths = 2},
      {.name = "prio", .path = "spec.priority"},
  };
  kc_store *st = kc_store_new(idx, 4);
  assert_non_null(st);
  const kc_capture_spec *cs = kc_store_capture(st);
  assert_non_null(cs);
  assert_int_equal(cs->npaths, 5);
  uint64_t tag = kc_capture_tag(cs);
  static const char *const drop[] = {"metadata.managedFields"};
  kc_transform t = {.capture = cs, .drop = drop, .ndrop = 1};

  char *texts[3] = {fixture("pod-k8s-openapi-coredns.json"), fixture("pod-insights-operator-prometheus.json"),
                    fixture("pod-k9s-sidecar.json")};
  size_t cap = 64;
  for (int i = 0; i < 3; i++) cap += strlen(texts[i]) + 1;
  char *list = malloc(cap);
  assert_non_null(list);
  int ll = snprintf(list, cap, "{\"items\":[%s,%s,%s]}", texts[0], texts[1], texts[2]);
  got g = {0};
  decode(KC_DECODE_LIST, &t, list, (size_t)ll, 4096, &g);
  assert_int_equal(g.n, 3);
  for (size_t i = 0; i < g.n; i++) {
    kc_capture_cursor c;
    assert_true(kc_obj_capture_open(g.objs[i], tag, &c));
  }
  assert_int_equal(kc_store_replace(st, g.objs, g.n, NULL, NULL), 0);
  verify(st);
  assert_int_equal(count_by(st, "byNode", "v1.30-control-plane"), 1);
  assert_int_equal(count_by(st, "byNode", "kind-control-plane"), 1);
  assert_int_equal(count_by(st, "byNode", "worker-0.imeixner20210707.lab.upshift.rdu2.redhat.com"), 1);
  assert_int_equal(count_by(st, "owners", "c465d9ec-4cd3-4eb5-8745-e7a3e0bee730"), 1);
  assert_int_equal(count_by(st, "cfg", "coredns"), 1);
  assert_int_equal(count_by(st, "prio", "2000000000"), 2); /* coredns, prometheus */
  assert_int_equal(count_by(st, "prio", "0"), 1);

  /* An update built without capture (host API write path): scanned. */
  const char *from = "\"nodeName\":\"v1.30-control-plane\"";
  char *p = strstr(texts[0], from);
  assert_non_null(p);
  memcpy(p + strlen("\"nodeName\":\""), "v1.31", 5);
  char err[256];
  kc_obj *plain = kc_obj_parse(texts[0], strlen(texts[0]), NULL, err, sizeof err);
  assert_non_null(plain);
  assert_false(plain->captured);
  assert_int_equal(kc_store_upsert(st, plain, NULL), 0);
  verify(st);
  assert_int_equal(count_by(st, "byNode", "v1.30-control-plane"), 0);
  assert_int_equal(count_by(st, "byNode", "v1.31-control-plane"), 1);

  /* Captured for another index set: the tag differs, the text is scanned. */
  const char *other_paths[] = {"spec.schedulerName"};
  uint32_t other_groups[] = {0};
  kc_capture_spec other = {other_paths, other_groups, 1};
  kc_transform t2 = {.capture = &other};
  memcpy(p + strlen("\"nodeName\":\""), "v1.32", 5);
  kc_obj *foreign = kc_obj_parse(texts[0], strlen(texts[0]), &t2, err, sizeof err);
  assert_non_null(foreign);
  assert_true(foreign->captured);
  kc_obj *old = NULL;
  assert_int_equal(kc_store_upsert(st, foreign, &old), 0);
  assert_ptr_equal(old, plain);
  kc_obj_unref(old);
  verify(st);
  assert_int_equal(count_by(st, "byNode", "v1.31-control-plane"), 0);
  assert_int_equal(count_by(st, "byNode", "v1.32-control-plane"), 1);
  assert_int_equal(count_by(st, "owners", "c465d9ec-4cd3-4eb5-8745-e7a3e0bee730"), 1);

  /* Delete a captured object: its values leave the index. */
  kc_obj *sc = g.objs[2];
  assert_int_equal(kc_store_delete(st, kc_obj_namespace(sc), kc_obj_name(sc), NULL), 0);
  verify(st);
  assert_int_equal(count_by(st, "byNode", "kind-control-plane"), 0);

  /* Relist with the captured objects again: the deleted one comes back;
   * the first keeps its stored instance (same uid and resourceVersion). */
  assert_int_equal(kc_store_replace(st, g.objs, g.n, NULL, NULL), 0);
  verify(st);
  assert_int_equal(count_by(st, "byNode", "v1.32-control-plane"), 1);
  assert_int_equal(count_by(st, "byNode", "v1.30-control-plane"), 0);
  assert_int_equal(count_by(st, "byNode", "kind-control-plane"), 1);
  assert_int_equal(kc_store_count(st), 3);

  kc_obj_unref(plain);
  kc_obj_unref(foreign);
  got_free(&g);
  kc_store_free(st);
  free(list);
  for (int i = 0; i < 3; i++) free(texts[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fixtures_all_modes), cmocka_unit_test(test_fixture_values),
      cmocka_unit_test(test_managed_fields_trap), cmocka_unit_test(test_corners),
      cmocka_unit_test(test_not_capturable),     cmocka_unit_test(test_store_uses_capture),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
