/* SPDX-License-Identifier: Apache-2.0 */
/* bench_workqueue: adds/s with deduplication, and memory of 10k keys under
 * 1M adds (must stay flat: bounded by keys, not by events). Then a burst of
 * 100k and 1M distinct keys (an initial sync's adds, then every key got and
 * done): the longest single add and Done, which hold the loop that long
 * (the table's growth, the sweep of idle records, the trim after the drain),
 * with the allocator set up as daemon/main.c does (memtrim.h). Last, the
 * mean cost of one add, one Get and one Done over such bursts (every key
 * added, then every key got, then every key done), the loop time a
 * controller's queue costs per key: every key at normal priority, then the
 * keys spread round robin over the three levels.
 *
 *   build/bench/bench_workqueue [adds] [keys]
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "base/memtrim.h"
#include "runtime/workqueue.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (!f) return -1;
  if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
  fclose(f);
  return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* One burst of n distinct keys: the longest add and Done, in ms. */
static int burst(long n, double *add_ms, double *done_ms) {
  kc_workqueue *wq = kc_workqueue_new("burst", NULL);
  if (!wq) return -1;
  char key[64];
  *add_ms = *done_ms = 0;
  for (long i = 0; i < n; i++) {
    snprintf(key, sizeof key, "namespace-%03ld/object-name-%07ld", i % 100, i);
    double t = now_s();
    if (kc_workqueue_add(wq, key) != 0) return -1;
    t = (now_s() - t) * 1e3;
    if (t > *add_ms) *add_ms = t;
  }
  const char *k;
  while (kc_workqueue_get(wq, &k) == KC_WQ_KEY) {
    snprintf(key, sizeof key, "%s", k);
    double t = now_s();
    kc_workqueue_done(wq, key);
    t = (now_s() - t) * 1e3;
    if (t > *done_ms) *done_ms = t;
  }
  kc_workqueue_free(wq);
  return 0;
}

/* Mean ns of one add, Get and Done over a burst of n distinct keys; the
 * best of `rounds` runs (the least disturbed by other load). mixed: the keys
 * go round the three priority levels instead of all at normal. */
static int mean_costs(long n, int rounds, bool mixed, double *add_ns, double *get_ns,
                      double *done_ns) {
  char (*keys)[64] = malloc((size_t)n * sizeof *keys);
  const char **got = malloc((size_t)n * sizeof *got);
  if (!keys || !got) return -1;
  for (long i = 0; i < n; i++)
    snprintf(keys[i], sizeof keys[i], "namespace-%03ld/object-name-%07ld", i % 100, i);
  *add_ns = *get_ns = *done_ns = 1e30;
  for (int r = 0; r < rounds; r++) {
    kc_workqueue *wq = kc_workqueue_new("mean", NULL);
    if (!wq) return -1;
    double t0 = now_s();
    for (long i = 0; i < n; i++)
      if (kc_workqueue_add_at(wq, keys[i], mixed ? (int)(i % KC_WQ_LEVELS) : KC_WQ_NORMAL) != 0)
        return -1;
    double t1 = now_s();
    long ngot = 0;
    while (ngot < n && kc_workqueue_get(wq, &got[ngot]) == KC_WQ_KEY) ngot++;
    double t2 = now_s();
    if (ngot != n) return -1;
    /* Done with the caller's copy of the key, as the controller does
     * (workers.c copies it), in the order Get handed the keys out. */
    for (long i = 0; i < n; i++) {
      snprintf(keys[i], sizeof keys[i], "%s", got[i]);
      got[i] = keys[i];
    }
    double t2b = now_s();
    for (long i = 0; i < n; i++) kc_workqueue_done(wq, got[i]);
    double t3 = now_s();
    if ((t1 - t0) * 1e9 / n < *add_ns) *add_ns = (t1 - t0) * 1e9 / n;
    if ((t2 - t1) * 1e9 / n < *get_ns) *get_ns = (t2 - t1) * 1e9 / n;
    if ((t3 - t2b) * 1e9 / n < *done_ns) *done_ns = (t3 - t2b) * 1e9 / n;
    kc_workqueue_free(wq);
  }
  free(keys);
  free(got);
  return 0;
}

