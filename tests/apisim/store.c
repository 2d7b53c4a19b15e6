/* SPDX-License-Identifier: Apache-2.0 */
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

pthread_mutex_t sim_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t sim_cond;
uint64_t sim_rv;
uint64_t sim_hist_floor;
uint64_t sim_event_seq;

static struct sim_event *ring;
static size_t ring_cap;
static uint64_t ring_first_seq; /* seq of the oldest event still held */

struct sim_obj *sim_obj_new(jv *dom, uint64_t rv)
{
  struct sim_obj *o = sim_xcalloc(1, sizeof *o);
  atomic_init(&o->ref, 1);
  jv *md = jv_obj_ensure(dom, "metadata");
  char rvs[24];
  snprintf(rvs, sizeof rvs, "%llu", (unsigned long long)rv);
  jv_set_str(md, "resourceVersion", rvs);
  jv_del(dom, "kind");
  jv_del(dom, "apiVersion");
  o->dom = dom;
  o->rv = rv;
  struct sim_buf b = {0};
  jv_write(&b, dom);
  o->body = sim_buf_steal(&b, &o->blen);
  o->ns = jv_gets(md, "namespace");
  o->name = jv_gets(md, "name");
  if (!o->ns) o->ns = "";
  if (!o->name) o->name = "";
  o->key = *o->ns ? sim_xasprintf("%s/%s", o->ns, o->name) : sim_xstrdup(o->name);
  return o;
}

struct sim_obj *sim_obj_ref(struct sim_obj *o)
{
  if (o) atomic_fetch_add_explicit(&o->ref, 1, memory_order_relaxed);
  return o;
}

void sim_obj_unref(struct sim_obj *o)
{
  if (!o) return;
  if (atomic_fetch_sub_explicit(&o->ref, 1, memory_order_acq_rel) != 1) return;
  jv_free(o->dom);
  free(o->body);
  free(o->key);
  free(o);
}

/* ---- treap keyed by obj->key ---- */

struct sim_tnode {
  struct sim_obj *obj;
  uint32_t prio;
  struct sim_tnode *l, *r;
};

static uint32_t prio_state = 2463534242u;
static uint32_t next_prio(void)
{
  prio_state ^= prio_state << 13;
  prio_state ^= prio_state >> 17;
  prio_state ^= prio_state << 5;
  return prio_state;
}

static struct sim_tnode *rot_right(struct sim_tnode *t)
{
  struct sim_tnode *l = t->l;
  t->l = l->r;
  l->r = t;
  return l;
}

static struct sim_tnode *rot_left(struct sim_tnode *t)
{
  struct sim_tnode *r = t->r;
  t->r = r->l;
  r->l = t;
  return r;
}

static struct sim_tnode *t_insert(struct sim_tnode *t, struct sim_obj *o, bool *added)
{
  if (!t) {
    t = sim_xcalloc(1, sizeof *t);
    t->obj = o;
    t->prio = next_prio();
    *added = true;
    return t;
  }
  int c = strcmp(o->key, t->obj->key);
  if (c == 0) {
    sim_obj_unref(t->obj);
    t->obj = o;
    return t;
  }
  if (c < 0) {
    t->l = t_insert(t->l, o, added);
    if (t->l->prio > t->prio) t = rot_right(t);
  } else {
    t->r = t_insert(t->r, o, added);
    if (t->r->prio > t->prio) t = rot_left(t);
  }
  return t;
}

static struct sim_tnode *t_remove(struct sim_tnode *t, const char *key, bool *removed)
{
  if (!t) return NULL;
  int c = strcmp(key, t->obj->key);
  if (c < 0) {
    t->l = t_remove(t->l, key, removed);
  } else if (c > 0) {
    t->r = t_remove(t->r, key, removed);
  } else {
    if (!t->l || !t->r) {
      struct sim_tnode *k = t->l ? t->l : t->r;
      sim_obj_unref(t->obj);
      free(t);
      *removed = true;
      return k;
    }
    if (t->l->prio > t->r->prio) {
      t = rot_right(t);
      t->r = t_remove(t->r, key, removed);
    } else {
      t = rot_left(t);
      t->l = t_remove(t->l, key, removed);
    }
  }
  return t;
}

struct sim_obj *sim_coll_get_locked(struct sim_coll *c, const char *key)
{
  struct sim_tnode *t = c->root;
  while (t) {
    int r = strcmp(key, t->obj->key);
    if (!r) return t->obj;
    t = r < 0 ? t->l : t->r;
  }
  return NULL;
}

void sim_coll_put_locked(struct sim_coll *c, struct sim_obj *o)
{
  bool added = false;
  c->root = t_insert(c->root, o, &added);
  if (added) c->count++;
}

void sim_coll_del_locked(struct sim_coll *c, const char *key)
{
  bool removed = false;
  c->root = t_remove(c->root, key, &removed);
  if (removed) c->count--;
}

struct sim_obj *sim_coll_next_locked(struct sim_coll *c, const char *key, bool inclusive)
{
  struct sim_tnode *t = c->root, *best = NULL;
  while (t) {
    int r = key ? strcmp(t->obj->key, key) : 1;
    if (r > 0 || (inclusive && r == 0)) {
      best = t;
      t = t->l;
    } else {
      t = t->r;
    }
  }
  return best ? best->obj : NULL;
}

static void t_free(struct sim_tnode *t)
{
  if (!t) return;
  t_free(t->l);
  t_free(t->r);
  sim_obj_unref(t->obj);
  free(t);
}

void sim_coll_clear_locked(struct sim_coll *c)
{
  t_free(c->root);
  c->root = NULL;
  c->count = 0;
}

