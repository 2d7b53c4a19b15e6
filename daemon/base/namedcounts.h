/* SPDX-License-Identifier: Apache-2.0 */
/* namedcounts: process-lifetime counters by a name (a controller's) and a
 * small column (a verb), for metrics that must outlive the thing counted: a
 * reload re-creates controllers, Prometheus counters never go back.
 *
 * Rows are found by a linear scan (a handful of controllers); a row is
 * added at a name's first count and kept for the process's life. Out of
 * memory, a count is lost (the caller's log line still says what happened).
 *
 * Context: any thread (one mutex per set). A set is a static object made
 * with KC_NAMED_COUNTS_INIT; nothing frees it.
 */
#ifndef KC_NAMEDCOUNTS_H
#define KC_NAMEDCOUNTS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define KC_NAMED_COUNTS_COLUMNS 8

struct kc_named_count_row {
  char *name;
  uint64_t n[KC_NAMED_COUNTS_COLUMNS];
};

typedef struct kc_named_counts {
  pthread_mutex_t mu;
  struct kc_named_count_row *rows;
  size_t nrows, caprows;
} kc_named_counts;

#define KC_NAMED_COUNTS_INIT {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0}

/* One more for (name, column); NULL name counts as "". */
void kc_named_counts_add(kc_named_counts *c, const char *name, unsigned column);
/* The count of (name, column); 0 when never counted. */
uint64_t kc_named_counts_get(kc_named_counts *c, const char *name, unsigned column);
/* fn for every non-zero count, under the set's lock (fn must not count). */
void kc_named_counts_each(kc_named_counts *c,
                          void (*fn)(const char *name, unsigned column, uint64_t n, void *ud),
                          void *ud);

#endif
