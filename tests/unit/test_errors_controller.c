/* SPDX-License-Identifier: Apache-2.0 */
/* Error paths of controllers (daemon/runtime/controller.c, workers.c, hostapi.c)
 * with a misbehaving plugin, tests/unit/plugins/faulty.c, run by a real
 * daemon (kc_daemon_run in-process) against kube-apisim:
 *  - reconcile results: an error with a message, an invalid result (42),
 *    requeues, requeue_after; counted in controller_runtime_reconcile_total
 *    on /metrics;
 *  - API calls that must fail and report the documented errno: a malformed
 *    create, a bad JSON patch, GET of a missing object;
 *  - a reconcile longer than the controller's timeout (reported, not
 *    killed) and one longer than shutdownTimeout: SIGTERM abandons it, the
 *    daemon returns, and the abandoned thread later returns into the plugin,
 *    which must still be mapped; the plugin's fini runs only after that
 *    (on the abandoned thread), never under a running reconcile;
 *  - a controller whose plugin init fails (faulty.so with initFailWhile:
 *    a gate file) and one whose .so does not exist yet: the daemon keeps
 *    running, the healthy controller reconciles, /readyz fails naming both
 *    with their reasons while /healthz stays ok, kctrld_controller_ready and
 *    kctrld_controller_init_failures_total count it; once the gate is gone
 *    and the .so is in place both recover by their retries. SIGHUP adds a
 *    controller with a missing plugin and then fixes its path, and removes
 *    a failing controller: /readyz follows each;
 *  - --fail-fast: the same failing init makes kc_daemon_run return its
 *    negative errno;
 *  - two informers of ConfigMaps in different namespaces (`name:`,
 *    `namespaces:`), the controller bound to the second one with
 *    `informer: NAME`: its plugin finds its objects in the cache (they were
 *    looked up in the first informer of the kind only), also after a SIGHUP
 *    that switches it to the other informer;
 *  - leader election with a Lease another replica holds (never expiring on
 *    our clock) and two controllers: the sharded one runs anyway (it holds
 *    its ranges, leader or not), writes and records an Event (both fenced by
 *    the range, not by leadership); the unsharded one stays idle;
 *  - a sharded controller with its own `for` informer on a server with
 *    shardSelector support: the claims come first, so even the informer's
 *    first list carries the selector (no full list at start).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "apisim_child.h"
#include "daemon.h"
#include "client/http.h"
#include "testutil.h"
#include "runtime/workers.h"

#define STEP_MS 90000

static char plugin_so[PATH_MAX + 16], cfg_path[PATH_MAX], fini_marker[PATH_MAX], hang_marker[PATH_MAX];
static char gate_path[256], late_so[256], missing_so[256]; /* in sim_tmp_dir */
static unsigned metrics_port;

static int setup(void **state) {
  if (sim_paths_init() < 0 || kc_http_global_init() < 0) return -1;
  sim_tmp_path(plugin_so, sizeof plugin_so, "faulty.so");
  sim_tmp_path(cfg_path, sizeof cfg_path, "kctrld.yaml");
  sim_tmp_path(fini_marker, sizeof fini_marker, "fini.txt");
  sim_tmp_path(hang_marker, sizeof hang_marker, "hang-started");
  sim_tmp_path(gate_path, sizeof gate_path, "backend-down");
  sim_tmp_path(late_so, sizeof late_so, "late.so");
  sim_tmp_path(missing_so, sizeof missing_so, "missing.so");
  char cmd[3 * PATH_MAX + 256];
  const char *cc = getenv("CC") ? getenv("CC") : "cc";
  snprintf(cmd, sizeof cmd,
           "%s -std=c11 -shared -fPIC -fvisibility=hidden -Wall -Wextra -Werror -Wno-unused-parameter "
           "-I%s/include -o %s %s/tests/unit/plugins/faulty.c",
           cc, sim_root_dir, plugin_so, sim_root_dir);
  return system(cmd) == 0 ? 0 : -1;
}

static int teardown(void **state) {
  sim_stop();
  sim_paths_free();
  return 0;
}

/* The value of controller_runtime_reconcile_total of controller for result,
 * -1 if absent. */
