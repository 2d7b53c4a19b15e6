/* SPDX-License-Identifier: Apache-2.0 */
/* metrics: see metrics.h. */
#include "base/metrics.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- numbers ------------------------------------------------------------------ */

size_t kc_metrics_format_double(double v, char *buf, size_t cap) {
  if (cap < 32) return 0;
  if (isnan(v)) return (size_t)snprintf(buf, cap, "NaN");
  if (isinf(v)) return (size_t)snprintf(buf, cap, v > 0 ? "+Inf" : "-Inf");
  /* Fast path: integers below 1e6 (most counters and gauges). */
  if (v == floor(v) && fabs(v) < 1e6 && !(v == 0 && signbit(v)))
    return (size_t)snprintf(buf, cap, "%.0f", v);
  /* Shortest digit count that reads back to the same double. */
  char e[40];
  int p;
  for (p = 1; p <= 17; p++) {
    snprintf(e, sizeof e, "%.*e", p - 1, v);
    if (strtod(e, NULL) == v) break;
  }
  if (p > 17) p = 17;
  const char *x = strchr(e, 'e');
  int exp10 = x ? atoi(x + 1) : 0;
  /* Go 'g' with shortest precision: %e when exp < -4 || exp >= 6. */
  if (exp10 < -4 || exp10 >= 6) return (size_t)snprintf(buf, cap, "%s", e);
  int decimals = p - 1 - exp10;
  if (decimals < 0) decimals = 0;
  return (size_t)snprintf(buf, cap, "%.*f", decimals, v);
}

/* --- registry ----------------------------------------------------------------- */

typedef struct sample {
  size_t labels_off, labels_len; /* pre-rendered label block in the pool, without braces */
  double value;                  /* counter/gauge value, or histogram sum */
  size_t counts_off;             /* histogram: nbounds+1 cumulative counts */
  bool total_only;               /* histogram: only count and sum are known */
  uint64_t total;                /* its count */
} sample;

struct kc_metric_family {
  char *name, *help;
  enum kc_metric_type type;
  char **label_names;
  size_t nlabels;
  double *bounds;
  char (*bound_text)[32]; /* le="..." values, formatted once */
  size_t nbounds;
  sample *samples;
  size_t nsamples, samples_cap;
  kc_buf pool;
  uint64_t *counts;
  size_t ncounts, counts_cap;
  kc_metric_family *next;
};

struct kc_metrics {
  kc_metric_family *first, *last;
};

kc_metrics *kc_metrics_new(void) { return calloc(1, sizeof(kc_metrics)); }

static void family_free(kc_metric_family *f) {
  free(f->name);
  free(f->help);
  for (size_t i = 0; i < f->nlabels; i++) free(f->label_names[i]);
  free(f->label_names);
  free(f->bounds);
  free(f->bound_text);
  free(f->samples);
  kc_buf_free(&f->pool);
  free(f->counts);
  free(f);
}

void kc_metrics_free(kc_metrics *m) {
  if (!m) return;
  for (kc_metric_family *f = m->first, *n; f; f = n) {
    n = f->next;
    family_free(f);
  }
  free(m);
}

static bool valid_name(const char *s, bool colon) {
  if (!s || !*s) return false;
  for (const char *c = s; *c; c++) {
    bool alpha = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || *c == '_' ||
                 (colon && *c == ':');
    bool digit = *c >= '0' && *c <= '9';
    if (!alpha && !(digit && c != s)) return false;
  }
  return true;
}

