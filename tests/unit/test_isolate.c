/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for `isolation: process`: the line format (daemon/hooks/isolate_wire.c),
 * the settings as YAML text (kc_isolate_yaml_write) and the supervised
 * plugin child (daemon/hooks/isolate.c, daemon/hooks/isolate_child.c) running
 * tests/integration/plugins/isolated.c. This binary is its own plugin child:
 * main dispatches --plugin-child to kc_isolate_child_main, and the daemon
 * side starts /proc/self/exe. The host environment is a fake (one
 * ConfigMap store, an API that records requests, an Event counter).
 * Covered: host calls served from the parent (cache, patch through the
 * write fence, events, expectations, settings, log), a crash (SIGSEGV,
 * abort, exit), a hang past reconcileTimeout and garbage on the channel
 * each costing one error result, one panic and one child, a plugin's
 * printf to stdout reaching the log, not the channel, a child that dies
 * between reconciles not charged to the next key, the restart at
 * once for the next key after any crash, the plugin backing off as a whole
 * (and keys held meanwhile) once keys in a row lost their child, an init
 * failure reported with the child's reason, fini reaping every child, and
 * a rebuild of the plugin file noticed for SIGHUP. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/childpool.h"
#include "base/clock.h"
#include "config/config.h"
#include "watch/decode.h"
#include "hooks/hook_child.h"
#include "host/hostapi.h"
#include "hooks/isolate.h"
#include "hooks/isolate_child.h"
#include "hooks/isolate_wire.h"
#include "kube/kobj.h"
#include "base/log.h"
#include "host/plugin_host.h"
#include "cache/store.h"
#include "testutil.h"
#include "json/yamltree.h"

/* ASan's SIGSEGV handler makes the child exit 1 instead of dying by the
 * signal (elsewhere the child's crash report, crashreport.h, re-raises it). */
#if defined(__SANITIZE_ADDRESS__)
#define SAN_SEGV 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SAN_SEGV 1
#endif
#endif
#ifndef SAN_SEGV
#define SAN_SEGV 0
#endif

/* ---- the wire ------------------------------------------------------------ */

static void test_wire_roundtrip(void **state) {
  (void)state;
  kc_buf b = {0};
  const char nasty[] = "a\tb\nc\\d\\t{\"x\": \"\\n\"}";
  kc_iso_begin(&b, "call");
  kc_iso_puts(&b, "get");
  kc_iso_put(&b, nasty, sizeof nasty - 1);
  kc_iso_puts(&b, "");
  kc_iso_put(&b, NULL, 0);
  kc_iso_puti(&b, -42);
  kc_iso_puti(&b, INT64_MIN);
  kc_iso_end(&b);
  assert_int_equal(b.err, 0);
  assert_non_null(memchr(b.p, '\n', b.len));
  assert_ptr_equal(memchr(b.p, '\n', b.len), b.p + b.len - 1); /* one line */
  kc_iso_msg m = {0};
  assert_int_equal(kc_iso_parse(b.p, b.len - 1, &m), 0);
  assert_int_equal(m.n, 7);
  assert_true(kc_iso_is(&m, 0, "call"));
  assert_true(kc_iso_is(&m, 1, "get"));
  assert_int_equal(m.f[2].len, sizeof nasty - 1);
  assert_memory_equal(m.f[2].ptr, nasty, sizeof nasty - 1);
  assert_int_equal(m.f[3].len, 0);
  assert_int_equal(m.f[4].len, 0);
  int64_t v;
  assert_int_equal(kc_iso_int(&m, 5, &v), 0);
  assert_int_equal(v, -42);
  assert_int_equal(kc_iso_int(&m, 6, &v), 0);
  assert_true(v == INT64_MIN);
  assert_int_equal(kc_iso_int(&m, 2, &v), -EPROTO); /* not a number */
  assert_int_equal(kc_iso_int(&m, 3, &v), -EPROTO); /* empty */
  assert_int_equal(kc_iso_int(&m, 9, &v), -EPROTO); /* absent */
  assert_string_equal(kc_iso_str(&m, 9), "");
  kc_iso_msg_free(&m);
  kc_buf_free(&b);
}

