/* SPDX-License-Identifier: Apache-2.0 */
/* store: indexed object cache of one informer. See store.h.
 *
 * Layout:
 *   objs[slot]    the stored object of a slot (NULL = free slot); a slot is a
 *                 32-bit number, so index sets hold 4 bytes per member
 *   ohash[slot]   hash of the slot's "namespace/name"; of a free slot, the
 *                 next free slot (the free list costs no array of its own)
 *   map           kc_idmap (idset.h) of slot numbers keyed by ohash: a
 *                 large one grows a few entries per insert and remove
 *   ns, lkey, lkv kc_iddict (idset.h) of slot sets: namespace, label key,
 *                 label key+value; their strings point into the text of
 *                 one current member object (re-pointed when it leaves)
 *   idx[i].d      field index i: value -> slot set, values copied once each
 *
 * Every table uses linear probing with backward-shift deletion (no
 * tombstones), so lookups stay short under churn.
 */
#include "cache/store.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/hash.h"
#include "cache/idset.h"
#include "base/log.h"

#define NONE UINT32_MAX

/* ---- hashing ------------------------------------------------------------ */


static uint64_t hash_bytes(const char *p, size_t n, uint64_t h) {
  h ^= (uint64_t)n * 0x9e3779b97f4a7c15ULL;
  while (n >= 8) {
    uint64_t k;
    memcpy(&k, p, 8);
    h = ((h ^ (k * 0x87c37b91114253d5ULL)) << 31 | (h ^ (k * 0x87c37b91114253d5ULL)) >> 33) *
        0x4cf5ad432745937fULL;
    p += 8;
    n -= 8;
  }
  if (n) {
    uint64_t k = 0;
    memcpy(&k, p, n);
    h = (h ^ (k * 0x87c37b91114253d5ULL)) * 0x4cf5ad432745937fULL;
  }
  return h;
}

static uint32_t hash_pair(const char *a, size_t alen, const char *b, size_t blen) {
  uint64_t h = hash_bytes(a, alen, 0x243f6a8885a308d3ULL);
  h = hash_bytes(b, blen, h ^ 0x13198a2e03707344ULL);
  return (uint32_t)kc_mix64(h);
}

/* ---- the store ---------------------------------------------------------- */

typedef struct fidx {
  char *name;
  char **paths; /* the union of their values is indexed */
  size_t npaths;
  kc_iddict d;
} fidx;

/* Field-index values of some objects, extracted outside the lock. Values
 * of object `o` for index i are items[starts[o*nidx+i] .. starts[o*nidx+i+1]). */
typedef struct fvitem {
  size_t off;
  uint32_t len;
  uint32_t hash;
} fvitem;

typedef struct fvlist {
  kc_buf text; /* the values, each NUL-terminated */
  fvitem *items;
  size_t n, icap;
  size_t *starts;
  size_t nstarts, scap;
} fvlist;

typedef struct undo {
  kc_iddict *d;
  const char *a, *b;
  uint32_t alen, blen, hash;
} undo;

struct kc_store {
  pthread_rwlock_t lock;
  kc_obj **objs;
  uint32_t *ohash;
  uint32_t nslots, capslots;
  uint32_t free_head; /* first free slot below nslots (valid when nfree > 0) */
  uint32_t nfree;
  kc_idmap map;
  uint32_t count;
  size_t bytes;
  kc_iddict ns, lkey, lkv;
  fidx *idx;
  size_t nidx;
  /* Field capture (kbuild.h) of all index paths, group = index number:
   * objects built with it carry their values, read instead of a scan. */
  const char **cap_paths;
  uint32_t *cap_groups;
  kc_capture_spec cap;
  uint64_t cap_tag; /* 0: not capturable (too many paths, ...) */
  /* writer-only scratch */
  fvlist fv;
  undo *undo;
  size_t nundo, capundo;
};

static bool in_obj(const char *p, const kc_obj *o) {
  return p && o && p >= o->json && p <= o->json + o->json_len;
}

static uint32_t obj_hash(const kc_obj *o) {
  return hash_pair(kc_obj_namespace(o).ptr, kc_obj_namespace(o).len, kc_obj_name(o).ptr,
                   kc_obj_name(o).len);
}

typedef struct map_key {
  const kc_store *s;
  kc_str ns, name;
} map_key;

static bool map_same(uint32_t slot, const void *ud) {
  const map_key *k = ud;
  return kc_str_eq(kc_obj_namespace(k->s->objs[slot]), k->ns) &&
         kc_str_eq(kc_obj_name(k->s->objs[slot]), k->name);
}

static uint32_t map_find(const kc_store *s, uint32_t h, kc_str ns, kc_str name) {
  map_key k = {s, ns, name};
  return kc_idmap_find(&s->map, s->ohash, h, map_same, &k);
}

static void map_insert(kc_store *s, uint32_t slot) { kc_idmap_put(&s->map, s->ohash, slot); }

static void map_remove(kc_store *s, uint32_t slot) { kc_idmap_remove(&s->map, s->ohash, slot); }

/* Makes room for `extra` more objects: map capacity and free slots. Called
 * with the write lock held (the arrays move). */
static int reserve(kc_store *s, uint32_t extra) {
  uint64_t want = (uint64_t)s->count + extra;
  if (want > UINT32_MAX / 2) return -ENOMEM;
  if (kc_idmap_reserve(&s->map, s->ohash, (uint32_t)want) < 0) return -ENOMEM;
  uint32_t avail = s->nfree + (s->capslots - s->nslots);
  if (avail < extra) {
    /* 1.5x: on average 1.2x the objects' slots, not 1.4x (8 + 4 bytes each) */
    uint64_t nc = s->capslots ? s->capslots : 16;
    while (nc - s->nslots + s->nfree < extra) nc += nc / 2;
    kc_obj **no = realloc(s->objs, (size_t)nc * sizeof *no);
    if (!no) return -ENOMEM;
    s->objs = no;
    uint32_t *nh = realloc(s->ohash, (size_t)nc * sizeof *nh);
    if (!nh) return -ENOMEM;
    s->ohash = nh;
    s->capslots = (uint32_t)nc;
  }
  return 0;
}

static uint32_t slot_alloc(kc_store *s) {
  if (!s->nfree) return s->nslots++;
  uint32_t id = s->free_head;
  s->free_head = s->ohash[id];
  s->nfree--;
  return id;
}

