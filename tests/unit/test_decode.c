/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/watch/decode.c: LIST and WATCH bodies from the real
 * fixtures, replayed with every split, plus malformed input and limits. */
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
#include "json/jsonlex.h"
#include "testutil.h"

/* What the callbacks saw: one line per event/item, "TYPE key rv json". */
typedef struct rec {
  char **lines;
  size_t n, cap;
  kc_obj **objs; /* kept references, to check lifetime beyond the callback */
  int stop_at;   /* callback returns -ECANCELED at this 1-based count */
  bool keep;
  kc_status last_status;
  bool iee;
  kc_list_meta meta;
  char meta_rv[64], meta_cont[256], meta_kind[64], meta_apiv[64], meta_shard[256];
  int list_end_calls;
} rec;

static void rec_add(rec *r, const char *type, kc_obj *o) {
  char key[256] = "";
  if (o) kc_obj_key(o, key, sizeof key);
  size_t len = (o ? kc_obj_text_len(o) : 0) + 600;
  char *line = malloc(len);
  assert_non_null(line);
  snprintf(line, len, "%s %s %.*s %s", type, key, o ? (int)kc_obj_resource_version(o).len : 0,
           o && kc_obj_resource_version(o).ptr ? kc_obj_resource_version(o).ptr : "",
           o ? kc_obj_text(o).ptr : "-");
  if (r->n == r->cap) {
    r->cap = r->cap ? r->cap * 2 : 16;
    r->lines = realloc(r->lines, r->cap * sizeof *r->lines);
    r->objs = realloc(r->objs, r->cap * sizeof *r->objs);
    assert_non_null(r->lines);
    assert_non_null(r->objs);
  }
  r->objs[r->n] = r->keep ? kc_obj_ref(o) : NULL;
  r->lines[r->n++] = line;
}

static void rec_free(rec *r) {
  for (size_t i = 0; i < r->n; i++) {
    free(r->lines[i]);
    kc_obj_unref(r->objs[i]);
  }
  free(r->lines);
  free(r->objs);
  memset(r, 0, sizeof *r);
}

static int on_event(void *ud, const kc_watch_event *ev) {
  rec *r = ud;
  assert_int_equal(ev->index, r->n + 1);
  char t[80];
  snprintf(t, sizeof t, "%s%s", ev->type == KC_WATCH_UNKNOWN ? "?" : "", ev->type_name);
  assert_true(ev->type == KC_WATCH_UNKNOWN ||
              strcmp(ev->type_name, kc_watch_type_name(ev->type)) == 0);
  rec_add(r, t, ev->obj);
  if (ev->type == KC_WATCH_ERROR) {
    assert_non_null(ev->status);
    r->last_status = *ev->status;
  } else {
    assert_null(ev->status);
  }
  if (ev->initial_events_end) r->iee = true;
  if (r->stop_at && (int)r->n == r->stop_at) return -ECANCELED;
  return 0;
}

static int on_item(void *ud, kc_obj *o) {
  rec *r = ud;
  rec_add(r, "ITEM", o);
  if (r->stop_at && (int)r->n == r->stop_at) return -ECANCELED;
  return 0;
}

static int on_list_end(void *ud, const kc_list_meta *m) {
  rec *r = ud;
  r->meta = *m;
  snprintf(r->meta_rv, sizeof r->meta_rv, "%s", m->resource_version);
  snprintf(r->meta_cont, sizeof r->meta_cont, "%s", m->continue_token);
  snprintf(r->meta_kind, sizeof r->meta_kind, "%s", m->kind);
  snprintf(r->meta_apiv, sizeof r->meta_apiv, "%s", m->api_version);
  snprintf(r->meta_shard, sizeof r->meta_shard, "%s", m->shard_selector);
  r->list_end_calls++;
  return 0;
}

static const kc_decoder_callbacks cbs = {on_item, on_list_end, on_event, NULL, NULL};

/* Decodes `text` fed in pieces: at `split` (two pieces) when chunk == 0,
 * else in chunks of `chunk` bytes. Returns the final rc; err gets the text. */
static int run(enum kc_decode_mode mode, const kc_transform *t, const char *text, size_t len,
               size_t split, size_t chunk, rec *r, char *err, size_t errlen) {
  kc_decoder *d = kc_decoder_new(mode, t, &cbs, r);
  assert_non_null(d);
  int rc = 0;
  if (chunk == 0) {
    rc = kc_decoder_feed(d, text, split);
    if (rc == 0) rc = kc_decoder_feed(d, text + split, len - split);
  } else {
    for (size_t off = 0; off < len && rc == 0; off += chunk)
      rc = kc_decoder_feed(d, text + off, len - off < chunk ? len - off : chunk);
  }
  if (rc == 0) rc = kc_decoder_finish(d);
  if (err) snprintf(err, errlen, "%s", kc_decoder_error(d));
  if (rc == 0) assert_string_equal(kc_decoder_error(d), "");
  assert_int_equal(kc_decoder_count(d), r->n - (rc == -ECANCELED ? 1 : 0));
  kc_decoder_free(d);
  return rc;
}

/* Every identity slice and label of o points at the value kc_obj_get finds
 * in o's own text (so the slices moved with any inserted type members), and
 * the text is valid JSON with the same type. */
static void assert_slices(const kc_obj *o) {
  static const struct {
    enum kc_obj_field f;
    const char *path;
  } f[] = {{KC_OBJ_KIND, "kind"},
           {KC_OBJ_API_VERSION, "apiVersion"},
           {KC_OBJ_NAMESPACE, "metadata.namespace"},
           {KC_OBJ_NAME, "metadata.name"},
           {KC_OBJ_UID, "metadata.uid"},
           {KC_OBJ_RESOURCE_VERSION, "metadata.resourceVersion"},
           {KC_OBJ_CREATION_TIMESTAMP, "metadata.creationTimestamp"}};
  kc_json_value v;
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
    kc_str sl = kc_obj_field(o, f[i].f);
    assert_int_equal(kc_obj_get(o, f[i].path, &v), 0);
    if (!sl.ptr) {
      assert_true(v.type != KC_JSON_STRING);
      continue;
    }
    if (v.type != KC_JSON_STRING || v.raw.ptr + 1 != sl.ptr || v.raw.len != sl.len + 2)
      fail_msg("%s: slice '%.*s' is not the value in the text", f[i].path, (int)sl.len, sl.ptr);
  }
  for (uint32_t i = 0; i < o->nlabels; i++) {
    char path[300];
    snprintf(path, sizeof path, "metadata.labels[\"%.*s\"]", (int)kc_obj_label_key(o, i).len,
             kc_obj_label_key(o, i).ptr);
    assert_int_equal(kc_obj_get(o, path, &v), 0);
    assert_int_equal(v.type, KC_JSON_STRING);
    assert_ptr_equal(v.raw.ptr + 1, kc_obj_label_value(o, i).ptr);
    assert_int_equal(kc_obj_label_key(o, i).ptr[kc_obj_label_key(o, i).len], '"');
  }
  char err[256];
  kc_obj *re = kc_obj_parse(kc_obj_text(o).ptr, kc_obj_text_len(o), NULL, err, sizeof err);
  if (!re) fail_msg("not valid JSON: %s: %s", err, kc_obj_text(o).ptr);
  assert_true(kc_str_eq(kc_obj_kind(re), kc_obj_kind(o)));
  assert_true(kc_str_eq(kc_obj_api_version(re), kc_obj_api_version(o)));
  assert_int_equal(re->nlabels, o->nlabels);
  kc_obj_unref(re);
}

static void assert_same(const rec *a, const rec *b) {
  assert_int_equal(a->n, b->n);
  for (size_t i = 0; i < a->n; i++) assert_string_equal(a->lines[i], b->lines[i]);
}

static void test_watch_initial_events(void **state) {
  (void)state;
  size_t len;
  char *text = tu_fixture("watch/watch-pods-sendinitialevents-k8s-openapi.ndjson", &len);
  rec ref = {.keep = true};
  assert_int_equal(run(KC_DECODE_WATCH, NULL, text, len, len, 0, &ref, NULL, 0), 0);
  static const char *names[] = {"coredns-55cb58b774-8mcpn",
                                "coredns-55cb58b774-flwnw",
                                "etcd-v1.30-control-plane",
                                "kindnet-b46lt",
                                "kube-apiserver-v1.30-control-plane",
                                "kube-controller-manager-v1.30-control-plane",
                                "kube-proxy-xrxtj",
                                "kube-scheduler-v1.30-control-plane"};
  static const char *rvs[] = {"454", "450", "413", "403", "351", "412", "401", "411"};
  /* The object text as sent (etcd's carries one \u0026 escape). */
  static const size_t lens[] = {7552, 7552, 7024, 7310, 9373, 9153, 6843, 6040};
  assert_int_equal(ref.n, 9);
  for (int i = 0; i < 8; i++) {
    char want[128];
    snprintf(want, sizeof want, "ADDED kube-system/%s %s {", names[i], rvs[i]);
    assert_true(strncmp(ref.lines[i], want, strlen(want)) == 0);
    assert_int_equal(kc_obj_text_len(ref.objs[i]), lens[i]);
    assert_int_equal(ref.objs[i]->refs, 1); /* the decoder let go of its reference */
  }
  assert_true(strncmp(ref.lines[8], "BOOKMARK  605 {", 15) == 0);
  assert_true(ref.iee);
  /* The first event's object is the coredns object fixture, byte for byte
   * once minified. */
  size_t flen;
  char *ftext = tu_fixture("objects/pod-k8s-openapi-coredns.json", &flen);
  char err[256];
  kc_obj *fo = kc_obj_parse(ftext, flen, NULL, err, sizeof err);
  assert_non_null(fo);
  assert_int_equal(kc_obj_text_len(fo), kc_obj_text_len(ref.objs[0]));
  assert_memory_equal(kc_obj_text(fo).ptr, kc_obj_text(ref.objs[0]).ptr, kc_obj_text_len(fo));
  kc_obj_unref(fo);
  free(ftext);

  /* One byte per feed: a split at every offset of the stream at once. Then
   * other chunk sizes, including ones that straddle events. */
  static const size_t chunks[] = {1, 2, 3, 7, 64, 1000, 4096, 16384};
  for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
    rec r = {0};
    assert_int_equal(run(KC_DECODE_WATCH, NULL, text, len, 0, chunks[c], &r, err, sizeof err), 0);
    assert_same(&r, &ref);
    rec_free(&r);
  }
  /* Two pieces, split at every offset of the first event and around every
   * event boundary (the rest of the offsets are covered by the 1-byte run). */
  for (size_t off = 0; off <= len; off++) {
    bool near_nl = false;
    for (size_t k = off > 40 ? off - 40 : 0; k < off + 40 && k < len; k++)
      if (text[k] == '\n') near_nl = true;
    if (off > 2000 && !near_nl) continue;
    rec r = {0};
    assert_int_equal(run(KC_DECODE_WATCH, NULL, text, len, off, 0, &r, err, sizeof err), 0);
    assert_same(&r, &ref);
    rec_free(&r);
  }
  rec_free(&ref);
  free(text);
}

