/* SPDX-License-Identifier: Apache-2.0 */
#include "fieldval.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "openapi.h"
#include "store.h"

/* The ObjectMeta properties of tests/apisim/openapi.c's schema. */
static const char *const objmeta_fields[] = {
  "annotations", "creationTimestamp", "deletionGracePeriodSeconds", "deletionTimestamp",
  "finalizers", "generateName", "generation", "labels", "managedFields", "name", "namespace",
  "ownerReferences", "resourceVersion", "selfLink", "uid", NULL,
};

struct acc {
  struct sim_buf b;
  size_t n;
};

static void unknown(struct acc *a, const char *path, const char *key)
{
  /* strategic merge patch directives ($patch, $setElementOrder/..., $retainKeys) */
  if (key[0] == '$') return;
  if (a->n++) sim_buf_puts(&a->b, ", ");
  char *full = *path ? sim_xasprintf("%s.%s", path, key) : sim_xstrdup(key);
  sim_buf_puts(&a->b, "unknown field ");
  sim_buf_put_jstr(&a->b, full, strlen(full));
  free(full);
}

static void check_meta(struct acc *a, const jv *md, const char *path)
{
  if (!md || md->t != J_OBJ) return;
  for (size_t i = 0; i < md->n; i++) {
    bool ok = false;
    for (size_t j = 0; !ok && objmeta_fields[j]; j++) ok = strcmp(md->u.o[i].k, objmeta_fields[j]) == 0;
    if (!ok) unknown(a, path, md->u.o[i].k);
  }
}

static bool is_true(const jv *v) { return v && v->t == J_TRUE; }

/* Walks v against schema s (a CRD structural schema node). */
static void walk(struct acc *a, const jv *s, const jv *v, const char *path, bool root,
                 unsigned depth)
{
  if (!s || s->t != J_OBJ || !v || depth > 64) return;
  if (v->t == J_ARR) {
    const jv *items = jv_get(s, "items");
    for (size_t i = 0; items && i < v->n; i++) {
      char *p = sim_xasprintf("%s[%zu]", path, i);
      walk(a, items, v->u.a[i], p, false, depth + 1);
      free(p);
    }
    return;
  }
  if (v->t != J_OBJ) return;
  bool embedded = root || is_true(jv_get(s, "x-kubernetes-embedded-resource"));
  if (is_true(jv_get(s, "x-kubernetes-preserve-unknown-fields"))) {
    /* Known properties are still walked; unknown ones are kept. */
    const jv *props = jv_get(s, "properties");
    for (size_t i = 0; props && props->t == J_OBJ && i < v->n; i++) {
      const jv *ps = jv_get(props, v->u.o[i].k);
      if (!ps) continue;
      char *p = *path ? sim_xasprintf("%s.%s", path, v->u.o[i].k) : sim_xstrdup(v->u.o[i].k);
      walk(a, ps, v->u.o[i].v, p, false, depth + 1);
      free(p);
    }
    return;
  }
  const jv *addl = jv_get(s, "additionalProperties");
  if (addl && addl->t != J_FALSE) {
    for (size_t i = 0; addl->t == J_OBJ && i < v->n; i++) {
      char *p = *path ? sim_xasprintf("%s.%s", path, v->u.o[i].k) : sim_xstrdup(v->u.o[i].k);
      walk(a, addl, v->u.o[i].v, p, false, depth + 1);
      free(p);
    }
    return;
  }
  const jv *props = jv_get(s, "properties");
  const char *type = jv_gets(s, "type");
  if (!props && !(type && strcmp(type, "object") == 0)) return;
  for (size_t i = 0; i < v->n; i++) {
    const char *k = v->u.o[i].k;
    char *p = *path ? sim_xasprintf("%s.%s", path, k) : sim_xstrdup(k);
    if (embedded && strcmp(k, "metadata") == 0) {
      check_meta(a, v->u.o[i].v, p);
    } else if (embedded && (strcmp(k, "apiVersion") == 0 || strcmp(k, "kind") == 0)) {
      /* always allowed */
    } else {
      const jv *ps = props && props->t == J_OBJ ? jv_get(props, k) : NULL;
      if (ps) walk(a, ps, v->u.o[i].v, p, false, depth + 1);
      else unknown(a, path, k);
    }
    free(p);
  }
}

/* Copy of the CRD version's openAPIV3Schema, or NULL. */
static jv *crd_schema(const struct sim_rtype *rt)
{
  jv *out = NULL;
  pthread_mutex_lock(&sim_mu);
  struct sim_rtype *crt = sim_type_crd_locked();
  const struct sim_obj *o = crt && rt->crd_name ? sim_coll_get_locked(crt->coll, rt->crd_name) : NULL;
  const jv *vers = o ? jv_geta(o->dom, "spec", "versions", (const char *)NULL) : NULL;
  for (size_t i = 0; vers && vers->t == J_ARR && i < vers->n; i++) {
    const char *vn = jv_gets(vers->u.a[i], "name");
    const jv *sc = jv_geta(vers->u.a[i], "schema", "openAPIV3Schema", (const char *)NULL);
    if (vn && strcmp(vn, rt->version) == 0 && sc) out = jv_copy(sc);
  }
  pthread_mutex_unlock(&sim_mu);
  return out;
}

static bool builtin_has(const char *fields, const char *k)
{
  size_t kl = strlen(k);
  for (const char *f = fields; *f;) {
    const char *colon = strchr(f, ':');
    if (!colon) break;
    if ((size_t)(colon - f) == kl && strncmp(f, k, kl) == 0) return true;
    const char *comma = strchr(colon, ',');
    if (!comma) break;
    f = comma + 1;
  }
  return false;
}

size_t sim_fieldval_unknown(const struct sim_rtype *rt, const jv *obj, char **out)
{
  *out = NULL;
  struct acc a = {0};
  if (!obj || obj->t != J_OBJ) return 0;
  if (rt->is_crd) {
    jv *s = crd_schema(rt);
    if (s) walk(&a, s, obj, "", true, 0);
    jv_free(s);
  } else {
    const char *fields = sim_openapi_builtin_fields(rt);
    for (size_t i = 0; i < obj->n; i++) {
      const char *k = obj->u.o[i].k;
      if (strcmp(k, "metadata") == 0) check_meta(&a, obj->u.o[i].v, "metadata");
      else if (strcmp(k, "apiVersion") != 0 && strcmp(k, "kind") != 0 && !builtin_has(fields, k))
        unknown(&a, "", k);
    }
  }
  if (a.n) *out = sim_buf_steal(&a.b, NULL);
  sim_buf_free(&a.b);
  return a.n;
}