/* The slot's object is gone (and its map entry, which reads ohash[slot]). */
static void slot_free(kc_store *s, uint32_t id) {
  s->objs[id] = NULL;
  s->ohash[id] = s->free_head;
  s->free_head = id;
  s->nfree++;
}

/* ---- field values ------------------------------------------------------- */

typedef struct fvctx {
  fvlist *fv;
  int rc;
} fvctx;

static int fv_item_room(fvlist *fv) {
  return KC_ARRAY_ROOM(fv->items, fv->icap, fv->n, 16);
}

/* Appends a value already rendered (a captured one). */
static int fv_push_text(fvlist *fv, kc_str v) {
  kc_buf *t = &fv->text;
  if (fv_item_room(fv) < 0 || kc_buf_reserve(t, v.len) < 0) return -ENOMEM;
  char *p = t->p + t->len;
  if (v.len) memcpy(p, v.ptr, v.len);
  p[v.len] = '\0';
  fv->items[fv->n++] = (fvitem){t->len, (uint32_t)v.len, hash_pair(p, v.len, NULL, 0)};
  t->len += v.len + 1;
  return 0;
}

static bool fv_cb(const kc_json_value *v, void *ud) {
  fvctx *c = ud;
  fvlist *fv = c->fv;
  if (v->type == KC_JSON_ABSENT || v->type == KC_JSON_NULL || v->type == KC_JSON_OBJECT ||
      v->type == KC_JSON_ARRAY)
    return true;
  if (fv_item_room(fv) < 0) {
    c->rc = -ENOMEM;
    return false;
  }
  kc_buf *t = &fv->text;
  for (;;) {
    char *p = t->p ? t->p + t->len : NULL;
    int n = kc_json_scalar_text(v, p, t->p ? t->cap - t->len : 0);
    if (n >= 0) {
      fv->items[fv->n++] = (fvitem){t->len, (uint32_t)n, hash_pair(p, (size_t)n, NULL, 0)};
      t->len += (size_t)n + 1;
      return true;
    }
    if (n != -ENOSPC) return true; /* undecodable string: not indexed */
    /* Grows every time round (the text is at most raw.len + 1 bytes). */
    if (kc_buf_reserve(t, t->cap - t->len + v->raw.len + 256) < 0) {
      c->rc = -ENOMEM;
      return false;
    }
  }
}

static int fvitem_cmp(const void *x, const void *y, void *ctx) {
  const fvitem *a = x, *b = y;
  const fvlist *fv = ctx;
  size_t n = a->len < b->len ? a->len : b->len;
  int c = memcmp(fv->text.p + a->off, fv->text.p + b->off, n);
  if (c) return c;
  return a->len < b->len ? -1 : a->len > b->len;
}

static int fv_push_start(fvlist *fv) {
  if (KC_ARRAY_ROOM(fv->starts, fv->scap, fv->nstarts, 16) < 0) return -ENOMEM;
  fv->starts[fv->nstarts++] = fv->n;
  return 0;
}

/* Extracts every field-index value of obj (sorted, unique per index).
 * Returns the object's base in starts[] or a negative errno. Objects are
 * laid out back to back: object k uses starts[base .. base+nidx]. The
 * values an object captured for this store's indexes when it was built are
 * used as they are; other objects (kc_obj_parse without capture, another
 * index set) have their text scanned, or always when `scan` is true. */
static long fv_extract_from(kc_store *s, const kc_obj *obj, bool scan) {
  fvlist *fv = &s->fv;
  if (fv->nstarts > 0) fv->nstarts--; /* the previous object's end is our start */
  long base = (long)fv->nstarts;
  kc_capture_cursor cur;
  bool captured = !scan && kc_obj_capture_open(obj, s->cap_tag, &cur);
  for (size_t i = 0; i < s->nidx; i++) {
    if (fv_push_start(fv) < 0) return -ENOMEM;
    size_t first = fv->n;
    fvctx c = {fv, 0};
    if (captured) {
      for (uint32_t k = kc_capture_next_group(&cur); k > 0 && !c.rc; k--)
        c.rc = fv_push_text(fv, kc_capture_next_value(&cur));
    } else {
      for (size_t p = 0; obj && p < s->idx[i].npaths && !c.rc; p++)
        (void)kc_obj_get_each(obj, s->idx[i].paths[p], fv_cb, &c);
    }
    if (c.rc) return c.rc;
    size_t cnt = fv->n - first;
    if (cnt > 1) {
      qsort_r(fv->items + first, cnt, sizeof *fv->items, fvitem_cmp, fv);
      size_t out = first + 1;
      for (size_t k = first + 1; k < fv->n; k++)
        if (fvitem_cmp(&fv->items[out - 1], &fv->items[k], fv) != 0) fv->items[out++] = fv->items[k];
      fv->n = out;
    }
  }
  if (fv_push_start(fv) < 0) return -ENOMEM;
  return base;
}

static long fv_extract(kc_store *s, const kc_obj *obj) { return fv_extract_from(s, obj, false); }

static void fv_reset(fvlist *fv) {
  kc_buf_reset(&fv->text);
  fv->n = fv->nstarts = 0;
}

/* ---- index maintenance (write lock held) --------------------------------- */

static int undo_push(kc_store *s, kc_iddict *d, const char *a, size_t alen, const char *b,
                     size_t blen, uint32_t h) {
  if (KC_ARRAY_ROOM(s->undo, s->capundo, s->nundo, 32) < 0) return -ENOMEM;
  s->undo[s->nundo++] = (undo){d, a, b, (uint32_t)alen, (uint32_t)blen, h};
  return 0;
}

/* Points an entry's strings at their copy in o, a member. */
static bool point_at(kc_store *s, kc_iddict *d, kc_iddict_ent *e, const kc_obj *o) {
  if (d == &s->ns) {
    e->a = kc_obj_namespace(o).ptr;
    return true;
  }
  uint32_t i;
  if (!kc_obj_label_find(o, (kc_str){e->a, e->alen}, &i)) return false;
  e->a = kc_obj_label_key(o, i).ptr;
  if (d == &s->lkv) e->b = kc_obj_label_value(o, i).ptr;
  return true;
}

static bool points_into(const kc_iddict_ent *e, const kc_obj *o) {
  return !e->owned && (in_obj(e->a, o) || in_obj(e->b, o));
}