static long reconciles_of(const char *controller, const char *result) {
  char url[64], *body = NULL, want[160];
  snprintf(url, sizeof url, "http://127.0.0.1:%u/metrics", metrics_port);
  snprintf(want, sizeof want,
           "controller_runtime_reconcile_total{controller=\"%s\",result=\"%s\"} ", controller,
           result);
  long v = -1;
  if (sim_get_url(url, &body) == 200 && body) {
    const char *at = strstr(body, want);
    if (at) v = strtol(at + strlen(want), NULL, 10);
  }
  free(body);
  return v;
}

static long reconciles(const char *result) {
  return reconciles_of("faulty", result);
}

static atomic_bool daemon_done;

/* Every config here: ConfigMaps cached, metrics on metrics_port (%u). */
#define CONFIG_HEAD                                                                                \
  "logLevel: info\n"                                                                               \
  "shutdownTimeout: 1s\n"                                                                          \
  "metrics: { bindAddress: \"127.0.0.1:%u\" }\n"                                                   \
  "informers:\n"                                                                                   \
  "  - { apiVersion: v1, kind: ConfigMap }\n"                                                      \
  "controllers:\n"

/* The value of series NAME{LABELS} in a /metrics body, -1 if absent. */
static long series(const char *body, const char *name, const char *labels) {
  char want[256];
  snprintf(want, sizeof want, "\n%s{%s} ", name, labels);
  const char *at = body ? strstr(body, want) : NULL;
  return at ? strtol(at + strlen(want), NULL, 10) : -1;
}

struct driver {
  char failure[1024];
  int step; /* 0, or the step named in the failure */
  long success, error, requeue, requeue_after;
};

static void drv_fail(struct driver *d, const char *fmt, ...) {
  if (d->failure[0]) return;
  va_list ap;
  va_start(ap, fmt);
  int n = d->step ? snprintf(d->failure, sizeof d->failure, "step %d: ", d->step) : 0;
  vsnprintf(d->failure + n, sizeof d->failure - (size_t)n, fmt, ap);
  va_end(ap);
}

/* Tests that need the build's kube-apisim skip without it (e.g. only this
 * test was built). */
static bool apisim_built(void) {
  char need[PATH_MAX + 32];
  snprintf(need, sizeof need, "%s/kube-apisim", sim_build_dir);
  return access(need, X_OK) == 0;
}

/* Runs the daemon on cfg_path (this thread) with drive(d) playing the
 * operator on another; then frees d, its failure copied to failure
 * (sizeof d->failure bytes).
 * Returns the daemon's exit code. */
static int run_daemon(void *(*drive)(void *), struct driver *d, char *failure) {
  /* SIGTERM/SIGHUP reach the loop; afterwards a late one must not hit the
   * default action. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_UNBLOCK, &set, NULL);
  atomic_store(&daemon_done, false);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, drive, d), 0);
  kc_daemon_options o = {.config_path = cfg_path, .kubeconfig = sim_kubeconfig};
  int code = kc_daemon_run(&o);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  atomic_store(&daemon_done, true);
  pthread_join(th, NULL);
  memcpy(failure, d->failure, sizeof d->failure);
  free(d);
  return code;
}

static void create_cm(struct driver *d, const char *name) {
  char body[256];
  snprintf(body, sizeof body,
           "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\"},\"data\":{}}", name);
  long rc = sim_call("POST", "/api/v1/namespaces/demo/configmaps", body, NULL, NULL);
  if (rc != 201) drv_fail(d, "cannot create ConfigMap %s: HTTP %ld", name, rc);
}

static void *drive(void *arg) {
  struct driver *d = arg;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  /* Wait until the results settle: requeue twice then success; badwrite's
   * single requeue_after; error and invalid failing again and again. The
   * seeded demo ConfigMaps (web-config, short-lived), requeue and slow
   * succeed. */
  uint64_t end = sim_mono_ms() + STEP_MS;
  bool done = false;
  while (!done && sim_mono_ms() < end && !atomic_load(&daemon_done)) {
    sim_sleep_ms(50);
    d->success = reconciles("success");
    d->error = reconciles("error");
    d->requeue = reconciles("requeue");
    d->requeue_after = reconciles("requeue_after");
    done = d->success >= 4 && d->error >= 4 && d->requeue == 2 && d->requeue_after == 1;
  }
  if (!done)
    drv_fail(d, "results not as expected: success=%ld error=%ld requeue=%ld requeue_after=%ld", d->success,
             d->error, d->requeue, d->requeue_after);
  /* A reconcile still running at SIGTERM, beyond shutdownTimeout. */
  unlink(hang_marker);
  create_cm(d, "hang");
  end = sim_mono_ms() + STEP_MS;
  while (access(hang_marker, F_OK) != 0 && sim_mono_ms() < end && !atomic_load(&daemon_done))
    sim_sleep_ms(10);
  if (access(hang_marker, F_OK) != 0) drv_fail(d, "the hang reconcile did not start");
  if (!atomic_load(&daemon_done)) kill(getpid(), SIGTERM);
  return NULL;
}

