/* SPDX-License-Identifier: Apache-2.0 */
/* A small plugin used by tests/unit/test_plugin_host.c. The test builds it
 * several times with -D flags to get broken variants:
 *   (none)              a good plugin
 *   -DWRONG_ABI         abi_major + 1
 *   -DSMALL_TABLE       struct_size smaller than the 1.0 table
 *   -DBAD_SIGNATURE     a build signature of another platform
 *   -DNO_ENTRY          exports no kctrld_plugin_entry
 *   -DNULL_ENTRY        the entry point refuses (returns NULL)
 *   -DINIT_FAIL         init fails with -EINVAL
 *   -DNO_RECONCILE      table without reconcile
 *   -DSAMPLE_VERSION=\"2\" another version string, also what reconciling
 *                       "ns/version" answers (a rebuilt plugin's new code)
 * Built like an out-of-tree plugin: cc -shared -fPIC -fvisibility=hidden -Iinclude.
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "kctrld/plugin.h"

#ifndef SAMPLE_VERSION
#define SAMPLE_VERSION "1.2.3"
#endif

static const struct kctrld_host_api *H;

struct instance {
  char greeting[64];
  atomic_int reconciles;
};

static int sample_init(kctrld_ctx *ctx, const kctrld_settings *settings, void **out) {
#ifdef INIT_FAIL
  H->log(KCTRLD_LOG_ERROR, "settings.greeting is required");
  return -EINVAL;
#endif
  const char *greeting = "hello";
  int rc = H->settings_string(settings, "greeting", &greeting);
  if (rc < 0 && rc != -ENOENT && rc != -ENOSYS) return rc;
  struct instance *in = H->alloc(sizeof *in);
  if (!in) return -ENOMEM;
  memset(in, 0, sizeof *in);
  strncpy(in->greeting, greeting, sizeof in->greeting - 1);
  H->log(KCTRLD_LOG_INFO, "init controller=%s greeting=%s", H->ctx_controller(ctx), in->greeting);
  *out = in;
  return 0;
}

__attribute__((unused)) static int sample_reconcile(void *instance, kctrld_ctx *ctx, const char *key) {
  struct instance *in = instance;
  atomic_fetch_add(&in->reconciles, 1);
  if (strcmp(key, "ns/error") == 0)
    return H->result_error(ctx, "cannot create pod for %s: %s", key, "quota exceeded");
  if (strcmp(key, "ns/after") == 0) return H->result_requeue_after(ctx, 1500);
  if (strcmp(key, "ns/after-high") == 0 && KCTRLD_HOST_HAS(H, result_requeue_priority))
    return H->result_requeue_priority(ctx, 250, KCTRLD_PRIORITY_HIGH);
  if (strcmp(key, "ns/after-without-delay") == 0) return KCTRLD_RESULT_REQUEUE_AFTER;
  if (strcmp(key, "ns/requeue") == 0) return KCTRLD_RESULT_REQUEUE;
  if (strcmp(key, "ns/error-without-message") == 0) return KCTRLD_RESULT_ERROR;
  if (strcmp(key, "ns/invalid") == 0) return 42;
  if (strcmp(key, "ns/version") == 0) return H->result_error(ctx, "code of version %s", SAMPLE_VERSION);
  if (strcmp(key, "ns/greeting") == 0)
    return H->result_error(ctx, "%s from %s", in->greeting, H->ctx_controller(ctx));
  if (strcmp(key, "ns/expect") == 0) {
    if (!H->expectations_satisfied(ctx, key)) return H->result_error(ctx, "stale at start");
    if (H->expect_creations(ctx, key, 2) != 0) return H->result_error(ctx, "expect failed");
    if (H->expectations_satisfied(ctx, key)) return H->result_error(ctx, "satisfied too early");
    H->creation_observed(ctx, key);
    if (H->expectations_satisfied(ctx, key)) return H->result_error(ctx, "satisfied after 1 of 2");
    H->creation_observed(ctx, key);
    if (!H->expectations_satisfied(ctx, key)) return H->result_error(ctx, "not satisfied after 2");
    return KCTRLD_RESULT_DONE;
  }
  if (strcmp(key, "ns/terminal") == 0) return H->result_terminal(ctx, "spec.size is not a number");
  if (strcmp(key, "ns/terminal-without-message") == 0) return KCTRLD_RESULT_TERMINAL;
  if (strncmp(key, "ns/status", 9) == 0) { /* a status patch of a kind without one */
    kctrld_ref ref = {"v1", "ConfigMap", "ns", "x"};
    int rc = H->api_patch(ctx, &ref, KCTRLD_PATCH_MERGE, "{}", 2, true, NULL);
    if (rc < 0 && strcmp(key, "ns/status-then-conflict") == 0) /* a later, ordinary failure */
      rc = H->api_patch(ctx, &ref, KCTRLD_PATCH_MERGE, "{}", 2, false, NULL);
    if (rc < 0 && strcmp(key, "ns/status-passed-on") == 0)
      return H->result_error(ctx, "status of ns/x: %s", H->ctx_api_error(ctx));
    return rc < 0 ? H->result_error(ctx, "patch ns/x: %d", rc) : KCTRLD_RESULT_DONE;
  }
  if (strcmp(key, "ns/cache") == 0) {
    kctrld_ref ref = {"v1", "Pod", "ns", "cache"};
    const kctrld_object *obj = NULL;
    int rc = H->cache_get(ctx, &ref, &obj);
    if (rc < 0) return H->result_error(ctx, "cache_get: %d", rc);
    kctrld_str name = H->object_name(obj);
    int ok = name.len == 5 && memcmp(name.ptr, "cache", 5) == 0;
    H->object_release(obj);
    return ok ? KCTRLD_RESULT_DONE : H->result_error(ctx, "wrong object");
  }
  H->log(KCTRLD_LOG_DEBUG, "reconciled");
  return KCTRLD_RESULT_DONE;
}