/* Re-points an entry's strings away from `gone` to a current member. */
static void repoint(kc_store *s, kc_iddict *d, kc_iddict_ent *e, const kc_obj *gone) {
  kc_iditer it = kc_iditer_start(&e->set);
  uint32_t m;
  if (!points_into(e, gone) || !kc_iditer_next(&it, &m)) return;
  if (!point_at(s, d, e, s->objs[m]))
    kc_error("store", "index entry without member label key=%.*s", (int)e->alen, e->a);
}

/* Re-points an entry that still contains the slot from the old to the new
 * version of that slot's object. */
static void repoint_to(kc_store *s, kc_iddict *d, kc_iddict_ent *e, const kc_obj *prev,
                       const kc_obj *obj) {
  if (e && points_into(e, prev)) (void)point_at(s, d, e, obj);
}

static void index_remove(kc_store *s, kc_iddict *d, const char *a, size_t alen, const char *b,
                         size_t blen, uint32_t h, uint32_t id, const kc_obj *gone) {
  kc_iddict_ent *e = kc_iddict_find(d, a, alen, b, blen, h);
  if (!e || !kc_idset_remove(&e->set, id)) {
    kc_error("store", "index out of sync: missing member slot=%u", id);
    return;
  }
  if (e->set.n == 0) {
    kc_iddict_remove(d, e);
    return;
  }
  repoint(s, d, e, gone);
}

static int index_add(kc_store *s, kc_iddict *d, const char *a, size_t alen, const char *b,
                     size_t blen, uint32_t h, uint32_t id) {
  if (undo_push(s, d, a, alen, b, blen, h) < 0) return -ENOMEM;
  int rc = kc_iddict_add(d, a, alen, b, blen, h, id);
  if (rc < 0) s->nundo--;
  return rc;
}

static void undo_all(kc_store *s, uint32_t id, const kc_obj *obj) {
  while (s->nundo) {
    undo *u = &s->undo[--s->nundo];
    index_remove(s, u->d, u->a, u->alen, u->b, u->blen, u->hash, id, obj);
  }
}

static uint32_t lhash_k(const kc_label *l) { return hash_pair(l->key.ptr, l->key.len, NULL, 0); }
static uint32_t lhash_kv(const kc_label *l) {
  return hash_pair(l->key.ptr, l->key.len, l->value.ptr, l->value.len);
}

static const char *fvtext(const kc_store *s, const fvitem *it) { return s->fv.text.p + it->off; }

/* Adds every index entry of a new object in slot id. */
static int add_all(kc_store *s, uint32_t id, const kc_obj *obj, long fvbase) {
  s->nundo = 0;
  int rc = index_add(s, &s->ns, kc_obj_namespace(obj).ptr, kc_obj_namespace(obj).len, NULL, 0,
                     hash_pair(kc_obj_namespace(obj).ptr, kc_obj_namespace(obj).len, NULL, 0), id);
  for (uint32_t i = 0; rc == 0 && i < obj->nlabels; i++) {
    const kc_label lab = kc_obj_label_at(obj, i), *l = &lab;
    rc = index_add(s, &s->lkey, l->key.ptr, l->key.len, NULL, 0, lhash_k(l), id);
    if (rc == 0)
      rc = index_add(s, &s->lkv, l->key.ptr, l->key.len, l->value.ptr, l->value.len, lhash_kv(l), id);
  }
  for (size_t i = 0; rc == 0 && i < s->nidx; i++) {
    for (size_t k = s->fv.starts[fvbase + (long)i]; rc == 0 && k < s->fv.starts[fvbase + (long)i + 1]; k++) {
      const fvitem *it = &s->fv.items[k];
      rc = index_add(s, &s->idx[i].d, fvtext(s, it), it->len, NULL, 0, it->hash, id);
    }
  }
  if (rc < 0) undo_all(s, id, obj);
  s->nundo = 0;
  return rc;
}

static void remove_all(kc_store *s, uint32_t id, const kc_obj *obj, long fvbase) {
  index_remove(s, &s->ns, kc_obj_namespace(obj).ptr, kc_obj_namespace(obj).len, NULL, 0,
               hash_pair(kc_obj_namespace(obj).ptr, kc_obj_namespace(obj).len, NULL, 0), id, obj);
  for (uint32_t i = 0; i < obj->nlabels; i++) {
    const kc_label lab = kc_obj_label_at(obj, i), *l = &lab;
    index_remove(s, &s->lkey, l->key.ptr, l->key.len, NULL, 0, lhash_k(l), id, obj);
    index_remove(s, &s->lkv, l->key.ptr, l->key.len, l->value.ptr, l->value.len, lhash_kv(l), id,
                 obj);
  }
  for (size_t i = 0; i < s->nidx; i++)
    for (size_t k = s->fv.starts[fvbase + (long)i]; k < s->fv.starts[fvbase + (long)i + 1]; k++) {
      const fvitem *it = &s->fv.items[k];
      index_remove(s, &s->idx[i].d, fvtext(s, it), it->len, NULL, 0, it->hash, id, obj);
    }
}

static int fv_cmp_items(const kc_store *s, const fvitem *a, const fvitem *b) {
  size_t n = a->len < b->len ? a->len : b->len;
  int c = memcmp(fvtext(s, a), fvtext(s, b), n);
  if (c) return c;
  return a->len < b->len ? -1 : a->len > b->len;
}

/* Moves slot `id` from prev to obj (same key), keeping every index exact:
 * additions first (undone on failure), then the slot switch, then
 * removals and re-pointing, which cannot fail. */
