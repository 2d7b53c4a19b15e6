/* Error paths of controllers (daemon/controller.c, workers.c, hostapi.c)
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
 *    (on the abandoned thread), never under a running reconcile.
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
#include "http.h"
#include "testutil.h"
#include "workers.h"

#define STEP_MS 90000

static char plugin_so[PATH_MAX + 16], cfg_path[PATH_MAX], fini_marker[PATH_MAX];
static unsigned metrics_port;

static int setup(void **state) {
  if (sim_paths_init() < 0 || kc_http_global_init() < 0) return -1;
  sim_tmp_path(plugin_so, sizeof plugin_so, "faulty.so");
  sim_tmp_path(cfg_path, sizeof cfg_path, "kctrld.yaml");
  sim_tmp_path(fini_marker, sizeof fini_marker, "fini.txt");
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

/* The value of controller_runtime_reconcile_total for result, -1 if absent. */
static long reconciles(const char *result) {
  char url[64], *body = NULL, want[128];
  snprintf(url, sizeof url, "http://127.0.0.1:%u/metrics", metrics_port);
  snprintf(want, sizeof want, "controller_runtime_reconcile_total{controller=\"faulty\",result=\"%s\"} ",
           result);
  long v = -1;
  if (sim_get_url(url, &body) == 200 && body) {
    const char *at = strstr(body, want);
    if (at) v = strtol(at + strlen(want), NULL, 10);
  }
  free(body);
  return v;
}

static atomic_bool daemon_done;

struct driver {
  char failure[512];
  long success, error, requeue, requeue_after;
};

static void drv_fail(struct driver *d, const char *fmt, ...) {
  if (d->failure[0]) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->failure, sizeof d->failure, fmt, ap);
  va_end(ap);
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
    sim_sleep_ms(300);
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
  create_cm(d, "hang");
  sim_sleep_ms(1000);
  if (!atomic_load(&daemon_done)) kill(getpid(), SIGTERM);
  return NULL;
}

static void test_bad_results_and_timeouts(void **state) {
  char need[PATH_MAX + 32];
  snprintf(need, sizeof need, "%s/kube-apisim", sim_build_dir);
  if (access(need, X_OK) != 0) skip();
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
           "logLevel: info\n"
           "shutdownTimeout: 1s\n"
           "metrics: { bindAddress: \"127.0.0.1:%u\" }\n"
           "informers:\n"
           "  - { apiVersion: v1, kind: ConfigMap }\n"
           "controllers:\n"
           "  - name: faulty\n"
           "    plugin: %s\n"
           "    for: { apiVersion: v1, kind: ConfigMap }\n"
           "    workers: 3\n"
           "    reconcileTimeout: 500ms\n"
           "    settings: { finiMarker: \"%s\" }\n",
           metrics_port, plugin_so, fini_marker);
  assert_int_equal(sim_write_file(cfg_path, cfg), 0);

  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, drive, d), 0);
  kc_daemon_options o = {.config_path = cfg_path, .kubeconfig = sim_kubeconfig};
  int code = kc_daemon_run(&o);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  atomic_store(&daemon_done, true);
  pthread_join(th, NULL);
  char failure[sizeof d->failure];
  memcpy(failure, d->failure, sizeof failure);
  free(d);
  assert_string_equal(failure, "");
  assert_int_equal(code, 0);
  /* The hang reconcile was abandoned; once it returns into the plugin (4 s
   * after it started) nothing may crash and the count drops to 0. */
  uint64_t end = sim_mono_ms() + 10000;
  while (kc_workers_abandoned_running() > 0 && sim_mono_ms() < end) sim_sleep_ms(100);
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_results_and_timeouts),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
