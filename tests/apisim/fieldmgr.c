/* SPDX-License-Identifier: Apache-2.0 */
#include "fieldmgr.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "fieldset.h"

#define FM_MAX_DEPTH 512

/* ---- types by field name ---- */

enum nkind { K_LEAF, K_STRUCT, K_MAP, K_ASSOC, K_SET, K_ATOMIC };

static bool in_list(const char *const *l, const char *s)
{
  for (; s && *l; l++)
    if (strcmp(*l, s) == 0) return true;
  return false;
}

/* map[string]... fields: their keys are not struct fields. */
static const char *const map_fields[] = {"labels", "annotations", "data", "binaryData",
                                         "stringData", "nodeSelector", "limits", "requests",
                                         "capacity", "allocatable", "matchLabels", NULL};
/* Objects replaced as a whole (LabelSelector, Service selector). */
static const char *const atomic_objects[] = {"selector", NULL};

struct lkeys {
  const char *field;
  const char *k[2];
};
/* listType=map lists of the built-in types and their listMapKeys; "ports"
 * is containerPort+protocol for container ports, port+protocol for
 * service ports (protocol defaults to TCP). */
static const struct lkeys assoc[] = {
  {"containers", {"name", NULL}}, {"initContainers", {"name", NULL}},
  {"ephemeralContainers", {"name", NULL}}, {"env", {"name", NULL}},
  {"volumes", {"name", NULL}}, {"volumeMounts", {"mountPath", NULL}},
  {"volumeDevices", {"devicePath", NULL}}, {"ports", {NULL, NULL}},
  {"conditions", {"type", NULL}}, {"imagePullSecrets", {"name", NULL}},
  {"ownerReferences", {"uid", NULL}}, {"hostAliases", {"ip", NULL}},
  {"topologySpreadConstraints", {"topologyKey", "whenUnsatisfiable"}},
  {"taints", {"key", "effect"}}, {"podIPs", {"ip", NULL}}, {"hostIPs", {"ip", NULL}},
  {"resourceClaims", {"name", NULL}},
};

static const struct lkeys *assoc_of(const char *field)
{
  for (size_t i = 0; field && i < sizeof assoc / sizeof assoc[0]; i++)
    if (strcmp(assoc[i].field, field) == 0) return &assoc[i];
  return NULL;
}

static enum nkind kind_of(const char *field, enum nkind parent, const jv *v)
{
  if (v->t == J_ARR) {
    if (!field || parent == K_MAP) return K_ATOMIC;
    if (strcmp(field, "finalizers") == 0) return K_SET;
    return assoc_of(field) ? K_ASSOC : K_ATOMIC;
  }
  if (v->t == J_OBJ) {
    if (parent == K_MAP) return K_MAP;
    if (field && in_list(atomic_objects, field)) return K_ATOMIC;
    if (field && in_list(map_fields, field)) return K_MAP;
    return K_STRUCT;
  }
  return K_LEAF;
}

/* The keys of one item of an associative list (ports: by the item). */
static void item_keys(const struct lkeys *lk, const jv *item, const char *k[2])
{
  k[0] = lk->k[0];
  k[1] = lk->k[1];
  if (!k[0]) {
    k[0] = jv_get(item, "containerPort") ? "containerPort" : "port";
    k[1] = "protocol";
  }
}

/* Key value of item (defaults: protocol TCP), NULL when missing. */
static const jv *key_value(const jv *item, const char *key)
{
  static jv tcp = {.t = J_STR, .n = 3, .u.s = (char *)"TCP"};
  const jv *v = jv_get(item, key);
  if (!v && strcmp(key, "protocol") == 0) return &tcp;
  return v;
}

/* "k:{...}" / "v:..." for a list item (malloc'd), NULL with *missing set
 * to the absent key field when the item cannot be keyed. */
static char *item_pe(const char *field, enum nkind k, const jv *item, const char **missing)
{
  struct sim_buf b = {0};
  *missing = NULL;
  if (k == K_SET) {
    sim_buf_puts(&b, "v:");
    jv_write(&b, item);
    return sim_buf_steal(&b, NULL);
  }
  const struct lkeys *lk = assoc_of(field);
  if (item->t != J_OBJ) {
    *missing = "";
    return NULL;
  }
  const char *keys[2];
  item_keys(lk, item, keys);
  if (keys[1] && strcmp(keys[1], keys[0]) < 0) {
    const char *t = keys[0];
    keys[0] = keys[1];
    keys[1] = t;
  }
  sim_buf_puts(&b, "k:{");
  for (int i = 0; i < 2 && keys[i]; i++) {
    const jv *v = key_value(item, keys[i]);
    if (!v) {
      *missing = keys[i];
      sim_buf_free(&b);
      return NULL;
    }
    if (i) sim_buf_putc(&b, ',');
    sim_buf_put_jstr(&b, keys[i], strlen(keys[i]));
    sim_buf_putc(&b, ':');
    jv_write(&b, v);
  }
  sim_buf_putc(&b, '}');
  return sim_buf_steal(&b, NULL);
}