static int update_all(kc_store *s, uint32_t id, kc_obj *prev, kc_obj *obj, long nb, long ob) {
  s->nundo = 0;
  int rc = 0;
  /* labels: both arrays are sorted by key */
  uint32_t i = 0, j = 0;
  while (rc == 0 && j < obj->nlabels) {
    const kc_label nlab = kc_obj_label_at(obj, j), *nl = &nlab;
    int c = i < prev->nlabels ? kc_str_cmp(kc_obj_label_key(prev, i), nl->key) : 1;
    if (c < 0) {
      i++;
      continue;
    }
    if (c > 0) {
      rc = index_add(s, &s->lkey, nl->key.ptr, nl->key.len, NULL, 0, lhash_k(nl), id);
      if (rc == 0)
        rc = index_add(s, &s->lkv, nl->key.ptr, nl->key.len, nl->value.ptr, nl->value.len,
                       lhash_kv(nl), id);
    } else {
      if (!kc_str_eq(kc_obj_label_value(prev, i), nl->value))
        rc = index_add(s, &s->lkv, nl->key.ptr, nl->key.len, nl->value.ptr, nl->value.len,
                       lhash_kv(nl), id);
      i++;
    }
    j++;
  }
  for (size_t x = 0; rc == 0 && x < s->nidx; x++) {
    size_t a = s->fv.starts[ob + (long)x], ae = s->fv.starts[ob + (long)x + 1];
    size_t b = s->fv.starts[nb + (long)x], be = s->fv.starts[nb + (long)x + 1];
    while (rc == 0 && b < be) {
      int c = a < ae ? fv_cmp_items(s, &s->fv.items[a], &s->fv.items[b]) : 1;
      if (c < 0) {
        a++;
      } else if (c > 0) {
        const fvitem *it = &s->fv.items[b++];
        rc = index_add(s, &s->idx[x].d, fvtext(s, it), it->len, NULL, 0, it->hash, id);
      } else {
        a++;
        b++;
      }
    }
  }
  if (rc < 0) {
    undo_all(s, id, obj);
    return rc;
  }
  s->nundo = 0;
  s->objs[id] = obj;

  repoint_to(
      s, &s->ns,
      kc_iddict_find(&s->ns, kc_obj_namespace(prev).ptr, kc_obj_namespace(prev).len, NULL, 0,
                     hash_pair(kc_obj_namespace(prev).ptr, kc_obj_namespace(prev).len, NULL, 0)),
      prev, obj);
  i = j = 0;
  while (i < prev->nlabels) {
    const kc_label plab = kc_obj_label_at(prev, i), *pl = &plab;
    int c = j < obj->nlabels ? kc_str_cmp(pl->key, kc_obj_label_key(obj, j)) : -1;
    if (c > 0) {
      j++;
      continue;
    }
    if (c < 0) {
      index_remove(s, &s->lkey, pl->key.ptr, pl->key.len, NULL, 0, lhash_k(pl), id, prev);
      index_remove(s, &s->lkv, pl->key.ptr, pl->key.len, pl->value.ptr, pl->value.len,
                   lhash_kv(pl), id, prev);
    } else {
      repoint_to(s, &s->lkey,
                 kc_iddict_find(&s->lkey, pl->key.ptr, pl->key.len, NULL, 0, lhash_k(pl)), prev,
                 obj);
      if (kc_str_eq(pl->value, kc_obj_label_value(obj, j)))
        repoint_to(s, &s->lkv,
                   kc_iddict_find(&s->lkv, pl->key.ptr, pl->key.len, pl->value.ptr, pl->value.len,
                                  lhash_kv(pl)),
                   prev, obj);
      else
        index_remove(s, &s->lkv, pl->key.ptr, pl->key.len, pl->value.ptr, pl->value.len,
                     lhash_kv(pl), id, prev);
      j++;
    }
    i++;
  }
  for (size_t x = 0; x < s->nidx; x++) {
    size_t a = s->fv.starts[ob + (long)x], ae = s->fv.starts[ob + (long)x + 1];
    size_t b = s->fv.starts[nb + (long)x], be = s->fv.starts[nb + (long)x + 1];
    while (a < ae) {
      int c = b < be ? fv_cmp_items(s, &s->fv.items[a], &s->fv.items[b]) : -1;
      if (c > 0) {
        b++;
      } else if (c < 0) {
        const fvitem *it = &s->fv.items[a++];
        index_remove(s, &s->idx[x].d, fvtext(s, it), it->len, NULL, 0, it->hash, id, prev);
      } else {
        a++;
        b++;
      }
    }
  }
  return 0;
}

/* Inserts a new key. Lock held; capacity reserved by the caller. */
static int insert_new(kc_store *s, kc_obj *obj, uint32_t h, long fvbase) {
  uint32_t id = slot_alloc(s);
  s->objs[id] = obj;
  s->ohash[id] = h;
  int rc = add_all(s, id, obj, fvbase);
  if (rc < 0) {
    slot_free(s, id);
    return rc;
  }
  map_insert(s, id);
  s->count++;
  s->bytes += kc_obj_mem_size(obj);
  return 0;
}

/* ---- public API --------------------------------------------------------- */

void kc_obj_vec_clear(kc_obj_vec *vec) {
  for (size_t i = 0; i < vec->n; i++) kc_obj_unref(vec->v[i]);
  vec->n = 0;
}

void kc_obj_vec_release(kc_obj_vec *vec) {
  kc_obj_vec_clear(vec);
  free(vec->v);
  vec->v = NULL;
  vec->cap = 0;
}

static int vec_reserve(kc_obj_vec *vec, size_t extra) {
  return KC_ARRAY_RESERVE(vec->v, vec->cap, vec->n + extra, 16);
}