static void test_bad_results_and_timeouts(void **state) {
  if (!apisim_built()) skip();
  assert_int_equal(sim_start(), 0);
  struct driver *d = calloc(1, sizeof *d);
  assert_non_null(d);
  static const char *names[] = {"error", "invalid", "requeue", "badwrite", "slow"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) create_cm(d, names[i]);
  assert_string_equal(d->failure, "");

  metrics_port = sim_free_port();
  assert_true(metrics_port > 0);
  char cfg[3 * PATH_MAX + 512];
  snprintf(cfg, sizeof cfg,
           CONFIG_HEAD "  - name: faulty\n"
                       "    plugin: %s\n"
                       "    for: { apiVersion: v1, kind: ConfigMap }\n"
                       "    workers: 3\n"
                       "    reconcileTimeout: 500ms\n"
                       "    settings: { finiMarker: \"%s\", hangMarker: \"%s\" }\n",
           metrics_port, plugin_so, fini_marker, hang_marker);
  assert_int_equal(sim_write_file(cfg_path, cfg), 0);

  char failure[sizeof d->failure];
  int code = run_daemon(drive, d, failure);
  assert_string_equal(failure, "");
  assert_int_equal(code, 0);
  /* The hang reconcile was abandoned (SIGTERM came as it started, the
   * shutdown bound is 1 s); once it returns into the plugin (2.5 s after it
   * started) nothing may crash and the count drops to 0. */
  assert_int_equal(kc_workers_abandoned_running(), 1);
  uint64_t end = sim_mono_ms() + 10000;
  while (kc_workers_abandoned_running() > 0 && sim_mono_ms() < end) sim_sleep_ms(10);
  assert_int_equal(kc_workers_abandoned_running(), 0);
  /* fini ran exactly once, after the abandoned reconcile returned. */
  char *marker = NULL;
  end = sim_mono_ms() + 5000;
  for (;;) {
    marker = tu_read_file(fini_marker, NULL);
    if ((marker && strchr(marker, '\n')) || sim_mono_ms() >= end) break;
    free(marker);
    sim_sleep_ms(50);
  }
  assert_non_null(marker);
  assert_string_equal(marker, "fini inflight=0\n");
  free(marker);
  sim_stop();
}

/* ---- a controller whose init fails ---- */

/* The controllers of the retry test: healthy and late always; flaky
 * (init fails while the gate exists) with extra settings text when
 * flaky_settings is not NULL; broken (plugin path given) when not NULL. */
static int write_retry_config(const char *flaky_settings, const char *broken_plugin) {
  char flaky[2 * PATH_MAX] = "", broken[2 * PATH_MAX] = "", cfg[8 * PATH_MAX];
  int n = 0;
  if (flaky_settings)
    n = snprintf(flaky, sizeof flaky,
                 "  - name: flaky\n    plugin: %s\n    for: { apiVersion: v1, kind: ConfigMap }\n"
                 "    settings: { initFailWhile: \"%s\"%s }\n",
                 plugin_so, gate_path, flaky_settings);
  if (n < 0 || (size_t)n >= sizeof flaky) return -1;
  if (broken_plugin)
    n = snprintf(broken, sizeof broken,
                 "  - name: broken\n    plugin: %s\n    for: { apiVersion: v1, kind: ConfigMap }\n",
                 broken_plugin);
  if (n < 0 || (size_t)n >= sizeof broken) return -1;
  n = snprintf(cfg, sizeof cfg,
               CONFIG_HEAD
               "  - name: healthy\n    plugin: %s\n    for: { apiVersion: v1, kind: ConfigMap }\n"
               "%s"
               "  - name: late\n    plugin: %s\n    for: { apiVersion: v1, kind: ConfigMap }\n"
               "%s",
               metrics_port, plugin_so, flaky, late_so, broken);
  if (n < 0 || (size_t)n >= sizeof cfg) return -1;
  return sim_write_file(cfg_path, cfg);
}