int main(int argc, char **argv) {
  kc_mem_init(getenv("GLIBC_TUNABLES")); /* as daemon/main.c does */
  long adds = argc > 1 ? atol(argv[1]) : 1000000;
  long nkeys = argc > 2 ? atol(argv[2]) : 10000;
  if (adds <= 0 || nkeys <= 0) return 2;
  char (*keys)[64] = malloc((size_t)nkeys * sizeof *keys);
  if (!keys) return 1;
  for (long i = 0; i < nkeys; i++)
    snprintf(keys[i], sizeof keys[i], "namespace-%03ld/object-name-%06ld", i % 100, i);

  /* 1. Pure dedup: nobody consumes, every add after the first per key is a no-op. */
  kc_workqueue *wq = kc_workqueue_new("bench", NULL);
  if (!wq) return 1;
  double t0 = now_s();
  for (long i = 0; i < adds; i++) kc_workqueue_add(wq, keys[(i * 7919) % nkeys]);
  double dedup_s = now_s() - t0;
  printf("%-34s %12s %12s\n", "scenario", "adds/s", "ns/add");
  printf("%-34s %12.0f %12.1f\n", "add, 10k keys, no consumer", adds / dedup_s, dedup_s * 1e9 / adds);
  kc_workqueue_free(wq);

  /* 2. Producer + consumer: after every 10 adds one Get/Done (a worker
   * slower than events), the shape of a busy controller. */
  wq = kc_workqueue_new("bench", NULL);
  if (!wq) return 1;
  long rss0 = rss_kib();
  printf("\n%-12s %10s %10s %12s %10s %10s\n", "adds", "keys", "queued", "queue bytes", "RSS KiB",
         "dRSS KiB");
  t0 = now_s();
  long gets = 0;
  for (long i = 1; i <= adds; i++) {
    kc_workqueue_add(wq, keys[(i * 7919) % nkeys]);
    if (i % 10 == 0) {
      const char *k;
      if (kc_workqueue_get(wq, &k) == KC_WQ_KEY) {
        if (gets % 100 == 0) kc_workqueue_add_rate_limited(wq, k); /* some failures */
        kc_workqueue_done(wq, k);
        gets++;
      }
      if (gets % 1000 == 0) kc_workqueue_tick(wq);
    }
    if (i % (adds / 10) == 0) {
      long rss = rss_kib();
      printf("%-12ld %10zu %10zu %12zu %10ld %10ld\n", i, kc_workqueue_keys(wq), kc_workqueue_len(wq),
             kc_workqueue_mem_bytes(wq), rss, rss - rss0);
    }
  }
  double mixed_s = now_s() - t0;
  const kc_wq_metrics *m = kc_workqueue_metrics(wq);
  printf("\nadd+get/done mix: %.0f ops/s (%ld adds, %ld gets; adds_total=%llu deduped=%llu "
         "retries=%llu)\n",
         (adds + 2.0 * gets) / mixed_s, adds, gets, (unsigned long long)m->adds_total,
         (unsigned long long)m->deduped_total, (unsigned long long)m->retries_total);
  printf("bytes per key: %.1f\n", (double)kc_workqueue_mem_bytes(wq) / (double)kc_workqueue_keys(wq));
  kc_workqueue_free(wq);
  free(keys);

  /* 3. Bursts of distinct keys. */
  printf("\n%-10s %14s %14s\n", "burst keys", "max add ms", "max done ms");
  for (long n = 100000; n <= 1000000; n *= 10) {
    double a, d;
    if (burst(n, &a, &d) != 0) return 1;
    printf("%-10ld %14.2f %14.2f\n", n, a, d);
  }

  /* 4. Mean cost per call: every key at normal priority, then the keys
   * spread over the three levels. */
  printf("\n%-10s %-8s %10s %10s %10s\n", "keys", "levels", "add ns", "get ns", "done ns");
  for (int mixed = 0; mixed <= 1; mixed++)
    for (long n = 100000; n <= 1000000; n *= 10) {
      double a, g, d;
      if (mean_costs(n, n > 100000 ? 3 : 5, mixed, &a, &g, &d) != 0) return 1;
      printf("%-10ld %-8s %10.1f %10.1f %10.1f\n", n, mixed ? "3" : "1", a, g, d);
    }
  return 0;
}