static bool all_keyed(const char *field, const jv *list)
{
  for (size_t i = 0; list && i < list->n; i++) {
    const char *missing;
    char *pe = item_pe(field, K_ASSOC, list->u.a[i], &missing);
    if (!pe) return false;
    free(pe);
  }
  return true;
}

/* ---- paths ---- */

struct path {
  char **pe;
  size_t n, cap;
};

static void push(struct path *p, char *pe)
{
  if (p->n == p->cap) {
    p->cap = p->cap ? p->cap * 2 : 16;
    p->pe = sim_xrealloc(p->pe, p->cap * sizeof *p->pe);
  }
  p->pe[p->n++] = pe;
}

static void push_f(struct path *p, const char *field) { push(p, sim_xasprintf("f:%s", field)); }

static void pop(struct path *p) { free(p->pe[--p->n]); }

/* Fields no manager owns: the server's own (kube-apiserver's strip set) and
 * the reset fields of the endpoint (status of the main resource; all but
 * status and metadata of /status). */
static bool skipped(const struct sim_fm_opts *o, const struct path *p, const char *k)
{
  if (p->n == 0) {
    if (strcmp(k, "apiVersion") == 0 || strcmp(k, "kind") == 0) return true;
    if (o->sub) return strcmp(k, "status") != 0 && strcmp(k, "metadata") != 0;
    return o->ignore_status && strcmp(k, "status") == 0;
  }
  static const char *const meta[] = {"name", "namespace", "creationTimestamp", "selfLink",
                                     "uid", "generation", "managedFields", "resourceVersion",
                                     "clusterName", NULL};
  return p->n == 1 && strcmp(p->pe[0], "f:metadata") == 0 && in_list(meta, k);
}

static void unmember_metadata(struct sim_fset *s)
{
  char *md[] = {(char *)"f:metadata"};
  if (sim_fset_has(s, md, 1)) {
    struct sim_fset *one = sim_fset_new();
    sim_fset_insert(one, md, 1);
    sim_fset_subtract(s, one);
    sim_fset_free(one);
  }
}

/* ---- the intent's field set ---- */

struct walk {
  const struct sim_fm_opts *o;
  struct path p;
  char *err; /* first error */
};

static void fs_walk(struct walk *w, const jv *v, const char *field, enum nkind parent,
                    struct sim_fset *out)
{
  if (w->err) return;
  if (w->p.n > FM_MAX_DEPTH) {
    w->err = sim_xstrdup("object nested too deeply");
    return;
  }
  enum nkind k = kind_of(field, parent, v);
  switch (k) {
  case K_LEAF:
  case K_ATOMIC:
    if (w->p.n) sim_fset_insert(out, w->p.pe, w->p.n);
    return;
  case K_STRUCT:
  case K_MAP:
    if (v->n == 0 && w->p.n) sim_fset_insert(out, w->p.pe, w->p.n);
    for (size_t i = 0; i < v->n; i++) {
      const char *key = v->u.o[i].k;
      const jv *c = v->u.o[i].v;
      if (skipped(w->o, &w->p, key)) continue;
      push_f(&w->p, key);
      if (k == K_MAP || c->t == J_NULL) sim_fset_insert(out, w->p.pe, w->p.n);
      if (c->t != J_NULL) fs_walk(w, c, key, k, out);
      pop(&w->p);
    }
    return;
  case K_ASSOC:
  case K_SET:
    for (size_t i = 0; i < v->n && !w->err; i++) {
      const char *missing;
      char *pe = item_pe(field, k, v->u.a[i], &missing);
      if (!pe) {
        char *ps = sim_fset_path_string(w->p.pe, w->p.n);
        w->err = *missing ? sim_xasprintf("%s: element %zu: associative list with keys has an element that omits key field \"%s\" (and doesn't have default value)", ps, i, missing)
                          : sim_xasprintf("%s: element %zu: associative list with keys may not have non-map elements", ps, i);
        free(ps);
        return;
      }
      push(&w->p, pe);
      sim_fset_insert(out, w->p.pe, w->p.n);
      if (k == K_ASSOC) fs_walk(w, v->u.a[i], NULL, K_ASSOC, out);
      pop(&w->p);
    }
    return;
  }
}

