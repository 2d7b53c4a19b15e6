/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for shared pieces of object text: the pool (daemon/base/sharedtext.c),
 * the builder sharing metadata.managedFields[].fieldsV1 (daemon/kube/kbuild.c
 * "Shared values") and every way of reading an object that has holes
 * (daemon/kube/kobj.c: kc_obj_text, kc_obj_text_each, kc_obj_get, kc_obj_get_each;
 * daemon/hooks/isolate_wire.c kc_iso_put_obj). */
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

#include "base/buf.h"
#include "watch/decode.h"
#include "host/hostapi.h"
#include "hooks/isolate_wire.h"
#include "kube/kbuild.h"
#include "base/sharedtext.h"

/* ---- the pool ---- */

static void test_pool_get_put(void **state) {
  (void)state;
  kc_shared_text_stats st0 = kc_shared_text_stats_now();
  char a[300], b[300];
  memset(a, 'a', sizeof a);
  memcpy(b, a, sizeof b);
  b[299] = 'b'; /* same length and hash prefix, other bytes */
  kc_shared_text *t1 = kc_shared_text_get(a, sizeof a);
  kc_shared_text *t2 = kc_shared_text_get(a, sizeof a);
  kc_shared_text *t3 = kc_shared_text_get(b, sizeof b);
  kc_shared_text *t4 = kc_shared_text_get(a, sizeof a - 1); /* a prefix is other text */
  assert_non_null(t1);
  assert_ptr_equal(t1, t2);
  assert_true(t3 && t3 != t1 && t4 && t4 != t1);
  assert_int_equal(t1->len, 300);
  assert_memory_equal(t1->text, a, 300);
  assert_int_equal(t1->text[300], '\0');
  kc_shared_text_stats st = kc_shared_text_stats_now();
  assert_int_equal(st.pieces - st0.pieces, 3);
  assert_int_equal(st.refs - st0.refs, 4);
  assert_int_equal(st.bytes - st0.bytes, 899);
  kc_shared_text_put(t2);
  kc_shared_text_put(t3);
  kc_shared_text_put(t4);
  st = kc_shared_text_stats_now();
  assert_int_equal(st.pieces - st0.pieces, 1);
  /* The last reference frees it; the same bytes then make a new piece. */
  kc_shared_text_put(t1);
  st = kc_shared_text_stats_now();
  assert_int_equal(st.pieces, st0.pieces);
  assert_int_equal(st.refs, st0.refs);
  assert_int_equal(st.bytes, st0.bytes);
  errno = 0;
  assert_null(kc_shared_text_get(a, 0));
  assert_int_equal(errno, EINVAL);
  assert_null(kc_shared_text_get(NULL, 3));
  kc_shared_text_put(NULL);
}

/* Many pieces: the table grows and every piece stays findable. */
static void test_pool_many(void **state) {
  (void)state;
  kc_shared_text_stats st0 = kc_shared_text_stats_now();
  enum { N = 5000 };
  kc_shared_text **t = calloc(N, sizeof *t);
  assert_non_null(t);
  char s[64];
  for (int i = 0; i < N; i++) {
    int n = snprintf(s, sizeof s, "{\"piece\":%d}", i);
    t[i] = kc_shared_text_get(s, (size_t)n);
    assert_non_null(t[i]);
  }
  for (int i = 0; i < N; i++) {
    int n = snprintf(s, sizeof s, "{\"piece\":%d}", i);
    kc_shared_text *again = kc_shared_text_get(s, (size_t)n);
    assert_ptr_equal(again, t[i]);
    kc_shared_text_put(again);
  }
  assert_int_equal(kc_shared_text_stats_now().pieces - st0.pieces, N);
  for (int i = 0; i < N; i++) kc_shared_text_put(t[i]);
  assert_int_equal(kc_shared_text_stats_now().pieces, st0.pieces);
  free(t);
}

/* Builders on decode threads and the loop dropping objects use the pool at
 * once (run under TSan: the pool's lock is the only hand-off). */
static void *churn(void *arg) {
  int id = *(int *)arg;
  char s[200];
  for (int i = 0; i < 20000; i++) {
    memset(s, 'x', sizeof s);
    s[0] = (char)('0' + (i + id) % 8);
    kc_shared_text *a = kc_shared_text_get(s, sizeof s);
    kc_shared_text *b = kc_shared_text_get(s, sizeof s);
    if (!a || a != b || memcmp(a->text, s, sizeof s) != 0) return (void *)1;
    kc_shared_text_put(a);
    kc_shared_text_put(b);
  }
  return NULL;
}