static void test_watch_every_split_utf8(void **state) {
  (void)state;
  /* A CR watch stream from the fixtures, extended with an event carrying
   * non-ASCII text (2-, 3- and 4-byte UTF-8, escaped and raw), escapes and
   * numbers at the end of containers, CRLF between events, no final newline. */
  size_t flen;
  char *fb = tu_fixture("watch/watch-foobars-k8s-openapi.ndjson", &flen);
  const char *extra =
      "\r\n{\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
      "\"caf\xc3\xa9\",\"namespace\":\"d\xc3\xa9mo\",\"resourceVersion\":\"557\",\"labels\":"
      "{\"app\":\"\\u0061pp\"}},\"data\":{\"greeting\":\"h\xc3\xa9llo w\xc3\xb6rld \xe2\x80\x94 "
      "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80 \\u00e9\\ud83d\\ude00 \\\"q\\\" \\\\ "
      "\\n\",\"n\":[1,-2.5e-3,12345678901234567890]}},\"type\":\"MODIFIED\"}";
  size_t len = flen + strlen(extra);
  char *text = malloc(len + 1);
  assert_non_null(text);
  memcpy(text, fb, flen);
  memcpy(text + flen, extra, strlen(extra) + 1);
  free(fb);

  rec ref = {.keep = true};
  char err[256];
  assert_int_equal(run(KC_DECODE_WATCH, NULL, text, len, len, 0, &ref, err, sizeof err), 0);
  assert_int_equal(ref.n, 3);
  assert_true(strncmp(ref.lines[0], "ADDED default/fb1 555 {", 23) == 0);
  assert_true(strncmp(ref.lines[1], "ADDED default/fb2 556 {", 23) == 0);
  kc_obj *o = ref.objs[2];
  assert_true(strncmp(ref.lines[2], "MODIFIED d\xc3\xa9mo/caf\xc3\xa9 557 {", 20) == 0);
  kc_json_value v;
  char buf[256];
  assert_int_equal(kc_obj_get(o, "data.greeting", &v), 0);
  assert_true(kc_json_string(&v, buf, sizeof buf) > 0);
  assert_string_equal(buf, "h\xc3\xa9llo w\xc3\xb6rld \xe2\x80\x94 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e "
                           "\xf0\x9f\x98\x80 \xc3\xa9\xf0\x9f\x98\x80 \"q\" \\ \n");
  assert_int_equal(kc_obj_get(o, "data.n[2]", &v), 0);
  assert_int_equal(v.raw.len, 20); /* the number as text, not rounded */
  assert_memory_equal(v.raw.ptr, "12345678901234567890", 20);
  /* The decoder keeps the text as sent: an escaped label value stays escaped
   * (the API server never escapes label characters). */
  kc_str lv = kc_obj_label(o, kc_str_c("app"));
  assert_int_equal(lv.len, 8);
  assert_memory_equal(lv.ptr, "\\u0061pp", 8);

  for (size_t off = 0; off <= len; off++) {
    rec r = {0};
    int rc = run(KC_DECODE_WATCH, NULL, text, len, off, 0, &r, err, sizeof err);
    if (rc) fail_msg("split at %zu: %s", off, err);
    assert_same(&r, &ref);
    rec_free(&r);
  }
  rec_free(&ref);
  free(text);
}

static void test_watch_transform(void **state) {
  (void)state;
  size_t len;
  char *text = tu_fixture("watch/watch-pods-sendinitialevents-k8s-openapi.ndjson", &len);
  const char *drop[] = {"metadata.managedFields"};
  kc_transform t = {.drop = drop, .ndrop = 1, .metadata_only = false};
  rec r = {.keep = true};
  assert_int_equal(run(KC_DECODE_WATCH, &t, text, len, 0, 16384, &r, NULL, 0), 0);
  assert_int_equal(r.n, 9);
  for (size_t i = 0; i < r.n; i++) assert_null(strstr(kc_obj_text(r.objs[i]).ptr, "managedFields"));
  assert_int_equal(kc_obj_text_len(r.objs[0]), 4288); /* as kc_obj_parse with the same transform */
  rec_free(&r);
  /* metadata-only: the bookmark annotation survives. */
  kc_transform mo = {.drop = NULL, .ndrop = 0, .metadata_only = true};
  rec m = {.keep = true};
  assert_int_equal(run(KC_DECODE_WATCH, &mo, text, len, 0, 4096, &m, NULL, 0), 0);
  assert_int_equal(m.n, 9);
  for (size_t i = 0; i < m.n; i++) assert_null(strstr(kc_obj_text(m.objs[i]).ptr, "\"spec\""));
  assert_true(m.iee);
  rec_free(&m);
  /* Dropping the annotations does not hide the end-of-initial-events mark. */
  const char *drop2[] = {"metadata.annotations"};
  kc_transform t2 = {.drop = drop2, .ndrop = 1, .metadata_only = false};
  rec a = {0};
  assert_int_equal(run(KC_DECODE_WATCH, &t2, text, len, 0, 100, &a, NULL, 0), 0);
  assert_true(a.iee);
  rec_free(&a);
  free(text);
}

/* Raw copying with cuts: a pretty-printed object (whitespace everywhere)
 * with members dropped first, last, in the middle and inside array elements
 * gives, once minified, exactly what kc_obj_parse builds with the same
 * transform; and the same bytes at every split. */
static void test_watch_raw_cuts(void **state) {
  (void)state;
  size_t flen;
  char *obj = tu_fixture("objects/deployment-k9s.json", &flen);
  const char *pre = "{\"type\" : \"ADDED\",\n \"object\" :\n", *post = "\n}\n";
  size_t len = strlen(pre) + flen + strlen(post);
  char *text = malloc(len + 1);
  assert_non_null(text);
  snprintf(text, len + 1, "%s%s%s", pre, obj, post);
  const char *drop[] = {"kind", "metadata.annotations", "metadata.uid",
                        "spec.template.spec.containers[].resources",
                        "spec.template.spec.containers[].image", "status", "spec.replicas",
                        "metadata.labels[\"app\"]"};
  kc_transform t = {.drop = drop, .ndrop = 8, .metadata_only = false};
  char err[256];
  kc_obj *want = kc_obj_parse(obj, flen, &t, err, sizeof err);
  assert_non_null(want);
  assert_null(strstr(kc_obj_text(want).ptr, "\"status\""));
  rec ref = {.keep = true};
  assert_int_equal(run(KC_DECODE_WATCH, &t, text, len, len, 0, &ref, err, sizeof err), 0);
  assert_int_equal(ref.n, 1);
  kc_obj *got = ref.objs[0];
  kc_obj *min = kc_obj_parse(kc_obj_text(got).ptr, kc_obj_text_len(got), NULL, err, sizeof err);
  if (!min) fail_msg("raw text is not JSON (%s): %s", err, kc_obj_text(got).ptr);
  assert_string_equal(kc_obj_text(min).ptr, kc_obj_text(want).ptr);
  assert_true(kc_str_eq(kc_obj_name(got), kc_obj_name(want)));
  assert_null(kc_obj_uid(got).ptr);
  assert_null(kc_obj_kind(got).ptr);
  assert_int_equal(got->nlabels, 0);
  kc_obj_unref(min);
  for (size_t off = 0; off <= len; off++) {
    rec r = {0};
    assert_int_equal(run(KC_DECODE_WATCH, &t, text, len, off, 0, &r, err, sizeof err), 0);
    assert_same(&r, &ref);
    rec_free(&r);
  }
  /* Every member of an object dropped, and an object with one member. */
  const char *t2 = "{\"type\":\"ADDED\",\"object\":{\"status\":{\"a\":1},\"kind\":\"X\"}}"
                   "{\"type\":\"ADDED\",\"object\":{ \"status\" : [1,{\"b\":[]}] }}";
  const char *d2[] = {"status", "kind"};
  kc_transform tt = {.drop = d2, .ndrop = 2, .metadata_only = false};
  rec r2 = {.keep = true};
  assert_int_equal(run(KC_DECODE_WATCH, &tt, t2, strlen(t2), 0, 1, &r2, err, sizeof err), 0);
  assert_int_equal(r2.n, 2);
  assert_string_equal(kc_obj_text(r2.objs[0]).ptr, "{}");
  assert_string_equal(kc_obj_text(r2.objs[1]).ptr, "{}");
  rec_free(&r2);
  /* yajl also takes \v and \f as whitespace (found by fuzzing). */
  r2.keep = true;
  const char *t3 = "{\"type\":\"ADDED\",\"object\":{\"a\":1,\v\f\"status\"\f:\v2\v,\f\"b\":\v3}}";
  assert_int_equal(run(KC_DECODE_WATCH, &tt, t3, strlen(t3), 0, 1, &r2, err, sizeof err), 0);
  assert_string_equal(kc_obj_text(r2.objs[0]).ptr, "{\"a\":1\v,\f\"b\":\v3}");
  kc_json_value v;
  assert_int_equal(kc_obj_get(r2.objs[0], "b", &v), 0);
  assert_int_equal(v.type, KC_JSON_NUMBER);
  assert_int_equal(v.raw.len, 1);
  rec_free(&r2);
  kc_obj_unref(want);
  rec_free(&ref);
  free(text);
  free(obj);
}