kc_store *kc_store_new(const kc_store_index_spec *specs, size_t nidx) {
  kc_store *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  /* Writer preference: many busy readers must not starve the loop thread
   * (glibc's default prefers readers). */
  pthread_rwlockattr_t attr;
  if (pthread_rwlockattr_init(&attr) != 0) {
    free(s);
    return NULL;
  }
  pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  int lrc = pthread_rwlock_init(&s->lock, &attr);
  pthread_rwlockattr_destroy(&attr);
  if (lrc != 0) {
    free(s);
    return NULL;
  }
  if (nidx) {
    s->idx = calloc(nidx, sizeof *s->idx);
    if (!s->idx) goto fail;
  }
  for (size_t i = 0; i < nidx; i++) {
    const char *const *paths = specs[i].npaths ? specs[i].paths : &specs[i].path;
    size_t np = specs[i].npaths ? specs[i].npaths : 1;
    if (!specs[i].name || !*specs[i].name || !paths || np > KC_STORE_MAX_INDEX_PATHS) goto fail;
    for (size_t k = 0; k < i; k++)
      if (strcmp(specs[k].name, specs[i].name) == 0) goto fail;
    s->idx[i].d.copy_a = true; /* values are copied once each */
    s->nidx = i + 1;
    s->idx[i].name = strdup(specs[i].name);
    s->idx[i].paths = calloc(np, sizeof *s->idx[i].paths);
    if (!s->idx[i].name || !s->idx[i].paths) goto fail;
    for (size_t p = 0; p < np; p++) {
      if (!paths[p]) goto fail;
      s->idx[i].npaths = p + 1;
      if (!(s->idx[i].paths[p] = strdup(paths[p]))) goto fail;
    }
  }
  /* Validate the paths once (the lookups' grammar, jsonpath.h). */
  if (nidx) {
    for (size_t i = 0; i < nidx; i++)
      for (size_t p = 0; p < s->idx[i].npaths; p++) {
        const char *why = kc_path_problem(s->idx[i].paths[p], true);
        if (why) {
          kc_error("store", "invalid index path index=%s path=%s: %s", s->idx[i].name,
                   s->idx[i].paths[p], why);
          goto fail;
        }
      }
    fv_reset(&s->fv);
    size_t ncap = 0;
    for (size_t i = 0; i < nidx; i++) ncap += s->idx[i].npaths;
    if (ncap <= KC_CAPTURE_MAX_PATHS) {
      s->cap_paths = calloc(ncap, sizeof *s->cap_paths);
      s->cap_groups = calloc(ncap, sizeof *s->cap_groups);
      if (!s->cap_paths || !s->cap_groups) goto fail;
      size_t k = 0;
      for (size_t i = 0; i < nidx; i++)
        for (size_t p = 0; p < s->idx[i].npaths; p++, k++) {
          s->cap_paths[k] = s->idx[i].paths[p];
          s->cap_groups[k] = (uint32_t)i;
        }
      s->cap = (kc_capture_spec){s->cap_paths, s->cap_groups, ncap};
      s->cap_tag = kc_capture_tag(&s->cap);
    }
  }
  return s;
fail:
  kc_store_free(s);
  return NULL;
}

void kc_store_free(kc_store *s) {
  if (!s) return;
  for (uint32_t i = 0; i < s->nslots; i++) kc_obj_unref(s->objs ? s->objs[i] : NULL);
  free(s->objs);
  free(s->ohash);
  kc_idmap_free(&s->map);
  kc_iddict_free(&s->ns);
  kc_iddict_free(&s->lkey);
  kc_iddict_free(&s->lkv);
  for (size_t i = 0; i < s->nidx; i++) {
    free(s->idx[i].name);
    for (size_t p = 0; p < s->idx[i].npaths; p++) free(s->idx[i].paths[p]);
    free(s->idx[i].paths);
    kc_iddict_free(&s->idx[i].d);
  }
  free(s->idx);
  free(s->cap_paths);
  free(s->cap_groups);
  kc_buf_free(&s->fv.text);
  free(s->fv.items);
  free(s->fv.starts);
  free(s->undo);
  pthread_rwlock_destroy(&s->lock);
  free(s);
}

int kc_store_upsert(kc_store *s, kc_obj *obj, kc_obj **old) {
  if (old) *old = NULL;
  if (!obj || kc_obj_name(obj).len == 0) return -EINVAL;
  uint32_t h = obj_hash(obj);
  /* The writer is the only mutator, so it may read its own maps unlocked. */
  uint32_t slot = map_find(s, h, kc_obj_namespace(obj), kc_obj_name(obj));
  kc_obj *prev = slot == NONE ? NULL : s->objs[slot];
  fv_reset(&s->fv);
  long nb = 0, ob = 0;
  if (s->nidx) {
    nb = fv_extract(s, obj);
    if (nb < 0) return (int)nb;
    if (prev) {
      ob = fv_extract(s, prev);
      if (ob < 0) return (int)ob;
    }
  }
  kc_obj_ref(obj);
  pthread_rwlock_wrlock(&s->lock);
  int rc;
  if (prev) {
    rc = update_all(s, slot, prev, obj, nb, ob);
    if (rc == 0) s->bytes = s->bytes - kc_obj_mem_size(prev) + kc_obj_mem_size(obj);
  } else {
    rc = reserve(s, 1);
    if (rc == 0) rc = insert_new(s, obj, h, nb);
  }
  pthread_rwlock_unlock(&s->lock);
  if (rc < 0) {
    kc_obj_unref(obj);
    return rc;
  }
  if (old) *old = prev;
  else kc_obj_unref(prev);
  return 0;
}

/* Removes slot (lock held); fvbase holds the object's field values. */
static kc_obj *remove_slot(kc_store *s, uint32_t slot, long fvbase) {
  kc_obj *prev = s->objs[slot];
  remove_all(s, slot, prev, fvbase);
  map_remove(s, slot);
  slot_free(s, slot);
  s->count--;
  s->bytes -= kc_obj_mem_size(prev);
  return prev;
}

int kc_store_delete(kc_store *s, kc_str ns, kc_str name, kc_obj **old) {
  if (old) *old = NULL;
  uint32_t slot = map_find(s, hash_pair(ns.ptr, ns.len, name.ptr, name.len), ns, name);
  if (slot == NONE) return -ENOENT;
  fv_reset(&s->fv);
  long ob = 0;
  if (s->nidx) {
    ob = fv_extract(s, s->objs[slot]);
    if (ob < 0) return (int)ob;
  }
  pthread_rwlock_wrlock(&s->lock);
  kc_obj *prev = remove_slot(s, slot, ob);
  pthread_rwlock_unlock(&s->lock);
  if (old) *old = prev;
  else kc_obj_unref(prev);
  return 0;
}

typedef struct rplan {
  kc_obj *obj;
  uint32_t h;
  uint32_t slot; /* existing slot at planning time, NONE = new key */
  long nb, ob;   /* field values of obj / of the stored object */
  enum kc_store_event ev;
} rplan;

typedef struct rchange {
  enum kc_store_event ev;
  kc_obj *old, *new_;
} rchange;

/* One kc_store_replace call: the plan of every listed object, the stored
 * objects the list did not mention, and the changes applied, in order. */
typedef struct replace_job {
  kc_obj *const *objs;
  size_t n;
  uint8_t *seen; /* per slot: mentioned by the list */
  rplan *plan;   /* per listed object */
  uint32_t nadd;
  uint32_t *dels; /* slots to delete, with their field values in delfv */
  long *delfv;
  uint32_t ndel;
  rchange *ch;
  size_t nch;
} replace_job;

