/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/metrics: exact text exposition (HELP/TYPE, label
 * escaping, histograms), Go-compatible number formatting, and a strict
 * parser that reads the output back and checks every sample. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/metrics.h"
#include "runtime/workqueue.h"

static void fmt_is(double v, const char *want) {
  char buf[64];
  size_t n = kc_metrics_format_double(v, buf, sizeof buf);
  assert_string_equal(buf, want);
  assert_int_equal(n, strlen(want));
}

/* Expected strings are what Go's strconv.FormatFloat(v, 'g', -1, 64) prints. */
static void test_format_double(void **state) {
  (void)state;
  fmt_is(0, "0");
  fmt_is(1, "1");
  fmt_is(-3, "-3");
  fmt_is(42, "42");
  fmt_is(999999, "999999");
  fmt_is(1e6, "1e+06");
  fmt_is(1234567, "1.234567e+06");
  fmt_is(0.005, "0.005");
  fmt_is(0.1, "0.1");
  fmt_is(1.25, "1.25");
  fmt_is(0.0001, "0.0001");
  fmt_is(1e-5, "1e-05");
  fmt_is(1e-8, "1e-08");
  fmt_is(1000, "1000");
  fmt_is(1.5e300, "1.5e+300");
  fmt_is(0.30000000000000004, "0.30000000000000004");
  fmt_is(123456.5, "123456.5");
  fmt_is(INFINITY, "+Inf");
  fmt_is(-INFINITY, "-Inf");
  fmt_is(NAN, "NaN");
}

static void test_register_validation(void **state) {
  (void)state;
  kc_metrics *m = kc_metrics_new();
  assert_non_null(m);
  const char *good[] = {"a"};
  const char *reserved[] = {"__x"};
  const char *le[] = {"le"};
  const char *dup[] = {"a", "a"};
  const char *bad[] = {"1a"};
  double bounds[] = {1, 2};
  double unsorted[] = {2, 1};
  kc_metric_family *f;
  assert_int_equal(kc_metrics_register(m, "9bad", "h", KC_METRIC_GAUGE, NULL, 0, NULL, 0, &f), -EINVAL);
  assert_int_equal(kc_metrics_register(m, "a-b", "h", KC_METRIC_GAUGE, NULL, 0, NULL, 0, &f), -EINVAL);
  assert_int_equal(kc_metrics_register(m, "x", "h", KC_METRIC_GAUGE, reserved, 1, NULL, 0, &f), -EINVAL);
  assert_int_equal(kc_metrics_register(m, "x", "h", KC_METRIC_GAUGE, bad, 1, NULL, 0, &f), -EINVAL);
  assert_int_equal(kc_metrics_register(m, "x", "h", KC_METRIC_GAUGE, dup, 2, NULL, 0, &f), -EINVAL);
  assert_int_equal(kc_metrics_register(m, "x", "h", KC_METRIC_HISTOGRAM, le, 1, bounds, 2, &f), -EINVAL);
  assert_int_equal(kc_metrics_register(m, "x", "h", KC_METRIC_HISTOGRAM, good, 1, unsorted, 2, &f), -EINVAL);
  assert_int_equal(kc_metrics_register(m, "x", "h", KC_METRIC_HISTOGRAM, good, 1, NULL, 0, &f), -EINVAL);
  assert_int_equal(kc_metrics_register(m, "x", "h", KC_METRIC_GAUGE, good, 1, bounds, 2, &f), -EINVAL);
  assert_int_equal(kc_metrics_register(m, "ns:x_y", "h", KC_METRIC_GAUGE, good, 1, NULL, 0, &f), 0);
  assert_int_equal(kc_metrics_register(m, "ns:x_y", "h", KC_METRIC_COUNTER, NULL, 0, NULL, 0, &f), -EEXIST);
  /* Wrong sample kind for the family type. */
  const char *v[] = {"1"};
  uint64_t counts[3] = {0};
  assert_int_equal(kc_metrics_set_histogram(f, v, counts, 0), -EINVAL);
  assert_int_equal(kc_metrics_set(f, NULL, 1), -EINVAL); /* missing label values */
  kc_metrics_free(m);
  kc_metrics_free(NULL);
}