static void test_watch_order_unknown_error(void **state) {
  (void)state;
  const char *text =
      "{\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"a\","
      "\"namespace\":\"ns\",\"resourceVersion\":\"7\"}},\"extra\":{\"x\":[1,{\"y\":[]}]},"
      "\"type\":\"DELETED\"}\n"
      "{\"type\":\"FUTURE\",\"object\":{\"metadata\":{\"name\":\"b\"}}}\n"
      "{\"type\":\"SOMETHING\"}\n"
      "  {\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":"
      "{\"resourceVersion\":\"12746\",\"creationTimestamp\":null},\"spec\":{},\"status\":{}}}"
      "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
      "\"status\":\"Failure\",\"message\":\"too old resource version: 1200 (3400)\","
      "\"reason\":\"Expired\",\"code\":410}}\n";
  rec r = {0};
  char err[256];
  assert_int_equal(run(KC_DECODE_WATCH, NULL, text, strlen(text), 0, 5, &r, err, sizeof err), 0);
  assert_int_equal(r.n, 5);
  assert_true(strncmp(r.lines[0], "DELETED ns/a 7 {\"kind\":\"Pod\"", 28) == 0);
  assert_true(strncmp(r.lines[1], "?FUTURE b  {", 12) == 0);
  assert_string_equal(r.lines[2], "?SOMETHING   -");
  assert_true(strncmp(r.lines[3], "BOOKMARK  12746 {", 17) == 0);
  assert_false(r.iee);
  assert_true(strncmp(r.lines[4], "ERROR  ", 7) == 0);
  assert_int_equal(r.last_status.code, 410);
  assert_string_equal(r.last_status.reason, "Expired");
  assert_string_equal(r.last_status.status, "Failure");
  assert_string_equal(r.last_status.message, "too old resource version: 1200 (3400)");
  rec_free(&r);
  /* ERROR with object first and metadata_only: the Status fields survive. */
  const char *e2 = "{\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
                   "\"code\":410,\"reason\":\"Gone\"},\"type\":\"ERROR\"}";
  kc_transform mo = {.drop = NULL, .ndrop = 0, .metadata_only = true};
  assert_int_equal(run(KC_DECODE_WATCH, &mo, e2, strlen(e2), 3, 0, &r, err, sizeof err), 0);
  assert_int_equal(r.last_status.code, 410);
  assert_string_equal(r.last_status.reason, "Gone");
  rec_free(&r);
  /* Empty body, whitespace only: no events, no error. */
  assert_int_equal(run(KC_DECODE_WATCH, NULL, "", 0, 0, 0, &r, err, sizeof err), 0);
  assert_int_equal(run(KC_DECODE_WATCH, NULL, " \n\r\n", 4, 1, 0, &r, err, sizeof err), 0);
  assert_int_equal(r.n, 0);
}

typedef struct bad_case {
  const char *text;
  int rc;
  const char *msg;
  size_t delivered;
} bad_case;

static void check_bad(enum kc_decode_mode mode, const bad_case *cases, size_t n) {
  char err[512];
  for (size_t i = 0; i < n; i++) {
    for (size_t chunk = 0; chunk <= 1; chunk++) {
      rec r = {0};
      const char *t = cases[i].text;
      size_t len = strlen(t);
      int rc = run(mode, NULL, t, len, len / 2, chunk, &r, err, sizeof err);
      if (rc != cases[i].rc) fail_msg("case %zu: rc %d want %d (%s)", i, rc, cases[i].rc, err);
      if (!strstr(err, cases[i].msg)) fail_msg("case %zu: '%s' lacks '%s'", i, err, cases[i].msg);
      if (strncmp(err, "offset ", 7) != 0) fail_msg("case %zu: no offset in '%s'", i, err);
      if (r.n != cases[i].delivered) fail_msg("case %zu: %zu delivered", i, r.n);
      rec_free(&r);
    }
  }
}

static void test_watch_malformed(void **state) {
  (void)state;
#define EV "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"x\"}}}\n"
  static const bad_case cases[] = {
      {EV EV "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"x\",}}}\n", -EBADMSG,
       "event 3: invalid JSON", 2},
      {EV "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"x\"}}", -EBADMSG,
       "event 2", 1}, /* truncated: the connection dropped */
      {EV "[1]\n", -EBADMSG, "event 2: event is an array, not an object", 1},
      {"\"ADDED\"\n", -EBADMSG, "event 1: event is a string, not an object", 0},
      {"{\"type\":1,\"object\":{}}", -EBADMSG, "\"type\" is a number, not a string", 0},
      {"{\"type\":\"ADDED\"}", -EBADMSG, "event 1: ADDED event without \"object\"", 0},
      {"{\"object\":{}}", -EBADMSG, "event 1: no \"type\"", 0},
      {"{\"type\":\"ADDED\",\"object\":[]}", -EBADMSG, "\"object\" is an array", 0},
      {"{\"type\":\"ADDED\",\"object\":\"x\"}", -EBADMSG, "\"object\" is a string", 0},
      {"{\"type\":\"ADDED\",\"object\":{},\"object\":{}}", -EBADMSG, "two \"object\" members", 0},
      {EV "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"\xe6\x97\"}}}", -EBADMSG,
       "event 2: invalid JSON", 1},
      {"{\"type\":\"ADDED\",\"object\":{\"a\":\"\x80\"}}", -EBADMSG, "invalid JSON", 0},
      {"{\"type\":\"ADDED\",\"object\":{}} // c\n", -EBADMSG, "invalid JSON", 1},
      {"{\"type\":\"ADDED\",\"object\":{\"a\":01}}", -EBADMSG, "invalid JSON", 0},
  };
  check_bad(KC_DECODE_WATCH, cases, sizeof cases / sizeof cases[0]);

  /* A callback error stops decoding; the error sticks. */
  size_t len;
  char *text = tu_fixture("watch/watch-pods-sendinitialevents-k8s-openapi.ndjson", &len);
  rec r = {.stop_at = 2};
  kc_decoder *d = kc_decoder_new(KC_DECODE_WATCH, NULL, &cbs, &r);
  assert_int_equal(kc_decoder_feed(d, text, len), -ECANCELED);
  assert_non_null(strstr(kc_decoder_error(d), "event 2: event callback failed"));
  assert_int_equal(kc_decoder_feed(d, "{}", 2), -ECANCELED);
  assert_int_equal(kc_decoder_finish(d), -ECANCELED);
  assert_int_equal(r.n, 2);
  assert_int_equal(kc_decoder_count(d), 1);
  kc_decoder_free(d);
  rec_free(&r);
  free(text);
}

