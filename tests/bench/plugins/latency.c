/* SPDX-License-Identifier: Apache-2.0 */
/* Benchmark plugin "latency": event-to-reconcile latency. The benchmark
 * patches annotation bench.kctrld.io/sent with the send time (CLOCK_REALTIME
 * nanoseconds, taken just before the PATCH is sent); each reconcile reads it
 * from the cache and records (sent, now - sent). Samples go to a preallocated
 * array (settings.maxSamples, default 200000; no allocation per reconcile)
 * and are written to settings.samplesFile at fini, one "sent_ns latency_ns"
 * line each. Reconciles of objects without the annotation are not recorded.
 * settings.kind: "ConfigMap" (default) or "Pod", the kind reconciled.
 * Threads: reconcile on workers (an atomic slot index), init/fini on the loop.
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

#define SENT_PATH "metadata.annotations[\"bench.kctrld.io/sent\"]"

static const struct kctrld_host_api *H;

struct sample {
  int64_t sent_ns;
  int64_t latency_ns;
};

struct latency {
  const char *kind;
  char samples_file[4096];
  size_t cap;
  atomic_size_t n;
  struct sample *samples;
};

static int latency_init(kctrld_ctx *ctx, const kctrld_settings *settings, void **out) {
  (void)ctx;
  struct latency *l = H->alloc(sizeof *l);
  if (!l) return -ENOMEM;
  memset(l, 0, sizeof *l);
  const char *path = NULL;
  if (H->settings_string(settings, "samplesFile", &path) != 0) {
    H->log(KCTRLD_LOG_ERROR, "settings.samplesFile is required");
    H->free(l);
    return -EINVAL;
  }
  snprintf(l->samples_file, sizeof l->samples_file, "%s", path);
  l->kind = bench_kind(H, settings);
  if (!l->kind) {
    H->log(KCTRLD_LOG_ERROR, "settings.kind must be ConfigMap or Pod");
    H->free(l);
    return -EINVAL;
  }
  int64_t cap = 200000;
  int rc = H->settings_int(settings, "maxSamples", &cap);
  if ((rc < 0 && rc != -ENOENT) || cap <= 0 || cap > 100000000) {
    H->log(KCTRLD_LOG_ERROR, "settings.maxSamples must be 1..100000000");
    H->free(l);
    return -EINVAL;
  }
  l->cap = (size_t)cap;
  l->samples = H->alloc(l->cap * sizeof *l->samples);
  if (!l->samples) {
    H->free(l);
    return -ENOMEM;
  }
  atomic_init(&l->n, 0);
  *out = l;
  return 0;
}

static int latency_reconcile(void *instance, kctrld_ctx *ctx, const char *key) {
  struct latency *l = instance;
  char ns[254], name[254], buf[32];
  kctrld_ref ref;
  if (bench_core_ref(key, l->kind, ns, name, &ref) != 0) return KCTRLD_RESULT_DONE;
  const kctrld_object *obj = NULL;
  if (H->cache_get(ctx, &ref, &obj) != 0) return KCTRLD_RESULT_DONE;
  int len = H->object_string(obj, SENT_PATH, buf, sizeof buf);
  H->object_release(obj);
  if (len <= 0) return KCTRLD_RESULT_DONE;
  int64_t now = bench_now_ns(CLOCK_REALTIME);
  char *end;
  long long sent = strtoll(buf, &end, 10);
  if (*end != '\0') return KCTRLD_RESULT_DONE;
  size_t i = atomic_fetch_add(&l->n, 1);
  if (i < l->cap) {
    l->samples[i].sent_ns = sent;
    l->samples[i].latency_ns = now - sent;
  }
  return KCTRLD_RESULT_DONE;
}

static void latency_fini(void *instance) {
  struct latency *l = instance;
  size_t n = atomic_load(&l->n);
  if (n > l->cap) {
    H->log(KCTRLD_LOG_WARN, "samples dropped=%zu cap=%zu", n - l->cap, l->cap);
    n = l->cap;
  }
  FILE *f = fopen(l->samples_file, "w");
  if (!f) {
    H->log(KCTRLD_LOG_ERROR, "cannot open %s: %s", l->samples_file, strerror(errno));
  } else {
    for (size_t i = 0; i < n; i++)
      fprintf(f, "%lld %lld\n", (long long)l->samples[i].sent_ns, (long long)l->samples[i].latency_ns);
    if (fclose(f) != 0) H->log(KCTRLD_LOG_ERROR, "cannot write %s", l->samples_file);
  }
  H->free(l->samples);
  H->free(l);
}

static const struct kctrld_plugin latency = {
    .abi_major = KCTRLD_ABI_MAJOR,
    .abi_minor = KCTRLD_ABI_MINOR,
    .struct_size = sizeof(struct kctrld_plugin),
    .build_signature = KCTRLD_BUILD_SIGNATURE,
    .name = "bench-latency",
    .init = latency_init,
    .reconcile = latency_reconcile,
    .fini = latency_fini,
};

KCTRLD_EXPORT const struct kctrld_plugin *kctrld_plugin_entry(const struct kctrld_host_api *h) {
  H = h;
  return &latency;
}