static void test_pool_threads(void **state) {
  (void)state;
  kc_shared_text_stats st0 = kc_shared_text_stats_now();
  pthread_t th[3];
  int ids[3] = {0, 1, 2};
  for (int i = 0; i < 3; i++) assert_int_equal(pthread_create(&th[i], NULL, churn, &ids[i]), 0);
  for (int i = 0; i < 3; i++) {
    void *r;
    assert_int_equal(pthread_join(th[i], &r), 0);
    assert_null(r);
  }
  kc_shared_text_stats st = kc_shared_text_stats_now();
  assert_int_equal(st.pieces, st0.pieces);
  assert_int_equal(st.refs, st0.refs);
}

/* ---- objects built by the streaming decoder ---- */

/* A controller's fieldsV1 (the same in every Pod of the ReplicaSet), one
 * per Pod (a kubelet's, with the Pod's IP) and a small one. */
#define RS_FIELDS                                                                             \
  "{\"f:metadata\":{\"f:generateName\":{},\"f:labels\":{\".\":{},\"f:app\":{}},"             \
  "\"f:ownerReferences\":{\".\":{},\"k:{\\\"uid\\\":\\\"u-rs\\\"}\":{}}},\"f:spec\":{"        \
  "\"f:containers\":{\"k:{\\\"name\\\":\\\"web\\\"}\":{\".\":{},\"f:image\":{},\"f:name\":{}}}," \
  "\"f:restartPolicy\":{},\"f:schedulerName\":{}}}"
#define SMALL_FIELDS "{\"f:spec\":{\"f:nodeName\":{}}}"

static int pod_text(char *buf, size_t cap, const char *name, const char *rs_fields,
                    const char *ip) {
  return snprintf(buf, cap,
                  "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"%s\","
                  "\"namespace\":\"d\",\"resourceVersion\":\"7\",\"labels\":{\"app\":\"web\"},"
                  "\"managedFields\":[{\"manager\":\"kube-controller-manager\","
                  "\"operation\":\"Update\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":%s},"
                  "{\"manager\":\"kubelet\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":"
                  "{\"f:status\":{\"f:podIP\":{},\"f:podIPs\":{\".\":{},"
                  "\"k:{\\\"ip\\\":\\\"%s\\\"}\":{\".\":{},\"f:ip\":{}}},\"f:phase\":{},"
                  "\"f:conditions\":{\"k:{\\\"type\\\":\\\"Ready\\\"}\":{\".\":{},"
                  "\"f:status\":{},\"f:type\":{}}}}},\"subresource\":\"status\"},"
                  "{\"manager\":\"kube-scheduler\",\"fieldsV1\":" SMALL_FIELDS "}]},"
                  "\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"web\"}]},"
                  "\"status\":{\"podIP\":\"%s\"}}",
                  name, rs_fields, ip, ip);
}

typedef struct objs {
  kc_obj *o[8];
  size_t n;
} objs;

static int on_event(void *ud, const kc_watch_event *ev) {
  objs *v = ud;
  if (v->n < 8) v->o[v->n++] = kc_obj_ref(ev->obj);
  return 0;
}

/* A watch decoder that keeps the objects of its events in *out. */
static kc_decoder *watch_decoder(const kc_transform *t, objs *out) {
  kc_decoder_callbacks cbs = {.event = on_event};
  kc_decoder *d = kc_decoder_new(KC_DECODE_WATCH, t, &cbs, out);
  assert_non_null(d);
  return d;
}

/* Decodes the events of `body` fed in pieces of `piece` bytes. */
static void decode_watch(const char *body, size_t len, size_t piece, const kc_transform *t,
                         objs *out) {
  kc_decoder *d = watch_decoder(t, out);
  for (size_t off = 0; off < len; off += piece)
    assert_int_equal(kc_decoder_feed(d, body + off, len - off < piece ? len - off : piece), 0);
  assert_int_equal(kc_decoder_finish(d), 0);
  kc_decoder_free(d);
}