static void test_limits(void **state) {
  (void)state;
  size_t len;
  char *text = tu_fixture("watch/watch-pods-sendinitialevents-k8s-openapi.ndjson", &len);
  /* Built text over the limit (objects are 6-9 KB minified). */
  rec r = {0};
  kc_decoder *d = kc_decoder_new(KC_DECODE_WATCH, NULL, &cbs, &r);
  kc_decoder_set_max_bytes(d, 7000);
  int rc = 0;
  for (size_t off = 0; off < len && rc == 0; off += 512)
    rc = kc_decoder_feed(d, text + off, len - off < 512 ? len - off : 512);
  assert_int_equal(rc, -E2BIG);
  assert_non_null(strstr(kc_decoder_error(d), "event 1: object larger than the limit of 7000"));
  kc_decoder_free(d);
  rec_free(&r);
  free(text);

  /* Input of one event over the limit outside the object (a long unknown
   * member yajl would buffer while it spans feeds). */
  size_t big = 64 * 1024;
  char *ev = malloc(big + 128);
  assert_non_null(ev);
  size_t n = (size_t)sprintf(ev, "{\"type\":\"ADDED\",\"junk\":\"");
  memset(ev + n, 'j', big);
  n += big;
  n += (size_t)sprintf(ev + n, "\",\"object\":{}}");
  d = kc_decoder_new(KC_DECODE_WATCH, NULL, &cbs, &r);
  kc_decoder_set_max_bytes(d, 16384);
  rc = 0;
  for (size_t off = 0; off < n && rc == 0; off += 1000)
    rc = kc_decoder_feed(d, ev + off, n - off < 1000 ? n - off : 1000);
  assert_int_equal(rc, -E2BIG);
  assert_non_null(strstr(kc_decoder_error(d), "event 1: larger than the limit of 16384 bytes"));
  kc_decoder_free(d);
  /* The same event passes with the default 16 MiB limit, and an object of
   * 2 MiB (> 1 MiB) goes through 16 KiB feeds. */
  assert_int_equal(run(KC_DECODE_WATCH, NULL, ev, n, 0, 16384, &r, NULL, 0), 0);
  assert_int_equal(r.n, 1);
  rec_free(&r);
  free(ev);
  size_t huge = 2u << 20;
  ev = malloc(huge + 256);
  assert_non_null(ev);
  n = (size_t)sprintf(ev, "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"big\"},"
                          "\"data\":{\"blob\":\"");
  for (size_t i = 0; i < huge; i++) ev[n + i] = (char)('a' + i % 26);
  n += huge;
  n += (size_t)sprintf(ev + n, "\"}}}\n");
  r.keep = true;
  assert_int_equal(run(KC_DECODE_WATCH, NULL, ev, n, 0, 16384, &r, NULL, 0), 0);
  assert_int_equal(r.n, 1);
  kc_json_value v;
  assert_int_equal(kc_obj_get(r.objs[0], "data.blob", &v), 0);
  assert_int_equal(v.raw.len, huge + 2);
  rec_free(&r);
  free(ev);

  /* Depth. */
  size_t depth = KC_OBJ_MAX_DEPTH + 5;
  char *deep = malloc(depth * 2 + 64);
  assert_non_null(deep);
  n = (size_t)sprintf(deep, "{\"type\":\"ADDED\",\"object\":{\"a\":");
  for (size_t i = 0; i < depth; i++) deep[n++] = '[';
  for (size_t i = 0; i < depth; i++) deep[n++] = ']';
  n += (size_t)sprintf(deep + n, "}}");
  char err[512];
  assert_int_equal(run(KC_DECODE_WATCH, NULL, deep, n, n / 3, 0, &r, err, sizeof err), -E2BIG);
  assert_non_null(strstr(err, "event 1: nesting deeper"));
  rec_free(&r);
  free(deep);
}

static void test_list_fixtures(void **state) {
  (void)state;
  size_t len;
  char *text = tu_fixture("watch/deploymentlist-k8s-openapi.json", &len);
  rec ref = {.keep = true};
  char err[256];
  assert_int_equal(run(KC_DECODE_LIST, NULL, text, len, len, 0, &ref, err, sizeof err), 0);
  assert_int_equal(ref.n, 1);
  assert_int_equal(ref.list_end_calls, 1);
  assert_string_equal(ref.meta_kind, "DeploymentList");
  assert_string_equal(ref.meta_rv, "563");
  assert_string_equal(ref.meta_cont, "");
  assert_false(ref.meta.has_remaining);
  assert_int_equal(ref.meta.nitems, 1);
  assert_true(strncmp(ref.lines[0], "ITEM kube-system/coredns ", 25) == 0);
  /* List items of built-ins come without kind/apiVersion: derived from the
   * list's own kind, which comes first here. */
  assert_true(kc_str_eq_c(kc_obj_kind(ref.objs[0]), "Deployment"));
  assert_true(kc_str_eq_c(kc_obj_api_version(ref.objs[0]), "apps/v1"));
  assert_int_equal(kc_obj_text_len(ref.objs[0]), 5902 + 43); /* "kind":"Deployment","apiVersion":"apps/v1", */
  assert_slices(ref.objs[0]);
  assert_int_equal(ref.objs[0]->generation, 1);
  for (size_t c = 1; c <= 3; c++) {
    rec r = {0};
    assert_int_equal(run(KC_DECODE_LIST, NULL, text, len, 0, c, &r, err, sizeof err), 0);
    assert_same(&r, &ref);
    assert_string_equal(r.meta_rv, "563");
    rec_free(&r);
  }
  for (size_t off = 0; off <= len; off++) {
    rec r = {0};
    assert_int_equal(run(KC_DECODE_LIST, NULL, text, len, off, 0, &r, err, sizeof err), 0);
    assert_same(&r, &ref);
    rec_free(&r);
  }
  rec_free(&ref);
  free(text);

  text = tu_fixture("watch/foobarlist-k8s-openapi.json", &len);
  rec cr = {.keep = true};
  assert_int_equal(run(KC_DECODE_LIST, NULL, text, len, 0, 1, &cr, err, sizeof err), 0);
  assert_int_equal(cr.n, 2);
  assert_string_equal(cr.meta_kind, "FooBarList");
  assert_string_equal(cr.meta_rv, "556");
  assert_true(kc_str_eq_c(kc_obj_kind(cr.objs[0]), "FooBar")); /* CR items carry kind */
  assert_int_equal(kc_obj_text_len(cr.objs[0]), 598);
  assert_int_equal(kc_obj_text_len(cr.objs[1]), 629);
  rec_free(&cr);
  free(text);
}

/* KEP-5866: metadata.shardInfo.selector of a filtered list (in any split),
 * absent, null, or with unknown members. */
static void test_list_shard_info(void **state) {
  (void)state;
  char err[512];
  rec r = {0};
  const char *t1 =
      "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"9\",\"shardInfo\":{\"x\":{\"selector\":\"no\"},"
      "\"selector\":\"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')\"},"
      "\"continue\":\"c\"},\"items\":[{\"metadata\":{\"name\":\"a\"}}]}";
  for (size_t chunk = 0; chunk < 4; chunk++) {
    assert_int_equal(run(KC_DECODE_LIST, NULL, t1, strlen(t1), 40, chunk, &r, err, sizeof err), 0);
    assert_true(r.meta.has_shard_info);
    assert_string_equal(r.meta_shard, "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')");
    assert_string_equal(r.meta_rv, "9");
    assert_string_equal(r.meta_cont, "c"); /* the envelope goes on after shardInfo */
    assert_int_equal(r.n, 1);
    rec_free(&r);
  }
  const char *t2 = "{\"metadata\":{\"resourceVersion\":\"9\"},\"items\":[]}";
  assert_int_equal(run(KC_DECODE_LIST, NULL, t2, strlen(t2), 3, 0, &r, err, sizeof err), 0);
  assert_false(r.meta.has_shard_info);
  assert_string_equal(r.meta_shard, "");
  rec_free(&r);
  const char *t3 = "{\"metadata\":{\"shardInfo\":null,\"resourceVersion\":\"9\"},\"items\":[]}";
  assert_int_equal(run(KC_DECODE_LIST, NULL, t3, strlen(t3), 3, 0, &r, err, sizeof err), 0);
  assert_false(r.meta.has_shard_info);
  assert_string_equal(r.meta_rv, "9");
  rec_free(&r);
}

static void test_list_shapes(void **state) {
  (void)state;
  char err[512];
  rec r = {0};
  /* metadata after items, continue + remainingItemCount, unknown members,
   * PartialObjectMetadataList. */
  const char *t1 =
      "{\"apiVersion\":\"meta.k8s.io/v1\",\"items\":[{\"kind\":\"PartialObjectMetadata\","
      "\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\","
      "\"resourceVersion\":\"4700\",\"labels\":{\"x\":\"y\"}}}],\"x\":{\"items\":[1]},"
      "\"kind\":\"PartialObjectMetadataList\",\"metadata\":{\"resourceVersion\":\"4711\","
      "\"continue\":\"eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ\",\"remainingItemCount\":753}}";
  assert_int_equal(run(KC_DECODE_LIST, NULL, t1, strlen(t1), 0, 7, &r, err, sizeof err), 0);
  assert_int_equal(r.n, 1);
  assert_string_equal(r.meta_kind, "PartialObjectMetadataList");
  assert_string_equal(r.meta_rv, "4711");
  assert_string_equal(r.meta_cont, "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ");
  assert_true(r.meta.has_remaining);
  assert_int_equal(r.meta.remaining_item_count, 753);
  assert_string_equal(r.meta_apiv, "meta.k8s.io/v1");
  rec_free(&r);
  /* items null, items empty with continue set (an empty page). */
  const char *t2 = "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"5\"},\"items\":null}";
  assert_int_equal(run(KC_DECODE_LIST, NULL, t2, strlen(t2), 3, 0, &r, err, sizeof err), 0);
  assert_int_equal(r.n, 0);
  assert_string_equal(r.meta_rv, "5");
  rec_free(&r);
  const char *t3 = "{\"metadata\":{\"continue\":\"abc\"},\"items\":[]}";
  assert_int_equal(run(KC_DECODE_LIST, NULL, t3, strlen(t3), 3, 0, &r, err, sizeof err), 0);
  assert_string_equal(r.meta_cont, "abc");
  assert_string_equal(r.meta_rv, "");
  assert_int_equal(r.list_end_calls, 1);
  rec_free(&r);

  static const bad_case cases[] = {
      {"", -EBADMSG, "item 1: invalid JSON", 0},
      {"[]", -EBADMSG, "list body is an array", 0},
      {"{\"items\":[{\"metadata\":{}},{\"metadata\":{}}", -EBADMSG, "item 3", 2},
      {"{\"items\":[{\"metadata\":{}},7]}", -EBADMSG, "item 2: list item is a number", 1},
      {"{\"items\":{}}", -EBADMSG, "\"items\" is an object, not an array", 0},
      {"{\"items\":[]} {}", -EBADMSG, "invalid JSON", 0},
      {"{\"items\":[{\"a\":\"\xff\"}]}", -EBADMSG, "item 1: invalid JSON", 0},
  };
  check_bad(KC_DECODE_LIST, cases, sizeof cases / sizeof cases[0]);
}

