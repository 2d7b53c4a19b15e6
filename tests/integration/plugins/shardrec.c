/* SPDX-License-Identifier: Apache-2.0 */
/* Test plugin "shardrec" (tests/integration/test_sharding.py): records every
 * reconcile so the test can check that no key ran on two replicas at once.
 * For a ConfigMap key it sleeps settings.sleepMs (settings.slowMs when the
 * name starts with settings.writeNames), then, for those names, sets annotation
 * test.kctrld.io/stamp to
 * "<settings.identity>/<tick>" (tick: the object's apisim.kctrld.io/tick
 * annotation) with a merge patch when the cached value differs, and appends
 * one line to settings.log:
 *   <identity> <key> <start ns> <end ns> <write> <tick>
 * (CLOCK_MONOTONIC, the same clock in every process of the machine; write:
 * 1 written, 0 nothing to write, -1 refused or failed). One write(2) with
 * O_APPEND per line, so lines of concurrent processes never interleave.
 * Built like an out-of-tree plugin: cc -shared -fPIC -fvisibility=hidden -Iinclude.
 * Threads: reconcile on workers (the instance is read-only after init),
 * init/fini on the loop.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kctrld/plugin.h"

#define STAMP_PATH "metadata.annotations[\"test.kctrld.io/stamp\"]"
#define TICK_PATH "metadata.annotations[\"apisim.kctrld.io/tick\"]"

static const struct kctrld_host_api *H;

struct rec {
  char identity[128];
  char write_names[128];
  int fd;
  int64_t sleep_ms, slow_ms;
};

static int rec_init(kctrld_ctx *ctx, const kctrld_settings *settings, void **out) {
  (void)ctx;
  const char *id = NULL, *log = NULL, *wn = "";
  int64_t ms = 0;
  if (H->settings_string(settings, "identity", &id) != 0 || !id[0] || strlen(id) >= 128 ||
      strpbrk(id, "\"\\ ") || H->settings_string(settings, "log", &log) != 0) {
    H->log(KCTRLD_LOG_ERROR,
           "settings.identity (no spaces or quotes) and settings.log are required");
    return -EINVAL;
  }
  int rc = H->settings_string(settings, "writeNames", &wn);
  if (rc == -ENOENT)
    wn = "";
  else if (rc != 0 || strlen(wn) >= 128)
    return -EINVAL;
  rc = H->settings_int(settings, "sleepMs", &ms);
  if (rc != 0 && rc != -ENOENT) return -EINVAL;
  int64_t slow = ms;
  rc = H->settings_int(settings, "slowMs", &slow);
  if (rc != 0 && rc != -ENOENT) return -EINVAL;
  struct rec *r = H->alloc(sizeof *r);
  if (!r) return -ENOMEM;
  snprintf(r->identity, sizeof r->identity, "%s", id);
  snprintf(r->write_names, sizeof r->write_names, "%s", wn);
  r->sleep_ms = ms;
  r->slow_ms = slow;
  r->fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (r->fd < 0) {
    int e = errno;
    H->free(r);
    return -e;
  }
  *out = r;
  return 0;
}

static long long mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int rec_reconcile(void *instance, kctrld_ctx *ctx, const char *key) {
  struct rec *r = instance;
  long long start = mono_ns();
  char ns[254] = "", name[254], tick[64] = "-", have[256] = "", want[256], patch[512];
  const char *slash = strchr(key, '/');
  if (!slash || (size_t)(slash - key) >= sizeof ns || strlen(slash + 1) >= sizeof name)
    return H->result_error(ctx, "unexpected key %s", key);
  memcpy(ns, key, (size_t)(slash - key));
  ns[slash - key] = '\0';
  strcpy(name, slash + 1);
  bool writer = r->write_names[0] && strncmp(name, r->write_names, strlen(r->write_names)) == 0;
  kctrld_ref ref = {"v1", "ConfigMap", ns, name};
  const kctrld_object *obj = NULL;
  int wrote = 0;
  bool must_write = false;
  int rc = H->cache_get(ctx, &ref, &obj);
  if (rc == 0) {
    if (H->object_string(obj, TICK_PATH, tick, sizeof tick) < 0 || strpbrk(tick, " \"\\\n"))
      snprintf(tick, sizeof tick, "-");
    if (H->object_string(obj, STAMP_PATH, have, sizeof have) < 0) have[0] = '\0';
    H->object_release(obj);
    snprintf(want, sizeof want, "%s/%s", r->identity, tick);
    must_write = writer && strcmp(have, want) != 0;
  }
  /* the slow part (think: a cloud API call) comes before the write */
  int64_t ms = must_write ? r->slow_ms : r->sleep_ms;
  if (ms > 0) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
  }
  if (must_write) {
    int n = snprintf(patch, sizeof patch,
                     "{\"metadata\":{\"annotations\":{\"test.kctrld.io/stamp\":\"%s\"}}}", want);
    rc = H->api_patch(ctx, &ref, KCTRLD_PATCH_MERGE, patch, (size_t)n, false, NULL);
    wrote = rc == 0 ? 1 : -1;
  }
  char line[768];
  int n = snprintf(line, sizeof line, "%s %s %lld %lld %d %s\n", r->identity, key, start, mono_ns(),
                   wrote, tick);
  if (n > 0 && (size_t)n < sizeof line && write(r->fd, line, (size_t)n) != n)
    H->log(KCTRLD_LOG_ERROR, "cannot append to the reconcile log");
  return KCTRLD_RESULT_DONE;
}

static void rec_fini(void *instance) {
  struct rec *r = instance;
  close(r->fd);
  H->free(r);
}

static const struct kctrld_plugin rec = {
    .abi_major = KCTRLD_ABI_MAJOR,
    .abi_minor = KCTRLD_ABI_MINOR,
    .struct_size = sizeof(struct kctrld_plugin),
    .build_signature = KCTRLD_BUILD_SIGNATURE,
    .name = "shardrec",
    .init = rec_init,
    .reconcile = rec_reconcile,
    .fini = rec_fini,
};

KCTRLD_EXPORT const struct kctrld_plugin *kctrld_plugin_entry(const struct kctrld_host_api *h) {
  H = h;
  return &rec;
}
