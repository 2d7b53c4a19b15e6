/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/client/restmetrics.c: client-go's bucket layouts and
 * where each observation lands (bounds are inclusive), the host label,
 * series folding past the cap, exec plugin calls and certificate figures,
 * and the rendering of it all through ops/selfmetrics into the exposition
 * format. Counting from many threads at once loses nothing. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "base/metrics.h"
#include "client/restmetrics.h"
#include "ops/selfmetrics.h"

static void host_is(const char *url, const char *want) {
  char h[KC_REST_HOST_MAX];
  kc_rest_host_of(url, h, sizeof h);
  assert_string_equal(h, want);
}

static void test_host_label(void **state) {
  (void)state;
  host_is("https://10.0.0.1:6443", "10.0.0.1:6443");
  host_is("https://kube.example.com", "kube.example.com");
  host_is("http://127.0.0.1:8080/prefix/api?x=1", "127.0.0.1:8080");
  host_is("https://[::1]:6443/", "[::1]:6443");
  host_is("https://user:secret@host:1", "host:1");
  host_is(NULL, "");
  char tiny[5];
  kc_rest_host_of("https://abcdefgh", tiny, sizeof tiny);
  assert_string_equal(tiny, "abcd");
}

/* The layouts of k8s.io/component-base/metrics/prometheus/restclient. */
static void test_bucket_layouts(void **state) {
  (void)state;
  const double latency[] = {0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60};
  assert_int_equal(KC_REST_LATENCY_BUCKETS, sizeof latency / sizeof latency[0]);
  for (size_t i = 0; i < KC_REST_LATENCY_BUCKETS; i++) assert_true(kc_rest_latency_buckets[i] == latency[i]);
  const double rotation[] = {600,     1800,    3600,     14400,    86400,    604800,
                             2592000, 7776000, 15552000, 31104000, 124416000};
  assert_int_equal(KC_REST_ROTATION_BUCKETS, sizeof rotation / sizeof rotation[0]);
  for (size_t i = 0; i < KC_REST_ROTATION_BUCKETS; i++)
    assert_true(kc_rest_rotation_buckets[i] == rotation[i]);
}

static const kc_rest_latency_series *latency_of(const kc_rest_metrics_snapshot *s, const char *verb) {
  for (size_t i = 0; i < s->nlatencies; i++)
    if (!strcmp(s->latencies[i].verb, verb)) return &s->latencies[i];
  return NULL;
}

static void test_latency_observations(void **state) {
  (void)state;
  kc_rest_metrics_reset();
  const double obs[] = {0, 0.005, 0.0051, 0.1, 60, 60.5, -1, NAN};
  for (size_t i = 0; i < sizeof obs / sizeof obs[0]; i++) kc_rest_metrics_latency("GET", "h:1", obs[i]);
  kc_rest_metrics_latency("PATCH", "h:1", 2.5);
  kc_rest_metrics_snapshot s;
  assert_int_equal(kc_rest_metrics_snapshot_get(&s), 0);
  assert_int_equal(s.nlatencies, 2);
  const kc_rest_latency_series *g = latency_of(&s, "GET");
  assert_non_null(g);
  assert_string_equal(g->host, "h:1");
  /* <=0.005: 0, 0.005, and -1 / NaN counted as 0; 0.0051 in (0.005, 0.025];
   * 0.1 in (0.025, 0.1]; 60 in (30, 60]; 60.5 above every bound. */
  const uint64_t want[KC_REST_LATENCY_BUCKETS + 1] = {4, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1};
  for (size_t b = 0; b <= KC_REST_LATENCY_BUCKETS; b++)
    if (g->counts[b] != want[b]) fail_msg("bucket %zu: %llu, want %llu", b, (unsigned long long)g->counts[b],
                                          (unsigned long long)want[b]);
  assert_true(fabs(g->sum_seconds - (0.005 + 0.0051 + 0.1 + 60 + 60.5)) < 1e-9);
  const kc_rest_latency_series *p = latency_of(&s, "PATCH");
  assert_non_null(p);
  assert_int_equal(p->counts[7], 1); /* (2, 4] */
  kc_rest_metrics_snapshot_free(&s);
}