/* ---- comparison (structured-merge-diff's Compare) ---- */

struct cmp {
  struct sim_fset *added, *modified, *removed;
};

static void cmp_walk(struct walk *w, const jv *l, const jv *r, const char *field,
                     enum nkind parent, struct cmp *c);

static const jv *find_item(const char *field, enum nkind k, const jv *list, const char *pe)
{
  for (size_t i = 0; list && i < list->n; i++) {
    const char *missing;
    char *x = item_pe(field, k, list->u.a[i], &missing);
    bool eq = x && strcmp(x, pe) == 0;
    free(x);
    if (eq) return list->u.a[i];
  }
  return NULL;
}

static void cmp_items(struct walk *w, const jv *a, const jv *b, const char *field, enum nkind k,
                      bool a_is_left, struct cmp *c)
{
  for (size_t i = 0; a && i < a->n; i++) {
    const char *missing;
    char *pe = item_pe(field, k, a->u.a[i], &missing);
    if (!pe) continue;
    const jv *other = find_item(field, k, b, pe);
    if (!a_is_left && other) {
      free(pe);
      continue; /* visited from the left */
    }
    push(&w->p, pe);
    const jv *l = a_is_left ? a->u.a[i] : NULL, *r = a_is_left ? other : a->u.a[i];
    if (k == K_SET) {
      if (!l) sim_fset_insert(c->added, w->p.pe, w->p.n);
      else if (!r) sim_fset_insert(c->removed, w->p.pe, w->p.n);
    } else {
      cmp_walk(w, l, r, NULL, K_ASSOC, c);
    }
    pop(&w->p);
  }
}

static void cmp_walk(struct walk *w, const jv *l, const jv *r, const char *field,
                     enum nkind parent, struct cmp *c)
{
  if (w->p.n > FM_MAX_DEPTH) return;
  enum nkind kl = l ? kind_of(field, parent, l) : K_LEAF, kr = r ? kind_of(field, parent, r) : K_LEAF;
  enum nkind k = r ? kr : kl;
  if (l && r && kl != kr) k = K_LEAF;
  if (k == K_ASSOC && !(all_keyed(field, l) && all_keyed(field, r))) k = K_ATOMIC;
  if (k == K_LEAF || k == K_ATOMIC) {
    if (!w->p.n) return;
    if (!l) sim_fset_insert(c->added, w->p.pe, w->p.n);
    else if (!r) sim_fset_insert(c->removed, w->p.pe, w->p.n);
    else if (!jv_equal(l, r)) sim_fset_insert(c->modified, w->p.pe, w->p.n);
    return;
  }
  if (w->p.n) {
    if (!l) sim_fset_insert(c->added, w->p.pe, w->p.n);
    else if (!r) sim_fset_insert(c->removed, w->p.pe, w->p.n);
  }
  if (k == K_ASSOC || k == K_SET) {
    cmp_items(w, l, r, field, k, true, c);
    cmp_items(w, r, l, field, k, false, c);
    return;
  }
  for (int side = 0; side < 2; side++) {
    const jv *a = side ? r : l, *b = side ? l : r;
    for (size_t i = 0; a && i < a->n; i++) {
      const char *key = a->u.o[i].k;
      const jv *other = b ? jv_get(b, key) : NULL;
      if (side && other) continue;
      if (skipped(w->o, &w->p, key)) continue;
      push_f(&w->p, key);
      if (side) cmp_walk(w, NULL, a->u.o[i].v, key, k, c);
      else cmp_walk(w, a->u.o[i].v, other, key, k, c);
      pop(&w->p);
    }
  }
}

static void compare(const struct sim_fm_opts *o, const jv *l, const jv *r, struct cmp *c)
{
  struct walk w = {.o = o};
  c->added = sim_fset_new();
  c->modified = sim_fset_new();
  c->removed = sim_fset_new();
  cmp_walk(&w, l, r, NULL, K_STRUCT, c);
  free(w.p.pe);
  free(w.err);
  unmember_metadata(c->added);
  unmember_metadata(c->removed);
  unmember_metadata(c->modified);
}