static char *three_pods(char pods[3][2048], size_t *len) {
  char *body = malloc(3 * 2100);
  assert_non_null(body);
  pod_text(pods[0], 2048, "a", RS_FIELDS, "10.0.0.1");
  pod_text(pods[1], 2048, "b", RS_FIELDS, "10.0.0.2");
  /* c: another ReplicaSet's fields */
  char other[600];
  snprintf(other, sizeof other, "{\"f:other\":%s}", RS_FIELDS);
  pod_text(pods[2], 2048, "c", other, "10.0.0.3");
  size_t n = 0;
  for (int i = 0; i < 3; i++)
    n += (size_t)sprintf(body + n, "{\"type\":\"ADDED\",\"object\":%s}\n", pods[i]);
  *len = n;
  return body;
}

static size_t kubelet_fields_len(const char *pod) {
  const char *s = strstr(pod, "{\"f:status\"");
  const char *e = strstr(s, ",\"subresource\"");
  return (size_t)(e - s);
}

typedef struct spans {
  kc_buf b;
  int calls;
} spans;
static int add_span(void *ud, const char *p, size_t n) {
  spans *s = ud;
  kc_buf_add(&s->b, p, n);
  s->calls++;
  return 0;
}

static bool collect(const kc_json_value *v, void *ud) {
  kc_buf *b = ud;
  kc_buf_add(b, v->raw.ptr, v->raw.len);
  kc_buf_putc(b, '|');
  return true;
}

/* The object kc_obj_parse builds from text (no pieces), kept until the
 * next call. */
static kc_obj *flat_of(const char *text) {
  static kc_obj *last;
  kc_obj_unref(last);
  last = kc_obj_parse(text, strlen(text), NULL, NULL, 0);
  assert_non_null(last);
  return last;
}