/* Decodes text whole, then fed one byte at a time and split in two at every
 * offset (texts over 8 KiB: every 499th, to keep the run short; the one-byte
 * feeds still cut everywhere): all must give the same objects. Returns the
 * reference record. */
static rec run_all_splits(enum kc_decode_mode mode, const kc_transform *t, const char *text,
                          size_t len) {
  rec ref = {.keep = true};
  char err[256];
  if (run(mode, t, text, len, len, 0, &ref, err, sizeof err)) fail_msg("%s", err);
  rec r = {0};
  assert_int_equal(run(mode, t, text, len, 0, 1, &r, err, sizeof err), 0);
  assert_same(&r, &ref);
  rec_free(&r);
  for (size_t off = 0; off <= len; off += len <= 8192 ? 1 : 499) {
    if (run(mode, t, text, len, off, 0, &r, err, sizeof err)) fail_msg("split %zu: %s", off, err);
    assert_same(&r, &ref);
    rec_free(&r);
  }
  for (size_t i = 0; i < ref.n; i++) assert_slices(ref.objs[i]);
  return ref;
}

/* The JSON text of object i after the type prefix: the item as sent. */
static void assert_stamped(const kc_obj *o, const char *prefix, const char *rest, size_t rest_len) {
  size_t pl = strlen(prefix);
  assert_int_equal(kc_obj_text_len(o), pl + rest_len);
  assert_memory_equal(kc_obj_text(o).ptr, prefix, pl);
  assert_memory_equal(kc_obj_text(o).ptr + pl, rest, rest_len);
}

