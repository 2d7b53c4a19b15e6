/* SPDX-License-Identifier: Apache-2.0 */
#include "patch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

jv *sim_merge_patch(jv *target, const jv *patch)
{
  if (!patch || patch->t != J_OBJ) {
    jv_free(target);
    return jv_copy(patch);
  }
  if (!target || target->t != J_OBJ) {
    jv_free(target);
    target = jv_new(J_OBJ);
  }
  for (size_t i = 0; i < patch->n; i++) {
    const char *k = patch->u.o[i].k;
    const jv *pv = patch->u.o[i].v;
    if (pv->t == J_NULL) {
      jv_del(target, k);
      continue;
    }
    jv *cur = jv_get(target, k);
    if (cur) {
      /* Detach, merge, reattach (jv_set frees the old slot otherwise). */
      for (size_t j = 0; j < target->n; j++)
        if (target->u.o[j].v == cur) {
          target->u.o[j].v = sim_merge_patch(cur, pv);
          break;
        }
    } else {
      jv_set(target, k, sim_merge_patch(NULL, pv));
    }
  }
  return target;
}

/* ---- JSON patch ---- */

/* Splits a JSON pointer into unescaped tokens. */
static char **ptr_split(const char *p, size_t *n, bool *ok)
{
  *n = 0;
  *ok = true;
  if (!*p) return NULL;
  if (*p != '/') { *ok = false; return NULL; }
  char **out = NULL;
  while (*p == '/') {
    p++;
    struct sim_buf b = {0};
    while (*p && *p != '/') {
      if (*p == '~') {
        if (p[1] == '0') sim_buf_putc(&b, '~');
        else if (p[1] == '1') sim_buf_putc(&b, '/');
        else { *ok = false; }
        p += 2;
        continue;
      }
      sim_buf_putc(&b, *p++);
    }
    out = sim_xrealloc(out, (*n + 1) * sizeof(char *));
    out[(*n)++] = sim_buf_steal(&b, NULL);
  }
  return out;
}

static void toks_free(char **t, size_t n)
{
  for (size_t i = 0; i < n; i++) free(t[i]);
  free(t);
}

static bool arr_index(const char *s, size_t len, size_t *out, bool allow_end)
{
  if (allow_end && strcmp(s, "-") == 0) { *out = len; return true; }
  if (!*s || (s[0] == '0' && s[1])) return false;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end || s[0] == '-' || s[0] == '+') return false;
  if (v > len - (allow_end ? 0 : 1) || (!allow_end && len == 0)) return false;
  *out = (size_t)v;
  return true;
}

/* Resolves the parent container of the pointer's last token. */
static jv *ptr_parent(jv *root, char **t, size_t n)
{
  jv *v = root;
  for (size_t i = 0; v && i + 1 < n; i++) {
    if (v->t == J_OBJ) {
      v = jv_get(v, t[i]);
    } else if (v->t == J_ARR) {
      size_t idx;
      if (!arr_index(t[i], v->n, &idx, false)) return NULL;
      v = v->u.a[idx];
    } else {
      return NULL;
    }
  }
  return v;
}

static jv *ptr_get(jv *root, const char *path)
{
  size_t n;
  bool ok;
  char **t = ptr_split(path, &n, &ok);
  if (!ok) { toks_free(t, n); return NULL; }
  if (n == 0) return root;
  jv *par = ptr_parent(root, t, n), *r = NULL;
  if (par && par->t == J_OBJ) r = jv_get(par, t[n - 1]);
  else if (par && par->t == J_ARR) {
    size_t idx;
    if (arr_index(t[n - 1], par->n, &idx, false)) r = par->u.a[idx];
  }
  toks_free(t, n);
  return r;
}

/* Removes and returns the value at path (NULL if missing). */
static jv *ptr_take(jv *root, const char *path)
{
  size_t n;
  bool ok;
  char **t = ptr_split(path, &n, &ok);
  jv *r = NULL;
  if (ok && n) {
    jv *par = ptr_parent(root, t, n);
    if (par && par->t == J_OBJ) {
      for (size_t i = 0; i < par->n; i++)
        if (strcmp(par->u.o[i].k, t[n - 1]) == 0) {
          r = par->u.o[i].v;
          free(par->u.o[i].k);
          memmove(&par->u.o[i], &par->u.o[i + 1], (par->n - i - 1) * sizeof(struct jkv));
          par->n--;
          break;
        }
    } else if (par && par->t == J_ARR) {
      size_t idx;
      if (arr_index(t[n - 1], par->n, &idx, false)) {
        r = par->u.a[idx];
        memmove(&par->u.a[idx], &par->u.a[idx + 1], (par->n - idx - 1) * sizeof(jv *));
        par->n--;
      }
    }
  }
  toks_free(t, n);
  return r;
}