static void test_results_and_cap(void **state) {
  (void)state;
  kc_rest_metrics_reset();
  kc_rest_metrics_result("GET", "h:1", 200);
  kc_rest_metrics_result("GET", "h:1", 200);
  kc_rest_metrics_result("GET", "h:1", 0);
  kc_rest_metrics_result("GET", "h:2", 200);
  kc_rest_metrics_result("A-VERY-LONG-METHOD-NAME", "h:1", 405);
  kc_rest_metrics_snapshot s;
  assert_int_equal(kc_rest_metrics_snapshot_get(&s), 0);
  assert_int_equal(s.nresults, 4);
  assert_string_equal(s.results[0].code, "200");
  assert_int_equal(s.results[0].count, 2);
  assert_string_equal(s.results[1].code, "<error>");
  assert_string_equal(s.results[2].host, "h:2");
  assert_string_equal(s.results[3].method, "A-VERY-LONG-MET"); /* cut at 15 bytes */
  kc_rest_metrics_snapshot_free(&s);
  /* Past the cap, new methods fold into "OTHER" (per code and host). */
  char m[16];
  for (int i = 0; i < KC_REST_MAX_SERIES + 50; i++) {
    snprintf(m, sizeof m, "M%d", i);
    kc_rest_metrics_result(m, "h:1", 418);
  }
  assert_int_equal(kc_rest_metrics_snapshot_get(&s), 0);
  assert_int_equal(s.nresults, KC_REST_MAX_SERIES + 1);
  const kc_rest_result_series *last = &s.results[s.nresults - 1];
  assert_string_equal(last->method, "OTHER");
  assert_int_equal(last->count, 50 + 4);
  assert_int_equal(s.dropped, 0);
  kc_rest_metrics_snapshot_free(&s);
}

static void *count_many(void *arg) {
  (void)arg;
  for (int i = 0; i < 10000; i++) {
    kc_rest_metrics_result("GET", "h:1", 200);
    kc_rest_metrics_latency("GET", "h:1", 0.01);
  }
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  kc_rest_metrics_reset();
  pthread_t t[4];
  for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&t[i], NULL, count_many, NULL), 0);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  kc_rest_metrics_snapshot s;
  assert_int_equal(kc_rest_metrics_snapshot_get(&s), 0);
  assert_int_equal(s.nresults, 1);
  assert_int_equal(s.results[0].count, 40000);
  assert_int_equal(s.latencies[0].counts[1], 40000);
  kc_rest_metrics_snapshot_free(&s);
}

static void test_exec_plugin(void **state) {
  (void)state;
  kc_rest_metrics_reset();
  kc_rest_metrics_snapshot s;
  assert_int_equal(kc_rest_metrics_snapshot_get(&s), 0);
  assert_false(s.exec_configured);
  kc_rest_metrics_snapshot_free(&s);
  kc_rest_metrics_exec_configured();
  kc_rest_metrics_exec_call(0, KC_EXEC_NO_ERROR);
  kc_rest_metrics_exec_call(0, KC_EXEC_NO_ERROR);
  kc_rest_metrics_exec_call(3, KC_EXEC_EXECUTION_ERROR);
  kc_rest_metrics_exec_call(-1, KC_EXEC_EXECUTION_ERROR);
  kc_rest_metrics_exec_call(1, KC_EXEC_NOT_FOUND);
  /* A first certificate: no rotation; its replacement after 2 h: one, in (1 h, 4 h]. */
  kc_rest_metrics_exec_cert(5000, 0, 1000);
  kc_rest_metrics_exec_cert(20000, 1000, 1000 + 7200);
  assert_int_equal(kc_rest_metrics_snapshot_get(&s), 0);
  assert_true(s.exec_configured);
  assert_int_equal(s.nexec_calls, 4);
  assert_string_equal(s.exec_calls[0].code, "0");
  assert_string_equal(s.exec_calls[0].call_status, "no_error");
  assert_int_equal(s.exec_calls[0].count, 2);
  assert_string_equal(s.exec_calls[2].code, "-1");
  assert_string_equal(s.exec_calls[3].call_status, "plugin_not_found_error");
  assert_int_equal(s.exec_cert_not_after, 20000);
  const uint64_t want[KC_REST_ROTATION_BUCKETS + 1] = {0, 0, 0, 1};
  assert_memory_equal(s.rotation_counts, want, sizeof want);
  assert_true(s.rotation_sum_seconds == 7200);
  kc_rest_metrics_snapshot_free(&s);
}