int kc_metrics_register(kc_metrics *m, const char *name, const char *help, enum kc_metric_type type,
                        const char *const *label_names, size_t nlabels, const double *bounds,
                        size_t nbounds, kc_metric_family **out) {
  if (!m || !valid_name(name, true) || !help) return -EINVAL;
  if (type != KC_METRIC_COUNTER && type != KC_METRIC_GAUGE && type != KC_METRIC_HISTOGRAM)
    return -EINVAL;
  if ((type == KC_METRIC_HISTOGRAM) != (nbounds > 0)) return -EINVAL;
  for (size_t i = 0; i < nlabels; i++) {
    if (!valid_name(label_names[i], false) || strncmp(label_names[i], "__", 2) == 0) return -EINVAL;
    if (type == KC_METRIC_HISTOGRAM && strcmp(label_names[i], "le") == 0) return -EINVAL;
    for (size_t j = 0; j < i; j++)
      if (strcmp(label_names[i], label_names[j]) == 0) return -EINVAL;
  }
  for (size_t i = 0; i < nbounds; i++)
    if (!isfinite(bounds[i]) || (i > 0 && !(bounds[i] > bounds[i - 1]))) return -EINVAL;
  for (kc_metric_family *f = m->first; f; f = f->next)
    if (strcmp(f->name, name) == 0) return -EEXIST;

  kc_metric_family *f = calloc(1, sizeof *f);
  if (!f) return -ENOMEM;
  f->type = type;
  f->name = strdup(name);
  f->help = strdup(help);
  f->label_names = calloc(nlabels ? nlabels : 1, sizeof *f->label_names);
  if (nbounds) {
    f->bounds = malloc(nbounds * sizeof *f->bounds);
    f->bound_text = malloc(nbounds * sizeof *f->bound_text);
  }
  if (!f->name || !f->help || !f->label_names || (nbounds && (!f->bounds || !f->bound_text))) {
    family_free(f);
    return -ENOMEM;
  }
  for (size_t i = 0; i < nlabels; i++) {
    f->label_names[i] = strdup(label_names[i]);
    if (!f->label_names[i]) {
      family_free(f);
      return -ENOMEM;
    }
    f->nlabels = i + 1;
  }
  for (size_t i = 0; i < nbounds; i++) {
    f->bounds[i] = bounds[i];
    kc_metrics_format_double(bounds[i], f->bound_text[i], sizeof f->bound_text[i]);
  }
  f->nbounds = nbounds;
  if (m->last)
    m->last->next = f;
  else
    m->first = f;
  m->last = f;
  if (out) *out = f;
  return 0;
}

void kc_metrics_reset(kc_metrics *m) {
  for (kc_metric_family *f = m->first; f; f = f->next) {
    f->nsamples = 0;
    f->ncounts = 0;
    kc_buf_reset(&f->pool);
  }
}

static void append_escaped(kc_buf *b, const char *s, bool quote) {
  const char *run = s;
  for (const char *c = s;; c++) {
    const char *rep = NULL;
    if (*c == '\\')
      rep = "\\\\";
    else if (*c == '\n')
      rep = "\\n";
    else if (quote && *c == '"')
      rep = "\\\"";
    else if (*c != '\0')
      continue;
    kc_buf_add(b, run, (size_t)(c - run));
    if (!rep) break;
    kc_buf_add(b, rep, 2);
    run = c + 1;
  }
}

static int add_sample(kc_metric_family *f, const char *const *label_values, sample **out) {
  if (KC_ARRAY_ROOM(f->samples, f->samples_cap, f->nsamples, 8) < 0) return -ENOMEM;
  for (size_t i = 0; i < f->nlabels; i++)
    if (!label_values || !label_values[i]) return -EINVAL;
  sample *s = &f->samples[f->nsamples];
  s->labels_off = f->pool.len;
  for (size_t i = 0; i < f->nlabels; i++) {
    if (i) kc_buf_add(&f->pool, ",", 1);
    kc_buf_puts(&f->pool, f->label_names[i]);
    kc_buf_add(&f->pool, "=\"", 2);
    append_escaped(&f->pool, label_values[i], true);
    kc_buf_add(&f->pool, "\"", 1);
  }
  if (f->pool.err) {
    int err = f->pool.err;
    /* Drop the partial label block; the pool stays usable. */
    f->pool.len = s->labels_off;
    f->pool.err = 0;
    return err;
  }
  s->labels_len = f->pool.len - s->labels_off;
  s->value = 0;
  s->counts_off = 0;
  s->total_only = false;
  s->total = 0;
  *out = s;
  return 0;
}

int kc_metrics_set(kc_metric_family *f, const char *const *label_values, double value) {
  if (!f || f->type == KC_METRIC_HISTOGRAM) return -EINVAL;
  sample *s;
  int rc = add_sample(f, label_values, &s);
  if (rc < 0) return rc;
  s->value = value;
  f->nsamples++;
  return 0;
}

int kc_metrics_set_histogram(kc_metric_family *f, const char *const *label_values,
                             const uint64_t *counts, double sum) {
  if (!f || f->type != KC_METRIC_HISTOGRAM || !counts) return -EINVAL;
  size_t need = f->ncounts + f->nbounds + 1;
  if (KC_ARRAY_RESERVE(f->counts, f->counts_cap, need, 64) < 0) return -ENOMEM;
  sample *s;
  int rc = add_sample(f, label_values, &s);
  if (rc < 0) return rc;
  s->value = sum;
  s->counts_off = f->ncounts;
  uint64_t acc = 0;
  for (size_t i = 0; i <= f->nbounds; i++) {
    acc += counts[i];
    f->counts[f->ncounts++] = acc;
  }
  f->nsamples++;
  return 0;
}