static char *get_local(const char *path, long *code) {
  char url[128], *body = NULL;
  snprintf(url, sizeof url, "http://127.0.0.1:%u%s", metrics_port, path);
  *code = sim_get_url(url, &body);
  return body;
}

/* Polls until cond(body of /metrics or /readyz, status) holds. */
typedef bool (*retry_cond)(const char *metrics, long readyz_code, const char *readyz);

static bool wait_until(retry_cond cond, char *last, size_t cap) {
  uint64_t end = sim_mono_ms() + STEP_MS;
  while (sim_mono_ms() < end && !atomic_load(&daemon_done)) {
    long mcode = 0, rcode = 0;
    char *m = get_local("/metrics", &mcode);
    char *r = get_local("/readyz", &rcode);
    bool ok = mcode == 200 && cond(m, rcode, r ? r : "");
    snprintf(last, cap, "readyz %ld: %.700s", rcode, r ? r : "");
    free(m);
    free(r);
    if (ok) return true;
    sim_sleep_ms(100);
  }
  return false;
}

static long ctl_metric(const char *m, const char *name, const char *controller) {
  char labels[128];
  snprintf(labels, sizeof labels, "controller=\"%s\"", controller);
  return series(m, name, labels);
}

static long successes(const char *m, const char *controller) {
  char labels[128];
  snprintf(labels, sizeof labels, "controller=\"%s\",result=\"success\"", controller);
  return series(m, "controller_runtime_reconcile_total", labels);
}

/* Step 1: both failing, retried at least once; healthy reconciles. */
static bool both_failing(const char *m, long rcode, const char *r) {
  return ctl_metric(m, "kctrld_controller_init_failures_total", "flaky") >= 2 &&
         ctl_metric(m, "kctrld_controller_init_failures_total", "late") >= 2 &&
         ctl_metric(m, "kctrld_controller_ready", "flaky") == 0 &&
         ctl_metric(m, "kctrld_controller_ready", "late") == 0 &&
         ctl_metric(m, "kctrld_controller_ready", "healthy") == 1 && successes(m, "healthy") >= 1 &&
         rcode == 503 && strstr(r, "[-]controller/flaky failed: ") &&
         strstr(r, "Connection refused (init returned -111)") && strstr(r, "[-]controller/late failed: ") &&
         strstr(r, "does not exist");
}

/* Step 2: both recovered by retries and reconcile; the counter stays. */
static bool both_recovered(const char *m, long rcode, const char *r) {
  return ctl_metric(m, "kctrld_controller_ready", "flaky") == 1 &&
         ctl_metric(m, "kctrld_controller_ready", "late") == 1 && successes(m, "flaky") >= 1 &&
         successes(m, "late") >= 1 &&
         ctl_metric(m, "kctrld_controller_init_failures_total", "flaky") >= 2 && rcode == 200 &&
         strcmp(r, "ok\n") == 0;
}

static bool broken_failing(const char *m, long rcode, const char *r) {
  return ctl_metric(m, "kctrld_controller_init_failures_total", "broken") >= 1 &&
         ctl_metric(m, "kctrld_controller_ready", "broken") == 0 && rcode == 503 &&
         strstr(r, "[-]controller/broken failed: ") && strstr(r, "does not exist") &&
         !strstr(r, "[-]controller/flaky");
}

static bool broken_fixed(const char *m, long rcode, const char *r) {
  return ctl_metric(m, "kctrld_controller_ready", "broken") == 1 &&
         ctl_metric(m, "kctrld_controller_init_failures_total", "broken") >= 1 && rcode == 200 &&
         strcmp(r, "ok\n") == 0;
}

static bool flaky_failing_again(const char *m, long rcode, const char *r) {
  return ctl_metric(m, "kctrld_controller_ready", "flaky") == 0 && rcode == 503 &&
         strstr(r, "[-]controller/flaky failed: ") &&
         ctl_metric(m, "kctrld_controller_ready", "healthy") == 1;
}

