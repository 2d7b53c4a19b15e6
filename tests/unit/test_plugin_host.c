/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/plugin_host: the loader's refusals, the host table,
 * instances on a fake host environment (retained while they live), and
 * calls into a real plugin built at test time from
 * tests/unit/plugins/sample.c (cc -shared -fPIC -fvisibility=hidden). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "watch/decode.h"
#include "base/log.h"
#include "host/plugin_host.h"
#include "testutil.h"
#include "json/yamltree.h"

static char dir[64];
static const char *src = "tests/unit/plugins/sample.c";

static void path_of(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", dir, name); }

/* Builds one variant of the sample plugin; returns 0 on success. */
static int build(const char *name, const char *defines) {
  char out[128], cmd[1024];
  path_of(out, sizeof out, name);
  const char *cc = getenv("CC") ? getenv("CC") : "cc";
  snprintf(cmd, sizeof cmd,
           "%s -std=c11 -shared -fPIC -fvisibility=hidden -Wall -Wextra -Werror -Iinclude %s "
           "-o %s %s",
           cc, defines, out, src);
  if (system(cmd) != 0) return -1;
  return chmod(out, 0755);
}

static const char *variants[][2] = {
    {"good.so", ""},
    {"wrong_abi.so", "-DWRONG_ABI"},
    {"small_table.so", "-DSMALL_TABLE"},
    {"bad_signature.so", "-DBAD_SIGNATURE"},
    {"no_entry.so", "-DNO_ENTRY"},
    {"null_entry.so", "-DNULL_ENTRY"},
    {"init_fail.so", "-DINIT_FAIL"},
    {"no_reconcile.so", "-DNO_RECONCILE"},
    {"perms.so", "-DPERMS"},
    {"old_table.so", "-DOLD_TABLE -DPERMS"},
};

/* ---- a fake host environment: one cached Pod, settings from YAML ---- */

static kc_obj *cached_pod;
static kc_yaml_doc *settings_doc;
static int retained; /* retain - release over the fake env */

static int fake_cache_get(void *ud, const char *av, const char *kind, kc_str ns, kc_str name,
                          kc_obj **out) {
  if (strcmp(kind, "Pod") || !kc_str_eq_c(name, "cache")) return -ENOENT;
  *out = kc_obj_ref(cached_pod);
  return 0;
}
static void fake_retain(void *ud) { retained++; }
static void fake_release(void *ud) { retained--; }
static int fake_resource(void *ud, const char *av, const char *kind, kc_resource_ref *out) {
  if (strcmp(av, "v1") || strcmp(kind, "ConfigMap")) return -ENOENT;
  *out = (kc_resource_ref){"/api/v1", "configmaps", true};
  return 0;
}
static bool fake_may_write(void *ud) { return true; }
/* The API server as it answers for ConfigMaps: no status route (a 404
 * whose Status names no object), and a conflict on the object itself. */
static int fake_request(void *ud, const char *method, const char *path, const char *ct,
                        const void *body, size_t len, uint64_t timeout_ms, kc_api_response *out) {
  *out = (kc_api_response){0};
  kc_status_clear(&out->status);
  bool status = strstr(path, "/status") != NULL;
  out->code = out->status.code = status ? 404 : 409;
  snprintf(out->status.reason, sizeof out->status.reason, "%s", status ? "NotFound" : "Conflict");
  snprintf(out->status.message, sizeof out->status.message, "%s",
           status ? "the server could not find the requested resource" : "the object has been modified");
  if (!status) snprintf(out->status.details_name, sizeof out->status.details_name, "x");
  out->body = "";
  return 0;
}

static const kc_host_env_ops fake_ops = {
    .cache_get = fake_cache_get, .retain = fake_retain, .release = fake_release,
    .resource = fake_resource,   .request = fake_request, .may_write = fake_may_write};

static kc_host_env fake_env(void) {
  return (kc_host_env){&fake_ops, NULL, kc_yaml_root(settings_doc), false, NULL};
}

static int make_fakes(void) {
  static const char pod[] = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"ns\","
                            "\"name\":\"cache\",\"resourceVersion\":\"42\"}}";
  static const char yaml[] = "greeting: hi from settings\n";
  char err[256];
  cached_pod = kc_obj_parse(pod, sizeof pod - 1, NULL, err, sizeof err);
  if (!cached_pod) return -1;
  return kc_yaml_load_buffer("<settings>", yaml, sizeof yaml - 1, &settings_doc, err, sizeof err);
}

static int setup(void **state) {
  (void)state;
  if (access(src, R_OK) != 0) {
    fprintf(stderr, "run from the repository root: %s not found\n", src);
    return -1;
  }
  snprintf(dir, sizeof dir, "/tmp/kctrld-plugin-test.XXXXXX");
  if (!mkdtemp(dir)) return -1;
  for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++)
    if (build(variants[i][0], variants[i][1]) != 0) return -1;
  return make_fakes();
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  kc_plugin_host_unload_all();
  kc_obj_unref(cached_pod);
  kc_yaml_free(settings_doc);
  return system(cmd) == 0 ? 0 : -1;
}

