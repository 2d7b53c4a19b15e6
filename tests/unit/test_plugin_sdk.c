/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the plugin SDK include/kctrld/plugin_util.h: the JSON
 * string escaper against yajl's parser (fixed vectors and random bytes,
 * invalid UTF-8 included: what it writes must parse back to the input with
 * each byte that starts no well-formed UTF-8 sequence replaced by U+FFFD),
 * the owner-reference and condition builders, key splitting, and the C++
 * example plugin tests/unit/plugins/cxx_example.cpp (built by the Makefile
 * with g++ -std=c++17 -Wall -Wextra -Werror) loaded and reconciled on a fake
 * host environment. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>
#include <cmocka.h>

#include "kctrld/plugin_util.h"
#include "watch/decode.h"
#include "base/log.h"
#include "host/plugin_host.h"
#include "cache/store.h"
#include "testutil.h"

#ifndef KC_TEST_PLUGIN_DIR
#define KC_TEST_PLUGIN_DIR "build/tests/plugins"
#endif

/* ---- the escaper against yajl ---- */

struct parsed {
  int strings;
  pu_buf s;
};

static int on_string(void *ctx, const unsigned char *s, size_t len) {
  struct parsed *p = ctx;
  p->strings++;
  pu_add(&p->s, (const char *)s, len);
  return 1;
}

/* Parses json (one string) with yajl, UTF-8 validation on; 0 or -EINVAL. */
static int yajl_string(const char *json, size_t len, pu_buf *out) {
  static const yajl_callbacks cb = {.yajl_string = on_string};
  struct parsed p = {0};
  yajl_handle h = yajl_alloc(&cb, NULL, &p);
  assert_non_null(h);
  int ok = yajl_parse(h, (const unsigned char *)json, len) == yajl_status_ok &&
           yajl_complete_parse(h) == yajl_status_ok && p.strings == 1;
  yajl_free(h);
  *out = p.s;
  if (!ok) pu_buf_free(out);
  return ok ? 0 : -EINVAL;
}

/* The decoded value the escaper promises: s with each byte that starts no
 * well-formed sequence replaced by U+FFFD. */
static void expected(const char *s, size_t len, pu_buf *out) {
  pu_buf_init(out);
  for (size_t i = 0; i < len;) {
    size_t n = pu_utf8_seq((const unsigned char *)s + i, len - i);
    if (n) pu_add(out, s + i, n);
    else pu_add(out, "\xEF\xBF\xBD", 3);
    i += n ? n : 1;
  }
  pu_add(out, "", 0);
}

static void round_trip(const char *s, size_t len) {
  pu_buf w, got, want;
  pu_buf_init(&w);
  pu_json_str(&w, s, len);
  assert_false(w.oom);
  if (yajl_string(w.p, w.n, &got) != 0) fail_msg("yajl refused %s", w.p);
  expected(s, len, &want);
  assert_int_equal(got.n, want.n);
  if (want.n) assert_memory_equal(got.p, want.p, want.n);
  pu_buf_free(&w);
  pu_buf_free(&got);
  pu_buf_free(&want);
}

static void expect_escaped(const char *s, size_t len, const char *want) {
  pu_buf w;
  pu_buf_init(&w);
  pu_json_str(&w, s, len);
  assert_string_equal(w.p, want);
  pu_buf_free(&w);
  round_trip(s, len);
}

static void test_escaper_vectors(void **state) {
  expect_escaped("", 0, "\"\"");
  expect_escaped("plain", 5, "\"plain\"");
  expect_escaped("q\"b\\s/", 6, "\"q\\\"b\\\\s/\"");
  expect_escaped("\n\t\r\b\f\x01\x1f", 7, "\"\\n\\t\\r\\b\\f\\u0001\\u001f\"");
  expect_escaped("a\0b", 3, "\"a\\u0000b\"");
  expect_escaped("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", 9, "\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\""); /* é € 😀 */
  /* Invalid: overlong, surrogate, truncated, above U+10FFFF, lone continuation, 0xFF. */
  expect_escaped("\xC0\x80", 2, "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");
  expect_escaped("\xED\xA0\x80", 3, "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");
  expect_escaped("x\xE2\x82", 3, "\"x\xEF\xBF\xBD\xEF\xBF\xBD\"");
  expect_escaped("\xF4\x90\x80\x80", 4, "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");
  expect_escaped("\x80z\xFF", 3, "\"\xEF\xBF\xBDz\xEF\xBF\xBD\"");
  expect_escaped("\xF4\x8F\xBF\xBF", 4, "\"\xF4\x8F\xBF\xBF\""); /* U+10FFFF is fine */
}