/* Phase 1, unlocked (the writer reads its own state): classify, and scan
 * the JSON of changed objects for field-index values. */
static int replace_classify(kc_store *s, replace_job *j) {
  for (size_t i = 0; i < j->n; i++) {
    kc_obj *o = j->objs[i];
    if (!o || kc_obj_name(o).len == 0) return -EINVAL;
    rplan *p = &j->plan[i];
    p->obj = o;
    p->h = obj_hash(o);
    p->slot = map_find(s, p->h, kc_obj_namespace(o), kc_obj_name(o));
    p->nb = p->ob = -1;
    if (p->slot == NONE) {
      p->ev = KC_STORE_ADDED;
      j->nadd++;
    } else if (j->seen[p->slot]) {
      p->ev = KC_STORE_MODIFIED; /* duplicate in the list: resolved when applied */
      p->slot = NONE;
    } else {
      j->seen[p->slot] = 1;
      kc_obj *cur = s->objs[p->slot];
      bool same = kc_str_eq(kc_obj_uid(cur), kc_obj_uid(o)) &&
                  kc_str_eq(kc_obj_resource_version(cur), kc_obj_resource_version(o)) &&
                  kc_obj_resource_version(cur).len > 0;
      p->ev = same ? KC_STORE_UNCHANGED : KC_STORE_MODIFIED;
    }
    if (s->nidx && p->ev != KC_STORE_UNCHANGED && p->slot != NONE) {
      if ((p->nb = fv_extract(s, o)) < 0 || (p->ob = fv_extract(s, s->objs[p->slot])) < 0)
        return -ENOMEM;
    } else if (s->nidx && p->ev == KC_STORE_ADDED) {
      if ((p->nb = fv_extract(s, o)) < 0) return -ENOMEM;
    }
  }
  return 0;
}

/* Phase 1, deletions: every stored object the list did not mention, with
 * its field-index values. */
static int replace_find_deletions(kc_store *s, replace_job *j) {
  uint32_t ndel = 0;
  for (uint32_t slot = 0; slot < s->nslots; slot++)
    if (s->objs[slot] && !j->seen[slot]) ndel++;
  if (!ndel) return 0;
  j->dels = malloc(ndel * sizeof *j->dels);
  j->delfv = malloc(ndel * sizeof *j->delfv);
  if (!j->dels || !j->delfv) return -ENOMEM;
  for (uint32_t slot = 0; slot < s->nslots; slot++) {
    if (!s->objs[slot] || j->seen[slot]) continue;
    j->dels[j->ndel] = slot;
    j->delfv[j->ndel] = 0;
    if (s->nidx && (j->delfv[j->ndel] = fv_extract(s, s->objs[slot])) < 0) return -ENOMEM;
    j->ndel++;
  }
  return 0;
}

/* Phase 2, one write lock: apply. Each object is applied atomically; on
 * -ENOMEM we stop and report what was applied. Caller holds the lock. */
static int replace_apply_locked(kc_store *s, replace_job *j) {
  int rc = reserve(s, j->nadd);
  for (size_t i = 0; rc == 0 && i < j->n; i++) {
    rplan *p = &j->plan[i];
    if (p->ev == KC_STORE_UNCHANGED) {
      j->ch[j->nch++] = (rchange){KC_STORE_UNCHANGED, s->objs[p->slot], s->objs[p->slot]};
      continue;
    }
    uint32_t slot = p->slot;
    long nb = p->nb, ob = p->ob;
    if (slot == NONE) {
      /* new key, or a key seen earlier in this list */
      slot = map_find(s, p->h, kc_obj_namespace(p->obj), kc_obj_name(p->obj));
      if (s->nidx && (nb < 0 || slot != NONE)) {
        /* rare (duplicate keys): extract under the lock */
        if ((nb = fv_extract(s, p->obj)) < 0 ||
            (slot != NONE && (ob = fv_extract(s, s->objs[slot])) < 0)) {
          rc = -ENOMEM;
          break;
        }
      }
    }
    kc_obj_ref(p->obj);
    if (slot == NONE) {
      if (reserve(s, 1) < 0 || (rc = insert_new(s, p->obj, p->h, nb)) < 0) {
        rc = -ENOMEM;
        kc_obj_unref(p->obj);
        break;
      }
      j->ch[j->nch++] = (rchange){KC_STORE_ADDED, NULL, p->obj};
    } else {
      kc_obj *prev = s->objs[slot];
      if ((rc = update_all(s, slot, prev, p->obj, nb, ob)) < 0) {
        kc_obj_unref(p->obj);
        break;
      }
      s->bytes = s->bytes - kc_obj_mem_size(prev) + kc_obj_mem_size(p->obj);
      j->ch[j->nch++] = (rchange){KC_STORE_MODIFIED, prev, p->obj};
    }
  }
  for (uint32_t k = 0; rc == 0 && k < j->ndel; k++) {
    kc_obj *prev = remove_slot(s, j->dels[k], j->delfv[k]);
    j->ch[j->nch++] = (rchange){KC_STORE_DELETED, prev, NULL};
  }
  return rc;
}

/* Phase 3: notify with the store already updated, then drop the old
 * versions' references that the store gave up. */
static void replace_notify(const replace_job *j, kc_store_change_cb cb, void *ud) {
  for (size_t k = 0; k < j->nch; k++) {
    const rchange *c = &j->ch[k];
    if (cb) cb(ud, c->ev, c->old, c->new_);
    if (c->ev == KC_STORE_MODIFIED || c->ev == KC_STORE_DELETED) kc_obj_unref(c->old);
  }
}

/* Do not keep a relist-sized scratch around. */
static void fv_trim(kc_store *s) {
  if (s->fv.text.cap > (1u << 20) || s->fv.icap > (1u << 16) || s->fv.scap > (1u << 16)) {
    kc_buf_free(&s->fv.text);
    free(s->fv.items);
    free(s->fv.starts);
    memset(&s->fv, 0, sizeof s->fv);
  }
}