static void test_wire_rejects(void **state) {
  (void)state;
  static const char *const bad[] = {"", "\tx", "a\\", "a\\x", "a\nb", "a\\\tb"};
  kc_iso_msg m = {0};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char line[16];
    snprintf(line, sizeof line, "%s", bad[i]);
    assert_int_equal(kc_iso_parse(line, strlen(line), &m), -EPROTO);
  }
  char big[32];
  snprintf(big, sizeof big, "9223372036854775808");
  assert_int_equal(kc_iso_parse(big, strlen(big), &m), 0);
  int64_t v;
  assert_int_equal(kc_iso_int(&m, 0, &v), -EPROTO); /* INT64_MAX + 1 */
  snprintf(big, sizeof big, "-");
  assert_int_equal(kc_iso_parse(big, strlen(big), &m), 0);
  assert_int_equal(kc_iso_int(&m, 0, &v), -EPROTO);
  kc_iso_msg_free(&m);
}

/* Settings reach the child as YAML text that reads back as the same tree. */
static void test_yaml_write(void **state) {
  (void)state;
  const char *text = "s:\n  greeting: \"tab\\there \\\"q\\\" \\\\\"\n  n: 5\n  b: true\n"
                     "  nul:\n  list: [a, 'x: y', {k: v}, [], {}]\n  deep: {a: {b: [1, 2]}}\n"
                     "  \"quoted key\": plain text with spaces\n";
  kc_yaml_doc *doc = NULL, *back = NULL;
  char err[512];
  assert_int_equal(kc_yaml_load_buffer("t.yaml", text, strlen(text), &doc, err, sizeof err), 0);
  const kc_yaml_node *s = kc_yaml_map_get(kc_yaml_root(doc), "s");
  kc_buf b = {0};
  kc_isolate_yaml_write(&b, s);
  assert_int_equal(b.err, 0);
  if (kc_yaml_load_buffer("w.yaml", b.p, b.len, &back, err, sizeof err) != 0)
    fail_msg("%s in:\n%s", err, b.p);
  if (!kc_yaml_equal(s, kc_yaml_map_get(kc_yaml_root(back), "v"))) fail_msg("differs:\n%s", b.p);
  assert_true(kc_yaml_equal(s, kc_yaml_map_get(kc_yaml_root(back), "v")));
  kc_yaml_free(back);
  kc_buf_free(&b);
  kc_yaml_free(doc);
}

/* ---- the fake environment ------------------------------------------------ */

static struct {
  pthread_mutex_t mu;
  kc_store *cms;
  int patches, events, writes_refused;
  char last_path[256], last_body[512];
  bool leader;
} E = {.mu = PTHREAD_MUTEX_INITIALIZER, .leader = true};

static int e_get(void *ud, const char *av, const char *kind, kc_str ns, kc_str name, kc_obj **out) {
  (void)ud;
  if (strcmp(av, "v1") != 0 || strcmp(kind, "ConfigMap") != 0) return -ENOTSUP;
  *out = kc_store_get(E.cms, ns, name);
  return *out ? 0 : -ENOENT;
}

static int e_list(void *ud, const char *av, const char *kind, kc_str ns,
                  const kc_label_selector *sel, kc_obj_vec *out) {
  (void)ud;
  if (strcmp(av, "v1") != 0 || strcmp(kind, "ConfigMap") != 0) return -ENOTSUP;
  return kc_store_list(E.cms, ns, sel, out);
}

static int e_resource(void *ud, const char *av, const char *kind, kc_resource_ref *out) {
  (void)ud;
  if (strcmp(av, "v1") != 0 || strcmp(kind, "ConfigMap") != 0) return -ENOENT;
  *out = (kc_resource_ref){"/api/v1", "configmaps", true};
  return 0;
}

static int e_request(void *ud, const char *method, const char *path, const char *ct,
                     const void *body, size_t len, uint64_t timeout_ms, kc_api_response *out) {
  (void)ud, (void)ct, (void)timeout_ms;
  pthread_mutex_lock(&E.mu);
  if (!strcmp(method, "PATCH")) E.patches++;
  snprintf(E.last_path, sizeof E.last_path, "%s %s", method, path);
  snprintf(E.last_body, sizeof E.last_body, "%.*s", (int)len, (const char *)body);
  pthread_mutex_unlock(&E.mu);
  *out = (kc_api_response){.code = 200, .body = "{}", .body_len = 2};
  return 0;
}