static void cmp_free(struct cmp *c)
{
  sim_fset_free(c->added);
  sim_fset_free(c->modified);
  sim_fset_free(c->removed);
}

/* ---- merge of the intent into the live object ---- */

/* A copy without null members (nulls in an intent mean "absent"). */
static jv *copy_no_null(const jv *v)
{
  if (v->t != J_OBJ) return jv_copy(v);
  jv *o = jv_new(J_OBJ);
  for (size_t i = 0; i < v->n; i++)
    if (v->u.o[i].v->t != J_NULL) jv_set(o, v->u.o[i].k, copy_no_null(v->u.o[i].v));
  return o;
}

static jv *merge_walk(const jv *l, const jv *r, const char *field, enum nkind parent, int depth);

static jv *merge_item(const jv *l, const jv *r, enum nkind k, int depth)
{
  if (!r) return jv_copy(l);
  if (!l || k == K_SET) return copy_no_null(r);
  return merge_walk(l, r, NULL, K_ASSOC, depth + 1);
}

/* structured-merge-diff's list merge: the intent's items in its order, live
 * items the intent does not list kept at their place between them. */
static jv *merge_list(const jv *l, const jv *r, const char *field, enum nkind k, int depth)
{
  size_t ln = l->n, rn = r->n;
  char **lpe = sim_xcalloc(ln + 1, sizeof(char *)), **rpe = sim_xcalloc(rn + 1, sizeof(char *));
  const char *missing;
  for (size_t i = 0; i < ln; i++) lpe[i] = item_pe(field, k, l->u.a[i], &missing);
  for (size_t i = 0; i < rn; i++) rpe[i] = item_pe(field, k, r->u.a[i], &missing);
  bool *lin_r = sim_xcalloc(ln + 1, 1), *rmerged = sim_xcalloc(rn + 1, 1);
  ssize_t *r_of_l = sim_xcalloc(ln + 1, sizeof(ssize_t));
  for (size_t i = 0; i < ln; i++) {
    r_of_l[i] = -1;
    for (size_t j = 0; lpe[i] && j < rn; j++)
      if (rpe[j] && strcmp(lpe[i], rpe[j]) == 0) { lin_r[i] = true; r_of_l[i] = (ssize_t)j; break; }
  }
  /* shared items in the intent's order */
  size_t *shared = sim_xcalloc(rn + 1, sizeof(size_t)), nsh = 0, sh = 0;
  for (size_t j = 0; j < rn; j++)
    for (size_t i = 0; i < ln; i++)
      if (r_of_l[i] == (ssize_t)j) { shared[nsh++] = j; break; }
  jv *out = jv_new(J_ARR);
  size_t li = 0, ri = 0;
  while (li < ln || ri < rn) {
    bool have_next = sh < nsh;
    if (li < ln && ri < rn) {
      if (r_of_l[li] == (ssize_t)ri) {
        jv_push(out, merge_item(l->u.a[li], r->u.a[ri], k, depth));
        rmerged[ri] = true;
        li++;
        ri++;
        if (have_next) sh++;
        continue;
      }
      if (lin_r[li] && have_next && (ssize_t)shared[sh] != r_of_l[li]) {
        li++;
        continue;
      }
    }
    if (li < ln) {
      if (!lin_r[li]) {
        jv_push(out, jv_copy(l->u.a[li]));
        li++;
        continue;
      }
      if (rmerged[r_of_l[li]]) {
        li++;
        continue;
      }
    }
    if (ri < rn) {
      const jv *lm = NULL;
      for (size_t i = 0; i < ln; i++)
        if (r_of_l[i] == (ssize_t)ri) { lm = l->u.a[i]; break; }
      jv_push(out, merge_item(lm, r->u.a[ri], k, depth));
      rmerged[ri] = true;
      if (have_next && shared[sh] == ri) sh++;
      ri++;
    }
  }
  for (size_t i = 0; i < ln; i++) free(lpe[i]);
  for (size_t j = 0; j < rn; j++) free(rpe[j]);
  free(lpe);
  free(rpe);
  free(lin_r);
  free(rmerged);
  free(r_of_l);
  free(shared);
  return out;
}