static const char expected[] =
    "# HELP requests_total Requests seen, with a \\\\ backslash and\\na newline \"quoted\".\n"
    "# TYPE requests_total counter\n"
    "requests_total{code=\"200\",path=\"/a\"} 3\n"
    "requests_total{code=\"500\",path=\"say \\\"hi\\\"\\\\\\n\"} 1.5e+06\n"
    "# HELP temperature A gauge without labels\n"
    "# TYPE temperature gauge\n"
    "temperature -0.25\n"
    "# HELP latency_seconds Latency\n"
    "# TYPE latency_seconds histogram\n"
    "latency_seconds_bucket{op=\"get\",le=\"0.005\"} 1\n"
    "latency_seconds_bucket{op=\"get\",le=\"0.5\"} 3\n"
    "latency_seconds_bucket{op=\"get\",le=\"60\"} 3\n"
    "latency_seconds_bucket{op=\"get\",le=\"+Inf\"} 4\n"
    "latency_seconds_sum{op=\"get\"} 100.25\n"
    "latency_seconds_count{op=\"get\"} 4\n"
    "latency_seconds_bucket{op=\"put\",le=\"+Inf\"} 7\n"
    "latency_seconds_sum{op=\"put\"} 0.7\n"
    "latency_seconds_count{op=\"put\"} 7\n";

static kc_metrics *build(kc_metric_family **c, kc_metric_family **g, kc_metric_family **h) {
  kc_metrics *m = kc_metrics_new();
  assert_non_null(m);
  const char *cl[] = {"code", "path"};
  const char *hl[] = {"op"};
  const double bounds[] = {0.005, 0.5, 60};
  assert_int_equal(kc_metrics_register(m, "requests_total",
                                       "Requests seen, with a \\ backslash and\na newline \"quoted\".",
                                       KC_METRIC_COUNTER, cl, 2, NULL, 0, c), 0);
  assert_int_equal(kc_metrics_register(m, "empty_family", "never set", KC_METRIC_GAUGE, NULL, 0, NULL, 0, NULL), 0);
  assert_int_equal(kc_metrics_register(m, "temperature", "A gauge without labels", KC_METRIC_GAUGE, NULL, 0,
                                       NULL, 0, g), 0);
  assert_int_equal(kc_metrics_register(m, "latency_seconds", "Latency", KC_METRIC_HISTOGRAM, hl, 1, bounds, 3,
                                       h), 0);
  return m;
}

static void fill(kc_metric_family *c, kc_metric_family *g, kc_metric_family *h) {
  const char *l1[] = {"200", "/a"};
  const char *l2[] = {"500", "say \"hi\"\\\n"};
  assert_int_equal(kc_metrics_set(c, l1, 3), 0);
  assert_int_equal(kc_metrics_set(c, l2, 1.5e6), 0);
  assert_int_equal(kc_metrics_set(g, NULL, -0.25), 0);
  const char *get[] = {"get"};
  const uint64_t counts[] = {1, 2, 0, 1}; /* per bucket, not cumulative */
  assert_int_equal(kc_metrics_set_histogram(h, get, counts, 100.25), 0);
  const char *put[] = {"put"};
  assert_int_equal(kc_metrics_set_histogram_total(h, put, 7, 0.7), 0);
}

static void test_exposition_exact(void **state) {
  (void)state;
  kc_metric_family *c, *g, *h;
  kc_metrics *m = build(&c, &g, &h);
  fill(c, g, h);
  kc_buf out = {0};
  assert_int_equal(kc_metrics_render(m, &out), 0);
  assert_string_equal(out.p, expected);
  /* A second collection after reset renders identically (memory reused). */
  kc_metrics_reset(m);
  fill(c, g, h);
  kc_buf_reset(&out);
  assert_int_equal(kc_metrics_render(m, &out), 0);
  assert_string_equal(out.p, expected);
  /* After a reset without samples nothing is rendered. */
  kc_metrics_reset(m);
  kc_buf_reset(&out);
  assert_int_equal(kc_metrics_render(m, &out), 0);
  assert_int_equal(out.len, 0);
  kc_buf_free(&out);
  kc_metrics_free(m);
}

