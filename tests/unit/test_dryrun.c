/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/host/dryrun: the dryRun=All query parameter after a
 * path with and without a query, the verb of each write, the one-line
 * description of a write (target of every shape of path, the name of a
 * create from its body, the field summary of merge, apply and JSON
 * patches, its cap and "+N more", a body that does not parse) and the
 * counters per controller and verb. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "host/dryrun.h"

static void test_path(void **state) {
  (void)state;
  kc_buf b = {0};
  assert_int_equal(kc_dry_run_path("/api/v1/namespaces/a/configmaps", &b), 0);
  assert_string_equal(b.p, "/api/v1/namespaces/a/configmaps?dryRun=All");
  free(b.p);
  b = (kc_buf){0};
  assert_int_equal(kc_dry_run_path("/api/v1/namespaces/a/configmaps/x?fieldManager=m&force=true", &b), 0);
  assert_string_equal(b.p, "/api/v1/namespaces/a/configmaps/x?fieldManager=m&force=true&dryRun=All");
  free(b.p);
}

static void test_verbs(void **state) {
  (void)state;
  assert_int_equal(kc_dry_run_verb_of("POST", "application/json"), KC_DRY_RUN_CREATE);
  assert_int_equal(kc_dry_run_verb_of("PUT", "application/json"), KC_DRY_RUN_UPDATE);
  assert_int_equal(kc_dry_run_verb_of("PATCH", "application/merge-patch+json"), KC_DRY_RUN_PATCH);
  assert_int_equal(kc_dry_run_verb_of("PATCH", "application/apply-patch+yaml"), KC_DRY_RUN_APPLY);
  assert_int_equal(kc_dry_run_verb_of("DELETE", NULL), KC_DRY_RUN_DELETE);
  assert_int_equal(kc_dry_run_verb_of("GET", NULL), -EINVAL);
  assert_string_equal(kc_dry_run_verb_name(KC_DRY_RUN_EVENT), "event");
}

static const char *describe(const char *method, const char *path, const char *ct, const char *body) {
  static char out[512];
  kc_dry_run_describe(method, path, ct, body, body ? strlen(body) : 0, out, sizeof out);
  return out;
}

static void test_describe_targets(void **state) {
  (void)state;
  const char *cm = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"web\"}}";
  assert_string_equal(describe("POST", "/api/v1/namespaces/demo/configmaps", "application/json", cm),
                      "create configmaps demo/web");
  assert_string_equal(describe("POST", "/apis/apps/v1/namespaces/demo/deployments", "application/json",
                               "{\"metadata\":{\"generateName\":\"web-\"}}"),
                      "create deployments demo/(generateName web-)");
  assert_string_equal(describe("PUT", "/apis/demo.kctrld.io/v1/namespaces/demo/podsets/web/status",
                               "application/json", "{}"),
                      "update podsets/status demo/web");
  assert_string_equal(describe("DELETE", "/api/v1/namespaces/demo/pods/web-1", "application/json",
                               "{\"kind\":\"DeleteOptions\"}"),
                      "delete pods demo/web-1");
  /* cluster-scoped, and a Namespace's own subresource */
  assert_string_equal(describe("DELETE", "/api/v1/namespaces/team-a", NULL, NULL), "delete namespaces team-a");
  assert_string_equal(describe("PUT", "/api/v1/namespaces/team-a/status", "application/json", "{}"),
                      "update namespaces/status team-a");
  assert_string_equal(describe("POST", "/api/v1/nodes", "application/json", "{}"), "create nodes (no name)");
}

static void test_describe_summaries(void **state) {
  (void)state;
  const char *p = "/api/v1/namespaces/demo/configmaps/web";
  /* merge: leaf paths, a removal, the resourceVersion guard left out */
  assert_string_equal(
      describe("PATCH", p, "application/merge-patch+json",
               "{\"metadata\":{\"resourceVersion\":\"7\",\"labels\":{\"a\":\"1\",\"b\":null}},\"data\":{\"k\":\"v\"}}"),
      "patch configmaps demo/web: metadata.labels.a, -metadata.labels.b, data.k");
  /* apply: the identity of the object left out */
  assert_string_equal(describe("PATCH", "/api/v1/namespaces/demo/configmaps/web?fieldManager=m",
                               "application/apply-patch+yaml",
                               "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"web\","
                               "\"namespace\":\"demo\",\"labels\":{\"x\":\"y\"}},\"data\":{\"list\":[1,2]}}"),
                      "apply configmaps demo/web: metadata.labels.x, data.list");
  /* JSON patch: op and path of each operation */
  assert_string_equal(describe("PATCH", p, "application/json-patch+json",
                               "[{\"op\":\"test\",\"path\":\"/metadata/finalizers/0\",\"value\":\"f\"},"
                               "{\"op\":\"remove\",\"path\":\"/metadata/finalizers/0\"}]"),
                      "patch configmaps demo/web: test /metadata/finalizers/0, remove /metadata/finalizers/0");
  /* at most 8 fields, then how many more */
  assert_string_equal(describe("PATCH", p, "application/merge-patch+json",
                               "{\"data\":{\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6,\"g\":7,\"h\":8,"
                               "\"i\":9,\"j\":10}}"),
                      "patch configmaps demo/web: data.a, data.b, data.c, data.d, data.e, data.f, "
                      "data.g, data.h +2 more");
  assert_string_equal(describe("PATCH", p, "application/merge-patch+json", "{not json"),
                      "patch configmaps demo/web: (unparsed body)");
  /* the cap */
  char small[16];
  size_t n = kc_dry_run_describe("DELETE", "/api/v1/namespaces/demo/pods/web-1", NULL, NULL, 0, small,
                                 sizeof small);
  assert_int_equal(n, 15);
  assert_string_equal(small, "delete pods dem");
}

static void test_counts(void **state) {
  (void)state;
  assert_int_equal(kc_dry_run_count_of("a", KC_DRY_RUN_PATCH), 0);
  kc_dry_run_note("a", "PATCH", "/api/v1/namespaces/x/configmaps/y", "application/merge-patch+json", "{}", 2);
  kc_dry_run_note("a", "PATCH", "/api/v1/namespaces/x/configmaps/y", "application/merge-patch+json", "{}", 2);
  kc_dry_run_note("b", "DELETE", "/api/v1/namespaces/x/configmaps/y", NULL, NULL, 0);
  kc_dry_run_note("b", "GET", "/api/v1/namespaces/x/configmaps/y", NULL, NULL, 0); /* not a write */
  kc_dry_run_count("b", KC_DRY_RUN_EVENT);
  assert_int_equal(kc_dry_run_count_of("a", KC_DRY_RUN_PATCH), 2);
  assert_int_equal(kc_dry_run_count_of("b", KC_DRY_RUN_DELETE), 1);
  assert_int_equal(kc_dry_run_count_of("b", KC_DRY_RUN_EVENT), 1);
  assert_int_equal(kc_dry_run_count_of("b", KC_DRY_RUN_PATCH), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_path),
      cmocka_unit_test(test_verbs),
      cmocka_unit_test(test_describe_targets),
      cmocka_unit_test(test_describe_summaries),
      cmocka_unit_test(test_counts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