static jv *merge_walk(const jv *l, const jv *r, const char *field, enum nkind parent, int depth)
{
  if (!l) return copy_no_null(r);
  enum nkind kl = kind_of(field, parent, l), kr = kind_of(field, parent, r);
  enum nkind k = kl == kr ? kr : K_LEAF;
  if (k == K_ASSOC && !(all_keyed(field, l) && all_keyed(field, r))) k = K_ATOMIC;
  if (depth > FM_MAX_DEPTH || k == K_LEAF || k == K_ATOMIC) return copy_no_null(r);
  if (k == K_ASSOC || k == K_SET) return merge_list(l, r, field, k, depth);
  jv *out = jv_copy(l);
  for (size_t i = 0; i < r->n; i++) {
    const char *key = r->u.o[i].k;
    const jv *rv = r->u.o[i].v;
    if (rv->t == J_NULL) {
      jv_del(out, key);
      continue;
    }
    jv_set(out, key, merge_walk(jv_get(l, key), rv, key, k, depth + 1));
  }
  return out;
}

/* ---- pruning ---- */

static bool item_matches_key(const jv *item, const jv *keyobj)
{
  if (item->t != J_OBJ) return false;
  for (size_t i = 0; i < keyobj->n; i++) {
    const jv *v = key_value(item, keyobj->u.o[i].k);
    if (!v || !jv_equal(v, keyobj->u.o[i].v)) return false;
  }
  return true;
}

/* Removes the node at path from obj (nothing when absent). */
static void remove_at(jv *obj, char *const *pe, size_t n)
{
  jv *cur = obj;
  for (size_t i = 0; cur && i < n; i++) {
    const char *e = pe[i];
    bool last = i + 1 == n;
    if (e[0] == 'f' && cur->t == J_OBJ) {
      if (last) { jv_del(cur, e + 2); return; }
      cur = jv_get(cur, e + 2);
      continue;
    }
    if ((e[0] == 'k' || e[0] == 'v') && cur->t == J_ARR) {
      char perr[64];
      jv *kv = jv_parse(e + 2, strlen(e + 2), perr, sizeof perr);
      size_t j = 0;
      for (; kv && j < cur->n; j++)
        if (e[0] == 'k' ? kv->t == J_OBJ && item_matches_key(cur->u.a[j], kv) : jv_equal(cur->u.a[j], kv)) break;
      bool found = kv && j < cur->n;
      jv_free(kv);
      if (!found) return;
      if (last) { jv_arr_remove(cur, j); return; }
      cur = cur->u.a[j];
      continue;
    }
    return;
  }
}

struct prune_ctx {
  jv *obj;
  const struct sim_fset *keep;
};

static void prune_one(char *const *pe, size_t n, void *ud)
{
  struct prune_ctx *p = ud;
  if (!sim_fset_has_at_or_under(p->keep, pe, n)) remove_at(p->obj, pe, n);
}

/* ---- managers ---- */

struct mgr {
  char *manager, *operation, *api_version, *time, *sub;
  struct sim_fset *set;
};

struct mgrs {
  struct mgr *m;
  size_t n;
};

static void mgrs_free(struct mgrs *ms)
{
  for (size_t i = 0; i < ms->n; i++) {
    free(ms->m[i].manager);
    free(ms->m[i].operation);
    free(ms->m[i].api_version);
    free(ms->m[i].time);
    free(ms->m[i].sub);
    sim_fset_free(ms->m[i].set);
  }
  free(ms->m);
  ms->m = NULL;
  ms->n = 0;
}

static char *dup_or_null(const char *s) { return s && *s ? sim_xstrdup(s) : NULL; }

static struct mgr *mgr_add(struct mgrs *ms, const char *manager, const char *op, const char *av,
                           const char *time, const char *sub, struct sim_fset *set)
{
  ms->m = sim_xrealloc(ms->m, (ms->n + 1) * sizeof *ms->m);
  struct mgr *m = &ms->m[ms->n++];
  m->manager = sim_xstrdup(manager ? manager : "");
  m->operation = sim_xstrdup(op);
  m->api_version = dup_or_null(av);
  m->time = dup_or_null(time);
  m->sub = dup_or_null(sub);
  m->set = set ? set : sim_fset_new();
  return m;
}

/* Decodes metadata.managedFields; false (and nothing) when malformed. */
static bool mgrs_decode(const jv *mf, struct mgrs *ms)
{
  ms->m = NULL;
  ms->n = 0;
  if (!mf || mf->t == J_NULL) return true;
  if (mf->t != J_ARR) return false;
  for (size_t i = 0; i < mf->n; i++) {
    const jv *e = mf->u.a[i];
    if (e->t != J_OBJ) goto bad;
    const char *op = jv_gets(e, "operation");
    if (!op || (strcmp(op, "Apply") != 0 && strcmp(op, "Update") != 0)) goto bad;
    const jv *f = jv_get(e, "fieldsV1");
    struct sim_fset *set = NULL;
    char *err = NULL;
    if (f && sim_fset_from_v1(f, &set, &err) < 0) {
      free(err);
      goto bad;
    }
    mgr_add(ms, jv_gets(e, "manager"), op, jv_gets(e, "apiVersion"), jv_gets(e, "time"),
            jv_gets(e, "subresource"), set);
  }
  return true;
bad:
  mgrs_free(ms);
  return false;
}

