/* SPDX-License-Identifier: Apache-2.0 */
/* reloader: rolls apps/v1 Deployments annotated kctrld.io/reload: "true"
 * when a ConfigMap or Secret their pod template references changes, by
 * setting spec.template.metadata.annotations["kctrld.io/config-hash"] to a
 * hash of those objects' data. See README.md (it also gives the informer
 * indexes and `watches` that wake a Deployment when a ConfigMap or Secret it
 * uses changes: field indexes, never scans).
 *
 * References collected from spec.template.spec, in containers and
 * initContainers: volumes[].configMap.name, volumes[].secret.secretName,
 * volumes[].projected.sources[].configMap.name / .secret.name,
 * envFrom[].configMapRef.name / .secretRef.name,
 * env[].valueFrom.configMapKeyRef.name / .secretKeyRef.name.
 *
 * Hash: FNV-1a 64 over, for ConfigMaps then Secrets, each name in byte
 * order: kind, name, and either the `data` and `binaryData` members sorted
 * by key (key and raw JSON value each) or a marker for an absent object.
 * Stable whatever order the server writes map keys in. Written as 16 hex
 * digits with a merge patch, only when it differs from the current value.
 *
 * Settings (all optional): requeueMissing (duration, default 60s: when a
 * referenced object is missing, look again after this long in case its
 * watch is not configured; 0 = rely on the watch alone).
 * Instance state: settings, immutable after init.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kctrld/plugin_util.h"
#include "kctrld/plugin.h"

#define RELOAD_ANNOTATION "kctrld.io/reload"
#define HASH_ANNOTATION "kctrld.io/config-hash"
#define MAX_REFS 256

static const struct kctrld_host_api *H;

struct reloader_instance {
  int64_t requeue_missing_ms;
};

/* ---- pure logic (unit-tested) ---- */

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static uint64_t fnv1a(uint64_t h, const void *data, size_t len) {
  const unsigned char *p = data;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= FNV_PRIME;
  }
  return h;
}

/* Length-prefixed so that ("ab","c") and ("a","bc") differ. */
static uint64_t hash_field(uint64_t h, const char *p, size_t len) {
  uint64_t l = len;
  h = fnv1a(h, &l, sizeof l);
  return fnv1a(h, p, len);
}

/* A set of names, sorted and unique. */
struct name_set {
  char *names[MAX_REFS];
  size_t n;
  bool overflow;
};

static int name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void set_add(struct name_set *s, const char *name) {
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->names[i], name) == 0) return;
  if (s->n == MAX_REFS) {
    s->overflow = true;
    return;
  }
  char *c = strdup(name);
  if (!c) {
    s->overflow = true;
    return;
  }
  s->names[s->n++] = c;
}

static void set_sort(struct name_set *s) { qsort(s->names, s->n, sizeof s->names[0], name_cmp); }

static void set_free(struct name_set *s) {
  for (size_t i = 0; i < s->n; i++) free(s->names[i]);
  s->n = 0;
}

struct member {
  kctrld_str key, value;
};

struct member_list {
  struct member *v;
  size_t n, cap;
  bool oom;
};

static bool collect_member(kctrld_str key, kctrld_str value, void *ud) {
  struct member_list *l = ud;
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 16;
    struct member *v = realloc(l->v, cap * sizeof *v);
    if (!v) {
      l->oom = true;
      return false;
    }
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = (struct member){key, value};
  return true;
}

static int member_cmp(const void *a, const void *b) {
  const struct member *x = a, *y = b;
  size_t n = x->key.len < y->key.len ? x->key.len : y->key.len;
  int c = memcmp(x->key.ptr, y->key.ptr, n);
  return c ? c : (x->key.len > y->key.len) - (x->key.len < y->key.len);
}

/* Hashes one JSON object (raw text) member by member in key order.
 * Returns 0, -EINVAL (not an object), -ENOMEM. */
static int hash_object_sorted(uint64_t *h, kctrld_str obj) {
  struct member_list l = {0};
  int rc = pu_json_members(obj, collect_member, &l);
  if (l.oom) rc = -ENOMEM;
  if (rc >= 0) {
    if (l.n > 1) qsort(l.v, l.n, sizeof l.v[0], member_cmp);
    for (size_t i = 0; i < l.n; i++) {
      *h = hash_field(*h, l.v[i].key.ptr, l.v[i].key.len);
      *h = hash_field(*h, l.v[i].value.ptr, l.v[i].value.len);
    }
    rc = 0;
  }
  free(l.v);
  return rc;
}

/* Hashes one referenced object: data and binaryData given as raw JSON
 * (absent slices for missing members), or present == false. */
