/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for daemon/configcheck.c: what --check-config finds beyond the
 * schema: kinds a built-in group/version does not serve, each reported at
 * the file:line:col of its `kind:`; plugin files that do not exist or do
 * not load, at their `plugin:`, without running init (the build's ttl.so,
 * whose init refuses a controller without settings.kinds, checks out). */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <sys/stat.h>

#include "apisim_child.h"
#include "configcheck.h"
#include "host/plugin_host.h"

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
  assert_string_equal(err,
                      "t.yaml:3:11: kind ConfigMaps is not served by v1 (did you mean ConfigMap?)");
  kc_config_free(cfg);

  cfg = load("informers:\n"
             "  - { apiVersion: v1, kind: ConfigMap }\n"
             "  - { apiVersion: demo.kctrld.io/v1, kind: PodSet }\n"
             "controllers: []\n");
  assert_int_equal(kc_configcheck_run(cfg, err, sizeof err), 0);
  assert_string_equal(err, "");
  kc_config_free(cfg);
}

static void test_pod_and_node_field_selectors(void **state) {
  /* v1 Pod and Node: a field the API server does not select on is
   * reported at the selector; other kinds' fields are left to the server. */
  kc_config *cfg = load("informers:\n"
                        "  - apiVersion: v1\n"
                        "    kind: Pod\n"
                        "    fieldSelector: metadata.nmae=x\n"
                        "  - { apiVersion: v1, kind: Node, fieldSelector: spec.unschedulable=true }\n"
                        "  - { apiVersion: v1, kind: Node, namespaces: [a], fieldSelector: metadata.namespace=a }\n"
                        "  - { apiVersion: v1, kind: Pod, namespaces: [b], fieldSelector: status.phase=Running }\n"
                        "  - { apiVersion: v1, kind: Secret, fieldSelector: type=Opaque }\n"
                        "controllers: []\n");
  char err[2048];
  assert_int_equal(kc_configcheck_run(cfg, err, sizeof err), -EINVAL);
  assert_string_equal(err,
                      "t.yaml:4:20: informers[0].fieldSelector: field label not supported: "
                      "metadata.nmae (the API server refuses it)\n"
                      "t.yaml:6:67: informers[2].fieldSelector: field label not supported: "
                      "metadata.namespace (the API server refuses it)");
  kc_config_free(cfg);
}

static void test_plugins(void **state) {
  char ttl[PATH_MAX + 32], junk[PATH_MAX], text[4 * PATH_MAX], err[4096];
  snprintf(ttl, sizeof ttl, "%s/plugins/ttl.so", sim_build_dir);
  if (access(ttl, R_OK) != 0) skip(); /* only this test was built */
  sim_tmp_path(junk, sizeof junk, "junk.so");
  assert_int_equal(sim_write_file(junk, "not a shared object\n"), 0);
  assert_int_equal(chmod(junk, 0755), 0);
  snprintf(text, sizeof text,
           "controllers:\n"
           "  - name: ttl\n"
           "    plugin: %s\n"
           "    for: { apiVersion: v1, kind: ConfigMap }\n"
           "  - name: gone\n"
           "    plugin: /nonexistent/gone.so\n"
           "    for: { apiVersion: v1, kind: ConfigMap }\n"
           "  - name: junk\n"
           "    for: { apiVersion: v1, kind: ConfigMap }\n"
           "    plugin: %s\n",
           ttl, junk);
  kc_config *cfg = load(text);
  assert_int_equal(kc_configcheck_run(cfg, err, sizeof err), -EINVAL);
  kc_plugin_host_unload_all();
  kc_config_free(cfg);
  /* ttl loads (its init, which would refuse, does not run); the others are
   * named at their plugin: key. */
  if (strstr(err, "ttl")) fail_msg("ttl.so refused: %s", err);
  assert_non_null(
      strstr(err, "t.yaml:6:13: controller gone: plugin /nonexistent/gone.so does not exist\n"));
  char want[PATH_MAX + 64];
  snprintf(want, sizeof want, "t.yaml:10:13: controller junk: cannot load plugin %s: ", junk);
  assert_non_null(strstr(err, want));
}

/* A hook controller has no plugin file: its program is checked as its init
 * would (a program named by path must exist and be safe), at its hook:. */
static void test_hooks(void **state) {
  char prog[PATH_MAX], text[4 * PATH_MAX], err[4096];
  sim_tmp_path(prog, sizeof prog, "hook.sh");
  assert_int_equal(sim_write_file(prog, "#!/bin/sh\n"), 0);
  assert_int_equal(chmod(prog, 0755), 0);
  snprintf(text, sizeof text,
           "controllers:\n"
           "  - name: inpath\n"
           "    for: { apiVersion: v1, kind: ConfigMap }\n"
           "    hook: { exec: { command: [python3, x.py] } }\n"
           "  - name: safe\n"
           "    for: { apiVersion: v1, kind: ConfigMap }\n"
           "    hook: { exec: { command: [%s] } }\n"
           "  - name: gone\n"
           "    for: { apiVersion: v1, kind: ConfigMap }\n"
           "    hook: { exec: { command: [/nonexistent/hook] } }\n",
           prog);
  kc_config *cfg = load(text);
  assert_int_equal(kc_configcheck_run(cfg, err, sizeof err), -EINVAL);
  assert_string_equal(err, "t.yaml:10:11: controller gone: hook program /nonexistent/hook does not exist");
  assert_int_equal(chmod(prog, 0777), 0);
  assert_int_equal(kc_configcheck_run(cfg, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "t.yaml:7:11: controller safe: hook program "));
  assert_non_null(strstr(err, "is writable by other users"));
  kc_config_free(cfg);
}

/* A webhook's TLS files are checked as its init would: present, and a
 * client key file others can write refused, at its hook:. */
static void test_webhooks(void **state) {
  char key[PATH_MAX], text[4 * PATH_MAX], err[4096];
  sim_tmp_path(key, sizeof key, "client.key");
  assert_int_equal(sim_write_file(key, "x\n"), 0);
  assert_int_equal(chmod(key, 0600), 0);
  snprintf(text, sizeof text,
           "controllers:\n"
           "  - name: ok\n"
           "    for: { apiVersion: v1, kind: ConfigMap }\n"
           "    hook: { webhook: { url: 'https://h.invalid/x', clientCertFile: %s, clientKeyFile: %s } }\n"
           "  - name: noca\n"
           "    for: { apiVersion: v1, kind: ConfigMap }\n"
           "    hook: { webhook: { url: 'https://h.invalid/x', caFile: /nonexistent/ca.pem } }\n",
           key, key);
  kc_config *cfg = load(text);
  assert_int_equal(kc_configcheck_run(cfg, err, sizeof err), -EINVAL);
  assert_string_equal(err,
                      "t.yaml:7:11: controller noca: webhook caFile /nonexistent/ca.pem does not exist");
  assert_int_equal(chmod(key, 0666), 0);
  assert_int_equal(kc_configcheck_run(cfg, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "t.yaml:4:11: controller ok: webhook client key file "));
  assert_non_null(strstr(err, "is writable by other users"));
  kc_config_free(cfg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_builtin_kinds),
      cmocka_unit_test(test_pod_and_node_field_selectors),
      cmocka_unit_test(test_plugins),
      cmocka_unit_test(test_hooks),
      cmocka_unit_test(test_webhooks),
  };
  if (sim_paths_init() < 0) return 1;
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  sim_paths_free();
  return rc;
}