/* ---- a strict parser for the text format (0.0.4) ---- */

typedef struct parsed {
  char name[128];
  char labels[8][2][128]; /* unescaped */
  int nlabels;
  double value;
} parsed;

static int parse_value(const char *s, double *v) {
  if (strcmp(s, "+Inf") == 0) *v = INFINITY;
  else if (strcmp(s, "-Inf") == 0) *v = -INFINITY;
  else if (strcmp(s, "NaN") == 0) *v = NAN;
  else {
    char *end;
    *v = strtod(s, &end);
    if (end == s || *end) return -1;
  }
  return 0;
}

/* Parses one sample line; returns 0 or -1. */
static int parse_sample(const char *line, parsed *p) {
  memset(p, 0, sizeof *p);
  const char *c = line;
  size_t n = 0;
  while ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || *c == '_' || *c == ':' ||
         (n && *c >= '0' && *c <= '9')) {
    if (n + 1 >= sizeof p->name) return -1;
    p->name[n++] = *c++;
  }
  if (!n) return -1;
  if (*c == '{') {
    c++;
    while (*c != '}') {
      if (p->nlabels == 8) return -1;
      char *k = p->labels[p->nlabels][0], *v = p->labels[p->nlabels][1];
      size_t kn = 0, vn = 0;
      while ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || *c == '_' || (kn && *c >= '0' && *c <= '9'))
        k[kn++] = *c++;
      if (!kn || *c++ != '=' || *c++ != '"') return -1;
      while (*c != '"') {
        if (!*c || *c == '\n') return -1;
        if (*c == '\\') {
          c++;
          if (*c == 'n') v[vn++] = '\n';
          else if (*c == '\\' || *c == '"') v[vn++] = *c;
          else return -1;
          c++;
        } else {
          v[vn++] = *c++;
        }
        if (vn >= 127) return -1;
      }
      c++;
      p->nlabels++;
      if (*c == ',') c++;
      else if (*c != '}') return -1;
    }
    c++;
  }
  if (*c++ != ' ') return -1;
  return parse_value(c, &p->value);
}

static void test_parse_back(void **state) {
  (void)state;
  kc_metric_family *c, *g, *h;
  kc_metrics *m = build(&c, &g, &h);
  fill(c, g, h);
  kc_buf out = {0};
  assert_int_equal(kc_metrics_render(m, &out), 0);
  char *text = strdup(out.p);
  assert_non_null(text);
  int samples = 0, types = 0;
  char family[128] = "", type[32] = "";
  double last_bucket = -1;
  for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (strncmp(line, "# HELP ", 7) == 0) continue;
    if (strncmp(line, "# TYPE ", 7) == 0) {
      assert_int_equal(sscanf(line + 7, "%127s %31s", family, type), 2);
      types++;
      last_bucket = -1;
      continue;
    }
    parsed p;
    assert_int_equal(parse_sample(line, &p), 0);
    samples++;
    /* Every sample belongs to the family declared last. */
    assert_int_equal(strncmp(p.name, family, strlen(family)), 0);
    if (strcmp(type, "histogram") == 0) {
      const char *suffix = p.name + strlen(family);
      assert_true(strcmp(suffix, "_bucket") == 0 || strcmp(suffix, "_sum") == 0 || strcmp(suffix, "_count") == 0);
      if (strcmp(suffix, "_bucket") == 0) {
        assert_string_equal(p.labels[p.nlabels - 1][0], "le");
        assert_true(p.value >= last_bucket); /* cumulative */
        last_bucket = p.value;
      } else {
        last_bucket = -1;
      }
    } else {
      assert_string_equal(p.name, family);
    }
    if (strcmp(p.name, "requests_total") == 0 && strcmp(p.labels[0][1], "500") == 0) {
      assert_string_equal(p.labels[1][1], "say \"hi\"\\\n");
      assert_true(p.value == 1.5e6);
    }
  }
  assert_int_equal(types, 3);
  assert_int_equal(samples, 2 + 1 + (4 + 2) + (1 + 2));
  free(text);
  kc_buf_free(&out);
  kc_metrics_free(m);
}