static void test_list_type(void **state) {
  (void)state;
  size_t len;
  char *text = tu_fixture("watch/deploymentlist-k8s-openapi.json", &len);
  const char *item = strstr(text, "\"items\":[{") + 9;
  const size_t item_len = 5902;
  assert_int_equal(item[item_len], ']');
  const char *pre = "{\"kind\":\"Deployment\",\"apiVersion\":\"apps/v1\",";
  kc_transform typed = {.kind = "Deployment", .api_version = "apps/v1"};

  /* Type given by the reflector (from the informer's config): the same as
   * derived from the list's kind. */
  rec a = run_all_splits(KC_DECODE_LIST, &typed, text, len);
  rec b = run_all_splits(KC_DECODE_LIST, NULL, text, len);
  assert_same(&a, &b);
  assert_stamped(a.objs[0], pre, item + 1, item_len - 1);
  kc_json_value v;
  assert_int_equal(kc_obj_get(a.objs[0], "kind", &v), 0);
  assert_int_equal(v.raw.len, 12);
  assert_memory_equal(v.raw.ptr, "\"Deployment\"", 12);
  assert_int_equal(a.objs[0]->nlabels, 1);
  assert_true(kc_str_eq_c(kc_obj_label(a.objs[0], kc_str_c("k8s-app")), "kube-dns"));
  rec_free(&a);
  rec_free(&b);

  /* The list's kind after the items: only a given type helps. */
  const char *lhead = "\"kind\":\"DeploymentList\",\"apiVersion\":\"apps/v1\",";
  assert_memory_equal(text + 1, lhead, strlen(lhead));
  while (len && text[len - 1] == '\n') len--;
  size_t hl = strlen(lhead);
  char *late = malloc(len + 2);
  assert_non_null(late);
  late[0] = '{';
  memcpy(late + 1, text + 1 + hl, len - 1 - hl - 1); /* up to the final '}' */
  size_t n = len - hl - 1;
  n += (size_t)sprintf(late + n, ",%.*s}", (int)hl - 1, lhead);
  assert_int_equal(n, len);
  a = run_all_splits(KC_DECODE_LIST, &typed, late, n);
  assert_stamped(a.objs[0], pre, item + 1, item_len - 1);
  assert_string_equal(a.meta_kind, "DeploymentList");
  rec_free(&a);
  a = run_all_splits(KC_DECODE_LIST, NULL, late, n);
  assert_null(kc_obj_kind(a.objs[0]).ptr); /* as sent: nothing to derive it from in time */
  assert_int_equal(kc_obj_text_len(a.objs[0]), item_len);
  rec_free(&a);
  free(late);
  free(text);

  /* Custom resources' items carry their kind: kept as sent, whatever the
   * given type says. */
  text = tu_fixture("watch/foobarlist-k8s-openapi.json", &len);
  a = run_all_splits(KC_DECODE_LIST, &typed, text, len);
  b = run_all_splits(KC_DECODE_LIST, NULL, text, len);
  assert_same(&a, &b);
  assert_true(kc_str_eq_c(kc_obj_kind(a.objs[1]), "FooBar"));
  rec_free(&a);
  rec_free(&b);
  free(text);

  /* Metadata-only list: items report the real type, values replaced in
   * place; without a type they stay PartialObjectMetadata. */
  const char *pl =
      "{\"kind\":\"PartialObjectMetadataList\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":"
      "{\"resourceVersion\":\"4711\"},\"items\":[{\"kind\":\"PartialObjectMetadata\","
      "\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\","
      "\"resourceVersion\":\"4700\",\"labels\":{\"x\":\"y\",\"a\":\"b\"}}},"
      "{\"metadata\":{\"name\":\"b\"},\"apiVersion\":\"meta.k8s.io/v1\",\"kind\":\"PartialObjectMetadata\"}]}";
  kc_transform mo = {.metadata_only = true, .kind = "Pod", .api_version = "v1"};
  a = run_all_splits(KC_DECODE_LIST, &mo, pl, strlen(pl));
  assert_int_equal(a.n, 2);
  assert_string_equal(kc_obj_text(a.objs[0]).ptr,
                      "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"a\","
                      "\"namespace\":\"ns\",\"resourceVersion\":\"4700\",\"labels\":{\"x\":\"y\","
                      "\"a\":\"b\"}}}");
  assert_true(kc_str_eq_c(kc_obj_label(a.objs[0], kc_str_c("x")), "y"));
  assert_string_equal(kc_obj_text(a.objs[1]).ptr,
                      "{\"metadata\":{\"name\":\"b\"},\"apiVersion\":\"v1\",\"kind\":\"Pod\"}");
  rec_free(&a);
  a = run_all_splits(KC_DECODE_LIST, NULL, pl, strlen(pl));
  assert_true(kc_str_eq_c(kc_obj_kind(a.objs[0]), "PartialObjectMetadata"));
  assert_true(kc_str_eq_c(kc_obj_api_version(a.objs[1]), "meta.k8s.io/v1"));
  rec_free(&a);

  /* Item shapes: empty (with whitespace), one of the two present, a kind
   * that is not a string (the inserted string member comes first, so
   * kc_obj_get finds it), whitespace everywhere. */
  const char *sh =
      "{\"kind\":\"LeaseList\",\"apiVersion\":\"coordination.k8s.io/v1\",\"items\":[{},{ \n},"
      "{\"apiVersion\":\"x/v2\",\"metadata\":{\"name\":\"a\"}},"
      "{\"metadata\":{\"name\":\"b\",\"labels\":{\"k\":\"v\"}},\"kind\":\"Other\"},"
      "{\"kind\":7,\"metadata\":{}},"
      "{ \"metadata\" : { \"name\" : \"c\" , \"labels\" : { \"k\" : \"w\" } } }]}";
  static const char *const want[] = {
      "{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1\"}",
      "{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1\" \n}",
      "{\"kind\":\"Lease\",\"apiVersion\":\"x/v2\",\"metadata\":{\"name\":\"a\"}}",
      "{\"apiVersion\":\"coordination.k8s.io/v1\",\"metadata\":{\"name\":\"b\",\"labels\":"
      "{\"k\":\"v\"}},\"kind\":\"Other\"}",
      "{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":7,\"metadata\":{}}",
      "{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1\", \"metadata\" : { \"name\" : "
      "\"c\" , \"labels\" : { \"k\" : \"w\" } } }",
  };
  a = run_all_splits(KC_DECODE_LIST, NULL, sh, strlen(sh));
  assert_int_equal(a.n, 6);
  for (size_t i = 0; i < 6; i++) assert_string_equal(kc_obj_text(a.objs[i]).ptr, want[i]);
  assert_true(kc_str_eq_c(kc_obj_kind(a.objs[3]), "Other"));
  assert_true(kc_str_eq_c(kc_obj_kind(a.objs[4]), "Lease"));
  assert_true(kc_str_eq_c(kc_obj_label(a.objs[5], kc_str_c("k")), "w"));
  rec_free(&a);
  /* A list kind without the List suffix (or a bad one): nothing derived. */
  const char *odd = "{\"kind\":\"Lease\",\"apiVersion\":\"v1\",\"items\":[{}]}";
  a = run_all_splits(KC_DECODE_LIST, NULL, odd, strlen(odd));
  assert_string_equal(kc_obj_text(a.objs[0]).ptr, "{}");
  rec_free(&a);
  const char *odd2 = "{\"kind\":\"A\\\"List\",\"apiVersion\":\"v1\",\"items\":[{}]}";
  a = run_all_splits(KC_DECODE_LIST, NULL, odd2, strlen(odd2));
  assert_string_equal(kc_obj_text(a.objs[0]).ptr, "{}");
  rec_free(&a);

  /* Bad types are refused when the decoder is made. */
  char longk[KC_OBJ_MAX_TYPE + 2];
  memset(longk, 'K', sizeof longk - 1);
  longk[sizeof longk - 1] = '\0';
  const kc_transform bad[] = {{.kind = "Pod"},
                              {.api_version = "v1"},
                              {.kind = "", .api_version = "v1"},
                              {.kind = "Po\"d", .api_version = "v1"},
                              {.kind = "Pod", .api_version = "v\\1"},
                              {.kind = "Po d", .api_version = "v1"},
                              {.kind = "P\xc3\xb6" "d", .api_version = "v1"},
                              {.kind = longk, .api_version = "v1"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    errno = 0;
    assert_null(kc_decoder_new(KC_DECODE_LIST, &bad[i], &cbs, NULL));
    assert_int_equal(errno, EINVAL);
  }
  longk[KC_OBJ_MAX_TYPE] = '\0';
  kc_transform okl = {.kind = longk, .api_version = "v1"};
  kc_decoder *d = kc_decoder_new(KC_DECODE_WATCH, &okl, &cbs, NULL);
  assert_non_null(d);
  kc_decoder_free(d);
}

static void test_watch_type(void **state) {
  (void)state;
  /* Metadata-only watch: objects report the real type, a Status stays. */
  const char *w =
      "{\"type\":\"ADDED\",\"object\":{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":"
      "\"meta.k8s.io/v1\",\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"uid\":\"u1\","
      "\"resourceVersion\":\"10\",\"labels\":{\"app\":\"x\"}}}}\n"
      "{\"object\":{\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":{\"name\":\"a\",\"namespace\":"
      "\"ns\",\"resourceVersion\":\"11\"},\"kind\":\"PartialObjectMetadata\"},\"type\":\"MODIFIED\"}\n"
      "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":"
      "\"meta.k8s.io/v1\",\"metadata\":{\"resourceVersion\":\"12\",\"annotations\":"
      "{\"k8s.io/initial-events-end\":\"true\"}}}}\n"
      "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
      "\"status\":\"Failure\",\"message\":\"too old resource version: 1 (5)\",\"reason\":"
      "\"Expired\",\"code\":410}}\n";
  kc_transform mo = {.metadata_only = true, .kind = "Pod", .api_version = "v1"};
  rec a = run_all_splits(KC_DECODE_WATCH, &mo, w, strlen(w));
  assert_int_equal(a.n, 4);
  assert_string_equal(kc_obj_text(a.objs[0]).ptr,
                      "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"a\","
                      "\"namespace\":\"ns\",\"uid\":\"u1\",\"resourceVersion\":\"10\",\"labels\":"
                      "{\"app\":\"x\"}}}");
  assert_string_equal(kc_obj_text(a.objs[1]).ptr,
                      "{\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\","
                      "\"resourceVersion\":\"11\"},\"kind\":\"Pod\"}");
  assert_true(kc_str_eq_c(kc_obj_kind(a.objs[2]), "Pod"));
  assert_true(kc_str_eq_c(kc_obj_resource_version(a.objs[2]), "12"));
  assert_true(a.iee);
  assert_true(kc_str_eq_c(kc_obj_kind(a.objs[3]), "Status"));
  assert_int_equal(a.last_status.code, 410);
  rec_free(&a);
  /* Asking for PartialObjectMetadata itself changes nothing. */
  kc_transform pom = {.metadata_only = true, .kind = "PartialObjectMetadata",
                      .api_version = "meta.k8s.io/v1"};
  kc_transform plain_mo = {.metadata_only = true};
  a = run_all_splits(KC_DECODE_WATCH, &pom, w, strlen(w));
  rec b = run_all_splits(KC_DECODE_WATCH, &plain_mo, w, strlen(w));
  assert_same(&a, &b);
  rec_free(&a);
  rec_free(&b);

  /* Full objects (they carry their type) are untouched by a given type. */
  size_t len;
  char *text = tu_fixture("watch/watch-pods-sendinitialevents-k8s-openapi.ndjson", &len);
  kc_transform typed = {.kind = "Pod", .api_version = "v1"};
  a = run_all_splits(KC_DECODE_WATCH, &typed, text, len);
  b = run_all_splits(KC_DECODE_WATCH, NULL, text, len);
  assert_same(&a, &b);
  for (size_t i = 0; i < a.n; i++)
    assert_true(kc_str_eq_c(kc_obj_kind(a.objs[i]), "Pod"));
  rec_free(&a);
  rec_free(&b);
  free(text);
}

/* ---- objects of an impossible shape are rejected, the stream goes on ---- */

typedef struct rejects {
  rec r;
  char lines[16][320];
  size_t n;
} rejects;

static int rej_item(void *ud, kc_obj *o) { return on_item(&((rejects *)ud)->r, o); }
static int rej_event(void *ud, const kc_watch_event *ev) {
  rejects *x = ud;
  rec_add(&x->r, ev->type_name, ev->obj);
  return 0;
}
static int rej_reject(void *ud, const kc_decode_reject *rj) {
  rejects *x = ud;
  assert_true(x->n < 16);
  char key[256] = "";
  kc_obj_key(rj->obj, key, sizeof key);
  assert_true(rj->offset > 0);
  snprintf(x->lines[x->n++], sizeof x->lines[0], "%s %llu %s: %s",
           rj->event_type ? rj->event_type : "ITEM", (unsigned long long)rj->index, key, rj->reason);
  return 0;
}

/* Decodes text split at every position; the outcome must not depend on it. */
static void decode_rejects(enum kc_decode_mode mode, const kc_transform *t, const char *text,
                           const char *const *want_objs, size_t nwant, const char *const *want_rej,
                           size_t nrej) {
  static const kc_decoder_callbacks rcbs = {.item = rej_item, .event = rej_event,
                                            .reject = rej_reject};
  size_t len = strlen(text);
  for (size_t split = 0; split <= len; split += split < 40 ? 1 : 7) {
    rejects x = {0};
    kc_decoder *d = kc_decoder_new(mode, t, &rcbs, &x);
    assert_non_null(d);
    int rc = kc_decoder_feed(d, text, split);
    if (rc == 0) rc = kc_decoder_feed(d, text + split, len - split);
    if (rc == 0) rc = kc_decoder_finish(d);
    if (rc != 0) fail_msg("split %zu: rc %d: %s", split, rc, kc_decoder_error(d));
    if (x.r.n != nwant) fail_msg("split %zu: %zu objects delivered, want %zu", split, x.r.n, nwant);
    for (size_t i = 0; i < nwant; i++)
      if (strncmp(x.r.lines[i], want_objs[i], strlen(want_objs[i])) != 0)
        fail_msg("split %zu: object %zu is \"%s\", want \"%s...\"", split, i, x.r.lines[i],
                 want_objs[i]);
    assert_int_equal(x.n, nrej);
    for (size_t i = 0; i < nrej; i++) assert_string_equal(x.lines[i], want_rej[i]);
    assert_int_equal(kc_decoder_rejected(d), nrej);
    if (mode == KC_DECODE_LIST) {
      assert_int_equal(kc_decoder_count(d), nwant);
      assert_int_equal(kc_decoder_list_meta(d)->nitems, nwant);
    } else {
      assert_int_equal(kc_decoder_count(d), nwant + nrej);
    }
    kc_decoder_free(d);
    rec_free(&x.r);
  }
}

static void test_rejected_shapes(void **state) {
  const char *list =
      "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"9\"},"
      "\"items\":["
      "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"resourceVersion\":\"1\","
      "\"labels\":{\"app\":\"x\"}}},"
      "{\"metadata\":{\"name\":\"l\",\"namespace\":\"ns\",\"labels\":[\"app\",\"x\"]}},"
      "{\"metadata\":{\"name\":\"n\",\"namespace\":\"ns\",\"labels\":{\"app\":\"x\",\"n\":5}}},"
      "{\"metadata\":{\"name\":\"b\",\"namespace\":\"ns\",\"resourceVersion\":\"2\","
      "\"labels\":null}},"
      "{\"metadata\":{\"name\":\"a/b\",\"namespace\":\"ns\"}},"
      "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns/x\"}},"
      "{\"metadata\":{\"name\":\"..\",\"namespace\":\"ns\"}},"
      "{\"metadata\":{\"name\":7,\"namespace\":\"ns\"}},"
      "{\"metadata\":{\"name\":\"s\\u002fx\",\"namespace\":\"ns\"}},"
      "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"resourceVersion\":\"3\","
      "\"labels\":{\"k\":\"\"}}}"
      "]}";
  const char *objs[] = {"ITEM ns/a 1 ", "ITEM ns/b 2 ", "ITEM ns/c 3 "};
  const char *rej[] = {
      "ITEM 2 ns/l: metadata.labels is an array, not an object",
      "ITEM 3 ns/n: label \"n\" has a number value, not a string",
      "ITEM 5 ns/a/b: metadata.name may not contain '/': \"a/b\"",
      "ITEM 6 ns/x/c: metadata.namespace may not contain '/': \"ns/x\"",
      "ITEM 7 ns/..: metadata.name may not be \"..\"",
      "ITEM 8 ns/: metadata.name is a number, not a string",
      "ITEM 9 ns/s\\u002fx: metadata.name may not contain '/': \"s/x\"",
  };
  decode_rejects(KC_DECODE_LIST, NULL, list, objs, 3, rej, 7);

  /* A transform that drops the labels does not look at them. */
  const char *drop[] = {"metadata.labels"};
  kc_transform t = {.drop = drop, .ndrop = 1};
  const char *objs2[] = {"ITEM ns/a 1 ", "ITEM ns/l ", "ITEM ns/n ", "ITEM ns/b 2 ",
                         "ITEM ns/c 3 "};
  decode_rejects(KC_DECODE_LIST, &t, list, objs2, 5, rej + 2, 5);

  const char *watch =
      "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"}}}\n"
      "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"labels\":[1]}}}\n"
      "{\"object\":{\"metadata\":{\"name\":\"x/y\"}},\"type\":\"ADDED\"}\n"
      "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"labels\":{\"k\":true}}}}\n"
      "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"5\"}}}\n"
      "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"6\"}}}\n";
  const char *wobjs[] = {"ADDED a 1 ", "MODIFIED a 5 ", "BOOKMARK  6 "};
  const char *wrej[] = {
      "MODIFIED 2 a: metadata.labels is an array, not an object",
      "ADDED 3 x/y: metadata.name may not contain '/': \"x/y\"",
      "DELETED 4 a: label \"k\" has a boolean value, not a string",
  };
  decode_rejects(KC_DECODE_WATCH, NULL, watch, wobjs, 3, wrej, 3);
}

