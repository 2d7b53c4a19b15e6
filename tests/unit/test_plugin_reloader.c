/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the reloader plugin's logic (plugins/reloader/reloader.c is
 * compiled into this test): FNV-1a, the documented hash (pinned vector,
 * key-order independence), and reference collection on real fixtures through
 * the daemon's object accessors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "host/hostapi.h"
#include "host/plugin_host.h"
#include "testutil.h"
#include "../../plugins/reloader/reloader.c"

static kctrld_str S_(const char *s) { return (kctrld_str){s, strlen(s)}; }

static uint64_t hash_of(const char *data, const char *binary, bool present) {
  uint64_t h = FNV_OFFSET;
  assert_int_equal(hash_source(&h, "ConfigMap", "env", present, data ? S_(data) : (kctrld_str){0},
                               binary ? S_(binary) : (kctrld_str){0}),
                   0);
  return h;
}

static void test_hash(void **state) {
  assert_int_equal(fnv1a(FNV_OFFSET, "a", 1), 0xaf63dc4c8601ec8cull); /* the published FNV-1a 64 of "a" */
  /* Pinned: the integration test recomputes the same algorithm in Python. */
  assert_int_equal(hash_of("{\"b\":\"2\",\"a\":\"1\"}", NULL, true), 0x24ce7a55ca6e6e03ull);
  /* Key order and whitespace do not matter; content, kind and presence do. */
  assert_int_equal(hash_of("{\"a\":\"1\",\"b\":\"2\"}", NULL, true), hash_of("{ \"b\" : \"2\" , \"a\":\"1\" }", NULL, true));
  assert_int_not_equal(hash_of("{\"a\":\"1\"}", NULL, true), hash_of("{\"a\":\"2\"}", NULL, true));
  assert_int_not_equal(hash_of("{\"a\":\"1\"}", NULL, true), hash_of(NULL, "{\"a\":\"1\"}", true));
  assert_int_not_equal(hash_of(NULL, NULL, true), hash_of(NULL, NULL, false));
  assert_int_not_equal(hash_of("{\"ab\":\"c\"}", NULL, true), hash_of("{\"a\":\"bc\"}", NULL, true));
  uint64_t h = FNV_OFFSET;
  assert_int_equal(hash_source(&h, "Secret", "x", true, S_("{\"a\":"), (kctrld_str){0}), -EINVAL);
}

static kc_obj *load(const char *text) {
  char err[128];
  kc_obj *o = kc_obj_parse(text, strlen(text), NULL, err, sizeof err);
  if (!o) fail_msg("%s", err);
  return o;
}

static void test_refs(void **state) {
  H = kc_hostapi_table();
  /* deployment-k9s: two env secretKeyRefs to one Secret. */
  kc_obj *d = tu_fixture_obj("deployment-k9s.json", NULL);
  struct refs r = {0};
  collect_refs((const kctrld_object *)d, &r);
  assert_int_equal(r.cm.n, 0);
  assert_int_equal(r.secret.n, 1);
  assert_string_equal(r.secret.names[0], "icx-creds");
  set_free(&r.cm);
  set_free(&r.secret);
  kc_obj_unref(d);

  /* The coredns Pod's spec as a Deployment template: a configMap volume and
   * a projected configMap, plus envFrom/init references added here. */
  kc_obj *p = tu_fixture_obj("pod-k8s-openapi-coredns.json", NULL);
  kc_json_value spec;
  assert_int_equal(kc_obj_get(p, "spec", &spec), 0);
  pu_buf b = {0};
  pu_str(&b, "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"d\"},\"spec\":{\"template\":{\"spec\":");
  pu_add(&b, spec.raw.ptr, spec.raw.len - 1);
  pu_str(&b, ",\"initContainers\":[{\"name\":\"i\",\"envFrom\":[{\"secretRef\":{\"name\":\"init-s\"}},"
             "{\"configMapRef\":{\"name\":\"coredns\"}}],\"env\":[{\"name\":\"X\",\"valueFrom\":"
             "{\"configMapKeyRef\":{\"name\":\"a-first\",\"key\":\"k\"}}}]}]}}}}");
  assert_false(b.oom);
  d = load(b.p);
  pu_buf_free(&b);
  kc_obj_unref(p);
  collect_refs((const kctrld_object *)d, &r);
  assert_int_equal(r.cm.n, 3);
  assert_string_equal(r.cm.names[0], "a-first");
  assert_string_equal(r.cm.names[1], "coredns");
  assert_string_equal(r.cm.names[2], "kube-root-ca.crt");
  assert_int_equal(r.secret.n, 1);
  assert_string_equal(r.secret.names[0], "init-s");
  set_free(&r.cm);
  set_free(&r.secret);
  kc_obj_unref(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hash),
      cmocka_unit_test(test_refs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