static void test_reconcile_histogram(void **state) {
  (void)state;
  kc_reconcile_histogram h = {0};
  kc_reconcile_histogram_observe(&h, 0.005); /* le 0.005 */
  kc_reconcile_histogram_observe(&h, 0.0051);/* le 0.01 */
  kc_reconcile_histogram_observe(&h, 0);     /* le 0.005 */
  kc_reconcile_histogram_observe(&h, 60);    /* le 60 */
  kc_reconcile_histogram_observe(&h, 61);    /* +Inf */
  assert_int_equal(h.counts[0], 2);
  assert_int_equal(h.counts[1], 1);
  assert_int_equal(h.counts[KC_RECONCILE_BUCKETS - 1], 1);
  assert_int_equal(h.counts[KC_RECONCILE_BUCKETS], 1);
  assert_true(fabs(h.sum_seconds - 121.0101) < 1e-9);
  assert_true(kc_metrics_reconcile_buckets[0] == 0.005);
  assert_true(kc_metrics_reconcile_buckets[KC_RECONCILE_BUCKETS - 1] == 60);
  /* Rendered like controller-runtime's buckets. */
  kc_metrics *m = kc_metrics_new();
  kc_metric_family *f;
  const char *l[] = {"controller"};
  assert_int_equal(kc_metrics_register(m, "controller_runtime_reconcile_time_seconds", "x", KC_METRIC_HISTOGRAM,
                                       l, 1, kc_metrics_reconcile_buckets, KC_RECONCILE_BUCKETS, &f), 0);
  const char *v[] = {"c"};
  assert_int_equal(kc_metrics_set_histogram(f, v, h.counts, h.sum_seconds), 0);
  kc_buf out = {0};
  assert_int_equal(kc_metrics_render(m, &out), 0);
  assert_non_null(strstr(out.p, "controller_runtime_reconcile_time_seconds_bucket{controller=\"c\",le=\"0.005\"} 2\n"));
  assert_non_null(strstr(out.p, "{controller=\"c\",le=\"1.25\"} 3\n"));
  assert_non_null(strstr(out.p, "{controller=\"c\",le=\"60\"} 4\n"));
  assert_non_null(strstr(out.p, "{controller=\"c\",le=\"+Inf\"} 5\n"));
  assert_non_null(strstr(out.p, "controller_runtime_reconcile_time_seconds_count{controller=\"c\"} 5\n"));
  kc_buf_free(&out);
  kc_metrics_free(m);
}

/* The workqueue's ns buckets turn into client-go's le values. */
static void test_workqueue_bounds(void **state) {
  (void)state;
  char buf[64];
  const char *want[KC_WQ_HIST_BUCKETS] = {"1e-08", "1e-07", "1e-06", "1e-05", "0.0001", "0.001",
                                          "0.01",  "0.1",   "1",     "10",    "100",    "1000"};
  for (unsigned i = 0; i < KC_WQ_HIST_BUCKETS; i++) {
    kc_metrics_format_double((double)kc_wq_histogram_bound_ns(i) / 1e9, buf, sizeof buf);
    assert_string_equal(buf, want[i]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_format_double),    cmocka_unit_test(test_register_validation),
      cmocka_unit_test(test_exposition_exact), cmocka_unit_test(test_parse_back),
      cmocka_unit_test(test_reconcile_histogram), cmocka_unit_test(test_workqueue_bounds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
