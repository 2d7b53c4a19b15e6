/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/kube/kurl: group/version prefixes (core and named
 * groups), collection, object and subresource paths with and without a
 * namespace, percent-encoding of every segment and query value, and a
 * fixed buffer that is too small. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kube/kurl.h"

static const kc_str ABSENT = {NULL, 0};

static void test_group_version(void **state) {
  (void)state;
  char mem[256];
  kc_buf b = kc_buf_fixed(mem, sizeof mem);
  kc_url_group_version(&b, kc_str_c(""), kc_str_c("v1"));
  assert_string_equal(mem, "/api/v1");
  kc_buf_reset(&b);
  kc_url_group_version(&b, kc_str_c(NULL), kc_str_c("v1"));
  assert_string_equal(mem, "/api/v1"); /* an absent group is the core group too */
  kc_buf_reset(&b);
  kc_url_group_version(&b, kc_str_c("apps"), kc_str_c("v1"));
  assert_string_equal(mem, "/apis/apps/v1");
  kc_buf_reset(&b);
  kc_url_group_version(&b, kc_str_c("coordination.k8s.io"), kc_str_c("v1"));
  assert_string_equal(mem, "/apis/coordination.k8s.io/v1");
  /* Slices: only len bytes count. */
  kc_buf_reset(&b);
  kc_url_group_version(&b, (kc_str){"example.com/v1beta1", 11}, (kc_str){"v1beta1xyz", 7});
  assert_string_equal(mem, "/apis/example.com/v1beta1");
  /* A group or version that is no name cannot add segments. */
  kc_buf_reset(&b);
  kc_url_group_version(&b, kc_str_c("a/b"), kc_str_c("v1?x"));
  assert_string_equal(mem, "/apis/a%2Fb/v1%3Fx");
  assert_int_equal(b.err, 0);
}

static void test_resource(void **state) {
  (void)state;
  char mem[512];
  kc_buf b = kc_buf_fixed(mem, sizeof mem);
  kc_url_resource(&b, "/api/v1", "pods", kc_str_c("team-a"), ABSENT, NULL);
  assert_string_equal(mem, "/api/v1/namespaces/team-a/pods");
  kc_buf_reset(&b);
  kc_url_resource(&b, "/api/v1", "pods", kc_str_c(""), ABSENT, NULL);
  assert_string_equal(mem, "/api/v1/pods"); /* all namespaces */
  kc_buf_reset(&b);
  kc_url_resource(&b, "/api/v1", "namespaces", ABSENT, kc_str_c("kube-system"), NULL);
  assert_string_equal(mem, "/api/v1/namespaces/kube-system"); /* cluster-scoped */
  kc_buf_reset(&b);
  kc_url_resource(&b, "/apis/apps/v1", "deployments", kc_str_c("ns"), kc_str_c("web"), "scale");
  assert_string_equal(mem, "/apis/apps/v1/namespaces/ns/deployments/web/scale");
  kc_buf_reset(&b);
  kc_url_resource(&b, "/apis/example.com/v1", "foos", ABSENT, kc_str_c("a"), "status");
  assert_string_equal(mem, "/apis/example.com/v1/foos/a/status");
  /* An empty name that is present still makes its segment. */
  kc_buf_reset(&b);
  kc_url_resource(&b, "/api/v1", "pods", kc_str_c("ns"), kc_str_c(""), NULL);
  assert_string_equal(mem, "/api/v1/namespaces/ns/pods/");
  /* Names and namespaces that are valid in Kubernetes come out unchanged. */
  kc_buf_reset(&b);
  kc_url_resource(&b, "/api/v1", "pods", kc_str_c("a-b.c_d~e"), kc_str_c("web-0.x"), NULL);
  assert_string_equal(mem, "/api/v1/namespaces/a-b.c_d~e/pods/web-0.x");
  /* Anything else is escaped, so a value is always one segment. */
  kc_buf_reset(&b);
  kc_url_resource(&b, "/api/v1", "pods", kc_str_c("a/b"), kc_str_c("x?y#z%w c:\xc3\xa9"),
                  "st/atus");
  assert_string_equal(mem, "/api/v1/namespaces/a%2Fb/pods/x%3Fy%23z%25w%20c%3A%C3%A9/st%2Fatus");
  kc_buf_reset(&b);
  kc_url_resource(&b, "/api/v1", "pods", kc_str_c(".."), kc_str_c("."), NULL);
  assert_string_equal(mem, "/api/v1/namespaces/../pods/."); /* unreserved: kname.h refuses these */
  /* Slices: not NUL-terminated. */
  kc_buf_reset(&b);
  kc_url_resource(&b, "/api/v1", "configmaps", (kc_str){"nsXX", 2}, (kc_str){"cm/rest", 2}, NULL);
  assert_string_equal(mem, "/api/v1/namespaces/ns/configmaps/cm");
  assert_int_equal(b.err, 0);

  /* Growable buffer. */
  kc_buf g = {0};
  kc_url_resource(&g, "/apis/coordination.k8s.io/v1", "leases", kc_str_c("kctrld-system"),
                  kc_str_c("kctrld"), NULL);
  char *p = kc_buf_take(&g);
  assert_string_equal(p, "/apis/coordination.k8s.io/v1/namespaces/kctrld-system/leases/kctrld");
  free(p);

  /* Too small a fixed buffer: cut, NUL-terminated, -ENOSPC. */
  char small[10];
  kc_buf s = kc_buf_fixed(small, sizeof small);
  kc_url_resource(&s, "/api/v1", "pods", kc_str_c("ns"), kc_str_c("name"), NULL);
  assert_int_equal(s.err, -ENOSPC);
  assert_int_equal(strlen(small), sizeof small - 1);
}

static void test_params(void **state) {
  (void)state;
  char mem[512];
  kc_buf b = kc_buf_fixed(mem, sizeof mem);
  char sep = '?';
  kc_buf_puts(&b, "/api/v1/pods");
  kc_url_param(&b, &sep, "allowWatchBookmarks", "true");
  assert_int_equal(sep, '&');
  kc_url_param(&b, &sep, "labelSelector", "app in (a,b),tier!=db");
  kc_url_param(&b, &sep, "fieldSelector", "metadata.name=x&y");
  kc_url_param(&b, &sep, "resourceVersion", "");
  kc_url_param_uint(&b, &sep, "limit", 500);
  kc_url_param_uint(&b, &sep, "timeoutSeconds", UINT64_MAX);
  kc_url_param(&b, &sep, "continue", "eyJ2Ijoi+/=");
  assert_string_equal(mem, "/api/v1/pods?allowWatchBookmarks=true"
                           "&labelSelector=app%20in%20%28a%2Cb%29%2Ctier%21%3Ddb"
                           "&fieldSelector=metadata.name%3Dx%26y"
                           "&resourceVersion="
                           "&limit=500"
                           "&timeoutSeconds=18446744073709551615"
                           "&continue=eyJ2Ijoi%2B%2F%3D");
  assert_int_equal(b.err, 0);
  /* A path that already has a query goes on with '&'. */
  kc_buf_reset(&b);
  sep = '&';
  kc_url_param(&b, &sep, "force", "true");
  assert_string_equal(mem, "&force=true");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_group_version),
      cmocka_unit_test(test_resource),
      cmocka_unit_test(test_params),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