static bool e_may_write(void *ud) {
  (void)ud;
  pthread_mutex_lock(&E.mu);
  bool ok = E.leader;
  if (!ok) E.writes_refused++;
  pthread_mutex_unlock(&E.mu);
  return ok;
}

static int e_event(void *ud, const char *controller, const kc_obj *o, int type, const char *reason,
                   const char *message) {
  (void)ud, (void)o, (void)type, (void)controller;
  pthread_mutex_lock(&E.mu);
  if (!strcmp(reason, "Isolated") && strstr(message, "seen by hello")) E.events++;
  pthread_mutex_unlock(&E.mu);
  return 0;
}

static const kc_host_env_ops env_ops = {
    .cache_get = e_get,
    .cache_list = e_list,
    .resource = e_resource,
    .request = e_request,
    .may_write = e_may_write,
    .event = e_event,
};

/* ---- the child ---------------------------------------------------------------- */

static char dir[64], so[128];
static kc_config *cfg;
static kc_plugin_instance *inst;

static void add_cm_in(const char *ns, const char *name, const char *app) {
  char json[320], err[128];
  snprintf(
      json, sizeof json,
      "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"namespace\":\"%s\","
      "\"name\":\"%s\",\"uid\":\"u-%s\",\"resourceVersion\":\"1\",\"labels\":{\"app\":\"%s\"}}}",
      ns, name, name, app);
  kc_obj *o = kc_obj_parse(json, strlen(json), NULL, err, sizeof err);
  assert_non_null(o);
  assert_true(kc_store_upsert(E.cms, o, NULL) >= 0);
  kc_obj_unref(o);
}

static void add_cm(const char *name) {
  add_cm_in("ns", name, "x");
}

/* Builds tests/integration/plugins/isolated.c at so: 0 or -1. */
static int build_so(void) {
  char cmd[512];
  const char *cc = getenv("CC") ? getenv("CC") : "cc";
  snprintf(cmd, sizeof cmd,
           "%s -std=c11 -shared -fPIC -fvisibility=hidden -Wall -Wextra -Werror -Iinclude -o %s "
           "tests/integration/plugins/isolated.c",
           cc, so);
  return system(cmd) == 0 && chmod(so, 0755) == 0 ? 0 : -1;
}

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/kctrld-iso-XXXXXX");
  if (!mkdtemp(dir)) return -1;
  snprintf(so, sizeof so, "%s/isolated.so", dir);
  if (build_so() != 0 || chmod(dir, 0755) != 0) return -1;
  E.cms = kc_store_new(NULL, 0);
  return E.cms ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  kc_store_free(E.cms);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* Creates the instance (its init runs in the first child). */
static int start(const char *extra_settings, const char *timeout, char *err, size_t errlen) {
  char text[1024];
  snprintf(text, sizeof text,
           "controllers:\n  - name: iso\n    plugin: %s\n    isolation: process\n"
           "    for: {apiVersion: v1, kind: ConfigMap}\n    workers: 1\n"
           "    reconcileTimeout: %s\n    settings: {greeting: hello%s}\n",
           so, timeout, extra_settings);
  assert_int_equal(kc_config_load_buffer("t.yaml", NULL, text, strlen(text), &cfg, err, errlen), 0);
  assert_int_equal(cfg->controllers[0].isolation, KC_ISOLATION_PROCESS);
  kc_plugin *p = NULL;
  assert_int_equal(kc_plugin_builtin(kc_isolate_plugin(), &p, err, errlen), 0);
  const kc_host_env env = {&env_ops, NULL, cfg->controllers[0].settings, false, NULL};
  int rc =
      kc_plugin_instance_new_arg(p, "iso", &env, (void *)&cfg->controllers[0], &inst, err, errlen);
  if (rc < 0) {
    inst = NULL;
    kc_config_free(cfg);
    cfg = NULL;
  }
  return rc;
}

