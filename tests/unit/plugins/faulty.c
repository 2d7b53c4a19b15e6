/* SPDX-License-Identifier: Apache-2.0 */
/* A misbehaving plugin for tests/unit/test_errors_controller.c, built by
 * that test like an out-of-tree plugin (cc -shared -fPIC
 * -fvisibility=hidden -Iinclude). What reconcile does depends on the name
 * of the object (any namespace):
 *   error      fails with a message (retried with backoff)
 *   invalid    returns 42, not a KCTRLD_RESULT_* value
 *   requeue    asks for a requeue twice, then succeeds
 *   badwrite   makes API calls that must fail (malformed JSON create, bad
 *              JSON patch, GET of a missing object); requeue_after 1 h when
 *              each failed as documented, an error otherwise
 *   slow       runs 1.5 s (longer than the controller's timeout)
 *   hang       runs 2.5 s (longer than shutdownTimeout: abandoned on stop),
 *              after creating the file named by the setting hangMarker
 *   cached     reads its own key from the cache (an error when the cache
 *              has none) and annotates it faulty.kctrld.io/cached=seen
 *              with a merge patch unless the cached copy has it already
 *   evented    reads its own key from the cache and records a Normal
 *              Event "Evented" about it (test_errors_controller.c: Events
 *              of a sharded controller on a replica that is not the leader)
 *   (others)   success
 * fini appends "fini inflight=N" to the file named by the setting finiMarker
 * (N: reconciles of this instance still running, which must be 0).
 * init fails with -ECONNREFUSED (logging why) while the file named by the
 * setting initFailWhile exists: a plugin whose backend is not reachable
 * yet, for the daemon's init retries (test_errors_controller.c).
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep under -std=c11 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kctrld/plugin.h"

static const struct kctrld_host_api *H;
static atomic_int requeues;

struct faulty {
  atomic_int inflight;
  char marker[512];
  char hang_marker[512];
};

static int faulty_init(kctrld_ctx *ctx, const kctrld_settings *settings, void **out) {
  const char *gate = NULL;
  if (H->settings_string(settings, "initFailWhile", &gate) == 0 && gate &&
      access(gate, F_OK) == 0) {
    H->log(KCTRLD_LOG_ERROR, "backend not reachable while %s exists", gate);
    return -ECONNREFUSED;
  }
  struct faulty *f = calloc(1, sizeof *f);
  if (!f) return -ENOMEM;
  const char *marker = NULL;
  if (H->settings_string(settings, "finiMarker", &marker) == 0 && marker)
    snprintf(f->marker, sizeof f->marker, "%s", marker);
  const char *hang = NULL;
  if (H->settings_string(settings, "hangMarker", &hang) == 0 && hang)
    snprintf(f->hang_marker, sizeof f->hang_marker, "%s", hang);
  *out = f;
  return 0;
}

static void faulty_fini(void *instance) {
  struct faulty *f = instance;
  if (f->marker[0]) {
    FILE *fp = fopen(f->marker, "a");
    if (fp) {
      fprintf(fp, "fini inflight=%d\n", atomic_load(&f->inflight));
      fclose(fp);
    }
  }
  free(f);
}

static void nap_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static int bad_writes(kctrld_ctx *ctx, const char *ns) {
  static const char junk[] = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":";
  int rc = H->api_create(ctx, junk, sizeof junk - 1, NULL);
  if (rc >= 0) return H->result_error(ctx, "malformed create accepted");
  kctrld_ref ref = {"v1", "ConfigMap", ns, "badwrite"};
  static const char patch[] = "[{\"op\":\"frobnicate\",\"path\":\"/data\"}]";
  rc = H->api_patch(ctx, &ref, KCTRLD_PATCH_JSON, patch, sizeof patch - 1, false, NULL);
  if (rc >= 0) return H->result_error(ctx, "bad JSON patch accepted");
  kctrld_ref missing = {"v1", "ConfigMap", ns, "no-such-configmap"};
  const kctrld_object *obj = NULL;
  rc = H->api_get(ctx, &missing, &obj);
  if (rc != -ENOENT) return H->result_error(ctx, "GET of a missing object: %d", rc);
  return H->result_requeue_after(ctx, 3600 * 1000);
}

/* The object of the key must be in the cache: the driver sees the
 * annotation only when this controller's informer could be read. */
