/* SPDX-License-Identifier: Apache-2.0 */
/* restmetrics: see restmetrics.h. */
#include "client/restmetrics.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const double kc_rest_latency_buckets[KC_REST_LATENCY_BUCKETS] = {
    0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60};

/* 10 min, 30 min, 1 h, 4 h, 1 day, 1 week, 30 days, 90 days, 180 days,
 * 360 days, 4 x 360 days. */
const double kc_rest_rotation_buckets[KC_REST_ROTATION_BUCKETS] = {
    600, 1800, 3600, 14400, 86400, 604800, 2592000, 7776000, 15552000, 31104000, 124416000};

/* The growable arrays of one kind of series. */
typedef struct series_array {
  void *items;
  size_t n, cap, size;
} series_array;

static struct {
  pthread_mutex_t mu;
  series_array results, latencies, exec_calls;
  bool exec_configured;
  int64_t exec_cert_not_after;
  uint64_t rotation_counts[KC_REST_ROTATION_BUCKETS + 1];
  double rotation_sum;
  uint64_t dropped;
} g = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .results = {.size = sizeof(kc_rest_result_series)},
    .latencies = {.size = sizeof(kc_rest_latency_series)},
    .exec_calls = {.size = sizeof(kc_rest_exec_series)},
};

void kc_rest_host_of(const char *url, char *host, size_t cap) {
  if (!cap) return;
  host[0] = '\0';
  if (!url) return;
  const char *p = strstr(url, "://");
  p = p ? p + 3 : url;
  size_t n = strcspn(p, "/?#");
  const char *at = memchr(p, '@', n);
  if (at) {
    n -= (size_t)(at + 1 - p);
    p = at + 1;
  }
  if (n >= cap) n = cap - 1;
  memcpy(host, p, n);
  host[n] = '\0';
}

static void copy_label(char *dst, size_t cap, const char *src) {
  snprintf(dst, cap, "%s", src ? src : "");
}

/* Appends a zeroed item; NULL when out of memory. Under g.mu. */
static void *append(series_array *a) {
  if (a->n == a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 8;
    void *p = realloc(a->items, cap * a->size);
    if (!p) return NULL;
    a->items = p;
    a->cap = cap;
  }
  void *it = (char *)a->items + a->n++ * a->size;
  memset(it, 0, a->size);
  return it;
}

static kc_rest_result_series *find_result(const char *c, const char *m, const char *h) {
  kc_rest_result_series *items = g.results.items;
  for (size_t i = 0; i < g.results.n; i++)
    if (strcmp(items[i].code, c) == 0 && strcmp(items[i].method, m) == 0 && strcmp(items[i].host, h) == 0)
      return &items[i];
  return NULL;
}

void kc_rest_metrics_result(const char *method, const char *host, long code) {
  char c[8], m[16], h[KC_REST_HOST_MAX];
  if (code > 0 && code < 1000)
    snprintf(c, sizeof c, "%ld", code);
  else
    snprintf(c, sizeof c, "<error>");
  copy_label(m, sizeof m, method);
  copy_label(h, sizeof h, host);
  pthread_mutex_lock(&g.mu);
  kc_rest_result_series *hit = find_result(c, m, h);
  if (!hit && g.results.n >= KC_REST_MAX_SERIES) {
    copy_label(m, sizeof m, "OTHER");
    hit = find_result(c, m, h);
  }
  if (!hit && (hit = append(&g.results))) {
    memcpy(hit->code, c, sizeof c);
    memcpy(hit->method, m, sizeof m);
    memcpy(hit->host, h, sizeof h);
  }
  if (hit) hit->count++;
  else g.dropped++;
  pthread_mutex_unlock(&g.mu);
}