static void stop(void) {
  kc_plugin_instance_free(inst);
  inst = NULL;
  kc_config_free(cfg);
  cfg = NULL;
  assert_int_equal(kc_hook_child_drain(10000), 0);
  assert_int_equal(kc_hook_children_unreaped(), 0);
  errno = 0;
  assert_int_equal(waitpid(-1, NULL, WNOHANG), -1); /* no zombie */
  assert_int_equal(errno, ECHILD);
}

static kc_reconcile_result run(const char *key) {
  kc_reconcile_result res;
  kc_plugin_reconcile(inst, key, &res);
  return res;
}

static void test_host_calls_served_by_parent(void **state) {
  (void)state;
  char err[1024];
  add_cm("a");
  assert_int_equal(start("", "10s", err, sizeof err), 0);
  tu_stderr_begin();
  kc_reconcile_result r = run("ns/a");
  char *log = tu_stderr_end();
  assert_int_equal(r.kind, KC_RESULT_DONE);
  /* The patch went out through the parent's API, with the setting. */
  assert_int_equal(E.patches, 1);
  assert_string_equal(E.last_path, "PATCH /api/v1/namespaces/ns/configmaps/a");
  assert_non_null(strstr(E.last_body, "\"isolated\":\"hello\""));
  assert_int_equal(E.events, 1);
  /* The child's log line came through the parent's log, with the key. */
  assert_non_null(strstr(log, "reconciled n=1 key=ns/a"));
  free(log);
  /* The expectation was recorded and observed on the instance's record. */
  assert_true(kc_expectations_satisfied(kc_plugin_instance_expectations(inst), "ns/a", 0));
  /* A missing object: nothing written. */
  assert_int_equal(run("ns/gone").kind, KC_RESULT_DONE);
  assert_int_equal(E.patches, 1);
  /* Not the leader: the write is refused (by the child's hostapi first). */
  pthread_mutex_lock(&E.mu);
  E.leader = false;
  pthread_mutex_unlock(&E.mu);
  add_cm("b");
  r = run("ns/b");
  assert_int_equal(r.kind, KC_RESULT_ERROR);
  assert_non_null(strstr(r.message, "not the leader"));
  assert_int_equal(E.patches, 1);
  pthread_mutex_lock(&E.mu);
  E.leader = true;
  pthread_mutex_unlock(&E.mu);
  /* cache_list with a namespace and a selector: filtered in the parent,
   * sorted by the child's hostapi. */
  add_cm_in("ns", "w2", "web");
  add_cm_in("ns", "w1", "web");
  add_cm_in("elsewhere", "w3", "web");
  tu_stderr_begin();
  assert_int_equal(run("ns/list").kind, KC_RESULT_DONE);
  log = tu_stderr_end();
  if (!strstr(log, "listed n=2 names=w1,w2, key=ns/list")) fail_msg("%s", log);
  free(log);
  /* A plugin error is an error, not a panic; the same child goes on. */
  uint64_t panics = kc_isolate_panics("iso");
  r = run("ns/error");
  assert_int_equal(r.kind, KC_RESULT_ERROR);
  assert_string_equal(r.message, "told to fail");
  assert_int_equal(kc_isolate_panics("iso"), panics);
  tu_stderr_begin();
  assert_int_equal(run("ns/a").kind, KC_RESULT_DONE);
  log = tu_stderr_end();
  assert_non_null(strstr(log, "reconciled n=4")); /* the same child: its count went on */
  free(log);
  /* A requeue at a priority crosses the channel as it is. */
  r = run("ns/soon");
  assert_int_equal(r.kind, KC_RESULT_REQUEUE_AFTER);
  assert_int_equal(r.after_ms, 5);
  assert_true(r.has_priority);
  assert_true(r.priority > 0);
  r = run("ns/a");
  assert_false(r.has_priority);
  stop();
}

/* One failure: an error result naming what happened, one panic, a new
 * child for the next key at once (the dead one had answered well). */