/* ---- history ---- */

void sim_store_init(size_t history)
{
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&sim_cond, &ca);
  pthread_condattr_destroy(&ca);
  ring_cap = history ? history : 1;
  ring = sim_xcalloc(ring_cap, sizeof *ring);
}

static void ev_release(struct sim_event *e)
{
  sim_obj_unref(e->obj);
  sim_obj_unref(e->old);
  memset(e, 0, sizeof *e);
}

void sim_emit_locked(enum sim_ev_type t, struct sim_coll *c, struct sim_obj *obj,
                     struct sim_obj *old)
{
  if (sim_event_seq - ring_first_seq == ring_cap) {
    struct sim_event *e = &ring[ring_first_seq % ring_cap];
    if (e->rv > sim_hist_floor) sim_hist_floor = e->rv;
    ev_release(e);
    ring_first_seq++;
  }
  struct sim_event *e = &ring[sim_event_seq % ring_cap];
  e->rv = obj->rv;
  e->type = t;
  e->coll = c;
  e->obj = obj;
  e->old = old;
  e->at_ms = sim_now_ms();
  sim_event_seq++;
  pthread_cond_broadcast(&sim_cond);
}

bool sim_event_at_locked(uint64_t seq, struct sim_event *out)
{
  if (seq < ring_first_seq || seq >= sim_event_seq) return false;
  *out = ring[seq % ring_cap];
  return true;
}

uint64_t sim_event_oldest_seq_locked(void) { return ring_first_seq; }

uint64_t sim_event_seq_after_locked(uint64_t rv)
{
  /* Event RVs increase with seq: binary search. */
  uint64_t lo = ring_first_seq, hi = sim_event_seq;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (ring[mid % ring_cap].rv > rv) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

void sim_compact_locked(void)
{
  while (ring_first_seq < sim_event_seq) {
    ev_release(&ring[ring_first_seq % ring_cap]);
    ring_first_seq++;
  }
  sim_hist_floor = sim_rv;
  pthread_cond_broadcast(&sim_cond);
}

/* ---- snapshots ---- */

struct override {
  const char *key;
  uint64_t seq;
  struct sim_obj *obj; /* state at the snapshot RV, NULL = absent */
};

static int ov_cmp(const void *a, const void *b)
{
  const struct override *x = a, *y = b;
  int r = strcmp(x->key, y->key);
  if (r) return r;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

struct sim_obj **sim_snapshot_locked(struct sim_coll *c, uint64_t rv, const char *ns,
                                     const char *after_key, sim_match_fn match, void *arg,
                                     size_t limit, size_t *n, bool *more, size_t *remaining)
{
  struct override *ov = NULL;
  size_t nov = 0, cov = 0;
  if (rv < sim_rv) {
    /* Undo the events after rv: the first later event of a key tells its
     * state at rv (its "old" side). */
    for (uint64_t s = sim_event_seq_after_locked(rv); s < sim_event_seq; s++) {
      struct sim_event *e = &ring[s % ring_cap];
      if (e->coll != c) continue;
      if (nov == cov) {
        cov = cov ? cov * 2 : 16;
        ov = sim_xrealloc(ov, cov * sizeof *ov);
      }
      ov[nov].key = e->obj->key;
      ov[nov].seq = s;
      ov[nov].obj = e->type == SIM_ADDED ? NULL : e->old;
      nov++;
    }
    if (nov) qsort(ov, nov, sizeof *ov, ov_cmp);
    size_t w = 0;
    for (size_t i = 0; i < nov; i++)
      if (!w || strcmp(ov[w - 1].key, ov[i].key) != 0) ov[w++] = ov[i];
    nov = w;
  }
  size_t prefix_len = 0;
  char *prefix = NULL;
  if (ns && *ns) {
    prefix = sim_xasprintf("%s/", ns);
    prefix_len = strlen(prefix);
  }
  const char *start = after_key;
  bool inclusive = false;
  if (prefix && (!start || strcmp(start, prefix) < 0)) {
    start = prefix;
    inclusive = true;
  }
  struct sim_obj **out = NULL;
  size_t nout = 0, cout = 0, rem = 0;
  bool has_more = false;
  struct sim_obj *t = sim_coll_next_locked(c, start, inclusive);
  size_t oi = 0;
  while (oi < nov && start && (inclusive ? strcmp(ov[oi].key, start) < 0 : strcmp(ov[oi].key, start) <= 0)) oi++;
  for (;;) {
    struct sim_obj *cur;
    const char *key;
    if (t && (oi >= nov || strcmp(t->key, ov[oi].key) < 0)) {
      cur = t;
      key = t->key;
      t = sim_coll_next_locked(c, t->key, false);
    } else if (oi < nov) {
      key = ov[oi].key;
      cur = ov[oi].obj;
      if (t && strcmp(t->key, key) == 0) t = sim_coll_next_locked(c, t->key, false);
      oi++;
    } else {
      break;
    }
    if (prefix && strncmp(key, prefix, prefix_len) != 0) break;
    if (!cur) continue;
    if (has_more) {
      rem++;
      continue;
    }
    if (match && !match(arg, cur)) continue;
    if (limit && nout == limit) {
      has_more = true;
      rem++;
      if (!remaining) break;
      continue;
    }
    if (nout == cout) {
      cout = cout ? cout * 2 : 64;
      out = sim_xrealloc(out, cout * sizeof *out);
    }
    out[nout++] = sim_obj_ref(cur);
  }
  free(prefix);
  free(ov);
  *n = nout;
  if (more) *more = has_more;
  if (remaining) *remaining = rem;
  return out;
}