/* Through ops/selfmetrics: names, types, labels and buckets as dashboards
 * read them. */
static void test_rendered(void **state) {
  (void)state;
  kc_rest_metrics_reset();
  kc_rest_metrics_result("GET", "10.0.0.1:6443", 200);
  kc_rest_metrics_result("POST", "10.0.0.1:6443", 0);
  kc_rest_metrics_latency("GET", "10.0.0.1:6443", 0.03);
  kc_rest_metrics_exec_configured();
  kc_metrics *reg = kc_metrics_new();
  assert_non_null(reg);
  kc_selfmetrics *sm = NULL;
  assert_int_equal(kc_selfmetrics_new(reg, &sm), 0);
  kc_metrics_reset(reg);
  assert_int_equal(kc_selfmetrics_fill(sm), 0);
  kc_buf out = {0};
  assert_int_equal(kc_metrics_render(reg, &out), 0);
  const char *want[] = {
      "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total ",
      "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes ",
      "# TYPE process_virtual_memory_bytes gauge\n",
      "# TYPE process_open_fds gauge\n",
      "# TYPE process_max_fds gauge\n",
      "# TYPE process_start_time_seconds gauge\n",
      "# TYPE rest_client_requests_total counter\n"
      "rest_client_requests_total{code=\"200\",method=\"GET\",host=\"10.0.0.1:6443\"} 1\n"
      "rest_client_requests_total{code=\"<error>\",method=\"POST\",host=\"10.0.0.1:6443\"} 1\n",
      "# TYPE rest_client_request_duration_seconds histogram\n"
      "rest_client_request_duration_seconds_bucket{verb=\"GET\",host=\"10.0.0.1:6443\",le=\"0.005\"} 0\n"
      "rest_client_request_duration_seconds_bucket{verb=\"GET\",host=\"10.0.0.1:6443\",le=\"0.025\"} 0\n"
      "rest_client_request_duration_seconds_bucket{verb=\"GET\",host=\"10.0.0.1:6443\",le=\"0.1\"} 1\n",
      "rest_client_request_duration_seconds_bucket{verb=\"GET\",host=\"10.0.0.1:6443\",le=\"60\"} 1\n"
      "rest_client_request_duration_seconds_bucket{verb=\"GET\",host=\"10.0.0.1:6443\",le=\"+Inf\"} 1\n"
      "rest_client_request_duration_seconds_sum{verb=\"GET\",host=\"10.0.0.1:6443\"} 0.03\n"
      "rest_client_request_duration_seconds_count{verb=\"GET\",host=\"10.0.0.1:6443\"} 1\n",
      "# TYPE rest_client_exec_plugin_ttl_seconds gauge\nrest_client_exec_plugin_ttl_seconds +Inf\n",
      "# TYPE rest_client_exec_plugin_certificate_rotation_age histogram\n"
      "rest_client_exec_plugin_certificate_rotation_age_bucket{le=\"600\"} 0\n",
      "rest_client_exec_plugin_certificate_rotation_age_bucket{le=\"1.24416e+08\"} 0\n",
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (!strstr(out.p, want[i])) fail_msg("missing:\n%s\nin:\n%s", want[i], out.p);
  /* No client-side rate limiter: nothing waits, nothing is reported. */
  assert_null(strstr(out.p, "rest_client_rate_limiter_duration_seconds"));
  kc_buf_free(&out);
  kc_selfmetrics_free(sm);
  kc_metrics_free(reg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_host_label),          cmocka_unit_test(test_bucket_layouts),
      cmocka_unit_test(test_latency_observations), cmocka_unit_test(test_results_and_cap),
      cmocka_unit_test(test_threads),             cmocka_unit_test(test_exec_plugin),
      cmocka_unit_test(test_rendered),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