static void expect_lost(const char *key, const char *what) {
  uint64_t panics = kc_isolate_panics("iso");
  tu_stderr_begin();
  kc_reconcile_result r = run(key);
  char *log = tu_stderr_end();
  assert_int_equal(r.kind, KC_RESULT_ERROR);
  if (!strstr(r.message, what) || !strstr(r.message, so)) fail_msg("%s: %s", key, r.message);
  assert_int_equal(kc_isolate_panics("iso"), panics + 1);
  char want[128];
  snprintf(want, sizeof want, "reconciling %s; restarted for the next key", key);
  if (!strstr(log, want)) fail_msg("no \"%s\" in:\n%s", want, log);
  free(log);
  tu_stderr_begin();
  r = run("ns/a");
  log = tu_stderr_end();
  assert_int_equal(r.kind, KC_RESULT_DONE);
  assert_non_null(strstr(log, "reconciled n=1")); /* a new child */
  free(log);
}

static void test_crash_hang_garbage(void **state) {
  (void)state;
  char err[1024];
  add_cm("a");
  assert_int_equal(start("", "1s", err, sizeof err), 0);
  assert_int_equal(run("ns/a").kind, KC_RESULT_DONE);
  expect_lost("ns/segv", SAN_SEGV ? "exited with status" : "killed by signal 11 (SIGSEGV");
  expect_lost("ns/abort", "(SIGABRT");
  expect_lost("ns/exit", "exited with status 3");
  expect_lost("ns/hang", "hung past reconcileTimeout (1000ms)");
  expect_lost("ns/garbage", "broke the protocol");
  /* A fresh child that dies before answering anything costs only its key
   * too: the next key gets a new child at once. */
  assert_int_equal(run("ns/segv").kind, KC_RESULT_ERROR); /* killed a healthy child */
  assert_int_equal(run("ns/segv").kind, KC_RESULT_ERROR); /* and a fresh one */
  assert_int_equal(run("ns/a").kind, KC_RESULT_DONE);
  /* A plugin failing for every key (here: keys that all exit) backs off as
   * a whole once KC_CHILDPOOL_BREAK_KEYS distinct keys in a row lost their
   * child; a key meanwhile is held, not run and not failed. The manual
   * clock stands still meanwhile: the backoff is exact. */
  kc_clock_set_manual(kc_clock_now_ns());
  uint64_t panics = kc_isolate_panics("iso");
  char key[32];
  tu_stderr_begin();
  for (int k = 0; k < KC_CHILDPOOL_BREAK_KEYS; k++) {
    snprintf(key, sizeof key, "n%d/exit", k);
    assert_int_equal(run(key).kind, KC_RESULT_ERROR);
  }
  char *log = tu_stderr_end();
  snprintf(key, sizeof key, "n%d/exit", KC_CHILDPOOL_BREAK_KEYS - 1);
  char want[160];
  snprintf(want, sizeof want,
           "reconciling %s; %d keys in a row lost their plugin child: the plugin backs off", key,
           KC_CHILDPOOL_BREAK_KEYS);
  if (!strstr(log, want)) fail_msg("no \"%s\" in:\n%s", want, log);
  free(log);
  assert_int_equal(kc_isolate_panics("iso"), panics + KC_CHILDPOOL_BREAK_KEYS);
  kc_reconcile_result r = run("ns/a");
  assert_int_equal(r.kind, KC_RESULT_REQUEUE_AFTER);
  assert_true(r.held);
  assert_int_equal(r.after_ms, 250);
  assert_int_equal(kc_isolate_panics("iso"), panics + KC_CHILDPOOL_BREAK_KEYS);
  /* once it passed, a new child serves */
  kc_clock_advance(250 * 1000000ull);
  tu_stderr_begin();
  r = run("ns/a");
  log = tu_stderr_end();
  assert_int_equal(r.kind, KC_RESULT_DONE);
  assert_non_null(strstr(log, "reconciled n=1")); /* a new child */
  free(log);
  kc_clock_set_real();
  stop();
}

/* A plugin that printf()s to stdout (debugging) does not break the
 * protocol: the child points fd 1 at stderr, so the line reaches the log
 * and the reconcile goes on in the same child. (The child's stderr is
 * forwarded as it arrives; killing the child, here by its exit, forwards
 * what is left, so the line is in the log by then.) */
