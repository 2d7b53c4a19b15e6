/* SPDX-License-Identifier: Apache-2.0 */
/* Benchmark plugin "sleep": a slow controller. Each reconcile reads the
 * ConfigMap from the cache and then sleeps settings.sleepMs (default 100)
 * milliseconds, like a plugin waiting on an external system. Used to show
 * that memory stays bounded by keys while events arrive much faster than
 * keys are processed. settings.kind: "ConfigMap" (default) or "Pod".
 * Threads: reconcile on workers (no shared state), init/fini on the loop.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* clock_gettime, nanosleep under -std=c11 too */
#endif
#include <errno.h>
#include <string.h>
#include <time.h>

#include "bench_plugin.h"

static const struct kctrld_host_api *H;

struct slow {
  const char *kind;
  int64_t sleep_ms;
};

static int sleep_init(kctrld_ctx *ctx, const kctrld_settings *settings, void **out) {
  (void)ctx;
  struct slow *s = H->alloc(sizeof *s);
  if (!s) return -ENOMEM;
  s->sleep_ms = 100;
  s->kind = bench_kind(H, settings);
  if (!s->kind) {
    H->log(KCTRLD_LOG_ERROR, "settings.kind must be ConfigMap or Pod");
    H->free(s);
    return -EINVAL;
  }
  int rc = H->settings_int(settings, "sleepMs", &s->sleep_ms);
  if ((rc < 0 && rc != -ENOENT) || s->sleep_ms < 0 || s->sleep_ms > 60000) {
    H->log(KCTRLD_LOG_ERROR, "settings.sleepMs must be 0..60000");
    H->free(s);
    return -EINVAL;
  }
  *out = s;
  return 0;
}

static int sleep_reconcile(void *instance, kctrld_ctx *ctx, const char *key) {
  struct slow *s = instance;
  char ns[254], name[254];
  kctrld_ref ref;
  if (bench_core_ref(key, s->kind, ns, name, &ref) == 0) {
    const kctrld_object *obj = NULL;
    if (H->cache_get(ctx, &ref, &obj) == 0) H->object_release(obj);
  }
  struct timespec ts = {(time_t)(s->sleep_ms / 1000), (long)(s->sleep_ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  return KCTRLD_RESULT_DONE;
}

static void sleep_fini(void *instance) { H->free(instance); }

static const struct kctrld_plugin slow = {
    .abi_major = KCTRLD_ABI_MAJOR,
    .abi_minor = KCTRLD_ABI_MINOR,
    .struct_size = sizeof(struct kctrld_plugin),
    .build_signature = KCTRLD_BUILD_SIGNATURE,
    .name = "bench-sleep",
    .init = sleep_init,
    .reconcile = sleep_reconcile,
    .fini = sleep_fini,
};

KCTRLD_EXPORT const struct kctrld_plugin *kctrld_plugin_entry(const struct kctrld_host_api *h) {
  H = h;
  return &slow;
}