/* ---- loader refusals ---- */

static void expect_refusal(const char *name, int want_rc, const char *want_text) {
  char path[128], err[512];
  kc_plugin *p = NULL;
  path_of(path, sizeof path, name);
  int rc = kc_plugin_load(path, &p, err, sizeof err);
  if (rc != want_rc || !strstr(err, want_text))
    fail_msg("%s: rc %d (want %d), message \"%s\" (want \"%s\")", name, rc, want_rc, err, want_text);
  assert_null(p);
}

static void test_refuse_missing_and_not_regular(void **state) {
  (void)state;
  expect_refusal("does-not-exist.so", -ENOENT, "does not exist");
  char sub[128];
  path_of(sub, sizeof sub, "a-directory.so");
  assert_int_equal(mkdir(sub, 0755), 0);
  expect_refusal("a-directory.so", -EINVAL, "not a regular file");
  rmdir(sub);
}

static void test_refuse_insecure_permissions(void **state) {
  (void)state;
  char good[128], copy[128], cmd[512];
  path_of(good, sizeof good, "good.so");
  path_of(copy, sizeof copy, "writable.so");
  snprintf(cmd, sizeof cmd, "cp %s %s", good, copy);
  assert_int_equal(system(cmd), 0);
  assert_int_equal(chmod(copy, 0757), 0);
  expect_refusal("writable.so", -EPERM, "writable by other users (mode 0757)");
  assert_int_equal(chmod(copy, 0775), 0);
  expect_refusal("writable.so", -EPERM, "writable by its group");
  assert_int_equal(chmod(copy, 0755), 0);
  if (geteuid() == 0) {
    assert_int_equal(chown(copy, 65534, 65534), 0);
    expect_refusal("writable.so", -EPERM, "owned by uid 65534");
  } else {
    print_message("# not root: owner check not exercised\n");
  }
  unlink(copy);
  /* A world-writable directory without the sticky bit. */
  char sub[128], inner[160];
  path_of(sub, sizeof sub, "open-dir");
  assert_int_equal(mkdir(sub, 0755), 0);
  assert_int_equal(chmod(sub, 0777), 0);
  snprintf(inner, sizeof inner, "%s/good.so", sub);
  snprintf(cmd, sizeof cmd, "cp %s %s", good, inner);
  assert_int_equal(system(cmd), 0);
  expect_refusal("open-dir/good.so", -EPERM, "without the sticky bit");
  unlink(inner);
  rmdir(sub);
}

static void test_refuse_not_a_library(void **state) {
  (void)state;
  char path[128];
  path_of(path, sizeof path, "garbage.so");
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("this is not an ELF file\n", f);
  fclose(f);
  chmod(path, 0644);
  expect_refusal("garbage.so", -ELIBBAD, "check its dependencies with: ldd");
  unlink(path);
}

static void test_refuse_bad_tables(void **state) {
  (void)state;
  expect_refusal("no_entry.so", -ENOEXEC, "does not export kctrld_plugin_entry");
  char want[160];
  snprintf(want, sizeof want, "returned NULL (daemon ABI 1.%d)", KCTRLD_ABI_MINOR);
  expect_refusal("null_entry.so", -ECANCELED, want);
  snprintf(want, sizeof want, "built for plugin ABI 2.%d but this daemon has ABI 1.%d", KCTRLD_ABI_MINOR,
           KCTRLD_ABI_MINOR);
  expect_refusal("wrong_abi.so", -ENOTSUP, want);
  expect_refusal("small_table.so", -ENOTSUP, "plugin table of 16 bytes");
  expect_refusal("bad_signature.so", -ENOTSUP,
                 "build signature \"kctrld-abi-1,ptr4,long4,size4,off32,time32,order4321\" does "
                 "not match the daemon's \"" KCTRLD_BUILD_SIGNATURE "\"");
  expect_refusal("no_reconcile.so", -EINVAL, "reconcile is missing");
}

