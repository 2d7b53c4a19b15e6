/* SPDX-License-Identifier: Apache-2.0 */
/* Test plugin "failkey" (tests/integration/test_ctl.py): a ConfigMap whose
 * name starts with "fail-" fails every reconcile with an error naming it;
 * any other gets annotation test.kctrld.io/seen = its data.seq (a merge
 * patch, only when it differs), and every reconcile of it logs
 * "reconciled key=KEY seq=SEQ", so a test counts reconciles in the log.
 * Built like an out-of-tree plugin: cc -shared -fPIC -fvisibility=hidden -Iinclude.
 * Threads: reconcile on workers (no instance state).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kctrld/plugin.h"

#define SEEN_PATH "metadata.annotations[\"test.kctrld.io/seen\"]"

static const struct kctrld_host_api *H;

static int failkey_init(kctrld_ctx *ctx, const kctrld_settings *settings, void **out) {
  (void)ctx;
  (void)settings;
  *out = NULL;
  return 0;
}

static int failkey_reconcile(void *instance, kctrld_ctx *ctx, const char *key) {
  (void)instance;
  char ns[254] = "", name[254], seq[64] = "", have[64] = "", patch[256];
  const char *slash = strchr(key, '/');
  if (!slash || (size_t)(slash - key) >= sizeof ns || strlen(slash + 1) >= sizeof name)
    return H->result_error(ctx, "unexpected key %s", key);
  memcpy(ns, key, (size_t)(slash - key));
  ns[slash - key] = '\0';
  strcpy(name, slash + 1);
  if (strncmp(name, "fail-", 5) == 0)
    return H->result_error(ctx, "refusing %s: its name starts with fail-", key);
  kctrld_ref ref = {"v1", "ConfigMap", ns, name};
  const kctrld_object *obj = NULL;
  int rc = H->cache_get(ctx, &ref, &obj);
  if (rc == -ENOENT) return KCTRLD_RESULT_DONE;
  if (rc < 0) return H->result_error(ctx, "cache_get %s: %d", key, rc);
  if (H->object_string(obj, "data.seq", seq, sizeof seq) < 0 || strpbrk(seq, "\"\\")) seq[0] = '\0';
  if (H->object_string(obj, SEEN_PATH, have, sizeof have) < 0) have[0] = '\0';
  H->object_release(obj);
  H->log(KCTRLD_LOG_INFO, "reconciled key=%s seq=%s", key, seq);
  if (strcmp(have, seq) == 0) return KCTRLD_RESULT_DONE;
  int n = snprintf(patch, sizeof patch,
                   "{\"metadata\":{\"annotations\":{\"test.kctrld.io/seen\":\"%s\"}}}", seq);
  rc = H->api_patch(ctx, &ref, KCTRLD_PATCH_MERGE, patch, (size_t)n, false, NULL);
  if (rc == -ESTALE || rc == -EAGAIN) return KCTRLD_RESULT_REQUEUE;
  if (rc < 0) return H->result_error(ctx, "patch %s: %d %s", key, rc, H->ctx_api_error(ctx));
  return KCTRLD_RESULT_DONE;
}

static const struct kctrld_plugin failkey = {
    .abi_major = KCTRLD_ABI_MAJOR,
    .abi_minor = KCTRLD_ABI_MINOR,
    .struct_size = sizeof(struct kctrld_plugin),
    .build_signature = KCTRLD_BUILD_SIGNATURE,
    .name = "failkey",
    .init = failkey_init,
    .reconcile = failkey_reconcile,
};

KCTRLD_EXPORT const struct kctrld_plugin *kctrld_plugin_entry(const struct kctrld_host_api *h) {
  H = h;
  return &failkey;
}