/* Adds val at path (takes val); replace=true requires the target to exist. */
static int ptr_put(jv **root, const char *path, jv *val, bool replace)
{
  size_t n;
  bool ok;
  char **t = ptr_split(path, &n, &ok);
  int rc = -ENOENT;
  if (!ok) goto out;
  if (n == 0) {
    jv_free(*root);
    *root = val;
    val = NULL;
    rc = 0;
    goto out;
  }
  jv *par = ptr_parent(*root, t, n);
  if (par && par->t == J_OBJ) {
    if (replace && !jv_get(par, t[n - 1])) goto out;
    jv_set(par, t[n - 1], val);
    val = NULL;
    rc = 0;
  } else if (par && par->t == J_ARR) {
    size_t idx;
    if (replace) {
      if (arr_index(t[n - 1], par->n, &idx, false)) {
        jv_free(par->u.a[idx]);
        par->u.a[idx] = val;
        val = NULL;
        rc = 0;
      }
    } else if (arr_index(t[n - 1], par->n, &idx, true)) {
      jv_arr_insert(par, idx, val);
      val = NULL;
      rc = 0;
    }
  }
out:
  jv_free(val);
  toks_free(t, n);
  return rc;
}

int sim_json_patch(jv **target, const jv *patch, char **err)
{
  *err = NULL;
  if (!patch || patch->t != J_ARR) {
    *err = sim_xstrdup("json: cannot unmarshal object into Go value of type jsonpatch.Patch");
    return -EBADMSG;
  }
  if (patch->n > 10000) {
    *err = sim_xasprintf("The allowed maximum operations in a JSON patch is 10000, got %zu", patch->n);
    return -E2BIG;
  }
  for (size_t i = 0; i < patch->n; i++) {
    const jv *op = patch->u.a[i];
    const char *o = jv_gets(op, "op"), *path = jv_gets(op, "path"), *from = jv_gets(op, "from");
    const jv *value = jv_get(op, "value");
    if (!o) { *err = sim_xstrdup("Unexpected kind: unknown"); return -EINVAL; }
    if (!path) { *err = sim_xasprintf("missing path in operation %s", o); return -EINVAL; }
    int rc = 0;
    if (strcmp(o, "add") == 0) {
      if (!value) { *err = sim_xstrdup("missing value for add operation"); return -EINVAL; }
      rc = ptr_put(target, path, jv_copy(value), false);
      if (rc) *err = sim_xasprintf("add operation does not apply: doc is missing path: \"%s\": missing value", path);
    } else if (strcmp(o, "remove") == 0) {
      jv *v = ptr_take(*target, path);
      if (!v) { *err = sim_xasprintf("remove operation does not apply: doc is missing path: \"%s\": missing value", path); rc = -EINVAL; }
      jv_free(v);
    } else if (strcmp(o, "replace") == 0) {
      if (!value) { *err = sim_xstrdup("missing value for replace operation"); return -EINVAL; }
      rc = ptr_put(target, path, jv_copy(value), true);
      if (rc) *err = sim_xasprintf("replace operation does not apply: doc is missing key: %s: missing value", path);
    } else if (strcmp(o, "move") == 0 || strcmp(o, "copy") == 0) {
      if (!from) { *err = sim_xasprintf("missing from in %s operation", o); return -EINVAL; }
      jv *v = o[0] == 'm' ? ptr_take(*target, from) : jv_copy(ptr_get(*target, from));
      if (!v) { *err = sim_xasprintf("%s operation does not apply: doc is missing from path: %s: missing value", o, from); return -EINVAL; }
      rc = ptr_put(target, path, v, false);
      if (rc) *err = sim_xasprintf("%s operation does not apply: doc is missing destination path: %s", o, path);
    } else if (strcmp(o, "test") == 0) {
      jv *v = ptr_get(*target, path);
      if (!v || !jv_equal(v, value ? value : NULL)) {
        *err = sim_xasprintf("testing value %s failed: test failed", path);
        rc = -EINVAL;
      }
    } else {
      *err = sim_xasprintf("Unexpected kind: %s", o);
      rc = -EINVAL;
    }
    if (rc) return -EINVAL;
  }
  return 0;
}

