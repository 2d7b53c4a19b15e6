/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/kname: each Kubernetes name rule at its edges
 * (lengths, first/last characters, dots, prefixes) and apimachinery's
 * error texts for label keys and values. */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "kube/kname.h"

static char *rep(char *buf, char c, size_t n) {
  memset(buf, c, n);
  buf[n] = '\0';
  return buf;
}

#define CHECK(fn, s, want) assert_int_equal(fn(s, strlen(s)), want)

static void test_dns_label(void **state) {
  (void)state;
  char b[300];
  CHECK(kc_name_is_dns_label, "a", true);
  CHECK(kc_name_is_dns_label, "kube-system", true);
  CHECK(kc_name_is_dns_label, "0a9", true);
  CHECK(kc_name_is_dns_label, rep(b, 'a', 63), true);
  CHECK(kc_name_is_dns_label, rep(b, 'a', 64), false);
  CHECK(kc_name_is_dns_label, "", false);
  CHECK(kc_name_is_dns_label, "-a", false);
  CHECK(kc_name_is_dns_label, "a-", false);
  CHECK(kc_name_is_dns_label, "A", false);
  CHECK(kc_name_is_dns_label, "a.b", false);
  CHECK(kc_name_is_dns_label, "a_b", false);
}

static void test_dns_subdomain(void **state) {
  (void)state;
  char b[300];
  CHECK(kc_name_is_dns_subdomain, "example.com", true);
  CHECK(kc_name_is_dns_subdomain, "a", true);
  CHECK(kc_name_is_dns_subdomain, "a-b.c-d.e", true);
  CHECK(kc_name_is_dns_subdomain, rep(b, 'a', 253), true);
  CHECK(kc_name_is_dns_subdomain, rep(b, 'a', 254), false);
  CHECK(kc_name_is_dns_subdomain, "", false);
  CHECK(kc_name_is_dns_subdomain, "a..b", false); /* every label non-empty */
  CHECK(kc_name_is_dns_subdomain, "a.-b", false); /* and starts ... */
  CHECK(kc_name_is_dns_subdomain, "a-.b", false); /* ... and ends alphanumeric */
  CHECK(kc_name_is_dns_subdomain, ".a", false);
  CHECK(kc_name_is_dns_subdomain, "a.", false);
  CHECK(kc_name_is_dns_subdomain, "Example.com", false);
}

static void test_qualified(void **state) {
  (void)state;
  char b[300], k[400];
  CHECK(kc_name_is_qualified, "app", true);
  CHECK(kc_name_is_qualified, "App_Name.v-1", true);
  CHECK(kc_name_is_qualified, "example.com/name", true);
  CHECK(kc_name_is_qualified, "k8s.io/initial-events-end", true);
  CHECK(kc_name_is_qualified, rep(b, 'a', 63), true);
  CHECK(kc_name_is_qualified, rep(b, 'a', 64), false);
  snprintf(k, sizeof k, "%s/x", rep(b, 'a', 253));
  CHECK(kc_name_is_qualified, k, true);
  snprintf(k, sizeof k, "%s/x", rep(b, 'a', 254));
  CHECK(kc_name_is_qualified, k, false);
  CHECK(kc_name_is_qualified, "", false);
  CHECK(kc_name_is_qualified, "/name", false);
  CHECK(kc_name_is_qualified, "example.com/", false);
  CHECK(kc_name_is_qualified, "a/b/c", false);
  CHECK(kc_name_is_qualified, "Example.com/name", false);
  CHECK(kc_name_is_qualified, "a..b/name", false);
  CHECK(kc_name_is_qualified, "_name", false);
  CHECK(kc_name_is_qualified, "name-", false);
  CHECK(kc_name_is_qualified, "bad key!", false);
}

static void test_label_value(void **state) {
  (void)state;
  char b[300];
  CHECK(kc_name_is_label_value, "", true);
  CHECK(kc_name_is_label_value, "v1.2_x-Y", true);
  CHECK(kc_name_is_label_value, rep(b, 'z', 63), true);
  CHECK(kc_name_is_label_value, rep(b, 'z', 64), false);
  CHECK(kc_name_is_label_value, "-a", false);
  CHECK(kc_name_is_label_value, "a/b", false);
  CHECK(kc_name_is_label_value, "a b", false);
}

static void test_path_segment(void **state) {
  (void)state;
  assert_null(kc_name_path_segment_problem("a", 1));
  assert_null(kc_name_path_segment_problem("...", 3));
  assert_null(kc_name_path_segment_problem("a:b@c", 5));
  assert_null(kc_name_path_segment_problem("", 0));
  assert_string_equal(kc_name_path_segment_problem(".", 1), "may not be");
  assert_string_equal(kc_name_path_segment_problem("..", 2), "may not be");
  assert_string_equal(kc_name_path_segment_problem("a/b", 3), "may not contain '/':");
  assert_string_equal(kc_name_path_segment_problem("a%2F", 4), "may not contain '%':");
  assert_string_equal(kc_name_path_segment_problem("a\0b", 3), "may not contain NUL:");
}