/* ABI 1.1 permissions: read when the table has the member, never from a 1.0
 * table (struct_size too small, whatever lies beyond it), NULL when absent. */
static void test_permissions_member(void **state) {
  (void)state;
  char path[128], err[512];
  kc_plugin *p = NULL;
  path_of(path, sizeof path, "perms.so");
  assert_int_equal(kc_plugin_load(path, &p, err, sizeof err), 0);
  const kctrld_permission *perm = kc_plugin_permissions(p);
  assert_non_null(perm);
  assert_string_equal(perm[0].resource, "pods");
  assert_string_equal(perm[0].verbs, "create,delete");
  assert_string_equal(perm[1].resource, "events");
  assert_null(perm[2].resource);
  path_of(path, sizeof path, "old_table.so");
  assert_int_equal(kc_plugin_load(path, &p, err, sizeof err), 0);
  assert_null(kc_plugin_permissions(p));
  path_of(path, sizeof path, "good.so");
  assert_int_equal(kc_plugin_load(path, &p, err, sizeof err), 0);
  assert_null(kc_plugin_permissions(p));
}

static void test_only_entry_exported(void **state) {
  (void)state;
  char cmd[256], line[256];
  snprintf(cmd, sizeof cmd, "nm -D --defined-only %s/good.so 2>/dev/null", dir);
  FILE *f = popen(cmd, "r");
  if (!f) skip();
  int entries = 0, others = 0;
  while (fgets(line, sizeof line, f)) {
    if (strstr(line, " T kctrld_plugin_entry"))
      entries++;
    else if (strstr(line, " T ") || strstr(line, " D ") || strstr(line, " B "))
      others++;
  }
  if (pclose(f) != 0 && entries == 0) skip(); /* nm missing */
  assert_int_equal(entries, 1);
  assert_int_equal(others, 0);
}

/* ---- a good plugin: load, init, reconcile results, fini ---- */

static kc_plugin_instance *load_good(const char *controller, const kc_host_env *env) {
  char path[128], err[512];
  kc_plugin *p = NULL, *again = NULL;
  path_of(path, sizeof path, "good.so");
  assert_int_equal(kc_plugin_load(path, &p, err, sizeof err), 0);
  assert_int_equal(kc_plugin_load(path, &again, err, sizeof err), 0);
  assert_ptr_equal(p, again); /* one load per file */
  assert_string_equal(kc_plugin_name(p), "sample");
  assert_string_equal(kc_plugin_table(p)->version, "1.2.3");
  kc_plugin_instance *inst = NULL;
  assert_int_equal(kc_plugin_instance_new(p, controller, env, &inst, err, sizeof err), 0);
  return inst;
}

static void reconcile(kc_plugin_instance *inst, const char *key, kc_reconcile_result *res) {
  memset(res, 0x5a, sizeof *res); /* results must not depend on the caller's buffer */
  kc_plugin_reconcile(inst, key, res);
}