static bool streq_null(const char *a, const char *b)
{
  return strcmp(a ? a : "", b ? b : "") == 0;
}

static struct mgr *mgr_find(struct mgrs *ms, const char *manager, const char *op, const char *av,
                            const char *sub)
{
  for (size_t i = 0; i < ms->n; i++) {
    struct mgr *m = &ms->m[i];
    if (strcmp(m->manager, manager) || strcmp(m->operation, op) || !streq_null(m->sub, sub))
      continue;
    if (strcmp(op, "Update") == 0 && !streq_null(m->api_version, av)) continue;
    return m;
  }
  return NULL;
}

static int mgr_cmp(const void *a, const void *b)
{
  const struct mgr *p = a, *q = b;
  int c = strcmp(p->operation, q->operation);
  if (c) return c;
  if ((c = strcmp(p->time ? p->time : "", q->time ? q->time : ""))) return c;
  if ((c = strcmp(p->manager, q->manager))) return c;
  if ((c = strcmp(p->api_version ? p->api_version : "", q->api_version ? q->api_version : "")))
    return c;
  return strcmp(p->sub ? p->sub : "", q->sub ? q->sub : "");
}

/* Writes ms (empty sets dropped, kube-apiserver's order) into md. */
static void mgrs_store(struct mgrs *ms, jv *md)
{
  qsort(ms->m, ms->n, sizeof *ms->m, mgr_cmp);
  jv *arr = jv_new(J_ARR);
  for (size_t i = 0; i < ms->n; i++) {
    const struct mgr *m = &ms->m[i];
    if (sim_fset_empty(m->set)) continue;
    jv *e = jv_new(J_OBJ);
    jv_set_str(e, "manager", m->manager);
    jv_set_str(e, "operation", m->operation);
    if (m->api_version) jv_set_str(e, "apiVersion", m->api_version);
    if (m->time) jv_set_str(e, "time", m->time);
    jv_set_str(e, "fieldsType", "FieldsV1");
    jv_set(e, "fieldsV1", sim_fset_to_v1(m->set));
    if (m->sub) jv_set_str(e, "subresource", m->sub);
    jv_push(arr, e);
  }
  if (arr->n) jv_set(md, "managedFields", arr);
  else {
    jv_free(arr);
    jv_del(md, "managedFields");
  }
}

static void set_now(struct mgr *m)
{
  char now[32];
  sim_time_rfc3339(now, sizeof now);
  free(m->time);
  m->time = sim_xstrdup(now);
}

/* The object a create compares against: kube-apiserver starts from a new
 * empty object of the kind, whose typed skeleton has metadata (and spec
 * and status for built-in kinds). */
static jv *skeleton(const struct sim_fm_opts *o, const jv *nd)
{
  jv *s = jv_new(J_OBJ);
  jv_set(s, "metadata", jv_new(J_OBJ));
  const char *parts[] = {"spec", "status"};
  for (int i = 0; o->builtin && i < 2; i++) {
    const jv *p = jv_get(nd, parts[i]);
    if (p && p->t == J_OBJ) jv_set(s, parts[i], jv_new(J_OBJ));
  }
  return s;
}

/* ---- Update ---- */