static void test_messages(void **state) {
  (void)state;
  char mem[1024];
  kc_buf b = kc_buf_fixed(mem, sizeof mem);
  assert_int_equal(kc_name_qualified_errors(&b, "app", 3), 0);
  assert_string_equal(mem, "");
  assert_int_equal(kc_name_qualified_errors(&b, "/x", 2), 1);
  assert_string_equal(mem, "prefix part must be non-empty");
  kc_buf_reset(&b);
  assert_int_equal(kc_name_qualified_errors(&b, "Ex/-", 4), 2);
  assert_non_null(strstr(mem, "prefix part a lowercase RFC 1123 subdomain must consist of"));
  assert_non_null(strstr(mem, "; name part must consist of alphanumeric characters"));
  kc_buf_reset(&b);
  assert_int_equal(kc_name_label_value_errors(&b, "", 0), 0);
  assert_int_equal(kc_name_label_value_errors(&b, "-", 1), 1);
  assert_non_null(strstr(mem, "a valid label must be an empty string or consist of"));
}

/* Checks one splitter (both share kname.c's "[prefix/]rest" rule). */
typedef bool (*split_fn)(const char *s, size_t n, kc_str *prefix, kc_str *rest);
static void split(split_fn fn, const char *s, size_t n, bool ok, const char *prefix,
                  const char *rest) {
  kc_str a = {"x", 1}, b = {"x", 1};
  assert_int_equal(fn(s, n, &a, &b), ok);
  assert_non_null(a.ptr);
  assert_non_null(b.ptr);
  assert_int_equal(a.len, strlen(prefix));
  assert_int_equal(b.len, strlen(rest));
  assert_memory_equal(a.ptr, prefix, a.len);
  assert_memory_equal(b.ptr, rest, b.len);
}
#define split_av(s, n, ok, g, v) split(kc_name_split_api_version, s, n, ok, g, v)
#define SPLIT_AV(s, ok, g, v) split_av(s, strlen(s), ok, g, v)

static void test_split_api_version(void **state) {
  (void)state;
  SPLIT_AV("v1", true, "", "v1"); /* the core group */
  SPLIT_AV("apps/v1", true, "apps", "v1");
  SPLIT_AV("coordination.k8s.io/v1", true, "coordination.k8s.io", "v1");
  SPLIT_AV("example.com/v1alpha1", true, "example.com", "v1alpha1");
  /* Only the shape is checked, not the characters. */
  SPLIT_AV("Apps/V1", true, "Apps", "V1");
  SPLIT_AV("apps", true, "", "apps");
  SPLIT_AV("", false, "", "");
  SPLIT_AV("/", false, "", "");
  SPLIT_AV("/v1", false, "", "");
  SPLIT_AV("apps/", false, "", "");
  SPLIT_AV("a/b/v1", false, "", "");
  SPLIT_AV("apps//v1", false, "", "");
  /* A byte range: what follows n is not read. */
  split_av("apps/v1/extra", 7, true, "apps", "v1");
  split_av("apps/v1", 4, true, "", "apps");
  split_av(NULL, 0, false, "", "");
}

#define split_key(s, n, ok, ns, name) split(kc_name_split_key, s, n, ok, ns, name)
#define SPLIT_KEY(s, ok, ns, name) split_key(s, strlen(s), ok, ns, name)

static void test_split_key(void **state) {
  (void)state;
  SPLIT_KEY("default/web", true, "default", "web");
  SPLIT_KEY("kube-system/coredns-5d78c9869d-abcde", true, "kube-system", "coredns-5d78c9869d-abcde");
  SPLIT_KEY("node-1", true, "", "node-1"); /* cluster-scoped: no '/' */
  SPLIT_KEY("a/b.c:d", true, "a", "b.c:d"); /* characters are not checked */
  SPLIT_KEY("", false, "", "");
  SPLIT_KEY("/", false, "", "");
  SPLIT_KEY("ns/", false, "", "");
  SPLIT_KEY("/web", false, "", "");
  SPLIT_KEY("a/b/c", false, "", "");
  SPLIT_KEY("a//b", false, "", "");
  split_key("ns/web/more", 6, true, "ns", "web");
  split_key("ns/web", 2, true, "", "ns");
  split_key(NULL, 0, false, "", "");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dns_label),    cmocka_unit_test(test_dns_subdomain),
      cmocka_unit_test(test_qualified),    cmocka_unit_test(test_label_value),
      cmocka_unit_test(test_path_segment), cmocka_unit_test(test_messages),
      cmocka_unit_test(test_split_api_version), cmocka_unit_test(test_split_key),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
