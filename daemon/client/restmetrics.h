/* SPDX-License-Identifier: Apache-2.0 */
/* restmetrics: what client-go's REST client metrics count, for every request
 * kctrld sends to the API server and for every run of an exec credential
 * plugin (k8s.io/client-go/tools/metrics, registered by
 * k8s.io/component-base/metrics/prometheus/restclient):
 *
 *  rest_client_requests_total{code,method,host}: one per attempt, counted
 *    when the response headers arrive (a watch counts once, when it
 *    starts), code "<error>" when no response came;
 *  rest_client_request_duration_seconds{verb,host}: whole requests,
 *    response body included; watches are not timed (client-go times Do,
 *    not Watch);
 *  rest_client_exec_plugin_call_total{code,call_status}: plugin runs by
 *    exit code and outcome (no_error, plugin_execution_error,
 *    plugin_not_found_error, client_internal_error);
 *  rest_client_exec_plugin_ttl_seconds / _certificate_rotation_age: the
 *    plugin's client certificate lifetime (x509validity.h reads it).
 *
 * Owns: one process-wide table of those counts (like client-go's global
 * registry: every kc_api adds to it), guarded by a mutex. Label values are
 * copied; a method longer than 15 bytes and a host longer than
 * KC_REST_HOST_MAX - 1 are cut. At most KC_REST_MAX_SERIES
 * (code, method, host) series are kept; later new ones are counted under
 * method "OTHER", so a caller inventing methods cannot grow it without
 * bound.
 *
 * Context: any thread (the loop's async requests, worker threads, the exec
 * plugin's refresh thread record; the loop reads while it renders /metrics).
 * Errors: recording never fails visibly: a series that cannot be allocated
 * is dropped and counted in kc_rest_metrics_snapshot's `dropped`.
 */
#ifndef KC_RESTMETRICS_H
#define KC_RESTMETRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* client-go's request latency buckets: 0.005 .. 60 s. */
#define KC_REST_LATENCY_BUCKETS 12
extern const double kc_rest_latency_buckets[KC_REST_LATENCY_BUCKETS];
/* client-go's certificate rotation age buckets: 10 min .. 4 years. */
#define KC_REST_ROTATION_BUCKETS 11
extern const double kc_rest_rotation_buckets[KC_REST_ROTATION_BUCKETS];
#define KC_REST_MAX_SERIES 256
/* Room for a host label ("name:port"); a longer one is cut. */
#define KC_REST_HOST_MAX 128

/* The "host" label for a server URL, as Go's url.URL.Host: what stands
 * between "://" and the next '/' (port kept, user info dropped).
 * Writes at most cap bytes including the NUL. */
void kc_rest_host_of(const char *server_url, char *host, size_t cap);

/* One attempt's outcome: code is the HTTP status of the response, or 0 when
 * none arrived (counted as "<error>"). */
void kc_rest_metrics_result(const char *method, const char *host, long code);
/* One request's duration (first byte sent to the last byte received). */
void kc_rest_metrics_latency(const char *verb, const char *host, double seconds);

/* Outcome of one exec plugin run, in client-go's terms. */
#define KC_EXEC_NO_ERROR "no_error"
#define KC_EXEC_EXECUTION_ERROR "plugin_execution_error"
#define KC_EXEC_NOT_FOUND "plugin_not_found_error"
#define KC_EXEC_INTERNAL_ERROR "client_internal_error"
/* A plugin is configured: its TTL gauge is exported (+Inf while its
 * credential holds no certificate). */
void kc_rest_metrics_exec_configured(void);
void kc_rest_metrics_exec_call(int exit_code, const char *call_status);
/* The plugin's credential changed: not_after is the unix time its client
 * certificate expires (0: no certificate). When a certificate replaces
 * another, prev_not_before (unix seconds; 0: unknown) gives the age of the
 * one rotated out, observed at now. */
void kc_rest_metrics_exec_cert(int64_t not_after, int64_t prev_not_before, int64_t now);

typedef struct kc_rest_result_series {
  char code[8];    /* "200", "<error>" */
  char method[16];
  char host[KC_REST_HOST_MAX];
  uint64_t count;
} kc_rest_result_series;

typedef struct kc_rest_latency_series {
  char verb[16];
  char host[KC_REST_HOST_MAX];
  uint64_t counts[KC_REST_LATENCY_BUCKETS + 1]; /* per bucket, not cumulative; last: above */
  double sum_seconds;
} kc_rest_latency_series;

typedef struct kc_rest_exec_series {
  char code[12];
  char call_status[32];
  uint64_t count;
} kc_rest_exec_series;

/* A consistent copy of every series. */
typedef struct kc_rest_metrics_snapshot {
  kc_rest_result_series *results;
  size_t nresults;
  kc_rest_latency_series *latencies;
  size_t nlatencies;
  kc_rest_exec_series *exec_calls;
  size_t nexec_calls;
  bool exec_configured;
  int64_t exec_cert_not_after; /* 0: no certificate */
  uint64_t rotation_counts[KC_REST_ROTATION_BUCKETS + 1];
  double rotation_sum_seconds;
  uint64_t dropped; /* series that could not be allocated */
} kc_rest_metrics_snapshot;

/* Fills *out (allocates; -ENOMEM leaves it empty). */
int kc_rest_metrics_snapshot_get(kc_rest_metrics_snapshot *out);
void kc_rest_metrics_snapshot_free(kc_rest_metrics_snapshot *s);

/* --- Test seam: for tests only, not called by the daemon --- */
/* Forgets every series. */
void kc_rest_metrics_reset(void);

#endif