/* Random bytes (fixed seed, so a failure repeats), biased towards the bytes
 * that matter: controls, quotes, backslashes, UTF-8 lead and continuation. */
static void test_escaper_random(void **state) {
  static const unsigned char interesting[] = {0, 1, 0x1f, '"', '\\', '/', 'a', 0x7f, 0x80, 0xbf, 0xc0,
                                              0xc2, 0xdf, 0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff, 0xa0, 0x90};
  uint64_t x = 0x9e3779b97f4a7c15ull;
  char buf[64];
  for (int iter = 0; iter < 20000; iter++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    size_t len = (size_t)(x % sizeof buf);
    for (size_t i = 0; i < len; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      buf[i] = (char)((x & 1) ? interesting[(x >> 8) % sizeof interesting] : (unsigned char)(x >> 16));
    }
    round_trip(buf, len);
  }
}

/* ---- builders ---- */

static void test_builders(void **state) {
  pu_buf b;
  pu_buf_init(&b);
  pu_str(&b, "{\"metadata\":{\"ownerReferences\":[");
  pu_owner_ref(&b, "demo.kctrld.io/v1", "PodSet", "we\"b", "u-1", true);
  pu_str(&b, ","); /* and one that is not the controller */
  pu_owner_ref(&b, "v1", "ConfigMap", "c", "u-2", false);
  pu_str(&b, "]},\"status\":{\"conditions\":[");
  pu_condition(&b, "Ready", "False", "Scaling", "2 of 3\nready", "2026-01-02T03:04:05Z", 7);
  pu_str(&b, ",");
  pu_condition(&b, "Seen", "True", "Ok", NULL, NULL, -1);
  pu_str(&b, "]}}");
  assert_false(b.oom);
  kc_obj *o = tu_parse(b.p, b.n);
  tu_str_at(o, "metadata.ownerReferences[0].name", "we\"b");
  tu_str_at(o, "metadata.ownerReferences[0].kind", "PodSet");
  tu_str_at(o, "metadata.ownerReferences[0].uid", "u-1");
  kc_json_value v;
  tu_true_at(o, "metadata.ownerReferences[0].controller");
  tu_true_at(o, "metadata.ownerReferences[0].blockOwnerDeletion");
  assert_int_equal(kc_obj_get(o, "metadata.ownerReferences[1].controller", &v), 0);
  assert_int_equal(v.type, KC_JSON_ABSENT);
  tu_str_at(o, "status.conditions[0].type", "Ready");
  tu_str_at(o, "status.conditions[0].status", "False");
  tu_str_at(o, "status.conditions[0].message", "2 of 3\nready");
  tu_str_at(o, "status.conditions[0].lastTransitionTime", "2026-01-02T03:04:05Z");
  int64_t g;
  assert_int_equal(kc_obj_get(o, "status.conditions[0].observedGeneration", &v), 0);
  assert_int_equal(kc_json_int64(&v, &g), 0);
  assert_int_equal(g, 7);
  tu_str_at(o, "status.conditions[1].message", "");
  assert_int_equal(kc_obj_get(o, "status.conditions[1].observedGeneration", &v), 0);
  assert_int_equal(v.type, KC_JSON_ABSENT);
  kc_obj_unref(o);
  pu_buf_free(&b);
  /* pu_printf is not limited to short fragments. */
  char big[1000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  pu_printf(&b, "%s-%d", big, 42);
  assert_false(b.oom);
  assert_int_equal(b.n, 999 + 3);
  assert_string_equal(b.p + 999, "-42");
  pu_buf_free(&b);
}

static void test_split_key(void **state) {
  char ns[8], name[8];
  assert_int_equal(pu_split_key("a/b", ns, sizeof ns, name, sizeof name), 0);
  assert_string_equal(ns, "a");
  assert_string_equal(name, "b");
  assert_int_equal(pu_split_key("solo", ns, sizeof ns, name, sizeof name), 0);
  assert_string_equal(ns, "");
  assert_string_equal(name, "solo");
  assert_int_equal(pu_split_key("a/", ns, sizeof ns, name, sizeof name), -EINVAL);
  assert_int_equal(pu_split_key("a/b/c", ns, sizeof ns, name, sizeof name), -EINVAL);
  assert_int_equal(pu_split_key("a/toolongname", ns, sizeof ns, name, sizeof name), -EINVAL);
}

/* ---- the C++ example plugin on a fake environment ---- */

struct fake {
  kc_store *cms;
  char path[256], body[1024];
  int patches;
};

static int f_get(void *ud, const char *av, const char *kind, kc_str ns, kc_str name, kc_obj **out) {
  struct fake *f = ud;
  if (strcmp(av, "v1") || strcmp(kind, "ConfigMap")) return -ENOTSUP;
  *out = kc_store_get(f->cms, ns, name);
  return *out ? 0 : -ENOENT;
}
static int f_resource(void *ud, const char *av, const char *kind, kc_resource_ref *out) {
  if (strcmp(av, "v1") || strcmp(kind, "ConfigMap")) return -ENOENT;
  *out = (kc_resource_ref){"/api/v1", "configmaps", true};
  return 0;
}
static int f_request(void *ud, const char *method, const char *path, const char *ct, const void *body,
                     size_t len, uint64_t timeout_ms, kc_api_response *out) {
  struct fake *f = ud;
  if (!strcmp(method, "PATCH")) f->patches++;
  snprintf(f->path, sizeof f->path, "%s %s %s", method, path, ct ? ct : "");
  snprintf(f->body, sizeof f->body, "%.*s", (int)len, (const char *)body);
  *out = (kc_api_response){.code = 200, .body = "{}", .body_len = 2};
  return 0;
}
static bool f_may_write(void *ud) { return true; }
static const kc_host_env_ops fake_ops = {
    .cache_get = f_get, .resource = f_resource, .request = f_request, .may_write = f_may_write};

static void test_cxx_plugin(void **state) {
  struct fake f = {.cms = kc_store_new(NULL, 0)};
  assert_non_null(f.cms);
  static const char cm[] = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"namespace\":\"ns\","
                           "\"name\":\"cm1\",\"generation\":3}}";
  char err[512];
  kc_obj *o = kc_obj_parse(cm, sizeof cm - 1, NULL, err, sizeof err);
  assert_non_null(o);
  assert_int_equal(kc_store_upsert(f.cms, o, NULL), 0);
  kc_obj_unref(o);

  kc_plugin *p = NULL;
  int rc = kc_plugin_load(KC_TEST_PLUGIN_DIR "/cxx_example.so", &p, err, sizeof err);
  if (rc < 0) fail_msg("%s", err);
  assert_string_equal(kc_plugin_name(p), "cxx-example");
  assert_string_equal(kc_plugin_table(p)->version, "1.0.0");
  kc_host_env env = {&fake_ops, &f, NULL, false, NULL};
  kc_plugin_instance *inst = NULL;
  assert_int_equal(kc_plugin_instance_new(p, "cxx", &env, &inst, err, sizeof err), 0);
  kc_reconcile_result res;
  kc_plugin_reconcile(inst, "ns/cm1", &res);
  if (res.kind != KC_RESULT_DONE) fail_msg("reconcile: %d %s", res.kind, res.message);
  assert_int_equal(f.patches, 1);
  assert_string_equal(f.path, "PATCH /api/v1/namespaces/ns/configmaps/cm1/status application/merge-patch+json");
  pu_buf b;
  pu_buf_init(&b);
  pu_str(&b, f.body);
  o = tu_parse(b.p, b.n);
  pu_buf_free(&b);
  tu_str_at(o, "status.conditions[0].type", "Seen");
  tu_str_at(o, "status.conditions[0].status", "True");
  tu_str_at(o, "status.conditions[0].message", "seen by C++: \"cm1\"");
  kc_json_value v;
  int64_t g;
  assert_int_equal(kc_obj_get(o, "status.conditions[0].observedGeneration", &v), 0);
  assert_int_equal(kc_json_int64(&v, &g), 0);
  assert_int_equal(g, 3);
  kc_obj_unref(o);
  /* A key not in the cache: done, nothing written. */
  kc_plugin_reconcile(inst, "ns/gone", &res);
  assert_int_equal(res.kind, KC_RESULT_DONE);
  assert_int_equal(f.patches, 1);
  kc_plugin_instance_free(inst);
  kc_plugin_host_unload_all();
  kc_store_free(f.cms);
}

int main(void) {
  kc_log_set_level(KC_LOG_WARN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_escaper_vectors), cmocka_unit_test(test_escaper_random),
      cmocka_unit_test(test_builders),        cmocka_unit_test(test_split_key),
      cmocka_unit_test(test_cxx_plugin),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