static bool flaky_removed(const char *m, long rcode, const char *r) {
  return ctl_metric(m, "kctrld_controller_ready", "flaky") == -1 &&
         ctl_metric(m, "kctrld_controller_init_failures_total", "flaky") == -1 && rcode == 200 &&
         strcmp(r, "ok\n") == 0;
}

/* A step: the config with these controllers, SIGHUP, then wait for cond. */
static void reload_and_wait(struct driver *d, int step, const char *flaky, const char *broken,
                            retry_cond cond, const char *what) {
  if (d->failure[0]) return;
  d->step = step;
  if (write_retry_config(flaky, broken) != 0) {
    drv_fail(d, "cannot write the config");
    return;
  }
  kill(getpid(), SIGHUP);
  char last[800] = "";
  if (!wait_until(cond, last, sizeof last)) drv_fail(d, "%s: %s", what, last);
}

static void *drive_retry(void *arg) {
  struct driver *d = arg;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  char last[800] = "";
  d->step = 1;
  if (!wait_until(both_failing, last, sizeof last))
    drv_fail(d, "not failing as expected: %s", last);
  long code = 0;
  char *h = get_local("/healthz", &code);
  if (!d->failure[0] && (code != 200 || !h || strcmp(h, "ok\n") != 0))
    drv_fail(d, "/healthz %ld %s while a controller fails", code, h ? h : "");
  free(h);

  /* The backend comes up, the .so appears (renamed into place whole). */
  d->step = 2;
  char cmd[2 * PATH_MAX];
  int n = snprintf(cmd, sizeof cmd, "cp %s %s.tmp && mv %s.tmp %s", plugin_so, late_so, late_so,
                   late_so);
  if (!d->failure[0] &&
      (n < 0 || (size_t)n >= sizeof cmd || unlink(gate_path) != 0 || system(cmd) != 0))
    drv_fail(d, "cannot lift the faults");
  if (!d->failure[0] && !wait_until(both_recovered, last, sizeof last))
    drv_fail(d, "not recovered: %s", last);

  /* SIGHUP adds a controller whose plugin is missing, then fixes its path. */
  reload_and_wait(d, 3, "", missing_so, broken_failing, "broken not reported");
  reload_and_wait(d, 4, "", plugin_so, broken_fixed, "reload did not fix broken");
  /* flaky fails again (its settings change, init runs again with the gate
   * back); a reload that removes it makes the daemon ready. */
  if (!d->failure[0] && sim_write_file(gate_path, "down\n") != 0)
    drv_fail(d, "cannot write the gate");
  reload_and_wait(d, 5, ", again: 1", plugin_so, flaky_failing_again, "flaky not failing");
  reload_and_wait(d, 6, NULL, plugin_so, flaky_removed, "removal not applied");
  if (!atomic_load(&daemon_done)) kill(getpid(), SIGTERM);
  return NULL;
}

static void test_init_retry(void **state) {
  if (!apisim_built()) skip();
  assert_int_equal(sim_start(), 0);
  metrics_port = sim_free_port();
  assert_true(metrics_port > 0);
  assert_int_equal(sim_write_file(gate_path, "down\n"), 0);
  unlink(late_so);
  assert_int_equal(write_retry_config("", NULL), 0);
  struct driver *d = calloc(1, sizeof *d);
  assert_non_null(d);
  char failure[sizeof d->failure];
  int code = run_daemon(drive_retry, d, failure);
  sim_stop();
  assert_string_equal(failure, "");
  assert_int_equal(code, 0);
  assert_int_equal(kc_daemon_configs_alive(), 0);
}

/* --fail-fast keeps the old behaviour: exit 1 before connecting. */
static void test_fail_fast(void **state) {
  char kc[PATH_MAX];
  sim_tmp_path(kc, sizeof kc, "dead-kubeconfig");
  assert_int_equal(sim_write_file(kc,
                                  "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
                                  "    server: http://127.0.0.1:9\nusers:\n- name: u\n  user: {}\n"
                                  "contexts:\n- name: x\n  context: { cluster: c, user: u }\n"
                                  "current-context: x\n"),
                   0);
  metrics_port = sim_free_port();
  assert_int_equal(sim_write_file(gate_path, "down\n"), 0);
  /* late.so exists from test_init_retry or not: flaky fails either way. */
  assert_int_equal(write_retry_config("", NULL), 0);
  kc_daemon_options o = {.config_path = cfg_path, .kubeconfig = kc, .fail_fast = true};
  assert_true(kc_daemon_run(&o) < 0);
  assert_int_equal(kc_daemon_configs_alive(), 0);
}