static void test_decoder_shares_fieldsv1(void **state) {
  (void)state;
  char pods[3][2048];
  size_t len;
  char *body = three_pods(pods, &len);
  assert_true(strlen(RS_FIELDS) >= KC_OBJ_SHARE_MIN);
  assert_true(kubelet_fields_len(pods[0]) >= KC_OBJ_SHARE_MIN);
  assert_true(strlen(SMALL_FIELDS) < KC_OBJ_SHARE_MIN);
  kc_shared_text_stats st0 = kc_shared_text_stats_now();
  size_t pieces[] = {1, 7, 64, 100000};
  for (size_t pi = 0; pi < sizeof pieces / sizeof *pieces; pi++) {
    objs v = {0};
    decode_watch(body, len, pieces[pi], NULL, &v);
    assert_int_equal(v.n, 3);
    /* Two holes each (the controller's and the kubelet's); the small one stays. */
    for (int i = 0; i < 3; i++) assert_int_equal(v.o[i]->nshared, 2);
    const kc_obj_shared_table *ta =
        kc_obj_shared_table_at(v.o[0], v.o[0]->json_len);
    const kc_obj_shared_table *tb =
        kc_obj_shared_table_at(v.o[1], v.o[1]->json_len);
    const kc_obj_shared_table *tc =
        kc_obj_shared_table_at(v.o[2], v.o[2]->json_len);
    assert_ptr_equal(ta->hole[0].text, tb->hole[0].text);  /* one ReplicaSet: one copy */
    assert_ptr_not_equal(ta->hole[0].text, tc->hole[0].text);
    assert_ptr_not_equal(ta->hole[1].text, tb->hole[1].text); /* per-Pod fields */
    kc_shared_text_stats st = kc_shared_text_stats_now();
    assert_int_equal(st.pieces - st0.pieces, 5);
    assert_int_equal(st.refs - st0.refs, 6);
    for (int i = 0; i < 3; i++) {
      kc_obj *o = v.o[i];
      /* The whole text is the object as sent, three ways. */
      assert_int_equal(kc_obj_text_len(o), strlen(pods[i]));
      kc_str t = kc_obj_text(o);
      assert_non_null(t.ptr);
      assert_string_equal(t.ptr, pods[i]);
      assert_ptr_equal(kc_obj_text(o).ptr, t.ptr); /* made once */
      spans s = {{0}, 0};
      assert_int_equal(kc_obj_text_each(o, add_span, &s), 0);
      assert_int_equal(s.calls, 5); /* text, piece, text, piece, text */
      assert_string_equal(s.b.p, pods[i]);
      kc_buf_free(&s.b);
      /* json[] keeps one byte per hole. */
      const kc_obj_shared_table *to = kc_obj_shared_table_at(o, o->json_len);
      assert_int_equal(o->json_len, strlen(pods[i]) - to->hole[0].text->len - to->hole[1].text->len + 2);
      assert_int_equal(to->hole[1].text->len, kubelet_fields_len(pods[i]));
      assert_null(strstr(o->json, "f:restartPolicy"));
      /* Identity fields and labels read as before. */
      assert_int_equal(kc_obj_label(o, kc_str_c("app")).len, 3);
      assert_int_equal(kc_obj_name(o).len, 1);
      /* Lookups through, into and after holes. */
      kc_json_value jv;
      assert_int_equal(kc_obj_get(o, "metadata.managedFields[0].fieldsV1", &jv), 0);
      assert_int_equal(jv.type, KC_JSON_OBJECT);
      const char *want0 = strstr(pods[i], "\"fieldsV1\":") + 11;
      assert_memory_equal(jv.raw.ptr, want0, jv.raw.len);
      assert_int_equal(kc_obj_get(o, "metadata.managedFields[0].fieldsV1.f:spec.f:restartPolicy", &jv), 0);
      assert_int_equal(jv.type, i == 2 ? KC_JSON_ABSENT : KC_JSON_OBJECT);
      assert_int_equal(kc_obj_get(o, "metadata.managedFields[1].fieldsV1.f:status.f:phase", &jv), 0);
      assert_int_equal(jv.type, KC_JSON_OBJECT);
      assert_int_equal(kc_obj_get(o, "metadata.managedFields[1].subresource", &jv), 0);
      assert_true(jv.type == KC_JSON_STRING && jv.raw.len == 8 && !memcmp(jv.raw.ptr, "\"status\"", 8));
      assert_int_equal(kc_obj_get(o, "metadata.managedFields[2].fieldsV1", &jv), 0);
      assert_true(jv.raw.len == strlen(SMALL_FIELDS) && !memcmp(jv.raw.ptr, SMALL_FIELDS, jv.raw.len));
      assert_int_equal(kc_obj_get(o, "spec.nodeName", &jv), 0);
      assert_true(jv.raw.len == 4 && !memcmp(jv.raw.ptr, "\"n1\"", 4));
      /* Containers around holes come whole (from kc_obj_text's copy). */
      const char *around[] = {"metadata", "metadata.managedFields", "metadata.managedFields[1]"};
      for (size_t k = 0; k < 3; k++) {
        kc_json_value jf;
        assert_int_equal(kc_obj_get(o, around[k], &jv), 0);
        assert_int_equal(kc_obj_get(flat_of(pods[i]), around[k], &jf), 0);
        assert_int_equal(jv.raw.len, jf.raw.len);
        assert_memory_equal(jv.raw.ptr, jf.raw.ptr, jv.raw.len);
      }
      kc_buf ga = {0}, wa = {0};
      assert_int_equal(kc_obj_get_each(o, "metadata.managedFields[]", collect, &ga), 3);
      assert_int_equal(kc_obj_get_each(flat_of(pods[i]), "metadata.managedFields[]", collect, &wa), 3);
      assert_string_equal(ga.p, wa.p);
      kc_buf_free(&ga);
      kc_buf_free(&wa);
      /* every element, pieces included, in order */
      kc_buf got = {0}, want = {0};
      assert_int_equal(kc_obj_get_each(o, "metadata.managedFields[].fieldsV1", collect, &got), 3);
      kc_obj *flat = kc_obj_parse(pods[i], strlen(pods[i]), NULL, NULL, 0);
      assert_non_null(flat);
      assert_int_equal(flat->nshared, 0);
      assert_int_equal(kc_obj_get_each(flat, "metadata.managedFields[].fieldsV1", collect, &want), 3);
      assert_string_equal(got.p, want.p);
      kc_buf_reset(&got);
      kc_buf_reset(&want);
      assert_int_equal(kc_obj_get_each(o, "metadata.managedFields[].fieldsV1.f:status.f:podIPs", collect, &got), 1);
      assert_int_equal(kc_obj_get_each(flat, "metadata.managedFields[].fieldsV1.f:status.f:podIPs", collect, &want), 1);
      assert_string_equal(got.p, want.p);
      kc_buf_free(&got);
      kc_buf_free(&want);
      /* A plugin's object_json: the whole text, the same copy every time. */
      const struct kctrld_host_api *h = kc_hostapi_table();
      kctrld_str pj = h->object_json((const kctrld_object *)o);
      assert_true(pj.ptr && pj.len == strlen(pods[i]) && !memcmp(pj.ptr, pods[i], pj.len));
      assert_ptr_equal(h->object_json((const kctrld_object *)o).ptr, pj.ptr);
      /* The process-isolation wire writes the whole text. */
      kc_buf w1 = {0}, w2 = {0};
      kc_iso_put_obj(&w1, o);
      kc_iso_put(&w2, pods[i], strlen(pods[i]));
      assert_string_equal(w1.p, w2.p);
      kc_buf_free(&w1);
      kc_buf_free(&w2);
      /* The object's own memory no longer holds the shared bytes. */
      assert_true(kc_obj_mem_size(o) < kc_obj_mem_size(flat) - ta->hole[0].text->len);
      kc_obj_unref(flat);
    }
    for (size_t i = 0; i < v.n; i++) kc_obj_unref(v.o[i]);
    st = kc_shared_text_stats_now();
    assert_int_equal(st.pieces, st0.pieces);
    assert_int_equal(st.refs, st0.refs);
  }
  free(body);
}

