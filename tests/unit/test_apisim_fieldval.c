/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for tests/apisim/fieldval (kube-apisim's server-side field
 * validation): unknown fields of custom resources against a CRD's
 * structural schema (nested properties, arrays, additionalProperties,
 * x-kubernetes-preserve-unknown-fields, embedded resources, metadata) and
 * of built-in kinds at the top level and in metadata, in document order,
 * with strategic merge patch directives skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../apisim/api.h"
#include "../apisim/fieldval.h"
#include "../apisim/store.h"
#include "../apisim/types.h"

static const char crd[] =
  "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","
  "\"metadata\":{\"name\":\"widgets.example.com\"},\"spec\":{\"group\":\"example.com\","
  "\"scope\":\"Namespaced\",\"names\":{\"plural\":\"widgets\",\"singular\":\"widget\",\"kind\":\"Widget\"},"
  "\"versions\":[{\"name\":\"v1\",\"served\":true,\"storage\":true,\"schema\":{\"openAPIV3Schema\":"
  "{\"type\":\"object\",\"properties\":{\"spec\":{\"type\":\"object\",\"properties\":{"
  "\"size\":{\"type\":\"integer\"},"
  "\"ports\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"port\":{\"type\":\"integer\"}}}},"
  "\"labels\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}},"
  "\"free\":{\"type\":\"object\",\"x-kubernetes-preserve-unknown-fields\":true,"
  "\"properties\":{\"known\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}}}}},"
  "\"tpl\":{\"type\":\"object\",\"x-kubernetes-embedded-resource\":true,\"properties\":{\"spec\":{\"type\":\"object\"}}}"
  "}},\"status\":{\"type\":\"object\"}}}}}]}}";

static struct sim_rtype *widgets, *configmaps;

static int setup(void **state)
{
  (void)state;
  sim_store_init(100);
  sim_types_init();
  char perr[128], *err = NULL;
  jv *d = jv_parse(crd, sizeof crd - 1, perr, sizeof perr);
  assert_non_null(d);
  assert_int_equal(sim_api_seed(d, &err), 0);
  pthread_mutex_lock(&sim_mu);
  widgets = sim_type_find_locked("example.com", "v1", "widgets");
  configmaps = sim_type_find_locked("", "v1", "configmaps");
  pthread_mutex_unlock(&sim_mu);
  assert_non_null(widgets);
  assert_non_null(configmaps);
  return 0;
}

static void expect(const struct sim_rtype *rt, const char *obj, size_t want_n, const char *want)
{
  char perr[128], *out = NULL;
  jv *d = jv_parse(obj, strlen(obj), perr, sizeof perr);
  if (!d) fail_msg("bad test JSON %s: %s", obj, perr);
  size_t n = sim_fieldval_unknown(rt, d, &out);
  jv_free(d);
  if (n != want_n || (want ? !out || strcmp(out, want) != 0 : out != NULL))
    fail_msg("%s: got %zu %s, want %zu %s", obj, n, out ? out : "(null)", want_n, want ? want : "(null)");
  free(out);
}

static void test_custom_resource(void **state)
{
  (void)state;
  expect(widgets, "{\"apiVersion\":\"example.com/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"w\","
                  "\"labels\":{\"a\":\"b\"}},\"spec\":{\"size\":1,\"ports\":[{\"port\":1}],"
                  "\"labels\":{\"x\":\"y\"},\"free\":{\"anything\":{\"goes\":1}},"
                  "\"tpl\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},\"spec\":{}}},"
                  "\"status\":{}}",
         0, NULL);
  expect(widgets, "{\"extra\":1,\"metadata\":{\"labelz\":{}},\"spec\":{\"sizee\":1,"
                  "\"ports\":[{\"port\":1},{\"prot\":2}],\"free\":{\"known\":{\"b\":1}},"
                  "\"tpl\":{\"metadata\":{\"nam\":\"p\"},\"x\":1}},\"status\":{\"phase\":\"a\"}}",
         8,
         "unknown field \"extra\", unknown field \"metadata.labelz\", unknown field \"spec.sizee\", "
         "unknown field \"spec.ports[1].prot\", unknown field \"spec.free.known.b\", "
         "unknown field \"spec.tpl.metadata.nam\", unknown field \"spec.tpl.x\", "
         "unknown field \"status.phase\"");
}

static void test_builtin(void **state)
{
  (void)state;
  expect(configmaps, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c\","
                     "\"annotations\":{}},\"data\":{\"a\":\"b\"},\"binaryData\":{},\"immutable\":true}",
         0, NULL);
  expect(configmaps, "{\"datta\":{},\"spec\":{},\"metadata\":{\"nam\":\"c\",\"uid\":\"u\"}}", 3,
         "unknown field \"datta\", unknown field \"spec\", unknown field \"metadata.nam\"");
  /* strategic merge patch directives are not fields */
  expect(configmaps, "{\"$setElementOrder/data\":[],\"$patch\":\"replace\",\"data\":{}}", 0, NULL);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_custom_resource),
    cmocka_unit_test(test_builtin),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