static int hash_source(uint64_t *h, const char *kind, const char *name, bool present, kctrld_str data,
                       kctrld_str binary) {
  *h = hash_field(*h, kind, strlen(kind));
  *h = hash_field(*h, name, strlen(name));
  if (!present) {
    *h = hash_field(*h, "absent", 6);
    return 0;
  }
  *h = hash_field(*h, "data", 4);
  if (data.ptr && data.len && data.ptr[0] == '{') {
    int rc = hash_object_sorted(h, data);
    if (rc < 0) return rc;
  }
  *h = hash_field(*h, "binaryData", 10);
  if (binary.ptr && binary.len && binary.ptr[0] == '{') {
    int rc = hash_object_sorted(h, binary);
    if (rc < 0) return rc;
  }
  return 0;
}

/* ---- reference collection ---- */

struct refs {
  struct name_set cm, secret;
};

struct visit {
  struct name_set *set;
};

static bool add_name(const kctrld_value *v, void *ud) {
  struct visit *vi = ud;
  char name[256];
  if (v->type == KCTRLD_JSON_STRING && H->value_string(v, name, sizeof name) > 0) set_add(vi->set, name);
  return true;
}

static void collect_refs(const kctrld_object *d, struct refs *r) {
  static const char *const cm_paths[] = {
      "spec.template.spec.volumes[].configMap.name",
      "spec.template.spec.volumes[].projected.sources[].configMap.name",
      "spec.template.spec.containers[].envFrom[].configMapRef.name",
      "spec.template.spec.containers[].env[].valueFrom.configMapKeyRef.name",
      "spec.template.spec.initContainers[].envFrom[].configMapRef.name",
      "spec.template.spec.initContainers[].env[].valueFrom.configMapKeyRef.name",
  };
  static const char *const secret_paths[] = {
      "spec.template.spec.volumes[].secret.secretName",
      "spec.template.spec.volumes[].projected.sources[].secret.name",
      "spec.template.spec.containers[].envFrom[].secretRef.name",
      "spec.template.spec.containers[].env[].valueFrom.secretKeyRef.name",
      "spec.template.spec.initContainers[].envFrom[].secretRef.name",
      "spec.template.spec.initContainers[].env[].valueFrom.secretKeyRef.name",
  };
  struct visit vc = {&r->cm}, vs = {&r->secret};
  for (size_t i = 0; i < sizeof cm_paths / sizeof cm_paths[0]; i++) H->object_each(d, cm_paths[i], add_name, &vc);
  for (size_t i = 0; i < sizeof secret_paths / sizeof secret_paths[0]; i++)
    H->object_each(d, secret_paths[i], add_name, &vs);
  set_sort(&r->cm);
  set_sort(&r->secret);
}

/* Hashes the referenced objects from the cache. *missing counts absent
 * ones. Returns 0 or a negative errno (-ENOTSUP: kind not cached). */
static int hash_refs(kctrld_ctx *ctx, const char *ns, const struct refs *r, uint64_t *out, int *missing) {
  uint64_t h = FNV_OFFSET;
  *missing = 0;
  const struct {
    const char *kind;
    const struct name_set *set;
  } groups[] = {{"ConfigMap", &r->cm}, {"Secret", &r->secret}};
  for (size_t g = 0; g < 2; g++) {
    for (size_t i = 0; i < groups[g].set->n; i++) {
      const char *name = groups[g].set->names[i];
      kctrld_ref ref = {"v1", groups[g].kind, ns, name};
      const kctrld_object *o = NULL;
      int rc = H->cache_get(ctx, &ref, &o);
      if (rc < 0 && rc != -ENOENT) return rc;
      kctrld_value data = {0}, bin = {0};
      if (o) {
        H->object_get(o, "data", &data);
        H->object_get(o, "binaryData", &bin);
      } else {
        (*missing)++;
      }
      rc = hash_source(&h, groups[g].kind, name, o != NULL,
                       data.type == KCTRLD_JSON_OBJECT ? data.raw : (kctrld_str){0},
                       bin.type == KCTRLD_JSON_OBJECT ? bin.raw : (kctrld_str){0});
      H->object_release(o);
      if (rc < 0) return rc;
    }
  }
  *out = h;
  return 0;
}

/* ---- reconcile ---- */