/* ---- two informers of one kind ---- */

/* Informers "elsewhere" (namespace default) and "mine" (demo); the
 * controller "named" reads with the one called `use`. */
static int write_named_config(const char *use) {
  char cfg[3 * PATH_MAX];
  int n =
      snprintf(cfg, sizeof cfg,
               "shutdownTimeout: 1s\n"
               "metrics: { bindAddress: \"127.0.0.1:%u\" }\n"
               "informers:\n"
               "  - { name: elsewhere, apiVersion: v1, kind: ConfigMap, namespaces: [default] }\n"
               "  - { name: mine, apiVersion: v1, kind: ConfigMap, namespaces: [demo] }\n"
               "controllers:\n"
               "  - name: named\n"
               "    plugin: %s\n"
               "    for: { apiVersion: v1, kind: ConfigMap, informer: %s }\n",
               metrics_port, plugin_so, use);
  return n < 0 || (size_t)n >= sizeof cfg ? -1 : sim_write_file(cfg_path, cfg);
}

static void create_cm_in(struct driver *d, const char *ns, const char *name) {
  char body[256], path[128];
  snprintf(
      body, sizeof body,
      "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\"},\"data\":{}}",
      name);
  snprintf(path, sizeof path, "/api/v1/namespaces/%s/configmaps", ns);
  long rc = sim_call("POST", path, body, NULL, NULL);
  if (rc != 201) drv_fail(d, "cannot create ConfigMap %s/%s: HTTP %ld", ns, name, rc);
}

/* Waits until faulty.c annotated ns/cached, which it does only once it
 * read the object from the cache. */
/* Polls GET path on the simulator until its body holds every needle (NULL
 * ends them, at most two), for STEP_MS. false when the time ran out. */
static bool wait_body(struct driver *d, const char *path, const char *n1, const char *n2) {
  uint64_t end = sim_mono_ms() + STEP_MS;
  while (!d->failure[0] && !atomic_load(&daemon_done)) {
    char *body = NULL;
    long code = sim_call("GET", path, NULL, NULL, &body);
    bool seen = code == 200 && body && strstr(body, n1) && (!n2 || strstr(body, n2));
    free(body);
    if (seen) return true;
    if (sim_mono_ms() > end) return false;
    sim_sleep_ms(100);
  }
  return true; /* a failure or the daemon's end is reported elsewhere */
}

static void wait_annotated(struct driver *d, const char *ns) {
  char path[128];
  snprintf(path, sizeof path, "/api/v1/namespaces/%s/configmaps/cached", ns);
  if (!wait_body(d, path, "\"faulty.kctrld.io/cached\":\"seen\"", NULL))
    drv_fail(d, "%s/cached not reconciled from the cache (errors: %ld)", ns,
             reconciles_of("named", "error"));
}

static void *drive_named(void *arg) {
  struct driver *d = arg;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  d->step = 1;
  wait_annotated(d, "demo");
  /* SIGHUP: the controller now reads with the first informer. */
  d->step = 2;
  create_cm_in(d, "default", "cached");
  if (!d->failure[0] && write_named_config("elsewhere") != 0)
    drv_fail(d, "cannot write the config");
  if (!d->failure[0]) kill(getpid(), SIGHUP);
  wait_annotated(d, "default");
  if (!atomic_load(&daemon_done)) kill(getpid(), SIGTERM);
  return NULL;
}

static void test_second_informer_of_a_kind(void **state) {
  if (!apisim_built()) skip();
  assert_int_equal(sim_start(), 0);
  metrics_port = sim_free_port();
  assert_true(metrics_port > 0);
  struct driver *d = calloc(1, sizeof *d);
  assert_non_null(d);
  create_cm_in(d, "demo", "cached");
  assert_string_equal(d->failure, "");
  assert_int_equal(write_named_config("mine"), 0);
  char failure[sizeof d->failure];
  int code = run_daemon(drive_named, d, failure);
  sim_stop();
  assert_string_equal(failure, "");
  assert_int_equal(code, 0);
}