int kc_store_replace(kc_store *s, kc_obj *const *objs, size_t n, kc_store_change_cb cb,
                     void *ud) {
  replace_job j = {.objs = objs, .n = n};
  int rc = 0;
  j.seen = calloc(s->nslots ? s->nslots : 1, 1);
  j.plan = calloc(n ? n : 1, sizeof *j.plan);
  j.ch = calloc(n + s->count + 1, sizeof *j.ch);
  if (!j.seen || !j.plan || !j.ch) {
    rc = -ENOMEM;
    goto out;
  }
  fv_reset(&s->fv);
  if ((rc = replace_classify(s, &j)) < 0 || (rc = replace_find_deletions(s, &j)) < 0) goto out;
  pthread_rwlock_wrlock(&s->lock);
  rc = replace_apply_locked(s, &j);
  pthread_rwlock_unlock(&s->lock);
  replace_notify(&j, cb, ud);
out:
  fv_trim(s);
  free(j.dels);
  free(j.delfv);
  free(j.seen);
  free(j.plan);
  free(j.ch);
  return rc;
}

kc_obj *kc_store_get(kc_store *s, kc_str ns, kc_str name) {
  uint32_t h = hash_pair(ns.ptr, ns.len, name.ptr, name.len);
  pthread_rwlock_rdlock(&s->lock);
  uint32_t slot = map_find(s, h, ns, name);
  kc_obj *o = slot == NONE ? NULL : kc_obj_ref(s->objs[slot]);
  pthread_rwlock_unlock(&s->lock);
  return o;
}

/* The candidate set a list iterates: all slots, one set, or the union of
 * several disjoint sets (an `in` requirement: one value per key). */
typedef struct source {
  enum { SRC_ALL, SRC_SETS, SRC_EMPTY } kind;
  size_t size;
  const kc_idset *sets[16];
  size_t nsets;
  bool is_ns;
} source;

static void pick(source *best, const source *cand) {
  if (cand->kind == SRC_EMPTY || best->kind == SRC_ALL || cand->size < best->size) *best = *cand;
}

int kc_store_list(kc_store *s, kc_str ns, const kc_label_selector *sel, kc_obj_vec *out) {
  pthread_rwlock_rdlock(&s->lock);
  source best = {.kind = SRC_ALL, .size = s->count};
  if (ns.ptr) {
    kc_iddict_ent *e =
        kc_iddict_find(&s->ns, ns.ptr, ns.len, NULL, 0, hash_pair(ns.ptr, ns.len, NULL, 0));
    source c = {.kind = e ? SRC_SETS : SRC_EMPTY, .size = e ? e->set.n : 0, .nsets = 1,
                .is_ns = true};
    c.sets[0] = e ? &e->set : NULL;
    pick(&best, &c);
  }
  for (uint32_t r = 0; sel && r < sel->nreqs && best.kind != SRC_EMPTY; r++) {
    const kc_label_req *q = &sel->reqs[r];
    source c = {.kind = SRC_SETS};
    if (q->op == KC_LABEL_EQ || (q->op == KC_LABEL_IN && q->nvalues <= 16)) {
      for (uint32_t v = 0; v < q->nvalues; v++) {
        kc_iddict_ent *e =
            kc_iddict_find(&s->lkv, q->key.ptr, q->key.len, q->values[v].ptr, q->values[v].len,
                           hash_pair(q->key.ptr, q->key.len, q->values[v].ptr, q->values[v].len));
        if (!e) continue;
        c.sets[c.nsets++] = &e->set;
        c.size += e->set.n;
      }
    } else if (q->op == KC_LABEL_EXISTS || q->op == KC_LABEL_GT || q->op == KC_LABEL_LT ||
               q->op == KC_LABEL_IN) {
      kc_iddict_ent *e = kc_iddict_find(&s->lkey, q->key.ptr, q->key.len, NULL, 0,
                                        hash_pair(q->key.ptr, q->key.len, NULL, 0));
      if (e) {
        c.sets[c.nsets++] = &e->set;
        c.size = e->set.n;
      }
    } else {
      continue; /* !=, notin, !key also match objects without the key */
    }
    if (c.nsets == 0) c.kind = SRC_EMPTY;
    pick(&best, &c);
  }
  int count = 0;
  if (best.kind != SRC_EMPTY) {
    if (vec_reserve(out, best.size) < 0) {
      pthread_rwlock_unlock(&s->lock);
      return -ENOMEM;
    }
    bool check_ns = ns.ptr && !best.is_ns;
    if (best.kind == SRC_ALL) {
      for (uint32_t slot = 0; slot < s->nslots; slot++) {
        kc_obj *o = s->objs[slot];
        if (!o) continue;
        if (check_ns && !kc_str_eq(kc_obj_namespace(o), ns)) continue;
        if (!kc_label_selector_matches_obj(sel, o)) continue;
        out->v[out->n++] = kc_obj_ref(o);
        count++;
      }
    } else {
      for (size_t k = 0; k < best.nsets; k++) {
        kc_iditer it = kc_iditer_start(best.sets[k]);
        uint32_t id;
        while (kc_iditer_next(&it, &id)) {
          kc_obj *o = s->objs[id];
          if (check_ns && !kc_str_eq(kc_obj_namespace(o), ns)) continue;
          if (!kc_label_selector_matches_obj(sel, o)) continue;
          out->v[out->n++] = kc_obj_ref(o);
          count++;
        }
      }
    }
  }
  pthread_rwlock_unlock(&s->lock);
  return count;
}

const kc_capture_spec *kc_store_capture(const kc_store *s) {
  return s->cap_tag ? &s->cap : NULL;
}

int kc_store_by_index(kc_store *s, const char *index, kc_str value, kc_obj_vec *out) {
  size_t i = 0;
  while (i < s->nidx && strcmp(s->idx[i].name, index) != 0) i++;
  if (i == s->nidx) return -ENOENT;
  uint32_t h = hash_pair(value.ptr, value.len, NULL, 0);
  pthread_rwlock_rdlock(&s->lock);
  kc_iddict_ent *e = kc_iddict_find(&s->idx[i].d, value.ptr, value.len, NULL, 0, h);
  int count = 0;
  if (e) {
    if (vec_reserve(out, e->set.n) < 0) {
      pthread_rwlock_unlock(&s->lock);
      return -ENOMEM;
    }
    kc_iditer it = kc_iditer_start(&e->set);
    uint32_t id;
    while (kc_iditer_next(&it, &id)) {
      out->v[out->n++] = kc_obj_ref(s->objs[id]);
      count++;
    }
  }
  pthread_rwlock_unlock(&s->lock);
  return count;
}

