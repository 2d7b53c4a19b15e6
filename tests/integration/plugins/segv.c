/* SPDX-License-Identifier: Apache-2.0 */
/* Test plugin "segv" (tests/integration/test_crash_report.py): reconciles
 * every key successfully except one named by settings.crashKey, on which it
 * dereferences NULL, as a buggy plugin would. The keys of the other objects
 * keep another worker busy (settings.slowMs) so that the report also names
 * a second, innocent reconcile in progress.
 * Built like an out-of-tree plugin: cc -shared -fPIC -fvisibility=hidden -Iinclude.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kctrld/plugin.h"

static const struct kctrld_host_api *H;

struct segv {
  char crash_key[256];
  long slow_ms;
};

static int segv_init(kctrld_ctx *ctx, const kctrld_settings *settings, void **out) {
  (void)ctx;
  const char *key = NULL;
  if (H->settings_string(settings, "crashKey", &key) != 0 || strlen(key) >= 256) return -EINVAL;
  struct segv *s = H->alloc(sizeof *s);
  if (!s) return -ENOMEM;
  snprintf(s->crash_key, sizeof s->crash_key, "%s", key);
  int64_t slow = 0;
  s->slow_ms = H->settings_int(settings, "slowMs", &slow) == 0 ? (long)slow : 0;
  *out = s;
  return 0;
}

static int segv_reconcile(void *instance, kctrld_ctx *ctx, const char *key) {
  (void)ctx;
  struct segv *s = instance;
  if (strcmp(key, s->crash_key) == 0) {
    struct timespec ts = {0, 200 * 1000000L}; /* let the slow one start first */
    nanosleep(&ts, NULL);
    H->log(KCTRLD_LOG_INFO, "about to crash");
    volatile int *p = NULL;
    *p = 1;
  } else if (s->slow_ms > 0) {
    struct timespec ts = {s->slow_ms / 1000, (s->slow_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
  return KCTRLD_RESULT_DONE;
}

static void segv_fini(void *instance) { H->free(instance); }

static const struct kctrld_plugin plugin = {
    .abi_major = KCTRLD_ABI_MAJOR,
    .abi_minor = KCTRLD_ABI_MINOR,
    .struct_size = sizeof(struct kctrld_plugin),
    .build_signature = KCTRLD_BUILD_SIGNATURE,
    .name = "segv",
    .init = segv_init,
    .reconcile = segv_reconcile,
    .fini = segv_fini,
};

KCTRLD_EXPORT const struct kctrld_plugin *kctrld_plugin_entry(const struct kctrld_host_api *host) {
  H = host;
  return &plugin;
}