/* A fieldsV1 that a capture or drop path reaches stays in the text, where
 * those work; dropping managedFields shares nothing. */
static void test_capture_and_drop_keep_inline(void **state) {
  (void)state;
  char pods[3][2048];
  size_t len;
  char *body = three_pods(pods, &len);
  const char *cpaths[] = {"metadata.managedFields[].fieldsV1.f:status.f:podIP"};
  uint32_t groups[] = {0};
  kc_capture_spec cs = {cpaths, groups, 1};
  kc_transform t = {.capture = &cs};
  objs v = {0};
  decode_watch(body, len, 64, &t, &v);
  assert_int_equal(v.n, 3);
  uint64_t tag = kc_capture_tag(&cs);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(v.o[i]->nshared, 0);
    assert_string_equal(kc_obj_text(v.o[i]).ptr, pods[i]);
    kc_capture_cursor c;
    assert_true(kc_obj_capture_open(v.o[i], tag, &c));
    assert_int_equal(kc_capture_next_group(&c), 0); /* {} is no scalar: nothing recorded */
    kc_obj_unref(v.o[i]);
  }
  /* A capture path elsewhere leaves sharing on, and the capture record
   * (after the piece table) reads back. */
  const char *cpaths2[] = {"spec.nodeName"};
  kc_capture_spec cs2 = {cpaths2, groups, 1};
  kc_transform t2 = {.capture = &cs2};
  v.n = 0;
  decode_watch(body, len, 64, &t2, &v);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(v.o[i]->nshared, 2);
    kc_capture_cursor c;
    assert_true(kc_obj_capture_open(v.o[i], kc_capture_tag(&cs2), &c));
    assert_int_equal(kc_capture_next_group(&c), 1);
    kc_str val = kc_capture_next_value(&c);
    assert_true(val.len == 2 && !memcmp(val.ptr, "n1", 2));
    assert_string_equal(kc_obj_text(v.o[i]).ptr, pods[i]);
    kc_obj_unref(v.o[i]);
  }
  const char *drop[] = {"metadata.managedFields"};
  kc_transform t3 = {.drop = drop, .ndrop = 1};
  v.n = 0;
  decode_watch(body, len, 7, &t3, &v);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(v.o[i]->nshared, 0);
    assert_null(strstr(kc_obj_text(v.o[i]).ptr, "managedFields"));
    kc_obj_unref(v.o[i]);
  }
  free(body);
}

/* The size limit is the whole text's, shared bytes included. */
static void test_limit_counts_shared_bytes(void **state) {
  (void)state;
  char pods[3][2048];
  size_t len;
  char *body = three_pods(pods, &len);
  kc_shared_text_stats st0 = kc_shared_text_stats_now();
  objs v = {0};
  kc_decoder *d = watch_decoder(NULL, &v);
  kc_decoder_set_max_bytes(d, strlen(pods[0]) - 10); /* the own text would fit */
  assert_int_equal(kc_decoder_feed(d, body, len), -E2BIG);
  assert_non_null(strstr(kc_decoder_error(d), "object larger than the limit"));
  kc_decoder_free(d);
  assert_int_equal(v.n, 0);
  /* the pieces of the refused object went back */
  assert_int_equal(kc_shared_text_stats_now().refs, st0.refs);
  free(body);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pool_get_put),
      cmocka_unit_test(test_pool_many),
      cmocka_unit_test(test_pool_threads),
      cmocka_unit_test(test_decoder_shares_fieldsv1),
      cmocka_unit_test(test_capture_and_drop_keep_inline),
      cmocka_unit_test(test_limit_counts_shared_bytes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