/* metadata.resourceVersion is an opaque string in the API: a number (or a
 * boolean, object, array) is a shape the server never sends; null reads as
 * absent. The list's own resourceVersion is not an object's. */
static void test_rejected_resource_version(void **state) {
  const char *list =
      "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"9\"},"
      "\"items\":["
      "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"resourceVersion\":\"1\"}},"
      "{\"metadata\":{\"name\":\"num\",\"namespace\":\"ns\",\"resourceVersion\":7}},"
      "{\"metadata\":{\"name\":\"big\",\"namespace\":\"ns\",\"resourceVersion\":1e400}},"
      "{\"metadata\":{\"name\":\"t\",\"namespace\":\"ns\",\"resourceVersion\":true}},"
      "{\"metadata\":{\"name\":\"o\",\"namespace\":\"ns\",\"resourceVersion\":{\"v\":\"1\"}}},"
      "{\"metadata\":{\"name\":\"n\",\"namespace\":\"ns\",\"resourceVersion\":null}},"
      "{\"metadata\":{\"resourceVersion\":[\"2\"],\"name\":\"arr\",\"namespace\":\"ns\"}},"
      "{\"metadata\":{\"name\":\"b\",\"namespace\":\"ns\",\"resourceVersion\":\"2\"}}"
      "]}";
  const char *objs[] = {"ITEM ns/a 1 ", "ITEM ns/n  ", "ITEM ns/b 2 "};
  const char *rej[] = {
      "ITEM 2 ns/num: metadata.resourceVersion is a number, not a string",
      "ITEM 3 ns/big: metadata.resourceVersion is a number, not a string",
      "ITEM 4 ns/t: metadata.resourceVersion is a boolean, not a string",
      "ITEM 5 ns/o: metadata.resourceVersion is an object, not a string",
      "ITEM 7 ns/arr: metadata.resourceVersion is an array, not a string",
  };
  decode_rejects(KC_DECODE_LIST, NULL, list, objs, 3, rej, 5);

  const char *watch =
      "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"}}}\n"
      "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":2}}}\n"
      "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"resourceVersion\":3,\"name\":\"b\"}}}\n"
      "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"5\"}}}\n";
  const char *wobjs[] = {"ADDED a 1 ", "MODIFIED a 5 "};
  const char *wrej[] = {
      "MODIFIED 2 a: metadata.resourceVersion is a number, not a string",
      "DELETED 3 b: metadata.resourceVersion is a number, not a string",
  };
  decode_rejects(KC_DECODE_WATCH, NULL, watch, wobjs, 2, wrej, 2);
}

static void test_watch_type_parse(void **state) {
  (void)state;
  assert_int_equal(kc_watch_type_parse("BOOKMARK", 8), KC_WATCH_BOOKMARK);
  assert_int_equal(kc_watch_type_parse("added", 5), KC_WATCH_UNKNOWN);
  assert_string_equal(kc_watch_type_name(KC_WATCH_UNKNOWN), "UNKNOWN");
}

/* Linear in any chunking: the bytes handed to yajl are the bytes fed (each
 * piece ends at a token boundary, so yajl never lexes a token twice), and
 * the result is the one of a one-shot decode. Fixtures and generated
 * objects of 256 KiB to 3 MiB (one long annotation), LIST and WATCH, fed in
 * 1, 7, 64 and 16 KiB pieces and in random ones. */
typedef struct chunk_plan {
  size_t fixed;    /* 0: random */
  size_t rand_max; /* random pieces of 1..rand_max */
} chunk_plan;

static uint64_t lin_rng = 0x9E3779B97F4A7C15ull;
static size_t lin_rand(size_t max) {
  lin_rng ^= lin_rng << 13, lin_rng ^= lin_rng >> 7, lin_rng ^= lin_rng << 17;
  return 1 + (size_t)(lin_rng % max);
}

static void decode_planned(enum kc_decode_mode mode, const char *text, size_t len,
                           chunk_plan plan, rec *r) {
  kc_decoder *d = kc_decoder_new(mode, NULL, &cbs, r);
  assert_non_null(d);
  size_t off = 0;
  while (off < len) {
    size_t n = plan.fixed ? plan.fixed : lin_rand(plan.rand_max);
    if (n > len - off) n = len - off;
    assert_int_equal(kc_decoder_feed(d, text + off, n), 0);
    assert_true(kc_decoder_lexed_bytes(d) <= off + n);
    off += n;
  }
  assert_int_equal(kc_decoder_finish(d), 0);
  assert_int_equal(kc_decoder_offset(d), len);
  /* The property: at most 2x is asked; every byte goes to yajl once. */
  assert_int_equal(kc_decoder_lexed_bytes(d), len);
  kc_decoder_free(d);
}

static void check_linear(enum kc_decode_mode mode, const char *text, size_t len) {
  static const chunk_plan plans[] = {{1, 0}, {7, 0}, {64, 0}, {16384, 0}, {0, 64}, {0, 20000}};
  rec once = {0};
  decode_planned(mode, text, len, (chunk_plan){len, 0}, &once);
  assert_true(once.n > 0);
  for (size_t p = 0; p < sizeof plans / sizeof plans[0]; p++) {
    rec r = {0};
    decode_planned(mode, text, len, plans[p], &r);
    assert_int_equal(r.n, once.n);
    for (size_t i = 0; i < r.n; i++) assert_string_equal(r.lines[i], once.lines[i]);
    rec_free(&r);
  }
  rec_free(&once);
}

/* A Pod-like object whose one annotation holds `size` bytes, with escapes
 * and multi-byte UTF-8 in it (as in Helm release payloads). */
static char *big_object(size_t size, size_t *len) {
  char *o = malloc(size + 512);
  assert_non_null(o);
  size_t n = (size_t)sprintf(o, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
                                "{\"name\":\"big-%zu\",\"namespace\":\"default\",\"uid\":\"u-%zu\","
                                "\"resourceVersion\":\"7\",\"annotations\":{\"blob\":\"",
                             size, size);
  for (size_t i = 0; i < size; i++) {
    switch (i % 97) {
    case 10: o[n++] = '\\'; o[n++] = 'n'; i++; break;
    case 40: o[n++] = '\\'; o[n++] = '"'; i++; break;
    case 70: o[n++] = (char)0xC3; o[n++] = (char)0xA9; i++; break; /* é */
    default: o[n++] = (char)('a' + i % 26);
    }
  }
  n += (size_t)sprintf(o + n, "\"}},\"data\":{\"k\":\"v\"}}");
  *len = n;
  return o;
}

static void test_linear_any_chunking(void **state) {
  (void)state;
  static const char *const fixtures[][2] = {
      {"watch/watch-pods-sendinitialevents-k8s-openapi.ndjson", "w"},
      {"watch/watch-foobars-k8s-openapi.ndjson", "w"},
      {"watch/deploymentlist-k8s-openapi.json", "l"},
      {"watch/foobarlist-k8s-openapi.json", "l"},
  };
  for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
    size_t len;
    char *text = tu_fixture(fixtures[i][0], &len);
    check_linear(fixtures[i][1][0] == 'w' ? KC_DECODE_WATCH : KC_DECODE_LIST, text, len);
    free(text);
  }
  static const size_t sizes[] = {256u << 10, 1536u << 10, 3u << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t olen;
    char *obj = big_object(sizes[i], &olen);
    /* One event and a small list holding the object between two others. */
    char *body = malloc(2 * olen + 512);
    assert_non_null(body);
    size_t n = (size_t)sprintf(body, "{\"type\":\"ADDED\",\"object\":");
    memcpy(body + n, obj, olen);
    n += olen;
    n += (size_t)sprintf(body + n, "}\n{\"type\":\"MODIFIED\",\"object\":");
    memcpy(body + n, obj, olen);
    n += olen;
    n += (size_t)sprintf(body + n, "}\n");
    check_linear(KC_DECODE_WATCH, body, n);
    n = (size_t)sprintf(body, "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":"
                              "{\"resourceVersion\":\"9\"},\"items\":[{\"metadata\":{\"name\":\"a\"}},");
    memcpy(body + n, obj, olen);
    n += olen;
    n += (size_t)sprintf(body + n, ",{\"metadata\":{\"name\":\"z\"}}]}");
    check_linear(KC_DECODE_LIST, body, n);
    free(body);
    free(obj);
  }
}

/* A finished watch event is delivered at once, even when it arrives in
 * small pieces that are batched (no waiting for more bytes). */
static void test_watch_event_not_held_back(void **state) {
  (void)state;
  const char *ev = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"}}}\n"
                   "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"b\"";
  rec r = {0};
  kc_decoder *d = kc_decoder_new(KC_DECODE_WATCH, NULL, &cbs, &r);
  assert_non_null(d);
  for (size_t i = 0; ev[i]; i++) assert_int_equal(kc_decoder_feed(d, ev + i, 1), 0);
  assert_int_equal(r.n, 1); /* "a" is out; "b" is incomplete */
  assert_int_equal(kc_decoder_feed(d, "}}}", 3), 0);
  assert_int_equal(r.n, 2);
  assert_int_equal(kc_decoder_finish(d), 0);
  kc_decoder_free(d);
  rec_free(&r);
}

