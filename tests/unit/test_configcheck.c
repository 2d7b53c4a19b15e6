/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for daemon/configcheck.c: what --check-config finds beyond the
 * schema: kinds a built-in group/version does not serve, each reported at
 * the file:line:col of its `kind:`. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "configcheck.h"

static kc_config *load(const char *text) {
  kc_config *cfg = NULL;
  char err[2048];
  if (kc_config_load_buffer("t.yaml", NULL, text, strlen(text), &cfg, err, sizeof err) < 0)
    fail_msg("config does not load: %s", err);
  return cfg;
}

static void test_builtin_kinds(void **state) {
  kc_config *cfg = load("informers:\n"
                        "  - apiVersion: v1\n"
                        "    kind: ConfigMaps\n"
                        "  - { apiVersion: apps/v1, kind: Deployment }\n"
                        "  - { apiVersion: demo.kctrld.io/v1, kind: PodSets }\n"
                        "controllers: []\n");
  char err[2048];
  assert_int_equal(kc_configcheck_run(cfg, err, sizeof err), -EINVAL);
  assert_string_equal(err, "t.yaml:3:11: kind ConfigMaps is not served by v1 (did you mean ConfigMap?)");
  kc_config_free(cfg);

  cfg = load("informers:\n"
             "  - { apiVersion: v1, kind: ConfigMap }\n"
             "  - { apiVersion: demo.kctrld.io/v1, kind: PodSet }\n"
             "controllers: []\n");
  assert_int_equal(kc_configcheck_run(cfg, err, sizeof err), 0);
  assert_string_equal(err, "");
  kc_config_free(cfg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_builtin_kinds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