static void test_reconcile_results(void **state) {
  (void)state;
  kc_host_env env = fake_env();
  kc_plugin_instance *inst = load_good("podset-controller", &env);
  assert_int_equal(retained, 1); /* the instance holds its env */
  assert_string_equal(kc_plugin_instance_controller(inst), "podset-controller");
  kc_reconcile_result res;
  reconcile(inst, "ns/ok", &res);
  assert_int_equal(res.kind, KC_RESULT_DONE);
  reconcile(inst, "ns/error", &res);
  assert_int_equal(res.kind, KC_RESULT_ERROR);
  assert_string_equal(res.message, "cannot create pod for ns/error: quota exceeded");
  reconcile(inst, "ns/after", &res);
  assert_int_equal(res.kind, KC_RESULT_REQUEUE_AFTER);
  assert_int_equal(res.after_ms, 1500);
  assert_false(res.has_priority);
  reconcile(inst, "ns/after-high", &res);
  assert_int_equal(res.kind, KC_RESULT_REQUEUE_AFTER);
  assert_int_equal(res.after_ms, 250);
  assert_true(res.has_priority);
  assert_int_equal(res.priority, KCTRLD_PRIORITY_HIGH);
  reconcile(inst, "ns/after-without-delay", &res);
  assert_int_equal(res.kind, KC_RESULT_REQUEUE);
  reconcile(inst, "ns/requeue", &res);
  assert_int_equal(res.kind, KC_RESULT_REQUEUE);
  reconcile(inst, "ns/error-without-message", &res);
  assert_int_equal(res.kind, KC_RESULT_ERROR);
  assert_string_equal(res.message, "error (no message)");
  reconcile(inst, "ns/invalid", &res);
  assert_int_equal(res.kind, KC_RESULT_ERROR);
  assert_string_equal(res.message, "plugin sample returned invalid result 42");
  /* Terminal errors (plugin.h): said by the plugin, or an error right after
   * an API answer no retry can fix, the host's reason appended once. */
  reconcile(inst, "ns/terminal", &res);
  assert_int_equal(res.kind, KC_RESULT_TERMINAL);
  assert_string_equal(res.message, "spec.size is not a number");
  reconcile(inst, "ns/terminal-without-message", &res);
  assert_int_equal(res.kind, KC_RESULT_TERMINAL);
  assert_string_equal(res.message, "terminal error (no message)");
  reconcile(inst, "ns/status", &res);
  assert_int_equal(res.kind, KC_RESULT_TERMINAL);
  assert_string_equal(res.message, "patch ns/x: -95: configmaps has no status subresource (HTTP 404 on PATCH)");
  reconcile(inst, "ns/status-passed-on", &res);
  assert_int_equal(res.kind, KC_RESULT_TERMINAL);
  assert_string_equal(res.message, "status of ns/x: configmaps has no status subresource (HTTP 404 on PATCH)");
  reconcile(inst, "ns/status-then-conflict", &res); /* the last failure decides */
  assert_int_equal(res.kind, KC_RESULT_ERROR);
  assert_string_equal(res.message, "patch ns/x: -116");
  /* settings reached init through the services; ctx names the controller */
  reconcile(inst, "ns/greeting", &res);
  assert_string_equal(res.message, "hi from settings from podset-controller");
  reconcile(inst, "ns/expect", &res);
  assert_int_equal(res.kind, KC_RESULT_DONE);
  assert_int_equal(kc_expectations_count(kc_plugin_instance_expectations(inst)), 0);
  reconcile(inst, "ns/cache", &res);
  assert_int_equal(res.kind, KC_RESULT_DONE);
  kc_plugin_instance_free(inst);
  assert_int_equal(retained, 0);
}

/* A plugin rebuilt at the same path is loaded anew (glibc alone would hand
 * back the object it loaded for that pathname): new instances run the new
 * code, the running ones keep theirs. Also for a file rewritten in place
 * (same inode), and a refused file is answered from memory until it
 * changes. */
static const char *version_of(kc_plugin_instance *inst) {
  static kc_reconcile_result res;
  reconcile(inst, "ns/version", &res);
  return res.message;
}

static void test_rebuilt_plugin_reloads(void **state) {
  (void)state;
  char path[128], err[512], cmd[512];
  kc_host_env env = fake_env();
  path_of(path, sizeof path, "rebuilt.so");
  assert_int_equal(build("rebuilt.so", "-DSAMPLE_VERSION='\"1\"'"), 0);
  kc_plugin *p1 = NULL, *p2 = NULL, *p3 = NULL, *same = NULL;
  assert_int_equal(kc_plugin_load(path, &p1, err, sizeof err), 0);
  kc_plugin_instance *i1 = NULL, *i2 = NULL, *i3 = NULL;
  assert_int_equal(kc_plugin_instance_new(p1, "c", &env, &i1, err, sizeof err), 0);
  assert_string_equal(version_of(i1), "code of version 1");

  assert_int_equal(build("rebuilt.so", "-DSAMPLE_VERSION='\"2\"'"), 0);
  kc_log_set_level(KC_LOG_INFO);
  tu_stderr_begin();
  int rc = kc_plugin_load(path, &p2, err, sizeof err);
  char *log = tu_stderr_end();
  kc_log_set_level(KC_LOG_WARN);
  assert_int_equal(rc, 0);
  assert_ptr_not_equal(p1, p2);
  assert_string_equal(kc_plugin_table(p2)->version, "2");
  assert_non_null(strstr(log, "the file changed since it was loaded (version 1), the new code runs"));
  free(log);
  assert_int_equal(kc_plugin_instance_new(p2, "c", &env, &i2, err, sizeof err), 0);
  assert_string_equal(version_of(i2), "code of version 2");
  assert_string_equal(version_of(i1), "code of version 1"); /* running code untouched */
  /* Unchanged: the same object. */
  assert_int_equal(kc_plugin_load(path, &same, err, sizeof err), 0);
  assert_ptr_equal(same, p2);

  /* Rewritten in place (same inode): new code too, and the loaded copy of
   * version 2 is not disturbed. */
  assert_int_equal(build("v3.so", "-DSAMPLE_VERSION='\"3\"'"), 0);
  snprintf(cmd, sizeof cmd, "cat %s/v3.so > %s", dir, path);
  assert_int_equal(system(cmd), 0);
  assert_int_equal(kc_plugin_load(path, &p3, err, sizeof err), 0);
  assert_ptr_not_equal(p3, p2);
  assert_int_equal(kc_plugin_instance_new(p3, "c", &env, &i3, err, sizeof err), 0);
  assert_string_equal(version_of(i3), "code of version 3");
  assert_string_equal(version_of(i2), "code of version 2");
  kc_plugin_instance_free(i1);
  kc_plugin_instance_free(i2);
  kc_plugin_instance_free(i3);

  /* A refused build, retried unchanged: the same answer. */
  assert_int_equal(build("rebuilt.so", "-DWRONG_ABI"), 0);
  char err2[512];
  assert_int_equal(kc_plugin_load(path, &same, err, sizeof err), -ENOTSUP);
  assert_int_equal(kc_plugin_load(path, &same, err2, sizeof err2), -ENOTSUP);
  assert_string_equal(err, err2);
  assert_non_null(strstr(err, "was built for plugin ABI"));
}

