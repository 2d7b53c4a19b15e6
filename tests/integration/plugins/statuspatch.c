/* SPDX-License-Identifier: Apache-2.0 */
/* Test plugin "statuspatch" (tests/integration/test_terminal_errors.py): the
 * mistake a new plugin author makes, next to a correct write. For a ConfigMap
 * whose name starts with "status-" it merge-patches the status subresource,
 * which ConfigMaps do not have, and returns an ordinary error with the
 * return code, as a plugin that does not know better does; the daemon turns
 * it into a terminal error. Every other ConfigMap gets annotation
 * test.kctrld.io/seen set to its data.seq (a write only when it differs).
 * Built like an out-of-tree plugin: cc -shared -fPIC -fvisibility=hidden -Iinclude.
 * Threads: reconcile on workers (no instance state), init on the loop.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kctrld/plugin.h"

#define SEEN_PATH "metadata.annotations[\"test.kctrld.io/seen\"]"

static const struct kctrld_host_api *H;

static int statuspatch_init(kctrld_ctx *ctx, const kctrld_settings *settings, void **out) {
  (void)ctx, (void)settings;
  *out = NULL;
  return 0;
}

static int statuspatch_reconcile(void *instance, kctrld_ctx *ctx, const char *key) {
  (void)instance;
  char ns[254], name[254], seq[64] = "", have[64] = "", patch[256];
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
  if (strncmp(name, "status-", 7) == 0) {
    H->object_release(obj);
    static const char status[] = "{\"status\":{\"seen\":true}}";
    rc = H->api_patch(ctx, &ref, KCTRLD_PATCH_MERGE, status, sizeof status - 1, true, NULL);
    return rc < 0 ? H->result_error(ctx, "patch %s: %d", key, rc) : KCTRLD_RESULT_DONE;
  }
  H->object_string(obj, "data.seq", seq, sizeof seq);
  H->object_string(obj, SEEN_PATH, have, sizeof have);
  H->object_release(obj);
  if (strpbrk(seq, "\"\\")) seq[0] = '\0';
  if (strcmp(have, seq) == 0) return KCTRLD_RESULT_DONE;
  int n = snprintf(patch, sizeof patch,
                   "{\"metadata\":{\"annotations\":{\"test.kctrld.io/seen\":\"%s\"}}}", seq);
  rc = H->api_patch(ctx, &ref, KCTRLD_PATCH_MERGE, patch, (size_t)n, false, NULL);
  if (rc == -ESTALE || rc == -EAGAIN) return KCTRLD_RESULT_REQUEUE;
  return rc < 0 ? H->result_error(ctx, "patch %s: %d", key, rc) : KCTRLD_RESULT_DONE;
}

static const kctrld_permission statuspatch_permissions[] = {
    {"", KCTRLD_RESOURCE_FOR, "patch"},
    KCTRLD_PERMISSIONS_END,
};

static const struct kctrld_plugin table = {
    .abi_major = KCTRLD_ABI_MAJOR,
    .abi_minor = KCTRLD_ABI_MINOR,
    .struct_size = sizeof(struct kctrld_plugin),
    .build_signature = KCTRLD_BUILD_SIGNATURE,
    .name = "statuspatch",
    .version = "1.0.0",
    .init = statuspatch_init,
    .reconcile = statuspatch_reconcile,
    .permissions = statuspatch_permissions,
};

KCTRLD_EXPORT const struct kctrld_plugin *kctrld_plugin_entry(const struct kctrld_host_api *host) {
  if (host->abi_major != KCTRLD_ABI_MAJOR) return NULL;
  H = host;
  return &table;
}