/* ---- sharding on a replica that is not the leader ---- */

/* The leader Lease, held by another replica: it never expires on our clock
 * (its content does not change, but 1 h is longer than the test). */
static void hold_leader_lease(struct driver *d) {
  static const char body[] =
      "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
      "\"metadata\":{\"name\":\"held-elsewhere\"},\"spec\":{\"holderIdentity\":\"other-replica\","
      "\"leaseDurationSeconds\":3600,\"acquireTime\":\"2026-01-01T00:00:00.000000Z\","
      "\"renewTime\":\"2026-01-01T00:00:00.000000Z\",\"leaseTransitions\":0}}";
  long rc = sim_call("POST", "/apis/coordination.k8s.io/v1/namespaces/demo/leases", body, NULL, NULL);
  if (rc != 201) drv_fail(d, "cannot create the leader Lease: HTTP %ld", rc);
}

/* Waits until an Event with reason Evented about demo/evented exists. */
static void wait_event(struct driver *d) {
  if (!wait_body(d, "/api/v1/namespaces/demo/events", "\"reason\":\"Evented\"",
                 "reconciled demo/evented"))
    drv_fail(d, "no Event of the sharded controller (its reconcile errors: %ld)",
             reconciles_of("sharded", "error"));
}

static void *drive_sharded(void *arg) {
  struct driver *d = arg;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  d->step = 1;
  wait_annotated(d, "demo"); /* the sharded controller wrote */
  d->step = 2;
  wait_event(d);
  d->step = 3;
  /* Meanwhile the unsharded controller never ran: not the leader. */
  char *body = NULL;
  long code = sim_call("GET", "/api/v1/namespaces/default/configmaps/cached", NULL, NULL, &body);
  if (!d->failure[0] && (code != 200 || !body || strstr(body, "faulty.kctrld.io/cached")))
    drv_fail(d, "the unsharded controller ran on a replica that is not the leader: HTTP %ld", code);
  free(body);
  if (!d->failure[0] && reconciles_of("plain", "success") > 0)
    drv_fail(d, "the unsharded controller reconciled without leading");
  body = NULL;
  code = sim_call("GET", "/apis/coordination.k8s.io/v1/namespaces/demo/leases/held-elsewhere", NULL,
                  NULL, &body);
  if (!d->failure[0] && (code != 200 || !body || !strstr(body, "\"holderIdentity\":\"other-replica\"")))
    drv_fail(d, "the leader Lease changed hands: HTTP %ld", code);
  free(body);
  if (!atomic_load(&daemon_done)) kill(getpid(), SIGTERM);
  return NULL;
}

static void test_sharded_without_leadership(void **state) {
  if (!apisim_built()) skip();
  assert_int_equal(sim_start(), 0);
  metrics_port = sim_free_port();
  assert_true(metrics_port > 0);
  struct driver *d = calloc(1, sizeof *d);
  assert_non_null(d);
  hold_leader_lease(d);
  create_cm_in(d, "demo", "cached");
  create_cm_in(d, "demo", "evented");
  create_cm_in(d, "default", "cached");
  assert_string_equal(d->failure, "");
  char cfg[3 * PATH_MAX];
  int n = snprintf(cfg, sizeof cfg,
                   "shutdownTimeout: 1s\n"
                   "metrics: { bindAddress: \"127.0.0.1:%u\" }\n"
                   "leaderElection: { enabled: true, namespace: demo, name: held-elsewhere, "
                   "identity: me, leaseDuration: 3s, renewDeadline: 2s, retryPeriod: 500ms }\n"
                   "informers:\n"
                   "  - { name: mine, apiVersion: v1, kind: ConfigMap, namespaces: [demo] }\n"
                   "  - { name: other, apiVersion: v1, kind: ConfigMap, namespaces: [default] }\n"
                   "controllers:\n"
                   "  - name: sharded\n"
                   "    plugin: %s\n"
                   "    for: { apiVersion: v1, kind: ConfigMap, informer: mine }\n"
                   "    sharding: { shards: 2, leaseDuration: 3s, renewDeadline: 2s, "
                   "retryPeriod: 500ms }\n"
                   "  - name: plain\n"
                   "    plugin: %s\n"
                   "    for: { apiVersion: v1, kind: ConfigMap, informer: other }\n",
                   metrics_port, plugin_so, plugin_so);
  assert_true(n > 0 && (size_t)n < sizeof cfg);
  assert_int_equal(sim_write_file(cfg_path, cfg), 0);
  char failure[sizeof d->failure];
  int code = run_daemon(drive_sharded, d, failure);
  sim_stop();
  assert_string_equal(failure, "");
  assert_int_equal(code, 0);
}

