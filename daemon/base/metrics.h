/* SPDX-License-Identifier: Apache-2.0 */
/* metrics: a Prometheus registry and its text exposition (format 0.0.4).
 *
 * Owns: metric families (name, help, type, label names, histogram bounds)
 * and, per family, the samples of the current collection: label values are
 * escaped and stored once as a pre-rendered label block, so rendering is
 * plain concatenation. The registry follows the "collector" model: every
 * collection starts with kc_metrics_reset (which keeps all memory), the
 * owner then sets every sample from the live objects, then renders. Series
 * of objects that went away (a controller removed on reload) therefore
 * disappear by themselves, and a warmed-up registry collects without a
 * single allocation.
 *
 * Output follows client_golang's expfmt: "# HELP", "# TYPE", samples of a
 * family together, families in registration order, families without samples
 * left out; counter and gauge values as Go's strconv 'g' shortest form,
 * bucket and count values as integers, histogram buckets cumulative with
 * le="+Inf" last, then _sum and _count.
 *
 * Context: a registry is used by one thread at a time (the loop thread in
 * kctrld); the rendered text is plain memory the caller publishes.
 * The number formatting is any thread. Text goes into a kc_buf (buf.h).
 * Errors: 0 or a negative errno (-EINVAL for invalid names, label counts or
 * types, -ENOMEM).
 * Ownership: names, help and label values are copied; families are owned by
 * the registry and live until kc_metrics_free.
 */
#ifndef KC_METRICS_H
#define KC_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

/* Writes v as Go's strconv.FormatFloat(v, 'g', -1, 64) does (and as the
 * Prometheus text format shows it): shortest round-trip digits, exponent
 * form below 1e-4 and from 1e6 up ("1e-08", "1e+06"), "+Inf", "-Inf",
 * "NaN". Returns the length written (cap must be at least 32). */
size_t kc_metrics_format_double(double v, char *buf, size_t cap);

enum kc_metric_type {
  KC_METRIC_COUNTER = 1,
  KC_METRIC_GAUGE = 2,
  KC_METRIC_HISTOGRAM = 3,
};

typedef struct kc_metrics kc_metrics;
typedef struct kc_metric_family kc_metric_family;

kc_metrics *kc_metrics_new(void);
/* kc_metrics_free(NULL) is a no-op. */
void kc_metrics_free(kc_metrics *m);

/* Registers a family. Names must match [a-zA-Z_:][a-zA-Z0-9_:]*, label names
 * [a-zA-Z_][a-zA-Z0-9_]* not starting with "__" (and not "le" on a
 * histogram); bounds (histograms only) strictly increasing and finite.
 * A name registered twice is -EEXIST. *out is owned by the registry. */
int kc_metrics_register(kc_metrics *m, const char *name, const char *help, enum kc_metric_type type,
                        const char *const *label_names, size_t nlabels, const double *bounds,
                        size_t nbounds, kc_metric_family **out);

/* One family of a table registered at once, and where its handle goes. */
typedef struct kc_metric_def {
  kc_metric_family **slot;
  const char *name, *help;
  enum kc_metric_type type;
  const char *const *labels;
  size_t nlabels;
  const double *bounds;
  size_t nbounds;
} kc_metric_def;

/* kc_metrics_register for each of defs[0..n) in order; stops at the first
 * error and returns it. */
int kc_metrics_register_all(kc_metrics *m, const kc_metric_def *defs, size_t n);

/* Forgets every sample (keeps families and memory): start of a collection. */
void kc_metrics_reset(kc_metrics *m);

/* Adds a counter or gauge sample. label_values has one entry per label
 * name (any bytes; escaped here). The caller must not add the same label
 * values twice in one collection (the text would then be invalid). */
int kc_metrics_set(kc_metric_family *f, const char *const *label_values, double value);

/* Adds a histogram sample from per-bucket counts that are NOT cumulative:
 * counts[i] for bound i (observations <= bounds[i] and > bounds[i-1]),
 * counts[nbounds] for those above the last bound; sum in the metric's unit.
 * _count is the total of counts. */
int kc_metrics_set_histogram(kc_metric_family *f, const char *const *label_values,
                             const uint64_t *counts, double sum);

/* Adds a histogram sample whose distribution is unknown (only its count
 * and sum are): rendered with the le="+Inf" bucket alone, which is valid
 * exposition and claims nothing about the finite buckets. */
int kc_metrics_set_histogram_total(kc_metric_family *f, const char *const *label_values,
                                   uint64_t count, double sum);

/* Appends the exposition of every family with samples to out. Returns 0 or
 * out->err. */
int kc_metrics_render(const kc_metrics *m, kc_buf *out);

#define KC_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* controller-runtime's controller_runtime_reconcile_time_seconds buckets
 * (0.005 s .. 60 s, 40 bounds). */
#define KC_RECONCILE_BUCKETS 40
extern const double kc_metrics_reconcile_buckets[KC_RECONCILE_BUCKETS];

/* A fixed-bucket histogram for reconcile durations, for whoever observes
 * them (the controller): observe is O(log buckets), no allocation.
 * counts[] is in the form kc_metrics_set_histogram takes. */
typedef struct kc_reconcile_histogram {
  uint64_t counts[KC_RECONCILE_BUCKETS + 1];
  double sum_seconds;
} kc_reconcile_histogram;
void kc_reconcile_histogram_observe(kc_reconcile_histogram *h, double seconds);

#endif
