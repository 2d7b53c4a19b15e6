/* SPDX-License-Identifier: Apache-2.0 */
/* Test plugin "stamp" (tests/integration/test_single_reconciler.py): makes
 * every write attributable to the process that made it. For a ConfigMap key
 * it sets annotation test.kctrld.io/stamp to "<settings.identity>/<data.seq>"
 * with a merge patch when the cached value differs, so a reconcile writes
 * exactly once per change of data.seq (or of the writer), and the object's
 * history shows which replica reconciled it.
 * -DSTAMP_SUFFIX=\"@v2\" appends that to every stamp (test_plugin_rebuild.py:
 * which build of the file runs).
 * Built like an out-of-tree plugin: cc -shared -fPIC -fvisibility=hidden -Iinclude.
 * Threads: reconcile on workers (instance is read-only after init), init/fini
 * on the loop.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kctrld/plugin.h"

#ifndef STAMP_SUFFIX
#define STAMP_SUFFIX ""
#endif

#define STAMP_PATH "metadata.annotations[\"test.kctrld.io/stamp\"]"

static const struct kctrld_host_api *H;

struct stamp {
  char identity[128];
};

static int stamp_init(kctrld_ctx *ctx, const kctrld_settings *settings, void **out) {
  (void)ctx;
  const char *id = NULL;
  if (H->settings_string(settings, "identity", &id) != 0 || !id[0] || strlen(id) >= 128 ||
      strpbrk(id, "\"\\")) {
    H->log(KCTRLD_LOG_ERROR, "settings.identity is required (1..127 bytes, no quotes)");
    return -EINVAL;
  }
  struct stamp *s = H->alloc(sizeof *s);
  if (!s) return -ENOMEM;
  snprintf(s->identity, sizeof s->identity, "%s", id);
  *out = s;
  return 0;
}

static int stamp_reconcile(void *instance, kctrld_ctx *ctx, const char *key) {
  struct stamp *s = instance;
  char ns[254] = "", name[254], seq[64] = "", have[256] = "", want[256], patch[512];
  const char *slash = strchr(key, '/');
  if (!slash || (size_t)(slash - key) >= sizeof ns || strlen(slash + 1) >= sizeof name)
    return H->result_error(ctx, "unexpected key %s", key);
  memcpy(ns, key, (size_t)(slash - key));
  ns[slash - key] = '\0';
  strcpy(name, slash + 1);
  kctrld_ref ref = {"v1", "ConfigMap", ns, name};
  const kctrld_object *obj = NULL;
  int rc = H->cache_get(ctx, &ref, &obj);
  if (rc == -ENOENT) return KCTRLD_RESULT_DONE;
  if (rc < 0) return H->result_error(ctx, "cache_get %s: %d", key, rc);
  rc = H->object_string(obj, "data.seq", seq, sizeof seq);
  if (rc < 0 && rc != -ENOENT) {
    H->object_release(obj);
    return H->result_error(ctx, "data.seq of %s: %d", key, rc);
  }
  if (strpbrk(seq, "\"\\")) seq[0] = '\0';
  rc = H->object_string(obj, STAMP_PATH, have, sizeof have);
  H->object_release(obj);
  if (rc < 0 && rc != -ENOENT) have[0] = '\0';
  snprintf(want, sizeof want, "%s/%s" STAMP_SUFFIX, s->identity, seq);
  if (strcmp(have, want) == 0) return KCTRLD_RESULT_DONE;
  int n = snprintf(patch, sizeof patch, "{\"metadata\":{\"annotations\":{\"test.kctrld.io/stamp\":\"%s\"}}}",
                   want);
  rc = H->api_patch(ctx, &ref, KCTRLD_PATCH_MERGE, patch, (size_t)n, false, NULL);
  if (rc == -ESTALE || rc == -EAGAIN) return KCTRLD_RESULT_REQUEUE;
  if (rc < 0) return H->result_error(ctx, "patch %s: %d %s", key, rc, H->ctx_api_error(ctx));
  H->log(KCTRLD_LOG_INFO, "stamped key=%s stamp=%s", key, want);
  return KCTRLD_RESULT_DONE;
}

static void stamp_fini(void *instance) { H->free(instance); }

static const struct kctrld_plugin stamp = {
    .abi_major = KCTRLD_ABI_MAJOR,
    .abi_minor = KCTRLD_ABI_MINOR,
    .struct_size = sizeof(struct kctrld_plugin),
    .build_signature = KCTRLD_BUILD_SIGNATURE,
    .name = "stamp",
    .init = stamp_init,
    .reconcile = stamp_reconcile,
    .fini = stamp_fini,
};

KCTRLD_EXPORT const struct kctrld_plugin *kctrld_plugin_entry(const struct kctrld_host_api *h) {
  H = h;
  return &stamp;
}