static int cached(kctrld_ctx *ctx, const char *ns) {
  kctrld_ref ref = {"v1", "ConfigMap", ns, "cached"};
  const kctrld_object *obj = NULL;
  int rc = H->cache_get(ctx, &ref, &obj);
  if (rc < 0) return H->result_error(ctx, "cache_get %s/cached: %d", ns, rc);
  char have[16] = "";
  rc =
      H->object_string(obj, "metadata.annotations[\"faulty.kctrld.io/cached\"]", have, sizeof have);
  H->object_release(obj);
  if (rc >= 0 && strcmp(have, "seen") == 0) return KCTRLD_RESULT_DONE;
  static const char patch[] =
      "{\"metadata\":{\"annotations\":{\"faulty.kctrld.io/cached\":\"seen\"}}}";
  rc = H->api_patch(ctx, &ref, KCTRLD_PATCH_MERGE, patch, sizeof patch - 1, false, NULL);
  return rc < 0 ? H->result_error(ctx, "patch %s/cached: %d", ns, rc) : KCTRLD_RESULT_DONE;
}

static int evented(kctrld_ctx *ctx, const char *ns) {
  kctrld_ref ref = {"v1", "ConfigMap", ns, "evented"};
  const kctrld_object *obj = NULL;
  int rc = H->cache_get(ctx, &ref, &obj);
  if (rc < 0) return H->result_error(ctx, "cache_get %s/evented: %d", ns, rc);
  rc = H->event(ctx, obj, KCTRLD_EVENT_NORMAL, "Evented", "reconciled %s/evented", ns);
  H->object_release(obj);
  return rc < 0 ? H->result_error(ctx, "event %s/evented: %d", ns, rc) : KCTRLD_RESULT_DONE;
}

static int reconcile_key(kctrld_ctx *ctx, const char *key);

static int faulty_reconcile(void *instance, kctrld_ctx *ctx, const char *key) {
  struct faulty *f = instance;
  atomic_fetch_add(&f->inflight, 1);
  const char *slash = strchr(key, '/');
  if (f->hang_marker[0] && strcmp(slash ? slash + 1 : key, "hang") == 0) {
    FILE *fp = fopen(f->hang_marker, "w");
    if (fp) fclose(fp);
  }
  int rc = reconcile_key(ctx, key);
  atomic_fetch_sub(&f->inflight, 1);
  return rc;
}

static int reconcile_key(kctrld_ctx *ctx, const char *key) {
  const char *slash = strchr(key, '/');
  const char *name = slash ? slash + 1 : key;
  char ns[64] = "";
  if (slash && (size_t)(slash - key) < sizeof ns) memcpy(ns, key, (size_t)(slash - key));
  if (strcmp(name, "error") == 0) return H->result_error(ctx, "injected failure for %s", key);
  if (strcmp(name, "invalid") == 0) return 42;
  if (strcmp(name, "requeue") == 0)
    return atomic_fetch_add(&requeues, 1) < 2 ? KCTRLD_RESULT_REQUEUE : KCTRLD_RESULT_DONE;
  if (strcmp(name, "badwrite") == 0) return bad_writes(ctx, ns);
  if (strcmp(name, "cached") == 0) return cached(ctx, ns);
  if (strcmp(name, "evented") == 0) return evented(ctx, ns);
  if (strcmp(name, "slow") == 0) nap_ms(1500);
  if (strcmp(name, "hang") == 0) nap_ms(2500);
  return KCTRLD_RESULT_DONE;
}

static const struct kctrld_plugin table = {
    .abi_major = KCTRLD_ABI_MAJOR,
    .abi_minor = KCTRLD_ABI_MINOR,
    .struct_size = sizeof(struct kctrld_plugin),
    .build_signature = KCTRLD_BUILD_SIGNATURE,
    .name = "faulty",
    .version = "0.0.1",
    .init = faulty_init,
    .reconcile = faulty_reconcile,
    .fini = faulty_fini,
};

const struct kctrld_plugin *kctrld_plugin_entry(const struct kctrld_host_api *host) {
  if (host->abi_major != KCTRLD_ABI_MAJOR) return NULL;
  H = host;
  return &table;
}