/* Pieces of 4 KiB and more find their last token boundary at the piece's
 * last newline (one event per line). Newlines also allowed inside an event
 * (pretty-printed JSON: white space between tokens), next to strings that
 * hold escaped newlines, quotes and braces: every event comes out whole and
 * in order, for piece sizes around the batching threshold, and the last
 * event is not held back once its bytes are in. */
static void test_watch_newlines_large_pieces(void **state) {
  (void)state;
  enum { N = 40 };
  size_t cap = N * 9000, n = 0;
  char *body = malloc(cap);
  assert_non_null(body);
  for (int i = 0; i < N; i++) {
    const char *sep = (i % 3 == 0) ? "\n  " : ""; /* every third event pretty-printed */
    n += (size_t)snprintf(body + n, cap - n,
                          "{%s\"type\":\"MODIFIED\",%s\"object\":{%s\"metadata\":{\"name\":\"o%d\","
                          "\"resourceVersion\":\"%d\",\"annotations\":{\"x\":\"",
                          sep, sep, sep, i, i + 1);
    for (int k = 0; k < 700 + 37 * i; k++)
      n += (size_t)snprintf(body + n, cap - n, "%s", (k % 50 == 0) ? "\\n}\\\"{" : "ab");
    n += (size_t)snprintf(body + n, cap - n, "\"}}%s}%s}\n", sep, sep);
  }
  const size_t pieces[] = {4095, 4096, 4097, 5000, 16384, 1 << 20};
  for (size_t pi = 0; pi < sizeof pieces / sizeof pieces[0]; pi++) {
    rec r = {0};
    kc_decoder *d = kc_decoder_new(KC_DECODE_WATCH, NULL, &cbs, &r);
    assert_non_null(d);
    for (size_t off = 0; off < n; off += pieces[pi])
      assert_int_equal(kc_decoder_feed(d, body + off, n - off < pieces[pi] ? n - off : pieces[pi]),
                       0);
    assert_int_equal(r.n, N); /* all out before finish */
    assert_int_equal(kc_decoder_finish(d), 0);
    for (int i = 0; i < N; i++) {
      char want[64];
      snprintf(want, sizeof want, "MODIFIED o%d ", i);
      assert_non_null(strstr(r.lines[i], want));
    }
    assert_int_equal(kc_decoder_lexed_bytes(d), n);
    kc_decoder_free(d);
    rec_free(&r);
  }
  free(body);
}

/* Raw mode skips what cannot matter (kbuild.h kc_obj_builder_skip_inside):
 * a builder fed by jsonlex, which skips when the builder says so, sees only
 * the tokens outside fast levels and dropped subtrees, and still builds the
 * object's text as sent (cuts applied), in one feed or in 1-byte feeds. */
typedef struct skrec {
  kc_obj_builder *b;
  char seen[1024];
  size_t n;
} skrec;

static void sk_note(skrec *r, const char *s, size_t len) {
  int k = snprintf(r->seen + r->n, sizeof r->seen - r->n, "%.*s ", (int)len, s);
  assert_true(k > 0 && (size_t)k < sizeof r->seen - r->n);
  r->n += (size_t)k;
}
static int sk_ok(int rc) { return rc == 0 ? KC_JSONLEX_GO : KC_JSONLEX_STOP; }
static int sk_null(void *u) { skrec *r = u; sk_note(r, "n", 1); return sk_ok(kc_obj_builder_null(r->b)); }
static int sk_bool(void *u, int v) { skrec *r = u; sk_note(r, "b", 1); return sk_ok(kc_obj_builder_bool(r->b, v)); }
static int sk_num(void *u, const char *s, size_t n) { skrec *r = u; sk_note(r, s, n); return sk_ok(kc_obj_builder_number(r->b, s, n)); }
static int sk_str(void *u, const char *s, size_t n) { skrec *r = u; sk_note(r, s, n); return sk_ok(kc_obj_builder_string(r->b, s, n)); }
static int sk_key(void *u, const char *s, size_t n) {
  skrec *r = u;
  sk_note(r, s, n);
  if (kc_obj_builder_key(r->b, s, n)) return KC_JSONLEX_STOP;
  if (!kc_obj_builder_skip_value(r->b)) return KC_JSONLEX_GO;
  sk_note(r, "~", 1);
  return KC_JSONLEX_SKIP;
}
static int sk_open(skrec *r, int rc, const char *what) {
  sk_note(r, what, 1);
  if (rc) return KC_JSONLEX_STOP;
  if (!kc_obj_builder_skip_inside(r->b)) return KC_JSONLEX_GO;
  sk_note(r, "~", 1);
  return KC_JSONLEX_SKIP;
}
static int sk_smap(void *u) { skrec *r = u; return sk_open(r, kc_obj_builder_start_map(r->b), "{"); }
static int sk_sarr(void *u) { skrec *r = u; return sk_open(r, kc_obj_builder_start_array(r->b), "["); }
static int sk_emap(void *u) { skrec *r = u; sk_note(r, "}", 1); return sk_ok(kc_obj_builder_end_map(r->b)); }
static int sk_earr(void *u) { skrec *r = u; sk_note(r, "]", 1); return sk_ok(kc_obj_builder_end_array(r->b)); }

static void test_raw_skip_fast_levels(void **state) {
  (void)state;
  static const kc_jsonlex_callbacks cb = {sk_null, sk_bool, sk_num,  sk_str, sk_key,
                                          sk_smap, sk_emap, sk_sarr, sk_earr};
  const char *pod =
      "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"a\",\"namespace\":\"n\","
      "\"labels\":{\"x\":\"y\"},\"managedFields\":[{\"manager\":\"m\",\"fieldsV1\":{\"f:spec\":{}}}]},"
      "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\",\"ports\":[1,2]}],\"x\":null},"
      "\"status\":{\"phase\":\"Running\",\"ok\":true}}";
  const char *drop[] = {"metadata.managedFields"};
  kc_transform t = {.drop = drop, .ndrop = 1};
  for (int dropping = 0; dropping < 2; dropping++) {
    for (int bytewise = 0; bytewise < 2; bytewise++) {
      skrec r = {.b = kc_obj_builder_new(dropping ? &t : NULL, 0)};
      assert_non_null(r.b);
      kc_jsonlex *lx = kc_jsonlex_new(&cb, &r, 0);
      assert_non_null(lx);
      size_t len = strlen(pod), step = bytewise ? 1 : len;
      for (size_t off = 0; off < len; off += step) {
        kc_obj_builder_input(r.b, lx, pod + off, step);
        assert_int_equal(kc_jsonlex_feed(lx, pod + off, step), 0);
        assert_int_equal(kc_obj_builder_input_end(r.b), 0);
      }
      assert_int_equal(kc_jsonlex_finish(lx), 0);
      kc_jsonlex_free(lx);
      assert_true(kc_obj_builder_done(r.b));
      kc_obj *o = kc_obj_builder_finish(r.b);
      assert_non_null(o);
      /* spec, status and the insides of managedFields went by unseen:
       * a value nobody looks at is skipped at its key, a container that
       * matters as a whole (status: the Status fields' level; a dropped
       * member, to know where it ends; a fieldsV1, which may be shared,
       * kbuild.h "Shared values") at its start */
      assert_string_equal(r.seen, dropping ? "{ kind Pod apiVersion v1 metadata { name a namespace n labels { x y } "
                                             "managedFields [ ~ ] } spec ~ status { ~ } } "
                                           : "{ kind Pod apiVersion v1 metadata { name a namespace n labels { x y } "
                                             "managedFields [ { manager ~ fieldsV1 { ~ } } ] } spec ~ status { ~ } } ");
      if (dropping) {
        assert_string_equal(kc_obj_text(o).ptr,
                            "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"a\","
                            "\"namespace\":\"n\",\"labels\":{\"x\":\"y\"}},\"spec\":{\"containers\":"
                            "[{\"name\":\"c\",\"image\":\"i\",\"ports\":[1,2]}],\"x\":null},"
                            "\"status\":{\"phase\":\"Running\",\"ok\":true}}");
      } else {
        assert_string_equal(kc_obj_text(o).ptr, pod);
      }
      assert_int_equal(o->nlabels, 1);
      assert_true(kc_str_eq_c(kc_obj_name(o), "a"));
      kc_obj_unref(o);
      kc_obj_builder_free(r.b);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_watch_initial_events),
      cmocka_unit_test(test_watch_every_split_utf8),
      cmocka_unit_test(test_watch_transform),
      cmocka_unit_test(test_watch_raw_cuts),
      cmocka_unit_test(test_watch_order_unknown_error),
      cmocka_unit_test(test_watch_malformed),
      cmocka_unit_test(test_limits),
      cmocka_unit_test(test_list_fixtures),
      cmocka_unit_test(test_list_shapes),
      cmocka_unit_test(test_list_shard_info),
      cmocka_unit_test(test_list_type),
      cmocka_unit_test(test_watch_type),
      cmocka_unit_test(test_watch_type_parse),
      cmocka_unit_test(test_linear_any_chunking),
      cmocka_unit_test(test_watch_event_not_held_back),
      cmocka_unit_test(test_watch_newlines_large_pieces),
      cmocka_unit_test(test_rejected_shapes),
      cmocka_unit_test(test_rejected_resource_version),
      cmocka_unit_test(test_raw_skip_fast_levels),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