void sim_fm_update(const struct sim_fm_opts *o, const jv *old, jv *nd, const char *manager)
{
  jv *md = jv_obj_ensure(nd, "metadata");
  const jv *given = jv_get(md, "managedFields");
  const jv *oldmf = old ? jv_geta(old, "metadata", "managedFields", (const char *)NULL) : NULL;
  struct mgrs ms;
  const jv *base = oldmf;
  if (given && given->t == J_ARR && given->n > 0 && !(oldmf && jv_equal(given, oldmf)))
    base = given; /* the writer replaced them ([{}] resets) */
  if (!mgrs_decode(base, &ms)) mgrs_decode(NULL, &ms);
  jv *skel = old ? NULL : skeleton(o, nd);
  struct cmp c;
  compare(o, old ? old : skel, nd, &c);
  jv_free(skel);
  struct sim_fset *changed = sim_fset_copy(c.modified);
  sim_fset_union(changed, c.added);
  for (size_t i = 0; i < ms.n; i++) {
    sim_fset_subtract(ms.m[i].set, changed);
    sim_fset_subtract(ms.m[i].set, c.removed);
  }
  if (!sim_fset_empty(changed)) {
    struct mgr *m = mgr_find(&ms, manager ? manager : "", "Update", o->api_version, o->sub);
    if (!m) m = mgr_add(&ms, manager, "Update", o->api_version, NULL, o->sub, NULL);
    sim_fset_union(m->set, changed);
    set_now(m);
  }
  mgrs_store(&ms, md);
  sim_fset_free(changed);
  cmp_free(&c);
  mgrs_free(&ms);
}

/* ---- Apply ---- */

struct conflict {
  char *who;  /* "\"mgr\" using v1" */
  char *path; /* ".spec.replicas" */
};

struct conflicts {
  struct conflict *c;
  size_t n;
  const char *who;
};

static void add_conflict(char *const *pe, size_t n, void *ud)
{
  struct conflicts *cs = ud;
  cs->c = sim_xrealloc(cs->c, (cs->n + 1) * sizeof *cs->c);
  cs->c[cs->n].who = sim_xstrdup(cs->who);
  cs->c[cs->n].path = sim_fset_path_string(pe, n);
  cs->n++;
}

static char *print_manager(const struct mgr *m)
{
  struct sim_buf b = {0};
  sim_buf_put_jstr(&b, m->manager, strlen(m->manager));
  if (m->sub) {
    sim_buf_puts(&b, " with subresource ");
    sim_buf_put_jstr(&b, m->sub, strlen(m->sub));
  }
  if (strcmp(m->operation, "Update") == 0)
    sim_buf_printf(&b, " using %s", m->api_version ? m->api_version : "");
  return sim_buf_steal(&b, NULL);
}

/* kube-apiserver's 409 for apply conflicts (fieldmanager NewConflictError). */
static char *conflict_status(const struct conflicts *cs)
{
  struct sim_buf msg = {0};
  if (cs->n == 1) {
    sim_buf_printf(&msg, "Apply failed with 1 conflict: conflict with %s: %s", cs->c[0].who,
                   cs->c[0].path);
  } else {
    sim_buf_printf(&msg, "Apply failed with %zu conflicts: ", cs->n);
    const char *prev = NULL;
    for (size_t i = 0; i < cs->n; i++) {
      if (!prev || strcmp(prev, cs->c[i].who) != 0) {
        if (prev) sim_buf_putc(&msg, '\n');
        sim_buf_printf(&msg, "conflicts with %s:", cs->c[i].who);
        prev = cs->c[i].who;
      }
      sim_buf_printf(&msg, "\n- %s", cs->c[i].path);
    }
  }
  struct sim_buf b = {0};
  sim_buf_puts(&b, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":");
  sim_buf_put_jstr(&b, msg.p, msg.len);
  sim_buf_puts(&b, ",\"reason\":\"Conflict\",\"details\":{\"causes\":[");
  for (size_t i = 0; i < cs->n; i++) {
    char *m = sim_xasprintf("conflict with %s", cs->c[i].who);
    sim_buf_puts(&b, i ? ",{" : "{");
    sim_buf_puts(&b, "\"reason\":\"FieldManagerConflict\",\"message\":");
    sim_buf_put_jstr(&b, m, strlen(m));
    sim_buf_puts(&b, ",\"field\":");
    sim_buf_put_jstr(&b, cs->c[i].path, strlen(cs->c[i].path));
    sim_buf_putc(&b, '}');
    free(m);
  }
  sim_buf_puts(&b, "]},\"code\":409}");
  sim_buf_free(&msg);
  return sim_buf_steal(&b, NULL);
}

/* By manager, keeping each manager's paths in set order (insertion sort:
 * stable). */
static void sort_conflicts(struct conflicts *cs)
{
  for (size_t i = 1; i < cs->n; i++) {
    struct conflict x = cs->c[i];
    size_t j = i;
    for (; j > 0 && strcmp(cs->c[j - 1].who, x.who) > 0; j--) cs->c[j] = cs->c[j - 1];
    cs->c[j] = x;
  }
}

