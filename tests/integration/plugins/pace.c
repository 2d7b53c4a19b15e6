/* SPDX-License-Identifier: Apache-2.0 */
/* Test plugin "pace" (tests/integration/test_priority_queue.py): a slow
 * reconcile that says how far the controller got. Each reconcile sleeps
 * settings.sleepMs (default 10) milliseconds, then logs
 * "paced n=N" (the daemon adds key=...), N counting this instance's
 * reconciles from 1, so the log shows how many keys ran before a given one.
 * Built like an out-of-tree plugin: cc -shared -fPIC -fvisibility=hidden -Iinclude.
 * Threads: reconcile on workers (the count is atomic), init/fini on the loop.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* nanosleep under -std=c11 too */
#endif
#include <errno.h>
#include <stdatomic.h>
#include <time.h>

#include "kctrld/plugin.h"

static const struct kctrld_host_api *H;

struct pace {
  int64_t sleep_ms;
  atomic_long n;
};

static int pace_init(kctrld_ctx *ctx, const kctrld_settings *settings, void **out) {
  (void)ctx;
  struct pace *p = H->alloc(sizeof *p);
  if (!p) return -ENOMEM;
  p->sleep_ms = 10;
  atomic_init(&p->n, 0);
  int rc = H->settings_int(settings, "sleepMs", &p->sleep_ms);
  if ((rc < 0 && rc != -ENOENT) || p->sleep_ms < 0 || p->sleep_ms > 10000) {
    H->log(KCTRLD_LOG_ERROR, "settings.sleepMs must be 0..10000");
    H->free(p);
    return -EINVAL;
  }
  *out = p;
  return 0;
}

static int pace_reconcile(void *instance, kctrld_ctx *ctx, const char *key) {
  (void)ctx;
  (void)key;
  struct pace *p = instance;
  struct timespec ts = {(time_t)(p->sleep_ms / 1000), (long)(p->sleep_ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  H->log(KCTRLD_LOG_INFO, "paced n=%ld", atomic_fetch_add(&p->n, 1) + 1);
  return KCTRLD_RESULT_DONE;
}

static void pace_fini(void *instance) { H->free(instance); }

static const struct kctrld_plugin pace = {
    .abi_major = KCTRLD_ABI_MAJOR,
    .abi_minor = KCTRLD_ABI_MINOR,
    .struct_size = sizeof(struct kctrld_plugin),
    .build_signature = KCTRLD_BUILD_SIGNATURE,
    .name = "pace",
    .init = pace_init,
    .reconcile = pace_reconcile,
    .fini = pace_fini,
};

KCTRLD_EXPORT const struct kctrld_plugin *kctrld_plugin_entry(const struct kctrld_host_api *h) {
  H = h;
  return &pace;
}