/* ---- strategic merge patch (common cases) ---- */

/* Merge keys of the list fields that kube types declare with patchStrategy
 * merge; other lists are replaced, as the real server does. */
static const char *merge_key(const char *field)
{
  static const struct { const char *f, *k; } keys[] = {
    {"containers", "name"}, {"initContainers", "name"}, {"ephemeralContainers", "name"},
    {"volumes", "name"}, {"env", "name"}, {"volumeMounts", "mountPath"},
    {"volumeDevices", "devicePath"}, {"ports", "containerPort"}, {"conditions", "type"},
    {"ownerReferences", "uid"}, {"imagePullSecrets", "name"}, {"hostAliases", "ip"},
    {"tolerations", NULL}, {"containerStatuses", NULL}, {"finalizers", ""},
    {"topologySpreadConstraints", "topologyKey"}, {"addresses", "type"},
    {"resourceClaims", "name"}, {"podIPs", "ip"}, {"hostIPs", "ip"}, {"taints", "key"},
  };
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    if (strcmp(keys[i].f, field) == 0) return keys[i].k;
  return NULL;
}

static jv *smp(jv *target, const jv *patch);

static jv *smp_list(jv *target, const jv *patch, const char *key)
{
  if (!target || target->t != J_ARR) {
    jv_free(target);
    target = jv_new(J_ARR);
  }
  if (!*key) {
    /* Set of scalars (finalizers): union, keeping order. */
    for (size_t i = 0; i < patch->n; i++) {
      bool have = false;
      for (size_t j = 0; j < target->n && !have; j++) have = jv_equal(target->u.a[j], patch->u.a[i]);
      if (!have) jv_push(target, jv_copy(patch->u.a[i]));
    }
    return target;
  }
  for (size_t i = 0; i < patch->n; i++) {
    const jv *pe = patch->u.a[i];
    const jv *kv = jv_get(pe, key);
    const char *directive = jv_gets(pe, "$patch");
    size_t found = target->n;
    for (size_t j = 0; kv && j < target->n; j++)
      if (jv_equal(jv_get(target->u.a[j], key), kv)) { found = j; break; }
    if (directive && strcmp(directive, "delete") == 0) {
      if (found < target->n) jv_arr_remove(target, found);
      continue;
    }
    if (found < target->n) {
      target->u.a[found] = smp(target->u.a[found], pe);
    } else {
      jv *c = smp(NULL, pe);
      jv_push(target, c);
    }
  }
  return target;
}

static jv *smp(jv *target, const jv *patch)
{
  if (!patch || patch->t != J_OBJ) {
    jv_free(target);
    return jv_copy(patch);
  }
  const char *directive = jv_gets(patch, "$patch");
  if (directive && strcmp(directive, "replace") == 0) {
    jv_free(target);
    jv *c = jv_copy(patch);
    jv_del(c, "$patch");
    return c;
  }
  if (!target || target->t != J_OBJ) {
    jv_free(target);
    target = jv_new(J_OBJ);
  }
  for (size_t i = 0; i < patch->n; i++) {
    const char *k = patch->u.o[i].k;
    const jv *pv = patch->u.o[i].v;
    if (k[0] == '$') continue; /* $patch, $retainKeys, $setElementOrder/...: directives */
    if (pv->t == J_NULL) {
      jv_del(target, k);
      continue;
    }
    jv *cur = jv_get(target, k);
    jv *res;
    const char *mk = pv->t == J_ARR ? merge_key(k) : NULL;
    if (mk) {
      /* The object list must be homogeneous to merge by key. */
      bool objs = *mk == 0;
      for (size_t j = 0; *mk && j < pv->n; j++) objs = pv->u.a[j]->t == J_OBJ;
      if (!pv->n) objs = false;
      if (objs) {
        if (cur) {
          for (size_t j = 0; j < target->n; j++)
            if (target->u.o[j].v == cur) target->u.o[j].v = NULL;
        }
        res = smp_list(cur, pv, mk);
        jv_set(target, k, res);
        continue;
      }
    }
    if (cur && pv->t == J_OBJ) {
      for (size_t j = 0; j < target->n; j++)
        if (target->u.o[j].v == cur) target->u.o[j].v = smp(cur, pv);
    } else {
      jv_set(target, k, smp(NULL, pv));
    }
  }
  return target;
}

jv *sim_strategic_patch(jv *target, const jv *patch) { return smp(target, patch); }