static void test_printf_goes_to_log(void **state) {
  (void)state;
  char err[1024];
  add_cm("printf");
  add_cm("a");
  assert_int_equal(start("", "10s", err, sizeof err), 0);
  uint64_t panics = kc_isolate_panics("iso");
  int patches = E.patches;
  tu_stderr_begin();
  kc_reconcile_result r = run("ns/printf");
  kc_reconcile_result r2 = run("ns/a");
  kc_reconcile_result r3 = run("ns/exit");
  char *log = tu_stderr_end();
  if (r.kind != KC_RESULT_DONE) fail_msg("ns/printf: %s\n%s", r.message, log);
  assert_int_equal(E.patches, patches + 2); /* both labelled */
  assert_int_equal(r2.kind, KC_RESULT_DONE);
  if (!strstr(log, "reconciled n=2 key=ns/a")) fail_msg("not the same child:\n%s", log);
  assert_int_equal(r3.kind, KC_RESULT_ERROR);
  if (!strstr(log, "stderr: printf debugging in reconcile of ns/printf"))
    fail_msg("the printf line is not in the log:\n%s", log);
  assert_int_equal(kc_isolate_panics("iso"), panics + 1); /* only the exit */
  free(log);
  stop();
}

/* Adds ns/a and ns/b, starts the isolated controller and returns its
 * plugin child's pid (from the "plugin child started" log line). */
static pid_t start_two_keys_child(void) {
  char err[1024];
  add_cm("a");
  add_cm("b");
  tu_stderr_begin();
  int rc = start("", "10s", err, sizeof err);
  char *log = tu_stderr_end();
  assert_int_equal(rc, 0);
  const char *p = strstr(log, "msg=\"plugin child started\" pid=");
  assert_non_null(p);
  pid_t pid = (pid_t)atoi(p + strlen("msg=\"plugin child started\" pid="));
  free(log);
  return pid;
}

/* A child that dies between reconciles (here killed by the test, its
 * parent too, and waited for without reaping) is not charged to the next
 * key: that key gets a new child and its result, no panic is counted, and
 * the log says the child died idle. */
static void test_idle_death_not_charged(void **state) {
  (void)state;
  pid_t pid = start_two_keys_child();
  char *log;
  assert_true(pid > 0);
  assert_int_equal(run("ns/a").kind, KC_RESULT_DONE);
  uint64_t panics = kc_isolate_panics("iso");
  assert_int_equal(kill(pid, SIGKILL), 0);
  siginfo_t si;
  memset(&si, 0, sizeof si);
  assert_int_equal(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0); /* dead, not reaped */
  tu_stderr_begin();
  kc_reconcile_result r = run("ns/b");
  log = tu_stderr_end();
  if (r.kind != KC_RESULT_DONE) fail_msg("ns/b: %s\n%s", r.message, log);
  char want[384];
  snprintf(want, sizeof want, "plugin child %d (%s) was killed by signal 9", (int)pid, so);
  if (!strstr(log, want) || !strstr(log, "while idle (between reconciles)"))
    fail_msg("no \"%s ... while idle\" in:\n%s", want, log);
  assert_non_null(strstr(log, "reconciled n=1 key=ns/b")); /* a new child */
  free(log);
  assert_int_equal(kc_isolate_panics("iso"), panics);
  stop();
}

/* kc_isolate_reap_idle (the daemon's 1 s tick): a child killed between
 * reconciles is reaped, logged and counted without any reconcile; a live
 * child and another process's exit are left alone; the next key gets a new
 * child, no panic. */