size_t kc_store_count(kc_store *s) {
  pthread_rwlock_rdlock(&s->lock);
  size_t n = s->count;
  pthread_rwlock_unlock(&s->lock);
  return n;
}

size_t kc_store_bytes(kc_store *s) {
  pthread_rwlock_rdlock(&s->lock);
  size_t n = s->bytes;
  pthread_rwlock_unlock(&s->lock);
  return n;
}

size_t kc_store_index_bytes(kc_store *s) {
  pthread_rwlock_rdlock(&s->lock);
  size_t b = (size_t)s->capslots * (sizeof(kc_obj *) + sizeof(uint32_t)) +
             kc_idmap_bytes(&s->map) + kc_iddict_bytes(&s->ns) +
             kc_iddict_bytes(&s->lkey) + kc_iddict_bytes(&s->lkv);
  for (size_t i = 0; i < s->nidx; i++) b += kc_iddict_bytes(&s->idx[i].d) + sizeof(fidx);
  pthread_rwlock_unlock(&s->lock);
  return b + sizeof *s;
}

/* ---- verification (tests) ------------------------------------------------ */

#define VFAIL(...)                          \
  do {                                      \
    if (cap) snprintf(msg, cap, __VA_ARGS__); \
    return -EINVAL;                         \
  } while (0)

static int verify_entry_strings(const kc_store *s, const kc_iddict *d, char *msg, size_t cap) {
  uint32_t pos = 0;
  for (const kc_iddict_ent *e; (e = kc_iddict_next(d, &pos));) {
    if (e->owned) continue;
    bool ok = e->a == NULL && e->alen == 0;
    kc_iditer it = kc_iditer_start(&e->set);
    uint32_t id;
    while (!ok && kc_iditer_next(&it, &id)) {
      const kc_obj *o = s->objs[id];
      if (!o) VFAIL("set member %u is a free slot", id);
      ok = in_obj(e->a, o) && (d != &s->lkv || e->blen == 0 || in_obj(e->b, o));
    }
    if (!ok) VFAIL("entry '%.*s' points outside its members", (int)e->alen, e->a ? e->a : "");
  }
  return 0;
}

int kc_store_verify(kc_store *s, char *msg, size_t cap) {
  size_t nl = 0, nobj = 0, nfv = 0;
  for (uint32_t id = 0; id < s->nslots; id++) {
    kc_obj *o = s->objs[id];
    if (!o) continue;
    nobj++;
    if (map_find(s, obj_hash(o), kc_obj_namespace(o), kc_obj_name(o)) != id)
      VFAIL("map misses slot %u", id);
    kc_iddict_ent *e =
        kc_iddict_find(&s->ns, kc_obj_namespace(o).ptr, kc_obj_namespace(o).len, NULL, 0,
                       hash_pair(kc_obj_namespace(o).ptr, kc_obj_namespace(o).len, NULL, 0));
    if (!e || !kc_idset_has(&e->set, id)) VFAIL("namespace index misses slot %u", id);
    for (uint32_t i = 0; i < o->nlabels; i++) {
      const kc_label lab = kc_obj_label_at(o, i), *l = &lab;
      e = kc_iddict_find(&s->lkey, l->key.ptr, l->key.len, NULL, 0, lhash_k(l));
      if (!e || !kc_idset_has(&e->set, id)) VFAIL("label key index misses slot %u", id);
      e = kc_iddict_find(&s->lkv, l->key.ptr, l->key.len, l->value.ptr, l->value.len, lhash_kv(l));
      if (!e || !kc_idset_has(&e->set, id)) VFAIL("label index misses slot %u", id);
      nl++;
    }
    if (s->nidx) {
      fv_reset(&s->fv);
      long b = fv_extract(s, o);
      if (b < 0) VFAIL("out of memory");
      kc_capture_cursor cur;
      if (kc_obj_capture_open(o, s->cap_tag, &cur)) {
        /* Captured values must be what a scan of the text finds. */
        long sb = fv_extract_from(s, o, true);
        if (sb < 0) VFAIL("out of memory");
        for (size_t x = 0; x < s->nidx; x++) {
          size_t a = s->fv.starts[b + (long)x], ae = s->fv.starts[b + (long)x + 1];
          size_t c = s->fv.starts[sb + (long)x], ce = s->fv.starts[sb + (long)x + 1];
          bool same = ae - a == ce - c;
          for (; same && a < ae; a++, c++)
            same = s->fv.items[a].len == s->fv.items[c].len &&
                   memcmp(fvtext(s, &s->fv.items[a]), fvtext(s, &s->fv.items[c]),
                          s->fv.items[a].len) == 0;
          if (!same) VFAIL("captured values of index %s differ from the text's (slot %u)",
                           s->idx[x].name, id);
        }
      }
      for (size_t x = 0; x < s->nidx; x++)
        for (size_t k = s->fv.starts[b + (long)x]; k < s->fv.starts[b + (long)x + 1]; k++) {
          const fvitem *it = &s->fv.items[k];
          e = kc_iddict_find(&s->idx[x].d, fvtext(s, it), it->len, NULL, 0, it->hash);
          if (!e || !kc_idset_has(&e->set, id))
            VFAIL("field index %s misses slot %u", s->idx[x].name, id);
          nfv++;
        }
    }
  }
  if (nobj != s->count) VFAIL("count %u but %zu objects", s->count, nobj);
  if (s->map.n != nobj) VFAIL("map holds %u entries for %zu objects", s->map.n, nobj);
  /* Same totals means no stale members anywhere. */
  if (kc_iddict_members(&s->ns) != nobj) VFAIL("namespace index has stale members");
  if (kc_iddict_members(&s->lkey) != nl || kc_iddict_members(&s->lkv) != nl)
    VFAIL("label index has stale members");
  size_t tf = 0;
  for (size_t x = 0; x < s->nidx; x++) tf += kc_iddict_members(&s->idx[x].d);
  if (tf != nfv) VFAIL("field index has stale members (%zu vs %zu)", tf, nfv);
  int rc = verify_entry_strings(s, &s->ns, msg, cap);
  if (!rc) rc = verify_entry_strings(s, &s->lkey, msg, cap);
  if (!rc) rc = verify_entry_strings(s, &s->lkv, msg, cap);
  return rc;
}
