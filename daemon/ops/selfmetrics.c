/* SPDX-License-Identifier: Apache-2.0 */
/* selfmetrics: see selfmetrics.h. */
#include "ops/selfmetrics.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "base/procstat.h"
#include "client/restmetrics.h"

struct kc_selfmetrics {
  kc_metric_family *cpu, *rss, *vsize, *open_fds, *max_fds, *start_time;
  kc_metric_family *requests, *duration, *exec_calls, *exec_ttl, *exec_rotation;
};

static const char *const request_labels[] = {"code", "method", "host"};
static const char *const duration_labels[] = {"verb", "host"};
static const char *const exec_call_labels[] = {"code", "call_status"};

int kc_selfmetrics_new(kc_metrics *reg, kc_selfmetrics **out) {
  kc_selfmetrics *s = calloc(1, sizeof *s);
  if (!s) return -ENOMEM;
  const kc_metric_def defs[] = {
      {&s->cpu, "process_cpu_seconds_total", "CPU time the process has used, user and system, in seconds",
       KC_METRIC_COUNTER, NULL, 0, NULL, 0},
      {&s->rss, "process_resident_memory_bytes", "Resident set size of the process in bytes", KC_METRIC_GAUGE,
       NULL, 0, NULL, 0},
      {&s->vsize, "process_virtual_memory_bytes", "Virtual memory size of the process in bytes",
       KC_METRIC_GAUGE, NULL, 0, NULL, 0},
      {&s->open_fds, "process_open_fds", "File descriptors the process has open", KC_METRIC_GAUGE, NULL, 0,
       NULL, 0},
      {&s->max_fds, "process_max_fds", "The process's limit of open file descriptors (soft RLIMIT_NOFILE)",
       KC_METRIC_GAUGE, NULL, 0, NULL, 0},
      {&s->start_time, "process_start_time_seconds",
       "When the process started, in seconds since the Unix epoch", KC_METRIC_GAUGE, NULL, 0, NULL, 0},
      {&s->requests, "rest_client_requests_total",
       "API server requests by HTTP status code (\"<error>\": no response), method and host; every "
       "attempt counts once, a watch when it starts",
       KC_METRIC_COUNTER, request_labels, 3, NULL, 0},
      {&s->duration, "rest_client_request_duration_seconds",
       "Duration of API server requests (watches excepted), response body included, by verb and host",
       KC_METRIC_HISTOGRAM, duration_labels, 2, kc_rest_latency_buckets, KC_REST_LATENCY_BUCKETS},
      {&s->exec_calls, "rest_client_exec_plugin_call_total",
       "Runs of the exec credential plugin by exit code and outcome (no_error, plugin_execution_error, "
       "plugin_not_found_error, client_internal_error)",
       KC_METRIC_COUNTER, exec_call_labels, 2, NULL, 0},
      {&s->exec_ttl, "rest_client_exec_plugin_ttl_seconds",
       "Seconds until the exec credential plugin's client certificate expires (negative once expired); "
       "+Inf while its credential has no certificate",
       KC_METRIC_GAUGE, NULL, 0, NULL, 0},
      {&s->exec_rotation, "rest_client_exec_plugin_certificate_rotation_age",
       "Seconds an exec credential plugin's client certificate had been valid (since its notBefore) "
       "when another replaced it",
       KC_METRIC_HISTOGRAM, NULL, 0, kc_rest_rotation_buckets, KC_REST_ROTATION_BUCKETS},
  };
  int rc = kc_metrics_register_all(reg, defs, sizeof defs / sizeof defs[0]);
  if (rc < 0) {
    free(s);
    return rc;
  }
  *out = s;
  return 0;
}

void kc_selfmetrics_free(kc_selfmetrics *s) { free(s); }

int kc_selfmetrics_fill(const kc_selfmetrics *s) {
  int rc = 0;
#define KEEP(expr)                  \
  do {                              \
    int r_ = (expr);                \
    if (r_ < 0 && rc == 0) rc = r_; \
  } while (0)
  kc_process_stats ps;
  if (kc_process_stats_read(&ps) == 0) {
    KEEP(kc_metrics_set(s->cpu, NULL, ps.cpu_seconds));
    KEEP(kc_metrics_set(s->rss, NULL, ps.resident_bytes));
    KEEP(kc_metrics_set(s->vsize, NULL, ps.virtual_bytes));
    KEEP(kc_metrics_set(s->open_fds, NULL, ps.open_fds));
    KEEP(kc_metrics_set(s->max_fds, NULL, ps.max_fds));
    KEEP(kc_metrics_set(s->start_time, NULL, ps.start_time_seconds));
  }
  kc_rest_metrics_snapshot snap;
  int r = kc_rest_metrics_snapshot_get(&snap);
  if (r < 0) return r;
  for (size_t i = 0; i < snap.nresults; i++) {
    const kc_rest_result_series *e = &snap.results[i];
    const char *l[] = {e->code, e->method, e->host};
    KEEP(kc_metrics_set(s->requests, l, (double)e->count));
  }
  for (size_t i = 0; i < snap.nlatencies; i++) {
    const kc_rest_latency_series *e = &snap.latencies[i];
    const char *l[] = {e->verb, e->host};
    KEEP(kc_metrics_set_histogram(s->duration, l, e->counts, e->sum_seconds));
  }
  for (size_t i = 0; i < snap.nexec_calls; i++) {
    const kc_rest_exec_series *e = &snap.exec_calls[i];
    const char *l[] = {e->code, e->call_status};
    KEEP(kc_metrics_set(s->exec_calls, l, (double)e->count));
  }
  if (snap.exec_configured) {
    double ttl = INFINITY;
    if (snap.exec_cert_not_after) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ttl = (double)snap.exec_cert_not_after - ((double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
    }
    KEEP(kc_metrics_set(s->exec_ttl, NULL, ttl));
    KEEP(kc_metrics_set_histogram(s->exec_rotation, NULL, snap.rotation_counts, snap.rotation_sum_seconds));
  }
#undef KEEP
  kc_rest_metrics_snapshot_free(&snap);
  return rc;
}