static int reloader_reconcile(void *instance, kctrld_ctx *ctx, const char *key) {
  struct reloader_instance *in = instance;
  char ns[256], name[256];
  if (pu_split_key(key, ns, sizeof ns, name, sizeof name) < 0 || !ns[0])
    return H->result_error(ctx, "bad key %s", key);
  kctrld_ref ref = {"apps/v1", "Deployment", ns, name};
  const kctrld_object *d = NULL;
  int rc = H->cache_get(ctx, &ref, &d);
  if (rc == -ENOENT) return KCTRLD_RESULT_DONE;
  if (rc < 0) return H->result_error(ctx, "deployment %s: cache: %d", key, rc);
  char flag[16];
  if (H->object_deleting(d) ||
      H->object_string(d, "metadata.annotations[\"" RELOAD_ANNOTATION "\"]", flag, sizeof flag) < 0 ||
      strcmp(flag, "true") != 0) {
    H->object_release(d);
    return KCTRLD_RESULT_DONE;
  }
  struct refs r = {0};
  collect_refs(d, &r);
  int result = KCTRLD_RESULT_DONE;
  if (r.cm.overflow || r.secret.overflow) {
    result = H->result_error(ctx, "deployment %s: more than %d references (or out of memory)", key, MAX_REFS);
    goto out;
  }
  uint64_t h;
  int missing;
  rc = hash_refs(ctx, ns, &r, &h, &missing);
  if (rc < 0) {
    result = H->result_error(ctx, "deployment %s: %s: %d (are ConfigMaps and Secrets watched?)", key,
                             rc == -ENOTSUP ? "ConfigMap or Secret not cached" : "hashing", rc);
    goto out;
  }
  char hex[17], cur[64] = "";
  snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
  int currc = H->object_string(d, "spec.template.metadata.annotations[\"" HASH_ANNOTATION "\"]", cur, sizeof cur);
  if (currc >= 0 && strcmp(cur, hex) == 0) {
    H->log(KCTRLD_LOG_DEBUG, "up to date deployment=%s hash=%s", key, hex);
  } else {
    /* The cached resourceVersion makes the patch conditional: a cache that
     * has not yet seen this plugin's last roll (or any other change) gets
     * 409 and a requeue, never a second roll from a stale view. */
    char rv[128];
    if (H->object_string(d, "metadata.resourceVersion", rv, sizeof rv) < 0 || !rv[0]) {
      result = H->result_error(ctx, "deployment %s: cached object has no resourceVersion", key);
      goto out;
    }
    pu_buf patch;
    pu_buf_init(&patch);
    pu_str(&patch, "{\"metadata\":{");
    pu_json_kv_str(&patch, "resourceVersion", rv);
    pu_str(&patch, "},\"spec\":{\"template\":{\"metadata\":{\"annotations\":{");
    pu_json_kv_str(&patch, HASH_ANNOTATION, hex);
    pu_str(&patch, "}}}}}");
    rc = patch.oom ? -ENOMEM : H->api_patch(ctx, &ref, KCTRLD_PATCH_MERGE, patch.p, patch.n, false, NULL);
    pu_buf_free(&patch);
    if (rc == -ENOENT) goto out;
    if (rc == -ESTALE) H->log(KCTRLD_LOG_DEBUG, "deployment %s changed since resourceVersion %s; waiting for it", key, rv);
    if (rc < 0) {
      result = rc == -ESTALE || rc == -EAGAIN
                   ? KCTRLD_RESULT_REQUEUE
                   : H->result_error(ctx, "deployment %s: patch: %s", key, H->ctx_api_error(ctx));
      goto out;
    }
    H->log(KCTRLD_LOG_INFO, "rolled deployment=%s hash=%s previous=%s configmaps=%zu secrets=%zu missing=%d", key,
           hex, currc >= 0 ? cur : "-", r.cm.n, r.secret.n, missing);
  }
  if (missing && in->requeue_missing_ms > 0)
    result = H->result_requeue_after(ctx, (uint64_t)in->requeue_missing_ms);
out:
  set_free(&r.cm);
  set_free(&r.secret);
  H->object_release(d);
  return result;
}

static int reloader_init(kctrld_ctx *ctx, const kctrld_settings *settings, void **instance) {
  struct reloader_instance *in = calloc(1, sizeof *in);
  if (!in) return -ENOMEM;
  in->requeue_missing_ms = 60000;
  int rc = H->settings_duration_ms(settings, "requeueMissing", &in->requeue_missing_ms);
  if (rc < 0 && rc != -ENOENT) {
    H->log(KCTRLD_LOG_ERROR, "settings.requeueMissing must be a duration such as 60s (0 disables)");
    free(in);
    return -EINVAL;
  }
  H->log(KCTRLD_LOG_INFO, "reloader controller=%s requeueMissing=%lldms", H->ctx_controller(ctx),
         (long long)in->requeue_missing_ms);
  *instance = in;
  return 0;
}

static void reloader_fini(void *instance) { free(instance); }

/* What reconcile writes (kctrld rbac): the hash patch of the `for` kind. */
static const kctrld_permission reloader_permissions[] = {
    {"", KCTRLD_RESOURCE_FOR, "patch"},
    KCTRLD_PERMISSIONS_END,
};

KCTRLD_PLUGIN_DEFINE_PERMS(H, "reloader", "1.0.0", reloader_init, reloader_reconcile, reloader_fini,
                           reloader_permissions);