int kc_metrics_set_histogram_total(kc_metric_family *f, const char *const *label_values,
                                   uint64_t count, double sum) {
  if (!f || f->type != KC_METRIC_HISTOGRAM) return -EINVAL;
  sample *s;
  int rc = add_sample(f, label_values, &s);
  if (rc < 0) return rc;
  s->value = sum;
  s->total_only = true;
  s->total = count;
  f->nsamples++;
  return 0;
}

static void render_line(kc_buf *out, const char *name, const char *suffix, const char *labels,
                        size_t labels_len, const char *extra, const char *value) {
  kc_buf_puts(out, name);
  kc_buf_puts(out, suffix);
  if (labels_len || extra) {
    kc_buf_add(out, "{", 1);
    kc_buf_add(out, labels, labels_len);
    if (extra) {
      if (labels_len) kc_buf_add(out, ",", 1);
      kc_buf_puts(out, extra);
    }
    kc_buf_add(out, "}", 1);
  }
  kc_buf_add(out, " ", 1);
  kc_buf_puts(out, value);
  kc_buf_add(out, "\n", 1);
}

int kc_metrics_render(const kc_metrics *m, kc_buf *out) {
  static const char *const type_names[] = {"", "counter", "gauge", "histogram"};
  char num[48], le[48];
  for (const kc_metric_family *f = m->first; f; f = f->next) {
    if (!f->nsamples) continue;
    kc_buf_puts(out, "# HELP ");
    kc_buf_puts(out, f->name);
    kc_buf_add(out, " ", 1);
    append_escaped(out, f->help, false);
    kc_buf_printf(out, "\n# TYPE %s %s\n", f->name, type_names[f->type]);
    for (size_t i = 0; i < f->nsamples; i++) {
      const sample *s = &f->samples[i];
      const char *labels = f->pool.p ? f->pool.p + s->labels_off : "";
      if (f->type != KC_METRIC_HISTOGRAM) {
        kc_metrics_format_double(s->value, num, sizeof num);
        render_line(out, f->name, "", labels, s->labels_len, NULL, num);
        continue;
      }
      const uint64_t *c = s->total_only ? &s->total : f->counts + s->counts_off;
      size_t first = s->total_only ? f->nbounds : 0;
      for (size_t b = first; b <= f->nbounds; b++) {
        snprintf(le, sizeof le, "le=\"%s\"", b < f->nbounds ? f->bound_text[b] : "+Inf");
        snprintf(num, sizeof num, "%llu", (unsigned long long)c[b - first]);
        render_line(out, f->name, "_bucket", labels, s->labels_len, le, num);
      }
      kc_metrics_format_double(s->value, num, sizeof num);
      render_line(out, f->name, "_sum", labels, s->labels_len, NULL, num);
      snprintf(num, sizeof num, "%llu", (unsigned long long)c[f->nbounds - first]);
      render_line(out, f->name, "_count", labels, s->labels_len, NULL, num);
    }
  }
  return out->err;
}

/* --- reconcile histogram ------------------------------------------------------ */

const double kc_metrics_reconcile_buckets[KC_RECONCILE_BUCKETS] = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6,
    0.7,   0.8,  0.9,   1.0,  1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5,
    6,     7,    8,     9,    10,  15,  20,  25,  30,  40,  50,  60};

void kc_reconcile_histogram_observe(kc_reconcile_histogram *h, double seconds) {
  /* First bound >= seconds (Prometheus buckets are "less or equal"). */
  size_t lo = 0, hi = KC_RECONCILE_BUCKETS;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (kc_metrics_reconcile_buckets[mid] >= seconds)
      hi = mid;
    else
      lo = mid + 1;
  }
  h->counts[lo]++;
  h->sum_seconds += seconds;
}

int kc_metrics_register_all(kc_metrics *m, const kc_metric_def *defs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    int rc = kc_metrics_register(m, defs[i].name, defs[i].help, defs[i].type, defs[i].labels,
                                 defs[i].nlabels, defs[i].bounds, defs[i].nbounds, defs[i].slot);
    if (rc < 0) return rc;
  }
  return 0;
}