static void sample_fini(void *instance) { H->free(instance); }

#ifdef PERMS
static const kctrld_permission sample_perms[] = {
    {"", "pods", "create,delete"},
    KCTRLD_PERMISSION_EVENTS,
    KCTRLD_PERMISSIONS_END,
};
#endif

static const struct kctrld_plugin table = {
#ifdef WRONG_ABI
    .abi_major = KCTRLD_ABI_MAJOR + 1,
#else
    .abi_major = KCTRLD_ABI_MAJOR,
#endif
    .abi_minor = KCTRLD_ABI_MINOR,
#ifdef SMALL_TABLE
    .struct_size = 16,
#elif defined(OLD_TABLE) /* a plugin built against the 1.0 header */
    .struct_size = offsetof(struct kctrld_plugin, permissions),
#else
    .struct_size = sizeof(struct kctrld_plugin),
#endif
#ifdef BAD_SIGNATURE
    .build_signature = "kctrld-abi-1,ptr4,long4,size4,off32,time32,order4321",
#else
    .build_signature = KCTRLD_BUILD_SIGNATURE,
#endif
    .name = "sample",
    .version = SAMPLE_VERSION,
    .init = sample_init,
#ifndef NO_RECONCILE
    .reconcile = sample_reconcile,
#endif
    .fini = sample_fini,
#ifdef PERMS
    .permissions = sample_perms,
#endif
};

#ifdef NO_ENTRY
KCTRLD_EXPORT const struct kctrld_plugin *kctrld_plugin_entry_v0(const struct kctrld_host_api *host);
const struct kctrld_plugin *kctrld_plugin_entry_v0(const struct kctrld_host_api *host) {
  H = host;
  return &table;
}
#else
const struct kctrld_plugin *kctrld_plugin_entry(const struct kctrld_host_api *host) {
  if (host->abi_major != KCTRLD_ABI_MAJOR) return NULL;
  H = host;
#ifdef NULL_ENTRY
  return NULL;
#endif
  return &table;
}
#endif
