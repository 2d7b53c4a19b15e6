/* SPDX-License-Identifier: Apache-2.0 */
/* Benchmark plugin "noop": reads the ConfigMap from the cache and does
 * nothing else (the cheapest reconcile a real controller can have). Counts
 * reconciles and remembers the first and last reconcile time (CLOCK_MONOTONIC)
 * so the benchmark can compute reconciles/s without scraping granularity;
 * writes "count first_ns last_ns" to settings.statsFile at fini.
 * settings.kind: "ConfigMap" (default) or "Pod". settings.syncFile: at
 * the first reconcile (controllers start once their informers synced, so
 * this is the end of the initial sync) the plugin writes
 * "SYNCED <unix_seconds>\n" to that file, for tests/bench/compare.py.
 * Threads: reconcile on workers (atomics only), init/fini on the loop.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* clock_gettime, nanosleep under -std=c11 too */
#endif
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_plugin.h"

static const struct kctrld_host_api *H;

struct noop {
  const char *kind;
  char stats_file[4096];
  char sync_file[4096];
  atomic_llong count;
  atomic_llong first_ns;
  atomic_llong last_ns;
};

static int noop_init(kctrld_ctx *ctx, const kctrld_settings *settings, void **out) {
  (void)ctx;
  struct noop *n = H->alloc(sizeof *n);
  if (!n) return -ENOMEM;
  memset(n, 0, sizeof *n);
  const char *path = NULL;
  if (H->settings_string(settings, "statsFile", &path) == 0)
    snprintf(n->stats_file, sizeof n->stats_file, "%s", path);
  if (H->settings_string(settings, "syncFile", &path) == 0)
    snprintf(n->sync_file, sizeof n->sync_file, "%s", path);
  n->kind = bench_kind(H, settings);
  if (!n->kind) {
    H->log(KCTRLD_LOG_ERROR, "settings.kind must be ConfigMap or Pod");
    H->free(n);
    return -EINVAL;
  }
  atomic_init(&n->count, 0);
  atomic_init(&n->first_ns, 0);
  atomic_init(&n->last_ns, 0);
  *out = n;
  return 0;
}

static int noop_reconcile(void *instance, kctrld_ctx *ctx, const char *key) {
  struct noop *n = instance;
  char ns[254], name[254];
  kctrld_ref ref;
  if (bench_core_ref(key, n->kind, ns, name, &ref) == 0) {
    const kctrld_object *obj = NULL;
    if (H->cache_get(ctx, &ref, &obj) == 0) H->object_release(obj);
  }
  long long now = bench_now_ns(CLOCK_MONOTONIC), zero = 0;
  if (atomic_compare_exchange_strong(&n->first_ns, &zero, now) && n->sync_file[0]) {
    /* Once (the CAS succeeds for one reconcile): written to a temporary
     * name and renamed, so a reader never sees a partial line. */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", n->sync_file);
    FILE *f = fopen(tmp, "w");
    if (!f) {
      H->log(KCTRLD_LOG_ERROR, "cannot open %s: %s", tmp, strerror(errno));
    } else {
      fprintf(f, "SYNCED %.6f\n", (double)bench_now_ns(CLOCK_REALTIME) / 1e9);
      if (fclose(f) != 0 || rename(tmp, n->sync_file) != 0)
        H->log(KCTRLD_LOG_ERROR, "cannot write %s: %s", n->sync_file, strerror(errno));
    }
  }
  long long last = atomic_load(&n->last_ns);
  while (last < now && !atomic_compare_exchange_weak(&n->last_ns, &last, now)) {
  }
  atomic_fetch_add(&n->count, 1);
  return KCTRLD_RESULT_DONE;
}

static void noop_fini(void *instance) {
  struct noop *n = instance;
  if (n->stats_file[0]) {
    FILE *f = fopen(n->stats_file, "w");
    if (f) {
      fprintf(f, "%lld %lld %lld\n", (long long)atomic_load(&n->count),
              (long long)atomic_load(&n->first_ns), (long long)atomic_load(&n->last_ns));
      if (fclose(f) != 0) H->log(KCTRLD_LOG_ERROR, "cannot write %s", n->stats_file);
    } else {
      H->log(KCTRLD_LOG_ERROR, "cannot open %s: %s", n->stats_file, strerror(errno));
    }
  }
  H->free(n);
}

static const struct kctrld_plugin noop = {
    .abi_major = KCTRLD_ABI_MAJOR,
    .abi_minor = KCTRLD_ABI_MINOR,
    .struct_size = sizeof(struct kctrld_plugin),
    .build_signature = KCTRLD_BUILD_SIGNATURE,
    .name = "bench-noop",
    .init = noop_init,
    .reconcile = noop_reconcile,
    .fini = noop_fini,
};

KCTRLD_EXPORT const struct kctrld_plugin *kctrld_plugin_entry(const struct kctrld_host_api *h) {
  H = h;
  return &noop;
}