static void test_idle_death_reaped(void **state) {
  (void)state;
  pid_t pid = start_two_keys_child();
  char *log;
  assert_int_equal(run("ns/a").kind, KC_RESULT_DONE);
  assert_int_equal(kc_isolate_reap_idle(), 0); /* alive: untouched */
  pid_t other = fork();
  assert_true(other >= 0);
  if (other == 0) _exit(7);
  uint64_t panics = kc_isolate_panics("iso"), idle = kc_isolate_idle_exits("iso");
  unsigned unreaped = kc_hook_children_unreaped();
  assert_int_equal(kill(pid, SIGKILL), 0);
  siginfo_t si;
  memset(&si, 0, sizeof si);
  assert_int_equal(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0); /* dead, not reaped */
  memset(&si, 0, sizeof si);
  assert_int_equal(waitid(P_PID, (id_t)other, &si, WEXITED | WNOWAIT), 0);
  tu_stderr_begin();
  unsigned n = kc_isolate_reap_idle();
  log = tu_stderr_end();
  assert_int_equal(n, 1);
  char want[384];
  snprintf(want, sizeof want, "plugin child %d (%s) was killed by signal 9", (int)pid, so);
  if (!strstr(log, want) || !strstr(log, "while idle (between reconciles); reaped"))
    fail_msg("no \"%s ... while idle ... reaped\" in:\n%s", want, log);
  free(log);
  assert_int_equal(kc_hook_children_unreaped(), unreaped - 1);
  assert_int_equal(kc_isolate_idle_exits("iso"), idle + 1);
  int st = 0;
  assert_int_equal(waitpid(other, &st, 0), other); /* not stolen */
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 7);
  tu_stderr_begin();
  kc_reconcile_result r = run("ns/b");
  log = tu_stderr_end();
  if (r.kind != KC_RESULT_DONE) fail_msg("ns/b: %s\n%s", r.message, log);
  assert_non_null(strstr(log, "reconciled n=1 key=ns/b")); /* a new child */
  free(log);
  assert_int_equal(kc_isolate_panics("iso"), panics);
  stop();
}

static void test_init_failure(void **state) {
  (void)state;
  char err[1024];
  tu_stderr_begin();
  int rc = start(", failInit: true", "10s", err, sizeof err);
  char *log = tu_stderr_end();
  assert_int_equal(rc, -ECONNREFUSED);
  assert_non_null(strstr(err, "init failed for controller iso"));
  assert_non_null(strstr(log, "told to fail init")); /* the child's log line */
  free(log);
  assert_int_equal(kc_hook_child_drain(10000), 0);
  assert_int_equal(kc_hook_children_unreaped(), 0);
  /* A plugin file that does not exist: the child's load error. */
  snprintf(so, sizeof so, "%s/missing.so", dir);
  rc = start("", "10s", err, sizeof err);
  snprintf(so, sizeof so, "%s/isolated.so", dir);
  assert_int_equal(rc, -ENOENT);
  assert_int_equal(kc_hook_child_drain(10000), 0);
  assert_int_equal(kc_hook_children_unreaped(), 0);
}

/* The daemon never loads the file (the child does), but the instance
 * recorded it: kc_plugin_file_changed, what a SIGHUP asks (daemon.c), sees
 * a rebuild at the same path, and the next instance records the new file
 * (and says it changed). */
static void test_rebuild_noticed(void **state) {
  (void)state;
  char err[1024];
  add_cm("a");
  assert_false(kc_plugin_file_changed(so)); /* never used */
  assert_int_equal(start("", "10s", err, sizeof err), 0);
  assert_false(kc_plugin_file_changed(so));
  assert_int_equal(build_so(), 0);
  assert_true(kc_plugin_file_changed(so));
  stop();
  enum kc_log_level level = kc_log_get_level();
  kc_log_set_level(KC_LOG_INFO);
  tu_stderr_begin();
  int rc = start("", "10s", err, sizeof err);
  char *log = tu_stderr_end();
  kc_log_set_level(level);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(log, "the file changed since it was loaded, the new code runs in new"));
  free(log);
  assert_false(kc_plugin_file_changed(so));
  assert_int_equal(run("ns/a").kind, KC_RESULT_DONE);
  stop();
  kc_plugin_host_unload_all();
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], KC_ISOLATE_CHILD_FLAG) == 0) return kc_isolate_child_main();
  signal(SIGPIPE, SIG_IGN); /* as kctrld's main(): a write to a dead child is EPIPE */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_wire_roundtrip),
      cmocka_unit_test(test_wire_rejects),
      cmocka_unit_test(test_yaml_write),
      cmocka_unit_test_setup_teardown(test_host_calls_served_by_parent, setup, teardown),
      cmocka_unit_test_setup_teardown(test_crash_hang_garbage, setup, teardown),
      cmocka_unit_test_setup_teardown(test_printf_goes_to_log, setup, teardown),
      cmocka_unit_test_setup_teardown(test_idle_death_not_charged, setup, teardown),
      cmocka_unit_test_setup_teardown(test_idle_death_reaped, setup, teardown),
      cmocka_unit_test_setup_teardown(test_init_failure, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rebuild_noticed, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
