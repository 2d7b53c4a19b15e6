/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the podset plugin's logic (plugins/podset/podset.c is
 * compiled into this test): the Pod built from a template, and the order in
 * which Pods are chosen for scale-down. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "watch/decode.h"
#include "testutil.h"
#include "../../plugins/podset/podset.c"

static kctrld_str S_(const char *s) { return s ? (kctrld_str){s, strlen(s)} : (kctrld_str){0}; }

static void test_build_pod(void **state) {
  pu_buf b;
  assert_int_equal(podset_build_pod("demo", "web", "u-1", S_("{\"app\":\"web\",\"podset\":\"other\",\"t\":\"x\"}"),
                                    S_("{\"a\":\"b\"}"),
                                    S_("{\"containers\":[{\"name\":\"nginx\",\"image\":\"nginx:1.27\"}]}"), &b),
                   0);
  kc_obj *o = tu_parse(b.p, b.n);
  pu_buf_free(&b);
  assert_true(kc_str_eq_c(kc_obj_kind(o), "Pod") && kc_str_eq_c(kc_obj_api_version(o), "v1"));
  assert_true(kc_str_eq_c(kc_obj_namespace(o), "demo"));
  tu_str_at(o, "metadata.generateName", "web-");
  assert_int_equal(o->nlabels, 3);
  assert_true(kc_str_eq_c(kc_obj_label(o, kc_str_c("podset")), "web")); /* ours wins */
  assert_true(kc_str_eq_c(kc_obj_label(o, kc_str_c("app")), "web"));
  tu_str_at(o, "metadata.annotations.a", "b");
  tu_str_at(o, "metadata.ownerReferences[0].apiVersion", "demo.kctrld.io/v1");
  tu_str_at(o, "metadata.ownerReferences[0].kind", "PodSet");
  tu_str_at(o, "metadata.ownerReferences[0].name", "web");
  tu_str_at(o, "metadata.ownerReferences[0].uid", "u-1");
  tu_true_at(o, "metadata.ownerReferences[0].controller");
  tu_true_at(o, "metadata.ownerReferences[0].blockOwnerDeletion");
  tu_str_at(o, "spec.containers[0].image", "nginx:1.27");
  kc_obj_unref(o);

  /* No template labels or annotations; an escaped name. */
  assert_int_equal(podset_build_pod("demo", "we\"b", "u", (kctrld_str){0}, (kctrld_str){0}, S_("{}"), &b), 0);
  o = tu_parse(b.p, b.n);
  pu_buf_free(&b);
  assert_int_equal(o->nlabels, 1);
  kc_json_value v;
  assert_int_equal(kc_obj_get(o, "metadata.annotations", &v), 0);
  assert_int_equal(v.type, KC_JSON_ABSENT);
  tu_str_at(o, "metadata.generateName", "we\"b-");
  kc_obj_unref(o);

  /* A template without an object spec, or with broken labels. */
  assert_int_equal(podset_build_pod("demo", "web", "u", (kctrld_str){0}, (kctrld_str){0}, (kctrld_str){0}, &b), -EINVAL);
  assert_int_equal(podset_build_pod("demo", "web", "u", S_("[1]"), (kctrld_str){0}, S_("{}"), &b), -EINVAL);
}

static void test_delete_order(void **state) {
  struct pod_info pods[] = {
      {NULL, true, S_("2024-05-01T10:00:00Z"), S_("a")},
      {NULL, true, S_("2024-05-01T10:00:05Z"), S_("b")},
      {NULL, false, S_("2024-05-01T09:00:00Z"), S_("c")},
      {NULL, true, S_("2024-05-01T10:00:05Z"), S_("d")},
  };
  qsort(pods, 4, sizeof pods[0], delete_order);
  /* Not running first, then newest, then name (descending) for ties. */
  assert_memory_equal(pods[0].name.ptr, "c", 1);
  assert_memory_equal(pods[1].name.ptr, "d", 1);
  assert_memory_equal(pods[2].name.ptr, "b", 1);
  assert_memory_equal(pods[3].name.ptr, "a", 1);
}

static bool visit_count(kctrld_str k, kctrld_str v, void *ud) {
  (*(int *)ud)++;
  return true;
}

static void test_json_members(void **state) {
  int n = 0;
  assert_int_equal(pu_json_members(S_("{\"a\":{\"x\":[1,\"}\"]},\"b\":\"\\\"\",\"c\":null}"), visit_count, &n), 3);
  assert_int_equal(n, 3);
  assert_int_equal(pu_json_members(S_("{}"), visit_count, &n), 0);
  assert_int_equal(pu_json_members(S_("[]"), visit_count, &n), -EINVAL);
  assert_int_equal(pu_json_members(S_("{\"a\":1,}"), visit_count, &n), -EINVAL);
  assert_int_equal(pu_json_members(S_("{\"a\":\"x"), visit_count, &n), -EINVAL);
  char ns[8], name[8];
  assert_int_equal(pu_split_key("ns/web", ns, sizeof ns, name, sizeof name), 0);
  assert_string_equal(ns, "ns");
  assert_string_equal(name, "web");
  assert_int_equal(pu_split_key("web", ns, sizeof ns, name, sizeof name), 0);
  assert_string_equal(ns, "");
  assert_int_equal(pu_split_key("ns/", ns, sizeof ns, name, sizeof name), -EINVAL);
  assert_int_equal(pu_split_key("a/b/c", ns, sizeof ns, name, sizeof name), -EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_build_pod),
      cmocka_unit_test(test_delete_order),
      cmocka_unit_test(test_json_members),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
