/* SPDX-License-Identifier: Apache-2.0 */
/* Test plugin "nsowner" (tests/integration/test_owner_scope.py): a
 * controller `for: Namespace` that `owns: ConfigMap`, the case of a
 * cluster-scoped owner with namespaced children. For a Namespace labelled
 * test.kctrld.io/nsowner=yes (key: its name) it keeps a ConfigMap "owned"
 * in that namespace with a controller ownerReference to the Namespace. It
 * creates one only when the key's expectations are satisfied, and sets them
 * (one creation) before the create, as kube's controllers do, so that an
 * event that wakes the key before the new child reached the cache makes no
 * second create. Every decision is logged ("created", "waiting", "present",
 * "owner gone"; the daemon adds the key), so the test can count them.
 * Built like an out-of-tree plugin: cc -shared -fPIC -fvisibility=hidden -Iinclude.
 * Threads: reconcile on workers (no instance state), init/fini on the loop.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kctrld/plugin.h"

#define CHILD "owned"

static const struct kctrld_host_api *H;

static int nsowner_init(kctrld_ctx *ctx, const kctrld_settings *settings, void **out) {
  (void)ctx;
  (void)settings;
  *out = NULL;
  return 0;
}

static int nsowner_reconcile(void *instance, kctrld_ctx *ctx, const char *key) {
  (void)instance;
  if (strchr(key, '/')) return H->result_error(ctx, "a Namespace key has no namespace: %s", key);
  const kctrld_ref ns_ref = {"v1", "Namespace", NULL, key};
  const kctrld_object *ns = NULL;
  int rc = H->cache_get(ctx, &ns_ref, &ns);
  if (rc == -ENOENT) {
    H->expectations_forget(ctx, key);
    H->log(KCTRLD_LOG_INFO, "owner gone");
    return KCTRLD_RESULT_DONE;
  }
  if (rc < 0) return H->result_error(ctx, "cache_get %s: %d", key, rc);
  kctrld_str want = H->object_label(ns, "test.kctrld.io/nsowner");
  kctrld_str uid = H->object_uid(ns);
  char uidbuf[128];
  bool managed = want.len == 3 && memcmp(want.ptr, "yes", 3) == 0 && uid.len < sizeof uidbuf;
  if (managed) {
    memcpy(uidbuf, uid.ptr, uid.len);
    uidbuf[uid.len] = '\0';
  }
  H->object_release(ns);
  if (!managed) return KCTRLD_RESULT_DONE;

  const kctrld_ref child_ref = {"v1", "ConfigMap", key, CHILD};
  const kctrld_object *child = NULL;
  rc = H->cache_get(ctx, &child_ref, &child);
  if (rc == 0) {
    H->object_release(child);
    H->log(KCTRLD_LOG_INFO, "present");
    return KCTRLD_RESULT_DONE;
  }
  if (rc != -ENOENT) return H->result_error(ctx, "cache_get %s/" CHILD ": %d", key, rc);
  if (!H->expectations_satisfied(ctx, key)) {
    H->log(KCTRLD_LOG_INFO, "waiting");
    return KCTRLD_RESULT_DONE; /* our create is not in the cache yet; its event wakes us */
  }
  char body[1024];
  int n = snprintf(body, sizeof body,
                   "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"" CHILD
                   "\",\"namespace\":\"%s\",\"ownerReferences\":[{\"apiVersion\":\"v1\","
                   "\"kind\":\"Namespace\",\"name\":\"%s\",\"uid\":\"%s\",\"controller\":true}]},"
                   "\"data\":{\"owner\":\"%s\"}}",
                   key, key, uidbuf, key);
  if (n < 0 || (size_t)n >= sizeof body) return H->result_error(ctx, "key too long: %s", key);
  rc = H->expect_creations(ctx, key, 1);
  if (rc < 0) return H->result_error(ctx, "expect_creations %s: %d", key, rc);
  rc = H->api_create(ctx, body, (size_t)n, NULL);
  if (rc < 0) {
    H->creation_observed(ctx, key); /* no event will come for it */
    if (rc == -EEXIST) return KCTRLD_RESULT_REQUEUE;
    return H->result_error(ctx, "create %s/" CHILD ": %d %s", key, rc, H->ctx_api_error(ctx));
  }
  H->log(KCTRLD_LOG_INFO, "created");
  return KCTRLD_RESULT_DONE;
}

static void nsowner_fini(void *instance) { (void)instance; }

static const struct kctrld_plugin nsowner = {
    .abi_major = KCTRLD_ABI_MAJOR,
    .abi_minor = KCTRLD_ABI_MINOR,
    .struct_size = sizeof(struct kctrld_plugin),
    .build_signature = KCTRLD_BUILD_SIGNATURE,
    .name = "nsowner",
    .init = nsowner_init,
    .reconcile = nsowner_reconcile,
    .fini = nsowner_fini,
};

KCTRLD_EXPORT const struct kctrld_plugin *kctrld_plugin_entry(const struct kctrld_host_api *h) {
  H = h;
  return &nsowner;
}