/* ---- the first list of a sharded `for` informer is already selected ---- */

/* The requests for the demo ConfigMaps collection (lists and watches) and
 * how many of them carry a shardSelector. */
static void collection_requests(unsigned *all, unsigned *selected, char *first_bad, size_t cap) {
  *all = *selected = 0;
  first_bad[0] = '\0';
  char *body = NULL;
  if (sim_call("GET", "/_apisim/requests", NULL, NULL, &body) != 200 || !body) {
    free(body);
    return;
  }
  static const char path[] = "\"path\":\"/api/v1/namespaces/demo/configmaps\"";
  for (char *p = body; (p = strstr(p, path)); p += sizeof path - 1) {
    char *end = strchr(p, '}');
    if (!end) break;
    *end = '\0';
    if (!strstr(p, "\"verb\":\"list\"") && !strstr(p, "\"verb\":\"watch\"")) {
      *end = '}';
      continue;
    }
    (*all)++;
    if (strstr(p, "shardSelector="))
      (*selected)++;
    else if (!first_bad[0])
      snprintf(first_bad, cap, "%s", p);
    *end = '}';
  }
  free(body);
}

static void *drive_first_list(void *arg) {
  struct driver *d = arg;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  d->step = 1;
  wait_annotated(d, "demo");
  unsigned all = 0, selected = 0;
  char bad[512];
  collection_requests(&all, &selected, bad, sizeof bad);
  if (!d->failure[0] && (all == 0 || selected != all))
    drv_fail(d, "%u of %u lists/watches of the sharded informer carried a shardSelector (%s)",
             selected, all, bad);
  if (!atomic_load(&daemon_done)) kill(getpid(), SIGTERM);
  return NULL;
}

static void test_sharded_first_list_selected(void **state) {
  if (!apisim_built()) skip();
  assert_int_equal(sim_start(), 0);
  assert_int_equal(sim_call("POST", "/_apisim/config", "{\"shardedListAndWatch\":true}", NULL, NULL),
                   200);
  metrics_port = sim_free_port();
  assert_true(metrics_port > 0);
  struct driver *d = calloc(1, sizeof *d);
  assert_non_null(d);
  create_cm_in(d, "demo", "cached");
  assert_string_equal(d->failure, "");
  char cfg[3 * PATH_MAX];
  int n = snprintf(cfg, sizeof cfg,
                   "shutdownTimeout: 1s\n"
                   "metrics: { bindAddress: \"127.0.0.1:%u\" }\n"
                   "informers:\n"
                   "  - { name: mine, apiVersion: v1, kind: ConfigMap, namespaces: [demo] }\n"
                   "controllers:\n"
                   "  - name: sharded\n"
                   "    plugin: %s\n"
                   "    for: { apiVersion: v1, kind: ConfigMap, informer: mine }\n"
                   "    sharding: { shards: 2, leaseNamespace: demo, leaseDuration: 3s, "
                   "renewDeadline: 2s, retryPeriod: 500ms }\n",
                   metrics_port, plugin_so);
  assert_true(n > 0 && (size_t)n < sizeof cfg);
  assert_int_equal(sim_write_file(cfg_path, cfg), 0);
  char failure[sizeof d->failure];
  int code = run_daemon(drive_first_list, d, failure);
  sim_stop();
  assert_string_equal(failure, "");
  assert_int_equal(code, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_results_and_timeouts),
      cmocka_unit_test(test_init_retry),
      cmocka_unit_test(test_fail_fast),
      cmocka_unit_test(test_second_informer_of_a_kind),
      cmocka_unit_test(test_sharded_without_leadership),
      cmocka_unit_test(test_sharded_first_list_selected),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