int sim_fm_apply(const struct sim_fm_opts *o, const jv *live, const jv *config,
                 const char *manager, bool force, jv **out, char **status, int *code,
                 char **err)
{
  *out = NULL;
  *status = NULL;
  *err = NULL;
  *code = 0;
  if (jv_geta(config, "metadata", "managedFields", (const char *)NULL)) {
    *code = 400;
    *err = sim_xstrdup("metadata.managedFields must be nil");
    return -EINVAL;
  }
  struct walk w = {.o = o};
  struct sim_fset *cfg = sim_fset_new();
  fs_walk(&w, config, NULL, K_STRUCT, cfg);
  free(w.p.pe);
  if (w.err) {
    *code = 422;
    *err = w.err;
    sim_fset_free(cfg);
    return -EINVAL;
  }
  unmember_metadata(cfg);
  struct mgrs ms;
  if (!live || !mgrs_decode(jv_geta(live, "metadata", "managedFields", (const char *)NULL), &ms))
    mgrs_decode(NULL, &ms);
  jv *skel = live ? NULL : skeleton(o, config);
  const jv *l = live ? live : skel;
  jv *merged = merge_walk(l, config, NULL, K_STRUCT, 0);
  struct mgr *me = mgr_find(&ms, manager, "Apply", NULL, o->sub);
  bool fresh = !me;
  struct sim_fset *last = me ? me->set : sim_fset_new();
  if (!me) me = mgr_add(&ms, manager, "Apply", o->api_version, NULL, o->sub, NULL);
  else me->set = NULL; /* now `last` */
  sim_fset_free(me->set);
  me->set = cfg;
  free(me->api_version);
  me->api_version = sim_xstrdup(o->api_version);
  size_t self = (size_t)(me - ms.m);
  /* Prune what the applier owned and no longer lists, unless owned. */
  struct sim_fset *keep = sim_fset_new();
  for (size_t i = 0; i < ms.n; i++) sim_fset_union(keep, ms.m[i].set);
  struct sim_fset *gone = sim_fset_copy(last);
  sim_fset_subtract(gone, cfg);
  struct prune_ctx pc = {.obj = merged, .keep = keep};
  sim_fset_each(gone, prune_one, &pc);
  sim_fset_free(gone);
  sim_fset_free(keep);
  sim_fset_free(last);
  struct cmp c;
  compare(o, l, merged, &c);
  struct sim_fset *changed = sim_fset_copy(c.modified);
  sim_fset_union(changed, c.added);
  struct conflicts cs = {0};
  struct sim_fset **lost = sim_xcalloc(ms.n + 1, sizeof *lost);
  for (size_t i = 0; i < ms.n; i++) {
    if (i == self) continue;
    lost[i] = sim_fset_intersect(ms.m[i].set, changed);
    if (sim_fset_empty(lost[i])) continue;
    char *who = print_manager(&ms.m[i]);
    cs.who = who;
    sim_fset_each(lost[i], add_conflict, &cs);
    free(who);
  }
  int rc = 0;
  if (cs.n && !force) {
    sort_conflicts(&cs);
    *status = conflict_status(&cs);
    *code = 409;
    rc = -EBUSY;
    jv_free(merged);
    goto out;
  }
  for (size_t i = 0; i < ms.n; i++) {
    if (i == self) continue;
    sim_fset_subtract(ms.m[i].set, lost[i]);
    sim_fset_subtract(ms.m[i].set, c.removed);
  }
  bool obj_changed = !sim_fset_empty(changed) || !sim_fset_empty(c.removed);
  if (obj_changed || fresh) set_now(&ms.m[self]);
  mgrs_store(&ms, jv_obj_ensure(merged, "metadata"));
  *out = merged;
out:
  for (size_t i = 0; i < ms.n; i++) sim_fset_free(lost[i]);
  free(lost);
  for (size_t i = 0; i < cs.n; i++) {
    free(cs.c[i].who);
    free(cs.c[i].path);
  }
  free(cs.c);
  sim_fset_free(changed);
  cmp_free(&c);
  mgrs_free(&ms);
  jv_free(skel);
  return rc;
}

char *sim_fm_manager_from_ua(const char *ua)
{
  struct sim_buf b = {0};
  size_t n = 0;
  for (const unsigned char *p = (const unsigned char *)(ua ? ua : ""); *p && *p != '/' && n < 128; p++) {
    if (*p < 0x20 || *p == 0x7f) continue;
    sim_buf_putc(&b, (char)*p);
    n++;
  }
  if (!b.p) return sim_xstrdup("");
  return sim_buf_steal(&b, NULL);
}