/* A file whose code runs elsewhere (isolation: process) is recorded without
 * loading it: kc_plugin_file_changed answers for it like for a loaded one. */
static void test_file_used(void **state) {
  (void)state;
  char path[128], missing[128], cmd[512];
  path_of(path, sizeof path, "used.so");
  path_of(missing, sizeof missing, "missing.so");
  assert_int_equal(kc_plugin_file_used(""), -EINVAL);
  assert_int_equal(kc_plugin_file_used(missing), -ENOENT);
  assert_false(kc_plugin_file_changed(missing));
  snprintf(cmd, sizeof cmd, "cp %s/good.so %s", dir, path);
  assert_int_equal(system(cmd), 0);
  assert_false(kc_plugin_file_changed(path)); /* never used */
  assert_int_equal(kc_plugin_file_used(path), 0);
  assert_false(kc_plugin_file_changed(path));
  snprintf(cmd, sizeof cmd, "cat %s/perms.so > %s", dir, path); /* in place, another size */
  assert_int_equal(system(cmd), 0);
  assert_true(kc_plugin_file_changed(path));
  assert_int_equal(kc_plugin_file_used(path), 0); /* the next instance's file */
  assert_false(kc_plugin_file_changed(path));
}

/* plugin.h: "the daemon warns about settings keys no plugin read": after
 * init, one warning per key the plugin did not read, with its place. */
static void test_unread_settings_warned(void **state) {
  (void)state;
  static const char yaml[] = "greeting: hi\n"
                             "greting: typo\n"
                             "extra: { a: 1 }\n";
  char path[128], err[512];
  kc_yaml_doc *doc = NULL;
  assert_int_equal(kc_yaml_load_buffer("kctrld.yaml", yaml, sizeof yaml - 1, &doc, err, sizeof err), 0);
  kc_host_env env = {&fake_ops, NULL, kc_yaml_root(doc), false, NULL};
  kc_plugin *p = NULL;
  path_of(path, sizeof path, "good.so");
  assert_int_equal(kc_plugin_load(path, &p, err, sizeof err), 0);
  kc_plugin_instance *inst = NULL;
  tu_stderr_begin();
  int rc = kc_plugin_instance_new(p, "hello", &env, &inst, err, sizeof err);
  char *log = tu_logfmt_plain(tu_stderr_end());
  assert_int_equal(rc, 0);
  assert_non_null(strstr(log, "kctrld.yaml:2:1: controller hello: settings key \"greting\" was not read by "
                              "plugin sample (misspelt, or not a setting of this plugin?)"));
  assert_non_null(strstr(log, "kctrld.yaml:3:1: controller hello: settings key \"extra\" was not read"));
  assert_null(strstr(log, "\"greeting\""));
  assert_null(strstr(log, "extra.a")); /* covered by its parent */
  free(log);
  kc_plugin_instance_free(inst);
  kc_yaml_free(doc);
}

static void test_missing_services_answer_enosys(void **state) {
  (void)state;
  kc_plugin_instance *inst = load_good("bare", NULL); /* no environment */
  kc_reconcile_result res;
  reconcile(inst, "ns/cache", &res);
  assert_int_equal(res.kind, KC_RESULT_ERROR);
  char want[64];
  snprintf(want, sizeof want, "cache_get: %d", -ENOSYS);
  assert_string_equal(res.message, want);
  reconcile(inst, "ns/greeting", &res); /* settings absent: default greeting */
  assert_string_equal(res.message, "hello from bare");
  kc_plugin_instance_free(inst);
}