void kc_rest_metrics_latency(const char *verb, const char *host, double seconds) {
  char v[16], h[KC_REST_HOST_MAX];
  copy_label(v, sizeof v, verb);
  copy_label(h, sizeof h, host);
  if (!(seconds >= 0)) seconds = 0; /* NaN or a clock step back */
  size_t b = 0;
  while (b < KC_REST_LATENCY_BUCKETS && seconds > kc_rest_latency_buckets[b]) b++;
  pthread_mutex_lock(&g.mu);
  kc_rest_latency_series *items = g.latencies.items, *hit = NULL;
  for (size_t i = 0; i < g.latencies.n && !hit; i++)
    if (strcmp(items[i].verb, v) == 0 && strcmp(items[i].host, h) == 0) hit = &items[i];
  if (!hit && g.latencies.n >= KC_REST_MAX_SERIES) {
    copy_label(v, sizeof v, "OTHER");
    for (size_t i = 0; i < g.latencies.n && !hit; i++)
      if (strcmp(items[i].verb, v) == 0 && strcmp(items[i].host, h) == 0) hit = &items[i];
  }
  if (!hit && (hit = append(&g.latencies))) {
    memcpy(hit->verb, v, sizeof v);
    memcpy(hit->host, h, sizeof h);
  }
  if (hit) {
    hit->counts[b]++;
    hit->sum_seconds += seconds;
  } else {
    g.dropped++;
  }
  pthread_mutex_unlock(&g.mu);
}

void kc_rest_metrics_exec_configured(void) {
  pthread_mutex_lock(&g.mu);
  g.exec_configured = true;
  pthread_mutex_unlock(&g.mu);
}

void kc_rest_metrics_exec_call(int exit_code, const char *call_status) {
  char c[12], st[32];
  snprintf(c, sizeof c, "%d", exit_code);
  copy_label(st, sizeof st, call_status);
  pthread_mutex_lock(&g.mu);
  kc_rest_exec_series *items = g.exec_calls.items, *hit = NULL;
  for (size_t i = 0; i < g.exec_calls.n && !hit; i++)
    if (strcmp(items[i].code, c) == 0 && strcmp(items[i].call_status, st) == 0) hit = &items[i];
  /* Exit codes are 0..255 and -1 (killed by a signal): few series. */
  if (!hit && (hit = append(&g.exec_calls))) {
    memcpy(hit->code, c, sizeof c);
    memcpy(hit->call_status, st, sizeof st);
  }
  if (hit) hit->count++;
  else g.dropped++;
  pthread_mutex_unlock(&g.mu);
}

void kc_rest_metrics_exec_cert(int64_t not_after, int64_t prev_not_before, int64_t now) {
  pthread_mutex_lock(&g.mu);
  g.exec_cert_not_after = not_after;
  if (prev_not_before > 0) {
    double age = now > prev_not_before ? (double)(now - prev_not_before) : 0;
    size_t b = 0;
    while (b < KC_REST_ROTATION_BUCKETS && age > kc_rest_rotation_buckets[b]) b++;
    g.rotation_counts[b]++;
    g.rotation_sum += age;
  }
  pthread_mutex_unlock(&g.mu);
}

static void *copy_items(const series_array *a, size_t *n, bool *fail) {
  *n = 0;
  if (!a->n) return NULL;
  void *p = malloc(a->n * a->size);
  if (!p) {
    *fail = true;
    return NULL;
  }
  memcpy(p, a->items, a->n * a->size);
  *n = a->n;
  return p;
}

int kc_rest_metrics_snapshot_get(kc_rest_metrics_snapshot *out) {
  memset(out, 0, sizeof *out);
  bool fail = false;
  pthread_mutex_lock(&g.mu);
  out->results = copy_items(&g.results, &out->nresults, &fail);
  out->latencies = copy_items(&g.latencies, &out->nlatencies, &fail);
  out->exec_calls = copy_items(&g.exec_calls, &out->nexec_calls, &fail);
  out->exec_configured = g.exec_configured;
  out->exec_cert_not_after = g.exec_cert_not_after;
  memcpy(out->rotation_counts, g.rotation_counts, sizeof g.rotation_counts);
  out->rotation_sum_seconds = g.rotation_sum;
  out->dropped = g.dropped;
  pthread_mutex_unlock(&g.mu);
  if (fail) {
    kc_rest_metrics_snapshot_free(out);
    return -ENOMEM;
  }
  return 0;
}

void kc_rest_metrics_snapshot_free(kc_rest_metrics_snapshot *s) {
  free(s->results);
  free(s->latencies);
  free(s->exec_calls);
  memset(s, 0, sizeof *s);
}

void kc_rest_metrics_reset(void) {
  pthread_mutex_lock(&g.mu);
  g.results.n = g.latencies.n = g.exec_calls.n = 0;
  g.exec_configured = false;
  g.exec_cert_not_after = 0;
  memset(g.rotation_counts, 0, sizeof g.rotation_counts);
  g.rotation_sum = 0;
  g.dropped = 0;
  pthread_mutex_unlock(&g.mu);
}