static void test_init_failure(void **state) {
  (void)state;
  char path[128], err[512];
  kc_plugin *p = NULL;
  path_of(path, sizeof path, "init_fail.so");
  assert_int_equal(kc_plugin_load(path, &p, err, sizeof err), 0);
  kc_plugin_instance *inst = NULL;
  kc_host_env env = fake_env();
  int rc = kc_plugin_instance_new(p, "ttl", &env, &inst, err, sizeof err);
  assert_int_equal(rc, -EINVAL);
  assert_null(inst);
  assert_int_equal(retained, 0); /* released again */
  assert_non_null(strstr(err, "init failed for controller ttl: Invalid argument"));
  assert_non_null(strstr(err, "init_fail.so"));
  /* The value init returned, for the operator who reads the plugin's code. */
  assert_non_null(strstr(err, "(init returned -22)"));
}

/* ---- the host table ---- */

static void test_host_table(void **state) {
  (void)state;
  const struct kctrld_host_api *h = kc_hostapi_table();
  assert_int_equal(h->abi_major, KCTRLD_ABI_MAJOR);
  assert_int_equal(h->struct_size, sizeof(struct kctrld_host_api));
  assert_true(KCTRLD_HOST_HAS(h, expectations_forget));
  /* Complete: every member is set (the table has no NULL to jump to). */
  void *const *fn = (void *const *)(const void *)&h->alloc;
  void *const *end = (void *const *)(const void *)((const char *)h + sizeof *h);
  for (; fn < end; fn++) assert_non_null(*fn);
  void *m = h->alloc(16);
  assert_non_null(m);
  m = h->realloc(m, 64);
  assert_non_null(m);
  h->free(m);
  assert_null(h->alloc(0));
}

static void test_expectations(void **state) {
  (void)state;
  kc_expectations *e = kc_expectations_new(1000);
  assert_non_null(e);
  assert_true(kc_expectations_satisfied(e, "ns/a", 0)); /* no record */
  assert_int_equal(kc_expectations_set(e, "ns/a", 2, 0, 100), 0);
  assert_false(kc_expectations_satisfied(e, "ns/a", 100));
  kc_expectations_observe(e, "ns/a", 1, 0);
  assert_false(kc_expectations_satisfied(e, "ns/a", 100));
  assert_true(kc_expectations_satisfied(e, "ns/a", 1101)); /* expired */
  kc_expectations_observe(e, "ns/a", 1, 0);
  assert_true(kc_expectations_satisfied(e, "ns/a", 100));
  assert_int_equal(kc_expectations_count(e), 0); /* fulfilled records are dropped */
  assert_int_equal(kc_expectations_set(e, "ns/b", 0, 3, 100), 0);
  kc_expectations_observe(e, "ns/unknown", 1, 1);
  assert_false(kc_expectations_satisfied(e, "ns/b", 100));
  kc_expectations_forget(e, "ns/b");
  assert_true(kc_expectations_satisfied(e, "ns/b", 100));
  assert_int_equal(kc_expectations_set(e, "ns/c", -1, 0, 100), -EINVAL);
  assert_int_equal(kc_expectations_set(e, "ns/c", 1, 1, 100), 0);
  assert_int_equal(kc_expectations_set(e, "ns/c", 0, 0, 100), 0); /* replace with nothing */
  assert_int_equal(kc_expectations_count(e), 0);
  kc_expectations_free(e);
}

int main(void) {
  kc_log_set_level(KC_LOG_WARN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_refuse_missing_and_not_regular),
      cmocka_unit_test(test_refuse_insecure_permissions),
      cmocka_unit_test(test_refuse_not_a_library),
      cmocka_unit_test(test_refuse_bad_tables),
      cmocka_unit_test(test_permissions_member),
      cmocka_unit_test(test_only_entry_exported),
      cmocka_unit_test(test_reconcile_results),
      cmocka_unit_test(test_rebuilt_plugin_reloads),
      cmocka_unit_test(test_file_used),
      cmocka_unit_test(test_unread_settings_warned),
      cmocka_unit_test(test_missing_services_answer_enosys),
      cmocka_unit_test(test_init_failure),
      cmocka_unit_test(test_host_table),
      cmocka_unit_test(test_expectations),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
